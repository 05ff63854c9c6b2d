package batch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// The tests run against the ABI test double, or against
// $CUVS_TEST_LIBRARY (see internal/safetest): every check here holds on a
// real libcuvs_c too.
func TestMain(m *testing.M) { safetest.Main(m) }

const (
	nRows, dim, maxK = 400, 16, 8
)

// fixture is a brute-force index (exact, so that every caller's results
// can be compared with a direct search) over random data.
type fixture struct {
	res  *safe.Resources
	data []float32
	idx  *bruteforce.Index
	s    Searcher
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	safetest.Check(t)
	f := &fixture{res: safetest.Resources(t), data: safetest.Random(1, nRows, dim)}
	ds, err := safe.DeviceMatrixFrom(f.res, f.data, nRows, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	if f.idx, err = bruteforce.Build(f.res, ds, nil); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f.idx)
	if f.s, err = BruteForce(f.idx, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

// direct searches queries alone, for k neighbors, with the index's own
// Search: what every batched request must get.
func (f *fixture) direct(t testing.TB, queries []float32, k int) ([]int64, []float32) {
	t.Helper()
	return f.directFiltered(t, queries, k, nil)
}

// same reports whether batched results equal direct ones: ids exactly,
// distances to float32 rounding (a GPU's matrix products may round
// differently for another batch shape).
func same(gotN, wantN []int64, gotD, wantD []float32) bool {
	if !slices.Equal(gotN, wantN) || len(gotD) != len(wantD) {
		return false
	}
	for i := range gotD {
		if !safetest.NearlyEqual(gotD[i], wantD[i]) {
			return false
		}
	}
	return true
}

// gate is a Searcher that waits for a token before each batch: batches
// form deterministically while it holds one back.
type gate struct {
	Searcher
	tokens  chan struct{}
	entered chan int // the rows of each batch, as it starts
}

func newGate(s Searcher) *gate {
	return &gate{Searcher: s, tokens: make(chan struct{}, 100), entered: make(chan int, 100)}
}

func (g *gate) SearchBatch(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
	v, _ := q.View()
	g.entered <- int(v.Dim(0))
	<-g.tokens
	return g.Searcher.SearchBatch(res, q, n, d)
}

func (g *gate) release() { g.tokens <- struct{}{} }

func closeBatcher[T dlpack.DType, N Neighbor](t *testing.T, b *Batcher[T, N]) {
	t.Helper()
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
}

// waitFor polls cond (under the batcher's lock) until it holds: no timing,
// only progress.
func waitFor[T dlpack.DType, N Neighbor](b *Batcher[T, N], cond func(in *batcher[T, N]) bool) {
	for {
		b.b.mu.Lock()
		ok := cond(b.b)
		// As every holder of the lock, let go through unlock: a request
		// pushed into the intake meanwhile is drained, not left there.
		b.b.unlock()
		if ok {
			return
		}
		runtime.Gosched()
		time.Sleep(50 * time.Microsecond)
	}
}

type call struct {
	q    []float32
	n    []int64
	d    []float32
	err  error
	done chan struct{}
}

func start(ctx context.Context, b *Batcher[float32, int64], q []float32, k int) *call {
	rows := len(q) / dim
	c := &call{q: q, n: make([]int64, rows*k), d: make([]float32, rows*k), done: make(chan struct{})}
	for i := range c.n {
		c.n[i], c.d[i] = -7, -7 // never a result
	}
	go func() {
		defer close(c.done)
		c.err = b.SearchInto(ctx, q, c.n, c.d)
	}()
	return c
}

func untouched(c *call) bool {
	for i := range c.n {
		if c.n[i] != -7 || c.d[i] != -7 {
			return false
		}
	}
	return true
}

// TestBatchesForm holds one batch on the GPU (a gate) while requests of
// different sizes and k queue, then checks that they were searched as one
// batch and that each caller got exactly its direct search's results.
func TestBatchesForm(t *testing.T) {
	f := newFixture(t)
	g := newGate(f.s)
	b, err := New[float32, int64](g, Options{MaxK: maxK, MaxBatch: 32, Slots: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	first := start(ctx, b, safetest.Random(100, 1, dim), maxK)
	if rows := <-g.entered; rows != 1 {
		t.Fatalf("the lone first request went out in a batch of %d rows", rows)
	}
	var calls []*call
	var ks []int
	rows := 0
	for i := range 10 {
		q := safetest.Random(uint64(200+i), 1+i%3, dim)
		k := 1 + i%maxK
		calls = append(calls, start(ctx, b, q, k))
		ks = append(ks, k)
		rows += 1 + i%3
	}
	waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == 10 })
	g.release()
	<-first.done
	if got := <-g.entered; got != rows {
		t.Errorf("the queued requests went out in a batch of %d rows, want %d", got, rows)
	}
	g.release()
	for i, c := range calls {
		<-c.done
		if c.err != nil {
			t.Fatalf("request %d: %v", i, c.err)
		}
		wn, wd := f.direct(t, c.q, ks[i])
		if !same(c.n, wn, c.d, wd) {
			t.Errorf("request %d (k %d): got %v %v, a direct search gives %v %v", i, ks[i], c.n, c.d, wn, wd)
		}
	}
	st := b.Stats()
	if st.Batches != 2 || st.Queries != int64(rows+1) || st.Sizes[1] != 1 || st.Sizes[rows] != 1 {
		t.Errorf("stats %d batches, %d queries, want 2 and %d", st.Batches, st.Queries, rows+1)
	}
	if st.Mean() != float64(rows+1)/2 || st.Percentile(50) != 1 || st.Percentile(99) != rows {
		t.Errorf("mean %v, p50 %d, p99 %d", st.Mean(), st.Percentile(50), st.Percentile(99))
	}
}

// TestCancel cancels one request while it waits in the queue and one while
// its batch searches: both return the context's error at once, and neither
// caller's buffers are written, then or later; the request that shared the
// batch gets its results.
func TestCancel(t *testing.T) {
	f := newFixture(t)
	g := newGate(f.s)
	b, err := New[float32, int64](g, Options{MaxK: maxK, MaxBatch: 32, Slots: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	bg := context.Background()
	blocker := start(bg, b, safetest.Random(300, 1, dim), maxK)
	<-g.entered

	ctxA, cancelA := context.WithCancel(bg)
	ctxB, cancelB := context.WithCancel(bg)
	a := start(ctxA, b, safetest.Random(301, 2, dim), maxK)
	waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == 1 })
	c := start(bg, b, safetest.Random(302, 1, dim), 3)
	waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == 2 })
	queued := start(ctxB, b, safetest.Random(303, 1, dim), maxK)
	waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == 3 })

	cancelB() // waiting in the queue
	<-queued.done
	if !errors.Is(queued.err, context.Canceled) {
		t.Errorf("cancelled in the queue: %v, want context.Canceled", queued.err)
	}
	waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == 2 && in.pendRows == 3 })

	g.release() // the blocker's batch ends; a and c go out together
	<-blocker.done
	if rows := <-g.entered; rows != 3 {
		t.Errorf("a and c went out in a batch of %d rows, want 3", rows)
	}
	cancelA() // its batch is searching
	<-a.done
	if !errors.Is(a.err, context.Canceled) {
		t.Errorf("cancelled during its batch: %v, want context.Canceled", a.err)
	}
	g.release()
	<-c.done
	if c.err != nil {
		t.Fatal(c.err)
	}
	wn, wd := f.direct(t, c.q, 3)
	if !same(c.n, wn, c.d, wd) {
		t.Errorf("the request beside a cancelled one: got %v, want %v", c.n, wn)
	}
	if err := b.Close(); err != nil { // every batch done: nothing writes later
		t.Fatal(err)
	}
	if !untouched(a) || !untouched(queued) {
		t.Errorf("a cancelled caller's buffers were written: %v %v", a.n, queued.n)
	}
	if st := b.Stats(); st.Batches != 2 || st.Queries != 4 {
		t.Errorf("stats: %d batches of %d queries, want 2 of 4 (the cancelled request's rows searched)", st.Batches, st.Queries)
	}
}

