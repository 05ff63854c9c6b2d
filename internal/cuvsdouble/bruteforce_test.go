package cuvsdouble_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

func TestBruteForceExact(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	const n, dim, nq, k = 150, 7, 9, 10
	rng := newRand()
	data := randomMatrix(rng, n, dim)
	queries := randomMatrix(rng, nq, dim)
	ds := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer f.drop(ds)
	q := f.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	defer f.drop(q)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, nq, k)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
	defer f.drop(d)

	for _, metric := range []int{capi.L2Expanded, capi.L2SqrtExpanded, capi.InnerProduct, capi.CosineExpanded, capi.L1} {
		idx := capi.Must(f.lib.BFCreate())
		f.must(f.lib.BFBuild(f.res, ds.t, metric, 2, idx))
		f.must(f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{}))
		wantI, wantD := exactKNN(data, n, dim, queries, k, metric, nil, false)
		checkKNN(t, "metric", capi.CopyOut[int64](nb.b.p, nq*k), capi.CopyOut[float32](d.b.p, nq*k), k, wantI, wantD)
		f.must(f.lib.BFDestroy(idx))
	}
}

func TestBruteForceFilters(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	const n, dim, nq, k = 70, 5, 4, 6
	rng := newRand()
	data := randomMatrix(rng, n, dim)
	queries := randomMatrix(rng, nq, dim)
	ds := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer f.drop(ds)
	q := f.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	defer f.drop(q)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, nq, k)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
	defer f.drop(d)
	idx := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(idx)) }()
	f.must(f.lib.BFBuild(f.res, ds.t, capi.L2Expanded, 0, idx))

	// bitset: every third row
	allowed := func(_, i int) bool { return i%3 == 0 }
	bs := f.words(bitsetOf(n, func(i int) bool { return allowed(0, i) }))
	defer f.drop(bs)
	f.must(f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{Words: bs.t, Type: capi.Bitset}))
	wantI, wantD := exactKNN(data, n, dim, queries, k, capi.L2Expanded, allowed, false)
	checkKNN(t, "bitset", capi.CopyOut[int64](nb.b.p, nq*k), capi.CopyOut[float32](d.b.p, nq*k), k, wantI, wantD)

	// bitmap: query q may see rows i with (i+q)%4 == 0, and query 3 only two rows
	bm := func(qq, i int) bool {
		if qq == 3 {
			return i == 10 || i == 20
		}
		return (i+qq)%4 == 0
	}
	words := make([]uint32, (n*nq+31)/32)
	for qq := 0; qq < nq; qq++ {
		for i := 0; i < n; i++ {
			if bm(qq, i) {
				b := qq*n + i
				words[b/32] |= 1 << (b % 32)
			}
		}
	}
	bmt := f.words(words)
	defer f.drop(bmt)
	f.must(f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{Words: bmt.t, Type: capi.Bitmap}))
	gotI := capi.CopyOut[int64](nb.b.p, nq*k)
	gotD := capi.CopyOut[float32](d.b.p, nq*k)
	wantI, wantD = exactKNN(data, n, dim, queries, k, capi.L2Expanded, bm, false)
	checkKNN(t, "bitmap", gotI[:3*k], gotD[:3*k], k, wantI[:3], wantD[:3])
	// Query 3 sees 2 rows, fewer than k; the filter lets 55 of 280 pairs
	// through (sparsity 0.80 < 0.9): cuVS's dense path fills the rest with
	// excluded rows at distance +Inf.
	checkKNN(t, "bitmap query 3", gotI[3*k:3*k+2], gotD[3*k:3*k+2], 2, [][]int64{wantI[3][:2]}, [][]float32{wantD[3][:2]})
	for j := 2; j < k; j++ {
		if gotI[3*k+j] != int64(j-2) || !math.IsInf(float64(gotD[3*k+j]), 1) {
			t.Fatalf("query 3 past its 2 rows: %v %v, want excluded rows 0.. at +Inf", gotI[3*k:], gotD[3*k:])
		}
	}

	// a bitset shorter than the index: the real library reads past its end
	short := f.words(make([]uint32, 2))
	defer f.drop(short)
	err := f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{Words: short.t, Type: capi.Bitset})
	if err == nil || !strings.Contains(err.Error(), "filter too short") {
		t.Fatalf("got %v", err)
	}
	f.expectViolations("reads past its end")
}

