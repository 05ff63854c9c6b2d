package multigpu_test

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// NewResources takes every visible device, or the list given (root first);
// bad lists and pool sizes are refused before C. Needs CUDA (device
// discovery) but no multi-GPU index.
func TestResourcesDevices(t *testing.T) {
	safetest.Check(t)
	devices(t, 2)
	all, err := multigpu.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, all)
	n, err := safe.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	if all.Ranks() != n || len(all.Devices()) != n || all.Devices()[0] != 0 {
		t.Fatalf("all devices: %v, %d visible", all.Devices(), n)
	}
	pooled, err := multigpu.NewResources(multigpu.WithDevices(n-1), multigpu.WithMemoryPool(10))
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, pooled)
	if !slices.Equal(pooled.Devices(), []int{n - 1}) || pooled.Ranks() != 1 {
		t.Fatalf("WithDevices(%d): %v", n-1, pooled.Devices())
	}
	for _, c := range []struct {
		name string
		opts []multigpu.Option
		arg  string
	}{
		{"empty list", []multigpu.Option{multigpu.WithDevices()}, "WithDevices"},
		{"negative", []multigpu.Option{multigpu.WithDevices(-1)}, "WithDevices"},
		{"not visible", []multigpu.Option{multigpu.WithDevices(0, n)}, "WithDevices"},
		{"twice", []multigpu.Option{multigpu.WithDevices(0, 0)}, "WithDevices"},
		{"pool 101%", []multigpu.Option{multigpu.WithMemoryPool(101)}, "WithMemoryPool"},
		{"pool -1%", []multigpu.Option{multigpu.WithMemoryPool(-1)}, "WithMemoryPool"},
	} {
		r, err := multigpu.NewResources(c.opts...)
		if !safetest.IsArg(err, c.arg) {
			closeIf(r)
			t.Errorf("%s: %v, want an ArgError naming %s", c.name, err, c.arg)
		}
	}
	if err := pooled.Close(); err != nil || pooled.Close() != nil {
		t.Fatal("Close twice")
	}
	data := safetest.Random(30, rows, dim)
	ip, _ := allProbes(4)
	if _, err := multigpu.BuildIVFFlat(pooled, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip}); !errors.Is(err, safe.ErrClosed) {
		t.Fatalf("closed resources: %v", err)
	}
	t.Run("root not device 0", func(t *testing.T) {
		exactly(t, 2, "WithDevices(1, 0) (device 1 as the root)")
		two, err := multigpu.NewResources(multigpu.WithDevices(1, 0), multigpu.WithMemoryPool(10))
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, two)
		if !slices.Equal(two.Devices(), []int{1, 0}) || two.Ranks() != 2 {
			t.Fatalf("WithDevices(1, 0): %v", two.Devices())
		}
	})
}

// The multi-GPU and the single-GPU resources are different Go types: a
// *safe.Resources cannot be handed to this package's functions (the C API
// cannot tell them apart). Checked by reflection here; the compiler
// enforces it.
func TestResourcesAreTheirOwnType(t *testing.T) {
	mt, st := reflect.TypeOf((*multigpu.Resources)(nil)), reflect.TypeOf((*safe.Resources)(nil))
	for _, f := range []any{multigpu.BuildIVFFlat, multigpu.BuildCagra, multigpu.BuildIVFPQ, multigpu.DeserializeIVFFlat, multigpu.KMeansFit} {
		in := reflect.TypeOf(f).In(0)
		if in != mt || in == st || in.ConvertibleTo(st) {
			t.Fatalf("%T takes %v", f, in)
		}
	}
}

