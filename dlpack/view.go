package dlpack

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
)

// MaxRank is the largest rank a view holds. Views keep their shape and
// strides inline so that making and binding one allocates nothing; cuVS uses
// ranks 1 to 3.
const MaxRank = 8

// Layout says how a view's elements sit in memory. RowMajor and ColMajor are
// flags: a view can be both (a vector, or a tensor with at most one extent
// above 1), and Strided (0) means neither. Extents of 1 never break
// contiguity, whatever their stride.
type Layout uint8

// Layouts.
const (
	Strided  Layout = 0      // neither row- nor column-major contiguous
	RowMajor Layout = 1 << 0 // C order: last index fastest, no gaps
	ColMajor Layout = 1 << 1 // Fortran order: first index fastest, no gaps
)

// IsRowMajor reports whether l includes RowMajor.
func (l Layout) IsRowMajor() bool { return l&RowMajor != 0 }

// IsColMajor reports whether l includes ColMajor.
func (l Layout) IsColMajor() bool { return l&ColMajor != 0 }

// IsContiguous reports whether the elements fill their span without gaps in
// row- or column-major order.
func (l Layout) IsContiguous() bool { return l != Strided }

// String names the layout: "strided", "row-major", "col-major" or
// "row-major|col-major".
func (l Layout) String() string {
	switch l {
	case Strided:
		return "strided"
	case RowMajor:
		return "row-major"
	case ColMajor:
		return "col-major"
	case RowMajor | ColMajor:
		return "row-major|col-major"
	}
	return fmt.Sprintf("layout(%d)", uint8(l))
}

// View is a read-only, non-owning description of a tensor: a data pointer, the
// device it lives on, the element type, the shape and the strides (in
// elements). It is what the C API reads as an input. A View is a plain value,
// valid (see Err) as long as:
//   - the Owner it was tied to (WithOwner) is not closed, and
//   - the Call it was bound to (Call.In) has not ended.
//
// After either, Err, Data and every binding report ErrExpired.
//
// A View holds its shape and strides inline (nothing to allocate), which
// makes it a large value: its accessors take a pointer, so that reading a
// field does not copy the whole View.
//
// The zero View is not a valid tensor; make one with FromRawParts,
// FromDLTensor, an adapter (HostVector, HostMatrix) or an Imported tensor.
type View struct {
	// The data pointer is kept in one of two fields. A CPU view's is in
	// gomem: that memory may be Go's, which the GC must see (and a call
	// pins). Any other device's memory (device, pinned, managed; or a
	// handle) is never Go memory, and its address is kept as an integer in
	// addr: a view outlives the memory it describes (an expired copy, an
	// owner's cached views after Close), and a freed C address held in a
	// pointer field is a bad pointer to the GC once Go's heap has grown
	// over it (Go 1.26 places its heap anywhere below 2^46, where C's
	// mappings also lie under some layouts): "found bad pointer in Go
	// heap". Use ptr and setPtr.
	gomem   unsafe.Pointer
	addr    uintptr
	device  Device
	dtype   DataType
	ndim    uint8
	layout  Layout
	lo, hi  int64 // the bytes touched: [data+lo, data+hi), lo <= 0
	shape   [MaxRank]int64
	strides [MaxRank]int64
	owner   *Owner
	call    *callState
	callGen uint64
}

// ViewMut is a writable View, for tensors the C API writes (outputs). Its
// constructors also refuse a layout in which two indices reach the same
// element, and a Call refuses it when it overlaps another view of the call.
// Owners lend it exclusively: see Owner.
type ViewMut struct{ v View }

// Tensor is implemented by values that can lend their memory for reading,
// the way Rust's AsDlTensor does: View returns a read-only view of the whole
// tensor. Implement it on your own buffer types with FromRawParts (and
// View.WithOwner, to have the buffer refuse to be freed while borrowed).
type Tensor interface {
	View() (View, error)
}

// TensorMut is implemented by values that can lend their memory for writing
// (Rust's AsDlTensorMut). The implementation promises that nothing else writes
// or reads the memory while the returned view is bound to a call; with an
// Owner attached, the package checks it.
type TensorMut interface {
	ViewMut() (ViewMut, error)
}

