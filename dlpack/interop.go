package dlpack

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
)

// Imported is a DLManagedTensor produced elsewhere (a PyTorch, CuPy or NumPy
// capsule's pointer, a tensor cuVS filled in), borrowed as a view. Close calls
// the producer's deleter, exactly once; until then the producer's memory stays
// valid. Its views are tied to the Imported's Owner: Close refuses while they
// are bound to a call or retained, and they expire after it.
type Imported struct {
	owner   Owner
	mt      *generated.DLManagedTensor
	view    View
	deleted atomic.Bool
	cleanup runtime.Cleanup
}

// foreign is what the safety-net cleanup of an Imported needs.
type foreign struct{ deleter, mt unsafe.Pointer }

// Import checks the tensor mt points to as FromDLTensor does (byte_offset is
// folded into the data pointer; shape and strides are copied) and takes it
// over: from then on the caller must not call its deleter, Close does. On
// error nothing is taken over and the deleter is not called.
//
// mt must point to C memory (a DLPack producer's tensor always does) and
// its data must be valid until the deleter runs. If the Imported becomes
// unreachable without Close, a cleanup calls the deleter; do not rely on it.
func Import(mt *generated.DLManagedTensor) (*Imported, error) {
	if mt == nil {
		return nil, newError(ErrInvalidMetadata, "Import", "tensor", "nil", "no DLManagedTensor")
	}
	im := &Imported{mt: mt}
	if err := im.view.initDL("Import", &mt.DlTensor, false); err != nil {
		return nil, err
	}
	im.owner.label = "imported DLPack tensor"
	im.view.owner = &im.owner
	im.cleanup = runtime.AddCleanup(im, deleteForeign, foreign{mt.Deleter, unsafe.Pointer(mt)})
	return im, nil
}

func deleteForeign(f foreign) {
	if f.deleter != nil {
		callDeleter(f.deleter, f.mt)
	}
}

// View returns a read-only view of the tensor; ErrExpired after Close.
func (im *Imported) View() (View, error) {
	if im == nil {
		return View{}, nilTensor("Imported.View")
	}
	return im.view, im.view.check("Imported.View")
}

// ViewMut returns a writable view of the tensor (DLPack has no read-only
// flag: the producer lends it writable). ErrExpired after Close; ErrAliased
// when its strides reach an element twice.
func (im *Imported) ViewMut() (ViewMut, error) {
	if im == nil {
		return ViewMut{}, nilTensor("Imported.ViewMut")
	}
	if err := im.view.check("Imported.ViewMut"); err != nil {
		return ViewMut{}, err
	}
	if im.view.Len() > 0 {
		if err := im.view.checkSelfOverlap("Imported.ViewMut", im.view.dtype.ElemSize()); err != nil {
			return ViewMut{}, err
		}
	}
	return ViewMut{im.view}, nil
}

// Owner returns the owner the views are tied to (to retain them, say).
func (im *Imported) Owner() *Owner {
	if im == nil {
		return nil
	}
	return &im.owner
}

// Close calls the producer's deleter (if it has one), exactly once, however
// many times and from however many goroutines Close is called. It fails with
// a *BorrowedError while a view is bound to a call or retained, and then does
// nothing.
func (im *Imported) Close() error {
	if im == nil {
		return nil
	}
	if err := im.owner.Close(); err != nil {
		return err
	}
	if im.deleted.Swap(true) || im.mt == nil {
		return nil
	}
	im.cleanup.Stop()
	deleteForeign(foreign{im.mt.Deleter, unsafe.Pointer(im.mt)})
	return nil
}

// exportRec is the Go side of one exported tensor, released by its deleter.
type exportRec struct {
	view      View // keeps Go memory reachable
	ret       *Retention
	pin       runtime.Pinner
	onRelease func()
	mem       unsafe.Pointer
}

// exports maps the address of each live exported DLManagedTensor to its
// record: the deleter finds its record there, and a second call of a deleter
// finds nothing and does nothing.
var exports = struct {
	sync.Mutex
	m map[uintptr]*exportRec
}{m: map[uintptr]*exportRec{}}

// Export hands v's memory out as a DLManagedTensor for a DLPack consumer
// (wrap it in a "dltensor" capsule for Python). The tensor and its shape and
// strides live in C memory, strides explicit; Go memory is pinned; v's owner,
// if any, is retained by "DLPack consumer" (it refuses Close and exclusive
// borrows) until the consumer calls the deleter. The deleter, callable from any
// thread, releases all of that exactly once and then calls onRelease (if not
// nil), which must not panic. Legacy DLPack has no read-only flag: a consumer
// may write; use ExportMut to lend exclusively.
func Export(v View, onRelease func()) (*generated.DLManagedTensor, error) {
	return export("Export", &v, false, onRelease)
}

// ExportMut is Export with an exclusive borrow of the owner: nothing else may
// borrow it until the deleter runs.
func ExportMut(m ViewMut, onRelease func()) (*generated.DLManagedTensor, error) {
	return export("ExportMut", &m.v, true, onRelease)
}

func export(op string, v *View, mut bool, onRelease func()) (*generated.DLManagedTensor, error) {
	if err := v.check(op); err != nil {
		return nil, err
	}
	rec := &exportRec{view: *v, onRelease: onRelease}
	rec.view.call = nil // the export lives until its deleter, not its call
	if v.owner != nil {
		r := &Retention{o: v.owner, by: "DLPack consumer", mut: mut}
		verb := "export"
		if mut {
			verb = "export mutably"
		}
		if err := v.owner.hold(r, verb); err != nil {
			return nil, err
		}
		rec.ret = r
	}
	if v.gomem != nil {
		rec.pin.Pin(v.gomem)
	}
	rec.mem = cAlloc(unsafe.Sizeof(slot{}))
	t := (*slot)(rec.mem)
	t.fill(v, false)
	t.mt.Deleter = exportDeleterAddr
	exports.Lock()
	exports.m[uintptr(rec.mem)] = rec
	exports.Unlock()
	return &t.mt, nil
}

// releaseExport is the body of the exported tensors' deleter.
func releaseExport(self unsafe.Pointer) {
	exports.Lock()
	rec := exports.m[uintptr(self)]
	delete(exports.m, uintptr(self))
	exports.Unlock()
	if rec == nil {
		return
	}
	rec.pin.Unpin()
	rec.ret.End()
	cFree(rec.mem)
	if rec.onRelease != nil {
		rec.onRelease()
	}
}

// LiveExports returns the number of exported tensors whose deleter has not
// run yet.
func LiveExports() int {
	exports.Lock()
	defer exports.Unlock()
	return len(exports.m)
}
