package cagra_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// filterRecall is recall@k of got (n × k ids, sentinels where unfilled)
// against want (each query's exact answer among the allowed rows), and the
// number of queries with fewer valid ids than want has.
func filterRecall(got []int64, want [][]int64, k int) (float64, int) {
	hit, total, short := 0, 0, 0
	for q, w := range want {
		row := got[q*k : (q+1)*k]
		valid := 0
		for _, id := range row {
			if safe.Valid(id) && id != int64(cagra.SentinelID) {
				valid++
			}
		}
		if valid < len(w) {
			short++
		}
		for _, id := range w {
			total++
			for _, g := range row {
				if g == id {
					hit++
					break
				}
			}
		}
	}
	if total == 0 {
		return 1, short
	}
	return float64(hit) / float64(total), short
}

// The filter policy keeps recall@10 within 0.03 of the unfiltered search at
// every allowed fraction, 100% down to 3 rows, on uniform random data of 64
// dimensions whose queries are dataset rows (issue 18's setting, where the
// double is fitted to the real library's filtered graph search), with the
// default build (degree 64) and with degree 32, itopk 64; and no query comes
// back short (fewer valid rows than min(k, allowed)). Through Search,
// Prepared, SearchSlice and the batcher's Searcher. 5,000 rows always;
// 20,000 (the table's size) unless -short or -race.
func TestFilterRecallFloor(t *testing.T) {
	sizes := []int{5000}
	if !testing.Short() && !race.Enabled { // about a minute more, several under -race
		sizes = append(sizes, 20000)
	}
	for _, n := range sizes {
		for _, deg := range []int{64, 32} {
			t.Run(fmt.Sprintf("%d_degree%d", n, deg), func(t *testing.T) { filterRecallFloor(t, n, deg) })
		}
	}
}

