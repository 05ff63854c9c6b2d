package cuvsdouble_test

import (
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

func TestInstantMode(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, dim, nq, k = 64, 8, 3, 4
	data := randomMatrix(newRand(), n, dim)
	ds := c.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer c.drop(ds)
	c.setDegrees(16, 8)
	host := c.f32(capi.CPU, capi.CPU, n, dim, data)
	c.must(c.lib.CagraBuild(c.res, c.params, host.t, c.idx))
	c.drop(host) // copied
	bf := capi.Must(c.lib.BFCreate())
	defer func() { c.must(c.lib.BFDestroy(bf)) }()
	c.must(c.lib.BFBuild(c.res, ds.t, capi.L2Expanded, 2, bf))
	q := c.f32(capi.CUDA, capi.CUDA, nq, dim, data[:nq*dim])
	defer c.drop(q)
	nb := c.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, nq, k)
	defer c.drop(nb)
	d := c.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
	defer c.drop(d)

	if c.ctl.Instant() {
		t.Fatal("instant mode is on in a fresh library")
	}
	c.ctl.SetInstant(true)
	if !c.ctl.Instant() {
		t.Fatal("SetInstant(true) did not turn it on")
	}
	nb0 := capi.CopyOut[int64](nb.b.p, nq*k)
	cagraCalls, bfCalls := c.ctl.Calls("cuvsCagraSearch"), c.ctl.Calls("cuvsBruteForceSearch")

	// searches succeed at once: nothing is validated, counted or written
	c.must(c.lib.CagraSearch(c.res, c.search, c.idx, q.t, nb.t, d.t, capi.Filter{}))
	c.must(c.lib.CagraSearch(0, nil, capi.Index{}, nil, nil, nil, capi.Filter{Type: capi.Bitmap}))
	c.must(c.lib.BFSearch(c.res, bf, q.t, nb.t, d.t, capi.Filter{}))
	c.must(c.lib.BFSearch(0, capi.Index{}, nil, nil, nil, capi.Filter{Type: 7}))
	if got := c.ctl.Calls("cuvsCagraSearch"); got != cagraCalls {
		t.Errorf("cuvsCagraSearch calls %d -> %d in instant mode", cagraCalls, got)
	}
	if got := c.ctl.Calls("cuvsBruteForceSearch"); got != bfCalls {
		t.Errorf("cuvsBruteForceSearch calls %d -> %d in instant mode", bfCalls, got)
	}
	for i, v := range capi.CopyOut[int64](nb.b.p, nq*k) {
		if v != nb0[i] {
			t.Fatalf("neighbors[%d] = %d: written in instant mode", i, v)
		}
	}

	// a build reads the shape only and installs a hollow index
	before := c.ctl.Counters()
	hollow := capi.Must(c.lib.CagraCreate())
	big := capi.NewTensor(ds.b.p, capi.CPU, capi.Float, 32, 1<<40, 128) // far more rows than memory
	c.must(c.lib.CagraBuild(c.res, c.params, big, hollow))
	big.Free()
	if after := c.ctl.Counters(); after["buffer"] != before["buffer"] {
		t.Errorf("instant build allocated storage: buffer %v -> %v", before["buffer"], after["buffer"])
	}
	if v, _ := c.lib.CagraSize(hollow); v != 1<<40 {
		t.Errorf("hollow size %d", v)
	}
	if v, _ := c.lib.CagraDims(hollow); v != 128 {
		t.Errorf("hollow dims %d", v)
	}
	if v, _ := c.lib.CagraGraphDegree(hollow); v != 8 {
		t.Errorf("hollow graph degree %d", v)
	}

	// out of instant mode, what needs the data refuses the hollow index
	c.ctl.SetInstant(false)
	wide := c.f32(capi.CUDA, capi.CUDA, nq, 128, make([]float32, nq*128))
	defer c.drop(wide)
	err := c.lib.CagraSearch(c.res, c.search, hollow, wide.t, nb.t, d.t, capi.Filter{})
	if err == nil || !strings.Contains(err.Error(), "built in instant mode") {
		t.Errorf("search of a hollow index: %v", err)
	}
	if _, err := c.lib.CagraDataset(hollow); err == nil || !strings.Contains(err.Error(), "built in instant mode") {
		t.Errorf("dataset of a hollow index: %v", err)
	}
	c.must(c.lib.CagraDestroy(hollow))

	// and the real index still searches for real
	c.must(c.lib.CagraSearch(c.res, c.search, c.idx, q.t, nb.t, d.t, capi.Filter{}))
	if got := capi.CopyOut[int64](nb.b.p, nq*k); got[0] != 0 || got[k] != 1 {
		t.Errorf("neighbors %v: query i should find row i first", got)
	}
}

func TestInstantModeReset(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	f.must(f.lib.ResourcesDestroy(f.res, false))
	f.res = 0
	f.ctl.SetInstant(true)
	f.ctl.Reset() // nothing is alive: counters may restart
	if f.ctl.Instant() {
		t.Error("Reset left instant mode on")
	}
}
