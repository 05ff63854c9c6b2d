package cuvsdouble_test

// Behaviours of the real libcuvs_c v26.06.00 the double imitates (measured on
// an H200, see docs/CUVS_C_API.md "Measured through cuvs-go's safe layer").

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

func expectText(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
}

// Which C paths fill the index dtype's lanes: build and from-args copy the
// dataset's dtype (lanes 1), deserialize sets code and bits only (lanes stay
// 0 from cuvsCagraIndexCreate), merge copies the first input's dtype, extend
// leaves it. Brute force: build copies, deserialize leaves lanes.
func TestCagraLanesPerPath(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, dim = 60, 8
	data := randomMatrix(newRand(), n, dim)
	ds := c.f32(capi.CPU, capi.CPU, n, dim, data) // copied: the index does not borrow it
	defer c.drop(ds)
	c.setDegrees(16, 8)
	lanes := func(what string, x capi.Index, want int) {
		t.Helper()
		if code, bits, l := x.DType(); code != capi.Float || bits != 32 || l != want {
			t.Fatalf("%s: dtype code %d bits %d lanes %d, want lanes %d", what, code, bits, l, want)
		}
	}
	if _, _, l := c.idx.DType(); l != 0 {
		t.Fatalf("created index: lanes %d", l)
	}
	c.must(c.lib.CagraBuild(c.res, c.params, ds.t, c.idx))
	lanes("build", c.idx, 1)

	path := filepath.Join(t.TempDir(), "idx")
	c.must(c.lib.CagraSerialize(c.res, path, c.idx, true))
	loaded := capi.Must(c.lib.CagraCreate())
	defer func() { c.must(c.lib.CagraDestroy(loaded)) }()
	c.must(c.lib.CagraDeserialize(c.res, path, loaded))
	lanes("deserialize", loaded, 0)
	// the C search checks the code only: the deserialized index searches
	q := c.f32(capi.CUDA, capi.CUDA, 4, dim, data[:4*dim])
	defer c.drop(q)
	ids, _, err := c.searchInto(loaded, q, 4, 64, capi.Filter{})
	c.must(err)
	for i := 0; i < 4; i++ {
		if ids[i*4] != int64(i) {
			t.Fatalf("self not found: %v", ids)
		}
	}

	ep := capi.Must(c.lib.ParamsCreate("CagraExtendParams"))
	defer c.lib.ParamsDestroy("CagraExtendParams", ep)
	c.must(c.lib.CagraExtend(c.res, ep, q.t, loaded))
	lanes("extend", loaded, 0)

	gv := capi.Must(c.lib.CagraGraph(c.idx))
	graph := c.alloc(capi.CUDA, n*8*4)
	capi.CopyIn(graph.p, capi.CopyOut[uint32](gv.Data(), n*8))
	gv.CallDeleter()
	gv.Free()
	gt := capi.NewTensor(graph.p, capi.CUDA, capi.UInt, 32, n, 8)
	defer gt.Free()
	fromArgs := capi.Must(c.lib.CagraCreate())
	c.must(c.lib.CagraFromArgs(c.res, capi.L2Expanded, gt, ds.t, fromArgs))
	lanes("from args", fromArgs, 1)
	c.must(c.lib.CagraDestroy(fromArgs))
	c.free(graph)

	for _, order := range [][2]capi.Index{{loaded, c.idx}, {c.idx, loaded}} {
		merged := capi.Must(c.lib.CagraCreate())
		c.must(c.lib.CagraMerge(c.res, c.params, order[:], capi.Filter{}, merged))
		_, _, want := order[0].DType()
		lanes("merge", merged, want)
		c.must(c.lib.CagraDestroy(merged))
	}

	// brute force
	dev := c.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer c.drop(dev)
	bf := capi.Must(c.lib.BFCreate())
	defer func() { c.must(c.lib.BFDestroy(bf)) }()
	c.must(c.lib.BFBuild(c.res, dev.t, capi.L2Expanded, 0, bf))
	lanes("brute-force build", bf, 1)
	bpath := filepath.Join(t.TempDir(), "bf")
	c.must(c.lib.BFSerialize(c.res, bpath, bf))
	bf2 := capi.Must(c.lib.BFCreate())
	defer func() { c.must(c.lib.BFDestroy(bf2)) }()
	c.must(c.lib.BFDeserialize(c.res, bpath, bf2))
	lanes("brute-force deserialize", bf2, 0)
}

