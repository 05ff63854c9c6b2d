package batch

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
)

// tenant is a filter and the rows it lets through.
type tenant struct {
	f     *safe.Filter
	allow []bool
}

// tenants makes n bitset filters over rows rows, each letting a random
// fraction frac of them through (seeded), closed at the test's end.
func tenants(t *testing.T, res *safe.Resources, rows, n int, frac float64, seed uint64) []tenant {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]tenant, n)
	for i := range out {
		out[i].allow = make([]bool, rows)
		var ids []int64
		for r := range rows {
			if rng.Float64() < frac {
				out[i].allow[r] = true
				ids = append(ids, int64(r))
			}
		}
		f, err := safe.NewBitsetFilterAllowing(res, rows, ids)
		if err != nil {
			t.Fatal(err)
		}
		out[i].f = f
		t.Cleanup(func() {
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	return out
}

// directFiltered is the fixture's brute-force search of queries alone,
// for k neighbours, with filter (nil: none): what every batched request
// must get.
func (f *fixture) directFiltered(t testing.TB, queries []float32, k int, filter *safe.Filter) ([]int64, []float32) {
	t.Helper()
	rows := len(queries) / dim
	q, err := safe.DeviceMatrixFrom(f.res, queries, rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	n, err := safe.NewDeviceMatrix[int64](f.res, rows, k)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	d, err := safe.NewDeviceMatrix[float32](f.res, rows, k)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := f.idx.Search(f.res, q, n, d, filter); err != nil {
		t.Fatal(err)
	}
	ids, err := n.ToHost(f.res)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := d.ToHost(f.res)
	if err != nil {
		t.Fatal(err)
	}
	return ids, ds
}

// TestTenantsNeverMix: many callers, each request with one of 16 filters
// (or none), through a Batcher over brute force (exact): every request
// gets exactly its own direct filtered search's results (so never a row
// its filter forbids, nor another request's rows), whatever it was
// batched with.
func TestTenantsNeverMix(t *testing.T) {
	f := newFixture(t)
	ts := tenants(t, f.res, nRows, 16, 0.5, 1)
	b, err := New[float32, int64](f.s, Options{MaxK: maxK, MaxBatch: 16, Slots: 3})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	const callers, each = 32, 12
	type got struct {
		q      []float32
		tenant int // -1: no filter
		n      []int64
		d      []float32
	}
	results := make([][]got, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 3))
			for i := range each {
				rows, k := 1+rng.IntN(3), 1+rng.IntN(maxK)
				q := safetest.Random(uint64(1000+c*each+i), rows, dim)
				ten := rng.IntN(len(ts)+1) - 1
				var filter *safe.Filter
				if ten >= 0 {
					filter = ts[ten].f
				}
				n, d := make([]int64, rows*k), make([]float32, rows*k)
				if err := b.SearchIntoFiltered(context.Background(), filter, q, n, d); err != nil {
					t.Error(err)
					return
				}
				results[c] = append(results[c], got{q, ten, n, d})
			}
		}()
	}
	wg.Wait()
	checked := 0
	for _, rs := range results {
		for _, r := range rs {
			var filter *safe.Filter
			if r.tenant >= 0 {
				filter = ts[r.tenant].f
				for _, id := range r.n {
					if id < 0 || id >= nRows || !ts[r.tenant].allow[id] {
						t.Fatalf("tenant %d got row %d, which its filter forbids", r.tenant, id)
					}
				}
			}
			wn, wd := f.directFiltered(t, r.q, len(r.n)/(len(r.q)/dim), filter)
			if !same(r.n, wn, r.d, wd) {
				t.Fatalf("tenant %d: got %v, its direct filtered search gives %v", r.tenant, r.n, wn)
			}
			checked++
		}
	}
	if checked != callers*each {
		t.Fatalf("%d requests checked, want %d", checked, callers*each)
	}
	// How requests meet in batches is the GPU's timing: on an H200 nearly
	// every batch holds a filtered request; only that some do is certain.
	st := b.Stats()
	if st.Filtered == 0 || st.Filtered > st.Batches {
		t.Errorf("%d filtered batches of %d: want at least one, and no more than the batches", st.Filtered, st.Batches)
	}
	t.Logf("%d batches, %d filtered, %d mixed", st.Batches, st.Filtered, st.Mixed)
}

// gateF is a gate that is a FilterSearcher: it records each batch's
// filter as the batch starts.
type gateF struct {
	*gate
	fs      FilterSearcher
	filters chan *safe.Filter
}

func newGateF(s Searcher) *gateF {
	return &gateF{gate: newGate(s), fs: s.(FilterSearcher), filters: make(chan *safe.Filter, 100)}
}

func (g *gateF) SearchBatch(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
	g.filters <- nil
	return g.gate.SearchBatch(res, q, n, d)
}

