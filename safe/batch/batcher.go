package batch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Neighbor is a type of neighbor ids a Batcher hands out.
type Neighbor interface{ uint32 | int64 }

// The defaults of Options' zero fields.
const (
	// DefaultMaxBatch is the default of Options.MaxBatch: on an H200 a
	// CAGRA search of 256 queries (N=100k, D=128, itopk 64) costs about
	// 1.2× one of a single query (409 µs against 341 µs), and the GPU
	// saturates near 1.25 million queries a second for batches of 64 to 512.
	DefaultMaxBatch = 256
	// DefaultMaxWait is the default of Options.MaxWait: 0, no waiting. On
	// an H200 a batch that starts now costs almost nothing more than one
	// that waits to grow (see the package documentation), so a batch
	// starts as soon as a slot is free.
	DefaultMaxWait = 0
	// DefaultSlots is the default of Options.Slots: enough that up to 32
	// concurrent callers each find a free slot, so that at light load the
	// Batcher searches as per-call searching does (and its latency is a
	// direct search's); beyond that, batches grow by themselves while every
	// slot is busy. The package documentation has the numbers.
	DefaultSlots = 32
)

// Options configure a Batcher. The zero value of every field but MaxK
// means its default.
type Options struct {
	// MaxK is the largest k a request may ask for, at least 1 and at most
	// the index's rows. Every batch is searched for MaxK neighbors, and a
	// request for fewer gets the first k of them (see the package
	// documentation): set it to the k you serve. Zero is refused.
	MaxK int
	// MaxBatch is the most query rows one search takes (DefaultMaxBatch
	// if 0). A request's rows all go to one batch, so a request may hold at
	// most MaxBatch rows.
	MaxBatch int
	// MaxWait is how long a request may wait for its batch to fill while
	// other batches are searching, even though a slot is free (at least 0;
	// 0, the default, never waits: a batch starts whenever a slot is free
	// and requests wait). It is never spent when no batch is searching: a
	// lone caller's batch starts at once.
	MaxWait time.Duration
	// Slots is the number of batches that may be in flight at once, each
	// with its own safe.Resources (its own CUDA stream) and buffers
	// (DefaultSlots if 0). With 2 or more, the next batch gathers while one
	// searches; with more, searches on different streams overlap on the
	// GPU.
	Slots int
	// DeviceBuffers gives each slot device buffers: a batch's queries are
	// copied there from the pinned staging, searched, and the results
	// copied back (three more C calls per batch). Without (the default), a
	// batch searches the pinned staging itself, which cuVS accepts as
	// device memory: the GPU reads the queries and writes the results
	// across the bus, in the search's own kernels. Set it for a Searcher
	// that reads its queries many times (brute force over a large dataset
	// reads them once per tile) or that needs kDLCUDA memory. The IVF-PQ
	// Searchers (IVFPQ, IVFPQFiltered) always get them.
	DeviceBuffers bool
	// Wait is how a slot's goroutine waits for its batch's search:
	// WaitSpin (the zero value, the default) or WaitSleep.
	Wait Wait
}

// Wait is how a Batcher's slots wait for their searches (Options.Wait).
//
// Measured on the real H200 (cuVS 26.08.01, CAGRA 100k × 128, one-query
// callers, examples/serving -wait): sleeping freed most of the cores the
// spinning slots held (8 callers: 1.9 against 7.8 cores busy; 1,024: 5.8
// against 8.8) but answered later at every load (1 caller: p50 260
// against 205 µs; 8: 27k against 33k queries/s; 256: 517k against 594k;
// 1,024: 1.19M against 1.25M). Spinning never used all 16 cores, so the
// Batcher was not short of CPU; choose WaitSleep where the process has
// other work for those cores.
type Wait int

const (
	// WaitSpin waits with Resources.Sync: CUDA's default wait, the calling
	// thread spinning on a core until the GPU is done. The soonest answer.
	WaitSpin Wait = iota
	// WaitSleep waits with Resources.SyncBlocking: the thread sleeps until
	// the GPU signals, which frees the core and costs tens of
	// microseconds per batch.
	WaitSleep
)

