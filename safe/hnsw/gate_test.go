package hnsw

import (
	"testing"
	"time"
)

// entered reports whether enter(ef) returns within a short wait, in a
// goroutine whose entry is reported on the returned channel otherwise.
func tryEnter(g *efGate, ef int32) chan struct{} {
	done := make(chan struct{})
	go func() { g.enter(ef); close(done) }()
	return done
}

func in(c chan struct{}) bool {
	select {
	case <-c:
		return true
	case <-time.After(50 * time.Millisecond):
		return false
	}
}

// Searches with one ef share the gate; another ef waits for them, and
// once it waits, later searches of the first ef queue behind it.
func TestGateSharesOneEf(t *testing.T) {
	var g efGate
	g.init(false)
	g.enter(64)
	if !in(tryEnter(&g, 64)) {
		t.Fatal("a second search with the same ef waited")
	}
	other := tryEnter(&g, 32)
	if in(other) {
		t.Fatal("a search with another ef entered while two ran")
	}
	late := tryEnter(&g, 64)
	if in(late) {
		t.Fatal("a search with the ef in force slipped in ahead of a waiting one")
	}
	g.leave(true)
	g.leave(true)
	if !in(other) {
		t.Fatal("the waiting search did not enter once the others left")
	}
	if in(late) {
		t.Fatal("ef 64 entered beside ef 32")
	}
	g.leave(true)
	if !in(late) {
		t.Fatal("the late search never entered")
	}
	g.leave(true)
}

// Until a search has succeeded on a cold index (on disk: the first search
// loads it), searches run one at a time.
func TestGateColdRunsAlone(t *testing.T) {
	var g efGate
	g.init(true)
	g.enter(64)
	second := tryEnter(&g, 64)
	if in(second) {
		t.Fatal("a second search entered a cold index")
	}
	g.leave(false) // failed: still cold
	if !in(second) {
		t.Fatal("the second search did not enter")
	}
	third := tryEnter(&g, 64)
	if in(third) {
		t.Fatal("a third search entered while the index was still cold")
	}
	g.leave(true) // loaded
	if !in(third) {
		t.Fatal("the third search did not enter")
	}
	if !in(tryEnter(&g, 64)) {
		t.Fatal("searches of a loaded index did not share")
	}
	g.leave(true)
	g.leave(true)
}
