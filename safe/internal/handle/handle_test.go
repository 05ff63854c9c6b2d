package handle

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSharedExclusiveClose(t *testing.T) {
	var s State
	first := s.Enter()
	second := s.Enter()
	if !first || !second || s.InFlight() != 2 {
		t.Fatal("two shared uses should enter")
	}
	s.Leave()
	s.Leave()
	if !s.Lock() {
		t.Fatal("exclusive use of an idle handle refused")
	}
	s.Unlock()
	if !s.Enter() {
		t.Fatal("shared use after an exclusive one refused")
	}
	s.Leave()
	if !s.Close() || s.Close() {
		t.Fatal("Close should report true once")
	}
	if s.Enter() {
		t.Fatal("shared use after Close")
	}
	if s.Lock() {
		t.Fatal("exclusive use after Close")
	}
}

// An exclusive use waits for the shared uses in flight; shared uses that
// arrive meanwhile wait for it instead of failing, and run after it.
func TestLockWaitsAndSharedWait(t *testing.T) {
	var s State
	if !s.Enter() {
		t.Fatal("enter")
	}
	locked := make(chan struct{})
	var excl atomic.Bool
	go func() {
		if !s.Lock() {
			t.Error("Lock refused")
		}
		excl.Store(true)
		close(locked)
	}()
	// Wait until the exclusive use is pending (its bit is set).
	for s.v.Load()&writerBit == 0 {
		time.Sleep(time.Microsecond)
	}
	entered := make(chan bool)
	go func() {
		ok := s.Enter()
		if excl.Load() {
			t.Error("a shared use started while the exclusive one ran")
		}
		entered <- ok
	}()
	select {
	case <-locked:
		t.Fatal("Lock returned with a shared use in flight")
	case <-entered:
		t.Fatal("a shared use started while an exclusive one was pending")
	case <-time.After(10 * time.Millisecond):
	}
	s.Leave()
	<-locked
	select {
	case <-entered:
		t.Fatal("a shared use started during the exclusive one")
	case <-time.After(5 * time.Millisecond):
	}
	excl.Store(false)
	s.Unlock()
	if !<-entered {
		t.Fatal("the waiting shared use failed")
	}
	s.Leave()
	if s.InFlight() != 0 {
		t.Fatalf("%d uses counted", s.InFlight())
	}
}

// Close wins over a waiting exclusive use and over waiting shared uses.
func TestCloseWinsOverWaiters(t *testing.T) {
	var s State
	if !s.Lock() {
		t.Fatal("lock")
	}
	var wg sync.WaitGroup
	results := make(chan bool, 9)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := s.Enter()
			if ok {
				s.Leave()
			}
			results <- ok
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		ok := s.Lock()
		if ok {
			s.Unlock()
		}
		results <- ok
	}()
	for s.InFlight() != 8 {
		time.Sleep(time.Microsecond)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	for !s.Closed() {
		time.Sleep(time.Microsecond)
	}
	s.Unlock()
	<-closed
	wg.Wait()
	close(results)
	for ok := range results {
		if ok {
			t.Error("a use started after Close began")
		}
	}
	if s.InFlight() != 0 {
		t.Fatalf("%d uses counted after Close", s.InFlight())
	}
}

// Many shared uses and repeated exclusive ones: every exclusive use gets
// in, no shared use fails, and none runs during an exclusive one.
func TestExclusiveUnderLoad(t *testing.T) {
	var s State
	var inside, excl atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var shared atomic.Int64
	for g := 0; g < 16; g++ {
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
					t.Error("shared use refused while open")
					return
				}
				inside.Add(1)
				if excl.Load() != 0 {
					t.Error("shared use during an exclusive one")
				}
				shared.Add(1)
				inside.Add(-1)
				s.Leave()
			}
		}()
	}
	for i := 0; i < 200; i++ {
		if !s.Lock() {
			t.Fatal("exclusive use refused while open")
		}
		excl.Add(1)
		if n := inside.Load(); n != 0 {
			t.Errorf("%d shared uses inside an exclusive one", n)
		}
		excl.Add(-1)
		s.Unlock()
	}
	close(stop)
	wg.Wait()
	if !s.Close() {
		t.Fatal("close")
	}
	t.Logf("%d shared uses around 200 exclusive ones", shared.Load())
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
