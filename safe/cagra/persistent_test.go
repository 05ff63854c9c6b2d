package cagra_test

import (
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// A persistent search is refused on every release, naming
// params.Persistent and why (it stalled on both real releases and crashed
// the process on 26.08): Search, Prepare and WarmUp alike.
func TestPersistentRefused(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	sp := f.sp.WithPersistentKernel(0.5, 0.9)
	check := func(what string, err error) {
		t.Helper()
		if !safetest.IsArg(err, "params.Persistent") || !strings.Contains(err.Error(), cagra.PersistentRefused) {
			t.Errorf("%s, persistent, on %s: %v, want an *ArgError naming params.Persistent with the reason", what, safe.Release(), err)
		}
	}
	check("Search", idx.Search(f.res, &sp, f.queries, f.n32, f.dist, nil))
	_, err := idx.Prepare(&sp, f.queries, f.n32, f.dist, nil)
	check("Prepare", err)
	check("WarmUp", idx.WarmUp(f.res, &sp, 1, 2, dlpack.Uint32))
	// The search it was refused for runs without it.
	sp.Persistent = false
	if err := idx.Search(f.res, &sp, f.queries, f.n32, f.dist, nil); err != nil {
		t.Fatal(err)
	}
}
