package batch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Batcher gathers the searches of concurrent goroutines into batches and
// searches each batch once. Any number of goroutines may call its methods
// at once.
//
// # When a batch is searched
//
// Requests join one queue. A request that finds the queue empty and a slot
// free is searched at once on its caller's own goroutine, as a direct
// search (no hand-off to another goroutine, in or out). Otherwise,
// whenever a slot is free and requests wait, the slot's goroutine takes
// the oldest of them, up to MaxBatch rows, and searches them at once:
// there is no timer. While every slot is busy, requests queue, and the
// next slot to finish takes them as its next batch. So at light load
// (fewer concurrent callers than Slots) every request is searched alone,
// at a direct search's latency plus a copy; under heavy load batches grow
// by themselves, up to MaxBatch. Beyond 32 requests in the system (n, held
// at its recent peak) fewer batches search at once, 32·sqrt(32/n) (11 at
// 256, 6 at 1024), and a slot that could start one waits, without a timer,
// until a share of the load (n divided by that cap) is queued, or until
// nothing else searches. Options.MaxWait, when set, makes a request wait
// up to that long for a fuller batch while other batches search; the
// default, 0, never waits. Stats accounts for a request's time: its queue
// wait, its batch's hand-off, staging, search and delivery.
//
// Distances and neighbor ids are those of the index behind the Searcher:
// see safe.Metric (distances) and safe.Sentinel (neighbor ids).
//
// Each of the Options.Slots slots has its own safe.Resources (its own CUDA
// stream), buffers and goroutine, so several batches search at once on
// different streams.
//
// # k
//
// Every batch is searched for Options.MaxK neighbors, and a request for k
// < MaxK gets the first k of its rows' MaxK results (requests are not
// grouped by k). For an exact algorithm (brute force) these are the k
// nearest, as a search for k would give (ties apart). For CAGRA a search
// for MaxK explores at least as much as one for k (its internal top-k list
// is at least MaxK long), so the first k are as good or better, but they
// need not equal a direct search for k. The GPU's cost grows with MaxK:
// set it to the k you serve.
//
// # Filters
//
// Each request may carry its own filter (SearchFiltered,
// SearchIntoFiltered: a bitset over the index's rows, nil for none), so
// that one Batcher serves many tenants, access lists or predicates. The
// Searcher must take filters per request: CAGRA, BruteForce, IVFFlat and
// IVFSQ made with a nil filter do (FilterSearcher), and IVFPQFiltered of
// ivfpq.Filtered made without one; one made with a filter applies it to
// every batch and refuses requests' filters; IVFPQ takes none. Only
// a bitset can be shared by a batch's requests (a bitmap's bits belong to
// query positions, which change from batch to batch).
//
// The IVF indexes, and CAGRA's graph, search a batch with one filter, so
// requests with the same filter (the same *safe.Filter) share batches and
// requests with different filters never do; batches of different filters
// search side by side on the slots. Brute force takes a bitmap (a row of
// bits per query), and so does CAGRA on its exact path (the filters
// cagra.Index.PlanFilter sends there for one query, letting MaxK rows
// through): such a batch takes the oldest queued requests that may mix,
// whatever their filters, and a batch of several filters is one search with
// a bitmap assembled from the requests' bitsets (Stats.Mixed counts them; a
// slot's bitmap is at most 32 MiB, which bounds such a batch to
// 2^28/Rows() query rows). Otherwise a batch is led by the oldest queued
// request and takes the queued requests of its filter, oldest first, up to
// MaxBatch rows, the others keeping their place: a request waits, in
// batches taken before its own, at most for one batch of each other filter
// queued ahead of it (while no filter has more than MaxBatch rows ahead of
// it), however skewed the traffic. Stats.MaxPassed reports the most batches
// that passed one request. Each batch follows its index's filtered-search
// rules (CAGRA's and the IVF packages' FilterPath, brute force's refusal of
// a filter that cannot fill k: a brute-force request's filter must let MaxK
// rows through).
//
// Brute force's batches and CAGRA's exact ones are scans: they read every
// allowed row, cost about as much for 16 queries as for 256, and do not
// share the GPU well, so at most two search at once (Stats.Scans counts
// them), and the requests queued meanwhile, the ones behind them
// included, wait for one to finish and make the next batch large.
//
// A filter cannot be closed while a request with it waits or searches
// (its Close returns an error matching dlpack.ErrBorrowed); a request
// with a closed filter is refused with safe.ErrClosed. A filtered request
// allocates nothing, as an unfiltered one.
//
// # Cancellation and Close
//
// A request searched on its own goroutine (the lone request of an idle
// Batcher, above) is a direct search: its context is looked at before,
// and the search, once started, runs to its end (one search's time), as a
// direct call's does. Any other request whose context is done returns at
// once with the context's error, whether it still waits in the queue (it is withdrawn) or its
// batch is searching (its rows are searched, and their results dropped):
// its buffers are never written after it returned. Only when its results
// are being copied out at that very moment does it wait for that copy, and
// then it returns them. A search that fails returns its error to every
// request of the batch.
//
// Close refuses new requests (with an error wrapping safe.ErrClosed),
// searches the ones queued, waits for the batches in flight, and frees
// everything. Close the Batcher before the index it searches.
//
// # Memory
//
// A slot's buffers are allocated once: pinned host staging for MaxBatch
// rows of queries and of results (safe.PinnedMatrix), and with
// Options.DeviceBuffers (or a Searcher that needs them: IVF-PQ) device
// buffers of the same size (safe.DeviceMatrix). A batch copies its queries
// from the requests into the pinned staging and searches it there (cuVS
// takes pinned memory as device memory; with device buffers: cuvsMatrixCopy
// to the device, the search, cuvsMatrixCopy of the results back), then
// waits for the stream once: spinning (safe.Resources.Sync, the default) or
// asleep (Options.Wait WaitSleep: safe.Resources.SyncBlocking, which frees
// the core and answers later; BENCHMARKS.md has both on an H200). Each
// waiting caller's rows are then copied into its
// buffers. SearchInto allocates nothing on the Go heap per request (a
// request's own state is pooled; a request cancelled while its batch
// searches is left to the collector instead).
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
	q       []T          // a copy of the caller's queries: the caller may leave early
	filter  *safe.Filter // its filter (nil: none), held (filterHold) until the caller returns
	rows, k int
	// scan: its batch is a scan (scanner); mix: it may share a scan batch
	// with requests of other filters (a bitmap search).
	scan, mix bool
	nb        []N // the caller's buffers, written only in state stDelivering
	dist      []float32
	enq       time.Time
	state     atomic.Int32
	err       error
	done      chan struct{} // one value per delivery
	row       int           // its first row in its batch's staging
	seen      int64         // the batches taken before it was queued (batcher.batches)
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
	fs                  FilterSearcher // s, when requests may carry filters (else nil)
	fl                  filters        // s's checks of a request's filter, when it has them
	light               twoKernels     // s, when it has a light-load kernel (else nil)
	sc                  scanner        // s, when its batches may be scans (else nil)
	lightUpTo           int            // the load up to which batches use it
	lightStreams        int            // the batches in flight then
	mixedRows           int            // the most query rows of a mixed batch (brute force's bitmap); 0: none
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
	filtered     int64 // batches with a request's filter
	mixedBatches int64 // of them, batches of several filters searched with one bitmap
	scanning     int   // scan batches in flight (at most scanStreams)
	scans        int64 // scan batches taken
	maxScanning  int   // the most scan batches in flight at once
	passed       int64 // the most batches taken while a request waited (Stats.MaxPassed)
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
	oc, fixed := s.(optionChecker)
	if fixed && o.MaxBatch == 0 {
		o.MaxBatch = min(DefaultMaxBatch, oc.maxBatch())
	}
	o, err := o.withDefaults(op, int64(s.Rows()))
	if err != nil {
		return nil, err
	}
	if fixed {
		if err := oc.checkOptions(op, o); err != nil {
			return nil, err
		}
	}
	b := &batcher[T, N]{
		s: s, dim: s.Dim(), maxK: o.MaxK, maxBatch: o.MaxBatch, maxWait: o.MaxWait,
		sizes: make([]int64, o.MaxBatch+1),
	}
	if tk, ok := s.(twoKernels); ok {
		b.light = tk
		b.lightUpTo, b.lightStreams = tk.lightLoad()
	}
	if fs, ok := s.(FilterSearcher); ok {
		b.fs = fs
		if fl, ok := s.(filters); ok {
			if b.fl = fl; !fl.perRequestFilters() {
				b.fs = nil
			}
		}
	}
	if sc, ok := s.(scanner); ok {
		b.sc = sc
	}
	if bm, ok := s.(bitmapper); ok && b.fs != nil {
		b.mixedRows = mixedMax(bm.bitmapRows(), o.MaxBatch)
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
		if err == nil {
			sl.mixedRows = b.mixedRows
		}
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
	return b.searchResults(ctx, "batch.Batcher.Search", nil, queries, k)
}

