package ivfpq_test

import (
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// TestNilParamsMeanDefaults: nil params are cuVS's defaults, for a build
// and for a search (the same results as DefaultSearchParams).
func TestNilParamsMeanDefaults(t *testing.T) {
	f := setup(t)
	idx, err := ivfpq.Build(f.res, f.dataset, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	ip, err := ivfpq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	if idx.NLists() != int(ip.NLists) {
		t.Errorf("built with nil params: %d lists, the default is %d", idx.NLists(), ip.NLists)
	}
	sp, err := ivfpq.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	wantN, wantD := results(t, f, idx, &sp)
	gotN, gotD := results(t, f, idx, nil)
	if !slices.Equal(gotN, wantN) || !slices.Equal(gotD, wantD) {
		t.Errorf("search with nil params differs from DefaultSearchParams")
	}
}