// FromRawParts makes a read-only view from raw tensor metadata, checking
// everything a C consumer would trip on, and saying which field is wrong.
// shape has one extent per dimension (rank 1 to MaxRank); strides is nil
// for a row-major contiguous tensor, or has one entry per dimension, in
// elements. shape and strides are copied. Every constructor of a view
// (FromRawParts, FromRawPartsMut, FromDLTensor, HostVector, HostMatrix,
// Import) checks:
//
//   - a known device type and a non-negative device id (ErrUnsupportedDevice,
//     ErrInvalidMetadata);
//   - a known type code, a width in whole bytes that is legal for the code,
//     at least one lane (ErrUnsupportedDType);
//   - rank 1 to MaxRank, non-negative extents, one stride per dimension
//     (ErrInvalidMetadata, ErrStridesRank);
//   - element count, byte size and memory span without int64 overflow, and a
//     span that does not wrap the address space;
//   - a non-nil data pointer unless the tensor is empty, aligned for its
//     element type;
//   - for a writable view, no two indices reaching the same element
//     (ErrAliased).
//
// # Safety contract
//
// The package cannot check what data points to. The caller promises that data
// points to initialized memory on device, laid out as shape, strides and dtype
// say, that stays valid and unwritten while the view is bound to a call or
// retained (attach an Owner to have that enforced), and, when data is Go
// memory, that it is a Go pointer to that memory (the call pins it).
func FromRawParts(data unsafe.Pointer, device Device, shape, strides []int64, dtype DataType) (View, error) {
	var v View
	if err := v.init("FromRawParts", data, device, shape, strides, dtype, false); err != nil {
		return View{}, err
	}
	return v, nil
}

// FromRawPartsMut is FromRawParts for a writable view. On top of FromRawParts'
// contract, the caller promises that nothing else reads or writes the memory
// while the view is bound to a call. Layouts in which two indices reach the
// same element (a zero stride, say) are refused with ErrAliased.
func FromRawPartsMut(data unsafe.Pointer, device Device, shape, strides []int64, dtype DataType) (ViewMut, error) {
	var m ViewMut
	if err := m.v.init("FromRawPartsMut", data, device, shape, strides, dtype, true); err != nil {
		return ViewMut{}, err
	}
	return m, nil
}

// FromDLTensor makes a read-only view of a DLTensor, checking it as
// FromRawParts does and folding its byte_offset into the data pointer (cuVS
// ignores byte_offset); a non-zero byte_offset on a device whose data is a
// handle rather than an address (OpenCL, Vulkan, Metal, ...) is refused. The shape and strides arrays are copied, so t and
// its arrays need not outlive the call; the data must, as for FromRawParts.
func FromDLTensor(t *generated.DLTensor) (View, error) {
	var v View
	if err := v.initDL("FromDLTensor", t, false); err != nil {
		return View{}, err
	}
	return v, nil
}

// FromDLTensorMut is FromDLTensor for a writable view (see FromRawPartsMut).
func FromDLTensorMut(t *generated.DLTensor) (ViewMut, error) {
	var m ViewMut
	if err := m.v.initDL("FromDLTensorMut", t, true); err != nil {
		return ViewMut{}, err
	}
	return m, nil
}