// Slots CAGRA cannot fill hold id 0x7FFFFFFF in uint32 and int64 neighbors
// alike, distance FLT_MAX (-FLT_MAX for inner product).
func TestCagraSentinels(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, dim, k = 100, 8, 10
	data := randomMatrix(newRand(), n, dim)
	ds := c.f32(capi.CPU, capi.CPU, n, dim, data) // copied: the index does not borrow it
	defer c.drop(ds)
	c.setDegrees(16, 8)
	c.must(c.lib.CagraBuild(c.res, c.params, ds.t, c.idx))
	q := c.f32(capi.CUDA, capi.CUDA, 1, dim, data[:dim])
	defer c.drop(q)
	none := c.words(bitsetOf(n, func(int) bool { return false }))
	defer c.drop(none)
	for _, bits := range []int{32, 64} {
		ids, d, err := c.searchInto(c.idx, q, k, bits, capi.Filter{Words: none.t, Type: capi.Bitset})
		c.must(err)
		for j := 0; j < k; j++ {
			if ids[j] != 2147483647 || d[j] != math.MaxFloat32 {
				t.Fatalf("%d-bit neighbors: %v %v", bits, ids, d)
			}
		}
	}
	// inner product: the sentinel distance is negated
	ip := capi.Must(c.lib.CagraCreate())
	defer func() { c.must(c.lib.CagraDestroy(ip)) }()
	v := capi.GetCagraIndexParams(c.params)
	v.Metric = capi.InnerProduct
	capi.SetCagraIndexParams(c.params, v)
	c.must(c.lib.CagraBuild(c.res, c.params, ds.t, ip))
	ids, d, err := c.searchInto(ip, q, k, 64, capi.Filter{Words: none.t, Type: capi.Bitset})
	c.must(err)
	if ids[0] != 2147483647 || d[0] != -math.MaxFloat32 {
		t.Fatalf("inner product: %v %v", ids, d)
	}
}