// withDefaults fills zero fields and checks every range.
func (o Options) withDefaults(op string, rows int64) (Options, error) {
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Slots == 0 {
		o.Slots = DefaultSlots
	}
	switch {
	case o.MaxK < 1:
		return o, kit.Argf(op, "MaxK", "%d, want at least 1", o.MaxK)
	case int64(o.MaxK) > rows:
		return o, kit.Argf(op, "MaxK", "%d exceeds the index's %d rows", o.MaxK, rows)
	case o.MaxBatch < 1:
		return o, kit.Argf(op, "MaxBatch", "%d, want at least 1 (0 for the default)", o.MaxBatch)
	case o.MaxWait < 0:
		return o, kit.Argf(op, "MaxWait", "%v is negative", o.MaxWait)
	case o.Slots < 1:
		return o, kit.Argf(op, "Slots", "%d, want at least 1 (0 for the default)", o.Slots)
	case o.Wait != WaitSpin && o.Wait != WaitSleep:
		return o, kit.Argf(op, "Wait", "%d, want WaitSpin or WaitSleep", o.Wait)
	}
	return o, nil
}

// Batcher gathers the searches of concurrent goroutines into batches and
// searches each batch once. See the package documentation for the dispatch
// rule, k, filters, cancellation and memory. Any number of goroutines may
// call its methods at once.
type Batcher[T dlpack.DType, N Neighbor] struct {
	b     *batcher[T, N] // what the workers hold: the Batcher itself can be collected
	clean runtime.Cleanup
}

// liveBatchers counts Batchers not yet closed, for tests' leak checks.
var liveBatchers = live.New("batch.Batcher")

// Request states. A request is pending in the queue, taken into a batch,
// then either delivered (its caller's buffers written, by the batch's
// worker) or cancelled (its caller gone; nobody touches its buffers).
const (
	stPending int32 = iota
	stTaken
	stDelivering
	stDone
	stCancelled
)

// request is one call of Search or SearchInto. Requests are pooled: a
// request goes back to the pool once its caller is done with it and no
// batch refers to it; one cancelled while in a batch is left to the
// garbage collector.
type request[T dlpack.DType, N Neighbor] struct {
	q       []T // a copy of the caller's queries: the caller may leave early
	rows, k int
	nb      []N // the caller's buffers, written only in state stDelivering
	dist    []float32
	enq     time.Time
	state   atomic.Int32
	err     error
	done    chan struct{} // one value per delivery
	row     int           // its first row in its batch's staging
	// Set when a batch's fan-out wakes it (fan.wakeBelow): its caller wakes
	// the requests below position pos. nil when woken by the slot's own
	// goroutine.
	fan  *fan[T, N]
	pos  int
	next *request[T, N] // below it in the intake
	op   string         // the method called, for an error of the intake
}

type batcher[T dlpack.DType, N Neighbor] struct {
	s                   Searcher
	light               twoKernels // s, when it has a light-load kernel (else nil)
	lightUpTo           int        // the load up to which batches use it
	lightStreams        int        // the batches in flight then
	dim, maxK, maxBatch int
	maxWait             time.Duration
	slots               []*slot[T, N]
	pool                sync.Pool // requests
	fans                sync.Pool // fan-outs
	wg                  sync.WaitGroup
	timer               *time.Timer

	// intake holds the requests of callers that found mu taken (a stack,
	// newest first): they return to wait at once instead of queueing on
	// the lock, and whoever holds mu moves them into pending when it lets
	// go (unlock). Under heavy load a thousand callers back from one
	// delivery each took mu in turn, woken one after the other (~1 µs
	// each on the real H200's 16 cores).
	intake atomic.Pointer[request[T, N]]

	mu           sync.Mutex
	idle         sync.Cond        // Close waits on it for the last batch
	pending      []*request[T, N] // oldest first
	pendRows     int
	free         []*slot[T, N]
	running      int // slots dispatched and not yet back in free
	flight       int // rows taken into batches not yet delivered
	peak         int
	waking       int // slots dispatched that have not taken their batch yet
	timerOn      bool
	closing      bool
	batches      int64
	lightBatches int64
	queries      int64
	sizes        []int64 // sizes[n]: batches of n rows
	times        Times   // summed over batches (Queue: over requests)

	closeOnce sync.Once
	closeErr  error
}

