package batch

import (
	"fmt"
	"math"
	"time"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

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
		r.seen = b.batches
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
	r.nb, r.dist, r.err, r.filter = nil, nil, nil, nil
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
	if due && b.running < b.streamCap() && b.gathered(b.running) && !b.scanFull() {
		s := b.free[len(b.free)-1]
		b.free = b.free[:len(b.free)-1]
		b.running++
		b.waking++
		s.dispatched = now
		s.wake <- struct{}{} // buffered, and empty while the slot is free
		return
	}
	// Held back by a cap or the gather rule: the next batch to finish
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

// scanFull reports whether the oldest pending request leads a scan batch
// while scanStreams of them are in flight: it waits for one to finish, and
// the requests behind it wait with it. b.mu is held.
func (b *batcher[T, N]) scanFull() bool {
	return len(b.pending) > 0 && b.pending[0].scan && b.scanning >= scanStreams
}

// take moves the oldest pending request into s's batch, with the pending
// requests that share its filter, oldest first, up to MaxBatch rows, and
// returns their rows. The others keep their order. So a request waits, in
// batches taken before its own, at most for those led by the requests
// older than it: one batch per other filter, while no filter has more
// than MaxBatch rows queued ahead of it (Stats.MaxPassed counts it). The
// batch holds its filter (kit.HoldFilter) until it has searched
// (release).
//
// A scan batch (scanner) of a request that may mix takes every pending
// request that may, whatever its filter, up to the slot's mixed rows, and
// is searched with a bitmap when their filters differ (mixed.go; each
// request holds its filter). None is taken while scanStreams scan batches
// search (scanFull). b.mu is held.
func (b *batcher[T, N]) take(s *slot[T, N], now time.Time) int {
	s.light = b.lightAt(b.load())
	if len(b.pending) == 0 || b.scanFull() {
		b.taken(s, 0, len(b.pending))
		return 0
	}
	head := b.pending[0]
	mixing := head.mix && b.mixedRows > 0
	limit := b.maxBatch
	if mixing {
		limit = b.mixedRows
	}
	rows, n, i, mixed := 0, 0, 0, false
	for ; i < len(b.pending); i++ {
		r := b.pending[i]
		if r.filter != head.filter && !(mixing && r.mix) {
			b.pending[n] = r // stays: compacted in order
			n++
			continue
		}
		if rows+r.rows > limit {
			break // full: a later, smaller request does not pass it
		}
		rows += r.rows
		mixed = mixed || r.filter != head.filter
		b.takeOne(s, r, now)
	}
	n += copy(b.pending[n:], b.pending[i:])
	switch {
	case mixed:
		for _, r := range s.reqs {
			if r.filter != nil {
				_ = kit.HoldFilter(r.filter, "batch.Batcher") // its request holds it: this cannot fail
			}
		}
		s.mixed = true
		b.filtered++
		b.mixedBatches++
	case head.filter != nil:
		s.filter = head.filter
		_ = kit.HoldFilter(head.filter, "batch.Batcher") // its requests hold it: this cannot fail
		b.filtered++
	}
	if head.scan {
		s.scan = true
		b.scanning++
		b.scans++
		b.maxScanning = max(b.maxScanning, b.scanning)
	}
	b.taken(s, rows, n)
	return rows
}

// done accounts for s's batch of rows rows, searched in t, and frees the
// slot's place among the scans. b.mu is held.
func (b *batcher[T, N]) done(s *slot[T, N], rows int, t Times) {
	b.flight -= rows
	b.times.Stage += t.Stage
	b.times.Search += t.Search
	b.times.Deliver += t.Deliver
	if s.scan {
		s.scan = false
		b.scanning--
	}
}

// takeOne moves r, pending, into s's batch. b.mu is held.
func (b *batcher[T, N]) takeOne(s *slot[T, N], r *request[T, N], now time.Time) {
	r.state.Store(stTaken)
	b.times.Queue += now.Sub(r.enq)
	b.passed = max(b.passed, b.batches-r.seen)
	s.reqs = append(s.reqs, r)
}

// taken counts the batch of rows rows just taken into s (none: nothing
// was due), the pending requests left being the first n. b.mu is held.
func (b *batcher[T, N]) taken(s *slot[T, N], rows, n int) {
	clear(b.pending[n:])
	b.pending = b.pending[:n]
	b.times.Requests += int64(len(s.reqs))
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
}