// TestCloseDrains closes a Batcher with requests queued: they are searched,
// later ones are refused with ErrClosed, and Close returns when all is done.
func TestCloseDrains(t *testing.T) {
	f := newFixture(t)
	g := newGate(f.s)
	b, err := New[float32, int64](g, Options{MaxK: maxK, MaxBatch: 4, Slots: 2, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	blocker := start(bg, b, safetest.Random(400, 1, dim), maxK)
	<-g.entered
	var calls []*call
	for i := range 6 {
		calls = append(calls, start(bg, b, safetest.Random(uint64(401+i), 1, dim), maxK))
	}
	// All six queued (four of them taken, as a full batch, by the second slot).
	waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending)+int(in.queries)-1 == 6 })
	closed := make(chan error)
	go func() { closed <- b.Close() }()
	waitFor(b, func(in *batcher[float32, int64]) bool { return in.closing })
	if err := b.SearchInto(bg, safetest.Random(1, 1, dim), make([]int64, 1), make([]float32, 1)); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("SearchInto during Close: %v, want ErrClosed", err)
	}
	for range 3 { // the blocker's batch, and two batches of 4 rows at most
		g.release()
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for i, c := range append(calls, blocker) {
		<-c.done
		wn, wd := f.direct(t, c.q, maxK)
		if c.err != nil || !same(c.n, wn, c.d, wd) {
			t.Errorf("request %d: %v %v, want %v", i, c.err, c.n, wn)
		}
	}
	if _, err := b.Search(bg, safetest.Random(1, 1, dim), 1); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Search after Close: %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if err := b.WarmUp(); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("WarmUp after Close: %v", err)
	}
}

