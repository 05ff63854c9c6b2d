package cagra

import (
	"math"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// MaxFilterITopK is the largest internal top-k the policy raises a
// filtered graph search to; a filter that would need more takes the exact
// path. 256 is the largest top-k measured on the real library with a
// filter (issue 18's table): at 20% allowed cuVS's rule's 192 lies
// between the measured 128 and 256 on 20,000 rows, but fell below the
// floor on 5,000 (see filterITopK); at 10% even 256 kept only 0.947 of the unfiltered 0.985 (degree 64,
// itopk 64: below the floor of 0.955), so 10% and below go exact. Beyond
// 256 cuVS's single-CTA kernel merges its filtered top-k list with a
// two-warp network whose filtered behaviour nobody has measured (the
// double imitates the one-warp list up to 256: internal/cuvsdouble,
// dbl_cagra_graph.c), and the graph search's cost grows with the top-k
// (about one iteration per entry) while brute force's does not. With
// filterITopK's floor of itopk/f, a search at itopk 64 goes exact below 25%
// allowed.
const MaxFilterITopK = 256

// filterITopK is the internal top-k a graph search of k neighbors with a
// filter allowing the fraction f of the rows uses, from the caller's itopk:
// cuVS's own rule for its multi-CTA kernel (search_plan.cuh,
// adjust_search_params: k/f + (itopk-k)/sqrt(f)), rounded up to 32 as cuVS
// rounds it, but at least itopk/f below PostFilterFrom (below). Checked on
// the double fitted to the real library (internal/cuvsdouble
// TestCagraFilterTable), 20,000 × 64, 200 queries: cuVS's rule raised
// itopk 64 to 192 at 20% allowed, degree 32 (real library at itopk 128 /
// 256: 0.887 / 0.966, unfiltered at 64: 0.925), and to 288 at 10% (real
// at 256: 0.930). At 50% it is 96: the real
// library kept 0.954 of its unfiltered 0.985 at degree 64, itopk 64, but
// only 0.870 of 0.925 at degree 32 (0.947 at itopk 128). From 75% allowed
// the top-k stays, so that a filter allowing most rows costs what an
// unfiltered search costs.
//
// Below PostFilterFrom the top-k is raised further, to at least itopk/f
// (the same number of allowed entries in the list as an unfiltered walk
// keeps): cuVS's rule gave 192 at 20% allowed, and on the real library
// (26.08, 5,000 × 64, degree 64, itopk 64, 100 queries) the graph path at
// 192 kept only 0.949 of an unfiltered 1.000, under the floor of 0.970 (on
// 20,000 rows the 26.06 table puts 192 between 0.962 at 128 and 0.985 at
// 256). itopk/f is 320 there, past MaxFilterITopK: from 25% allowed down
// (at itopk 64) the policy goes exact whatever the cost model says, where
// before it could pick a graph search at 192 from about 13% up.
func filterITopK(itopk, k int64, f float64) int64 {
	if f >= 0.75 || f <= 0 {
		return itopk
	}
	adj := int64(float64(k)/f + float64(itopk-k)/math.Sqrt(f))
	if f < PostFilterFrom {
		adj = max(adj, int64(math.Ceil(float64(itopk)/f)))
	}
	adj = (adj + 31) / 32 * 32
	return max(itopk, adj)
}

// The cost table the model is fitted to: the real library on an H200
// (issue 18; docs/CUVS_C_API.md), D = 128, k = 10, search + sync, median
// of 25, CAGRA degree 32 (NN-Descent), itopk 64, graph path forced.
// Microseconds, [N: 100k, 1M][allowed: 1%, 10%, 100%][batch: 1, 16, 256].
//
//	| N, allowed | brute force bs 1 / 16 / 256 | CAGRA graph bs 1 / 16 / 256 |
//	| 100k, 100% | 608 / 755 / 779             | 360 / 366 / 413             |
//	| 100k, 10%  | 186 / 433 / 761             | 388 / 406 / 484             |
//	| 100k, 1%   | 135 / 161 / 213             | 389 / 400 / 482             |
//	| 1M, 100%   | 873 / 997 / 6980            | 373 / 381 / 429             |
//	| 1M, 10%    | 695 / 3880 / 6300           | 454 / 461 / 546             |
//	| 1M, 1%     | 210 / 490 / 805             | 405 / 440 / 531             |
var (
	costN     = [2]float64{1e5, 1e6}
	costFrac  = [3]float64{0.01, 0.1, 1}
	costBatch = [3]float64{1, 16, 256}
	costExact = [2][3][3]float64{
		{{135, 161, 213}, {186, 433, 761}, {608, 755, 779}},
		{{210, 490, 805}, {695, 3880, 6300}, {873, 997, 6980}},
	}
	costGraph = [2][3][3]float64{
		{{389, 400, 482}, {388, 406, 484}, {360, 366, 413}},
		{{405, 440, 531}, {454, 461, 546}, {373, 381, 429}},
	}
)

// filterCost estimates, in microseconds on the table's machine, an exact
// search and a graph search at internal top-k itopk of a batch of queries
// against rows rows of dim dimensions with allowed rows allowed. The model:
// the table read by interpolation, linear in log N, log allowed fraction
// and log batch, clamped at the table's edges (smaller indexes and batches
// cost what the smallest measured do, fractions under 1% what 1% does);
// brute force's cost scaled by (1 + dim/128)/2 (half of it the work over
// the dimensions, half fixed: a guess, the table has one D); the graph's by
// itopk/64 (its iterations grow with the top-k: cuVS runs about itopk of
// them, search_plan.cuh). Where the table is clear (one path ≥ 25% dearer)
// the model picks what the table shows (TestFilterCostModel).
func filterCost(rows, dim, allowed, batch, itopk int64) (exact, graph float64) {
	n := clampLog(float64(rows), costN[:])
	f := clampLog(float64(allowed)/float64(max(rows, 1)), costFrac[:])
	b := clampLog(float64(batch), costBatch[:])
	exact = interp3(&costExact, n, f, b) * (1 + float64(dim)/128) / 2
	graph = interp3(&costGraph, n, f, b) * float64(itopk) / 64
	return exact, graph
}

// clampLog returns x's position on the axis (index and fraction), in log
// scale, clamped to the axis's ends.
func clampLog(x float64, axis []float64) axisPos {
	if !(x > axis[0]) {
		return axisPos{0, 0}
	}
	last := len(axis) - 1
	if x >= axis[last] {
		return axisPos{last - 1, 1}
	}
	i := 0
	for x > axis[i+1] {
		i++
	}
	t := (math.Log(x) - math.Log(axis[i])) / (math.Log(axis[i+1]) - math.Log(axis[i]))
	return axisPos{i, t}
}

type axisPos struct {
	i int
	t float64
}

// interp3 interpolates the table linearly (in log of the cost) between
// the points around (n, f, b).
func interp3(tab *[2][3][3]float64, n, f, b axisPos) float64 {
	v := 0.0
	for dn := 0; dn < 2; dn++ {
		for df := 0; df < 2; df++ {
			for db := 0; db < 2; db++ {
				w := weight(n.t, dn) * weight(f.t, df) * weight(b.t, db)
				if w == 0 {
					continue
				}
				v += w * math.Log(tab[min(n.i+dn, 1)][min(f.i+df, 2)][min(b.i+db, 2)])
			}
		}
	}
	return math.Exp(v)
}

func weight(t float64, d int) float64 {
	if d == 0 {
		return 1 - t
	}
	return t
}

// testPlanITopK, when not 0, replaces the graph path's raised top-k (set
// by tests, to make a second pass happen); it turns the post-filter path
// off. testPostK, when not 0, replaces the post-filter path's candidate
// count (set by tests, to leave queries short).
var testPlanITopK, testPostK int64

// The post-filter path (filterPlan.post): from PostFilterFrom to 75% of
// the rows allowed the policy searches the graph unfiltered for
// k' = 2k/f candidates and drops the disallowed ones on the host.
//
// Why: cuVS's filtered walk expands rejected rows but then removes their
// slots from its internal top-k list in a way that leaves the list out of
// order (its single-CTA kernel shifts the entries in address order, and the
// next merge drops entries of the top-k: internal/cuvsdouble's
// dbl_cagra_graph.c copies it), so every rejected parent costs recall; an
// unfiltered walk keeps its list in order. On the double fitted to the
// real library (20,000 × 64, 200 queries, k 10, recall against the exact
// answer among the allowed rows), an unfiltered walk's 40 best with the
// disallowed ones dropped kept 0.959 at degree 64, itopk 64 (unfiltered
// 0.975: the floor is 0.945), where the filtered walk needs itopk 96 (the
// real library's filtered walk gave 0.954 against 0.985 at itopk 64); at
// degree 32 it kept 0.900 at itopk 64 (unfiltered 0.937, below the floor)
// and 0.949 at 96, so a graph of degree under 64, or an itopk under 64,
// keeps cuVS's raised top-k (96 at 50%). With k' = itopk instead of 2k/f
// nothing changed (0.959, 0.900); at 33% allowed the 61 candidates kept
// 0.942 at degree 64, itopk 64 (below the floor), hence the lower bound of
// 50%, and from 75% the filtered walk keeps the top-k and reads nothing
// back. A query finds fewer than k allowed among 2k/f candidates with
// probability 3·10⁻⁴ at 50% (binomial); the second pass catches it. Not
// measured on the real library: its unfiltered walk is the one the double
// copies, but the 40-deep recall is the double's.
const PostFilterFrom = 0.45

// filterPlan is how one filtered search runs.
type filterPlan struct {
	exact  bool         // exact brute force
	itopk  int64        // graph path: the internal top-k to search with
	second bool         // graph path: redo the queries that came back short exactly
	post   int64        // graph path: search unfiltered for this many candidates and filter them on the host (0: cuVS's filtered walk)
	filter *safe.Filter // the bitset, for the post-filter path
}

// planFilter chooses the path of a search of batch queries for k neighbors
// with filter f over rows rows of an index whose graph has degree degree
// (see SearchParams); a positive FilterPlanQueries replaces batch. canExact
// is "" when the index can take the exact path, else why not.
func (s *SearchParams) planFilter(f *safe.Filter, rows, dim, degree, k, batch int64, canExact string) filterPlan {
	plan := filterPlan{itopk: int64(s.ITopKSize)}
	if s.FilterPlanQueries > 0 {
		batch = int64(s.FilterPlanQueries)
	}
	if f == nil || f.Kind() != safe.Bitset {
		return plan
	}
	a := int64(f.Allowed())
	switch {
	case s.FilterPath == safe.FilterIndex || s.FilterExactBelow < 0:
		return plan
	case s.FilterPath == safe.FilterExact:
		plan.exact = true
		return plan
	case a >= rows:
		return plan // every row allowed: the unfiltered search
	case s.FilterExactBelow > 0 && (a < k || float64(a) < s.FilterExactBelow*float64(rows)):
		plan.exact = true // the caller's fixed threshold
		return plan
	case a < k && canExact == "":
		plan.exact = true // graph search cannot fill k slots
		return plan
	}
	frac := float64(a) / float64(rows)
	itopk := int64(s.ITopKSize)
	it := filterITopK(itopk, k, frac)
	if canExact != "" {
		// no exact path for this index: the best graph search there is
		plan.itopk = min(max(it, itopk), max(MaxFilterITopK, itopk))
		return plan
	}
	post := int64(0)
	if frac >= PostFilterFrom && frac < 0.75 && testPlanITopK == 0 {
		post = min(int64(math.Ceil(2*float64(k)/frac)), rows) // at least k: allowed ≥ k here
		if testPostK != 0 {
			post = testPostK
		}
		if degree >= 64 && itopk >= 64 {
			it = itopk
		}
		it = max(it, (post+31)/32*32)
	}
	if s.FilterExactBelow == 0 {
		if it > MaxFilterITopK {
			plan.exact = true
			return plan
		}
		if ex, gr := filterCost(rows, dim, a, batch, it); ex < gr {
			plan.exact = true
			return plan
		}
	}
	plan.itopk, plan.second = min(it, max(MaxFilterITopK, itopk)), frac < 1
	if post > 0 && post <= plan.itopk {
		plan.post, plan.filter = post, f
	}
	if testPlanITopK != 0 {
		plan.itopk = testPlanITopK
	}
	return plan
}

// PlanFilter returns the path a Search with params (nil: cuVS's defaults)
// for k neighbors of queries queries would take with filter:
// safe.FilterExact (brute force over the dataset) or safe.FilterIndex (the
// graph, with the policy's raised internal top-k), FilterAuto resolved as
// SearchParams.FilterPath says. No filter, or one letting every row
// through, is the graph; a bitmap is exact. It searches nothing and
// allocates nothing; a closed index is refused (safe.ErrClosed).
func (idx *Index) PlanFilter(params *SearchParams, filter *safe.Filter, k, queries int) (safe.FilterPath, error) {
	const op = "cagra.Index.PlanFilter"
	c, err := kind.Enter(idx, op)
	if err != nil {
		return safe.FilterAuto, err
	}
	defer c.Leave()
	if params == nil {
		params = &zeroSearchParams
	}
	sp, err := params.withDefaults(op)
	if err != nil {
		return safe.FilterAuto, err
	}
	if err := sp.validate(op); err != nil {
		return safe.FilterAuto, err
	}
	if k < 1 || queries < 1 {
		return safe.FilterAuto, kit.Argf(op, "k", "k %d and queries %d: want both at least 1", k, queries)
	}
	if filter != nil && filter.Kind() == safe.Bitmap {
		return safe.FilterExact, nil
	}
	plan := sp.planFilter(filter, idx.c.Rows.Load(), idx.c.Dim, idx.degree.Load(), int64(k), int64(queries), idx.noExact())
	if plan.exact {
		return safe.FilterExact, nil
	}
	return safe.FilterIndex, nil
}