func (g *gateF) SearchBatchFiltered(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, f *safe.Filter) error {
	g.filters <- f
	v, _ := q.View()
	g.entered <- int(v.Dim(0))
	<-g.tokens
	return g.fs.SearchBatchFiltered(res, q, n, d, f)
}

func startFiltered(ctx context.Context, b *Batcher[float32, int64], f *safe.Filter, q []float32, k int) *call {
	rows := len(q) / dim
	c := &call{q: q, n: make([]int64, rows*k), d: make([]float32, rows*k), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = b.SearchIntoFiltered(ctx, f, q, c.n, c.d)
	}()
	return c
}

// TestTenantsTakeTurns holds one batch on the GPU while requests of three
// filters queue in the order A B A C A B: the next batches are A's three
// together, then B's two, then C's (the oldest request leads, and takes the
// queued requests of its filter with it), no request passes more than one
// batch of each other filter, and each gets its own filter's results.
func TestTenantsTakeTurns(t *testing.T) {
	f := newFixture(t)
	ts := tenants(t, f.res, nRows, 3, 0.5, 2)
	g := newGateF(f.s)
	b, err := New[float32, int64](g, Options{MaxK: maxK, MaxBatch: 32, Slots: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	blocker := start(ctx, b, safetest.Random(500, 1, dim), maxK)
	<-g.filters
	<-g.entered
	order := []int{0, 1, 0, 2, 0, 1}
	var calls []*call
	for i, ten := range order {
		calls = append(calls, startFiltered(ctx, b, ts[ten].f, safetest.Random(uint64(510+i), 1, dim), maxK))
		waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == i+1 })
	}
	g.release()
	<-blocker.done
	for _, want := range []struct{ ten, rows int }{{0, 3}, {1, 2}, {2, 1}} {
		if got := <-g.filters; got != ts[want.ten].f {
			t.Fatalf("a batch of another filter than tenant %d's", want.ten)
		}
		if rows := <-g.entered; rows != want.rows {
			t.Errorf("tenant %d's batch: %d rows, want %d", want.ten, rows, want.rows)
		}
		g.release()
	}
	for i, c := range calls {
		<-c.done
		if c.err != nil {
			t.Fatal(c.err)
		}
		wn, wd := f.directFiltered(t, c.q, maxK, ts[order[i]].f)
		if !same(c.n, wn, c.d, wd) {
			t.Errorf("request %d (tenant %d): got %v, want %v", i, order[i], c.n, wn)
		}
	}
	if st := b.Stats(); st.Batches != 4 || st.Filtered != 3 || st.MaxPassed > 2 {
		t.Errorf("stats: %d batches, %d filtered, a request passed by %d: want 4, 3, at most 2", st.Batches, st.Filtered, st.MaxPassed)
	}
}

// TestTenantsSkewedNoStarvation: one tenant sends 90% of the requests, ten
// others the rest, from 64 callers through 2 slots; no request waits while
// more batches pass it than there are other filters (each filter's queue
// fits in a batch), and the minority tenants' requests all return.
func TestTenantsSkewedNoStarvation(t *testing.T) {
	f := newFixture(t)
	ts := tenants(t, f.res, nRows, 11, 0.5, 3)
	b, err := New[float32, int64](f.s, Options{MaxK: maxK, MaxBatch: 64, Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	const callers, each = 64, 20
	var wg sync.WaitGroup
	var minority sync.Map
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 5))
			q := safetest.Random(uint64(2000+c), 1, dim)
			n, d := make([]int64, maxK), make([]float32, maxK)
			for range each {
				ten := 0
				if rng.IntN(10) == 0 {
					ten = 1 + rng.IntN(10)
				}
				if err := b.SearchIntoFiltered(context.Background(), ts[ten].f, q, n, d); err != nil {
					t.Error(err)
					return
				}
				if ten > 0 {
					minority.Store(ten, true)
				}
			}
		}()
	}
	wg.Wait()
	st := b.Stats()
	if st.MaxPassed > int64(len(ts)-1) {
		t.Errorf("a request waited while %d batches passed it, more than the %d other filters", st.MaxPassed, len(ts)-1)
	}
	if st.Filtered != st.Batches {
		t.Errorf("%d of %d batches filtered: every request had a filter", st.Filtered, st.Batches)
	}
}

