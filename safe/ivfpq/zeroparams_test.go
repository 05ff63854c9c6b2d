package ivfpq_test

import (
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
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
	p, err := ivfpq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.NLists, p.PQDim, p.PQBits = 16, 8, 8
	idx, err := ivfpq.Build(res, ds, &p)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	def, err := ivfpq.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	queries := safetest.Random(42, nq, d)
	search := func(sp *ivfpq.SearchParams) *safe.Results {
		t.Helper()
		r, err := ivfpq.SearchSlice(res, idx, sp, queries, kk)
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
	same("zero SearchParams", search(&ivfpq.SearchParams{}), want)
	same("nil params", search(nil), want)
	few := def
	few.NProbes = 2
	same("only NProbes set", search(&ivfpq.SearchParams{NProbes: 2}), search(&few))
}
