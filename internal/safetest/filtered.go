package safetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// FilterData is the data set of the filtered-recall tests: N rows of D
// uniform values, the first NQ rows as queries, and every query's squared
// L2 distance to every row (computed in Go once).
type FilterData struct {
	N, D, NQ, K   int
	Data, Queries []float32
	dist          []float32 // NQ × N
}

// NewFilterData makes the data set (seed 1, as Random).
func NewFilterData(n, d, nq, k int) *FilterData {
	f := &FilterData{N: n, D: d, NQ: nq, K: k, Data: Random(1, n, d)}
	f.Queries = f.Data[:nq*d]
	f.dist = make([]float32, nq*n)
	for q := 0; q < nq; q++ {
		qv := f.Queries[q*d : (q+1)*d]
		row := f.dist[q*n : (q+1)*n]
		for i := range row {
			v := f.Data[i*d : (i+1)*d]
			var s float32
			for j, x := range qv {
				e := x - v[j]
				s += e * e
			}
			row[i] = s
		}
	}
	return f
}

// FilterCase is one filter of the tests: the allowed ids and a lookup.
type FilterCase struct {
	Name    string
	Allowed []int64
	OK      []bool
}

// FilterFractions are the fractions of rows the tests allow (issue 18's),
// then Cases adds one of 3 rows.
var FilterFractions = []float64{1, 0.5, 0.2, 0.1, 0.02, 0.001}

// Cases returns the filters: each of FilterFractions of the rows, then 3
// rows, picked at random with a fixed seed.
func (f *FilterData) Cases() []FilterCase {
	r := rand.New(rand.NewPCG(5, 6))
	var out []FilterCase
	add := func(name string, n int) {
		c := FilterCase{Name: name, OK: make([]bool, f.N)}
		for _, i := range r.Perm(f.N)[:n] {
			c.Allowed = append(c.Allowed, int64(i))
			c.OK[i] = true
		}
		out = append(out, c)
	}
	for _, fr := range FilterFractions {
		add(fmt.Sprintf("%g%%", fr*100), int(math.Round(fr*float64(f.N))))
	}
	add("3rows", 3)
	return out
}

// Exact returns each query's K nearest rows among those ok allows (nil:
// all), nearest first, ties to the smaller id.
func (f *FilterData) Exact(ok []bool) [][]int64 {
	out := make([][]int64, f.NQ)
	idx := make([]int, 0, f.N)
	for q := range out {
		row := f.dist[q*f.N : (q+1)*f.N]
		idx = idx[:0]
		for i := 0; i < f.N; i++ {
			if ok == nil || ok[i] {
				idx = append(idx, i)
			}
		}
		sort.Slice(idx, func(a, b int) bool {
			if row[idx[a]] != row[idx[b]] {
				return row[idx[a]] < row[idx[b]]
			}
			return idx[a] < idx[b]
		})
		for j := 0; j < f.K && j < len(idx); j++ {
			out[q] = append(out[q], int64(idx[j]))
		}
	}
	return out
}

// Recall is the fraction of exact's ids found in got's rows (k per row).
func Recall(got []int64, k int, exact [][]int64) float64 {
	hit, total := 0, 0
	for q, want := range exact {
		for _, id := range want {
			total++
			for _, g := range got[q*k : (q+1)*k] {
				if g == id {
					hit++
					break
				}
			}
		}
	}
	if total == 0 {
		return 1
	}
	return float64(hit) / float64(total)
}

// CheckFilled fails t unless every row of results (ids and distances, k
// per row) has its first min(k, allowed) slots filled (a finite distance)
// with allowed ids, and nothing filled after allowed slots.
func CheckFilled(t testing.TB, what string, ids []int64, dists []float32, k int, c *FilterCase) {
	t.Helper()
	want := min(k, len(c.Allowed))
	bad := 0
	for q := 0; q < len(ids)/k; q++ {
		for j := 0; j < k; j++ {
			id, d := ids[q*k+j], float64(dists[q*k+j])
			filled := !math.IsInf(d, 0) && !math.IsNaN(d)
			switch {
			case j < want && (!filled || id < 0 || int(id) >= len(c.OK) || !c.OK[id]):
				bad++
				if bad <= 3 {
					t.Errorf("%s: query %d slot %d: id %d distance %g, want an allowed row (%d allowed)", what, q, j, id, d, len(c.Allowed))
				}
			case j >= len(c.Allowed) && filled:
				t.Errorf("%s: query %d slot %d: id %d distance %g, but only %d rows are allowed", what, q, j, id, d, len(c.Allowed))
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d bad slots in all", what, bad)
	}
}
