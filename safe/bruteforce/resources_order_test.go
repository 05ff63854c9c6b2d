package bruteforce_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// A Resources closed while an index built on it lives stays alive until
// the index is closed (on the real library, destroying the index after its
// handle crashed in cuvsBruteForceIndexDestroy): its Close succeeds, later
// calls on it refuse with ErrClosed, the index still searches on another
// Resources, and the handle is destroyed by the index's Close.
func TestCloseAfterResources(t *testing.T) {
	f := setup(t)
	built, err := safe.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := bruteforce.Build(built, f.dataset, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := live.Snapshot()["safe.Resources"]
	if err := built.Close(); err != nil {
		t.Fatal(err)
	}
	if err := built.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if err := built.Sync(); !errors.Is(err, safe.ErrClosed) {
		t.Fatalf("Sync on a closed Resources an index keeps: %v, want ErrClosed", err)
	}
	if n := live.Snapshot()["safe.Resources"]; n != before {
		t.Fatalf("%d live Resources after Close, want %d (kept by the index)", n, before)
	}
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, nil); err != nil {
		t.Fatal(err)
	}
	f.check(t, nil)
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if n := live.Snapshot()["safe.Resources"]; n != before-1 {
		t.Fatalf("%d live Resources after the index's Close, want %d", n, before-1)
	}
}
