package ivfflat_test

import (
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// One rule for search parameters: a zero field means cuVS's default, so
// the zero SearchParams searches exactly as nil params and as
// DefaultSearchParams do, and a params with only some fields set takes the
// defaults for the rest.
func TestZeroSearchParamsAreDefaults(t *testing.T) {
	safetest.Check(t)
	const n, d, nq, kk = 400, 16, 8, 5
	res := safetest.Resources(t)
	data := safetest.Random(41, n, d)
	ds, err := safe.DeviceMatrixFrom(res, data, n, d)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	p, err := ivfflat.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.NLists = 16
	idx, err := ivfflat.Build(res, ds, &p)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	def, err := ivfflat.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	queries := safetest.Random(42, nq, d)
	search := func(sp *ivfflat.SearchParams) *safe.Results {
		t.Helper()
		r, err := ivfflat.SearchSlice(res, idx, sp, queries, kk, nil)
		if err != nil {
			t.Fatalf("params %+v: %v", sp, err)
		}
		return r
	}
	same := func(name string, a, b *safe.Results) {
		t.Helper()
		for q := range nq {
			an, ad := a.Row(q)
			bn, bd := b.Row(q)
			if !slices.Equal(an, bn) || !slices.Equal(ad, bd) {
				t.Errorf("%s, query %d: %v %v, want %v %v", name, q, an, ad, bn, bd)
			}
		}
	}
	want := search(&def)
	same("zero SearchParams", search(&ivfflat.SearchParams{}), want)
	same("nil params", search(nil), want)
	few := def
	few.NProbes = 2
	same("only NProbes set", search(&ivfflat.SearchParams{NProbes: 2}), search(&few))
}