// DefaultDistribution reads cuVS's multi-GPU defaults.
func TestDefaults(t *testing.T) {
	needMG(t)
	safetest.Check(t)
	d, err := multigpu.DefaultDistribution()
	if err != nil {
		t.Fatal(err)
	}
	if d != (multigpu.Defaults{Mode: multigpu.Sharded, SearchMode: multigpu.LoadBalancer, MergeMode: multigpu.TreeMerge, RowsPerBatch: 1 << 20}) {
		t.Fatalf("defaults %+v", d)
	}
	if multigpu.Sharded.String() != "Sharded" || multigpu.MergeMode(9).String() != "MergeMode(9)" || multigpu.RoundRobin.String() != "RoundRobin" {
		t.Fatal("String")
	}
}

// Search refuses bad tensors and params before C.
func TestSearchRefusals(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	data, qs := safetest.Random(31, rows, dim), safetest.Random(32, nq, dim)
	ip, sp := allProbes(4)
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	nb, ds := make([]int64, nq*k), make([]float32, nq*k)
	nm, _ := dlpack.NewHostMatrix(nb, nq, k)
	dm, _ := dlpack.NewHostMatrix(ds, nq, k)
	p := &multigpu.IVFFlatSearchParams{Base: sp}
	cases := []struct {
		name string
		arg  string
		call func() error
	}{
		{"nil queries", "queries", func() error { return idx.Search(res, p, nil, nm, dm) }},
		{"wrong dim", "queries", func() error { return idx.Search(res, p, host(t, qs, nq*2), nm, dm) }},
		{"neighbors rows", "neighbors", func() error {
			m, _ := dlpack.NewHostMatrix(nb[:k], 1, k)
			return idx.Search(res, p, host(t, qs, nq), m, dm)
		}},
		{"neighbors dtype", "neighbors", func() error {
			m, _ := dlpack.NewHostMatrix(make([]int32, nq*k), nq, k)
			return idx.Search(res, p, host(t, qs, nq), m, dm)
		}},
		{"k over rows", "neighbors", func() error {
			_, err := idx.SearchK(res, p, host(t, qs, nq), rows+1)
			return err
		}},
		{"negative RowsPerBatch", "params.RowsPerBatch", func() error {
			return idx.Search(res, &multigpu.IVFFlatSearchParams{Distribution: multigpu.Distribution{RowsPerBatch: -1}}, host(t, qs, nq), nm, dm)
		}},
		{"bad merge mode", "params.MergeMode", func() error {
			return idx.Search(res, &multigpu.IVFFlatSearchParams{Distribution: multigpu.Distribution{MergeMode: 5}}, host(t, qs, nq), nm, dm)
		}},
		{"NaN query", "queries", func() error {
			bad := slices.Clone(qs)
			bad[3] = float32(math.NaN())
			return idx.Search(res, p, host(t, bad, nq), nm, dm)
		}},
		{"nil res", "res", func() error { return idx.Search(nil, p, host(t, qs, nq), nm, dm) }},
	}
	for _, c := range cases {
		if err := c.call(); !safetest.IsArg(err, c.arg) {
			t.Errorf("%s: %v, want an ArgError naming %s", c.name, err, c.arg)
		}
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.Search(res, p, host(t, qs, nq), nm, dm); !errors.Is(err, safe.ErrClosed) {
		t.Fatalf("closed index: %v", err)
	}
}

// CAGRA: Extend is refused (cuVS's multi-GPU CAGRA has no extend: it
// aborts the process on the real 26.08.01, or adds nothing), for every
// mode and argument, and the index is left as it was; a round trip through
// a file searches the same.
func TestCagraExtendAndRoundTrip(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	data, qs := safetest.Random(33, rows, dim), safetest.Random(34, nq, dim)
	cp, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	cp.GraphDegree, cp.IntermediateGraphDegree = 16, 32
	idx, err := multigpu.BuildCagra(res, host(t, data, rows), &multigpu.CagraIndexParams{Mode: multigpu.Replicated, Base: &cp})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	extra := safetest.Random(35, 4, dim)
	for _, ids := range []dlpack.Tensor{nil, dlpack.NewHostVector([]uint32{rows, rows + 1, rows + 2, rows + 3})} {
		if err := idx.Extend(res, host(t, extra, 4), ids); !safetest.IsArg(err, "index") || !strings.Contains(err.Error(), "does not implement extend") {
			t.Fatalf("Extend: %v", err)
		}
	}
	if idx.Rows() != rows {
		t.Fatalf("rows %d after a refused Extend, want %d", idx.Rows(), rows)
	}
	before, err := idx.SearchK(res, nil, host(t, qs, nq), k)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cagra.bin")
	if err := idx.Serialize(res, path); err != nil {
		t.Fatal(err)
	}
	back, err := multigpu.DeserializeCagra(res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	after, err := back.SearchK(res, nil, host(t, qs, nq), k)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before.Neighbors, after.Neighbors) || back.Mode() != multigpu.Replicated {
		t.Fatal("round trip searches differently")
	}
}

// UpdateDataset (26.08) gives the devices new rows for the graph: after
// replacing every row by another vector, a search for the new vectors
// finds them under the same ids. 26.06 refuses it with ErrNotInRelease.
func TestCagraUpdateDataset(t *testing.T) {
	safetest.Check(t)
	forDevices(t, func(t *testing.T, res *multigpu.Resources) {
		for _, mode := range []multigpu.Mode{multigpu.Sharded, multigpu.Replicated} {
			t.Run(mode.String(), func(t *testing.T) {
				data := safetest.Random(36, rows, dim)
				idx := buildCagra(t, res, data, dim, mode)
				updateAndFind(t, res, idx, data, dim, func(moved []float32) dlpack.Tensor { return host(t, moved, rows) })
			})
		}
	})
}

// buildCagra builds a multi-GPU CAGRA index of data (n × d), closed at the end.
func buildCagra(t *testing.T, res *multigpu.Resources, data []float32, d int, mode multigpu.Mode) *multigpu.CagraIndex {
	t.Helper()
	cp, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	cp.GraphDegree, cp.IntermediateGraphDegree = 16, 32
	m, err := dlpack.NewHostMatrix(data, len(data)/d, d)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := multigpu.BuildCagra(res, m, &multigpu.CagraIndexParams{Mode: mode, Base: &cp})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	return idx
}

// updateAndFind moves every row of data (n × d, what idx was built on) by
// 0.001 a coordinate, gives idx the moved rows (as tensor makes them) and
// checks that a search finds them: recall against the exact kNN of the
// moved rows, and each of the first nq moved rows found as itself at
// distance 0 (the old rows lie 0.001·√d away). On 26.06 UpdateDataset
// must return ErrNotInRelease.
func updateAndFind(t *testing.T, res *multigpu.Resources, idx *multigpu.CagraIndex, data []float32, d int, tensor func(moved []float32) dlpack.Tensor) {
	t.Helper()
	n := len(data) / d
	moved := slices.Clone(data)
	for i := range moved {
		moved[i] += 0.001
	}
	err := idx.UpdateDataset(res, tensor(moved))
	if generated.Release() == "26.06" {
		if !errors.Is(err, safe.ErrNotInRelease) {
			t.Fatalf("26.06: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.UpdateDataset(res, host(t, moved[:10*d], 10)); !safetest.IsArg(err, "dataset") {
		t.Fatalf("10 rows: %v", err)
	}
	q, err := dlpack.NewHostMatrix(moved[:nq*d], nq, d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := idx.SearchK(res, &multigpu.CagraSearchParams{Base: &cagra.SearchParams{ITopKSize: 64}}, q, 1)
	if err != nil {
		t.Fatal(err)
	}
	self := 0
	for i := 0; i < nq; i++ {
		if got.Neighbors[i] == int64(i) {
			self++
			if got.Distances[i] > 1e-6 {
				t.Fatalf("row %d found at %g, want 0: the old rows searched", i, got.Distances[i])
			}
		}
	}
	if self < nq*9/10 {
		t.Fatalf("%d of %d moved rows found as themselves", self, nq)
	}
	qs := safetest.Random(39, nq, d)
	qm, err := dlpack.NewHostMatrix(qs, nq, d)
	if err != nil {
		t.Fatal(err)
	}
	knn, err := idx.SearchK(res, &multigpu.CagraSearchParams{Base: &cagra.SearchParams{ITopKSize: 64}}, qm, k)
	if err != nil {
		t.Fatal(err)
	}
	if r := recall(knn, safetest.ExactKNN(moved, qs, d, k, safetest.L2, nil)); r < 0.9 {
		t.Fatalf("recall %g < 0.9 against the moved rows (%d rows)", r, n)
	}
}

// Serialize → Deserialize → UpdateDataset → Search, replicated and
// sharded: the deserialized index learns its rows, shards and dimension
// from the file's CAGRA headers (the C API has no getter), so
// UpdateDataset can check the dataset covers them.
func TestCagraUpdateDeserialized(t *testing.T) {
	safetest.Check(t)
	forDevices(t, func(t *testing.T, res *multigpu.Resources) {
		for _, mode := range []multigpu.Mode{multigpu.Sharded, multigpu.Replicated} {
			t.Run(mode.String(), func(t *testing.T) {
				data := safetest.Random(40, rows, dim)
				idx := buildCagra(t, res, data, dim, mode)
				path := filepath.Join(t.TempDir(), "cagra.bin")
				if err := idx.Serialize(res, path); err != nil {
					t.Fatal(err)
				}
				back, err := multigpu.DeserializeCagra(res, path)
				if err != nil {
					t.Fatal(err)
				}
				safetest.Close(t, back)
				if back.Rows() != rows || back.Dim() != dim || back.Mode() != mode || !slices.Equal(back.Shards(), idx.Shards()) {
					t.Fatalf("deserialized: rows %d dim %d mode %s shards %v, built %v", back.Rows(), back.Dim(), back.Mode(), back.Shards(), idx.Shards())
				}
				updateAndFind(t, res, back, data, dim, func(moved []float32) dlpack.Tensor { return host(t, moved, rows) })
			})
		}
	})
}

// UpdateDataset of rows in device memory: rows already of cuVS's padded
// width (8 float32: 32 bytes) go as a view (cuvsDatasetMakePadded refuses
// to copy device rows of the right width, as cuVS's own dataset tests
// expect), others (6 float32: 24 bytes) as a padded copy; both search as
// the moved rows.
func TestCagraUpdateDatasetDevice(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	sres := safetest.Resources(t)
	for _, d := range []int{8, 6} {
		t.Run(strconv.Itoa(d)+"columns", func(t *testing.T) {
			data := safetest.Random(41, rows, d)
			idx := buildCagra(t, res, data, d, multigpu.Sharded)
			updateAndFind(t, res, idx, data, d, func(moved []float32) dlpack.Tensor {
				dm, err := safe.DeviceMatrixFrom(sres, moved, rows, d)
				if err != nil {
					t.Fatal(err)
				}
				safetest.Close(t, dm)
				return dm
			})
		})
	}
}

// KMeansFit (26.08) on one and two devices: two far-apart blobs give one
// centroid each; the inertia is the sum of squared distances to them.
// 26.06 refuses it with ErrNotInRelease.
func TestKMeansFit(t *testing.T) {
	safetest.Check(t)
	forDevices(t, kmeansFit)
}

func kmeansFit(t *testing.T, res *multigpu.Resources) {
	const n = 200
	x := make([]float32, n*2)
	r := safetest.Random(37, n, 2)
	for i := 0; i < n; i++ {
		// The far cluster is near (3, 3), not far from the origin:
		// cuVS's inertia is L2Expanded in float32 (‖x‖² + ‖c‖² − 2x·c),
		// whose rounding grows with the norms (at (100, 100) the real
		// 26.08.01 reported 0.643 for an exact 0.321).
		off := float32(0)
		if i%2 == 1 {
			off = 3
		}
		x[2*i], x[2*i+1] = off+r[2*i]*0.1, off+r[2*i+1]*0.1
	}
	p := multigpu.KMeansParams{Metric: safe.L2Expanded, Clusters: 2, Init: multigpu.KMeansArray, MaxIter: 20, Tol: 1e-6, NInit: 1, BatchSamples: 1 << 15}
	cent := []float32{1, 1, 2.5, 2.5}
	cm, _ := dlpack.NewHostMatrix(cent, 2, 2)
	res2, err := multigpu.KMeansFit(res, &p, host(t, x, n), nil, cm)
	if generated.Release() == "26.06" {
		if !errors.Is(err, safe.ErrNotInRelease) {
			t.Fatalf("26.06: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	// want: the exact inertia at the centroids returned; slack: what
	// float32 L2Expanded may round away, a few ulps of ‖x‖² + ‖c‖² a row.
	var want, slack float64
	for i := 0; i < n; i++ {
		c := cent[(i%2)*2 : (i%2)*2+2]
		dx, dy := float64(x[2*i]-c[0]), float64(x[2*i+1]-c[1])
		want += dx*dx + dy*dy
		nx := float64(x[2*i])*float64(x[2*i]) + float64(x[2*i+1])*float64(x[2*i+1])
		nc := float64(c[0])*float64(c[0]) + float64(c[1])*float64(c[1])
		slack += 4 * 0x1p-23 * (nx + nc)
	}
	if math.Abs(float64(cent[0])-0.05) > 0.02 || math.Abs(float64(cent[2])-3.05) > 0.02 || math.Abs(res2.Inertia-want) > 1e-3*want+slack || res2.Iterations < 1 {
		t.Fatalf("centroids %v inertia %g (want %g) iterations %d", cent, res2.Inertia, want, res2.Iterations)
	}
	bad := p
	bad.Clusters = 0
	if _, err := multigpu.KMeansFit(res, &bad, host(t, x, n), nil, cm); !safetest.IsArg(err, "params.Clusters") {
		t.Fatalf("0 clusters: %v", err)
	}
	if _, err := multigpu.KMeansFit(res, &p, host(t, x, n), dlpack.NewHostVector(make([]float32, n-1)), cm); !safetest.IsArg(err, "weights") {
		t.Fatalf("short weights: %v", err)
	}
	if d, err := multigpu.DefaultKMeansParams(); err == nil {
		if d.Clusters < 1 || d.MaxIter < 1 {
			t.Fatalf("defaults %+v", d)
		}
	} else if !errors.Is(err, generated.ErrMissingSymbol) {
		t.Fatal(err)
	} else {
		t.Log("the library lacks cuvsKMeansParamsCreate: defaults not read")
	}
}

// A sharded CAGRA search refuses k above the smallest shard's rows.
func TestCagraShardedK(t *testing.T) {
	safetest.Check(t)
	forDevices(t, cagraShardedK)
}

func cagraShardedK(t *testing.T, res *multigpu.Resources) {
	n := res.Ranks()
	data := safetest.Random(38, 40, dim)
	cp, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	cp.GraphDegree, cp.IntermediateGraphDegree = 8, 16
	idx, err := multigpu.BuildCagra(res, host(t, data, 40), &multigpu.CagraIndexParams{Base: &cp})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	m := slices.Min(idx.Shards()) // 40 rows over n devices: 40/n each
	if int(m) != 40/n {
		t.Fatalf("shards %v", idx.Shards())
	}
	if _, err := idx.SearchK(res, nil, host(t, data[:dim], 1), int(m)+1); !safetest.IsArg(err, "neighbors") {
		t.Fatalf("k %d over shards of %d: %v", m+1, m, err)
	}
	got, err := idx.SearchK(res, nil, host(t, data[:dim], 1), int(m))
	if err != nil {
		t.Fatal(err)
	}
	if got.Neighbors[0] != 0 {
		t.Fatalf("row 0 found as %d", got.Neighbors[0])
	}
}