// New starts a Batcher over s: it allocates Options.Slots slots, each with
// its own safe.Resources, pinned staging for MaxBatch rows of queries and
// results (safe.PinnedMatrix) and device buffers of the same size
// (safe.DeviceMatrix), and one goroutine that runs the slot's batches. T
// must be s's element type and N one of its neighbor types. Close stops it.
//
// C calls: cuvsResourcesCreate, cuvsRMMHostAlloc and cuvsRMMAlloc, per slot.
func New[T dlpack.DType, N Neighbor](s Searcher, o Options) (*Batcher[T, N], error) {
	const op = "batch.New"
	if s == nil {
		return nil, kit.Argf(op, "s", "nil Searcher")
	}
	if dt := dlpack.DataTypeOf[T](); s.DType() != dt && s.DType() != (dlpack.DataType{}) {
		return nil, kit.Argf(op, "T", "%s, the index holds %s", dt, s.DType())
	}
	nt := dlpack.DataTypeOf[N]()
	ok := false
	for _, t := range s.NeighborTypes() {
		ok = ok || t == nt
	}
	if !ok {
		return nil, kit.Argf(op, "N", "%s, the index writes %v", nt, s.NeighborTypes())
	}
	o, err := o.withDefaults(op, int64(s.Rows()))
	if err != nil {
		return nil, err
	}
	b := &batcher[T, N]{
		s: s, dim: s.Dim(), maxK: o.MaxK, maxBatch: o.MaxBatch, maxWait: o.MaxWait,
		sizes: make([]int64, o.MaxBatch+1),
	}
	if tk, ok := s.(twoKernels); ok {
		b.light = tk
		b.lightUpTo, b.lightStreams = tk.lightLoad()
	}
	b.idle.L = &b.mu
	b.pool.New = func() any { return &request[T, N]{done: make(chan struct{}, 1)} }
	b.fans.New = func() any { return &fan[T, N]{pool: &b.fans} }
	device := o.DeviceBuffers
	if w, ok := s.(wantsDevice); ok && w.wantsDeviceBuffers() {
		device = true
	}
	for range o.Slots {
		sl, err := newSlot[T, N](o.MaxBatch, b.dim, o.MaxK, device, o.Wait == WaitSleep)
		if err != nil {
			for _, sl := range b.slots {
				err = errors.Join(err, sl.close())
			}
			return nil, err
		}
		b.slots = append(b.slots, sl)
	}
	b.free = append(make([]*slot[T, N], 0, len(b.slots)), b.slots...)
	b.pending = make([]*request[T, N], 0, 2*o.MaxBatch)
	b.timer = time.AfterFunc(time.Hour, b.onTimer)
	b.timer.Stop()
	for _, sl := range b.slots {
		b.wg.Add(1)
		go b.worker(sl)
	}
	liveBatchers.Inc()
	out := &Batcher[T, N]{b: b}
	out.clean = runtime.AddCleanup(out, func(b *batcher[T, N]) { _ = b.close() }, b)
	return out, nil
}

// Search searches queries (one or more rows of Dim() elements, at most
// MaxBatch rows) for their k nearest rows, 1 <= k <= MaxK, and returns
// them as every package's SearchSlice does: *safe.Results, int64 row ids
// and distances, row-major, nearest first, a slot the index could not
// fill holding safe.SentinelID64 with distance +Inf, whatever the index
// (safe.Valid tells). Queries holding a NaN or an infinity are refused, as
// by SearchInto. It allocates the results; SearchInto writes ids of type
// N into the caller's buffers and allocates nothing.
func (b *Batcher[T, N]) Search(ctx context.Context, queries []T, k int) (*safe.Results, error) {
	const op = "batch.Batcher.Search"
	if b == nil || b.b == nil {
		return nil, errZero(op)
	}
	in := b.b
	if in.dim < 1 || len(queries) == 0 || len(queries)%in.dim != 0 {
		return nil, kit.Argf(op, "queries", "len %d is not a positive multiple of the dimension %d", len(queries), in.dim)
	}
	if k < 1 || k > in.maxK {
		return nil, kit.Argf(op, "k", "%d, want 1..%d (MaxK)", k, in.maxK)
	}
	rows := len(queries) / in.dim
	neighbors, distances := make([]N, rows*k), make([]float32, rows*k)
	if err := in.search(ctx, op, queries, neighbors, distances); err != nil {
		return nil, err
	}
	out := &safe.Results{K: k, Distances: distances}
	if ids, ok := any(neighbors).([]int64); ok {
		out.Neighbors = ids // already int64 ids with SentinelID64
		return out, nil
	}
	out.Neighbors = make([]int64, rows*k)
	for i, id := range neighbors {
		if safe.Valid(id) {
			out.Neighbors[i] = int64(id)
		} else {
			out.Neighbors[i] = safe.SentinelID64
		}
	}
	return out, nil
}

