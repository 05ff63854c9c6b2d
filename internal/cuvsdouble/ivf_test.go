package cuvsdouble_test

import (
	"strings"
	"testing"
)

// The IVF-Flat, IVF-SQ and refine functions are in the table (callable,
// failable, counted) and their objects have counters. Their behaviour is
// tested through safe/ivfflat, safe/ivfsq and safe/refine, whose tests
// also hold on a real libcuvs_c.
func TestIVFFunctionsAndCounters(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	n := 0
	for _, fn := range f.ctl.Functions() {
		if strings.HasPrefix(fn, "cuvsIvfFlat") || strings.HasPrefix(fn, "cuvsIvfSq") || fn == "cuvsRefine" {
			n++
			if !f.ctl.Has(fn) || !f.ctl.CanFail(fn) {
				t.Errorf("%s: exported %v, can fail %v", fn, f.ctl.Has(fn), f.ctl.CanFail(fn))
			}
		}
	}
	if n != 30 {
		t.Errorf("%d IVF-Flat/IVF-SQ/refine functions, want 14 + 15 + 1", n)
	}
	cs := f.ctl.Counters()
	for _, k := range []string{"ivf_flat_index_params", "ivf_flat_search_params", "ivf_flat_index", "ivf_flat_index_data",
		"ivf_sq_index_params", "ivf_sq_search_params", "ivf_sq_index", "ivf_sq_index_data"} {
		if _, ok := cs[k]; !ok {
			t.Errorf("no counter %q", k)
		}
	}
}
