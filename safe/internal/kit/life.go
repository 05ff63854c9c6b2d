package kit

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/base"
	"github.com/cuvs-go/cuvs/safe/internal/handle"
)

// Life is the lifecycle every index shares, embedded in each package's
// Index: the C handle's destruction (by Close, or by a runtime cleanup if
// the index is dropped without Close), the borrows the index holds, the
// views it hands out into its memory, the live counter of its kind, its
// label, and its use state (handle.State): shared uses (searches,
// serialization, views) run together, an exclusive use (Extend) runs
// alone and waits its turn without starving, and Close wins over both.
//
// The zero Life is an index never made: every use refuses with
// safe.ErrClosed and Close is a no-op.
type Life struct {
	state   handle.State
	started bool

	closeMu   sync.Mutex // serializes Close
	mu        sync.Mutex // views, closing, destroyed
	views     Views
	closing   bool // Close has begun: no new view
	destroyed bool
	left      *leftovers
	clean     runtime.Cleanup
	label     string
}

// leftovers is what an index holds in C and in borrows: shared with its
// cleanup, which releases them if the index is dropped without Close. It
// holds no pointer to the index.
type leftovers struct {
	destroy  func() error
	counter  *live.Counter
	borrows  []*dlpack.Retention
	releases []func()
	owned    []func() error
	keptMu   sync.Mutex        // kept, kept: Keep runs during searches (the exact path)
	kept     []*safe.Resources // the Resources retained by Keep, each once
	unkeep   []func()          // their releases, run last
}

// release frees the C handle, then ends the borrows; if freeing fails it
// keeps them for a later try.
func (l *leftovers) release() error {
	for _, f := range l.releases {
		f()
	}
	l.releases = nil
	if err := l.destroy(); err != nil {
		return err
	}
	l.counter.Dec()
	for _, r := range l.borrows {
		r.End()
	}
	l.borrows = nil
	for _, f := range l.owned {
		_ = f()
	}
	l.owned = nil
	l.unkeepAll()
	return nil
}

// unkeepAll ends the retentions of Keep.
func (l *leftovers) unkeepAll() {
	l.keptMu.Lock()
	defer l.keptMu.Unlock()
	for _, f := range l.unkeep {
		f()
	}
	l.kept, l.unkeep = nil, nil
}

func cleanup(l *leftovers) { _ = l.release() }

// Start begins the life of owner, the index embedding l, whose C handle
// destroy frees: it counts the handle in counter and registers a cleanup
// that frees it (and ends the borrows) if owner is dropped without Close.
// label names the index in borrow errors; a "%p" in it is owner's address.
// destroy must not refer to owner.
func Start[T any](l *Life, owner *T, label string, counter *live.Counter, destroy func() error) {
	counter.Inc()
	l.started = true
	l.label = fmt.Sprintf(label, owner)
	l.left = &leftovers{destroy: destroy, counter: counter}
	l.clean = runtime.AddCleanup(owner, cleanup, l.left)
}

// SetLabel renames the index in borrow errors.
func (l *Life) SetLabel(label string) { l.label = label }

// Label returns the index's name, for borrow errors.
func (l *Life) Label() string { return l.label }

// Borrow keeps r (an input cuVS keeps a reference to) until the index is
// freed.
func (l *Life) Borrow(r *dlpack.Retention) { l.left.borrows = append(l.left.borrows, r) }

// Own has the index free memory it owns (an uploaded dataset) with free,
// after its C handle.
func (l *Life) Own(free func() error) { l.left.owned = append(l.left.owned, free) }

// OnRelease has f run when the index is freed, before its C handle: for
// what the index made from it (cagra's exact-path index). f must not refer
// to the index.
func (l *Life) OnRelease(f func()) { l.left.releases = append(l.left.releases, f) }

// Keep retains res until the index is freed: call it with every Resources
// an operation that allocates into the index runs on (build, extend,
// deserialize, merge, the exact path), before that operation. cuVS frees
// the index's memory on the stream, and through the memory resources, of
// the Resources it was allocated with, when the index is destroyed; a
// Resources closed before then stays alive (closed to new calls) until
// the last index keeping it is freed (see safe.Resources.Close). Keeping
// one Resources twice keeps it once. It refuses a nil, zero or closed res
// as kit.Lock does; a zero Life keeps nothing.
func (l *Life) Keep(res *safe.Resources, op string) error {
	if !l.started {
		return nil
	}
	left := l.left
	left.keptMu.Lock()
	defer left.keptMu.Unlock()
	for _, r := range left.kept {
		if r == res {
			return nil
		}
	}
	release, err := base.Retain(res, op)
	if err != nil {
		return err
	}
	left.kept = append(left.kept, res)
	left.unkeep = append(left.unkeep, release)
	return nil
}

