package cagra_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// An index closed after every Resources it was built, searched (the exact
// path's brute-force index) and extended on: on the real library that order
// crashed the process (SIGSEGV in cuvsBruteForceIndexDestroy from the exact
// path's release, in cuvsCagraIndexDestroy from Close), since cuVS frees an
// index's memory on the stream and memory resources of the handle it was
// allocated with. Each Resources' Close succeeds and refuses later calls;
// the handles stay alive until the index is freed (safetest.Check counts
// them, and the double records a destroy after its handle as a violation).
func TestCloseAfterResources(t *testing.T) {
	f := setup(t)
	newRes := func() *safe.Resources {
		r, err := safe.NewResources()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	built, searched, extended := newRes(), newRes(), newRes()
	p := params(t)
	idx, err := cagra.Build(built, f.dataset, &p)
	if err != nil {
		t.Fatal(err)
	}
	every := make([]int64, 0, rows)
	for i := int64(0); i < rows; i += 2 {
		every = append(every, i)
	}
	filter, err := safe.NewBitsetFilterAllowing(f.res, rows, every)
	if err != nil {
		t.Fatal(err)
	}
	defer filter.Close()
	sp := f.sp
	sp.FilterPath = safe.FilterExact
	if err := idx.Search(searched, &sp, f.queries, f.n32, f.dist, filter); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*safe.Resources{built, searched} {
		if err := r.Close(); err != nil {
			t.Fatalf("Close of a Resources an index keeps: %v", err)
		}
	}
	if err := idx.Search(searched, &sp, f.queries, f.n32, f.dist, filter); !errors.Is(err, safe.ErrClosed) {
		t.Fatalf("a search on a closed Resources: %v, want ErrClosed", err)
	}
	// Extend releases the exact path's index (kept Resources still alive)
	// and reallocates the index's memory on extended.
	if err := idx.Extend(extended, f.dataset, nil); err != nil {
		t.Fatal(err)
	}
	if err := extended.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
}
