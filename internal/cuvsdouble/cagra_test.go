package cuvsdouble_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

// cagraFixture: index params, search params and an index handle.
type cagraFixture struct {
	*fixture
	params, search unsafe.Pointer
	idx            capi.Index
}

func newCagra(t *testing.T) *cagraFixture {
	f := newFixture(t)
	c := &cagraFixture{fixture: f}
	c.params = capi.Must(f.lib.ParamsCreate("CagraIndexParams"))
	c.search = capi.Must(f.lib.ParamsCreate("CagraSearchParams"))
	c.idx = capi.Must(f.lib.CagraCreate())
	return c
}

func (c *cagraFixture) setDegrees(intermediate, degree uint64) {
	v := capi.GetCagraIndexParams(c.params)
	v.IntermediateGraphDegree, v.GraphDegree = intermediate, degree
	capi.SetCagraIndexParams(c.params, v)
}

func (c *cagraFixture) closeAll() {
	c.t.Helper()
	c.must(c.lib.CagraDestroy(c.idx))
	c.must(c.lib.ParamsDestroy("CagraSearchParams", c.search))
	c.must(c.lib.ParamsDestroy("CagraIndexParams", c.params))
	c.close()
}

// search runs a CAGRA search into fresh outputs and returns them.
func (c *cagraFixture) searchInto(idx capi.Index, q matrix, k, nbBits int, filter capi.Filter) ([]int64, []float32, error) {
	c.t.Helper()
	code := capi.Int
	if nbBits == 32 {
		code = capi.UInt
	}
	nb := c.zeros(capi.CUDA, capi.CUDA, code, nbBits, q.rows, k)
	defer c.drop(nb)
	d := c.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, q.rows, k)
	defer c.drop(d)
	err := c.lib.CagraSearch(c.res, c.search, idx, q.t, nb.t, d.t, filter)
	ids := make([]int64, q.rows*k)
	if nbBits == 32 {
		for i, v := range capi.CopyOut[uint32](nb.b.p, q.rows*k) {
			ids[i] = int64(v)
		}
	} else {
		ids = capi.CopyOut[int64](nb.b.p, q.rows*k)
	}
	return ids, capi.CopyOut[float32](d.b.p, q.rows*k), err
}