// A filter letting fewer than k rows through: cuVS's sparse path (90% or
// more of the (query, row) pairs filtered out) leaves such a query's
// outputs uninitialised (garbage ids, NaN distances, not even the allowed
// rows), and writes nothing at all when no row is allowed; its dense path
// pads with excluded rows at +Inf (-FLT_MAX for InnerProduct).
func TestBruteForceFilterFewerThanK(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	const n, dim, nq, k = 100, 4, 3, 5
	data := randomMatrix(newRand(), n, dim)
	ds := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer f.drop(ds)
	q := f.f32(capi.CUDA, capi.CUDA, nq, dim, data[:nq*dim])
	defer f.drop(q)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, nq, k)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
	defer f.drop(d)
	search := func(metric int, allowed func(i int) bool) ([]int64, []float32) {
		t.Helper()
		idx := capi.Must(f.lib.BFCreate())
		defer func() { f.must(f.lib.BFDestroy(idx)) }()
		f.must(f.lib.BFBuild(f.res, ds.t, metric, 0, idx))
		bs := f.words(bitsetOf(n, allowed))
		defer f.drop(bs)
		capi.CopyIn(nb.b.p, []int64{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7})
		f.must(f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{Words: bs.t, Type: capi.Bitset}))
		return capi.CopyOut[int64](nb.b.p, nq*k), capi.CopyOut[float32](d.b.p, nq*k)
	}

	// 3 of 100 rows: sparse path, every output garbage.
	ids, dist := search(capi.L2Expanded, func(i int) bool { return i == 0 || i == 1 || i == 2 })
	for j := range ids {
		if ids[j] >= 0 && ids[j] < n || !math.IsNaN(float64(dist[j])) {
			t.Fatalf("slot %d: id %d distance %v, want garbage (ids %v)", j, ids[j], dist[j], ids)
		}
	}
	again, _ := search(capi.L2Expanded, func(i int) bool { return i < 3 })
	if !slices.Equal(ids, again) {
		t.Errorf("garbage not deterministic: %v then %v", ids, again)
	}

	// No row: nothing written.
	ids, _ = search(capi.L2Expanded, func(int) bool { return false })
	for _, id := range ids {
		if id != 7 {
			t.Fatalf("outputs written with no row allowed: %v", ids)
		}
	}

	// 4 of 100 rows, InnerProduct: sparse too.
	ids, _ = search(capi.InnerProduct, func(i int) bool { return i%25 == 0 })
	if ids[0] >= 0 && ids[0] < n {
		t.Errorf("sparse InnerProduct: id %d, want garbage", ids[0])
	}

	// 11 of 100 rows (sparsity 0.89), k = 13: the dense path, its 11 rows
	// then the excluded rows 0 and 2 at the masked distance.
	nb13 := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, nq, 13)
	defer f.drop(nb13)
	d13 := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, 13)
	defer f.drop(d13)
	for _, metric := range []int{capi.L2Expanded, capi.InnerProduct} {
		idx := capi.Must(f.lib.BFCreate())
		f.must(f.lib.BFBuild(f.res, ds.t, metric, 0, idx))
		allowed := func(_, i int) bool { return i%9 == 1 }
		bs := f.words(bitsetOf(n, func(i int) bool { return allowed(0, i) }))
		f.must(f.lib.BFSearch(f.res, idx, q.t, nb13.t, d13.t, capi.Filter{Words: bs.t, Type: capi.Bitset}))
		gotI, gotD := capi.CopyOut[int64](nb13.b.p, nq*13), capi.CopyOut[float32](d13.b.p, nq*13)
		wantI, wantD := exactKNN(data, n, dim, data[:nq*dim], 11, metric, allowed, false)
		masked := float32(math.Inf(1))
		if metric == capi.InnerProduct {
			masked = -math.MaxFloat32
		}
		for qq := 0; qq < nq; qq++ {
			checkKNN(t, "dense path", gotI[qq*13:qq*13+11], gotD[qq*13:qq*13+11], 11, wantI[qq:qq+1], wantD[qq:qq+1])
			if pad := gotI[qq*13+11 : qq*13+13]; pad[0] != 0 || pad[1] != 2 || gotD[qq*13+11] != masked || gotD[qq*13+12] != masked {
				t.Errorf("metric %d query %d: padding %v at %v, want rows 0 and 2 at %v", metric, qq, pad, gotD[qq*13+11:qq*13+13], masked)
			}
		}
		f.drop(bs)
		f.must(f.lib.BFDestroy(idx))
	}
}

