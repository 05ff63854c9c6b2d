package dlpack

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cuvs-go/cuvs/internal/live"
)

// nilOwner is what a nil *Owner's Retain and LendMut return.
func nilOwner(op string) error {
	return newError(ErrInvalidMetadata, op, "owner", nil, "a nil *Owner: no memory to borrow")
}

// liveRetentions counts the retentions not yet ended, for tests' leak checks.
var liveRetentions = live.New("dlpack.Retention")

// Owner keeps the borrow state of one buffer, for the type that owns the
// buffer's storage (a device matrix, a host adapter, an imported tensor). Put
// one in the buffer's struct, tie the buffer's views to it with
// View.WithOwner, and call Owner.Close before freeing the storage: Close
// refuses while the memory is borrowed, and after it every view tied to the
// owner reports ErrExpired.
//
// Borrows follow a read/write rule, checked at once (nothing blocks):
//   - a call that reads the memory (Call.In), or a retention (Retain, e.g. an
//     index keeping its dataset), holds a shared borrow;
//   - a call that writes it (Call.Out), or a mutable lending (LendMut), holds
//     an exclusive borrow;
//   - a shared borrow is refused while an exclusive one is held, an exclusive
//     one while any borrow is held, and Close while any borrow is held.
//
// Refusals are *BorrowedError values that name the holders. The zero Owner is
// ready to use; an Owner must not be copied after first use. Its methods are
// safe for concurrent use.
type Owner struct {
	mu      sync.Mutex
	closed  atomic.Bool
	label   string
	readers int    // calls holding a shared borrow
	reader  string // the latest of them, for messages
	writer  string // the call holding an exclusive borrow, if writing
	writing bool
	held    []*Retention
}

// SetLabel names the owner in error messages, e.g. "device matrix 1000x128
// float32". The default is "tensor owner".
func (o *Owner) SetLabel(label string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.label = label
	o.mu.Unlock()
}

// Label returns the owner's name for messages.
func (o *Owner) Label() string {
	if o == nil {
		return ""
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.labelLocked()
}

func (o *Owner) labelLocked() string {
	if o.label == "" {
		return "tensor owner"
	}
	return o.label
}

// Closed reports whether Close has succeeded.
func (o *Owner) Closed() bool { return o != nil && o.closed.Load() }

// Close marks the memory as gone: views tied to o expire, and new borrows
// are refused with ErrExpired. It fails with a *BorrowedError while the
// memory is borrowed, and then changes nothing: the caller must not free the
// storage. Closing a closed owner returns nil.
func (o *Owner) Close() error {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed.Load() {
		return nil
	}
	if o.busyLocked() {
		return o.refusedLocked("close")
	}
	o.closed.Store(true)
	return nil
}

// Busy reports whether the memory is borrowed now.
func (o *Owner) Busy() bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.busyLocked()
}

func (o *Owner) busyLocked() bool { return o.readers > 0 || o.writing || len(o.held) > 0 }

// Borrowers lists who holds the memory now, in the words errors use.
func (o *Owner) Borrowers() []string {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.borrowersLocked()
}

func (o *Owner) borrowersLocked() []string {
	var by []string
	if o.writing {
		by = append(by, fmt.Sprintf("call %q (writing)", o.writer))
	}
	switch {
	case o.readers == 1:
		by = append(by, fmt.Sprintf("call %q (reading)", o.reader))
	case o.readers > 1:
		by = append(by, fmt.Sprintf("%d calls (reading; latest %q)", o.readers, o.reader))
	}
	for _, r := range o.held {
		if r.mut {
			by = append(by, fmt.Sprintf("%q (lent mutably)", r.by))
		} else {
			by = append(by, fmt.Sprintf("%q (retained)", r.by))
		}
	}
	return by
}

func (o *Owner) refusedLocked(op string) error {
	return &BorrowedError{Owner: o.labelLocked(), Op: op, By: o.borrowersLocked()}
}

func (o *Owner) expiredLocked(op string) error {
	return newError(ErrExpired, op, "owner", o.labelLocked(), "the owner was closed")
}

// exclusiveLocked reports whether an exclusive borrow is held.
func (o *Owner) exclusiveLocked() bool {
	if o.writing {
		return true
	}
	for _, r := range o.held {
		if r.mut {
			return true
		}
	}
	return false
}