// Recall@10 of 50 random queries lands in the ranges measured on the real
// library at the same sizes (docs/CUVS_C_API.md), with some margin; a
// dataset row searched for finds itself first.
func TestCagraRecallMatchesRealLibrary(t *testing.T) {
	type row struct {
		n, dim, degree int
		lo, hi         [3]float64 // itopk 32, 64, 128
	}
	rows := []row{
		{200, 8, 16, [3]float64{0.98, 0.98, 0.98}, [3]float64{1, 1, 1}},
		{200, 8, 32, [3]float64{0.98, 0.98, 0.98}, [3]float64{1, 1, 1}},
		{1000, 16, 16, [3]float64{0.96, 0.98, 0.99}, [3]float64{1, 1, 1}},
		{2000, 16, 16, [3]float64{0.96, 0.98, 0.99}, [3]float64{1, 1, 1}},
		{2000, 16, 32, [3]float64{0.98, 0.98, 0.99}, [3]float64{1, 1, 1}},
		{5000, 32, 16, [3]float64{0.70, 0.87, 0.96}, [3]float64{0.90, 0.99, 1}},
		{5000, 32, 32, [3]float64{0.88, 0.96, 0.98}, [3]float64{0.99, 1, 1}},
	}
	algos := []int{capi.NNDescent, capi.IvfPq, capi.Iterative}
	for _, r := range rows {
		for ai, algo := range algos {
			if r.n > 200 && ai > 0 {
				break // the double builds the same graph for every algorithm
			}
			t.Run(fmt.Sprintf("%dx%d_degree%d_algo%d", r.n, r.dim, r.degree, algo), func(t *testing.T) {
				c := newCagra(t)
				defer c.closeAll()
				const nq, k = 50, 10
				rng := newRand()
				data := randomMatrix(rng, r.n, r.dim)
				queries := randomMatrix(rng, nq, r.dim)
				ds := c.f32(capi.CPU, capi.CPU, r.n, r.dim, data)
				defer c.drop(ds)
				v := capi.GetCagraIndexParams(c.params)
				v.IntermediateGraphDegree, v.GraphDegree = uint64(2*r.degree), uint64(r.degree)
				ivf := v.GraphBuildParams
				v.BuildAlgo = algo
				if algo != capi.IvfPq {
					v.GraphBuildParams = nil
				}
				capi.SetCagraIndexParams(c.params, v)
				c.must(c.lib.CagraBuild(c.res, c.params, ds.t, c.idx))
				v.BuildAlgo, v.GraphBuildParams = capi.IvfPq, ivf
				capi.SetCagraIndexParams(c.params, v)
				q := c.f32(capi.CUDA, capi.CUDA, nq, r.dim, queries)
				defer c.drop(q)
				self := c.f32(capi.CUDA, capi.CUDA, nq, r.dim, data[:nq*r.dim])
				defer c.drop(self)
				want, _ := exactKNN(data, r.n, r.dim, queries, k, capi.L2Expanded, nil, false)
				for i, itopk := range []uint64{32, 64, 128} {
					sp := capi.GetSearchParams(c.search)
					sp.ItopkSize = itopk
					capi.SetSearchParams(c.search, sp)
					ids, d, err := c.searchInto(c.idx, q, k, 32, capi.Filter{})
					c.must(err)
					checkApprox(t, "search", data, r.n, r.dim, queries, ids, d, k, capi.L2Expanded, nil)
					if got := recall(ids, want, k); got < r.lo[i] || got > r.hi[i] {
						t.Errorf("itopk %d: recall %.3f, want [%.2f, %.2f]", itopk, got, r.lo[i], r.hi[i])
					}
					ids, _, err = c.searchInto(c.idx, self, k, 64, capi.Filter{})
					c.must(err)
					for qq := 0; qq < nq; qq++ {
						if ids[qq*k] != int64(qq) {
							t.Fatalf("itopk %d: row %d found %v", itopk, qq, ids[qq*k:qq*k+k])
						}
					}
				}
			})
		}
	}
}

// A selective filter visibly fails, as graph search does on the real
// library: filtered nodes are walked through but not returned, so sparse
// allowed sets are rarely reached and the slots stay empty; with 10% of the
// rows allowed the results are complete.
func TestCagraSelectiveFilter(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, dim, k = 20000, 8, 10
	rng := newRand()
	data := randomMatrix(rng, n, dim)
	ds := c.f32(capi.CPU, capi.CPU, n, dim, data)
	defer c.drop(ds)
	c.setDegrees(32, 16)
	c.must(c.lib.CagraBuild(c.res, c.params, ds.t, c.idx))
	for _, tc := range []struct {
		allowed  int
		complete bool
	}{{3, false}, {50, false}, {2000, true}} {
		step := n / tc.allowed
		allowed := func(i int) bool { return i%step == 0 && i/step < tc.allowed }
		bs := c.words(bitsetOf(n, allowed))
		// queries: the allowed rows themselves (up to 20)
		nq := min(tc.allowed, 20)
		qv := make([]float32, 0, nq*dim)
		for i := 0; i < nq; i++ {
			qv = append(qv, data[i*step*dim:(i*step+1)*dim]...)
		}
		q := c.f32(capi.CUDA, capi.CUDA, nq, dim, qv)
		ids, d, err := c.searchInto(c.idx, q, k, 64, capi.Filter{Words: bs.t, Type: capi.Bitset})
		c.must(err)
		checkApprox(t, fmt.Sprint(tc.allowed, " allowed"), data, n, dim, qv, ids, d, k, capi.L2Expanded, allowed)
		valid := 0
		for i, id := range ids {
			if id != cagraSentinel {
				valid++
			}
			if i%k == 0 && id != int64(i/k*step) {
				t.Fatalf("%d allowed: query %d did not find itself: %v", tc.allowed, i/k, ids[i:i+k])
			}
		}
		// the real library's results were complete here; its single-CTA
		// search at 10% allowed left ~6% of the slots empty on 20,000 x 64
		// (issue 18's table), which the double's walk is fitted to: allow 10%
		if tc.complete && valid < nq*k*90/100 {
			t.Fatalf("%d allowed: %d of %d results", tc.allowed, valid, nq*k)
		}
		if !tc.complete && valid > nq*k/2 {
			t.Fatalf("%d allowed: %d of %d results: the filter should starve the search", tc.allowed, valid, nq*k)
		}
		c.drop(q)
		c.drop(bs)
	}
}

