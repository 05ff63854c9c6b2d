package cuvsdouble_test

import (
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

// A CAGRA build over few rows with the default degrees (128, 64) lowers
// them as cuVS's check_graph_degree does: the getter reports rows-1, every
// row finds itself. A merge builds over the merged rows the same way.
// ITERATIVE_CAGRA_SEARCH keeps the degrees and fails on too few rows with
// cuVS's prune_graph_gpu message.
func TestCagraSmallRows(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const dim = 4
	rng := newRand()
	build := func(n int) (capi.Index, []float32) {
		data := randomMatrix(rng, n, dim)
		host := c.f32(capi.CPU, capi.CPU, n, dim, data)
		defer c.drop(host)
		x := capi.Must(c.lib.CagraCreate())
		c.must(c.lib.CagraBuild(c.res, c.params, host.t, x))
		if d, err := c.lib.CagraGraphDegree(x); err != nil || d != int64(n-1) {
			t.Fatalf("%d rows: graph degree %d (%v), want %d", n, d, err, n-1)
		}
		return x, data
	}
	for _, n := range []int{2, 4, 40} {
		x, data := build(n)
		q := c.f32(capi.CUDA, capi.CUDA, n, dim, data)
		ids, _, err := c.searchInto(x, q, min(n, 4), 32, capi.Filter{})
		c.must(err)
		for i := 0; i < n; i++ {
			k := min(n, 4)
			found := false
			for _, id := range ids[i*k : (i+1)*k] {
				found = found || id == int64(i)
			}
			if !found {
				t.Errorf("%d rows: row %d not among its neighbours %v", n, i, ids[i*k:(i+1)*k])
			}
		}
		c.drop(q)
		c.must(c.lib.CagraDestroy(x))
	}

	a, _ := build(3)
	b, _ := build(4)
	m := capi.Must(c.lib.CagraCreate())
	c.must(c.lib.CagraMerge(c.res, c.params, []capi.Index{a, b}, capi.Filter{}, m))
	if d, _ := c.lib.CagraGraphDegree(m); d != 6 {
		t.Errorf("merge of 7 rows: graph degree %d, want 6", d)
	}
	for _, x := range []capi.Index{a, b, m} {
		c.must(c.lib.CagraDestroy(x))
	}

	v := capi.GetCagraIndexParams(c.params)
	v.BuildAlgo = capi.Iterative
	capi.SetCagraIndexParams(c.params, v)
	for _, n := range []int{4, 40, 63} {
		host := c.f32(capi.CPU, capi.CPU, n, dim, randomMatrix(rng, n, dim))
		x := capi.Must(c.lib.CagraCreate())
		err := c.lib.CagraBuild(c.res, c.params, host.t, x)
		if err == nil || !strings.Contains(err.Error(), "Could not generate an intermediate CAGRA graph because the initial kNN graph contains too many invalid or duplicated neighbor nodes.") {
			t.Errorf("iterative build over %d rows: %v", n, err)
		}
		c.drop(host)
		c.must(c.lib.CagraDestroy(x))
	}
	// 64 rows: a first round of 32 rows keeping 32 edges, a last keeping 64
	// (each row's own id last).
	host := c.f32(capi.CPU, capi.CPU, 64, dim, randomMatrix(rng, 64, dim))
	x := capi.Must(c.lib.CagraCreate())
	c.must(c.lib.CagraBuild(c.res, c.params, host.t, x))
	if d, _ := c.lib.CagraGraphDegree(x); d != 64 {
		t.Errorf("iterative build over 64 rows: graph degree %d, want 64 (unadjusted)", d)
	}
	c.drop(host)
	c.must(c.lib.CagraDestroy(x))
	v.BuildAlgo = capi.IvfPq // what Create made, for Destroy
	capi.SetCagraIndexParams(c.params, v)
}

// cuVS 26.08's multi-partition search refuses MULTI_KERNEL and partitions
// of different graph degrees (search_multi_partition).
func TestCagra2608MultiPartitionRefusals(t *testing.T) {
	c := newCagra2608(t)
	defer c.closeAll()
	const dim, k = 8, 2
	rng := newRand()
	data := randomMatrix(rng, 10, dim)
	ds1 := c.build2608(data[:2*dim], 2, dim) // degree 1
	p1 := c.idx
	c.idx = capi.Must(c.lib.CagraCreate())
	ds2 := c.build2608(data[2*dim:6*dim], 4, dim) // degree 3
	p2 := c.idx
	c.idx = capi.Must(c.lib.CagraCreate())
	ds3 := c.build2608(data[6*dim:8*dim], 2, dim) // degree 1
	p3 := c.idx
	c.idx = capi.Must(c.lib.CagraCreate())
	q := c.f32(capi.CUDA, capi.CUDA, 2, dim, data[:2*dim])
	pids := c.zeros(capi.CUDA, capi.CUDA, capi.UInt, 32, 2, k)
	nb := c.zeros(capi.CUDA, capi.CUDA, capi.UInt, 32, 2, k)
	dist := c.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 2, k)
	search := func(parts ...capi.Index) error {
		return c.lib.CagraSearchMultiPartition(c.res, c.search, parts, q.t, pids.t, nb.t, dist.t, nil)
	}
	c.must(search(p1, p3))
	if err := search(p1, p2); err == nil || !strings.Contains(err.Error(), "All partitions must use the same graph degree for multi-partition search") {
		t.Errorf("degrees 1 and 3: %v", err)
	}
	s := capi.GetSearchParams(c.search)
	s.Algo = 2 // MULTI_KERNEL
	capi.SetSearchParams(c.search, s)
	if err := search(p1, p3); err == nil || !strings.Contains(err.Error(), "MULTI_KERNEL is not supported for multi-partition search") {
		t.Errorf("MULTI_KERNEL: %v", err)
	}
	for _, m := range []matrix{q, pids, nb, dist} {
		c.drop(m)
	}
	for _, x := range []capi.Index{p1, p2, p3} {
		c.must(c.lib.CagraDestroy(x))
	}
	for _, d := range []capi.Dataset{ds1, ds2, ds3} {
		c.must(c.lib.DatasetDestroy(d))
	}
}
