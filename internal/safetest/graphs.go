package safetest

import (
	"testing"
)

// GraphRecall returns the recall of a kNN graph over data (rows × dim,
// row-major): graph holds k ids per row, row-major, and its rows are
// compared with each row's exact k nearest rows under dist, counting the
// row itself only when self is true (ties to the smaller id, which costs a
// graph that breaks ties otherwise at most the tied slots). It also fails t
// on ids out of range, repeats within a row, and, with self false, a row
// listing itself.
func GraphRecall[N ~uint32 | ~int64](t testing.TB, data []float32, dim int, graph []N, k int, dist Metric, self bool) float64 {
	t.Helper()
	rows := len(data) / dim
	if len(graph) != rows*k {
		t.Fatalf("graph of %d ids for %d rows of %d", len(graph), rows, k)
	}
	hits, bad := 0, 0
	for i := 0; i < rows; i++ {
		allowed := func(j int) bool { return self || j != i }
		want := ExactKNN(data, data[i*dim:(i+1)*dim], dim, k, dist, allowed)[0]
		in := make(map[int64]bool, k)
		for _, w := range want {
			in[w] = true
		}
		seen := make(map[int64]bool, k)
		for _, g := range graph[i*k : (i+1)*k] {
			id := int64(g)
			switch {
			case id < 0 || id >= int64(rows):
				if bad++; bad < 5 {
					t.Errorf("row %d: id %d out of range", i, id)
				}
			case seen[id]:
				if bad++; bad < 5 {
					t.Errorf("row %d: id %d twice", i, id)
				}
			case !self && id == int64(i):
				if bad++; bad < 5 {
					t.Errorf("row %d lists itself", i)
				}
			case in[id]:
				hits++
			}
			seen[id] = true
		}
	}
	return float64(hits) / float64(rows*k)
}