// Compression (VQ + PQ) refuses data its training cannot use, with cuVS's
// words; the IVF_PQ graph build fails as observed on the real library.
func TestCagraCompressionRefusals(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	data := randomMatrix(newRand(), 1000, 8)
	small := c.f32(capi.CUDA, capi.CUDA, 200, 8, data[:200*8])
	defer c.drop(small)
	big := c.f32(capi.CUDA, capi.CUDA, 1000, 8, data)
	defer c.drop(big)
	cp := capi.Must(c.lib.ParamsCreate("CagraCompressionParams"))
	defer c.lib.ParamsDestroy("CagraCompressionParams", cp)
	def := capi.GetCompressionParams(cp)
	v := capi.GetCagraIndexParams(c.params)
	v.IntermediateGraphDegree, v.GraphDegree, v.Compression = 32, 16, cp
	ivf := v.GraphBuildParams
	build := func(algo int, ds matrix, cparams capi.CompressionParams) error {
		w := v
		w.BuildAlgo = algo
		if algo != capi.IvfPq {
			w.GraphBuildParams = nil
		}
		capi.SetCagraIndexParams(c.params, w)
		capi.SetCompressionParams(cp, cparams)
		idx := capi.Must(c.lib.CagraCreate())
		err := c.lib.CagraBuild(c.res, c.params, ds.t, idx)
		c.must(c.lib.CagraDestroy(idx))
		w.BuildAlgo, w.GraphBuildParams, w.Compression = capi.IvfPq, ivf, nil
		capi.SetCagraIndexParams(c.params, w)
		return err
	}
	// 200 rows < 256 PQ centers (8 bits)
	expectText(t, build(capi.NNDescent, small, def), "The number of training samples must be greater than or equal to the number of PQ centers")
	expectText(t, build(capi.Iterative, small, def), "The number of training samples must be greater than or equal to the number of PQ centers")
	expectText(t, build(capi.IvfPq, small, def), "call='cudaLaunchKernelExC(&config, kernel, kernel_args)', Reason=cudaErrorInvalidValue: invalid argument")
	// 4-bit PQ (16 centers) fits 200 rows
	p4 := def
	p4.PqBits = 4
	c.must(build(capi.NNDescent, small, p4))
	c.must(build(capi.IvfPq, small, p4))
	// a PQ training fraction leaving fewer rows than centers
	frac := def
	frac.PqKmeansTrainsetFraction = 0.1
	expectText(t, build(capi.NNDescent, big, frac), "The number of training samples must be greater than or equal to the number of PQ centers")
	// more VQ centers than training rows
	vq := p4
	vq.VqNCenters = 300
	expectText(t, build(capi.NNDescent, small, vq), "The number of centroids must be strictly positive and cannot exceed the number of points in the training dataset.")
	// a VQ training fraction above 1
	vf := p4
	vf.VqKmeansTrainsetFraction = 2
	expectText(t, build(capi.NNDescent, small, vf), "The number of samples must be smaller than the number of input rows")
	// 1000 rows and defaults: fine, the dataset view is empty
	c.must(build(capi.NNDescent, big, def))
}

