package safe

import (
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
)

// PinnedMatrix is a row-major matrix in page-locked host memory
// (cuvsRMMHostAlloc, on the one thread that allocates and frees pinned
// memory, as cuVS requires): readable and writable from Go through Data, and fast to
// copy to and from the device. Its views have device type CUDAHost, which
// cuVS accepts as both host and device memory.
type PinnedMatrix[T dlpack.DType] struct {
	addr       uintptr // C memory, as an integer: see cPtr
	rows, cols int64
	owner      dlpack.Owner
	mu         sync.Mutex
	freed      bool
	clean      runtime.Cleanup
	view       dlpack.View // made once: View and ViewMut hand out copies
	viewMut    dlpack.ViewMut
}

type hostAlloc struct {
	addr  uintptr
	bytes uint64
}

func freeHost(a hostAlloc) { _ = hostFreeBytes(cPtr(a.addr), a.bytes) }

// NewPinnedMatrix allocates a rows×cols matrix of pinned host memory.
func NewPinnedMatrix[T dlpack.DType](rows, cols int) (*PinnedMatrix[T], error) {
	const op = "safe.NewPinnedMatrix"
	if rows < 0 {
		return nil, argf(op, "rows", "%d is negative", rows)
	}
	if cols < 1 {
		return nil, argf(op, "cols", "%d, want at least 1", cols)
	}
	esz := dlpack.DataTypeOf[T]().ElemSize()
	if int64(rows) > math.MaxInt64/int64(cols)/esz {
		return nil, argf(op, "rows", "%d×%d elements of %d bytes overflow", rows, cols, esz)
	}
	m := &PinnedMatrix[T]{rows: int64(rows), cols: int64(cols)}
	if bytes := uint64(rows) * uint64(cols) * uint64(esz); bytes > 0 {
		p, err := hostAllocBytes(bytes)
		if err != nil {
			return nil, wrap(op, err)
		}
		m.addr = uintptr(p)
		m.clean = runtime.AddCleanup(m, freeHost, hostAlloc{m.addr, bytes})
	}
	m.owner.SetLabel("PinnedMatrix")
	dev, shape := dlpack.Device{Type: dlpack.CUDAHost}, []int64{m.rows, m.cols}
	v, err := dlpack.FromRawParts(cPtr(m.addr), dev, shape, nil, dlpack.DataTypeOf[T]())
	if err != nil {
		m.Close()
		return nil, wrap(op, err)
	}
	vm, err := dlpack.FromRawPartsMut(cPtr(m.addr), dev, shape, nil, dlpack.DataTypeOf[T]())
	if err != nil {
		m.Close()
		return nil, wrap(op, err)
	}
	m.view, m.viewMut = v.WithOwner(&m.owner), vm.WithOwner(&m.owner)
	return m, nil
}

// Data returns the elements, row-major. The slice aliases the pinned memory:
// do not use it after Close, nor write it while a call borrows the matrix.
func (m *PinnedMatrix[T]) Data() []T {
	if m == nil || m.addr == 0 {
		return nil
	}
	return unsafe.Slice((*T)(cPtr(m.addr)), m.rows*m.cols)
}

// Rows returns the number of rows.
func (m *PinnedMatrix[T]) Rows() int {
	if m == nil {
		return 0
	}
	return int(m.rows)
}

// Cols returns the number of columns.
func (m *PinnedMatrix[T]) Cols() int {
	if m == nil {
		return 0
	}
	return int(m.cols)
}

// Owner returns the borrow state of the memory.
func (m *PinnedMatrix[T]) Owner() *dlpack.Owner {
	if m == nil {
		return nil
	}
	return &m.owner
}

// View returns a read-only view of the matrix.
func (m *PinnedMatrix[T]) View() (dlpack.View, error) {
	if m == nil {
		return dlpack.View{}, argf("safe.PinnedMatrix.View", "m", "nil *PinnedMatrix")
	}
	return m.view, nil
}

// ViewMut returns a writable view of the matrix.
func (m *PinnedMatrix[T]) ViewMut() (dlpack.ViewMut, error) {
	if m == nil {
		return dlpack.ViewMut{}, argf("safe.PinnedMatrix.ViewMut", "m", "nil *PinnedMatrix")
	}
	return m.viewMut, nil
}

// Close frees the memory; it refuses while the matrix is borrowed.
func (m *PinnedMatrix[T]) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freed {
		return nil
	}
	if err := m.owner.Close(); err != nil {
		return err
	}
	m.freed = true
	if m.addr == 0 {
		return nil
	}
	m.clean.Stop()
	bytes := uint64(m.rows) * uint64(m.cols) * uint64(dlpack.DataTypeOf[T]().ElemSize())
	return wrap("safe.PinnedMatrix.Close", hostFreeBytes(cPtr(m.addr), bytes))
}