// SearchInto searches queries (one or more rows of Dim() elements, at most
// MaxBatch rows) and writes each row's k nearest ids into neighbors and
// their distances into distances (rows×k each, row-major, nearest first; k
// = len(neighbors)/rows, 1 <= k <= MaxK). Queries holding a NaN or an
// infinity are refused before they are queued, with an *safe.ArgError
// naming queries and the row (the rule of every search of host data; the
// index would answer them without an error). It allocates nothing on the
// Go heap (but when ctx is cancelled).
//
// It returns when the results are written, or at once when ctx is done
// first, with ctx's error: the buffers are then never written, now or
// later. (A request that finds the Batcher idle is searched on the
// calling goroutine, as a direct search, and returns when that search
// ends: see the package documentation.) A search that failed returns its error to every request of its
// batch. After Close began it returns an error wrapping safe.ErrClosed.
func (b *Batcher[T, N]) SearchInto(ctx context.Context, queries []T, neighbors []N, distances []float32) error {
	if b == nil || b.b == nil {
		return errZero("batch.Batcher.SearchInto")
	}
	return b.b.search(ctx, "batch.Batcher.SearchInto", queries, neighbors, distances)
}

// Dim returns the width of a query.
func (b *Batcher[T, N]) Dim() int {
	if b == nil || b.b == nil {
		return 0
	}
	return b.b.dim
}

// MaxK returns the largest k a request may ask for.
func (b *Batcher[T, N]) MaxK() int {
	if b == nil || b.b == nil {
		return 0
	}
	return b.b.maxK
}

// MaxBatch returns the most rows a batch (and a request) may hold.
func (b *Batcher[T, N]) MaxBatch() int {
	if b == nil || b.b == nil {
		return 0
	}
	return b.b.maxBatch
}

// errZero is the error of a method of a Batcher not made by New.
func errZero(op string) error {
	return fmt.Errorf("%s: %w (a Batcher not made by New)", op, safe.ErrClosed)
}

