package dlpack

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
)

// Call scopes the tensors of one C call. Begin one, bind each input with In
// and each output with Out (each returns the *generated.DLManagedTensor to
// pass to C), make the call, and End it:
//
//	c := dlpack.Begin("cagra.Search")
//	defer c.End()
//	q, err := c.In(&queries)      // queries is a View
//	...
//	n, err := c.Out(&neighbors)   // neighbors is a ViewMut
//	...
//	err = generated.CuvsCagraSearch(res, params, index, q, n, d, filter)
//
// Binding checks that the view has not expired, that a writable view
// overlaps no other view of the call (ErrAliased), and borrows the view's
// Owner (shared for In, exclusive for Out; a refusal is a *BorrowedError). It
// pins Go memory (CPU views) with a runtime.Pinner, and writes the
// DLManagedTensor and its shape and strides into C memory that the call owns,
// so C may read them and cgocheck2 is satisfied. Byte offsets are folded into
// data; a row-major view gets NULL strides and a column-major one canonical
// strides, which is what cuVS's contiguity checks accept. manager_ctx and
// deleter are NULL: C must not keep the tensors beyond the call (cuVS does
// not).
//
// End releases all of it: the borrows, the pins and the C memory (pooled for
// the next call); the views bound to the call (In and Out stamp the View you
// pass) then report ErrExpired, and the DLManagedTensor pointers must not be
// used again. After End, the Call value is stale: its methods report
// ErrExpired and End does nothing, so a deferred End after an explicit one is
// harmless. A Call is used by one goroutine at a time; calls on different
// goroutines are independent. A Call must be ended: one that is dropped
// keeps its borrows, and the runtime reports its pins as leaked.
//
// Begin, In, Out and End allocate nothing on the Go heap in the common case
// (up to 8 tensors and 5 Go-memory tensors per call).
type Call struct {
	s   *callState
	gen uint64
}

// callInline is the number of tensors a call holds without growing.
const callInline = 8

type callState struct {
	gen    atomic.Uint64 // changes at End: views and Call values stamped with an older one are expired
	name   string
	bound  []boundView
	owners []heldOwner
	mem    *arena
	pinner runtime.Pinner

	inlineBound  [callInline]boundView
	inlineOwners [callInline]heldOwner
}

// boundView is what a call keeps of a view bound to it: the bytes it
// touches, for the alias check. It holds no pointer (clearing it at End
// costs nothing); the C tensor in the view's slot describes the rest.
type boundView struct {
	start, end uintptr // [start, end) absolute; start == end: touches nothing
	dev        Device
	addr       bool // data is an address on dev (not a handle)
	mut        bool
}

// overlaps reports whether b and the bytes [start, end) on dev may touch
// the same memory: both touch some bytes, their address ranges intersect,
// and they are on the same device or both have addresses (CUDA's unified
// addressing makes host and device addresses comparable).
func (b *boundView) overlaps(start, end uintptr, dev Device, addr bool) bool {
	if start == end || b.start == b.end {
		return false
	}
	if !(addr && b.addr) && dev != b.dev {
		return false
	}
	return start < b.end && b.start < end
}

type heldOwner struct {
	o    *Owner
	excl bool
}

var callPool = sync.Pool{New: func() any { return newCallState() }}

func newCallState() *callState {
	s := &callState{mem: &arena{}}
	s.bound = s.inlineBound[:0]
	s.owners = s.inlineOwners[:0]
	s.mem.slot(0) // the first chunk, allocated up front
	runtime.AddCleanup(s, (*arena).free, s.mem)
	return s
}

// Begin starts the scope of one C call. name says who borrows, in
// *BorrowedError messages (e.g. "cagra.Search").
func Begin(name string) Call {
	s := callPool.Get().(*callState)
	s.name = name
	return Call{s: s, gen: s.gen.Load()}
}

func (c Call) live() bool { return c.s != nil && c.s.gen.Load() == c.gen }

// In binds a read-only view as an input of the call and returns the tensor
// to hand to C. v is stamped with the call: after End, v.Err() reports
// ErrExpired.
func (c Call) In(v *View) (*generated.DLManagedTensor, error) {
	if v == nil {
		return nil, nilTensor("Call.In")
	}
	return c.bind(v, false, "Call.In")
}

// Out binds a writable view as an output of the call and returns the tensor
// to hand to C. It fails with ErrAliased when m overlaps a view already bound
// to the call (and In fails when its view overlaps a bound ViewMut). m is
// stamped with the call: after End, m.Err() reports ErrExpired.
func (c Call) Out(m *ViewMut) (*generated.DLManagedTensor, error) {
	if m == nil {
		return nil, nilTensor("Call.Out")
	}
	return c.bind(&m.v, true, "Call.Out")
}

