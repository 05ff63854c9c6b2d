package batch

import (
	"testing"
)

// withState runs f with the batcher's lock held and its counters as set
// by set, then restores them, so that Close still sees an idle Batcher.
func withState(t *testing.T, b *Batcher[float32, int64], set func(in *batcher[float32, int64]), f func(in *batcher[float32, int64])) {
	t.Helper()
	in := b.b
	in.mu.Lock()
	defer in.mu.Unlock()
	pending, pendRows, flight, running, peak, timerOn := in.pending, in.pendRows, in.flight, in.running, in.peak, in.timerOn
	defer func() {
		in.pending, in.pendRows, in.flight, in.running, in.peak, in.timerOn = pending, pendRows, flight, running, peak, timerOn
		in.timer.Stop()
	}()
	set(in)
	f(in)
}

func newPolicyBatcher(t *testing.T) *Batcher[float32, int64] {
	t.Helper()
	f := newFixture(t)
	b, err := New[float32, int64](f.s, Options{MaxK: maxK})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	return b
}

// TestStreamCap: every slot may search while at most 32 requests are in the
// system; beyond, 32·sqrt(32/n) of them.
func TestStreamCap(t *testing.T) {
	b := newPolicyBatcher(t)
	for _, c := range []struct{ n, want int }{{1, DefaultSlots}, {32, DefaultSlots}, {64, 23}, {256, 11}, {1024, 6}, {100000, 1}} {
		withState(t, b, func(in *batcher[float32, int64]) { in.pendRows, in.flight, in.peak = 0, c.n, 0 }, func(in *batcher[float32, int64]) {
			if got := in.streamCap(); got != c.want {
				t.Errorf("%d requests in the system: cap %d, want %d", c.n, got, c.want)
			}
		})
	}
}

// TestGatherUnderLoad: under the cap, a batch starts beside others only
// once n/cap rows wait; alone, at light load or while closing, at once.
func TestGatherUnderLoad(t *testing.T) {
	b := newPolicyBatcher(t)
	cases := []struct {
		name               string
		pend, flight, busy int
		closing, want      bool
	}{
		{"light load", 1, 20, 5, false, true},
		{"256 in the system, 16 waiting (target 24)", 16, 240, 10, false, false},
		{"256 in the system, 24 waiting", 24, 232, 10, false, true},
		{"nothing searching", 1, 0, 0, false, true},
		{"closing", 1, 255, 10, true, true},
		{"4096 in the system: target capped at MaxBatch", 256, 3840, 2, false, true},
	}
	for _, c := range cases {
		withState(t, b, func(in *batcher[float32, int64]) {
			in.pendRows, in.flight, in.peak, in.closing = c.pend, c.flight, 0, c.closing
		}, func(in *batcher[float32, int64]) {
			defer func() { in.closing = false }()
			if got := in.gathered(c.busy); got != c.want {
				t.Errorf("%s: gathered %v, want %v", c.name, got, c.want)
			}
		})
	}
}

// TestLoadHoldsItsPeak: between a delivery and its callers' next requests
// the load seen by the cap stays at its peak, and decays batch by batch.
func TestLoadHoldsItsPeak(t *testing.T) {
	b := newPolicyBatcher(t)
	withState(t, b, func(in *batcher[float32, int64]) { in.pendRows, in.flight, in.peak = 0, 1024, 0 }, func(in *batcher[float32, int64]) {
		if got := in.load(); got != 1024 {
			t.Fatalf("load %d, want 1024", got)
		}
		in.flight = 768 // a batch of 256 delivered, its callers not back yet
		if got := in.load(); got != 1024 {
			t.Errorf("load right after a delivery: %d, want the held 1024", got)
		}
		prev := in.load()
		for range 200 {
			in.decay()
			if l := in.load(); l > prev || l < 768 {
				t.Fatalf("decayed load %d after %d (floor 768)", l, prev)
			}
			prev = in.load()
		}
		if prev != 768 {
			t.Errorf("after 200 batch starts the load is %d, want 768", prev)
		}
	})
}

// TestCappedKickArmsNoTimer: with MaxWait 0, requests held back by the cap
// wait for the next batch to finish; the timer is not armed (it used to be,
// at a negative duration, and fired in a loop while every slot was busy).
func TestCappedKickArmsNoTimer(t *testing.T) {
	b := newPolicyBatcher(t)
	r := &request[float32, int64]{rows: 1, done: make(chan struct{}, 1)}
	withState(t, b, func(in *batcher[float32, int64]) {
		in.pending = append(in.pending[:0:0], r)
		in.pendRows, in.flight, in.peak = 1, 1023, 0
		in.running = in.streamCap()
	}, func(in *batcher[float32, int64]) {
		free := len(in.free)
		in.kick(r.enq)
		if in.timerOn {
			t.Error("kick armed the timer for requests held back by the cap")
		}
		if len(in.free) != free || in.waking != 0 {
			t.Errorf("kick dispatched a slot beyond the cap (%d running)", in.running)
		}
	})
}
