package cagra_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// TestFilterPlanQueries: at 50% allowed on a degree-32 graph of 128
// dimensions the policy takes the exact path for one query and the graph
// for 24 (the cost model); with FilterPlanQueries 1 a search of 24 queries
// is planned as one query's, and each of its rows holds what a search of
// that query alone returns. A negative value is refused.
func TestFilterPlanQueries(t *testing.T) {
	safetest.Check(t)
	const n, d, nq, k = 2000, 128, 24, 10
	res := safetest.Resources(t)
	data := safetest.Random(31, n, d)
	queries := safetest.Random(32, nq, d)
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = 32, 64
	idx := build(t, res, deviceMatrix(t, res, data, n, d), p)
	rng := rand.New(rand.NewPCG(5, 6))
	var allowed []int64
	for _, i := range rng.Perm(n)[:n/2] {
		allowed = append(allowed, int64(i))
	}
	filter, err := safe.NewBitsetFilterAllowing(res, n, allowed)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, filter)

	sp := cagra.SearchParams{ITopKSize: 64}
	one, it1, post1, err := cagra.PlanOf(idx, sp, filter, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	many, itN, postN, err := cagra.PlanOf(idx, sp, filter, k, nq)
	if err != nil {
		t.Fatal(err)
	}
	if one == many && it1 == itN && post1 == postN {
		t.Fatalf("one query and %d plan alike (exact %v, itopk %d, post %d): the test shows nothing", nq, one, it1, post1)
	}
	if !one || many {
		t.Fatalf("plans: one query exact %v, %d queries exact %v; the cost table (filterpolicy.go) gives exact and graph", one, nq, many)
	}
	sp.FilterPlanQueries = 1
	asOne, it, post, err := cagra.PlanOf(idx, sp, filter, k, nq)
	if err != nil {
		t.Fatal(err)
	}
	if asOne != one || it != it1 || post != post1 {
		t.Fatalf("%d queries planned as one: exact %v itopk %d post %d, want one query's exact %v itopk %d post %d", nq, asOne, it, post, one, it1, post1)
	}

	dist := newDevice[float32](t, res, nq, k)
	nb := newDevice[int64](t, res, nq, k)
	if err := idx.Search(res, &sp, deviceMatrix(t, res, queries, nq, d), nb, dist, filter); err != nil {
		t.Fatal(err)
	}
	got := toHost[int64](t, res, mustView(t, nb))
	sp.FilterPlanQueries = 0
	d1 := newDevice[float32](t, res, 1, k)
	n1 := newDevice[int64](t, res, 1, k)
	for q := range nq {
		if err := idx.Search(res, &sp, deviceMatrix(t, res, queries[q*d:(q+1)*d], 1, d), n1, d1, filter); err != nil {
			t.Fatal(err)
		}
		alone := toHost[int64](t, res, mustView(t, n1))
		if !slices.Equal(got[q*k:(q+1)*k], alone) {
			// exact both ways: the same rows (random data has no ties)
			t.Errorf("query %d in a batch of %d: %v, alone: %v", q, nq, got[q*k:(q+1)*k], alone)
		}
		for _, id := range got[q*k : (q+1)*k] {
			if id < 0 || id >= n || !slices.Contains(allowed, id) {
				t.Fatalf("query %d: row %d, which the filter forbids", q, id)
			}
		}
	}

	sp.FilterPlanQueries = -1
	if err := idx.Search(res, &sp, deviceMatrix(t, res, queries, nq, d), nb, dist, filter); !isArg(err, "params.FilterPlanQueries") {
		t.Errorf("FilterPlanQueries -1: %v, want an ArgError naming it", err)
	}
}

func mustView[T interface{ View() (V, error) }, V any](t *testing.T, m T) V {
	t.Helper()
	v, err := m.View()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