func (v *View) initDL(op string, t *generated.DLTensor, mut bool) error {
	if t == nil {
		return newError(ErrInvalidMetadata, op, "tensor", "nil", "no DLTensor")
	}
	n := t.Ndim
	if n < 1 || n > MaxRank {
		return rankError(op, int(n))
	}
	if t.Shape == nil {
		return newError(ErrInvalidMetadata, op, "shape", "nil", fmt.Sprintf("no shape array for rank %d", n))
	}
	shape := unsafe.Slice(t.Shape, n)
	var strides []int64
	if t.Strides != nil {
		strides = unsafe.Slice(t.Strides, n)
	}
	data := t.Data
	dev := Device{Type: DeviceType(t.Device.DeviceType), ID: t.Device.DeviceId}
	if off := t.ByteOffset; off != 0 && dev.Type.Known() {
		if !dev.Type.info().address {
			return newError(ErrInvalidMetadata, op, "byte_offset", off, fmt.Sprintf("cannot fold an offset into a %s handle", dev.Type))
		}
		if data == nil {
			return newError(ErrInvalidMetadata, op, "byte_offset", off, "offset from a nil data pointer")
		}
		if off > math.MaxInt64 || uintptr(data)+uintptr(off) < uintptr(data) {
			return newError(ErrInvalidMetadata, op, "byte_offset", off, "data+byte_offset overflows the address space")
		}
		data = unsafe.Add(data, off)
	}
	dt := DataType{Code: TypeCode(t.Dtype.Code), Bits: t.Dtype.Bits, Lanes: t.Dtype.Lanes}
	return v.init(op, data, dev, shape, strides, dt, mut)
}

func rankError(op string, n int) error {
	if n < 1 {
		return newError(ErrInvalidMetadata, op, "ndim", n, "rank must be at least 1")
	}
	return newError(ErrInvalidMetadata, op, "ndim", n, fmt.Sprintf("rank above MaxRank (%d)", MaxRank))
}

func checkDType(op string, dt DataType) error {
	ci := dt.Code.info()
	switch {
	case ci.name == "":
		return newError(ErrUnsupportedDType, op, "dtype.code", uint8(dt.Code), "not a DLPack type code")
	case dt.Bits == 0 || dt.Bits%8 != 0:
		return newError(ErrUnsupportedDType, op, "dtype.bits", dt.Bits, "width is not a positive multiple of 8")
	case dt.Lanes == 0:
		return newError(ErrUnsupportedDType, op, "dtype.lanes", dt.Lanes, "lanes must be at least 1")
	}
	if ci.bits == nil {
		return nil
	}
	for _, b := range ci.bits {
		if b == dt.Bits {
			return nil
		}
	}
	return newError(ErrUnsupportedDType, op, "dtype.bits", dt.Bits, fmt.Sprintf("%s has widths %v", ci.name, ci.bits))
}

// mul returns a*b for non-negative a and b, and false when it overflows int64.
func mul(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return int64(lo), hi == 0 && lo <= math.MaxInt64
}

// add returns a+b for non-negative a and b, and false when it overflows int64.
func add(a, b int64) (int64, bool) {
	s := a + b
	return s, s >= a
}