func (b *batcher[T, N]) search(ctx context.Context, op string, queries []T, neighbors []N, distances []float32) error {
	if b.dim < 1 || len(queries) == 0 || len(queries)%b.dim != 0 {
		return kit.Argf(op, "queries", "len %d is not a positive multiple of the dimension %d", len(queries), b.dim)
	}
	rows := len(queries) / b.dim
	if rows > b.maxBatch {
		return kit.Argf(op, "queries", "%d rows, a batch holds at most %d (MaxBatch)", rows, b.maxBatch)
	}
	if len(distances) != len(neighbors) {
		return kit.Argf(op, "distances", "len %d, neighbors has %d", len(distances), len(neighbors))
	}
	k := len(neighbors) / rows
	if k < 1 || k > b.maxK || k*rows != len(neighbors) {
		return kit.Argf(op, "neighbors", "len %d for %d rows: want rows×k with k in 1..%d (MaxK)", len(neighbors), rows, b.maxK)
	}
	if err := kit.CheckFiniteSlice(op, "queries", queries, b.dim); err != nil {
		return err // the index would answer (or sentinel) a NaN query without an error
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	r := b.pool.Get().(*request[T, N])
	r.q = append(r.q[:0], queries...)
	r.rows, r.k, r.nb, r.dist, r.op = rows, k, neighbors, distances, op
	r.state.Store(stPending)
	r.enq = time.Now()

	if !b.mu.TryLock() {
		// Busy: leave it in the intake for whoever holds the lock.
		b.push(r)
		b.combine()
	} else {
		b.drain(r.enq) // the intake's requests came first
		if b.closing {
			b.unlock()
			b.put(r)
			return fmt.Errorf("%s: %w", op, safe.ErrClosed)
		}
		b.pending = append(b.pending, r)
		b.pendRows += rows
		if len(b.pending) == 1 && b.waking == 0 && len(b.free) > 0 && b.due(b.running, r.enq) && b.running < b.streamCap() && b.gathered(b.running) {
			// Alone, with a slot free: search it here, as a direct call
			// would, with no goroutine hand-off on the way in or out.
			s := b.free[len(b.free)-1]
			b.free = b.free[:len(b.free)-1]
			b.running++
			n := b.take(s, r.enq)
			b.times.Led++
			b.unlock()
			b.lead(s, n)
			<-r.done
			err := r.err
			b.put(r)
			return err
		}
		b.kick(r.enq)
		b.unlock()
	}

	select {
	case <-r.done:
	case <-ctx.Done():
		if b.cancel(r) {
			return fmt.Errorf("%s: %w", op, ctx.Err())
		}
		<-r.done // being delivered: a copy away
	}
	if f := r.fan; f != nil {
		// Woken by its batch's fan-out: wake those below it.
		r.fan = nil
		f.wakeBelow(r.pos)
		f.finish()
	}
	err := r.err
	b.put(r)
	return err
}

// push puts r in the intake.
func (b *batcher[T, N]) push(r *request[T, N]) {
	for {
		top := b.intake.Load()
		r.next = top
		if b.intake.CompareAndSwap(top, r) {
			return
		}
	}
}

// drain moves the intake's requests into pending, oldest first (the caller
// kicks them); once Close began it refuses them (ErrClosed). b.mu is held.
func (b *batcher[T, N]) drain(now time.Time) {
	top := b.intake.Swap(nil)
	if top == nil {
		return
	}
	n := 0
	for r := top; r != nil; r = r.next {
		n++
	}
	b.pending = append(b.pending, make([]*request[T, N], n)...)[:len(b.pending)+n]
	i := len(b.pending)
	for r := top; r != nil; {
		next := r.next
		r.next = nil
		i--
		b.pending[i] = r
		r = next
	}
	if b.closing {
		for _, r := range b.pending[i:] {
			r.state.Store(stDone)
			r.err = fmt.Errorf("%s: %w", r.op, safe.ErrClosed)
			r.done <- struct{}{}
		}
		clear(b.pending[i:])
		b.pending = b.pending[:i]
		return
	}
	for _, r := range b.pending[i:] {
		b.pendRows += r.rows
	}
}

// unlock drains the intake, lets go of b.mu, and takes it again for the
// requests that came into the intake meanwhile (combine). Every holder of
// b.mu lets go through it, so a request pushed while the lock was held is
// drained by that holder, the next one, or its own pusher. Draining before
// letting go matters when the lock is starving (a goroutine blocked in
// Lock for over 1 ms: Unlock hands the lock to it and TryLock fails until
// the waiters are gone): combine alone would leave the intake to whoever
// next drains it, and on the real H200 some requests waited ~7 ms (64
// callers: p99 6.8 ms in one run of two).
func (b *batcher[T, N]) unlock() {
	if b.intake.Load() != nil {
		now := time.Now()
		b.drain(now)
		b.kick(now)
	}
	b.mu.Unlock()
	b.combine()
}

// combine drains the intake while it holds requests and the lock is free.
// A request pushed while another goroutine holds the lock is that
// goroutine's to drain, in its unlock.
func (b *batcher[T, N]) combine() {
	for b.intake.Load() != nil && b.mu.TryLock() {
		now := time.Now()
		b.drain(now)
		b.kick(now)
		b.mu.Unlock()
	}
}

// put returns r to the pool, without its references to the caller's
// memory.
func (b *batcher[T, N]) put(r *request[T, N]) {
	r.nb, r.dist, r.err = nil, nil, nil
	b.pool.Put(r)
}

// cancel withdraws r, whose caller is leaving. It reports false when r is
// being delivered (the caller must wait for it: a copy).
func (b *batcher[T, N]) cancel(r *request[T, N]) bool {
	b.mu.Lock()
	now := time.Now()
	b.drain(now) // r may be in the intake
	b.kick(now)
	if r.state.Load() == stPending {
		for i, p := range b.pending {
			if p == r {
				last := len(b.pending) - 1
				copy(b.pending[i:], b.pending[i+1:])
				b.pending[last] = nil
				b.pending = b.pending[:last]
				break
			}
		}
		b.pendRows -= r.rows
		r.state.Store(stCancelled)
		b.maybeIdle()
		b.unlock()
		b.put(r)
		return true
	}
	b.unlock()
	// Taken into a batch: the worker delivers only if it wins this swap.
	// The request stays with the batch and is not pooled.
	return r.state.CompareAndSwap(stTaken, stCancelled)
}

// due reports whether the pending requests should be searched now, busy
// batches being in flight: always with MaxWait 0; else when Close is
// draining, when nothing else is searching (the GPU would idle), when a
// batch's worth is waiting, or when the oldest request has waited MaxWait.
func (b *batcher[T, N]) due(busy int, now time.Time) bool {
	return b.maxWait == 0 || b.closing || busy == 0 || b.pendRows >= b.maxBatch || now.Sub(b.pending[0].enq) >= b.maxWait
}

// knee is the load, in requests, up to which every request may have a
// search of its own: the concurrent searches at which, in the H200 model
// (internal/cuvsdouble), more streams stop paying for their overhead.
const knee = 32

// load is the number of requests in the system (queued or in a batch not
// yet delivered), as a peak held across the moments between a batch's
// delivery and its callers' next requests: without the hold, the cap and
// the gather target would swing with every delivery and batches would
// break up into small ones (measured: 8% fewer queries/s at 1024 callers).
// decay lowers the held peak at each batch start. b.mu is held.
func (b *batcher[T, N]) load() int {
	b.peak = max(b.peak, b.pendRows+b.flight)
	return b.peak
}

func (b *batcher[T, N]) decay() {
	if n := b.pendRows + b.flight; b.peak > n {
		b.peak -= (b.peak - n + 15) / 16
	}
}

// streamCap is how many batches may search at once at load n: every slot
// while n <= knee (light load: each request is searched as it comes), then
// knee·sqrt(knee/n) (11 at 256 requests, 6 at 1024), so that under heavy
// load fewer, larger batches search, each costing the GPU little more than
// a small one. Chosen on the double's H200 model through examples/serving
// (BENCHMARKS.md): /1 beat /1.5 and /2.5 at 256–1024 callers, /0.75 tied.
// b.mu is held.
func (b *batcher[T, N]) streamCap() int {
	n := b.load()
	if b.lightAt(n) {
		return max(1, min(b.lightStreams, len(b.slots)))
	}
	if n <= knee {
		return len(b.slots)
	}
	c := int(knee*math.Sqrt(knee/float64(n)) + 0.5)
	return max(1, min(c, len(b.slots)))
}

// lightAt reports whether batches search with the Searcher's light-load
// kernel at load n (twoKernels).
func (b *batcher[T, N]) lightAt(n int) bool { return b.light != nil && n <= b.lightUpTo }

// gathered reports whether the pending rows make a batch worth starting
// while busy others search: always at light load, with nothing searching,
// or while Close drains; under the cap, once a cap's share of the load is
// waiting (n/cap rows, at most MaxBatch). Without it, the first caller back
// from a delivery takes a free slot for a batch of one and the rest wait a
// whole search for the next (measured: 390k against 480k queries/s at 256
// callers). No timer: a batch that finishes looks again, so a request
// waits at most for the searches in flight. b.mu is held.
func (b *batcher[T, N]) gathered(busy int) bool {
	if busy == 0 || b.closing {
		return true
	}
	n := b.load()
	if n <= knee {
		return true
	}
	c := b.streamCap()
	return b.pendRows >= min((n+c-1)/c, b.maxBatch)
}

// kick dispatches the pending requests to a free slot if they are due, or
// arms the timer for the oldest one's MaxWait. b.mu is held.
func (b *batcher[T, N]) kick(now time.Time) {
	if len(b.pending) == 0 || b.waking > 0 || len(b.free) == 0 {
		// Nothing to do, a slot already on its way to take them, or none
		// free (the next to finish will look).
		return
	}
	due := b.due(b.running, now)
	if due && b.running < b.streamCap() && b.gathered(b.running) {
		s := b.free[len(b.free)-1]
		b.free = b.free[:len(b.free)-1]
		b.running++
		b.waking++
		s.dispatched = now
		s.wake <- struct{}{} // buffered, and empty while the slot is free
		return
	}
	// Held back by the cap or the gather rule: the next batch to finish
	// looks again. Only MaxWait needs the timer.
	if !due && !b.timerOn {
		b.timerOn = true
		b.timer.Reset(b.maxWait - now.Sub(b.pending[0].enq))
	}
}

func (b *batcher[T, N]) onTimer() {
	b.mu.Lock()
	b.timerOn = false
	b.kick(time.Now())
	b.unlock()
}

// maybeIdle wakes Close when the last batch is done. b.mu is held.
func (b *batcher[T, N]) maybeIdle() {
	if b.closing && b.running == 0 && len(b.pending) == 0 {
		b.idle.Broadcast()
	}
}

// take moves the oldest pending requests, up to MaxBatch rows, into s's
// batch and returns their rows. b.mu is held.
func (b *batcher[T, N]) take(s *slot[T, N], now time.Time) int {
	s.light = b.lightAt(b.load())
	rows, i := 0, 0
	for ; i < len(b.pending) && rows+b.pending[i].rows <= b.maxBatch; i++ {
		r := b.pending[i]
		r.state.Store(stTaken)
		rows += r.rows
		b.times.Queue += now.Sub(r.enq)
		s.reqs = append(s.reqs, r)
	}
	b.times.Requests += int64(i)
	n := copy(b.pending, b.pending[i:])
	clear(b.pending[n:])
	b.pending = b.pending[:n]
	b.pendRows -= rows
	b.flight += rows
	b.decay()
	if rows > 0 {
		b.batches++
		if s.light {
			b.lightBatches++
		}
		b.queries += int64(rows)
		b.sizes[rows]++
	}
	return rows
}

// worker runs s's batches: woken by kick, it takes the pending requests
// and searches them, and goes on with the next while they are due.
func (b *batcher[T, N]) worker(s *slot[T, N]) {
	defer b.wg.Done()
	for range s.wake {
		b.mu.Lock()
		b.waking--
		now := time.Now()
		b.times.Handoff += now.Sub(s.dispatched)
		for {
			b.drain(now)
			rows := b.take(s, now)
			b.kick(now) // what is left may be due for another slot
			b.unlock()
			var t Times
			if rows > 0 {
				t = b.run(s, rows)
			}
			b.mu.Lock()
			b.flight -= rows
			b.times.Stage += t.Stage
			b.times.Search += t.Search
			b.times.Deliver += t.Deliver
			now = time.Now()
			b.drain(now)
			if rows == 0 || len(b.pending) == 0 || b.waking > 0 || !b.due(b.running-1, now) || !b.gathered(b.running-1) || b.running > b.streamCap() {
				break
			}
		}
		b.running--
		b.free = append(b.free, s)
		b.kick(time.Now())
		b.maybeIdle()
		b.unlock()
	}
}

// lead runs the batch of rows rows already taken into s, a slot the
// caller's goroutine took, and gives the slot back. b.mu is not held.
func (b *batcher[T, N]) lead(s *slot[T, N], rows int) {
	t := b.run(s, rows)
	b.mu.Lock()
	b.flight -= rows
	b.times.Stage += t.Stage
	b.times.Search += t.Search
	b.times.Deliver += t.Deliver
	b.running--
	b.free = append(b.free, s)
	b.kick(time.Now())
	b.maybeIdle()
	b.unlock()
}

// run stages the batch's queries, searches them and delivers the results to
// the callers still waiting, and returns how long each step took.
//
// Every request's rows are copied out here; a batch of at most fanRoot
// requests (a caller searching on its own goroutine among them) is woken
// here too, one request after the other. A larger one is woken by fan-out
// (fan.wakeBelow): this goroutine wakes the first fanRoot callers and each
// of them fanOut more, while the slot runs its next batch. Woken one by one
// from here, 256 callers took ~150 µs on the real H200 (~0.6 µs each).
func (b *batcher[T, N]) run(s *slot[T, N], rows int) Times {
	t0 := time.Now()
	row := 0
	for _, r := range s.reqs {
		s.stage(r, row)
		r.row = row
		row += r.rows
	}
	t1 := time.Now()
	search := b.s.SearchBatch
	if s.light {
		search = b.light.searchLight
	}
	err := s.search(search, rows)
	t2 := time.Now()
	if len(s.reqs) <= fanRoot {
		for _, r := range s.reqs {
			if r.state.CompareAndSwap(stTaken, stDelivering) {
				if err == nil {
					s.deliver(r, r.row)
				}
				r.err = err
				r.done <- struct{}{}
			}
		}
	} else {
		// Copy every request's rows out first (the slot is then free),
		// then wake the callers by fan-out.
		for _, r := range s.reqs {
			if r.state.CompareAndSwap(stTaken, stDelivering) {
				if err == nil {
					s.deliver(r, r.row)
				}
				r.err = err
			}
		}
		f := b.fans.Get().(*fan[T, N])
		f.reqs = append(f.reqs, s.reqs...)
		f.left.Store(int32(len(f.reqs)))
		f.wakeBelow(-1)
	}
	clear(s.reqs)
	s.reqs = s.reqs[:0]
	return Times{Stage: t1.Sub(t0), Search: t2.Sub(t1), Deliver: time.Since(t2)}
}

// Stats counts the batches a Batcher has run, and where their time went.
type Stats struct {
	Batches int64   // searches run
	Light   int64   // of them, searched with the light-load kernel (CAGRA with AutoAlgo: multi-CTA)
	Queries int64   // query rows searched, those of cancelled requests included
	Sizes   []int64 // Sizes[n] is the number of batches of n rows
	Times   Times
}

// Times is where a Batcher's time went, summed: a request's life is Queue
// (waiting for a slot, or for MaxWait), then its batch's Handoff (the slot's
// goroutine waking), Stage, Search and Deliver.
type Times struct {
	Requests int64         // requests taken into batches
	Led      int64         // batches searched by their one caller's goroutine (no hand-off)
	Queue    time.Duration // over requests: enqueued → taken into a batch
	Handoff  time.Duration // over batches: slot dispatched → its goroutine took the batch
	Stage    time.Duration // over batches: queries copied into pinned staging
	Search   time.Duration // over batches: copy to the device, search, copy back, stream sync
	Deliver  time.Duration // over batches: results copied to the callers, the first callers woken (the rest wake one another)
}

// PerBatch returns the mean of d over the batches (0 before the first).
func (s Stats) PerBatch(d time.Duration) time.Duration {
	if s.Batches == 0 {
		return 0
	}
	return d / time.Duration(s.Batches)
}

// MeanQueue returns the mean time a request waited before its batch was
// taken (0 before the first).
func (s Stats) MeanQueue() time.Duration {
	if s.Times.Requests == 0 {
		return 0
	}
	return s.Times.Queue / time.Duration(s.Times.Requests)
}

// Mean returns the mean batch size in rows (0 before the first batch).
func (s Stats) Mean() float64 {
	if s.Batches == 0 {
		return 0
	}
	return float64(s.Queries) / float64(s.Batches)
}

// Percentile returns the batch size at or below which pct percent of the
// batches lie (0 before the first batch).
func (s Stats) Percentile(pct float64) int {
	if s.Batches == 0 {
		return 0
	}
	rank := int64(pct / 100 * float64(s.Batches))
	if float64(rank) < pct/100*float64(s.Batches) {
		rank++
	}
	rank = max(rank, 1)
	var cum int64
	for n, c := range s.Sizes {
		if cum += c; cum >= rank {
			return n
		}
	}
	return len(s.Sizes) - 1
}

// Stats returns the counts of the batches run so far.
func (b *Batcher[T, N]) Stats() Stats {
	if b == nil || b.b == nil {
		return Stats{}
	}
	in := b.b
	in.mu.Lock()
	defer in.unlock()
	return Stats{Batches: in.batches, Light: in.lightBatches, Queries: in.queries, Sizes: append([]int64(nil), in.sizes...), Times: in.times}
}

// WarmUp searches, on every slot not busy, a batch of one all-zero query
// and one of MaxBatch (on each kernel, for a CAGRA Searcher that picks it
// by load), and waits for them: the first searches of a process
// or of a Resources pay for linking kernels (CAGRA: seconds on an H200, see
// cagra.Index.WarmUp) and scratch memory, which a service pays before
// taking traffic. The results are discarded. Requests made meanwhile wait
// for it (the slots it warms are not free).
func (b *Batcher[T, N]) WarmUp() error {
	const op = "batch.Batcher.WarmUp"
	if b == nil || b.b == nil {
		return errZero(op)
	}
	in := b.b
	in.mu.Lock()
	if in.closing {
		in.unlock()
		return fmt.Errorf("%s: %w", op, safe.ErrClosed)
	}
	got := append([]*slot[T, N](nil), in.free...)
	in.free = in.free[:0]
	in.running += len(got)
	in.unlock()
	var err error
	for _, s := range got {
		clear(s.pinQ.Data())
		err = errors.Join(err, s.search(in.s.SearchBatch, 1), s.search(in.s.SearchBatch, in.maxBatch))
		if in.light != nil {
			err = errors.Join(err, s.search(in.light.searchLight, 1), s.search(in.light.searchLight, in.maxBatch))
		}
	}
	in.mu.Lock()
	in.free = append(in.free, got...)
	in.running -= len(got)
	in.kick(time.Now())
	in.maybeIdle()
	in.unlock()
	return err
}

// Close stops accepting requests (Search then returns an error wrapping
// safe.ErrClosed), searches those already queued and waits for every batch
// in flight, stops the workers and frees the slots. Closing twice is
// harmless; a Batcher dropped without Close is closed when collected.
//
// C calls: cuvsRMMFree, cuvsRMMHostFree and cuvsResourcesDestroy, per slot.
func (b *Batcher[T, N]) Close() error {
	if b == nil || b.b == nil {
		return nil
	}
	b.clean.Stop()
	return b.b.close()
}

func (b *batcher[T, N]) close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closing = true
		b.kick(time.Now())
		for b.running > 0 || len(b.pending) > 0 {
			b.idle.Wait()
			b.drain(time.Now()) // refused: Close began
		}
		b.unlock()
		b.timer.Stop()
		for _, s := range b.slots {
			close(s.wake)
		}
		b.wg.Wait()
		var errs []error
		for _, s := range b.slots {
			errs = append(errs, s.close())
		}
		b.closeErr = errors.Join(errs...)
		liveBatchers.Dec()
	})
	return b.closeErr
}
