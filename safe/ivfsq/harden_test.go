package ivfsq_test

import (
	"testing"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

func toHalf(x []float32) []float16.Float16 {
	out := make([]float16.Float16, len(x))
	for i, v := range x {
		out[i] = float16.Fromfloat32(v)
	}
	return out
}

// IVF-SQ takes float32 and float16 queries alike: SearchSlice with one
// type, then the other, then the first again (same shape, so the same
// pooled buffers but for their type) gives each type's own results. It
// used to panic (the pool handed float16 buffers to float32 queries).
func TestSearchSliceBothElementTypes(t *testing.T) {
	safetest.Check(t)
	const kk = 5
	f := newFixture(t, rows, nq, kk)
	idx := f.build(t, params(t))
	h := toHalf(f.qs)
	for range 2 {
		a, err := ivfsq.SearchSlice(f.res, idx, nil, h, kk, nil)
		must(t, err)
		b, err := ivfsq.SearchSlice(f.res, idx, nil, f.qs, kk, nil)
		must(t, err)
		if a.Len() != nq || b.Len() != nq {
			t.Fatalf("%d and %d queries, want %d", a.Len(), b.Len(), nq)
		}
		same := 0
		for i := range a.Neighbors {
			if a.Neighbors[i] == b.Neighbors[i] {
				same++
			}
		}
		if frac := float64(same) / float64(len(a.Neighbors)); frac < 0.8 {
			t.Errorf("float16 and float32 queries agree on %.2f of the neighbours", frac)
		}
	}
	safetest.Refused(t, "float64 queries", "queries", "float64", func() error {
		_, err := ivfsq.SearchSlice(f.res, idx, nil, make([]float64, dim), 1, nil)
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
	f := newFixture(t, n, q, kk)
	p := params(t)
	p.NLists = lists
	idx := f.build(t, p)
	sp := ivfsq.SearchParams{NProbes: 1, FilterPath: safe.FilterIndex} // cuVS's own fill, no second pass
	queries := f.data[:q*dim]                                          // rows of the index: their own list is probed
	qd, err := safe.DeviceMatrixFrom(f.res, queries, q, dim)
	must(t, err)
	safetest.Close(t, qd)
	must(t, idx.Search(f.res, &sp, qd, f.neighbors, f.distances, nil))
	must(t, f.res.Sync())
	rawN, err := f.neighbors.ToHost(f.res)
	must(t, err)
	rawD, err := f.distances.ToHost(f.res)
	must(t, err)
	got, err := ivfsq.SearchSlice(f.res, idx, &sp, queries, kk, nil)
	must(t, err)
	if safetest.CheckUnfilled(t, rawN, rawD, kk, got, safetest.FillMaxInt64) == 0 {
		t.Errorf("no slot unfilled with %d rows in %d lists, one probe, k %d", n, lists, kk)
	}
}