func TestCagraBuildSearch(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, dim, nq, k = 120, 7, 10, 8
	rng := newRand()
	data := randomMatrix(rng, n, dim)
	queries := randomMatrix(rng, nq, dim)
	c.setDegrees(24, 12)

	// host data is copied into rows padded to 16 bytes (7 floats -> 8)
	host := c.f32(capi.CPU, capi.CPU, n, dim, data)
	c.must(c.lib.CagraBuild(c.res, c.params, host.t, c.idx))
	c.drop(host) // copied: may go at once
	if dims, _ := c.lib.CagraDims(c.idx); dims != dim {
		t.Fatalf("dims %d", dims)
	}
	if size, _ := c.lib.CagraSize(c.idx); size != n {
		t.Fatalf("size %d", size)
	}
	if deg, _ := c.lib.CagraGraphDegree(c.idx); deg != 12 {
		t.Fatalf("graph degree %d", deg)
	}
	view := capi.Must(c.lib.CagraDataset(c.idx))
	if sh, st := view.Shape(), view.Strides(); !slices.Equal(sh, []int64{n, dim}) || !slices.Equal(st, []int64{8, 1}) || view.Device() != capi.CUDA {
		t.Fatalf("dataset view shape %v strides %v device %d", sh, st, view.Device())
	}
	row5 := capi.CopyOut[float32](unsafe.Add(view.Data(), 5*8*4), dim)
	if !slices.Equal(row5, data[5*dim:6*dim]) {
		t.Fatalf("dataset row 5 %v", row5)
	}
	view.CallDeleter()
	view.Free()

	// the graph is CAGRA's pruned graph, not the kNN graph: ids in range,
	// no self edges, no repeats
	gv := capi.Must(c.lib.CagraGraph(c.idx))
	if sh := gv.Shape(); !slices.Equal(sh, []int64{n, 12}) || gv.Strides() != nil {
		t.Fatalf("graph view shape %v", sh)
	}
	graph := capi.CopyOut[uint32](gv.Data(), n*12)
	gv.CallDeleter()
	gv.Free()
	for i := 0; i < n; i++ {
		row := graph[i*12 : i*12+12]
		for j, id := range row {
			if id >= n || int(id) == i || slices.Contains(row[:j], id) {
				t.Fatalf("graph row %d: %v", i, row)
			}
		}
	}

	q := c.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	defer c.drop(q)
	wantI, _ := exactKNN(data, n, dim, queries, k, capi.L2Expanded, nil, false)
	for _, bits := range []int{32, 64} {
		ids, d, err := c.searchInto(c.idx, q, k, bits, capi.Filter{})
		c.must(err)
		checkApprox(t, "search", data, n, dim, queries, ids, d, k, capi.L2Expanded, nil)
		if r := recall(ids, wantI, k); r < 0.95 {
			t.Fatalf("recall %.3f", r)
		}
	}

	// bitset filter: odd rows only
	odd := func(i int) bool { return i%2 == 1 }
	bs := c.words(bitsetOf(n, odd))
	defer c.drop(bs)
	ids, d, err := c.searchInto(c.idx, q, k, 64, capi.Filter{Words: bs.t, Type: capi.Bitset})
	c.must(err)
	checkApprox(t, "filtered", data, n, dim, queries, ids, d, k, capi.L2Expanded, odd)
	wantI, _ = exactKNN(data, n, dim, queries, k, capi.L2Expanded, func(_, i int) bool { return odd(i) }, false)
	if r := recall(ids, wantI, k); r < 0.9 {
		t.Fatalf("filtered recall %.3f", r)
	}

	// only 3 rows allowed: some of them, then sentinels
	three := func(i int) bool { return i == 3 || i == 50 || i == 99 }
	few := c.words(bitsetOf(n, three))
	defer c.drop(few)
	ids, d, err = c.searchInto(c.idx, q, k, 32, capi.Filter{Words: few.t, Type: capi.Bitset})
	c.must(err)
	checkApprox(t, "3 allowed", data, n, dim, queries, ids, d, k, capi.L2Expanded, three)
	for qq := 0; qq < nq; qq++ {
		if id := ids[qq*k+3]; id != cagraSentinel {
			t.Fatalf("query %d: %v", qq, ids[qq*k:qq*k+k])
		}
	}

	// validation, in cuVS's words
	hq := c.f32(capi.CPU, capi.CPU, nq, dim, queries)
	defer c.drop(hq)
	_, _, err = c.searchInto(c.idx, hq, k, 32, capi.Filter{})
	expectRAFT(t, err, "queries should have device compatible memory")
	_, _, err = c.searchInto(c.idx, q, 65, 32, capi.Filter{})
	expectRAFT(t, err, "topk = 65 must be smaller than itopk_size = 64")
	_, _, err = c.searchInto(c.idx, q, k, 32, capi.Filter{Words: bs.t, Type: capi.Bitmap})
	expectRAFT(t, err, "Unsupported filter type: BITMAP")
	nb16 := c.zeros(capi.CUDA, capi.CUDA, capi.Int, 16, nq, k)
	defer c.drop(nb16)
	d32 := c.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
	defer c.drop(d32)
	expectRAFT(t, c.lib.CagraSearch(c.res, c.search, c.idx, q.t, nb16.t, d32.t, capi.Filter{}), "neighbors should be of type uint32_t or int64_t")
	sp := capi.GetSearchParams(c.search)
	sp.Algo = 7
	capi.SetSearchParams(c.search, sp)
	_, _, err = c.searchInto(c.idx, q, k, 32, capi.Filter{})
	if err == nil || !strings.Contains(err.Error(), "exception occurred! file=") || !strings.Contains(err.Error(), "[CAGRA Error] An invalid kernel mode has been given: 7") {
		t.Fatalf("got %v", err)
	}
	sp.Algo = 0
	capi.SetSearchParams(c.search, sp)
}

