package dtypetest

import (
	"bytes"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/nndescent"
	"github.com/cuvs-go/cuvs/safe/refine"
)

// floor fails t when r is under min.
func floor(t testing.TB, what string, r, min float64) {
	t.Helper()
	t.Logf("%s: recall %.3f (floor %.2f)", what, r, min)
	if r < min {
		t.Errorf("%s: recall %.3f, want at least %.2f", what, r, min)
	}
}

func cagraParams(t testing.TB, m safe.Metric) *cagra.IndexParams {
	p, err := cagra.DefaultIndexParams()
	must(t, err)
	p.Metric, p.GraphDegree, p.IntermediateGraphDegree = m, 32, 64
	return &p
}

// CAGRA over int8/uint8 rows, L2Expanded and InnerProduct (cuVS's
// compute_distance_standard_matrix.json instantiates both, with
// CosineExpanded and L1, for int8 and uint8): recall, distances (cuVS
// divides 8-bit values by a power of two while it computes and scales the
// result back, so they are the integer distances), filtered recall, and a
// round trip that keeps the dtype.
func TestCagra(t *testing.T) { forTypes(t, testCagra[int8], testCagra[uint8]) }

func testCagra[T elem](t *testing.T, d *data[T]) {
	safetest.Check(t)
	res := safetest.Resources(t)
	sp := cagra.SearchParams{ITopKSize: 64}
	for _, m := range []safe.Metric{safe.L2Expanded, safe.InnerProduct} {
		idx, err := cagra.Build(res, hostMatrix(t, d.rows, rows, dim), cagraParams(t, m))
		must(t, err)
		safetest.Close(t, idx)
		if idx.DType() != d.dtype {
			t.Errorf("%s: DType %s, built from %s", m, idx.DType(), d.dtype)
		}
		got, err := cagra.SearchSlice(res, idx, &sp, d.queries, k, nil)
		must(t, err)
		c := &check[T]{t: t, what: "cagra " + m.String(), d: d, queries: d.queries, e: exactKNN(m, d.rows, d.queries, k, nil)}
		floor(t, c.what, c.recall(got.Neighbors, got.Distances, k, 1e-4, nil), 0.9)
		if m != safe.L2Expanded {
			continue
		}

		// filters: half the rows (the policy's post-filter), a tenth (the
		// graph search with a raised top-k; the exact path takes float
		// data only)
		for _, step := range []int{2, 10} {
			ok, allowed := allowEvery(step, 1)
			f, err := safe.NewBitsetFilterAllowing(res, rows, allowed)
			must(t, err)
			safetest.Close(t, f)
			fr, err := cagra.SearchSlice(res, idx, &sp, d.queries, k, f)
			must(t, err)
			fc := &check[T]{t: t, what: "cagra filtered 1/" + itoa(step), d: d, queries: d.queries, e: exactKNN(m, d.rows, d.queries, k, ok), allowed: ok}
			// a tenth allowed: cuVS's filtered walk with the top-k raised
			// to MaxFilterITopK loses more
			min := 0.85
			if step == 10 {
				min = 0.8
			}
			floor(t, fc.what, fc.recall(fr.Neighbors, fr.Distances, k, 1e-4, nil), min)
		}

		// round trip with the dataset: same dtype, same recall
		var buf bytes.Buffer
		_, err = idx.SerializeTo(res, &buf)
		must(t, err)
		back, err := cagra.DeserializeFrom(res, &buf)
		must(t, err)
		safetest.Close(t, back)
		if back.DType() != d.dtype || back.Rows() != rows || back.Dim() != dim {
			t.Errorf("deserialized: %s %d × %d, serialized %s %d × %d", back.DType(), back.Rows(), back.Dim(), d.dtype, rows, dim)
		}
		bg, err := cagra.SearchSlice(res, back, &sp, d.queries, k, nil)
		must(t, err)
		c.what = "cagra deserialized"
		floor(t, c.what, c.recall(bg.Neighbors, bg.Distances, k, 1e-4, nil), 0.9)
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func ivfFlatParams(t testing.TB, m safe.Metric) *ivfflat.IndexParams {
	p, err := ivfflat.DefaultIndexParams()
	must(t, err)
	p.Metric, p.NLists = m, 32
	return &p
}

// IVF-Flat over int8/uint8 rows (cuVS accumulates them in int32/uint32:
// exact), L2Expanded and InnerProduct (its metric_matrix.json has both for
// both types): recall with a quarter of the lists probed; every list probed
// is exact, so the rows' distances are the exact k nearest (ids compared by
// distance: integer distances tie); a filtered search probing every list
// is exact among the allowed rows; a round trip keeps the dtype and gives
// the same results.
func TestIvfFlat(t *testing.T) { forTypes(t, testIvfFlat[int8], testIvfFlat[uint8]) }

func testIvfFlat[T elem](t *testing.T, d *data[T]) {
	safetest.Check(t)
	res := safetest.Resources(t)
	for _, m := range []safe.Metric{safe.L2Expanded, safe.InnerProduct} {
		idx, err := ivfflat.Build(res, hostMatrix(t, d.rows, rows, dim), ivfFlatParams(t, m))
		must(t, err)
		safetest.Close(t, idx)
		if idx.DType() != d.dtype {
			t.Errorf("%s: DType %s, built from %s", m, idx.DType(), d.dtype)
		}
		c := &check[T]{t: t, what: "ivfflat " + m.String(), d: d, queries: d.queries, e: exactKNN(m, d.rows, d.queries, k, nil)}
		// inner product over 8-bit rows (uint8's all positive) clusters
		// worse: twice the probes
		probes := uint32(8)
		if m == safe.InnerProduct {
			probes = 16
		}
		got, err := ivfflat.SearchSlice(res, idx, &ivfflat.SearchParams{NProbes: probes}, d.queries, k, nil)
		must(t, err)
		floor(t, c.what+" "+itoa(int(probes))+" of 32 lists", c.recall(got.Neighbors, got.Distances, k, 1e-5, nil), 0.9)
		all := &ivfflat.SearchParams{NProbes: 32}
		ex, err := ivfflat.SearchSlice(res, idx, all, d.queries, k, nil)
		must(t, err)
		c.what += " every list"
		c.recall(ex.Neighbors, ex.Distances, k, 1e-5, nil)
		c.exactly(ex.Neighbors, k)
		if m != safe.L2Expanded {
			continue
		}

		// a tenth of the rows allowed: every list probed is exact
		ok, allowed := allowEvery(10, 3)
		f, err := safe.NewBitsetFilterAllowing(res, rows, allowed)
		must(t, err)
		safetest.Close(t, f)
		fc := &check[T]{t: t, what: "ivfflat filtered", d: d, queries: d.queries, e: exactKNN(m, d.rows, d.queries, k, ok), allowed: ok}
		fr, err := ivfflat.SearchSlice(res, idx, &ivfflat.SearchParams{FilterPath: safe.FilterExact}, d.queries, k, f)
		must(t, err)
		fc.recall(fr.Neighbors, fr.Distances, k, 1e-5, nil)
		fc.exactly(fr.Neighbors, k)
		fa, err := ivfflat.SearchSlice(res, idx, nil, d.queries, k, f)
		must(t, err)
		fc.what = "ivfflat filtered, FilterAuto"
		floor(t, fc.what, fc.recall(fa.Neighbors, fa.Distances, k, 1e-5, nil), 0.9)

		// round trip: same dtype, the same results
		var buf bytes.Buffer
		_, err = idx.SerializeTo(res, &buf)
		must(t, err)
		back, err := ivfflat.DeserializeFrom(res, &buf)
		must(t, err)
		safetest.Close(t, back)
		if back.DType() != d.dtype || back.Rows() != rows || back.Dim() != dim {
			t.Errorf("deserialized: %s %d × %d, serialized %s %d × %d", back.DType(), back.Rows(), back.Dim(), d.dtype, rows, dim)
		}
		bg, err := ivfflat.SearchSlice(res, back, all, d.queries, k, nil)
		must(t, err)
		sameResults(t, "ivfflat deserialized", ex, bg)
	}
}

// sameResults fails t unless b's rows hold a's distances and, where a
// row's distances do not tie, a's ids.
func sameResults(t testing.TB, what string, a, b *safe.Results) {
	t.Helper()
	bad := 0
	for i := range a.Neighbors {
		if a.Distances[i] != b.Distances[i] {
			if bad++; bad <= 3 {
				t.Errorf("%s: slot %d: distance %g, before %g", what, i, b.Distances[i], a.Distances[i])
			}
			continue
		}
		j := i % a.K
		tie := (j > 0 && a.Distances[i-1] == a.Distances[i]) || (j+1 < a.K && a.Distances[i+1] == a.Distances[i])
		if !tie && a.Neighbors[i] != b.Neighbors[i] {
			if bad++; bad <= 3 {
				t.Errorf("%s: slot %d: id %d, before %d", what, i, b.Neighbors[i], a.Neighbors[i])
			}
		}
	}
}

func ivfPqParams(t testing.TB, m safe.Metric) *ivfpq.IndexParams {
	p, err := ivfpq.DefaultIndexParams()
	must(t, err)
	p.Metric, p.NLists, p.PQDim, p.PQBits = m, 32, dim/2, 8
	return &p
}

// IVF-PQ over int8/uint8 rows (cuVS converts them to float for training
// and encoding), L2Expanded and InnerProduct: recall with half the lists
// probed; a filtered search (Index.NewFiltered without the dataset: its
// exact path is brute force, which takes float data only); a round trip
// keeps the dtype and the recall; refine of its candidates over the int8 /
// uint8 dataset gives the exact distances.
func TestIvfPq(t *testing.T) { forTypes(t, testIvfPq[int8], testIvfPq[uint8]) }

func testIvfPq[T elem](t *testing.T, d *data[T]) {
	safetest.Check(t)
	res := safetest.Resources(t)
	sp := &ivfpq.SearchParams{NProbes: 16}
	for _, m := range []safe.Metric{safe.L2Expanded, safe.InnerProduct} {
		idx, err := ivfpq.Build(res, hostMatrix(t, d.rows, rows, dim), ivfPqParams(t, m))
		must(t, err)
		safetest.Close(t, idx)
		if idx.DType() != d.dtype {
			t.Errorf("%s: DType %s, built from %s", m, idx.DType(), d.dtype)
		}
		c := &check[T]{t: t, what: "ivfpq " + m.String(), d: d, queries: d.queries, e: exactKNN(m, d.rows, d.queries, k, nil)}
		// inner product: every list probed, a lower floor (PQ's error
		// weighs more on uint8's all-positive rows)
		msp, min := sp, 0.8
		if m == safe.InnerProduct {
			msp, min = &ivfpq.SearchParams{NProbes: 32}, 0.7
		}
		got, err := ivfpq.SearchSlice(res, idx, msp, d.queries, k)
		must(t, err)
		floor(t, c.what, c.recall(got.Neighbors, nil, k, -1, nil), min)
		if m != safe.L2Expanded {
			continue
		}

		// filtered: half the rows
		ok, allowed := allowEvery(2, 0)
		f, err := safe.NewBitsetFilterAllowing(res, rows, allowed)
		must(t, err)
		safetest.Close(t, f)
		fs, err := idx.NewFiltered(res, sp, f, nil, nq, k)
		must(t, err)
		safetest.Close(t, fs)
		fr := &safe.Results{}
		must(t, ivfpq.SearchSliceFiltered(res, fs, d.queries, fr))
		fc := &check[T]{t: t, what: "ivfpq filtered 1/2", d: d, queries: d.queries, e: exactKNN(m, d.rows, d.queries, k, ok), allowed: ok}
		floor(t, fc.what, fc.recall(fr.Neighbors, nil, k, -1, nil), 0.8)

		// refine 4k candidates over the 8-bit dataset: exact distances,
		// and the exact k nearest among the candidates
		const kc = 4 * k
		cands, err := ivfpq.SearchSlice(res, idx, sp, d.queries, kc)
		must(t, err)
		testRefine(t, res, d, cands.Neighbors, kc)

		// round trip: same dtype, same recall
		var buf bytes.Buffer
		_, err = idx.SerializeTo(res, &buf)
		must(t, err)
		back, err := ivfpq.DeserializeFrom(res, &buf)
		must(t, err)
		safetest.Close(t, back)
		// cuvsIvfPqDeserialize does not set the handle's dtype (cuVS
		// records it in build and the first extend only): the loaded
		// index's DType is the zero DataType (package ivfpq's doc,
		// "Element types"), and it takes the 8-bit queries
		if back.DType() != (dlpack.DataType{}) || back.Rows() != rows || back.Dim() != dim {
			t.Errorf("deserialized: %s %d × %d, want the zero dtype (cuVS keeps none) %d × %d", back.DType(), back.Rows(), back.Dim(), rows, dim)
		}
		bg, err := ivfpq.SearchSlice(res, back, sp, d.queries, k)
		must(t, err)
		c.what = "ivfpq deserialized"
		floor(t, c.what, c.recall(bg.Neighbors, nil, k, -1, nil), 0.8)
	}
}

// testRefine re-ranks cands (nq × kc ids) over d's rows in device memory
// and checks the result against the exact k nearest among the candidates.
func testRefine[T elem](t *testing.T, res *safe.Resources, d *data[T], cands []int64, kc int) {
	t.Helper()
	ds := devMatrix(t, res, d.rows, rows, dim)
	qs := devMatrix(t, res, d.queries, nq, dim)
	cd := devMatrix(t, res, cands, nq, kc)
	nb := devMatrix(t, res, make([]int64, nq*k), nq, k)
	dd := devMatrix(t, res, make([]float32, nq*k), nq, k)
	must(t, refine.Refine(res, ds, qs, cd, nb, dd, safe.L2Expanded))
	ids, err := nb.ToHost(res)
	must(t, err)
	dists, err := dd.ToHost(res)
	must(t, err)
	// the exact answer among each query's candidates
	e := &exact{m: safe.L2Expanded, ids: make([][]int64, nq), dists: make([][]float64, nq)}
	for q := 0; q < nq; q++ {
		in := make([]bool, rows)
		for _, id := range cands[q*kc : (q+1)*kc] {
			if safe.Valid(id) {
				in[id] = true
			}
		}
		one := exactKNN(safe.L2Expanded, d.rows, d.queries[q*dim:(q+1)*dim], k, in)
		e.ids[q], e.dists[q] = one.ids[0], one.dists[0]
	}
	c := &check[T]{t: t, what: "refine", d: d, queries: d.queries, e: e}
	if r := c.recall(ids, dists, k, 1e-6, nil); r != 1 {
		t.Errorf("refine: recall@%d %.3f among the candidates, want 1 (exact)", k, r)
	}
	c.exactly(ids, k)
	c.e = exactKNN(safe.L2Expanded, d.rows, d.queries, k, nil)
	floor(t, "refine", c.recall(ids, dists, k, 1e-6, nil), 0.9)
}

// HNSW from a CAGRA index of int8/uint8 rows (hnswlib's integer L2 space,
// hnsw_dist_t: int for int8, unsigned for uint8): recall, the distances
// exact, and a round trip through the hnswlib format given the dtype.
// L2Expanded only: the integer spaces are L2 ones.
func TestHnsw(t *testing.T) { forTypes(t, testHnsw[int8], testHnsw[uint8]) }

func testHnsw[T elem](t *testing.T, d *data[T]) {
	safetest.Check(t)
	res := safetest.Resources(t)
	ci, err := cagra.Build(res, hostMatrix(t, d.rows, rows, dim), cagraParams(t, safe.L2Expanded))
	must(t, err)
	safetest.Close(t, ci)
	hp, err := hnsw.DefaultIndexParams()
	must(t, err)
	hp.Hierarchy = hnsw.HierarchyCPU
	idx, err := hnsw.FromCagra(res, ci, &hp)
	must(t, err)
	safetest.Close(t, idx)
	if idx.DType() != d.dtype {
		t.Errorf("DType %s, built from %s", idx.DType(), d.dtype)
	}
	search := func(idx *hnsw.Index) ([]int64, []float32) {
		r, err := hnsw.SearchSlice(res, idx, &hnsw.SearchParams{Ef: 64}, d.queries, k, nil)
		must(t, err)
		return r.Neighbors, r.Distances
	}
	c := &check[T]{t: t, what: "hnsw", d: d, queries: d.queries, e: exactKNN(safe.L2Expanded, d.rows, d.queries, k, nil)}
	ids, ds := search(idx)
	floor(t, c.what, c.recall(ids, ds, k, 0, nil), 0.9)

	var buf bytes.Buffer
	_, err = idx.SerializeTo(res, &buf)
	must(t, err)
	back, err := hnsw.DeserializeFrom(res, &buf, d.dtype, safe.L2Expanded, &hp)
	must(t, err)
	safetest.Close(t, back)
	if back.DType() != d.dtype || back.Dim() != dim {
		t.Errorf("deserialized: %s × %d, serialized %s × %d", back.DType(), back.Dim(), d.dtype, dim)
	}
	bids, bds := search(back)
	c.what = "hnsw deserialized"
	floor(t, c.what, c.recall(bids, bds, k, 0, nil), 0.9)
}

// NN-Descent over int8/uint8 rows (cuVS computes their distances in fp16
// on tensor cores: 8-bit values are exact in fp16, the products' sums in
// fp32): the graph against the exact kNN graph, by distance.
func TestNNDescent(t *testing.T) { forTypes(t, testNNDescent[int8], testNNDescent[uint8]) }

func testNNDescent[T elem](t *testing.T, d *data[T]) {
	safetest.Check(t)
	res := safetest.Resources(t)
	p, err := nndescent.DefaultIndexParams()
	must(t, err)
	p.Metric, p.GraphDegree, p.IntermediateGraphDegree = safe.L2Expanded, 16, 32
	idx, err := nndescent.Build(res, hostMatrix(t, d.rows, rows, dim), &p)
	must(t, err)
	safetest.Close(t, idx)
	g, err := idx.GraphSlice(res)
	must(t, err)
	floor(t, "nndescent", graphRecall(t, d.rows, g, idx.GraphDegree(), safe.L2Expanded), 0.8)
}

// graphRecall is a kNN graph's recall against the exact one, by distance
// (a listed row counts when it is as near as the exact deg-th nearest
// other row; the row itself, at distance 0, counts as a neighbour only
// where another row is at 0 too). It fails t on ids out of range or
// repeated.
func graphRecall[T elem](t testing.TB, v []T, g []uint32, deg int, m safe.Metric) float64 {
	t.Helper()
	n := len(v) / dim
	hits, bad := 0, 0
	best := make([]float64, 0, deg+1) // the deg nearest distances to other rows, nearest first
	for i := 0; i < n; i++ {
		best = best[:0]
		for j := 0; j < n; j++ {
			if j == i {
				continue
			}
			x := dist(m, v[i*dim:(i+1)*dim], v[j*dim:(j+1)*dim])
			if len(best) == deg && !nearer(m, x, best[deg-1]) {
				continue
			}
			p := len(best)
			for p > 0 && nearer(m, x, best[p-1]) {
				p--
			}
			best = append(best, 0)
			copy(best[p+1:], best[p:])
			best[p] = x
			if len(best) > deg {
				best = best[:deg]
			}
		}
		kth := best[deg-1]
		seen := map[uint32]bool{}
		for _, id := range g[i*deg : (i+1)*deg] {
			if int(id) >= n || seen[id] {
				if bad++; bad <= 5 {
					t.Errorf("row %d: id %d out of range or repeated", i, id)
				}
				continue
			}
			seen[id] = true
			if int(id) != i && !nearer(m, kth, dist(m, v[i*dim:(i+1)*dim], v[int(id)*dim:(int(id)+1)*dim])) {
				hits++
			}
		}
	}
	return float64(hits) / float64(n*deg)
}