// acquireCall takes a borrow for the call named name.
func (o *Owner) acquireCall(name string, excl bool) error {
	o.mu.Lock()
	var err error
	switch {
	case o.closed.Load():
		err = o.expiredLocked("borrow")
	case excl && o.busyLocked():
		err = o.refusedLocked("borrow mutably")
	case !excl && o.exclusiveLocked():
		err = o.refusedLocked("borrow")
	case excl:
		o.writing, o.writer = true, name
	default:
		o.readers++
		o.reader = name
	}
	o.mu.Unlock()
	return err
}

// upgradeCall turns the shared borrow of the call named name into an
// exclusive one, if that call is the only holder.
func (o *Owner) upgradeCall(name string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.readers != 1 || o.writing || len(o.held) > 0 {
		return o.refusedLocked("borrow mutably")
	}
	o.readers = 0
	o.writing, o.writer = true, name
	return nil
}

func (o *Owner) releaseCall(excl bool) {
	o.mu.Lock()
	if excl {
		o.writing, o.writer = false, ""
	} else if o.readers--; o.readers == 0 {
		o.reader = ""
	}
	o.mu.Unlock()
}

// Retain records a shared borrow by "by" that outlives a call, such as an
// index keeping its dataset: until the Retention ends, the owner refuses
// Close and exclusive borrows, naming "by". It fails when the owner is closed
// or lent exclusively.
func (o *Owner) Retain(by string) (*Retention, error) {
	if o == nil {
		return nil, nilOwner("Owner.Retain")
	}
	r := &Retention{o: o, by: by}
	if err := o.hold(r, "borrow"); err != nil {
		return nil, err
	}
	return r, nil
}

// LendMut records an exclusive borrow by "by" outside any call, e.g. for an
// asynchronous copy into the memory: until the Retention ends, the owner
// refuses Close and every other borrow. It fails when the memory is borrowed
// or the owner closed.
func (o *Owner) LendMut(by string) (*Retention, error) {
	if o == nil {
		return nil, nilOwner("Owner.LendMut")
	}
	r := &Retention{o: o, by: by, mut: true}
	if err := o.hold(r, "lend mutably"); err != nil {
		return nil, err
	}
	return r, nil
}

func (o *Owner) hold(r *Retention, op string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.closed.Load():
		return o.expiredLocked(op)
	case r.mut && o.busyLocked(), !r.mut && o.exclusiveLocked():
		return o.refusedLocked(op)
	}
	o.held = append(o.held, r)
	r.counted = true
	liveRetentions.Inc()
	return nil
}

// Retention is a borrow that outlives a call (see Owner.Retain, Owner.LendMut
// and View.Retain). End it when the holder lets go.
type Retention struct {
	o     *Owner
	by    string
	mut   bool
	ended atomic.Bool
	// counted: made by a Retain (the zero Retention ends as a no-op)
	counted bool
	pin     runtime.Pinner
	data    unsafe.Pointer // keeps pinned Go memory reachable
}

// By returns the holder's name.
func (r *Retention) By() string {
	if r == nil {
		return ""
	}
	return r.by
}

// End releases the borrow (and the pin of Go memory, for a retained view of
// Go memory). Ending it again does nothing; it is safe from any goroutine.
func (r *Retention) End() {
	if r == nil || r.ended.Swap(true) {
		return
	}
	if !r.counted {
		return // the zero Retention: nothing was retained
	}
	o := r.o
	liveRetentions.Dec()
	if o != nil {
		o.mu.Lock()
		for i, h := range o.held {
			if h == r {
				o.held = slices.Delete(o.held, i, i+1)
				break
			}
		}
		o.mu.Unlock()
	}
	if r.data != nil {
		r.pin.Unpin()
		r.data = nil
	}
}

// Retain records that "by" keeps using v's memory after the call that v was
// bound to, as a cuVS index does with a device dataset it keeps: the
// view's owner, if any, refuses Close and exclusive borrows until the
// Retention ends, and Go memory (a CPU view) stays pinned until then. Retain
// before the call ends: a view whose call has ended is expired. End every
// Retention: one of Go memory dropped without End is reported by the runtime
// as a leaked pin.
func (v View) Retain(by string) (*Retention, error) {
	if err := v.check("View.Retain"); err != nil {
		return nil, err
	}
	r := &Retention{o: v.owner, by: by}
	if v.owner != nil {
		if err := v.owner.hold(r, "borrow"); err != nil {
			return nil, err
		}
	}
	if v.owner == nil {
		r.counted = true
		liveRetentions.Inc()
	}
	if v.gomem != nil {
		r.pin.Pin(v.gomem)
		r.data = v.gomem
	}
	return r, nil
}