// SearchFiltered is Search restricted to the rows filter lets through (a
// bitset over the index's rows; nil searches every row), for a Searcher
// that takes a filter per request (FilterSearcher: the adapters made
// without a filter of their own). Requests with the same filter share
// batches; requests with different filters never do (see the package
// documentation, "Filters").
func (b *Batcher[T, N]) SearchFiltered(ctx context.Context, filter *safe.Filter, queries []T, k int) (*safe.Results, error) {
	return b.searchResults(ctx, "batch.Batcher.SearchFiltered", filter, queries, k)
}

func (b *Batcher[T, N]) searchResults(ctx context.Context, op string, filter *safe.Filter, queries []T, k int) (*safe.Results, error) {
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
	if err := in.search(ctx, op, filter, queries, neighbors, distances); err != nil {
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
// ends: see Batcher.) A search that failed returns its error to every request of its
// batch. After Close began it returns an error wrapping safe.ErrClosed.
func (b *Batcher[T, N]) SearchInto(ctx context.Context, queries []T, neighbors []N, distances []float32) error {
	if b == nil || b.b == nil {
		return errZero("batch.Batcher.SearchInto")
	}
	return b.b.search(ctx, "batch.Batcher.SearchInto", nil, queries, neighbors, distances)
}

// SearchIntoFiltered is SearchInto restricted to the rows filter lets
// through, as SearchFiltered is Search. It allocates nothing on the Go
// heap either.
func (b *Batcher[T, N]) SearchIntoFiltered(ctx context.Context, filter *safe.Filter, queries []T, neighbors []N, distances []float32) error {
	if b == nil || b.b == nil {
		return errZero("batch.Batcher.SearchIntoFiltered")
	}
	return b.b.search(ctx, "batch.Batcher.SearchIntoFiltered", filter, queries, neighbors, distances)
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

func (b *batcher[T, N]) search(ctx context.Context, op string, filter *safe.Filter, queries []T, neighbors []N, distances []float32) error {
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
	if filter != nil {
		if err := b.checkFilter(op, filter); err != nil {
			return err
		}
		// Held until this call returns: Close of the filter is refused
		// while a request of it waits or searches.
		if err := kit.HoldFilter(filter, op); err != nil {
			return err
		}
		defer kit.ReleaseFilter(filter)
	}
	r := b.pool.Get().(*request[T, N])
	r.q = append(r.q[:0], queries...)
	r.rows, r.k, r.nb, r.dist, r.op, r.filter = rows, k, neighbors, distances, op, filter
	r.scan, r.mix = false, false
	if b.sc != nil {
		r.scan, r.mix = b.sc.scan(filter, b.maxK)
	}
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
		r.seen = b.batches
		b.pending = append(b.pending, r)
		b.pendRows += rows
		if len(b.pending) == 1 && b.waking == 0 && len(b.free) > 0 && b.due(b.running, r.enq) && b.running < b.streamCap() && b.gathered(b.running) && !b.scanFull() {
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

// checkFilter refuses a request's filter that its batch could not be
// searched with: the Searcher takes none per request, a bitmap (its bits
// belong to query positions, which change from batch to batch), a bitset
// for another row count, or one the index would refuse for a search of
// MaxK neighbours.
func (b *batcher[T, N]) checkFilter(op string, f *safe.Filter) error {
	switch {
	case b.fs == nil:
		return kit.Argf(op, "filter", "the Searcher takes no filter per request (it was made with a filter of its own, or its index takes none): make it without one")
	case f.Kind() != safe.Bitset:
		return kit.Argf(op, "filter", "a %s: a batch's rows belong to different requests each time, so only a bitset can be shared", f.Kind())
	case f.Rows() != b.s.Rows():
		return kit.Argf(op, "filter", "made for %d rows, the index has %d", f.Rows(), b.s.Rows())
	}
	if b.fl != nil {
		return b.fl.checkFilter(op, f, b.maxK)
	}
	return nil
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
