package cagra

import (
	"fmt"
	"testing"
)

// The cost model picks what the real library's cost table shows wherever
// the table is clear (one path at least 25% dearer than the other), at the
// table's D = 128 and itopk 64; the cells where the two are within 25%
// (100k at 10%, batch 16; 1M at 1%, batch 16) are printed only.
func TestFilterCostModel(t *testing.T) {
	for ni, n := range costN {
		for fi, f := range costFrac {
			for bi, b := range costBatch {
				ex, gr := costExact[ni][fi][bi], costGraph[ni][fi][bi]
				mex, mgr := filterCost(int64(n), 128, int64(f*n), int64(b), 64)
				line := fmt.Sprintf("N %g, %g%% allowed, batch %g: table exact %g / graph %g µs, model %.0f / %.0f", n, f*100, b, ex, gr, mex, mgr)
				t.Log(line)
				if ex > 1.25*gr && !(mex > mgr) || gr > 1.25*ex && !(mgr > mex) {
					t.Errorf("%s: the model chooses the other path", line)
				}
			}
		}
	}
	// between the table's points the model moves monotonically: exact
	// costs more with more rows allowed, at 100k and batch 16
	prev := 0.0
	for _, a := range []int64{500, 1000, 3000, 10000, 30000, 100000} {
		ex, _ := filterCost(100000, 128, a, 16, 64)
		if ex < prev {
			t.Errorf("exact cost %.0f at %d allowed, below %.0f", ex, a, prev)
		}
		prev = ex
	}
}

// The top-k the graph path searches with (cuVS's rule, at least itopk/f
// below PostFilterFrom, rounded to 32, kept from 75% allowed) and two of
// the model's choices at raised top-k.
func TestPlanFilter(t *testing.T) {
	for _, c := range []struct {
		f              float64
		itopk, k, want int64
	}{
		{f: 1, itopk: 64, k: 10, want: 64},
		{f: 0.8, itopk: 64, k: 10, want: 64},
		{f: 0.5, itopk: 64, k: 10, want: 96},
		{f: 0.3, itopk: 64, k: 10, want: 224},   // itopk/f: 213.3
		{f: 0.2, itopk: 64, k: 10, want: 320},   // itopk/f (cuVS's rule: 192)
		{f: 0.1, itopk: 64, k: 10, want: 640},   // itopk/f (cuVS's rule: 288)
		{f: 0.05, itopk: 64, k: 10, want: 1280}, // itopk/f (cuVS's rule: 448)
		{f: 0.2, itopk: 32, k: 10, want: 160},   // itopk/f: under MaxFilterITopK
		{f: 0.5, itopk: 256, k: 10, want: 384},
	} {
		if got := filterITopK(c.itopk, c.k, c.f); got != c.want {
			t.Errorf("filterITopK(%d, %d, %g) = %d, want %d", c.itopk, c.k, c.f, got, c.want)
		}
	}
	// at 1M rows, D 128, 10% allowed, batch 256 the table's graph search
	// is 12x cheaper than brute force: graph even at itopk 288
	if ex, gr := filterCost(1_000_000, 128, 100_000, 256, 288); !(gr < ex) {
		t.Errorf("1M, 10%%, batch 256: exact %.0f, graph at 288 %.0f", ex, gr)
	}
	// at 100k, 1%, batch 1 brute force is cheaper already at itopk 64
	if ex, gr := filterCost(100_000, 128, 1000, 1, 64); !(ex < gr) {
		t.Errorf("100k, 1%%, batch 1: exact %.0f, graph %.0f", ex, gr)
	}
}
