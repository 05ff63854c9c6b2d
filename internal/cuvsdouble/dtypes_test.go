package cuvsdouble_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

// CAGRA with inner product and cosine, and on int8 / uint8 / float16 data.
func TestCagraMetricsAndDtypes(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, dim, nq, k = 40, 4, 3, 4
	rng := newRand()
	data := randomMatrix(rng, n, dim)
	queries := randomMatrix(rng, nq, dim)
	c.setDegrees(8, 4)
	q := c.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	defer c.drop(q)
	for _, metric := range []int{capi.InnerProduct, capi.CosineExpanded} {
		v := capi.GetCagraIndexParams(c.params)
		v.Metric = metric
		capi.SetCagraIndexParams(c.params, v)
		ds := c.f32(capi.CUDA, capi.CUDA, n, dim, data)
		idx := capi.Must(c.lib.CagraCreate())
		c.must(c.lib.CagraBuild(c.res, c.params, ds.t, idx))
		ids, d, err := c.searchInto(idx, q, k, 64, capi.Filter{})
		c.must(err)
		wantI, wantD := exactKNN(data, n, dim, queries, k, metric, nil, false)
		checkKNN(t, "metric", ids, d, k, wantI, wantD)
		c.must(c.lib.CagraDestroy(idx))
		c.drop(ds)
	}
	// L1 is not a CAGRA metric
	v := capi.GetCagraIndexParams(c.params)
	v.Metric = capi.L1
	capi.SetCagraIndexParams(c.params, v)
	ds := c.f32(capi.CPU, capi.CPU, n, dim, data)
	defer c.drop(ds)
	if err := c.lib.CagraBuild(c.res, c.params, ds.t, c.idx); err == nil {
		t.Fatal("L1 accepted")
	}
	v.Metric = capi.L2Expanded
	capi.SetCagraIndexParams(c.params, v)

	// int8 data; the results agree with the same values as float32
	ints := make([]int8, n*dim)
	asF := make([]float32, n*dim)
	for i := range ints {
		ints[i] = int8(rng.Intn(200) - 100)
		asF[i] = float32(ints[i])
	}
	qi, qf := ints[:nq*dim], asF[:nq*dim]
	b := c.alloc(capi.CUDA, n*dim)
	defer c.free(b)
	capi.CopyIn(b.p, ints)
	dst := capi.NewTensor(b.p, capi.CUDA, capi.Int, 8, n, dim)
	defer dst.Free()
	idx := capi.Must(c.lib.CagraCreate())
	defer func() { c.must(c.lib.CagraDestroy(idx)) }()
	c.must(c.lib.CagraBuild(c.res, c.params, dst, idx))
	qb := c.alloc(capi.CUDA, nq*dim)
	defer c.free(qb)
	capi.CopyIn(qb.p, qi)
	qt := capi.NewTensor(qb.p, capi.CUDA, capi.Int, 8, nq, dim)
	defer qt.Free()
	ids, d, err := c.searchInto(idx, matrix{t: qt, rows: nq, cols: dim}, k, 32, capi.Filter{})
	c.must(err)
	wantI, wantD := exactKNN(asF, n, dim, qf, k, capi.L2Expanded, nil, false)
	checkKNN(t, "int8", ids, d, k, wantI, wantD)
	// float32 queries on an int8 index: cuVS's own check
	_, _, err = c.searchInto(idx, q, k, 32, capi.Filter{})
	expectRAFT(t, err, "type mismatch between index and queries")

	// float16 (brute force): 1.5, -2, 0.25 ... exactly representable values
	halves := []uint16{0x3e00, 0xc000, 0x3400, 0x0000} // 1.5, -2, 0.25, 0
	hb := c.alloc(capi.CUDA, 8*2*2)
	defer c.free(hb)
	h := make([]uint16, 16)
	hf := make([]float32, 16)
	vals := []float32{1.5, -2, 0.25, 0}
	for i := range h {
		h[i], hf[i] = halves[(i*3)%4], vals[(i*3)%4]
	}
	capi.CopyIn(hb.p, h)
	ht := capi.NewTensor(hb.p, capi.CUDA, capi.Float, 16, 8, 2)
	defer ht.Free()
	bf := capi.Must(c.lib.BFCreate())
	defer func() { c.must(c.lib.BFDestroy(bf)) }()
	c.must(c.lib.BFBuild(c.res, ht, capi.L2Expanded, 0, bf))
	nb := c.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, 8, 3)
	defer c.drop(nb)
	dd := c.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 8, 3)
	defer c.drop(dd)
	c.must(c.lib.BFSearch(c.res, bf, ht, nb.t, dd.t, capi.Filter{}))
	wantI, wantD = exactKNN(hf, 8, 2, hf, 3, capi.L2Expanded, nil, false)
	checkKNN(t, "float16", capi.CopyOut[int64](nb.b.p, 24), capi.CopyOut[float32](dd.b.p, 24), 3, wantI, wantD)
}