// Brute force's metrics, as cuVS's (knn_brute_force.cuh): the build takes
// any metric value; an unfiltered search THROWs on the metrics dense
// pairwise distance lacks (once there is a query and a row), ASSERTs that
// Haversine rows have 2 dimensions, and computes Haversine, JensenShannon
// and KLDivergence.
func TestBruteForceMetrics(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	search := func(metric, n, dim, nq, k int, data, queries []float32) ([]int64, []float32, error) {
		ds := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
		defer f.drop(ds)
		q := f.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
		defer f.drop(q)
		nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, nq, k)
		defer f.drop(nb)
		d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
		defer f.drop(d)
		idx := capi.Must(f.lib.BFCreate())
		defer func() { f.must(f.lib.BFDestroy(idx)) }()
		f.must(f.lib.BFBuild(f.res, ds.t, metric, 2, idx))
		err := f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{})
		return capi.CopyOut[int64](nb.b.p, nq*k), capi.CopyOut[float32](d.b.p, nq*k), err
	}
	rng := newRand()
	data := randomMatrix(rng, 20, 4)
	for _, m := range []int{capi.BrayCurtis, 11 /* JaccardExpanded */, 19 /* DiceExpanded */, capi.BitwiseHamming, 100, 12345} {
		_, _, err := search(m, 20, 4, 20, 3, data, data)
		if err == nil || !strings.Contains(err.Error(), "exception occurred! file=") ||
			!strings.Contains(err.Error(), fmt.Sprintf(": Unknown or unsupported distance metric '%d'!", m)) {
			t.Fatalf("metric %d: %v", m, err)
		}
		if _, _, err := search(m, 20, 4, 0, 3, data, nil); err != nil { // no query, no tile
			t.Fatalf("metric %d, no queries: %v", m, err)
		}
	}
	_, _, err := search(capi.Haversine, 20, 4, 20, 3, data, data)
	if err == nil || !strings.Contains(err.Error(), "exception occurred! file=") ||
		!strings.Contains(err.Error(), ": Haversine distance requires 2 dimensions (latitude / longitude).") {
		t.Fatalf("Haversine, 4 dimensions: %v", err)
	}

	// positive rows for the divergences; (latitude, longitude) for Haversine
	pos := make([]float32, len(data))
	for i, v := range data {
		pos[i] = float32(math.Abs(float64(v))) + 0.05
	}
	geo := randomMatrix(rng, 30, 2)
	for i := range geo {
		geo[i] *= 1.5
	}
	kl := func(q, x []float32) (s float64) {
		for j := range q {
			s += float64(q[j]) * math.Log(float64(q[j])/float64(x[j]))
		}
		return s / 2
	}
	js := func(q, x []float32) (s float64) {
		for j := range q {
			a, b := float64(q[j]), float64(x[j])
			m := (a + b) / 2
			s += a*math.Log(a/m) + b*math.Log(b/m)
		}
		return math.Sqrt(s / 2)
	}
	hav := func(q, x []float32) float64 {
		s0 := math.Sin((float64(q[0]) - float64(x[0])) / 2)
		s1 := math.Sin((float64(q[1]) - float64(x[1])) / 2)
		return 2 * math.Asin(math.Sqrt(s0*s0+math.Cos(float64(q[0]))*math.Cos(float64(x[0]))*s1*s1))
	}
	for _, c := range []struct {
		name      string
		metric    int
		rows, dim int
		data      []float32
		ref       func(q, x []float32) float64
	}{
		{"KLDivergence", capi.KLDivergence, 20, 4, pos, kl},
		{"JensenShannon", capi.JensenShannon, 20, 4, pos, js},
		{"Haversine", capi.Haversine, 30, 2, geo, hav},
	} {
		const nq, k = 6, 25
		queries := c.data[:nq*c.dim]
		kk := min(k, c.rows)
		ids, dist, err := search(c.metric, c.rows, c.dim, nq, kk, c.data, queries)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for qi := 0; qi < nq; qi++ {
			q := queries[qi*c.dim : (qi+1)*c.dim]
			all := make([]float64, c.rows)
			for i := range all {
				all[i] = c.ref(q, c.data[i*c.dim:(i+1)*c.dim])
			}
			slices.Sort(all)
			for j := 0; j < kk; j++ {
				id := ids[qi*kk+j]
				if id < 0 || id >= int64(c.rows) {
					t.Fatalf("%s: query %d slot %d: id %d", c.name, qi, j, id)
				}
				want := c.ref(q, c.data[int(id)*c.dim:(int(id)+1)*c.dim])
				if g := float64(dist[qi*kk+j]); math.Abs(g-want) > 1e-5*math.Max(1, want) || math.Abs(g-all[j]) > 1e-5*math.Max(1, want) {
					t.Fatalf("%s: query %d slot %d: row %d at %v, want %v (the %d-th nearest at %v)", c.name, qi, j, id, g, want, j, all[j])
				}
			}
		}
	}
	// haversine_knn's block select fills slots past the rows with its start
	// values
	ids, dist, err := search(capi.Haversine, 3, 2, 2, 5, geo[:6], geo[:4])
	if err != nil {
		t.Fatal(err)
	}
	for q := 0; q < 2; q++ {
		for j := 3; j < 5; j++ {
			if ids[q*5+j] != math.MaxInt64 || dist[q*5+j] != math.MaxFloat32 {
				t.Fatalf("query %d slot %d: %d at %v, want %d at %v", q, j, ids[q*5+j], dist[q*5+j], int64(math.MaxInt64), float32(math.MaxFloat32))
			}
		}
	}
}