// TestFilterHeldWhileQueued: a filter with a request waiting in the queue
// or searching cannot be closed (dlpack.ErrBorrowed); once its requests
// are done it can, and a request with a closed filter is refused with
// safe.ErrClosed. A request cancelled in the queue lets go of its filter.
func TestFilterHeldWhileQueued(t *testing.T) {
	f := newFixture(t)
	res := f.res
	ids := []int64{1, 2, 3, 5, 8, 13, 21, 34, 55, 89}
	fa, err := safe.NewBitsetFilterAllowing(res, nRows, ids)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := safe.NewBitsetFilterAllowing(res, nRows, ids)
	if err != nil {
		t.Fatal(err)
	}
	g := newGateF(f.s)
	b, err := New[float32, int64](g, Options{MaxK: maxK, MaxBatch: 32, Slots: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	searching := startFiltered(ctx, b, fa, safetest.Random(600, 1, dim), maxK)
	<-g.filters
	<-g.entered
	cctx, cancel := context.WithCancel(ctx)
	queued := startFiltered(cctx, b, fb, safetest.Random(601, 1, dim), maxK)
	waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == 1 })
	if err := fa.Close(); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("Close of a filter whose batch searches: %v, want dlpack.ErrBorrowed", err)
	}
	if err := fb.Close(); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("Close of a filter whose request waits: %v, want dlpack.ErrBorrowed", err)
	}
	cancel()
	<-queued.done
	if !errors.Is(queued.err, context.Canceled) {
		t.Fatalf("cancelled: %v", queued.err)
	}
	if err := fb.Close(); err != nil {
		t.Errorf("Close once its only request was cancelled: %v", err)
	}
	g.release()
	<-searching.done
	if searching.err != nil {
		t.Fatal(searching.err)
	}
	for _, id := range searching.n {
		if id != safe.SentinelID64 && (id < 1 || id > 89) {
			t.Errorf("row %d outside the filter", id)
		}
	}
	if err := fa.Close(); err != nil {
		t.Errorf("Close once its request returned: %v", err)
	}
	if err := b.SearchIntoFiltered(ctx, fa, safetest.Random(602, 1, dim), make([]int64, maxK), make([]float32, maxK)); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("a request with a closed filter: %v, want safe.ErrClosed", err)
	}
}

// TestTenantsRefusals: a per-request filter the Batcher cannot honour is
// refused before it is queued, naming it.
func TestTenantsRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	q := safetest.Random(700, 1, dim)
	n, d := make([]int64, maxK), make([]float32, maxK)
	few, err := safe.NewBitsetFilterAllowing(f.res, nRows, []int64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, few)
	wide := tenants(t, f.res, nRows, 1, 0.5, 4)[0].f
	other := tenants(t, f.res, nRows+1, 1, 0.5, 4)[0].f
	bitmap, err := safe.NewBitmapFilter(f.res, 1, nRows, make([]uint32, (nRows+31)/32))
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bitmap)
	fixed, err := BruteForce(f.idx, wide)
	if err != nil {
		t.Fatal(err)
	}
	bf, err := New[float32, int64](f.s, Options{MaxK: maxK})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, bf)
	bfixed, err := New[float32, int64](fixed, Options{MaxK: maxK})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, bfixed)
	for _, c := range []struct {
		name string
		b    *Batcher[float32, int64]
		f    *safe.Filter
	}{
		{"a Searcher with its own filter", bfixed, wide},
		{"a bitmap", bf, bitmap},
		{"a bitset for another row count", bf, other},
		{"brute force, fewer rows than MaxK", bf, few},
	} {
		var ae *safe.ArgError
		if err := bf.SearchIntoFiltered(ctx, c.f, q, n, d); c.b == bf && !errors.As(err, &ae) {
			t.Errorf("%s: %v, want an *safe.ArgError", c.name, err)
		}
		if err := c.b.SearchIntoFiltered(ctx, c.f, q, n, d); !errors.As(err, &ae) || ae.Arg != "filter" {
			t.Errorf("%s: %v, want an *safe.ArgError naming filter", c.name, err)
		}
	}
	if err := bfixed.SearchIntoFiltered(ctx, nil, q, n, d); err != nil {
		t.Errorf("no filter of its own on a Searcher with one: %v", err)
	}
}

// TestSearchIntoFilteredAllocatesNothing: a filtered request allocates
// nothing on the Go heap, as an unfiltered one.
func TestSearchIntoFilteredAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled state is reallocated")
	}
	f := newFixture(t)
	ts := tenants(t, f.res, nRows, 2, 0.5, 6)
	b, err := New[float32, int64](f.s, Options{MaxK: maxK})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	q := safetest.Random(9, 2, dim)
	n, d := make([]int64, 2*maxK), make([]float32, 2*maxK)
	i := 0
	search := func() {
		i++
		if err := b.SearchIntoFiltered(ctx, ts[i%2].f, q, n, d); err != nil {
			t.Fatal(err)
		}
	}
	search()
	if a := testing.AllocsPerRun(200, search); a != 0 {
		t.Errorf("SearchIntoFiltered: %v allocations per call, want 0", a)
	}
}