func (v *View) init(op string, data unsafe.Pointer, dev Device, shape, strides []int64, dt DataType, mut bool) error {
	di := dev.Type.info()
	if di.name == "" {
		return newError(ErrUnsupportedDevice, op, "device.device_type", int32(dev.Type), "not a DLPack device type")
	}
	if dev.ID < 0 {
		return newError(ErrInvalidMetadata, op, "device.device_id", dev.ID, "negative device ordinal")
	}
	if err := checkDType(op, dt); err != nil {
		return err
	}
	n := len(shape)
	if n < 1 || n > MaxRank {
		return rankError(op, n)
	}
	if strides != nil && len(strides) != n {
		return newError(ErrStridesRank, op, "strides", fmt.Sprintf("%d entries", len(strides)), fmt.Sprintf("rank is %d", n))
	}
	elem := dt.ElemSize()
	count := int64(1)
	for i, e := range shape {
		if e < 0 {
			return newError(ErrInvalidMetadata, op, fmt.Sprintf("shape[%d]", i), e, "negative extent")
		}
		var ok bool
		if count, ok = mul(count, e); !ok {
			return newError(ErrInvalidMetadata, op, "shape", append([]int64(nil), shape...), "element count overflows int64")
		}
	}
	if _, ok := mul(count, elem); !ok {
		return newError(ErrInvalidMetadata, op, "shape", append([]int64(nil), shape...), fmt.Sprintf("byte size (%d elements of %d bytes) overflows int64", count, elem))
	}
	v.ndim = uint8(n)
	copy(v.shape[:], shape)
	if strides == nil {
		s := int64(1)
		for i := n - 1; i >= 0; i-- {
			v.strides[i] = s
			var ok bool
			if s, ok = mul(s, max(shape[i], 1)); !ok {
				return newError(ErrInvalidMetadata, op, "shape", append([]int64(nil), shape...), "row-major strides overflow int64")
			}
		}
	} else {
		copy(v.strides[:], strides)
	}
	// The span: the bytes any index can reach, relative to data.
	var neg, pos int64
	if count > 0 {
		for i := 0; i < n; i++ {
			st := v.strides[i]
			if shape[i] <= 1 {
				continue
			}
			if st == math.MinInt64 {
				return newError(ErrInvalidMetadata, op, fmt.Sprintf("strides[%d]", i), st, "memory span overflows int64")
			}
			d, ok1 := mul(shape[i]-1, absInt(st))
			d, ok2 := mul(d, elem)
			var ok3 bool
			if st < 0 {
				neg, ok3 = add(neg, d)
			} else {
				pos, ok3 = add(pos, d)
			}
			if !ok1 || !ok2 || !ok3 {
				return newError(ErrInvalidMetadata, op, fmt.Sprintf("strides[%d]", i), st, "memory span overflows int64")
			}
		}
		var ok bool
		if pos, ok = add(pos, elem); !ok {
			return newError(ErrInvalidMetadata, op, "strides", append([]int64(nil), v.strides[:n]...), "memory span overflows int64")
		}
	}
	switch {
	case data == nil && count > 0:
		return newError(ErrInvalidMetadata, op, "data", "nil", fmt.Sprintf("nil pointer for %d elements", count))
	case data != nil && di.address:
		addr := uintptr(data)
		if div := dt.Code.info().alignDiv; div != 0 {
			if al := uintptr(dt.Bits / 8 / div); al > 1 && addr%al != 0 {
				return newError(ErrInvalidMetadata, op, "data", fmt.Sprintf("%#x", addr), fmt.Sprintf("not aligned to %d bytes for %s", al, dt))
			}
		}
		if count > 0 && (addr < uintptr(neg) || addr+uintptr(pos) < addr) {
			return newError(ErrInvalidMetadata, op, "data", fmt.Sprintf("%#x", addr), fmt.Sprintf("span [-%d, %d) bytes wraps around the address space", neg, pos))
		}
	}
	if mut && count > 0 {
		if err := v.checkSelfOverlap(op, elem); err != nil {
			return err
		}
	}
	v.setPtr(data, dev)
	v.device, v.dtype = dev, dt
	v.lo, v.hi = -neg, pos
	if count == 0 {
		v.lo, v.hi = 0, 0
	}
	v.layout = v.computeLayout(count)
	return nil
}

// checkSelfOverlap refuses a writable layout in which two indices may reach
// the same bytes. Dimensions are taken by increasing |stride|; each must step
// past everything the smaller ones reach. That is sufficient, not necessary,
// and accepts every layout NumPy, PyTorch or CuPy produce for a fresh array.
func (v *View) checkSelfOverlap(op string, elem int64) error {
	var order [MaxRank]int
	k := 0
	for i := 0; i < int(v.ndim); i++ {
		if v.shape[i] <= 1 {
			continue
		}
		j := k
		for ; j > 0 && absInt(v.strides[order[j-1]]) > absInt(v.strides[i]); j-- {
			order[j] = order[j-1]
		}
		order[j] = i
		k++
	}
	reach := elem
	for _, i := range order[:k] {
		step := absInt(v.strides[i]) * elem // cannot overflow: the span fitted
		if step < reach {
			return newError(ErrAliased, op, fmt.Sprintf("strides[%d]", i), v.strides[i], "writable view reaches the same element twice")
		}
		reach += step * (v.shape[i] - 1)
	}
	return nil
}

