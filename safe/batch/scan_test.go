package batch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// TestScanBatchesCapped holds two brute-force batches on the GPU (scans)
// with six slots free: the requests queued meanwhile start no third search,
// and the first to finish takes them all as one batch. Every request gets
// its direct search's results.
func TestScanBatchesCapped(t *testing.T) {
	f := newFixture(t)
	ts := tenants(t, f.res, nRows, 1, 0.5, 21)
	g := &gateM{newGateF(f.s)}
	b, err := New[float32, int64](g, Options{MaxK: maxK, MaxBatch: 32, Slots: 8})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	var calls []*call
	for i := range 2 {
		calls = append(calls, startFiltered(ctx, b, ts[0].f, safetest.Random(uint64(800+i), 1, dim), maxK))
		<-g.filters
		if n := <-g.entered; n != 1 {
			t.Fatalf("batch %d holds %d rows, want 1", i, n)
		}
	}
	const queued = 5
	for i := range queued {
		calls = append(calls, startFiltered(ctx, b, ts[0].f, safetest.Random(uint64(810+i), 1, dim), maxK))
		waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == i+1 })
	}
	waitFor(b, func(in *batcher[float32, int64]) bool {
		if in.running != 2 || in.waking != 0 || in.scanning != scanStreams {
			t.Errorf("with %d requests queued: %d batches running, %d slots waking, %d scans: want 2, 0, %d", queued, in.running, in.waking, in.scanning, scanStreams)
		}
		return true
	})
	g.release()
	<-g.filters
	if n := <-g.entered; n != queued {
		t.Fatalf("the batch after the first scan holds %d rows, want the %d queued", n, queued)
	}
	g.release()
	g.release()
	for i, c := range calls {
		<-c.done
		if c.err != nil {
			t.Fatal(c.err)
		}
		wn, wd := f.directFiltered(t, c.q, maxK, ts[0].f)
		if !same(c.n, wn, c.d, wd) {
			t.Errorf("request %d: got %v, want %v", i, c.n, wn)
		}
	}
	waitFor(b, func(in *batcher[float32, int64]) bool { return in.running == 0 })
	if st := b.Stats(); st.Batches != 3 || st.Scans != 3 || b.b.maxScanning != scanStreams {
		t.Errorf("%d batches, %d scans, at most %d at once: want 3, 3, %d", st.Batches, st.Scans, b.b.maxScanning, scanStreams)
	}
}

// TestCAGRAExactMixed: CAGRA requests whose filters take the exact path
// for one query (50% allowed on a degree-32 graph of 128 dimensions, as in
// TestCAGRAFilteredAsAlone) share one batch whatever their filters,
// searched with a bitmap, while a filter that takes the graph (95%
// allowed) and no filter keep batches of their own; each request gets what
// a direct search of its query alone with its filter gives.
func TestCAGRAExactMixed(t *testing.T) {
	safetest.Check(t)
	const rows, d, k = 2000, 128, 10
	res := safetest.Resources(t)
	idx := buildCAGRA(t, res, safetest.Random(51, rows, d), rows, d, 32)
	ts := tenants(t, res, rows, 3, 0.5, 52)
	wide := tenants(t, res, rows, 1, 0.95, 53)[0].f
	sp := cagraDefaults(t)
	for _, c := range []struct {
		f    *safe.Filter
		want safe.FilterPath
	}{{ts[0].f, safe.FilterExact}, {wide, safe.FilterIndex}} {
		if got, err := idx.PlanFilter(sp, c.f, k, 1); err != nil || got != c.want {
			t.Fatalf("PlanFilter of a %d-of-%d filter: %v (%v), want %v", c.f.Allowed(), rows, got, err, c.want)
		}
	}
	s, err := CAGRA(idx, sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &gateM{newGateF(s)}
	b, err := New[float32, int64](g, Options{MaxK: k, MaxBatch: 32, Slots: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	search := func(f *safe.Filter, q []float32) *call {
		c := &call{q: q, n: make([]int64, k), d: make([]float32, k), done: make(chan struct{})}
		go func() {
			defer close(c.done)
			c.err = b.SearchIntoFiltered(ctx, f, q, c.n, c.d)
		}()
		return c
	}
	blocker := search(nil, safetest.Random(54, 1, d))
	<-g.filters
	<-g.entered
	order := []*safe.Filter{ts[0].f, ts[1].f, wide, ts[2].f, nil, ts[0].f}
	var calls []*call
	for i, f := range order {
		calls = append(calls, search(f, safetest.Random(uint64(60+i), 1, d)))
		waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == i+1 })
	}
	for _, want := range []struct {
		kind safe.FilterKind
		f    *safe.Filter
		rows int
	}{{safe.Bitmap, nil, 4}, {safe.Bitset, wide, 1}, {safe.Bitset, nil, 1}} {
		g.release()
		got := <-g.filters
		n := <-g.entered
		switch {
		case want.kind == safe.Bitmap && (got == nil || got.Kind() != safe.Bitmap || got.Queries() != want.rows),
			want.kind == safe.Bitset && got != want.f,
			n != want.rows:
			t.Fatalf("a batch of %d rows with filter %v, want %d rows with %v %v", n, got, want.rows, want.kind, want.f)
		}
	}
	g.release()
	<-blocker.done
	alone := cagraAlone(t, res, idx, sp, d, k)
	for i, c := range calls {
		<-c.done
		if c.err != nil {
			t.Fatal(c.err)
		}
		if want := alone(c.q, order[i]); order[i] != wide && order[i] != nil && !slices.Equal(c.n, want) {
			t.Errorf("request %d batched: %v; its query alone: %v", i, c.n, want)
		}
	}
	if st := b.Stats(); st.Batches != 4 || st.Mixed != 1 || st.Scans != 1 || st.Filtered != 2 {
		t.Errorf("%d batches, %d mixed, %d scans, %d filtered: want 4, 1, 1, 2", st.Batches, st.Mixed, st.Scans, st.Filtered)
	}
}

// cagraAlone returns a direct search of one query of d dimensions with
// sp and a filter for k neighbours: what a batched request must get.
func cagraAlone(t *testing.T, res *safe.Resources, idx *cagra.Index, sp *cagra.SearchParams, d, k int) func(q []float32, f *safe.Filter) []int64 {
	t.Helper()
	q1, err := safe.NewDeviceMatrix[float32](res, 1, d)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, q1)
	n1, err := safe.NewDeviceMatrix[int64](res, 1, k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, n1)
	d1, err := safe.NewDeviceMatrix[float32](res, 1, k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, d1)
	return func(q []float32, f *safe.Filter) []int64 {
		t.Helper()
		if err := q1.CopyFromHost(res, q); err != nil {
			t.Fatal(err)
		}
		if err := idx.Search(res, sp, q1, n1, d1, f); err != nil {
			t.Fatal(err)
		}
		out, err := n1.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}
