package hnsw

import "sync"

// efGate admits concurrent searches of one index as long as they set the
// same ef. cuvsHnswSearch writes its ef into the index (index::set_ef:
// hnswlib's ef_), then runs hnswlib's searchKnn, which is const: its
// scratch (the visited lists) comes from a mutex-guarded pool and its
// counters are atomic. Searches with the same ef write the same value and
// can overlap; a search with another ef waits until the searches in flight
// are done, then opens the gate for its own ef.
//
// Fairness: a search arriving while others wait behind the gate queues
// behind them, even with the ef in force; groups open in arrival order. An index ACE left on disk is loaded
// by its first search (ensure_loaded, unlocked in cuVS): until a search has
// succeeded (cold), each search runs alone.
type efGate struct {
	mu     sync.Mutex
	cond   sync.Cond
	ef     int32  // the ef of the searches in flight
	active int    // searches in flight
	group  uint64 // counts the groups opened (by a first search with its ef)
	ticket uint64 // the last ticket handed to a waiter
	queue  []waiter
	cold   bool // the index may still be on disk: one search at a time
}

// waiter is a search waiting behind the gate, in arrival order.
type waiter struct {
	ticket uint64
	ef     int32
}

func (g *efGate) init(cold bool) {
	g.cond.L = &g.mu
	g.cold = cold
}

// enter waits until a search with ef may run: at once when nobody waits
// and the gate is free or open for ef; otherwise in arrival order, the
// oldest waiter opening the next group when the searches in flight have
// ended, and the waiters of its ef joining it.
func (g *efGate) enter(ef int32) {
	g.mu.Lock()
	if len(g.queue) > 0 || !(g.active == 0 || !g.cold && g.ef == ef) {
		g.ticket++
		t, arrived := g.ticket, g.group
		g.queue = append(g.queue, waiter{t, ef})
		for !(g.active == 0 && g.queue[0].ticket == t ||
			g.active > 0 && !g.cold && g.ef == ef && g.group != arrived) {
			g.cond.Wait()
		}
		for i := range g.queue {
			if g.queue[i].ticket == t {
				g.queue = append(g.queue[:i], g.queue[i+1:]...)
				break
			}
		}
	}
	if g.active == 0 {
		g.ef = ef
		g.group++
		if len(g.queue) > 0 {
			g.cond.Broadcast() // the waiters with this ef may join
		}
	}
	g.active++
	g.mu.Unlock()
}

// leave ends a search; ok reports whether it succeeded (the index is in
// memory from then on).
func (g *efGate) leave(ok bool) {
	g.mu.Lock()
	g.active--
	if ok {
		g.cold = false
	}
	if g.active == 0 && len(g.queue) > 0 {
		g.cond.Broadcast()
	}
	g.mu.Unlock()
}

// warm records that the index is in memory (an Extend loaded it).
func (g *efGate) warm() {
	g.mu.Lock()
	g.cold = false
	g.mu.Unlock()
}