func filterRecallFloor(t *testing.T, n, deg int) {
	const d, nq, k = 64, 100, 10
	res := safetest.Resources(t)
	data := safetest.Random(18, n, d)
	queries := data[:nq*d]
	ds := deviceMatrix(t, res, data, n, d)
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.GraphDegree = deg
	idx := build(t, res, ds, p)
	q := deviceMatrix(t, res, queries, nq, d)
	n32 := newDevice[uint32](t, res, nq, k)
	n64 := newDevice[int64](t, res, nq, k)
	dist := newDevice[float32](t, res, nq, k)
	var sp cagra.SearchParams // cuVS's defaults: itopk 64, the policy
	read := func(u32 bool) []int64 {
		t.Helper()
		if err := res.Sync(); err != nil {
			t.Fatal(err)
		}
		out := make([]int64, nq*k)
		if u32 {
			h, err := n32.ToHost(res)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range h {
				out[i] = int64(v)
			}
			return out
		}
		h, err := n64.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if err := idx.Search(res, &sp, q, n64, dist, nil); err != nil {
		t.Fatal(err)
	}
	base, _ := filterRecall(read(false), safetest.ExactKNN(data, queries, d, k, safetest.L2, nil), k)
	floor := base - 0.03
	rng := rand.New(rand.NewPCG(uint64(n), uint64(deg)))
	for _, frac := range []float64{1, 0.5, 0.2, 0.1, 0.02, 0.001, -3} {
		var allowed []int64
		if frac < 0 { // that many rows
			for _, i := range rng.Perm(n)[:3] {
				allowed = append(allowed, int64(i))
			}
		} else {
			for i := 0; i < n; i++ {
				if frac == 1 || rng.Float64() < frac {
					allowed = append(allowed, int64(i))
				}
			}
		}
		set := make([]bool, n)
		for _, i := range allowed {
			set[i] = true
		}
		want := safetest.ExactKNN(data, queries, d, k, safetest.L2, func(i int) bool { return set[i] })
		filter, err := safe.NewBitsetFilterAllowing(res, n, allowed)
		if err != nil {
			t.Fatal(err)
		}
		for _, pol := range []struct {
			name  string
			below float64
		}{{"auto", 0}, {"graph unless < k", 1e-9}} {
			if pol.below > 0 && frac > 0 && cagra.FilterITopK(64, k, frac) > cagra.MaxFilterITopK {
				// The graph path with the top-k capped at MaxFilterITopK
				// (256), where the policy's raise goes past it (below 25%
				// allowed at itopk 64): on the real library even 256 falls
				// below the floor at 10% allowed (issue 18's table), and
				// cuVS's 192 did at 20% on these 5,000 rows (0.949 of
				// 1.000, 26.08), which is why FilterAuto goes exact there.
				continue
			}
			sp.FilterExactBelow = pol.below
			filterPaths(t, fmt.Sprintf("%d of %d allowed, %s", len(allowed), n, pol.name), pol.below == 0, res, idx, &sp, q, n32, n64, dist, queries, filter, want, floor, base, read)
		}
		if err := filter.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// filterPaths checks the recall floor through every search path (all
// false: Search only).
func filterPaths(t *testing.T, name string, all bool, res *safe.Resources, idx *cagra.Index, sp *cagra.SearchParams, q *safe.DeviceMatrix[float32], n32 *safe.DeviceMatrix[uint32], n64 *safe.DeviceMatrix[int64], dist *safe.DeviceMatrix[float32], queries []float32, filter *safe.Filter, want [][]int64, floor, base float64, read func(bool) []int64) {
	const k = 10
	{
		check := func(path string, got []int64) {
			t.Helper()
			r, short := filterRecall(got, want, k)
			t.Logf("%s, %s: recall %.3f (unfiltered %.3f), %d short", name, path, r, base, short)
			if r < floor || short > 0 {
				t.Errorf("%s, %s: recall %.3f (floor %.3f), %d queries short", name, path, r, floor, short)
			}
		}
		if err := idx.Search(res, sp, q, n64, dist, filter); err != nil {
			t.Fatal(err)
		}
		check("Search int64", read(false))
		if !all {
			return // the graph path's cost on the double: one path is enough
		}
		if err := idx.Search(res, sp, q, n32, dist, filter); err != nil {
			t.Fatal(err)
		}
		check("Search uint32", read(true))
		pr, err := idx.Prepare(sp, q, n32, dist, filter)
		if err != nil {
			t.Fatal(err)
		}
		if err := pr.Run(res); err != nil {
			t.Fatal(err)
		}
		if err := pr.Close(); err != nil {
			t.Fatal(err)
		}
		check("Prepared uint32", read(true))
		got, err := cagra.SearchSlice(res, idx, sp, queries, k, filter)
		if err != nil {
			t.Fatal(err)
		}
		check("SearchSlice", got.Neighbors)
		s, err := batch.CAGRA(idx, sp, filter)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SearchBatch(res, q, n64, dist); err != nil {
			t.Fatal(err)
		}
		check("batch.CAGRA", read(false))
	}
}

// Every filtered path allocates nothing on the Go heap per search, as the
// unfiltered one: exact (fewer rows than k, uint32 and int64 neighbors; at
// least k rows, uint32), the policy's graph search with its read-back of
// the results, forced graph and forced exact; through Search and Prepared.
func TestFilterAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	every := make([]int64, 0, rows)
	for i := int64(0); i < rows; i += 2 {
		every = append(every, i)
	}
	for _, c := range []struct {
		name    string
		allowed []int64
		path    safe.FilterPath
		below   float64
	}{
		{"3 rows, exact", []int64{1, 100, 150}, safe.FilterAuto, 0},
		{"half, auto", every, safe.FilterAuto, 0},
		{"half, policy's graph path", every, safe.FilterAuto, 1e-9},
		{"half, forced graph", every, safe.FilterIndex, 0},
		{"half, forced exact", every, safe.FilterExact, 0},
	} {
		filter, err := safe.NewBitsetFilterAllowing(f.res, rows, c.allowed)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, filter)
		sp := f.sp
		sp.FilterPath, sp.FilterExactBelow = c.path, c.below
		for _, u32 := range []bool{true, false} {
			measure := func(what string, run func() error) {
				t.Helper()
				if err := run(); err != nil { // builds the exact index, sizes the scratch
					t.Fatal(err)
				}
				if a := testing.AllocsPerRun(10, func() {
					if err := run(); err != nil {
						t.Fatal(err)
					}
				}); a != 0 {
					t.Errorf("%s, uint32 %v, %s: %v allocations per search", c.name, u32, what, a)
				}
			}
			var p *cagra.Prepared
			if u32 {
				measure("Search", func() error { return idx.Search(f.res, &sp, f.queries, f.n32, f.dist, filter) })
				p, err = idx.Prepare(&sp, f.queries, f.n32, f.dist, filter)
			} else {
				measure("Search", func() error { return idx.Search(f.res, &sp, f.queries, f.n64, f.dist, filter) })
				p, err = idx.Prepare(&sp, f.queries, f.n64, f.dist, filter)
			}
			if err != nil {
				t.Fatal(err)
			}
			measure("Prepared.Run", func() error { return p.Run(f.res) })
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The second pass redoes exactly the queries the graph search left short
// and only those: with the graph path held at itopk 64 (SetPlanITopK), rows
// that came back full are the graph's own, short rows the exact answer among
// the allowed rows; when most of the batch is short, all of it is exact.
func TestFilterSecondPass(t *testing.T) {
	const n, d, nq, k = 5000, 64, 100, 10
	res := safetest.Resources(t)
	data := safetest.Random(7, n, d)
	queries := data[:nq*d]
	idx := build(t, res, deviceMatrix(t, res, data, n, d), func() cagra.IndexParams {
		p, err := cagra.DefaultIndexParams()
		if err != nil {
			t.Fatal(err)
		}
		p.GraphDegree = 32
		return p
	}())
	q := deviceMatrix(t, res, queries, nq, d)
	dist := newDevice[float32](t, res, nq, k)
	n32 := newDevice[uint32](t, res, nq, k)
	n64 := newDevice[int64](t, res, nq, k)
	cagra.SetPlanITopK(64)
	defer cagra.SetPlanITopK(0)
	rng := rand.New(rand.NewPCG(3, 4))
	partial, whole := false, false
	for _, frac := range []float64{0.2, 0.16, 0.13, 0.12, 0.11, 0.1, 0.01} {
		var allowed []int64
		set := make([]bool, n)
		for i := 0; i < n; i++ {
			if rng.Float64() < frac {
				allowed = append(allowed, int64(i))
				set[i] = true
			}
		}
		filter, err := safe.NewBitsetFilterAllowing(res, n, allowed)
		if err != nil {
			t.Fatal(err)
		}
		want := safetest.ExactKNN(data, queries, d, k, safetest.L2, func(i int) bool { return set[i] })
		for _, u32 := range []bool{false, true} {
			run := func(sp *cagra.SearchParams) []int64 {
				t.Helper()
				var err error
				out := make([]int64, nq*k)
				if u32 {
					err = idx.Search(res, sp, q, n32, dist, filter)
					if err == nil {
						var h []uint32
						if h, err = n32.ToHost(res); err == nil {
							for i, v := range h {
								out[i] = int64(v)
							}
						}
					}
				} else if err = idx.Search(res, sp, q, n64, dist, filter); err == nil {
					out, err = n64.ToHost(res)
				}
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			graph := run(&cagra.SearchParams{FilterPath: safe.FilterIndex})
			got := run(&cagra.SearchParams{FilterExactBelow: 1e-9})
			short := 0
			for qi := 0; qi < nq; qi++ {
				valid := 0
				for _, id := range graph[qi*k : (qi+1)*k] {
					if cagra.Valid(id) {
						valid++
					}
				}
				row := got[qi*k : (qi+1)*k]
				if valid < min(k, len(allowed)) {
					short++
					for j, id := range want[qi] {
						if row[j] != id {
							t.Fatalf("%d allowed, uint32 %v: short query %d: %v, want the exact %v", len(allowed), u32, qi, row, want[qi])
						}
					}
				}
			}
			if short == 0 {
				continue
			}
			if 4*short <= nq {
				partial = true
				if !race.Enabled { // the second pass allocates nothing either
					sp := cagra.SearchParams{FilterExactBelow: 1e-9}
					search := func() {
						var err error
						if u32 {
							err = idx.Search(res, &sp, q, n32, dist, filter)
						} else {
							err = idx.Search(res, &sp, q, n64, dist, filter)
						}
						if err != nil {
							t.Fatal(err)
						}
					}
					if a := testing.AllocsPerRun(5, search); a != 0 {
						t.Errorf("%d allowed, uint32 %v: second pass: %v allocations per search", len(allowed), u32, a)
					}
				}
				for qi := 0; qi < nq; qi++ {
					for j := 0; j < k; j++ {
						if g := graph[qi*k+j]; cagra.Valid(g) && got[qi*k+j] != g && !isShort(graph[qi*k:(qi+1)*k], k) {
							t.Fatalf("%d allowed: full query %d changed: %v, the graph's %v", len(allowed), qi, got[qi*k:(qi+1)*k], graph[qi*k:(qi+1)*k])
						}
					}
				}
			} else {
				whole = true
				if r, s := filterRecall(got, want, k); r != 1 || s != 0 {
					t.Errorf("%d allowed, most short: recall %.3f, %d short, want the exact answer", len(allowed), r, s)
				}
			}
			t.Logf("%d allowed, uint32 %v: %d of %d queries short", len(allowed), u32, short, nq)
		}
		if err := filter.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if !partial || !whole {
		t.Errorf("second pass of some (%v) and of most (%v) of a batch not both seen", partial, whole)
	}
}

func isShort(row []int64, k int) bool {
	for _, id := range row[:k] {
		if !cagra.Valid(id) {
			return true
		}
	}
	return false
}

// From 45% to 75% allowed the policy searches the graph unfiltered for
// 2k/f candidates and keeps the allowed ones (the post-filter path): at
// cuVS's default degree 64 with the caller's itopk 64, at degree 32 with
// cuVS's raised 96; not at 40%, 20% or 80%. A full query's row is exactly the
// unfiltered search's k' candidates with the disallowed ones dropped, in
// order; a short one (SetPostK holding k' at 26 or 10) is the exact answer
// among the allowed rows, through the second pass or, when most of the
// batch is short, the exact path; uint32 and int64 neighbors alike, and
// the second pass allocates nothing either.
func TestPostFilterPath(t *testing.T) {
	const n, d, nq, k = 5000, 64, 100, 10
	res := safetest.Resources(t)
	data := safetest.Random(9, n, d)
	queries := data[:nq*d]
	ds := deviceMatrix(t, res, data, n, d)
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.GraphDegree = 32
	deg32 := build(t, res, ds, p)
	p.GraphDegree = 64
	idx := build(t, res, ds, p)
	rng := rand.New(rand.NewPCG(9, 10))
	mk := func(frac float64) (*safe.Filter, []bool) {
		var allowed []int64
		set := make([]bool, n)
		for _, i := range rng.Perm(n)[:int(frac*n)] {
			allowed = append(allowed, int64(i))
			set[i] = true
		}
		f, err := safe.NewBitsetFilterAllowing(res, n, allowed)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, f)
		return f, set
	}
	forced := cagra.SearchParams{FilterExactBelow: 1e-9} // the policy's graph path
	for _, c := range []struct {
		frac         float64
		ix           *cagra.Index
		itopk, post  int
		name, degree string
	}{
		{0.5, idx, 64, 40, "50%", "64"}, {0.5, deg32, 96, 40, "50%", "32"}, {0.6, idx, 64, 34, "60%", "64"},
		{0.45, idx, 64, 45, "45%", "64"}, {0.4, idx, 160, 0, "40%", "64"}, {0.2, idx, 256, 0, "20%", "64"}, {0.8, idx, 64, 0, "80%", "64"},
	} {
		f, _ := mk(c.frac)
		exact, it, post, err := cagra.PlanOf(c.ix, forced, f, k, nq)
		if err != nil {
			t.Fatal(err)
		}
		if exact || it != c.itopk || post != c.post {
			t.Errorf("%s allowed, degree %s: plan exact %v itopk %d post %d, want graph, itopk %d, post %d", c.name, c.degree, exact, it, post, c.itopk, c.post)
		}
	}
	filter, set := mk(0.5)
	want := safetest.ExactKNN(data, queries, d, k, safetest.L2, func(i int) bool { return set[i] })
	q := deviceMatrix(t, res, queries, nq, d)
	dist := newDevice[float32](t, res, nq, k)
	n32 := newDevice[uint32](t, res, nq, k)
	n64 := newDevice[int64](t, res, nq, k)
	partial, whole := false, false
	for _, kc := range []int{40, 26, 10} {
		cagra.SetPostK(kc)
		// the reference: the unfiltered search's kc best, filtered here
		cn := newDevice[int64](t, res, nq, kc)
		cd := newDevice[float32](t, res, nq, kc)
		if err := idx.Search(res, &cagra.SearchParams{}, q, cn, cd, nil); err != nil {
			t.Fatal(err)
		}
		cand, err := cn.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		for _, u32 := range []bool{false, true} {
			var got []int64
			run := func() error {
				if u32 {
					return idx.Search(res, &forced, q, n32, dist, filter)
				}
				return idx.Search(res, &forced, q, n64, dist, filter)
			}
			if err := run(); err != nil {
				t.Fatal(err)
			}
			if u32 {
				h, err := n32.ToHost(res)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range h {
					got = append(got, int64(v))
				}
			} else if got, err = n64.ToHost(res); err != nil {
				t.Fatal(err)
			}
			short := 0
			for qi := 0; qi < nq; qi++ {
				var ref []int64
				for _, id := range cand[qi*kc : (qi+1)*kc] {
					if len(ref) < k && cagra.Valid(id) && set[id] {
						ref = append(ref, id)
					}
				}
				row, exp := got[qi*k:(qi+1)*k], ref
				if len(ref) < k {
					short++
					exp = want[qi]
				}
				for j := range exp {
					if row[j] != exp[j] {
						t.Fatalf("k' %d, uint32 %v: query %d: %v, want %v (%d candidates allowed)", kc, u32, qi, row, exp, len(ref))
					}
				}
			}
			switch {
			case short == 0:
			case 4*short <= nq:
				partial = true
				if !race.Enabled {
					if a := testing.AllocsPerRun(5, func() {
						if err := run(); err != nil {
							t.Fatal(err)
						}
					}); a != 0 {
						t.Errorf("k' %d, uint32 %v: second pass: %v allocations per search", kc, u32, a)
					}
				}
			default:
				whole = true
			}
			t.Logf("k' %d, uint32 %v: %d of %d queries short", kc, u32, short, nq)
		}
	}
	cagra.SetPostK(0)
	// an index smaller than 2k/f: the candidates are all its rows
	small := build(t, res, deviceMatrix(t, res, data[:30*d], 30, d), func() cagra.IndexParams {
		p, err := cagra.DefaultIndexParams()
		if err != nil {
			t.Fatal(err)
		}
		p.GraphDegree, p.IntermediateGraphDegree = 8, 16
		return p
	}())
	few := []int64{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28}
	fs, err := safe.NewBitsetFilterAllowing(res, 30, few)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, fs)
	if _, _, post, err := cagra.PlanOf(small, forced, fs, k, 5); err != nil || post != 30 {
		t.Errorf("30 rows, 15 allowed: post-filter candidates %d (%v), want 30", post, err)
	}
	got, err := cagra.SearchSlice(res, small, &forced, queries[:5*d], k, fs)
	if err != nil {
		t.Fatal(err)
	}
	evens := safetest.ExactKNN(data[:30*d], queries[:5*d], d, k, safetest.L2, func(i int) bool { return i%2 == 0 })
	if r, s := filterRecall(got.Neighbors, evens, k); r < 0.9 || s != 0 {
		t.Errorf("30 rows, 15 allowed: recall %.3f, %d short", r, s)
	}
	if !partial || !whole {
		t.Errorf("second pass of some (%v) and of most (%v) of a batch not both seen", partial, whole)
	}
}
