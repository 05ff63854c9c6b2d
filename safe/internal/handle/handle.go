// Package handle keeps the use state of a cuVS handle that many goroutines
// may use at once (an index being searched) and some operations need alone
// (extend, close), without holding a lock across C calls.
package handle

import (
	"runtime"
	"sync/atomic"
	"time"
)

const (
	closedBit    = int64(1) << 62
	exclusiveBit = int64(1) << 61
	countMask    = exclusiveBit - 1
)

// State counts shared uses in flight and marks exclusive use and closing.
// The zero State is open and idle.
type State struct{ v atomic.Int64 }

// Enter starts a shared use (a search). It fails when the handle is closed
// or closing, or used exclusively.
func (s *State) Enter() bool {
	for {
		v := s.v.Load()
		if v&(closedBit|exclusiveBit) != 0 {
			return false
		}
		if s.v.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// Leave ends a shared use.
func (s *State) Leave() { s.v.Add(-1) }

// TryExclusive starts an exclusive use; it fails at once (busy or closed)
// rather than wait. closed reports which.
func (s *State) TryExclusive() (ok, closed bool) {
	if s.v.CompareAndSwap(0, exclusiveBit) {
		return true, false
	}
	return false, s.v.Load()&closedBit != 0
}

// LeaveExclusive ends an exclusive use.
func (s *State) LeaveExclusive() { s.v.Add(-exclusiveBit) }

// Closed reports whether Close has begun.
func (s *State) Closed() bool { return s.v.Load()&closedBit != 0 }

// InFlight returns the number of shared uses in flight.
func (s *State) InFlight() int64 { return s.v.Load() & countMask }

// Close marks the handle closed, so no new use starts, and waits for the
// uses in flight to end. It reports false when the handle was already
// closed.
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
	for d := time.Microsecond; s.v.Load() != closedBit; {
		if d < time.Millisecond {
			runtime.Gosched()
			d *= 2
			continue
		}
		time.Sleep(d)
	}
	return true
}
