package cagra_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// TestSearchSlice: the one-call search from Go memory finds, per query,
// the exact nearest rows at a size where the real library's recall is 1.0
// (200×8, graph degree 16: CUVS_C_API.md), with default search params.
func TestSearchSlice(t *testing.T) {
	const n, d, q, kk = 200, 8, 20, 5
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(11, n, d)
	p := params(t)
	p.GraphDegree, p.IntermediateGraphDegree = 16, 32
	idx := build(t, res, hostMatrix(t, data, n, d), p)
	// Each query is a dataset row: it must find itself first.
	queries := data[:q*d]
	got, err := cagra.SearchSlice(res, idx, nil, queries, kk, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != q || got.K != kk {
		t.Fatalf("%d queries of %d results, want %d of %d", got.Len(), got.K, q, kk)
	}
	want := safetest.ExactKNN(data, queries, d, kk, safetest.L2, nil)
	found := 0
	for i := range q {
		ids, dist := got.Row(i)
		if ids[0] != int64(i) || dist[0] > 1e-4 {
			t.Errorf("query %d (row %d): first neighbour %d at %v, want itself at ~0", i, i, ids[0], dist[0])
		}
		for j := range kk {
			if ids[j] < 0 || ids[j] >= n {
				t.Fatalf("query %d: id %d out of range", i, ids[j])
			}
			if j > 0 && dist[j] < dist[j-1] {
				t.Errorf("query %d: distances not ascending: %v", i, dist)
			}
		}
		found += overlap(ids, want[i])
	}
	if recall := float64(found) / float64(q*kk); recall < 0.95 {
		t.Errorf("recall@%d = %.3f, want >= 0.95 (the real library: 1.0 at this size)", kk, recall)
	}
}

func overlap(got, want []int64) int {
	n := 0
	for _, g := range got {
		for _, w := range want {
			if g == w {
				n++
				break
			}
		}
	}
	return n
}

// TestSearchSliceRefusals: uint8 queries for a float32 index are refused
// with ErrInvalidArgument (the suite's TestIndex/SearchSlice and
// TestIndex/Closed refuse a short query and a closed index).
func TestSearchSliceRefusals(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	if _, err := cagra.SearchSlice(f.res, idx, &f.sp, make([]uint8, dim), k, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("uint8 queries for a float32 index: %v", err)
	}
}
