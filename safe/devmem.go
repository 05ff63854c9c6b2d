package safe

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
)

// liveDevice and livePinned count allocations not yet freed, for tests' leak
// checks.
var (
	liveDevice = live.New("safe device memory")
	livePinned = live.New("safe pinned memory")
)

// DeviceMatrix is a row-major matrix in device memory, allocated from cuVS's
// memory resource (cuvsRMMAlloc; the pool, when Load enabled it). It owns
// its memory: Close frees it, and refuses while a call or an index borrows
// it (an index built on it names itself in the error).
//
// It implements dlpack.Tensor and dlpack.TensorMut, so it can be passed to
// any safe-layer function taking tensors.
type DeviceMatrix[T dlpack.DType] struct {
	res        *Resources
	addr       uintptr // device memory (never Go's), as an integer: see cPtr
	rows, cols int64
	dev        dlpack.Device
	owner      dlpack.Owner
	mu         sync.Mutex
	freed      bool
	clean      runtime.Cleanup

	// The views of the whole matrix, made and checked once: View and
	// ViewMut, on every search's path, hand out copies.
	view    dlpack.View
	viewMut dlpack.ViewMut
}

// DeviceVector is a vector in device memory: a DeviceMatrix of one column
// whose views have rank 1.
type DeviceVector[T dlpack.DType] struct {
	m       *DeviceMatrix[T]
	view    dlpack.View // rank 1, made once
	viewMut dlpack.ViewMut
}

type deviceAlloc struct {
	res   *Resources
	addr  uintptr
	bytes uint64
	dev   int32
}

func freeDevice(a deviceAlloc) {
	unchargeMatrix(a.dev, a.bytes)
	_ = rmmFree("safe: freeing leaked device memory", a.res, cPtr(a.addr), a.bytes)
}

// cPtr turns the address of C or device memory back into a pointer, bit
// for bit, for a C call or a view. The types that own such memory
// (DeviceMatrix, PinnedMatrix) keep its address as an integer, not in a
// pointer field: they outlive the memory (Close frees it, the value
// stays), and a freed C address in a field the GC scans is a bad pointer
// once Go's heap grows over it (Go 1.26 places its heap anywhere below
// 2^46, where C's mappings lie too under some layouts, e.g. setarch -L or
// an unlimited stack): the runtime's "found bad pointer in Go heap".
func cPtr(a uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&a)) }

// rmmFree frees device memory on res's stream, or, when res was closed
// first, through a resources handle made for the purpose: the memory
// resource belongs to the device, not to the handle that allocated from it.
func rmmFree(op string, res *Resources, p unsafe.Pointer, bytes uint64) error {
	liveDevice.Dec()
	h, err := res.lock(op)
	if err != nil {
		tmp, terr := res.sibling() // on res's device
		if terr != nil {
			return err
		}
		defer tmp.Close()
		if h, err = tmp.lock(op); err != nil {
			return err
		}
		defer tmp.unlock()
	} else {
		defer res.unlock()
	}
	return wrap(op, generated.CuvsRMMFree(h, p, bytes))
}

// NewDeviceMatrix allocates an uninitialized rows×cols matrix on res's
// device. Copies and Close use res; if res is closed first, Close frees
// through a resources handle of its own.
func NewDeviceMatrix[T dlpack.DType](res *Resources, rows, cols int) (*DeviceMatrix[T], error) {
	return newDeviceMatrix[T]("safe.NewDeviceMatrix", res, rows, cols)
}

func newDeviceMatrix[T dlpack.DType](op string, res *Resources, rows, cols int) (*DeviceMatrix[T], error) {
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
	bytes := uint64(rows) * uint64(cols) * uint64(esz)
	id, err := res.askDeviceID(op)
	if err != nil {
		return nil, err
	}
	m := &DeviceMatrix[T]{res: res, rows: int64(rows), cols: int64(cols), dev: dlpack.Device{Type: dlpack.CUDA, ID: int32(id)}}
	if bytes > 0 {
		if err := chargeMatrix(op, int32(id), bytes); err != nil {
			return nil, err
		}
		h, err := res.lock(op)
		if err != nil {
			unchargeMatrix(int32(id), bytes)
			return nil, err
		}
		var p unsafe.Pointer
		err = generated.CuvsRMMAlloc(h, &p, bytes)
		res.unlock()
		if err != nil {
			unchargeMatrix(int32(id), bytes)
			return nil, wrap(op, err)
		}
		liveDevice.Inc()
		m.addr = uintptr(p)
		m.clean = runtime.AddCleanup(m, freeDevice, deviceAlloc{res, m.addr, bytes, int32(id)})
	}
	m.owner.SetLabel(fmt.Sprintf("DeviceMatrix[%s] %d×%d", dlpack.DataTypeOf[T](), rows, cols))
	if m.view, m.viewMut, err = m.wholeViews(2); err != nil {
		m.Close()
		return nil, wrap(op, err)
	}
	return m, nil
}

