package ivfpq_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

func half(x []float32) []float16.Float16 {
	out := make([]float16.Float16, len(x))
	for i, v := range x {
		out[i] = float16.Fromfloat32(v)
	}
	return out
}

// After Deserialize the element type is unknown (cuVS does not record
// it), so every query type IVF-PQ takes is accepted: SearchSlice with
// float32 queries, then float16 ones of the same shape, then float32 again
// works, where it used to panic (the pool handed one type's buffers to the
// other). A type IVF-PQ never takes is refused, naming queries, before any
// allocation.
func TestSearchSliceAfterDeserialize(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	path := filepath.Join(t.TempDir(), "ivfpq.idx")
	if err := idx.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	back, err := ivfpq.Deserialize(f.res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	want, err := ivfpq.SearchSlice(f.res, idx, &f.sp, f.qs, k)
	if err != nil {
		t.Fatal(err)
	}
	h := half(f.qs)
	for range 2 {
		a, err := ivfpq.SearchSlice(f.res, back, &f.sp, f.qs, k)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a.Neighbors {
			if a.Neighbors[i] != want.Neighbors[i] {
				t.Fatalf("float32 after Deserialize: slot %d: %d, the original index gives %d", i, a.Neighbors[i], want.Neighbors[i])
			}
		}
		if b, err := ivfpq.SearchSlice(f.res, back, &f.sp, h, k); err != nil || b.Len() != nq {
			t.Fatalf("float16 after Deserialize: %v", err)
		}
	}
	for _, x := range []*ivfpq.Index{idx, back} {
		safetest.Refused(t, "float64 queries", "queries", "float64", func() error {
			_, err := ivfpq.SearchSlice(f.res, x, &f.sp, make([]float64, dim), 1)
			return err
		})
	}
	// The built index knows its type: float16 queries are refused there.
	safetest.Refused(t, "float16 queries on a float32 index", "queries", "float16", func() error {
		_, err := ivfpq.SearchSlice(f.res, idx, &f.sp, h, k)
		return err
	})
}

// Refusals come before any device memory is taken, name the argument the
// caller passed, and give a nil result.
func TestSearchSliceRefusedBeforeAllocation(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	nan := append([]float32(nil), f.qs[:3*dim]...)
	nan[dim] = float32(math.Inf(-1))
	badLUT := f.sp
	badLUT.LUTDtype = 12345
	for _, c := range []struct {
		name, arg, why string
		sp             *ivfpq.SearchParams
		queries        []float32
		k              int
	}{
		{"k = 0", "k", "", &f.sp, f.qs, 0},
		{"k above the rows", "k", "exceeds", &f.sp, f.qs, rows + 1},
		{"k = 1<<24", "k", "exceeds", &f.sp, f.qs, 1 << 24},
		{"k = 1<<40", "k", "exceeds", &f.sp, f.qs, 1 << 40},
		{"-Inf query", "queries", "row 1 holds -Inf", &f.sp, nan, k},
		{"bad params", "params.LUTDtype", "", &badLUT, f.qs, k},
	} {
		safetest.Refused(t, c.name, c.arg, c.why, func() error {
			r, err := ivfpq.SearchSlice(f.res, idx, c.sp, c.queries, c.k)
			if r != nil {
				t.Errorf("%s: a result with error %v", c.name, err)
			}
			return err
		})
	}
}

// The real library's fill (H200, v26.06): with fewer rows in the probed
// lists than k (100 rows, 20 lists, one probe, k 10), the device outputs
// hold math.MaxInt64 with +Inf; SearchSlice's results hold
// safe.SentinelID64 with +Inf there.
func TestSearchSliceUnfilled(t *testing.T) {
	safetest.Check(t)
	const n, lists, kk, q = 100, 20, 10, 8
	res := safetest.Resources(t)
	data := clustered(5, n, dim)
	p := params(t)
	p.NLists = lists
	idx := build(t, res, deviceMatrix(t, res, data, n, dim), p)
	sp, err := ivfpq.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	sp.NProbes = 1
	queries := data[:q*dim]
	nb, dist := newDevice[int64](t, res, q, kk), newDevice[float32](t, res, q, kk)
	if err := idx.Search(res, &sp, deviceMatrix(t, res, queries, q, dim), nb, dist); err != nil {
		t.Fatal(err)
	}
	if err := res.Sync(); err != nil {
		t.Fatal(err)
	}
	rawN, err := nb.ToHost(res)
	if err != nil {
		t.Fatal(err)
	}
	rawD, err := dist.ToHost(res)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ivfpq.SearchSlice(res, idx, &sp, queries, kk)
	if err != nil {
		t.Fatal(err)
	}
	if safetest.CheckUnfilled(t, rawN, rawD, kk, got, safetest.FillMaxInt64) == 0 {
		t.Errorf("no slot unfilled with %d rows in %d lists, one probe, k %d", n, lists, kk)
	}
}

// Build (IVF-PQ's training: NaN rows there poison every later search) and
// Extend from Go memory refuse NaN and infinite values, float16 too,
// naming the argument and the first bad row.
func TestHostInputsNonFinite(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := clustered(3, 400, dim)
	bad := append([]float32(nil), data...)
	bad[123*dim] = float32(math.NaN())
	p := params(t)
	p.NLists = 4
	host := func(x []float32) *dlpack.HostMatrix[float32] {
		m, err := dlpack.NewHostMatrix(x, len(x)/dim, dim)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	safetest.Refused(t, "Build NaN", "dataset", "row 123 holds NaN", func() error {
		idx, err := ivfpq.Build(res, host(bad), &p)
		if idx != nil {
			idx.Close()
		}
		return err
	})
	h := half(data)
	h[5*dim+2] = float16.Inf(-1)
	hm, err := dlpack.NewHostMatrix(h, 400, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Refused(t, "Build float16 -Inf", "dataset", "row 5 holds -Inf", func() error {
		idx, err := ivfpq.Build(res, hm, &p)
		if idx != nil {
			idx.Close()
		}
		return err
	})
	idx := build(t, res, host(data), p)
	more := clustered(4, 10, dim)
	more[4*dim+1] = float32(math.Inf(1))
	if err := idx.Extend(res, host(more), nil); !safetest.IsArg(err, "vectors") {
		t.Errorf("Extend +Inf: %v", err)
	}
}
