package closedtest

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/allneighbors"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/distance"
	"github.com/cuvs-go/cuvs/safe/hnsw"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
	"github.com/cuvs-go/cuvs/safe/kmeans"
	"github.com/cuvs-go/cuvs/safe/pca"
	"github.com/cuvs-go/cuvs/safe/selectk"
)

func TestMain(m *testing.M) { safetest.Main(m) }

func second[T any](_ T, err error) error { return err }

func second2[T, U any](_ T, _ U, err error) error { return err }

// A call given a closed Resources refuses with safe.ErrClosed, and its
// error names the operation the caller called ("cagra.Build: res: ..."),
// not a step inside it ("safe.Resources.DeviceID") (issue 46).
func TestClosedResourcesNameTheOperation(t *testing.T) {
	safetest.Check(t)
	live := safetest.Resources(t)
	const n, dim = 64, 4
	data := safetest.Random(1, n, dim)
	host, err := dlpack.NewHostMatrix(data, n, dim)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := safe.DeviceMatrixFrom(live, data, n, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, dev)
	bf, err := bruteforce.Build(live, dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bf)
	fp, err := ivfflat.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	fp.NLists = 4
	qp, err := ivfpq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	qp.NLists, qp.PQDim = 4, 2
	sp, err := ivfsq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	sp.NLists = 4
	fl, err := ivfflat.Build(live, dev, &fp)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, fl)
	cp, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	cp.GraphDegree, cp.IntermediateGraphDegree = 8, 16
	cg, err := cagra.Build(live, dev, &cp)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, cg)
	nb, err := safe.NewDeviceMatrix[int64](live, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, nb)
	ds, err := safe.NewDeviceMatrix[float32](live, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	q, err := safe.DeviceMatrixFrom(live, data[:dim], 1, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, q)
	res, err := safe.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bf")
	if err := bf.Serialize(live, path); err != nil {
		t.Fatal(err)
	}
	km, err := kmeans.DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	pp, err := pca.DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op  string
		err error
	}{
		{"safe.Resources.Sync", res.Sync()},
		{"safe.Resources.DeviceID", second(res.DeviceID())},
		{"safe.NewDeviceMatrix", second(safe.NewDeviceMatrix[float32](res, 4, 4))},
		{"safe.DeviceMatrixFrom", second(safe.DeviceMatrixFrom(res, data, n, dim))},
		{"safe.NewBitsetFilterAllowing", second(safe.NewBitsetFilterAllowing(res, n, []int64{1}))},
		{"bruteforce.Build", second(bruteforce.Build(res, host, nil))},
		{"bruteforce.Deserialize", second(bruteforce.Deserialize(res, path))},
		{"bruteforce.Index.Serialize", bf.Serialize(res, filepath.Join(t.TempDir(), "x"))},
		{"bruteforce.Index.SerializeTo", second(bf.SerializeTo(res, io.Discard))},
		{"ivfflat.Index.SerializeTo", second(fl.SerializeTo(res, io.Discard))},
		{"bruteforce.SearchSlice", second(bruteforce.SearchSlice(res, bf, data[:dim], 2, nil))},
		{"cagra.Build", second(cagra.Build(res, host, &cp))},
		{"cagra.Index.Search", cg.Search(res, nil, q, nb, ds, nil)},
		{"bruteforce.Index.Search", bf.Search(res, q, nb, ds, nil)},
		{"ivfflat.Index.Search", fl.Search(res, nil, q, nb, ds, nil)},
		{"ivfflat.Index.Extend", fl.Extend(res, q, nil)},
		{"cagra.Build", second(cagra.Build(res, dev, &cp))},
		{"ivfflat.Build", second(ivfflat.Build(res, host, &fp))},
		{"ivfflat.SearchSlice", second(ivfflat.SearchSlice(res, fl, nil, data[:dim], 2, nil))},
		{"ivfpq.Build", second(ivfpq.Build(res, host, &qp))},
		{"ivfsq.Build", second(ivfsq.Build(res, host, &sp))},
		{"hnsw.Build", second(hnsw.Build(res, host, nil))},
		{"distance.PairwiseSlice", second(distance.PairwiseSlice(res, data, data, dim, safe.L2Expanded, 0))},
		{"kmeans.FitSlice", second(kmeans.FitSlice(res, &km, data, dim, nil, nil))},
		{"pca.Fit", second(pca.Fit(res, &pp, data, dim))},
		{"selectk.SelectSortedSlice", second2(selectk.SelectSortedSlice(res, data, 3))},
		{"allneighbors.BuildSlice", second(allneighbors.BuildSlice(res, data, n, dim, 4, nil))},
	} {
		if errors.Is(c.err, safe.ErrNotInRelease) { // selectk before 26.08
			continue
		}
		if !errors.Is(c.err, safe.ErrClosed) {
			t.Errorf("%s with a closed Resources: %v, want safe.ErrClosed", c.op, c.err)
			continue
		}
		if msg := c.err.Error(); !strings.HasPrefix(msg, c.op+": ") || strings.Count(msg, "safe.Resources.") > strings.Count(c.op, "safe.Resources.") {
			t.Errorf("%s with a closed Resources: %q does not name the operation alone", c.op, msg)
		}
	}
}