// wholeViews makes the views of the whole matrix (rank 1 for a vector), tied
// to its owner.
func (m *DeviceMatrix[T]) wholeViews(rank int) (dlpack.View, dlpack.ViewMut, error) {
	shape := []int64{m.rows, m.cols}[:rank]
	v, err := dlpack.FromRawParts(cPtr(m.addr), m.dev, shape, nil, dlpack.DataTypeOf[T]())
	if err != nil {
		return dlpack.View{}, dlpack.ViewMut{}, err
	}
	vm, err := dlpack.FromRawPartsMut(cPtr(m.addr), m.dev, shape, nil, dlpack.DataTypeOf[T]())
	if err != nil {
		return dlpack.View{}, dlpack.ViewMut{}, err
	}
	return v.WithOwner(&m.owner), vm.WithOwner(&m.owner), nil
}

// DeviceMatrixFrom allocates a rows×cols matrix and copies data (row-major,
// len rows*cols) into it.
func DeviceMatrixFrom[T dlpack.DType](res *Resources, data []T, rows, cols int) (*DeviceMatrix[T], error) {
	const op = "safe.DeviceMatrixFrom"
	if rows < 0 || cols < 1 || len(data) != rows*cols {
		return nil, argf(op, "data", "len %d does not hold %d×%d elements", len(data), rows, cols)
	}
	m, err := newDeviceMatrix[T](op, res, rows, cols)
	if err != nil {
		return nil, err
	}
	if err := m.CopyFromHost(res, data); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Rows returns the number of rows.
func (m *DeviceMatrix[T]) Rows() int {
	if m == nil {
		return 0
	}
	return int(m.rows)
}

// Cols returns the number of columns.
func (m *DeviceMatrix[T]) Cols() int {
	if m == nil {
		return 0
	}
	return int(m.cols)
}

// Device returns the device the memory is on.
func (m *DeviceMatrix[T]) Device() dlpack.Device {
	if m == nil {
		return dlpack.Device{}
	}
	return m.dev
}

// Owner returns the borrow state of the matrix's memory.
func (m *DeviceMatrix[T]) Owner() *dlpack.Owner {
	if m == nil {
		return nil
	}
	return &m.owner
}

// View returns a read-only view of the whole matrix.
func (m *DeviceMatrix[T]) View() (dlpack.View, error) {
	if m == nil {
		return dlpack.View{}, argf("safe.DeviceMatrix.View", "m", "nil *DeviceMatrix")
	}
	return m.view, nil
}

// ViewMut returns a writable view of the whole matrix.
func (m *DeviceMatrix[T]) ViewMut() (dlpack.ViewMut, error) {
	if m == nil {
		return dlpack.ViewMut{}, argf("safe.DeviceMatrix.ViewMut", "m", "nil *DeviceMatrix")
	}
	return m.viewMut, nil
}

// RowsView returns a read-only view of rows [start, end), sharing the
// matrix's memory and borrow state (no copy).
func (m *DeviceMatrix[T]) RowsView(start, end int) (dlpack.View, error) {
	if m == nil {
		return dlpack.View{}, argf("safe.DeviceMatrix.RowsView", "m", "nil *DeviceMatrix")
	}
	if start < 0 || end < start || int64(end) > m.rows {
		return dlpack.View{}, argf("safe.DeviceMatrix.RowsView", "rows", "[%d, %d) is not within [0, %d)", start, end, m.rows)
	}
	p := cPtr(m.addr)
	if p != nil {
		p = unsafe.Add(p, int64(start)*m.cols*dlpack.DataTypeOf[T]().ElemSize())
	}
	v, err := dlpack.FromRawParts(p, m.dev, []int64{int64(end - start), m.cols}, nil, dlpack.DataTypeOf[T]())
	if err != nil {
		return dlpack.View{}, err
	}
	return v.WithOwner(&m.owner), nil
}

// CopyFromHost copies src (row-major, Rows()*Cols() elements) into the
// matrix and waits for the copy to finish.
func (m *DeviceMatrix[T]) CopyFromHost(res *Resources, src []T) error {
	const op = "safe.DeviceMatrix.CopyFromHost"
	if m == nil {
		return argf(op, "m", "nil *DeviceMatrix")
	}
	if int64(len(src)) != m.rows*m.cols {
		return argf(op, "src", "len %d, the matrix holds %d×%d", len(src), m.rows, m.cols)
	}
	if len(src) == 0 {
		return nil
	}
	hv, err := dlpack.FromRawParts(unsafe.Pointer(unsafe.SliceData(src)), dlpack.HostDevice, []int64{m.rows, m.cols}, nil, dlpack.DataTypeOf[T]())
	if err != nil {
		return wrap(op, err)
	}
	dv, err := m.ViewMut()
	if err != nil {
		return wrap(op, err)
	}
	return copyViews(op, res, &hv, &dv)
}

// CopyToHost copies the matrix into dst (row-major, Rows()*Cols()
// elements) and waits for the copy to finish.
func (m *DeviceMatrix[T]) CopyToHost(res *Resources, dst []T) error {
	const op = "safe.DeviceMatrix.CopyToHost"
	if m == nil {
		return argf(op, "m", "nil *DeviceMatrix")
	}
	if int64(len(dst)) != m.rows*m.cols {
		return argf(op, "dst", "len %d, the matrix holds %d×%d", len(dst), m.rows, m.cols)
	}
	if len(dst) == 0 {
		return nil
	}
	hv, err := dlpack.FromRawPartsMut(unsafe.Pointer(unsafe.SliceData(dst)), dlpack.HostDevice, []int64{m.rows, m.cols}, nil, dlpack.DataTypeOf[T]())
	if err != nil {
		return wrap(op, err)
	}
	dv, err := m.View()
	if err != nil {
		return wrap(op, err)
	}
	return copyViews(op, res, &dv, &hv)
}

// ToHost copies the matrix into a new slice.
func (m *DeviceMatrix[T]) ToHost(res *Resources) ([]T, error) {
	if m == nil {
		return nil, argf("safe.DeviceMatrix.ToHost", "m", "nil *DeviceMatrix")
	}
	out := make([]T, m.rows*m.cols)
	return out, m.CopyToHost(res, out)
}

// CopyFrom copies any tensor of the same shape and element type (host or
// device, row-major or strided) into the matrix.
func (m *DeviceMatrix[T]) CopyFrom(res *Resources, src dlpack.Tensor) error {
	const op = "safe.DeviceMatrix.CopyFrom"
	if src == nil {
		return argf(op, "src", "nil")
	}
	sv, err := src.View()
	if err != nil {
		return argf(op, "src", "%w", err)
	}
	dv, err := m.ViewMut()
	if err != nil {
		return wrap(op, err)
	}
	return Copy(res, &sv, &dv)
}

// Copy copies src into dst (cuvsMatrixCopy): same shape and element type,
// any of host and device memory, any strides. It waits for the copy.
func Copy(res *Resources, src *dlpack.View, dst *dlpack.ViewMut) error {
	const op = "safe.Copy"
	if src.DType() != dst.DType() {
		return argf(op, "dst", "dtype %s, src is %s", dst.DType(), src.DType())
	}
	if src.NDim() != dst.NDim() || src.NDim() > 2 {
		return argf(op, "dst", "rank %d and %d: both must be the same, 1 or 2", src.NDim(), dst.NDim())
	}
	for i := 0; i < src.NDim(); i++ {
		if src.Dim(i) != dst.Dim(i) {
			return argf(op, "dst", "shape %v, src is %v", dst.Shape(), src.Shape())
		}
	}
	// cuvsMatrixCopy honours row strides only: columns must be contiguous.
	if n := src.NDim(); src.Dim(n-1) > 1 && src.Stride(n-1) != 1 {
		return argf(op, "src", "strides %v: the last dimension must be contiguous", src.Strides())
	}
	if n := dst.NDim(); dst.Dim(n-1) > 1 && dst.Stride(n-1) != 1 {
		return argf(op, "dst", "strides %v: the last dimension must be contiguous", dst.Strides())
	}
	return copyViews(op, res, src, dst)
}

func copyViews(op string, res *Resources, src *dlpack.View, dst *dlpack.ViewMut) error {
	c := dlpack.Begin(op)
	defer c.End()
	s, err := c.In(src)
	if err != nil {
		return wrap(op, err)
	}
	d, err := c.Out(dst)
	if err != nil {
		return wrap(op, err)
	}
	return copyBound(op, res, s, d)
}

// CopyBound copies between two tensors already bound to a call
// (cuvsMatrixCopy) and waits for the copy (cuvsStreamSync): Go memory is
// pinned only until its call ends.
func copyBound(op string, res *Resources, src, dst *generated.DLManagedTensor) error {
	h, err := res.lock(op)
	if err != nil {
		return err
	}
	defer res.unlock()
	if err := generated.CuvsMatrixCopy(h, src, dst); err != nil {
		return wrap(op, err)
	}
	return wrap(op, generated.CuvsStreamSync(h))
}

// Close frees the device memory. It refuses, with an error naming the
// borrower, while the matrix is borrowed by a call or retained by an index.
// Closing twice is harmless.
func (m *DeviceMatrix[T]) Close() error {
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
	unchargeMatrix(m.dev.ID, bytes)
	return rmmFree("safe.DeviceMatrix.Close", m.res, cPtr(m.addr), bytes)
}

// NewDeviceVector allocates an uninitialized vector of n elements.
func NewDeviceVector[T dlpack.DType](res *Resources, n int) (*DeviceVector[T], error) {
	m, err := newDeviceMatrix[T]("safe.NewDeviceVector", res, n, 1)
	if err != nil {
		return nil, err
	}
	return newDeviceVector(m)
}

func newDeviceVector[T dlpack.DType](m *DeviceMatrix[T]) (*DeviceVector[T], error) {
	view, viewMut, err := m.wholeViews(1)
	if err != nil {
		m.Close()
		return nil, err
	}
	return &DeviceVector[T]{m: m, view: view, viewMut: viewMut}, nil
}

// DeviceVectorFrom allocates a vector and copies data into it.
func DeviceVectorFrom[T dlpack.DType](res *Resources, data []T) (*DeviceVector[T], error) {
	m, err := DeviceMatrixFrom(res, data, len(data), 1)
	if err != nil {
		return nil, err
	}
	return newDeviceVector(m)
}

// Len returns the number of elements.
func (v *DeviceVector[T]) Len() int {
	if v == nil || v.m == nil {
		return 0
	}
	return v.m.Rows()
}

// Owner returns the borrow state of the vector's memory.
func (v *DeviceVector[T]) Owner() *dlpack.Owner {
	if v == nil || v.m == nil {
		return nil
	}
	return v.m.Owner()
}

// View returns a rank-1 read-only view.
func (v *DeviceVector[T]) View() (dlpack.View, error) {
	if v == nil {
		return dlpack.View{}, argf("safe.DeviceVector.View", "v", "nil *DeviceVector")
	}
	return v.view, nil
}

// ViewMut returns a rank-1 writable view.
func (v *DeviceVector[T]) ViewMut() (dlpack.ViewMut, error) {
	if v == nil {
		return dlpack.ViewMut{}, argf("safe.DeviceVector.ViewMut", "v", "nil *DeviceVector")
	}
	return v.viewMut, nil
}

// CopyFromHost copies src (Len() elements) into the vector.
func (v *DeviceVector[T]) CopyFromHost(res *Resources, src []T) error {
	if v == nil || v.m == nil {
		return argf("safe.DeviceVector.CopyFromHost", "v", "a zero or nil DeviceVector (make one with NewDeviceVector)")
	}
	return v.m.CopyFromHost(res, src)
}

// CopyToHost copies the vector into dst (Len() elements).
func (v *DeviceVector[T]) CopyToHost(res *Resources, dst []T) error {
	if v == nil || v.m == nil {
		return argf("safe.DeviceVector.CopyToHost", "v", "a zero or nil DeviceVector (make one with NewDeviceVector)")
	}
	return v.m.CopyToHost(res, dst)
}

// Close frees the memory (see DeviceMatrix.Close).
func (v *DeviceVector[T]) Close() error {
	if v == nil || v.m == nil {
		return nil
	}
	return v.m.Close()
}
