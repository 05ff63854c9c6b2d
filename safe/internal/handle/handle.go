// Package handle keeps the use state of a cuVS handle that many goroutines
// may use at once (an index being searched) and some operations need alone
// (extend, close), without holding a lock across a shared use's C calls.
//
// It is a reader-writer lock with writer preference and a closed state:
// a shared use (Enter) is one atomic addition when no exclusive use is
// pending; an exclusive use (Lock) stops new shared uses from starting,
// waits for those in flight, runs alone, and then admits every shared use
// that arrived meanwhile before the next exclusive use can start. So an
// exclusive use waits at most for the shared uses in flight when it asked,
// and a shared use waits at most for one exclusive use. Close wins over
// both: it refuses every use that has not started and waits for those that
// have.
package handle

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The bits of State.v: closed, an exclusive use pending or running, that
// use's generation (so that a shared use waits for the exclusive use it
// saw, never a later one), and the shared uses counted (in flight, or
// waiting for the exclusive use to end).
const (
	closedBit = int64(1) << 62
	writerBit = int64(1) << 61
	genShift  = 40
	genMask   = (writerBit - 1) &^ (int64(1)<<genShift - 1)
	countMask = int64(1)<<genShift - 1
)

// State counts shared uses, orders exclusive ones and marks closing. The
// zero State is open and idle.
type State struct {
	v atomic.Int64

	// readerWait counts the shared uses an exclusive use still waits for;
	// the last to leave signals drained.
	readerWait atomic.Int64

	wmu     sync.Mutex    // held by the exclusive use (and by Close while it waits for one)
	mu      sync.Mutex    // guards wake and the writer bit's changes
	wake    chan struct{} // closed when the current exclusive use ends
	drained chan struct{} // capacity 1; made by the first exclusive use
}

// Enter starts a shared use (a search). While an exclusive use is pending
// or running it waits for that one to end (and no longer). It fails when
// the handle is closed or closing.
func (s *State) Enter() bool {
	v := s.v.Add(1)
	if v&(closedBit|writerBit) == 0 {
		return true
	}
	if v&writerBit != 0 {
		s.waitWriter(v & genMask)
		v = s.v.Load()
	}
	if v&closedBit != 0 {
		s.Leave()
		return false
	}
	return true
}

// waitWriter waits until the exclusive use of generation gen has ended.
func (s *State) waitWriter(gen int64) {
	for {
		s.mu.Lock()
		v := s.v.Load()
		if v&writerBit == 0 || v&genMask != gen {
			s.mu.Unlock()
			return
		}
		ch := s.wake
		s.mu.Unlock()
		<-ch
	}
}

// Leave ends a shared use.
func (s *State) Leave() {
	v := s.v.Add(-1)
	if v&writerBit != 0 && s.readerWait.Add(-1) == 0 {
		s.drained <- struct{}{}
	}
}

// Lock starts an exclusive use (an extend): it waits for a running
// exclusive use to end, stops new shared uses, and waits for the shared
// uses in flight. It reports false, holding nothing, when the handle is
// closed or closing (Close wins over a waiting exclusive use).
func (s *State) Lock() bool {
	if s.Closed() {
		return false
	}
	s.wmu.Lock()
	if s.Closed() {
		s.wmu.Unlock()
		return false
	}
	s.mu.Lock()
	if s.drained == nil {
		s.drained = make(chan struct{}, 1)
	}
	s.wake = make(chan struct{})
	var v int64
	for {
		v = s.v.Load()
		gen := (v&genMask + 1<<genShift) & genMask
		if s.v.CompareAndSwap(v, v&^genMask|gen|writerBit) {
			break
		}
	}
	s.mu.Unlock()
	if r := v & countMask; r != 0 && s.readerWait.Add(r) != 0 {
		<-s.drained
	}
	if s.Closed() {
		s.Unlock()
		return false
	}
	return true
}

// Unlock ends an exclusive use and admits the shared uses that waited for
// it.
func (s *State) Unlock() {
	s.mu.Lock()
	s.v.Add(-writerBit)
	close(s.wake)
	s.mu.Unlock()
	s.wmu.Unlock()
}

// Closed reports whether Close has begun.
func (s *State) Closed() bool { return s.v.Load()&closedBit != 0 }

// InFlight returns the number of shared uses counted: in flight, or
// waiting for an exclusive use.
func (s *State) InFlight() int64 { return s.v.Load() & countMask }

// Close marks the handle closed, so no new use starts, and waits for the
// exclusive use and the shared uses in flight to end. It reports false
// when the handle was already closed.
func (s *State) Close() bool {
	for {
		v := s.v.Load()
		if v&closedBit != 0 {
			return false
		}
		if s.v.CompareAndSwap(v, v|closedBit) {
			break
		}
	}
	// An exclusive use running ends (one waiting for the lock gives up);
	// then the shared uses, which it admitted or which saw the closed bit,
	// leave.
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for d := time.Microsecond; s.v.Load()&countMask != 0; {
		if d < time.Millisecond {
			runtime.Gosched()
			d *= 2
			continue
		}
		time.Sleep(d)
	}
	return true
}
