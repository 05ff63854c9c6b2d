package batch

import (
	"errors"
	"fmt"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

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
			b.done(s, rows, t)
			now = time.Now()
			b.drain(now)
			if rows == 0 || len(b.pending) == 0 || b.waking > 0 || !b.due(b.running-1, now) || !b.gathered(b.running-1) || b.running > b.streamCap() || b.scanFull() {
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
	b.done(s, rows, t)
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
	var search searchFunc
	switch {
	case s.light:
		search = b.light.searchLight
	case s.filter != nil || s.mixed:
		search = b.fs.SearchBatchFiltered
	default:
		search = b.searchPlain
	}
	var err error
	if s.mixed {
		err = s.searchMixed(search, rows, int64(b.s.Rows()))
		s.releaseMixed()
	} else {
		err = s.search(search, rows, s.filter)
	}
	if s.filter != nil {
		kit.ReleaseFilter(s.filter) // held by take
		s.filter = nil
	}
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

// searchPlain is the Searcher's SearchBatch, as a searchFunc (f is nil).
func (b *batcher[T, N]) searchPlain(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, _ *safe.Filter) error {
	return b.s.SearchBatch(res, q, n, d)
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
		err = errors.Join(err, s.search(in.searchPlain, 1, nil), s.search(in.searchPlain, in.maxBatch, nil))
		if in.light != nil {
			err = errors.Join(err, s.search(in.light.searchLight, 1, nil), s.search(in.light.searchLight, in.maxBatch, nil))
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