func absInt(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func (v *View) computeLayout(count int64) Layout {
	n := int(v.ndim)
	if count <= 1 {
		return RowMajor | ColMajor
	}
	l := Strided
	want := int64(1)
	row := true
	for i := n - 1; i >= 0 && row; i-- {
		row = v.shape[i] == 1 || v.strides[i] == want
		want *= v.shape[i]
	}
	if row {
		l |= RowMajor
	}
	want = 1
	col := true
	for i := 0; i < n && col; i++ {
		col = v.shape[i] == 1 || v.strides[i] == want
		want *= v.shape[i]
	}
	if col {
		l |= ColMajor
	}
	return l
}

// setPtr sets the data pointer of a view of memory on dev (see View).
func (v *View) setPtr(p unsafe.Pointer, dev Device) {
	if dev.Type == CPU {
		v.gomem, v.addr = p, 0
		return
	}
	v.gomem, v.addr = nil, uintptr(p)
}

// ptr returns the data pointer (see View).
func (v *View) ptr() unsafe.Pointer {
	if v.gomem != nil {
		return v.gomem
	}
	return cPtr(v.addr)
}

// cPtr turns the address of memory that is not Go's back into a pointer,
// bit for bit, for C or unsafe.Slice. The memory must still be allocated
// (a view checks its owner first): only then is the address not in Go's
// heap.
func cPtr(a uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&a)) }

// check reports why v cannot be used now, or nil.
func (v *View) check(op string) error {
	if v.ndim == 0 {
		return newError(ErrInvalidMetadata, op, "view", "zero View", "not made by a constructor")
	}
	if v.call != nil && v.call.gen.Load() != v.callGen {
		return newError(ErrExpired, op, "view", v.String(), "its call has ended")
	}
	if v.owner != nil && v.owner.closed.Load() {
		return newError(ErrExpired, op, "owner", v.owner.Label(), "the owner was closed")
	}
	return nil
}

// Err reports whether the view can still be used: nil, or an error wrapping
// ErrExpired (its call ended or its owner was closed) or ErrInvalidMetadata
// (the zero View).
func (v *View) Err() error { return v.check("View") }

// Data returns the data pointer, with any byte offset folded in, or an error
// when the view has expired.
func (v *View) Data() (unsafe.Pointer, error) {
	if err := v.check("View.Data"); err != nil {
		return nil, err
	}
	return v.ptr(), nil
}

// Device returns where the memory lives.
func (v *View) Device() Device { return v.device }

// DType returns the element type.
func (v *View) DType() DataType { return v.dtype }

// NDim returns the rank.
func (v *View) NDim() int { return int(v.ndim) }

// Dim returns the extent of dimension i; it panics when i is out of range.
func (v *View) Dim(i int) int64 { return v.shape[:v.ndim][i] }

// Stride returns the stride of dimension i, in elements; it panics when i is
// out of range. Strides are always explicit: a view made without strides has
// the row-major ones.
func (v *View) Stride(i int) int64 { return v.strides[:v.ndim][i] }

// Shape returns a copy of the extents.
func (v *View) Shape() []int64 { return append([]int64(nil), v.shape[:v.ndim]...) }

// Strides returns a copy of the strides, in elements.
func (v *View) Strides() []int64 { return append([]int64(nil), v.strides[:v.ndim]...) }

// Layout says whether the view is row-major, column-major (or both)
// contiguous, or strided.
func (v *View) Layout() Layout { return v.layout }

// Len returns the number of elements.
func (v *View) Len() int64 {
	n := int64(1)
	for _, e := range v.shape[:v.ndim] {
		n *= e
	}
	return n
}

// Bytes returns the size of the elements in bytes, Len()*DType().ElemSize().
// For a strided view the memory it spans can be larger.
func (v *View) Bytes() int64 { return v.Len() * v.dtype.ElemSize() }

// Owner returns the owner the view is tied to, or nil.
func (v *View) Owner() *Owner { return v.owner }

// WithOwner returns v tied to o: binding it to a call borrows o, and the view
// expires when o is closed. It replaces any owner v had; nil unties it. A
// view of memory that something else owns, such as a tensor cuVS hands out
// from an index, can thus be tied to that index's owner.
func (v View) WithOwner(o *Owner) View {
	v.owner = o
	return v
}

