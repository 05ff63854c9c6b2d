package ivfpq_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// TestSearchSlice: the one-call search from Go memory returns, per query,
// what Index.Search returns into device buffers.
func TestSearchSlice(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	wantN, wantD := results(t, f, idx, &f.sp)
	got, err := ivfpq.SearchSlice(f.res, idx, &f.sp, f.qs, k)
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != nq || !slices.Equal(got.Neighbors, wantN) || !slices.Equal(got.Distances, wantD) {
		t.Errorf("SearchSlice differs from Search")
	}
	if _, err := ivfpq.SearchSlice(f.res, idx, &f.sp, f.qs, 0); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("k = 0: %v", err)
	}
}
