package ivfpq_test

import (
	"path/filepath"
	"testing"

	"github.com/x448/float16"

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