// TestConcurrentCallers: many goroutines, each with requests of 1–3 rows
// and its own k, some cancelled at random moments, and Close in the
// middle. Every call must end in exactly one of: its direct search's
// results, its context's error with its buffers never written, or
// ErrClosed with its buffers never written.
func TestConcurrentCallers(t *testing.T) {
	for _, o := range []Options{
		{MaxK: maxK, MaxBatch: 16, Slots: 3},
		{MaxK: maxK, MaxBatch: 16, Slots: 3, DeviceBuffers: true},
		{MaxK: maxK, MaxBatch: 16, Slots: 3, MaxWait: 50 * time.Microsecond},
		{MaxK: maxK, MaxBatch: 16, Slots: 3, Wait: WaitSleep},
		{MaxK: maxK, MaxBatch: 16, Slots: 3, DeviceBuffers: true, Wait: WaitSleep},
	} {
		t.Run(fmt.Sprintf("device buffers %v, max wait %v, wait %d", o.DeviceBuffers, o.MaxWait, o.Wait), func(t *testing.T) {
			concurrentCallers(t, o)
		})
	}
}

func concurrentCallers(t *testing.T, o Options) {
	f := newFixture(t)
	if ctl := safetest.Control(); ctl != nil {
		ctl.SetCallDelay(200 * time.Microsecond) // GPU time, so that batches form
		ctl.SetCallJitter(100 * time.Microsecond)
		t.Cleanup(func() { ctl.SetCallDelay(0); ctl.SetCallJitter(0) })
	}
	var sleeps0 int64
	if ctl := safetest.Control(); ctl != nil {
		sleeps0, _ = ctl.EventWaits()
	}
	b, err := New[float32, int64](f.s, o)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 48, 12
	type outcome struct {
		c *call
		k int
	}
	results := make([][]outcome, goroutines)
	var wg sync.WaitGroup
	closeAt := make(chan struct{})
	for gi := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if gi == 0 && i == each/2 {
					close(closeAt)
				}
				ctx, cancel := context.WithCancel(context.Background())
				seed := uint64(1000 + gi*each + i)
				q := safetest.Random(seed, 1+int(seed%3), dim)
				k := 1 + int(seed%maxK)
				c := start(ctx, b, q, k)
				if seed%5 == 0 {
					time.Sleep(time.Duration(seed%7) * 30 * time.Microsecond)
					cancel()
				}
				<-c.done
				cancel()
				results[gi] = append(results[gi], outcome{c, k})
			}
		}()
	}
	<-closeAt
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	var ok, cancelled, closed int
	for gi := range results {
		for _, o := range results[gi] {
			switch c := o.c; {
			case c.err == nil:
				ok++
				if wn, wd := f.direct(t, c.q, o.k); !same(c.n, wn, c.d, wd) {
					t.Errorf("goroutine %d: got %v, want %v", gi, c.n, wn)
				}
			case errors.Is(c.err, context.Canceled):
				cancelled++
				if !untouched(c) {
					t.Errorf("goroutine %d: cancelled, but its buffers were written", gi)
				}
			case errors.Is(c.err, safe.ErrClosed):
				closed++
				if !untouched(c) {
					t.Errorf("goroutine %d: refused, but its buffers were written", gi)
				}
			default:
				t.Errorf("goroutine %d: %v", gi, c.err)
			}
		}
	}
	st := b.Stats()
	t.Logf("%d delivered, %d cancelled, %d refused; %d batches, mean %.1f rows, p99 %d", ok, cancelled, closed, st.Batches, st.Mean(), st.Percentile(99))
	if st.Batches == 0 {
		t.Errorf("Stats: no batch")
	}
	wantAsleep := int64(0)
	if o.Wait == WaitSleep {
		wantAsleep = st.Batches
	}
	if ctl := safetest.Control(); ctl != nil {
		// Each batch asleep waited on a blocking-sync event (the double
		// counts them process-wide: no other test runs meanwhile).
		if sleeps, _ := ctl.EventWaits(); sleeps-sleeps0 != wantAsleep {
			t.Errorf("blocking-sync event waits: %d, want %d", sleeps-sleeps0, wantAsleep)
		}
	}
}