// Filtered search refuses metrics and layouts cuVS's filtered path lacks.
func TestBruteForceFilteredRefusals(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	data := randomMatrix(newRand(), 20, 4)
	ds := f.f32(capi.CUDA, capi.CUDA, 20, 4, data)
	defer f.drop(ds)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, 20, 3)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 20, 3)
	defer f.drop(d)
	bs := f.words(bitsetOf(20, func(int) bool { return true }))
	defer f.drop(bs)
	filter := capi.Filter{Words: bs.t, Type: capi.Bitset}
	l1 := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(l1)) }()
	f.must(f.lib.BFBuild(f.res, ds.t, capi.L1, 0, l1))
	f.must(f.lib.BFSearch(f.res, l1, ds.t, nb.t, d.t, capi.Filter{}))
	expectRAFT(t, f.lib.BFSearch(f.res, l1, ds.t, nb.t, d.t, filter), "Only Euclidean, IP, and Cosine are supported!")

	idx := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(idx)) }()
	f.must(f.lib.BFBuild(f.res, ds.t, capi.L2Expanded, 0, idx))
	col := f.f32(capi.CUDA, capi.CUDA, 20, 4, data)
	defer f.drop(col)
	col.t.SetStrides(1, 20)
	f.must(f.lib.BFSearch(f.res, idx, col.t, nb.t, d.t, capi.Filter{}))
	expectRAFT(t, f.lib.BFSearch(f.res, idx, col.t, nb.t, d.t, filter), "filtered search isn't available with col_major queries yet")
}

func TestBruteForceValidation(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	data := randomMatrix(newRand(), 20, 4)
	ds := f.f32(capi.CUDA, capi.CUDA, 20, 4, data)
	defer f.drop(ds)
	host := f.f32(capi.CPU, capi.CPU, 20, 4, data)
	defer f.drop(host)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, 20, 3)
	defer f.drop(nb)
	nb32 := f.zeros(capi.CUDA, capi.CUDA, capi.UInt, 32, 20, 3)
	defer f.drop(nb32)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 20, 3)
	defer f.drop(d)
	idx := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(idx)) }()

	// the header says host datasets are fine; the code wants device memory
	err := f.lib.BFBuild(f.res, host.t, capi.L2Expanded, 0, idx)
	expectRAFT(t, err, "device_type mismatch between return mdspan and DLTensor")
	f.must(f.lib.BFBuild(f.res, ds.t, capi.L2Expanded, 0, idx))
	expectRAFT(t, f.lib.BFSearch(f.res, idx, host.t, nb.t, d.t, capi.Filter{}), "queries should have device compatible memory")
	expectRAFT(t, f.lib.BFSearch(f.res, idx, ds.t, nb32.t, d.t, capi.Filter{}), "neighbors should be of type int64_t")
	expectRAFT(t, f.lib.BFSearch(f.res, idx, ds.t, nb.t, nb.t, capi.Filter{}), "distances should be of type float32")
	expectRAFT(t, f.lib.BFSearch(f.res, idx, ds.t, nb.t, d.t, capi.Filter{Type: 7}), "Unsupported prefilter type")

	// column-major dataset and queries are accepted
	col := make([]float32, 20*4)
	for i := 0; i < 20; i++ {
		for j := 0; j < 4; j++ {
			col[j*20+i] = data[i*4+j]
		}
	}
	cm := f.f32(capi.CUDA, capi.CUDA, 20, 4, col)
	defer f.drop(cm)
	cm.t.SetStrides(1, 20)
	colIdx := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(colIdx)) }() // before cm goes: it references cm
	f.must(f.lib.BFBuild(f.res, cm.t, capi.L2Expanded, 0, colIdx))
	f.must(f.lib.BFSearch(f.res, colIdx, ds.t, nb.t, d.t, capi.Filter{}))
	wantI, wantD := exactKNN(data, 20, 4, data, 3, capi.L2Expanded, nil, false)
	checkKNN(t, "col-major", capi.CopyOut[int64](nb.b.p, 60), capi.CopyOut[float32](d.b.p, 60), 3, wantI, wantD)
	f.must(f.lib.BFSearch(f.res, idx, cm.t, nb.t, d.t, capi.Filter{}))
	checkKNN(t, "col-major queries", capi.CopyOut[int64](nb.b.p, 60), capi.CopyOut[float32](d.b.p, 60), 3, wantI, wantD)
}