func TestCagraDeviceDatasetIsBorrowed(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, dim = 40, 8 // 32-byte rows: kept by reference
	data := randomMatrix(newRand(), n, dim)
	ds := c.f32(capi.CUDA, capi.CUDA, n, dim, data)
	c.setDegrees(16, 8)
	c.must(c.lib.CagraBuild(c.res, c.params, ds.t, c.idx))
	view := capi.Must(c.lib.CagraDataset(c.idx))
	if view.Data() != ds.b.p || !slices.Equal(view.Strides(), []int64{8, 1}) {
		t.Fatalf("view data %p (dataset %p) strides %v", view.Data(), ds.b.p, view.Strides())
	}
	view.CallDeleter()
	view.Free()
	// freeing the dataset before the index is caught
	c.drop(ds)
	q := c.f32(capi.CUDA, capi.CUDA, 2, dim, data[:16])
	defer c.drop(q)
	_, _, err := c.searchInto(c.idx, q, 4, 32, capi.Filter{})
	if err == nil || !strings.Contains(err.Error(), "dataset memory was freed") {
		t.Fatalf("got %v", err)
	}
	c.expectViolations("still reference that memory", "was freed")

	// unaligned device rows (7 floats) are copied
	idx2 := capi.Must(c.lib.CagraCreate())
	defer func() { c.must(c.lib.CagraDestroy(idx2)) }()
	odd := c.f32(capi.CUDA, capi.CUDA, n, 7, data[:n*7])
	c.must(c.lib.CagraBuild(c.res, c.params, odd.t, idx2))
	c.drop(odd) // fine: copied
	if v := c.ctl.Violations(); len(v) > 0 {
		t.Fatal(v)
	}
}

