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
// Fairness: a search arriving while others wait behind the gate does not
// slip in ahead of them, even with the ef in force; the waiters, once
// woken, may join a group of their ef. An index ACE left on disk is loaded
// by its first search (ensure_loaded, unlocked in cuVS): until a search has
// succeeded (cold), each search runs alone.
type efGate struct {
	mu      sync.Mutex
	cond    sync.Cond
	ef      int32 // the ef of the searches in flight
	active  int   // searches in flight
	waiting int   // searches waiting for the gate
	cold    bool  // the index may still be on disk: one search at a time
}

func (g *efGate) init(cold bool) {
	g.cond.L = &g.mu
	g.cold = cold
}

// enter waits until a search with ef may run.
func (g *efGate) enter(ef int32) {
	g.mu.Lock()
	if !(g.active == 0 || !g.cold && g.ef == ef && g.waiting == 0) {
		g.waiting++
		for !(g.active == 0 || !g.cold && g.ef == ef) {
			g.cond.Wait()
		}
		g.waiting--
	}
	if g.active == 0 {
		g.ef = ef
		if g.waiting > 0 {
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
	if g.active == 0 && g.waiting > 0 {
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