func TestValidation(t *testing.T) {
	f := newFixture(t)
	arg := func(err error, name string) bool {
		var ae *safe.ArgError
		return errors.As(err, &ae) && ae.Arg == name
	}
	for _, c := range []struct {
		o    Options
		name string
	}{
		{Options{}, "MaxK"},
		{Options{MaxK: nRows + 1}, "MaxK"},
		{Options{MaxK: 1, MaxBatch: -1}, "MaxBatch"},
		{Options{MaxK: 1, MaxWait: -1}, "MaxWait"},
		{Options{MaxK: 1, Slots: -1}, "Slots"},
		{Options{MaxK: 1, Wait: WaitSleep + 1}, "Wait"},
		{Options{MaxK: 1, Wait: -1}, "Wait"},
	} {
		if _, err := New[float32, int64](f.s, c.o); !arg(err, c.name) {
			t.Errorf("%+v: %v, want an ArgError for %s", c.o, err, c.name)
		}
	}
	if _, err := New[float32, int64](nil, Options{MaxK: 1}); !arg(err, "s") {
		t.Errorf("nil searcher: %v", err)
	}
	if _, err := New[int8, int64](f.s, Options{MaxK: 1}); !arg(err, "T") {
		t.Errorf("int8 queries on a float32 index: %v", err)
	}
	if _, err := New[float32, uint32](f.s, Options{MaxK: 1}); !arg(err, "N") {
		t.Errorf("uint32 ids from brute force: %v", err)
	}
	if _, err := BruteForce(nil, nil); !arg(err, "idx") {
		t.Errorf("nil index: %v", err)
	}
	if _, err := CAGRA(nil, nil, nil); !arg(err, "idx") {
		t.Errorf("nil index: %v", err)
	}
	bm, err := safe.NewBitmapFilter(f.res, 2, nRows, make([]uint32, kit.Words(2*nRows)))
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bm)
	if _, err := BruteForce(f.idx, bm); !arg(err, "filter") {
		t.Errorf("a bitmap: %v", err)
	}

	b, err := New[float32, int64](f.s, Options{MaxK: 4, MaxBatch: 3})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	if b.Dim() != dim || b.MaxK() != 4 || b.MaxBatch() != 3 {
		t.Errorf("Dim %d MaxK %d MaxBatch %d", b.Dim(), b.MaxK(), b.MaxBatch())
	}
	ctx := context.Background()
	q := safetest.Random(5, 1, dim)
	for _, c := range []struct {
		q    []float32
		n    []int64
		d    []float32
		name string
	}{
		{nil, make([]int64, 1), make([]float32, 1), "queries"},
		{q[:dim-1], make([]int64, 1), make([]float32, 1), "queries"},
		{safetest.Random(5, 4, dim), make([]int64, 4), make([]float32, 4), "queries"}, // 4 rows > MaxBatch
		{q, make([]int64, 2), make([]float32, 1), "distances"},
		{q, make([]int64, 5), make([]float32, 5), "neighbors"}, // k 5 > MaxK
		{q, nil, nil, "neighbors"},
		{safetest.Random(5, 2, dim), make([]int64, 3), make([]float32, 3), "neighbors"},
	} {
		if err := b.SearchInto(ctx, c.q, c.n, c.d); !arg(err, c.name) {
			t.Errorf("len(q) %d, len(n) %d, len(d) %d: %v, want an ArgError for %s", len(c.q), len(c.n), len(c.d), err, c.name)
		}
	}
	if _, err := b.Search(ctx, q, 0); !arg(err, "k") {
		t.Errorf("k 0: %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.SearchInto(done, q, make([]int64, 1), make([]float32, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("a done context: %v", err)
	}
	res, err := b.Search(ctx, q, 2)
	if err != nil {
		t.Fatal(err)
	}
	n, d := res.Neighbors, res.Distances
	wn, wd := f.direct(t, q, 2)
	if res.K != 2 || res.Len() != 1 || !same(n, wn, d, wd) {
		t.Errorf("Search: %+v, want %v", res, wn)
	}
	if err := b.WarmUp(); err != nil {
		t.Error(err)
	}
	if d[0] < 0 || math.IsNaN(float64(d[0])) {
		t.Error(d)
	}
}