func TestCagraExtendSerializeFromArgsMerge(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, m, dim, k = 50, 20, 6, 5
	rng := newRand()
	data := randomMatrix(rng, n+m, dim)
	c.setDegrees(16, 8)
	ds := c.f32(capi.CPU, capi.CPU, n, dim, data[:n*dim])
	defer c.drop(ds)
	c.must(c.lib.CagraBuild(c.res, c.params, ds.t, c.idx))

	// extend
	add := c.f32(capi.CUDA, capi.CUDA, m, dim, data[n*dim:])
	defer c.drop(add)
	ep := capi.Must(c.lib.ParamsCreate("CagraExtendParams"))
	defer c.lib.ParamsDestroy("CagraExtendParams", ep)
	c.must(c.lib.CagraExtend(c.res, ep, add.t, c.idx))
	if size, _ := c.lib.CagraSize(c.idx); size != n+m {
		t.Fatalf("size %d after extend", size)
	}
	q := c.f32(capi.CUDA, capi.CUDA, n+m, dim, data)
	defer c.drop(q)
	wantI, _ := exactKNN(data, n+m, dim, data, k, capi.L2Expanded, nil, false)
	ids, d, err := c.searchInto(c.idx, q, k, 64, capi.Filter{})
	c.must(err)
	checkApprox(t, "extended", data, n+m, dim, data, ids, d, k, capi.L2Expanded, nil)
	if r := recall(ids, wantI, k); r < 0.95 {
		t.Fatalf("extended: recall %.3f", r)
	}
	// round trips and the same graph reproduce these results exactly
	wantIDs, wantD := make([][]int64, n+m), make([][]float32, n+m)
	for i := range wantIDs {
		wantIDs[i], wantD[i] = ids[i*k:i*k+k], d[i*k:i*k+k]
	}

	// serialize with and without the dataset
	dir := t.TempDir()
	full, bare, hnsw := filepath.Join(dir, "full"), filepath.Join(dir, "bare"), filepath.Join(dir, "hnsw")
	c.must(c.lib.CagraSerialize(c.res, full, c.idx, true))
	c.must(c.lib.CagraSerialize(c.res, bare, c.idx, false))
	c.must(c.lib.CagraSerializeToHnswlib(c.res, hnsw, c.idx))
	if st, err := os.Stat(hnsw); err != nil || st.Size() < int64((n+m)*dim*4) {
		t.Fatalf("hnswlib file: %v %v", st, err)
	}
	loaded := capi.Must(c.lib.CagraCreate())
	defer func() { c.must(c.lib.CagraDestroy(loaded)) }()
	c.must(c.lib.CagraDeserialize(c.res, full, loaded))
	ids, d, err = c.searchInto(loaded, q, k, 64, capi.Filter{})
	c.must(err)
	checkKNN(t, "deserialized", ids, d, k, wantIDs, wantD)
	noData := capi.Must(c.lib.CagraCreate())
	defer func() { c.must(c.lib.CagraDestroy(noData)) }()
	c.must(c.lib.CagraDeserialize(c.res, bare, noData))
	// cuVS keeps the empty dataset of dimension 0 (the file's dimension is
	// not used), so the query-dimension check refuses first.
	_, _, err = c.searchInto(noData, q, k, 64, capi.Filter{})
	expectRAFT(t, err, "Number of query dimensions should equal number of dimensions in the index.")
	if deg, _ := c.lib.CagraGraphDegree(noData); deg != 8 {
		t.Fatalf("degree %d", deg)
	}
	if dims, _ := c.lib.CagraDims(noData); dims != 0 {
		t.Fatalf("graph-only index: dimension %d, want 0", dims)
	}
	if size, _ := c.lib.CagraSize(noData); size != n+m {
		t.Fatalf("graph-only index: size %d, want the graph's %d", size, n+m)
	}

	// from a graph and a dataset: the index's own graph and data
	gv := capi.Must(c.lib.CagraGraph(c.idx))
	graph := c.alloc(capi.CUDA, (n+m)*8*4)
	capi.CopyIn(graph.p, capi.CopyOut[uint32](gv.Data(), (n+m)*8))
	gv.CallDeleter()
	gv.Free()
	gt := capi.NewTensor(graph.p, capi.CUDA, capi.UInt, 32, n+m, 8)
	defer gt.Free()
	fromArgs := capi.Must(c.lib.CagraCreate())
	c.must(c.lib.CagraFromArgs(c.res, capi.L2Expanded, gt, q.t, fromArgs))
	ids, d, err = c.searchInto(fromArgs, q, k, 32, capi.Filter{})
	c.must(err)
	checkKNN(t, "from args", ids, d, k, wantIDs, wantD)
	c.must(c.lib.CagraDestroy(fromArgs)) // before the graph it references
	c.free(graph)

	// merge the extended index with the loaded copy, keeping rows of the
	// second half only
	total := 2 * (n + m)
	keep := func(i int) bool { return i >= n+m }
	bs := c.words(bitsetOf(total, keep))
	defer c.drop(bs)
	merged := capi.Must(c.lib.CagraCreate())
	defer func() { c.must(c.lib.CagraDestroy(merged)) }()
	c.must(c.lib.CagraMerge(c.res, c.params, []capi.Index{c.idx, loaded}, capi.Filter{Words: bs.t, Type: capi.Bitset}, merged))
	if size, _ := c.lib.CagraSize(merged); size != n+m {
		t.Fatalf("merged size %d", size)
	}
	ids, d, err = c.searchInto(merged, q, k, 64, capi.Filter{})
	c.must(err)
	checkApprox(t, "merged", data, n+m, dim, data, ids, d, k, capi.L2Expanded, nil)
	if r := recall(ids, wantI, k); r < 0.95 {
		t.Fatalf("merged: recall %.3f", r)
	}
}

// Building into an index handle that holds an index leaks the old one in
// cuVS: the double leaks it too and says so.
func TestCagraRebuildLeaks(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	data := randomMatrix(newRand(), 10, 4)
	ds := c.f32(capi.CPU, capi.CPU, 10, 4, data)
	defer c.drop(ds)
	c.setDegrees(4, 2)
	c.must(c.lib.CagraBuild(c.res, c.params, ds.t, c.idx))
	before := c.ctl.Counters()
	c.must(c.lib.CagraBuild(c.res, c.params, ds.t, c.idx))
	c.expectViolations("leaks the previous one")
	after := c.ctl.Counters()
	for _, kind := range []string{"cagra_index_data", "buffer", "buffer_bytes"} {
		c.allowLeak(kind, after[kind].Live()-before[kind].Live())
	}
	if after["cagra_index_data"].Live() != 2 {
		t.Fatalf("cagra_index_data %+v", after["cagra_index_data"])
	}
}