func TestBruteForceSerialize(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	const n, dim, k = 30, 3, 4
	data := randomMatrix(newRand(), n, dim)
	ds := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, n, k)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, n, k)
	defer f.drop(d)
	idx := capi.Must(f.lib.BFCreate())
	f.must(f.lib.BFBuild(f.res, ds.t, capi.InnerProduct, 0, idx))
	path := filepath.Join(t.TempDir(), "bf.idx")
	f.must(f.lib.BFSerialize(f.res, path, idx))
	f.must(f.lib.BFDestroy(idx))

	// the loaded index owns its data: the original may go
	f.drop(ds)
	idx2 := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(idx2)) }()
	f.must(f.lib.BFDeserialize(f.res, path, idx2))
	q := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer f.drop(q)
	f.must(f.lib.BFSearch(f.res, idx2, q.t, nb.t, d.t, capi.Filter{}))
	wantI, wantD := exactKNN(data, n, dim, data, k, capi.InnerProduct, nil, false)
	checkKNN(t, "deserialized", capi.CopyOut[int64](nb.b.p, n*k), capi.CopyOut[float32](d.b.p, n*k), k, wantI, wantD)

	// cuvsBruteForceDeserialize sets the dtype's code and bits, never its
	// lanes (0 from cuvsBruteForceIndexCreate); the index works anyway.
	if code, bits, lanes := idx2.DType(); code != capi.Float || bits != 32 || lanes != 0 {
		t.Errorf("deserialized dtype %d/%d/%d, want float/32/0", code, bits, lanes)
	}
	f.must(f.lib.BFSerialize(f.res, filepath.Join(t.TempDir(), "again.idx"), idx2))
	head, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(head[:4]) != "<f4\x00" {
		t.Errorf("file starts %q", head[:4])
	}

	idx3 := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(idx3)) }()
	expectRAFT(t, f.lib.BFDeserialize(f.res, filepath.Join(t.TempDir(), "none"), idx3), "Cannot open file")
	for prefix, reason := range map[string]string{
		"the ":    "Invalid typestr: unrecognized byteorder t",
		"<x4\x00": "Invalid typestr: unrecognized kind x",
		"<f2\x00": "Unsupported index dtype: 0 and bits: 16", // numpy's name for half; RAFT writes <e2
	} {
		bad := filepath.Join(t.TempDir(), "bad")
		if err := os.WriteFile(bad, append([]byte(prefix), head[4:]...), 0o644); err != nil {
			t.Fatal(err)
		}
		expectRAFT(t, f.lib.BFDeserialize(f.res, bad, idx3), reason)
	}
}

// A float16 index's file starts "<e2" (RAFT's NumPy name for half), and
// comes back as float16.
func TestBruteForceSerializeHalf(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	hb := f.alloc(capi.CUDA, 2*8*2)
	defer f.free(hb)
	ht := capi.NewTensor(hb.p, capi.CUDA, capi.Float, 16, 8, 2)
	defer ht.Free()
	idx := capi.Must(f.lib.BFCreate())
	f.must(f.lib.BFBuild(f.res, ht, capi.L2Expanded, 0, idx))
	path := filepath.Join(t.TempDir(), "h.idx")
	f.must(f.lib.BFSerialize(f.res, path, idx))
	f.must(f.lib.BFDestroy(idx))
	head, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(head[:4]) != "<e2\x00" {
		t.Errorf("file starts %q", head[:4])
	}
	back := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(back)) }()
	f.must(f.lib.BFDeserialize(f.res, path, back))
	if code, bits, lanes := back.DType(); code != capi.Float || bits != 16 || lanes != 0 {
		t.Errorf("deserialized dtype %d/%d/%d", code, bits, lanes)
	}
}

