package dlpack

import (
	"fmt"
	"unsafe"
)

// HostVector lends a Go slice as a rank-1 CPU tensor, without copying. Calls
// pin the slice's memory for exactly their duration. Close it (it refuses
// while borrowed) before reusing the slice for something else: its views then
// expire.
type HostVector[T DType] struct {
	owner Owner
	data  []T
}

// NewHostVector wraps data; the vector's length is len(data).
func NewHostVector[T DType](data []T) *HostVector[T] {
	h := &HostVector[T]{data: data}
	h.owner.label = fmt.Sprintf("host vector [%d]%s", len(data), DataTypeOf[T]())
	return h
}

// Data returns the wrapped slice.
func (h *HostVector[T]) Data() []T {
	if h == nil {
		return nil
	}
	return h.data
}

// Len returns the number of elements.
func (h *HostVector[T]) Len() int {
	if h == nil {
		return 0
	}
	return len(h.data)
}

// Owner returns the vector's owner, for retention and borrow checks.
func (h *HostVector[T]) Owner() *Owner {
	if h == nil {
		return nil
	}
	return &h.owner
}

// Close marks the slice as no longer lent: see Owner.Close.
func (h *HostVector[T]) Close() error {
	if h == nil {
		return nil
	}
	return h.owner.Close()
}

// View returns a read-only view of the vector; ErrExpired after Close.
func (h *HostVector[T]) View() (View, error) {
	if h == nil {
		return View{}, nilTensor("HostVector.View")
	}
	return hostView[T](&h.owner, h.data, int64(len(h.data)), 1, 1, "HostVector.View")
}

// ViewMut returns a writable view of the vector; ErrExpired after Close.
func (h *HostVector[T]) ViewMut() (ViewMut, error) {
	if h == nil {
		return ViewMut{}, nilTensor("HostVector.ViewMut")
	}
	v, err := hostView[T](&h.owner, h.data, int64(len(h.data)), 1, 1, "HostVector.ViewMut")
	return ViewMut{v}, err
}

// HostMatrix lends a Go slice as a rank-2, row-major CPU tensor of rows x
// cols, without copying (the layout cuVS wants for datasets and queries).
// Like HostVector, calls pin it for their duration; Close it before reusing
// the slice.
type HostMatrix[T DType] struct {
	owner      Owner
	data       []T
	rows, cols int64
}

// NewHostMatrix wraps data as a rows x cols row-major matrix. len(data) must
// be rows*cols.
func NewHostMatrix[T DType](data []T, rows, cols int) (*HostMatrix[T], error) {
	const op = "NewHostMatrix"
	switch {
	case rows < 0:
		return nil, newError(ErrInvalidMetadata, op, "rows", rows, "negative extent")
	case cols < 0:
		return nil, newError(ErrInvalidMetadata, op, "cols", cols, "negative extent")
	}
	if n, ok := mul(int64(rows), int64(cols)); !ok || n != int64(len(data)) {
		return nil, newError(ErrInvalidMetadata, op, "len(data)", len(data), fmt.Sprintf("want rows*cols = %d*%d", rows, cols))
	}
	h := &HostMatrix[T]{data: data, rows: int64(rows), cols: int64(cols)}
	h.owner.label = fmt.Sprintf("host matrix %dx%d %s", rows, cols, DataTypeOf[T]())
	return h, nil
}

// Data returns the wrapped slice, row-major.
func (h *HostMatrix[T]) Data() []T {
	if h == nil {
		return nil
	}
	return h.data
}

// Rows returns the number of rows.
func (h *HostMatrix[T]) Rows() int {
	if h == nil {
		return 0
	}
	return int(h.rows)
}

// Cols returns the number of columns.
func (h *HostMatrix[T]) Cols() int {
	if h == nil {
		return 0
	}
	return int(h.cols)
}

// Row returns row i of the matrix (sharing memory).
func (h *HostMatrix[T]) Row(i int) []T {
	if h == nil || i < 0 || int64(i) >= h.rows {
		return nil
	}
	return h.data[int64(i)*h.cols : int64(i+1)*h.cols]
}

// Owner returns the matrix's owner, for retention and borrow checks.
func (h *HostMatrix[T]) Owner() *Owner {
	if h == nil {
		return nil
	}
	return &h.owner
}

// Close marks the slice as no longer lent: see Owner.Close.
func (h *HostMatrix[T]) Close() error {
	if h == nil {
		return nil
	}
	return h.owner.Close()
}

// View returns a read-only view of the matrix; ErrExpired after Close.
func (h *HostMatrix[T]) View() (View, error) {
	if h == nil {
		return View{}, nilTensor("HostMatrix.View")
	}
	return hostView[T](&h.owner, h.data, h.rows, h.cols, 2, "HostMatrix.View")
}

// ViewMut returns a writable view of the matrix; ErrExpired after Close.
func (h *HostMatrix[T]) ViewMut() (ViewMut, error) {
	if h == nil {
		return ViewMut{}, nilTensor("HostMatrix.ViewMut")
	}
	v, err := hostView[T](&h.owner, h.data, h.rows, h.cols, 2, "HostMatrix.ViewMut")
	return ViewMut{v}, err
}

// hostView builds the view of a dense row-major Go buffer directly: the
// adapters' constructors already checked what FromRawParts would.
func hostView[T DType](o *Owner, data []T, rows, cols int64, rank int, op string) (View, error) {
	if o.closed.Load() {
		return View{}, newError(ErrExpired, op, "owner", o.Label(), "the owner was closed")
	}
	dt := DataTypeOf[T]()
	v := View{
		gomem:  unsafe.Pointer(unsafe.SliceData(data)),
		device: HostDevice,
		dtype:  dt,
		ndim:   uint8(rank),
		owner:  o,
	}
	if rank == 1 {
		v.shape[0], v.strides[0] = rows, 1
	} else {
		v.shape[0], v.shape[1] = rows, cols
		v.strides[0], v.strides[1] = max(cols, 1), 1
	}
	if n := int64(len(data)); n > 0 {
		v.hi = n * dt.ElemSize()
	}
	if len(data) == 0 {
		v.gomem = nil
	}
	v.layout = v.computeLayout(int64(len(data)))
	return v, nil
}
