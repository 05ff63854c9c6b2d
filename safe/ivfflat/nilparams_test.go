package ivfflat_test

import (
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// TestNilParamsMeanDefaults: nil params are cuVS's defaults, for a build
// and for a search (the same results as DefaultSearchParams).
func TestNilParamsMeanDefaults(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, rows, nq, 10)
	idx, err := ivfflat.Build(f.res, f.dataset, nil)
	must(t, err)
	defer idx.Close()
	ip, err := ivfflat.DefaultIndexParams()
	must(t, err)
	if idx.NLists() != int(ip.NLists) {
		t.Errorf("built with nil params: %d lists, the default is %d", idx.NLists(), ip.NLists)
	}
	sp, err := ivfflat.DefaultSearchParams()
	must(t, err)
	search := func(p *ivfflat.SearchParams) ([]int64, []float32) {
		must(t, idx.Search(f.res, p, f.queries, f.neighbors, f.distances, nil))
		n, err := f.neighbors.ToHost(f.res)
		must(t, err)
		d, err := f.distances.ToHost(f.res)
		must(t, err)
		return n, d
	}
	wantN, wantD := search(&sp)
	gotN, gotD := search(nil)
	if !slices.Equal(gotN, wantN) || !slices.Equal(gotD, wantD) {
		t.Errorf("search with nil params differs from DefaultSearchParams")
	}
}