// TestSearchIntoAllocatesNothing holds a request with the caller's buffers
// to zero Go heap allocations: pooled request, reused queue, views made
// once per batch size, the index's search, the copies.
func TestSearchIntoAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled state is reallocated")
	}
	ctl := safetest.Control()
	for _, wait := range []Wait{WaitSpin, WaitSleep} {
		var sleeps0 int64
		if ctl != nil {
			sleeps0, _ = ctl.EventWaits()
		}
		f := newFixture(t)
		b, err := New[float32, int64](f.s, Options{MaxK: maxK, Wait: wait})
		if err != nil {
			t.Fatal(err)
		}
		closeBatcher(t, b)
		ctx := context.Background()
		q := safetest.Random(9, 2, dim)
		n, d := make([]int64, 2*maxK), make([]float32, 2*maxK)
		search := func() {
			if err := b.SearchInto(ctx, q, n, d); err != nil {
				t.Fatal(err)
			}
		}
		search()
		if a := testing.AllocsPerRun(200, search); a != 0 {
			t.Errorf("wait %d: SearchInto: %v allocations per call, want 0", wait, a)
		}
		ctx, cancel := context.WithCancel(ctx)
		if a := testing.AllocsPerRun(200, search); a != 0 {
			t.Errorf("wait %d: SearchInto with a cancellable context: %v allocations per call, want 0", wait, a)
		}
		cancel()
		st := b.Stats()
		if st.Batches == 0 {
			t.Errorf("wait %d: no batch", wait)
		}
		if ctl != nil { // each batch waited on a blocking-sync event, or none did
			sleeps, _ := ctl.EventWaits()
			if want := map[Wait]int64{WaitSpin: 0, WaitSleep: st.Batches}[wait]; sleeps-sleeps0 != want {
				t.Errorf("wait %d: %d blocking-sync event waits for %d batches, want %d", wait, sleeps-sleeps0, st.Batches, want)
			}
		}
	}
}

// TestFreeSlotStartsAtOnce: with the default MaxWait (0), a request that
// finds a free slot is searched at once, alone, even while another batch
// searches; requests that find every slot busy go out together in the
// next free slot's batch. Stats accounts for every request.
func TestFreeSlotStartsAtOnce(t *testing.T) {
	f := newFixture(t)
	g := newGate(f.s)
	b, err := New[float32, int64](g, Options{MaxK: maxK, MaxBatch: 32, Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	first := start(ctx, b, safetest.Random(200, 1, dim), maxK)
	if rows := <-g.entered; rows != 1 {
		t.Fatalf("first batch: %d rows", rows)
	}
	second := start(ctx, b, safetest.Random(201, 1, dim), maxK)
	if rows := <-g.entered; rows != 1 { // the second slot, with the first still searching
		t.Fatalf("second batch: %d rows, want 1 at once", rows)
	}
	var queued []*call
	for i := range 5 {
		queued = append(queued, start(ctx, b, safetest.Random(uint64(210+i), 1, dim), maxK))
	}
	waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == 5 })
	g.release() // a slot frees and takes all five
	if rows := <-g.entered; rows != 5 {
		t.Fatalf("third batch: %d rows, want the 5 queued", rows)
	}
	g.release()
	g.release()
	for _, c := range append([]*call{first, second}, queued...) {
		<-c.done
		if c.err != nil {
			t.Fatal(c.err)
		}
		if wn, wd := f.direct(t, c.q, maxK); !same(c.n, wn, c.d, wd) {
			t.Errorf("got %v %v, a direct search gives %v %v", c.n, c.d, wn, wd)
		}
	}
	st := b.Stats()
	if st.Batches != 3 || st.Times.Requests != 7 || st.Sizes[1] != 2 || st.Sizes[5] != 1 {
		t.Errorf("stats %+v", st)
	}
	if st.Times.Led != 2 { // first and second, each alone with a slot free
		t.Errorf("%d batches searched on their caller's goroutine, want 2", st.Times.Led)
	}
	if st.Times.Search <= 0 || st.MeanQueue() < 0 || st.PerBatch(st.Times.Search) <= 0 {
		t.Errorf("times %+v", st.Times)
	}
}

