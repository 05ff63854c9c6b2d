package handle

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSharedExclusiveClose(t *testing.T) {
	var s State
	first, second := s.Enter(), s.Enter()
	if !first || !second || s.InFlight() != 2 {
		t.Fatal("two shared uses should enter")
	}
	if ok, closed := s.TryExclusive(); ok || closed {
		t.Fatal("exclusive use while shared ones are in flight")
	}
	s.Leave()
	s.Leave()
	if ok, _ := s.TryExclusive(); !ok {
		t.Fatal("exclusive use of an idle handle refused")
	}
	if s.Enter() {
		t.Fatal("shared use during an exclusive one")
	}
	s.LeaveExclusive()
	if !s.Close() || s.Close() {
		t.Fatal("Close should report true once")
	}
	if s.Enter() {
		t.Fatal("shared use after Close")
	}
	if ok, closed := s.TryExclusive(); ok || !closed {
		t.Fatal("exclusive use after Close should report closed")
	}
}

func TestCloseWaitsForInFlight(t *testing.T) {
	var s State
	var inside atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !s.Enter() {
					return
				}
				inside.Add(1)
				time.Sleep(10 * time.Microsecond)
				inside.Add(-1)
				s.Leave()
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	s.Close()
	if n := inside.Load(); n != 0 {
		t.Errorf("%d uses still inside after Close returned", n)
	}
	close(stop)
	wg.Wait()
}
