package ivfflat_test

import (
	"math"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// The real library's fill (H200, v26.06: 100 rows, 20 lists, one probe,
// k 10 gave [0 59 68 5 10 21 0 0 0 0]): slots the probed list cannot fill
// repeat a row id — the first row stored in the probed list — with
// distance +Inf in the device outputs; SearchSlice's results hold
// safe.SentinelID64 with +Inf there. With a filter the repeated row may be
// one the filter excludes: SearchSlice never returns it.
func TestSearchSliceUnfilled(t *testing.T) {
	safetest.Check(t)
	const n, lists, kk, q = 100, 20, 10, 8
	f := newFixture(t, n, q, kk)
	p := params(t)
	p.NLists = lists
	idx := f.build(t, p)
	sp := ivfflat.SearchParams{NProbes: 1, FilterPath: safe.FilterIndex} // cuVS's own fill, no second pass
	queries := f.data[:q*dim]                                            // rows of the index: their own list is probed
	qd, err := safe.DeviceMatrixFrom(f.res, queries, q, dim)
	must(t, err)
	safetest.Close(t, qd)
	raw := func(filter *safe.Filter) ([]int64, []float32) {
		must(t, idx.Search(f.res, &sp, qd, f.neighbors, f.distances, filter))
		must(t, f.res.Sync())
		ids, err := f.neighbors.ToHost(f.res)
		must(t, err)
		d, err := f.distances.ToHost(f.res)
		must(t, err)
		return ids, d
	}
	rawN, rawD := raw(nil)
	got, err := ivfflat.SearchSlice(f.res, idx, &sp, queries, kk, nil)
	must(t, err)
	if safetest.CheckUnfilled(t, rawN, rawD, kk, got, safetest.FillRepeat) == 0 {
		t.Fatalf("no slot unfilled with %d rows in %d lists, one probe, k %d", n, lists, kk)
	}
	if !safetest.Conformance() {
		// The double stores rows in the order they were added: the first
		// row of a list is its smallest id.
		for r := range q {
			row, d := rawN[r*kk:(r+1)*kk], rawD[r*kk:(r+1)*kk]
			filled := slices.IndexFunc(d, func(x float32) bool { return math.IsInf(float64(x), 1) })
			if filled > 0 && row[filled] != slices.Min(row[:filled]) {
				t.Errorf("query %d: the double repeats %d, want the list's first row %d: %v", r, row[filled], slices.Min(row[:filled]), row)
			}
		}
	}
	// Query 0 is row 0, the first row of its list (on the double; on the
	// real library whichever row build stored first). A filter excluding
	// that row: the device fill may be the excluded row, the results never.
	first := rawN[0]
	if i := slices.IndexFunc(rawD[:kk], func(x float32) bool { return math.IsInf(float64(x), 1) }); i > 0 {
		first = rawN[i]
	}
	allowed := make([]int64, 0, n)
	for i := range int64(n) {
		if i != first {
			allowed = append(allowed, i)
		}
	}
	fl, err := safe.NewBitsetFilterAllowing(f.res, n, allowed)
	must(t, err)
	safetest.Close(t, fl)
	rawN, rawD = raw(fl)
	got, err = ivfflat.SearchSlice(f.res, idx, &sp, queries, kk, fl)
	must(t, err)
	safetest.CheckUnfilled(t, rawN, rawD, kk, got, safetest.FillRow(n))
	if slices.Contains(got.Neighbors, first) {
		t.Errorf("SearchSlice returned row %d, which the filter excludes: %v", first, got.Neighbors)
	}
	if !safetest.Conformance() && !slices.Contains(rawN[:kk], first) {
		t.Errorf("the double's fill of query 0 is %v, want the excluded first row %d repeated", rawN[:kk], first)
	}
}