func (c Call) bind(v *View, mut bool, op string) (*generated.DLManagedTensor, error) {
	if !c.live() {
		return nil, newError(ErrExpired, op, "call", "ended", "the call has ended (or never began)")
	}
	s := c.s
	if err := v.check(op); err != nil {
		return nil, err
	}
	// the bytes v touches, kept as scalars (building a boundView first and
	// copying it costs a store-forwarding stall)
	var start, end uintptr
	data := v.ptr()
	if v.hi != v.lo && data != nil {
		start, end = uintptr(data)+uintptr(v.lo), uintptr(data)+uintptr(v.hi)
	}
	addr := v.device.Type.hasAddress()
	for i := range s.bound {
		if b := &s.bound[i]; (mut || b.mut) && b.overlaps(start, end, v.device, addr) {
			return nil, newError(ErrAliased, op, fmt.Sprintf("tensor %d", len(s.bound)), v.String(),
				fmt.Sprintf("overlaps tensor %d (%s) of call %q", i, s.describe(i), s.name))
		}
	}
	if v.owner != nil {
		if err := s.borrow(v.owner, mut); err != nil {
			return nil, err
		}
	}
	if v.gomem != nil {
		s.pinner.Pin(v.gomem) // a no-op for memory that is not Go's
	}
	t := s.mem.slot(len(s.bound))
	t.fill(v, true)
	v.call, v.callGen = s, c.gen
	s.bound = append(s.bound, boundView{start: start, end: end, dev: v.device, addr: addr, mut: mut})
	return &t.mt, nil
}

// describe describes tensor i of the call, for messages: the view as its C
// tensor has it.
func (s *callState) describe(i int) string {
	v, err := FromDLTensor(&s.mem.slot(i).mt.DlTensor)
	if err != nil {
		return "?"
	}
	return v.String()
}

// borrow takes o for the call, once per owner: a second view of the same
// owner shares the first one's borrow (upgraded to exclusive if needed);
// overlap within the call is the alias check's business.
func (s *callState) borrow(o *Owner, excl bool) error {
	for i := range s.owners {
		h := &s.owners[i]
		if h.o != o {
			continue
		}
		if excl && !h.excl {
			if err := o.upgradeCall(s.name); err != nil {
				return err
			}
			h.excl = true
		}
		return nil
	}
	if err := o.acquireCall(s.name, excl); err != nil {
		return err
	}
	s.owners = append(s.owners, heldOwner{o, excl})
	return nil
}

// End ends the call: see Call. Ending a stale Call does nothing.
func (c Call) End() {
	s := c.s
	if s == nil || !s.gen.CompareAndSwap(c.gen, c.gen+1) {
		return
	}
	for _, h := range s.owners {
		h.o.releaseCall(h.excl)
	}
	s.pinner.Unpin()
	for i := range s.bound {
		s.mem.slot(i).mt.DlTensor.Data = nil // no stale Go pointers in C memory
	}
	clear(s.owners)
	s.bound, s.owners = s.bound[:0], s.owners[:0]
	s.name = ""
	callPool.Put(s)
}

// Len returns the number of tensors bound to the call, 0 once it ended.
func (c Call) Len() int {
	if !c.live() {
		return 0
	}
	return len(c.s.bound)
}

// slot is one materialized tensor in C memory, with its shape and strides
// inline.
type slot struct {
	mt      generated.DLManagedTensor
	shape   [MaxRank]int64
	strides [MaxRank]int64
}

// fill writes v into t. forCall selects the strides cuVS's checks accept
// (NULL for row-major, canonical for column-major); otherwise the view's
// strides are written as they are.
func (t *slot) fill(v *View, forCall bool) {
	n := int(v.ndim)
	dl := &t.mt.DlTensor
	dl.Data = v.ptr()
	dl.Device = v.device.raw()
	dl.Ndim = int32(n)
	dl.Dtype = v.dtype.raw()
	copy(t.shape[:n], v.shape[:n])
	dl.Shape = &t.shape[0]
	dl.ByteOffset = 0
	t.mt.ManagerCtx = nil
	t.mt.Deleter = nil
	switch {
	case forCall && v.layout.IsRowMajor():
		dl.Strides = nil
	case forCall && v.layout.IsColMajor():
		s := int64(1)
		for i := 0; i < n; i++ {
			t.strides[i] = s
			s *= v.shape[i]
		}
		dl.Strides = &t.strides[0]
	default:
		copy(t.strides[:n], v.strides[:n])
		dl.Strides = &t.strides[0]
	}
}

// chunkSlots is the number of slots per C allocation.
const chunkSlots = callInline

// arena is the C memory of a call's slots, in chunks that never move.
type arena struct{ chunks []*[chunkSlots]slot }

func (a *arena) slot(i int) *slot {
	if k := i / chunkSlots; k < len(a.chunks) {
		return &a.chunks[k][i%chunkSlots]
	}
	return a.grow(i)
}

// grow adds chunks until slot i exists, and returns it.
func (a *arena) grow(i int) *slot {
	k := i / chunkSlots
	for len(a.chunks) <= k {
		a.chunks = append(a.chunks, (*[chunkSlots]slot)(cAlloc(unsafe.Sizeof([chunkSlots]slot{}))))
	}
	return &a.chunks[k][i%chunkSlots]
}

func (a *arena) free() {
	for _, c := range a.chunks {
		cFree(unsafe.Pointer(c))
	}
	a.chunks = nil
}
