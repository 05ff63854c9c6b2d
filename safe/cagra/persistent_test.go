package cagra_test

import (
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// On cuVS 26.08 a persistent search is refused, naming params.Persistent
// and why (it stalled and crashed the process on the real library); on
// 26.06 it runs.
func TestPersistentRefusedOn2608(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	sp := f.sp.WithPersistentKernel(0.5, 0.9)
	err := idx.Search(f.res, &sp, f.queries, f.n32, f.dist, nil)
	if safe.Release() != "26.08" {
		if err != nil {
			t.Fatalf("a persistent search on %s: %v", safe.Release(), err)
		}
		return
	}
	if !safetest.IsArg(err, "params.Persistent") || !strings.Contains(err.Error(), cagra.PersistentRefused2608) {
		t.Fatalf("a persistent search on 26.08: %v, want an *ArgError naming params.Persistent", err)
	}
}
