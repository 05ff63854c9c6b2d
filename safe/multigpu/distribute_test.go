package multigpu_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// skipUnmodelled skips when the double says it does not model a call
// (in-process, or loaded as the library through CUVS_TEST_LIBRARY: its
// "cuvsdouble: ... not modelled", which no real library says).
func skipUnmodelled(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), "cuvsdouble: ") && strings.Contains(err.Error(), "not modelled") {
		t.Skipf("the double does not model this: %v", err)
	}
}

// Distribute of single-GPU CAGRA and IVF-PQ files: a replicated index with
// the single-GPU index's recall on every device.
func TestDistributeCagraIVFPQ(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	const n = 2000
	data, qs := safetest.Random(60, n, dim), safetest.Random(61, nq, dim)
	want := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
	sres := safetest.Resources(t)
	dm, err := safe.DeviceMatrixFrom(sres, data, n, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, dm)
	t.Run("cagra", func(t *testing.T) {
		cp, err := cagra.DefaultIndexParams()
		if err != nil {
			t.Fatal(err)
		}
		cp.GraphDegree, cp.IntermediateGraphDegree = 16, 32
		single, err := cagra.Build(sres, dm, &cp)
		if err != nil {
			t.Fatal(err)
		}
		defer single.Close()
		path := filepath.Join(t.TempDir(), "cagra.bin")
		if err := single.Serialize(sres, path); err != nil {
			t.Fatal(err)
		}
		idx, err := multigpu.DistributeCagra(res, path)
		skipUnmodelled(t, err)
		if err != nil {
			t.Fatal(err)
		}
		defer idx.Close()
		got, err := idx.SearchK(res, &multigpu.CagraSearchParams{Base: &cagra.SearchParams{ITopKSize: 64}}, host(t, qs, nq), k)
		if err != nil {
			t.Fatal(err)
		}
		if r := recall(got, want); r < 0.9 || idx.Mode() != multigpu.Replicated {
			t.Fatalf("recall %g mode %s", r, idx.Mode())
		}
	})
	t.Run("ivfpq", func(t *testing.T) {
		pp, err := ivfpq.DefaultIndexParams()
		if err != nil {
			t.Fatal(err)
		}
		pp.NLists, pp.PQDim = 16, dim
		single, err := ivfpq.Build(sres, dm, &pp)
		if err != nil {
			t.Fatal(err)
		}
		defer single.Close()
		path := filepath.Join(t.TempDir(), "pq.bin")
		if err := single.Serialize(sres, path); err != nil {
			t.Fatal(err)
		}
		idx, err := multigpu.DistributeIVFPQ(res, path)
		skipUnmodelled(t, err)
		if err != nil {
			t.Fatal(err)
		}
		defer idx.Close()
		got, err := idx.SearchK(res, &multigpu.IVFPQSearchParams{Base: &ivfpq.SearchParams{NProbes: 16}}, host(t, qs, nq), k)
		if err != nil {
			t.Fatal(err)
		}
		if r := recall(got, want); r < 0.7 {
			t.Fatalf("recall %g", r)
		}
	})
}

// IVF-PQ: a Serialize/Deserialize round trip searches the same.
func TestIVFPQRoundTrip(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	data, qs := safetest.Random(62, rows, dim), safetest.Random(63, nq, dim)
	pp, err := ivfpq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	pp.NLists, pp.PQDim = 8, dim
	idx, err := multigpu.BuildIVFPQ(res, host(t, data, rows), &multigpu.IVFPQIndexParams{Base: &pp})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	sp := &multigpu.IVFPQSearchParams{Base: &ivfpq.SearchParams{NProbes: 8}}
	before, err := idx.SearchK(res, sp, host(t, qs, nq), k)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pq.bin")
	if err := idx.Serialize(res, path); err != nil {
		t.Fatal(err)
	}
	back, err := multigpu.DeserializeIVFPQ(res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	after, err := back.SearchK(res, sp, host(t, qs, nq), k)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before.Neighbors, after.Neighbors) || !slices.Equal(before.Distances, after.Distances) {
		t.Fatal("round trip searches differently")
	}
	if err := back.Serialize(res, ""); !safetest.IsArg(err, "path") {
		t.Fatalf("empty path: %v", err)
	}
	if _, err := multigpu.DeserializeIVFPQ(res, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("missing file accepted")
	}
}

// SerializeTo and DeserializeIVFFlatFrom round trip through a buffer;
// DistributeIVFFlatFrom reads a single-GPU index from a reader.
func TestStreams(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	data, qs := safetest.Random(64, rows, dim), safetest.Random(65, nq, dim)
	ip, sp := allProbes(4)
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Mode: multigpu.Replicated, Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	var buf bytes.Buffer
	n, err := idx.SerializeTo(res, &buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("SerializeTo: %d bytes, %v", n, err)
	}
	back, err := multigpu.DeserializeIVFFlatFrom(res, &buf)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	if back.Mode() != multigpu.Replicated {
		t.Fatalf("mode %s, want the file's Replicated", back.Mode())
	}
	want := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
	got, err := back.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, host(t, qs, nq), k)
	if err != nil {
		t.Fatal(err)
	}
	if recall(got, want) != 1 {
		t.Fatal("stream round trip lost rows")
	}
	single := filepath.Join(t.TempDir(), "single.bin")
	writeSingleIVFFlat(t, data, single)
	f, err := os.Open(single)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dist, err := multigpu.DistributeIVFFlatFrom(res, f)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, dist)
	got, err = dist.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, host(t, qs, nq), k)
	if err != nil {
		t.Fatal(err)
	}
	if recall(got, want) != 1 {
		t.Fatal("distributed from a reader: not exact")
	}
}