// View returns v itself, so that a View is a Tensor. The error is v.Err().
func (v View) View() (View, error) { return v, v.Err() }

// String describes the view, e.g. "float32 cuda:0 [100 128] row-major".
func (v View) String() string {
	if v.ndim == 0 {
		return "View{}"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %v", v.dtype, v.device, v.shape[:v.ndim])
	if v.layout == Strided {
		fmt.Fprintf(&b, " strides %v", v.strides[:v.ndim])
	} else {
		b.WriteString(" " + v.layout.String())
	}
	return b.String()
}

// View returns the read-only view of the same memory, so that a ViewMut is
// also a Tensor.
func (m ViewMut) View() (View, error) { return m.v, m.v.Err() }

// ViewMut returns m itself, so that a ViewMut is a TensorMut.
func (m ViewMut) ViewMut() (ViewMut, error) { return m, m.v.Err() }

// Err is View.Err.
func (m *ViewMut) Err() error { return m.v.check("ViewMut") }

// Data is View.Data.
func (m *ViewMut) Data() (unsafe.Pointer, error) {
	if err := m.v.check("ViewMut.Data"); err != nil {
		return nil, err
	}
	return m.v.ptr(), nil
}

// Device is View.Device.
func (m *ViewMut) Device() Device { return m.v.device }

// DType is View.DType.
func (m *ViewMut) DType() DataType { return m.v.dtype }

// NDim is View.NDim.
func (m *ViewMut) NDim() int { return int(m.v.ndim) }

// Dim is View.Dim.
func (m *ViewMut) Dim(i int) int64 { return m.v.Dim(i) }

// Stride is View.Stride.
func (m *ViewMut) Stride(i int) int64 { return m.v.Stride(i) }

// Shape is View.Shape.
func (m *ViewMut) Shape() []int64 { return m.v.Shape() }

// Strides is View.Strides.
func (m *ViewMut) Strides() []int64 { return m.v.Strides() }

// Layout is View.Layout.
func (m *ViewMut) Layout() Layout { return m.v.layout }

// Len is View.Len.
func (m *ViewMut) Len() int64 { return m.v.Len() }

// Bytes is View.Bytes.
func (m *ViewMut) Bytes() int64 { return m.v.Bytes() }

// Owner is View.Owner.
func (m *ViewMut) Owner() *Owner { return m.v.owner }

// WithOwner is View.WithOwner.
func (m ViewMut) WithOwner(o *Owner) ViewMut {
	m.v.owner = o
	return m
}

// String is View.String, marked writable.
func (m ViewMut) String() string { return m.v.String() + " (mut)" }

// HostSlice returns the elements of a contiguous, host-accessible view as a Go
// slice over the same memory (no copy), in memory order. It fails when the
// view expired, is not on a host-accessible device, does not hold T, or is
// strided. The slice is valid as long as the memory is; the package cannot
// keep it from being written through.
func HostSlice[T DType](v View) ([]T, error) {
	if err := v.check("HostSlice"); err != nil {
		return nil, err
	}
	return hostSlice[T](&v, "HostSlice")
}

// HostSliceMut is HostSlice for a writable view.
func HostSliceMut[T DType](m ViewMut) ([]T, error) {
	if err := m.v.check("HostSliceMut"); err != nil {
		return nil, err
	}
	return hostSlice[T](&m.v, "HostSliceMut")
}

func hostSlice[T DType](v *View, op string) ([]T, error) {
	if !v.device.Type.HostAccessible() {
		return nil, newError(ErrUnsupportedDevice, op, "device", v.device, "memory is not host-accessible")
	}
	if want := DataTypeOf[T](); v.dtype != want {
		return nil, newError(ErrUnsupportedDType, op, "dtype", v.dtype, "want "+want.String())
	}
	if v.layout == Strided {
		return nil, newError(ErrInvalidMetadata, op, "strides", v.strides[:v.ndim], "not contiguous")
	}
	return unsafe.Slice((*T)(v.ptr()), v.Len()), nil
}