// Fail frees a half-made index (Start done, the index never handed out).
func (l *Life) Fail() {
	l.clean.Stop()
	l.closing, l.destroyed = true, true
	l.state.Close()
	if l.left.release() != nil {
		// The handle could not be freed: end the borrows anyway, nothing
		// will use it.
		for _, r := range l.left.borrows {
			r.End()
		}
		for _, f := range l.left.owned {
			_ = f()
		}
		l.left.unkeepAll()
		l.left.counter.Dec()
	}
}

// State returns the use state, for code that enters it directly
// (prepared searches, kit.Serialize).
func (l *Life) State() *handle.State { return &l.state }

// Closed reports whether Close has begun (or the index was never made).
func (l *Life) Closed() bool { return !l.started || l.state.Closed() }

// Enter starts a shared use (a search): it refuses with safe.ErrClosed
// after Close has begun, and waits, never fails, while an exclusive use
// runs or is pending: at most for one Extend. Leave ends it.
func (l *Life) Enter(op string) error {
	if err := l.Built(op); err != nil {
		return err
	}
	if l.state.Enter() {
		return nil
	}
	return fmt.Errorf("%s: %w", op, safe.ErrClosed)
}

// Built refuses the zero Life, an index never made (the zero value of an
// Index type): safe.ErrClosed, saying it was never built. Methods that
// check their arguments before Enter call it first, so that a zero index
// is told as one rather than by a message about its zero dimension or
// element type.
func (l *Life) Built(op string) error {
	if l == nil || !l.started {
		return NeverBuilt(op)
	}
	return nil
}

// NeverBuilt is the error of a method of the zero value of a type whose
// values are made by a constructor (Build, Deserialize, ...): it matches
// safe.ErrClosed.
func NeverBuilt(op string) error {
	return fmt.Errorf("%s: %w: the zero value, never built (make one with the package's Build or Deserialize)", op, safe.ErrClosed)
}

// Leave ends a shared use.
func (l *Life) Leave() { l.state.Leave() }

// Exclusive runs f alone (an Extend): it waits for the running exclusive
// use, keeps new shared uses from starting, waits for those in flight,
// expires the index's views (refusing while one is in use), runs f and
// then admits the shared uses that waited. It refuses with safe.ErrClosed
// once Close has begun, also while waiting.
func (l *Life) Exclusive(op string, f func() error) error {
	if err := l.Built(op); err != nil {
		return err
	}
	if !l.state.Lock() {
		return fmt.Errorf("%s: %w", op, safe.ErrClosed)
	}
	defer l.state.Unlock()
	l.mu.Lock()
	err := l.views.Expire(op)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return f()
}

// View hands out a view into the index's memory that get writes, which
// expires when the index is closed or extended (a shared use: it waits for
// a running Extend).
func (l *Life) View(op string, get func(*generated.DLManagedTensor) error) (dlpack.View, error) {
	if err := l.Enter(op); err != nil {
		return dlpack.View{}, err
	}
	defer l.Leave()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return dlpack.View{}, fmt.Errorf("%s: %w", op, safe.ErrClosed)
	}
	return l.views.Import(op, get)
}

// Close frees the index: it refuses while a view of the index is in use
// (bound to a call, or retained by another index), keeping the index
// open; otherwise it refuses new uses, waits for those in flight (an
// Extend running, searches), runs each of before (the package's own
// buffers), frees the C handle and ends the borrows. Closing twice, or a
// zero Life, is harmless; if freeing the handle fails, the borrows are
// kept and a later Close tries again.
func (l *Life) Close(op string, before ...func()) error {
	if !l.started {
		return nil
	}
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	l.mu.Lock()
	if l.destroyed {
		l.mu.Unlock()
		return nil
	}
	if !l.closing {
		if err := l.views.Expire(op); err != nil {
			l.mu.Unlock()
			return err
		}
		l.closing = true
	}
	l.mu.Unlock()
	if l.state.Close() {
		l.clean.Stop()
		for _, f := range before {
			f()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.left.release(); err != nil {
		return Wrap(op, err)
	}
	l.destroyed = true
	return nil
}

// NilIndex is the error of a method called on a nil *Index (the result of
// a failed Build, say).
func NilIndex(op string) error { return Argf(op, "index", "nil *Index") }
