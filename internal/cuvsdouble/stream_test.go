package cuvsdouble_test

import (
	"math"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

// onThreads runs a on one locked OS thread and then, while a's thread stays
// locked, b on another.
func onThreads(a, b func()) {
	aDone, bDone := make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		a()
		close(aDone)
		<-bDone
	}()
	<-aDone
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b()
		close(bDone)
	}()
	<-bDone
}

// Copies between device (or pinned) memory are queued on the resources'
// stream, cudaStreamPerThread by default: the destination reads poison
// until that thread's stream is synchronized; a sync from another thread
// does not wait for it. Copies with pageable memory are synchronous.
func TestStreamsAreAsynchronousPerThread(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	vals := []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	src := f.f32(capi.CUDA, capi.CUDA, 4, 3, vals)
	defer f.drop(src)
	dst := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 4, 3)
	defer f.drop(dst)
	peek := func() []float32 { return append([]float32(nil), unsafe.Slice((*float32)(dst.b.p), 12)...) }
	poisoned := func(v []float32) bool {
		for _, x := range v {
			if !math.IsNaN(float64(x)) {
				return false
			}
		}
		return true
	}
	var queued, afterOther, afterOwn []float32
	onThreads(func() {
		f.must(f.lib.MatrixCopy(f.res, src.t, dst.t))
		queued = peek()
	}, func() {
		f.must(f.lib.StreamSync(f.res))
		afterOther = peek()
	})
	if !poisoned(queued) || !poisoned(afterOther) {
		t.Fatalf("queued copy visible before its thread's stream was synchronized: %v / %v", queued, afterOther)
	}
	if f.ctl.PendingOps() != 1 {
		t.Errorf("PendingOps = %d, want 1", f.ctl.PendingOps())
	}
	// The queue of the first thread is still there; freeing memory or a
	// device-wide sync completes it.
	capi.CopyOut[float32](dst.b.p, 1) // cudaDeviceSynchronize first
	afterOwn = peek()
	if !slices.Equal(afterOwn, vals) || f.ctl.PendingOps() != 0 {
		t.Fatalf("after a device sync: %v, %d pending", afterOwn, f.ctl.PendingOps())
	}

	// Same thread: queue, sync, visible.
	host := f.zeros(capi.CPU, capi.CPU, capi.Float, 32, 4, 3)
	defer f.drop(host)
	onThreads(func() {
		capi.CopyIn(dst.b.p, make([]float32, 12))
		f.must(f.lib.MatrixCopy(f.res, src.t, dst.t))
		f.must(f.lib.StreamSync(f.res))
		afterOwn = peek()
		// To pageable memory: synchronous, after the work queued before it.
		f.must(f.lib.MatrixCopy(f.res, src.t, dst.t))
		f.must(f.lib.MatrixCopy(f.res, dst.t, host.t))
		queued = append([]float32(nil), unsafe.Slice((*float32)(host.b.p), 12)...)
	}, func() {})
	if !slices.Equal(afterOwn, vals) {
		t.Errorf("after its own thread's sync: %v", afterOwn)
	}
	if !slices.Equal(queued, vals) {
		t.Errorf("copied to pageable memory: %v", queued)
	}
}

// The H200 model reproduces the measured latencies (µs, p50 of search +
// sync, CAGRA N = 100k D = 128) within 10% on the single-CTA kernel and 13%
// on the multi-CTA one; AUTO picks the kernel as cuVS does.
func TestModelFitsTheH200Table(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	single := map[[2]int]float64{ // batch, callers (v26.06.00)
		{1, 1}: 341, {1, 4}: 351, {1, 16}: 370,
		{4, 1}: 349, {4, 4}: 366, {4, 16}: 378,
		{16, 1}: 370, {16, 4}: 372, {16, 16}: 417,
		{64, 1}: 380, {64, 4}: 411, {64, 16}: 829,
		{256, 1}: 409, {256, 4}: 821, {256, 16}: 3285,
		{1024, 1}: 592, {1024, 4}: 2069, {1024, 16}: 8274,
	}
	for bc, want := range single {
		got := float64(f.ctl.ModelDelay(bc[0], bc[1], 0).Microseconds())
		if math.Abs(got-want) > 0.1*want {
			t.Errorf("single-CTA batch %d with %d in flight: %.0f µs, measured %.0f", bc[0], bc[1], got, want)
		}
	}
	multi := map[[2]int]float64{ // batch, callers, all multi-CTA (v26.08.01)
		{1, 1}: 203, {1, 2}: 209, {1, 4}: 217, {1, 8}: 237, {1, 32}: 833, {1, 64}: 1675,
		{32, 1}: 231, {32, 2}: 241, {32, 4}: 257, {32, 8}: 288,
		{64, 1}: 234, {64, 2}: 255, {64, 4}: 271, {64, 8}: 462,
		{128, 1}: 237, {128, 2}: 257, {128, 4}: 447, {128, 8}: 907,
		{256, 1}: 252, {256, 2}: 445, {256, 4}: 858, {256, 8}: 1733,
		{512, 1}: 310, {512, 2}: 555, {512, 4}: 1085, {512, 8}: 2171,
		{1024, 1}: 468, {1024, 2}: 842, {1024, 4}: 1667, {1024, 8}: 3301,
	}
	for bc, want := range multi {
		got := float64(f.ctl.ModelDelay(bc[0], bc[1], bc[1]).Microseconds())
		if math.Abs(got-want) > 0.13*want {
			t.Errorf("multi-CTA batch %d with %d in flight: %.0f µs, measured %.0f", bc[0], bc[1], got, want)
		}
	}
}

// The model charges each search the kernel cuVS would run: AUTO is
// multi-CTA below 264 queries (twice the H200's 132 multiprocessors, or
// MaxQueries when set), single-CTA from there and for the persistent kernel.
func TestModelKernel(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, dim, k = 300, 4, 4
	rng := newRand()
	ds := c.f32(capi.CPU, capi.CPU, n, dim, randomMatrix(rng, n, dim))
	c.setDegrees(16, 8)
	c.must(c.lib.CagraBuild(c.res, c.params, ds.t, c.idx))
	c.drop(ds)
	c.ctl.SetModel(true)
	defer c.ctl.SetModel(false)
	const single, multi, auto = 0, 1, 100 // cuvsCagraSearchAlgo
	for _, tc := range []struct {
		algo, batch int
		maxQueries  uint64
		multi       bool
	}{
		{single, 1, 0, false}, {multi, 1, 0, true}, {auto, 1, 0, true}, {auto, 263, 0, true},
		{auto, 264, 0, false}, {multi, 300, 0, true}, {auto, 8, 264, false}, {auto, 300, 8, true},
	} {
		sp := capi.GetSearchParams(c.search)
		sp.Algo, sp.MaxQueries = tc.algo, tc.maxQueries
		capi.SetSearchParams(c.search, sp)
		q := c.f32(capi.CUDA, capi.CUDA, tc.batch, dim, randomMatrix(rng, tc.batch, dim))
		s0, m0 := c.ctl.ModelSearches()
		_, _, err := c.searchInto(c.idx, q, k, 32, capi.Filter{})
		c.must(err)
		c.drop(q)
		s1, m1 := c.ctl.ModelSearches()
		if got := m1-m0 == 1 && s1 == s0; got != tc.multi || s1-s0+m1-m0 != 1 {
			t.Errorf("algo %d, batch %d, max_queries %d: charged %d single-CTA and %d multi-CTA searches, want multi-CTA %v",
				tc.algo, tc.batch, tc.maxQueries, s1-s0, m1-m0, tc.multi)
		}
	}

}