// TestNonFiniteQueries: a query holding a NaN or an infinity is refused
// before it is queued, with an ArgError naming queries and its row, by
// Search and SearchInto alike (the index would otherwise answer it with
// sentinels or arbitrary rows, and no error).
func TestNonFiniteQueries(t *testing.T) {
	f := newFixture(t)
	b, err := New[float32, int64](f.s, Options{MaxK: 4, MaxBatch: 3})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		q := safetest.Random(5, 2, dim)
		q[dim+3] = bad
		var ae *safe.ArgError
		if res, err := b.Search(ctx, q, 2); !errors.As(err, &ae) || ae.Arg != "queries" || res != nil {
			t.Errorf("Search of %v: %v %v, want an ArgError naming queries", bad, res, err)
		} else if !strings.Contains(err.Error(), "row 1") {
			t.Errorf("Search of %v: %v, want the row named", bad, err)
		}
		if err := b.SearchInto(ctx, q, make([]int64, 4), make([]float32, 4)); !errors.As(err, &ae) || ae.Arg != "queries" {
			t.Errorf("SearchInto of %v: %v, want an ArgError naming queries", bad, err)
		}
	}
	if st := b.Stats(); st.Times.Requests != 0 {
		t.Errorf("%d requests queued", st.Times.Requests)
	}
}

// TestFanOutDelivery: a batch of 100 requests is delivered by fan-out (its
// callers wake one another): every caller gets its own rows, even those
// below requests whose callers left while the batch searched (the root
// level's and the next level's among them), and the cancelled callers'
// buffers are never written. The slot comes back: the next request is
// served.
func TestFanOutDelivery(t *testing.T) {
	f := newFixture(t)
	g := newGate(f.s)
	b, err := New[float32, int64](g, Options{MaxK: maxK, MaxBatch: 128, Slots: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	bg := context.Background()
	blocker := start(bg, b, safetest.Random(400, 1, dim), maxK)
	<-g.entered
	const n = 100
	// Cancelled: two of the first fanRoot (each with children), one of
	// their children (with children of its own), and a leaf.
	gone := map[int]bool{0: true, 3: true, fanRoot + 1: true, n - 1: true}
	calls := make([]*call, n)
	cancels := make([]context.CancelFunc, n)
	for i := range n {
		ctx, cancel := context.WithCancel(bg)
		cancels[i] = cancel
		calls[i] = start(ctx, b, safetest.Random(uint64(500+i), 1, dim), 1+i%maxK)
		waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == i+1 })
	}
	g.release()
	<-blocker.done
	if rows := <-g.entered; rows != n {
		t.Fatalf("the queued requests went out in a batch of %d rows, want %d", rows, n)
	}
	for i := range gone {
		cancels[i]()
		<-calls[i].done
		if !errors.Is(calls[i].err, context.Canceled) {
			t.Errorf("request %d cancelled during its batch: %v", i, calls[i].err)
		}
	}
	g.release()
	for i, c := range calls {
		<-c.done
		cancels[i]()
		if gone[i] {
			continue
		}
		if c.err != nil {
			t.Fatalf("request %d: %v", i, c.err)
		}
		wn, wd := f.direct(t, c.q, 1+i%maxK)
		if !same(c.n, wn, c.d, wd) {
			t.Errorf("request %d: got %v %v, a direct search gives %v %v", i, c.n, c.d, wn, wd)
		}
	}
	next := start(bg, b, safetest.Random(700, 1, dim), maxK)
	<-g.entered
	g.release()
	<-next.done
	if next.err != nil {
		t.Fatal(next.err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range gone {
		if !untouched(calls[i]) {
			t.Errorf("cancelled request %d's buffers were written: %v", i, calls[i].n)
		}
	}
}