// The brute-force index references its dataset: freeing it first is caught.
func TestBruteForceBorrow(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	data := randomMatrix(newRand(), 10, 2)
	ds := f.f32(capi.CUDA, capi.CUDA, 10, 2, data)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, 10, 1)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 10, 1)
	defer f.drop(d)
	q := f.f32(capi.CUDA, capi.CUDA, 10, 2, data)
	defer f.drop(q)
	idx := capi.Must(f.lib.BFCreate())
	f.must(f.lib.BFBuild(f.res, ds.t, capi.L2Expanded, 0, idx))
	f.drop(ds) // too early
	err := f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{})
	if err == nil || !strings.Contains(err.Error(), "dataset memory was freed") {
		t.Fatalf("got %v", err)
	}
	f.must(f.lib.BFDestroy(idx))
	f.expectViolations("still reference that memory", "was freed")
}

func expectRAFT(t *testing.T, err error, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", reason)
	}
	msg := err.Error()
	if !strings.Contains(msg, "RAFT failure at file=") || !strings.Contains(msg, ": "+reason) || !strings.Contains(msg, "\nObtained ") {
		t.Fatalf("error %q, want a RAFT failure %q", msg, reason)
	}
}

// As cuVS's Hellinger and KL divergence do, a search rewrites the dataset
// in place (square roots; logarithms, 0 staying 0) and queues the undoing on
// its stream: until the stream is synchronized the memory holds the
// rewrite, then the undone values, rounding included (KL turns 1 into 0).
// Hellinger takes the square roots of the queries too.
func TestBruteForceRewrites(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	const n, dim, nq, k = 40, 6, 3, 4
	rng := newRand()
	data := randomMatrix(rng, n, dim)
	for i := range data {
		data[i] = 0.05 + 0.9*float32(math.Abs(float64(data[i])))/(1+float32(math.Abs(float64(data[i]))))
	}
	data[0], data[1] = 1, 0
	queries := slices.Clone(data[:nq*dim])
	peek := func(m matrix, count int) []float32 {
		return append([]float32(nil), unsafe.Slice((*float32)(m.b.p), count)...)
	}
	for _, c := range []struct {
		name          string
		metric        int
		rewrite, undo func(float32) float32
		queriesToo    bool
	}{
		{"Hellinger", capi.Hellinger, func(v float32) float32 { return float32(math.Sqrt(float64(v))) }, func(v float32) float32 { return v * v }, true},
		{"KL", capi.KLDivergence, func(v float32) float32 {
			if v == 0 {
				return 0
			}
			return float32(math.Log(float64(v)))
		}, func(v float32) float32 {
			if v == 0 {
				return 0
			}
			return float32(math.Exp(float64(v)))
		}, false},
	} {
		ds := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
		q := f.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
		nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, nq, k)
		d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
		idx := capi.Must(f.lib.BFCreate())
		f.must(f.lib.BFBuild(f.res, ds.t, c.metric, 2, idx))
		f.must(f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{}))
		during, qDuring := peek(ds, n*dim), peek(q, nq*dim)
		f.must(f.lib.StreamSync(f.res))
		after, qAfter := peek(ds, n*dim), peek(q, nq*dim)
		for i, v := range data {
			r := c.rewrite(v)
			if math.Abs(float64(during[i]-r)) > 1e-6 || math.Abs(float64(after[i]-c.undo(r))) > 1e-6 {
				t.Fatalf("%s: element %d (%v): %v before the sync, %v after; want %v and %v", c.name, i, v, during[i], after[i], r, c.undo(r))
			}
		}
		if c.name == "KL" && after[0] != 0 {
			t.Errorf("KL: an element equal to 1 came back as %v, cuVS's undoing makes it 0", after[0])
		}
		for i, v := range queries {
			want, back := v, v
			if c.queriesToo {
				want, back = c.rewrite(v), c.undo(c.rewrite(v))
			}
			if math.Abs(float64(qDuring[i]-want)) > 1e-6 || math.Abs(float64(qAfter[i]-back)) > 1e-6 {
				t.Fatalf("%s: query element %d (%v): %v before the sync, %v after; want %v and %v", c.name, i, v, qDuring[i], qAfter[i], want, back)
			}
		}
		f.must(f.lib.BFDestroy(idx))
		for _, m := range []matrix{d, nb, q, ds} {
			f.drop(m)
		}
	}
}
