package ivfflat_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// TestSearchSlice: the one-call search from Go memory returns, per query,
// what Index.Search returns into device buffers.
func TestSearchSlice(t *testing.T) {
	safetest.Check(t)
	const kk = 10
	f := newFixture(t, rows, nq, kk)
	idx := f.build(t, params(t))
	must(t, idx.Search(f.res, nil, f.queries, f.neighbors, f.distances, nil))
	wantN, err := f.neighbors.ToHost(f.res)
	must(t, err)
	wantD, err := f.distances.ToHost(f.res)
	must(t, err)
	got, err := ivfflat.SearchSlice(f.res, idx, nil, f.qs, kk, nil)
	must(t, err)
	if got.Len() != nq || !slices.Equal(got.Neighbors, wantN) || !slices.Equal(got.Distances, wantD) {
		t.Errorf("SearchSlice differs from Search")
	}
	if ids, _ := got.Row(nq - 1); !slices.Equal(ids, wantN[(nq-1)*kk:]) {
		t.Errorf("Row(%d) = %v", nq-1, ids)
	}
	if _, err := ivfflat.SearchSlice(f.res, idx, nil, f.qs[:dim-1], kk, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("a short query: %v", err)
	}
}