// An ACE build in disk mode gives an index that cannot be searched,
// serialized or extended; its sizes are known.
func TestCagraAceDiskMode(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, dim = 300, 8
	data := randomMatrix(newRand(), n, dim)
	host := c.f32(capi.CPU, capi.CPU, n, dim, data)
	defer c.drop(host)
	q := c.f32(capi.CUDA, capi.CUDA, 2, dim, data[:2*dim])
	defer c.drop(q)
	ace := capi.Must(c.lib.ParamsCreate("AceParams"))
	defer c.lib.ParamsDestroy("AceParams", ace)
	dir := filepath.Join(t.TempDir(), "ace")
	restore := capi.SwapAceBuildDir(ace, dir)
	defer restore()
	v := capi.GetCagraIndexParams(c.params)
	ivf := v.GraphBuildParams
	v.IntermediateGraphDegree, v.GraphDegree, v.BuildAlgo, v.GraphBuildParams = 32, 16, capi.Ace, ace
	capi.SetCagraIndexParams(c.params, v)
	defer func() {
		v.BuildAlgo, v.GraphBuildParams = capi.IvfPq, ivf
		capi.SetCagraIndexParams(c.params, v)
	}()
	a := capi.GetAceParams(ace)

	// in memory (the default): searchable
	c.must(c.lib.CagraBuild(c.res, c.params, host.t, c.idx))
	if _, _, err := c.searchInto(c.idx, q, 4, 64, capi.Filter{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("build_dir created without disk mode")
	}

	for _, mode := range []string{"use_disk", "host memory", "gpu memory"} {
		b := a
		switch mode {
		case "use_disk":
			b.UseDisk = true
		case "host memory":
			b.MaxHostMemoryGB = 1e-6
		default:
			b.MaxGPUMemoryGB = 1e-6
		}
		capi.SetAceParams(ace, b)
		idx := capi.Must(c.lib.CagraCreate())
		c.must(c.lib.CagraBuild(c.res, c.params, host.t, idx))
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			t.Fatalf("%s: build_dir %v", mode, err)
		}
		if size, _ := c.lib.CagraSize(idx); size != n {
			t.Fatalf("size %d", size)
		}
		if dims, _ := c.lib.CagraDims(idx); dims != dim {
			t.Fatalf("dims %d", dims)
		}
		if deg, _ := c.lib.CagraGraphDegree(idx); deg != 16 {
			t.Fatalf("degree %d", deg)
		}
		_, _, err := c.searchInto(idx, q, 4, 64, capi.Filter{})
		expectRAFT(t, err, "Cannot search a CAGRA index that is stored on disk. Use cuvs::neighbors::hnsw::from_cagra() to convert the index and cuvs::neighbors::hnsw::deserialize() to load it into memory before searching.")
		path := filepath.Join(t.TempDir(), "x")
		expectRAFT(t, c.lib.CagraSerialize(c.res, path, idx, true), "Cannot serialize a disk-backed CAGRA index.")
		expectRAFT(t, c.lib.CagraSerializeToHnswlib(c.res, path, idx), "Invalid CAGRA dataset of size 0 during serialization, shape 0x0")
		ep := capi.Must(c.lib.ParamsCreate("CagraExtendParams"))
		expectRAFT(t, c.lib.CagraExtend(c.res, ep, q.t, idx), "Cannot extend a disk-backed CAGRA index.")
		c.must(c.lib.ParamsDestroy("CagraExtendParams", ep))
		merged := capi.Must(c.lib.CagraCreate())
		expectRAFT(t, c.lib.CagraMerge(c.res, c.params, []capi.Index{idx, c.idx}, capi.Filter{}, merged), "cagra::merge only supports an index to which the dataset is attached")
		c.must(c.lib.CagraDestroy(merged))
		c.must(c.lib.CagraDestroy(idx))
	}
	capi.SetAceParams(ace, a)
}
