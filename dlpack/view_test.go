package dlpack_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/dlpacktest"
	"github.com/x448/float16"
)

// fakePtr turns an address into a pointer that is never dereferenced, as a
// device pointer is on the host. Addresses used are outside the Go heap.
func fakePtr(addr uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }

// fakeBase is an address that no Go allocation uses, standing for device memory.
const fakeBase = 0x7e00_0000_0000

var cuda0 = dlpack.Device{Type: dlpack.CUDA, ID: 0}

type rawParts struct {
	data    unsafe.Pointer
	device  dlpack.Device
	shape   []int64
	strides []int64
	dtype   dlpack.DataType
}

func good() rawParts {
	return rawParts{fakePtr(fakeBase), cuda0, []int64{3, 4}, nil, dlpack.Float32}
}

func TestFromRawPartsRejects(t *testing.T) {
	cases := []struct {
		name   string
		mod    func(p *rawParts)
		kind   error
		field  string
		value  string // must appear in the message
		mutOnl bool   // only FromRawPartsMut refuses it
	}{
		{"device type 0", func(p *rawParts) { p.device.Type = 0 }, dlpack.ErrUnsupportedDevice, "device.device_type", "= 0", false},
		{"device type 5 (a gap)", func(p *rawParts) { p.device.Type = 5 }, dlpack.ErrUnsupportedDevice, "device.device_type", "= 5", false},
		{"device type 99", func(p *rawParts) { p.device.Type = 99 }, dlpack.ErrUnsupportedDevice, "device.device_type", "= 99", false},
		{"device type -1", func(p *rawParts) { p.device.Type = -1 }, dlpack.ErrUnsupportedDevice, "device.device_type", "= -1", false},
		{"negative device id", func(p *rawParts) { p.device.ID = -2 }, dlpack.ErrInvalidMetadata, "device.device_id", "= -2", false},
		{"type code 7", func(p *rawParts) { p.dtype.Code = 7 }, dlpack.ErrUnsupportedDType, "dtype.code", "= 7", false},
		{"zero bits", func(p *rawParts) { p.dtype.Bits = 0 }, dlpack.ErrUnsupportedDType, "dtype.bits", "= 0", false},
		{"12 bits", func(p *rawParts) { p.dtype.Bits = 12 }, dlpack.ErrUnsupportedDType, "dtype.bits", "= 12", false},
		{"4 bits", func(p *rawParts) { p.dtype = dlpack.DataType{Code: dlpack.Int, Bits: 4, Lanes: 1} }, dlpack.ErrUnsupportedDType, "dtype.bits", "= 4", false},
		{"float24", func(p *rawParts) { p.dtype.Bits = 24 }, dlpack.ErrUnsupportedDType, "dtype.bits", "= 24", false},
		{"bool16", func(p *rawParts) { p.dtype = dlpack.DataType{Code: dlpack.Bool, Bits: 16, Lanes: 1} }, dlpack.ErrUnsupportedDType, "dtype.bits", "= 16", false},
		{"zero lanes", func(p *rawParts) { p.dtype.Lanes = 0 }, dlpack.ErrUnsupportedDType, "dtype.lanes", "= 0", false},
		{"rank 0", func(p *rawParts) { p.shape = nil }, dlpack.ErrInvalidMetadata, "ndim", "= 0", false},
		{"rank 9", func(p *rawParts) { p.shape = make([]int64, 9) }, dlpack.ErrInvalidMetadata, "ndim", "= 9", false},
		{"strides too short", func(p *rawParts) { p.strides = []int64{1} }, dlpack.ErrStridesRank, "strides", "1 entries", false},
		{"strides too long", func(p *rawParts) { p.strides = []int64{4, 1, 1} }, dlpack.ErrStridesRank, "strides", "3 entries", false},
		{"empty non-nil strides", func(p *rawParts) { p.strides = []int64{} }, dlpack.ErrStridesRank, "strides", "0 entries", false},
		{"negative extent", func(p *rawParts) { p.shape = []int64{3, -4} }, dlpack.ErrInvalidMetadata, "shape[1]", "= -4", false},
		{"element count overflow", func(p *rawParts) { p.shape = []int64{1 << 32, 1 << 32} }, dlpack.ErrInvalidMetadata, "shape", "4294967296", false},
		{"byte size overflow", func(p *rawParts) { p.shape = []int64{1 << 31, 1 << 31} }, dlpack.ErrInvalidMetadata, "shape", "overflows", false},
		{"row-major strides overflow", func(p *rawParts) { p.shape = []int64{0, 1 << 40, 1 << 40} }, dlpack.ErrInvalidMetadata, "shape", "strides overflow", false},
		{"span overflow", func(p *rawParts) { p.strides = []int64{1 << 62, 1} }, dlpack.ErrInvalidMetadata, "strides[0]", "4611686018427387904", false},
		{"min int64 stride", func(p *rawParts) { p.strides = []int64{math.MinInt64, 1} }, dlpack.ErrInvalidMetadata, "strides[0]", "-9223372036854775808", false},
		{"nil data", func(p *rawParts) { p.data = nil }, dlpack.ErrInvalidMetadata, "data", "= nil", false},
		{"misaligned float32", func(p *rawParts) { p.data = fakePtr(fakeBase + 2) }, dlpack.ErrInvalidMetadata, "data", "0x7e0000000002", false},
		{"misaligned complex128", func(p *rawParts) {
			p.data, p.dtype = fakePtr(fakeBase+4), dlpack.DataType{Code: dlpack.Complex, Bits: 128, Lanes: 1}
		}, dlpack.ErrInvalidMetadata, "data", "aligned to 8", false},
		{"span below address 0", func(p *rawParts) { p.data, p.strides = fakePtr(0x1000), []int64{-1 << 20, 1} }, dlpack.ErrInvalidMetadata, "data", "wraps", false},
		{"span past the top", func(p *rawParts) { p.data = fakePtr(math.MaxUint64 - 15) }, dlpack.ErrInvalidMetadata, "data", "wraps", false},
		{"zero stride, writable", func(p *rawParts) { p.strides = []int64{0, 1} }, dlpack.ErrAliased, "strides[0]", "= 0", true},
		{"rows overlap, writable", func(p *rawParts) { p.strides = []int64{2, 1} }, dlpack.ErrAliased, "strides[0]", "= 2", true},
		{"negative overlap, writable", func(p *rawParts) { p.strides = []int64{-1, -1} }, dlpack.ErrAliased, "strides", "= -1", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := good()
			tc.mod(&p)
			_, errRO := dlpack.FromRawParts(p.data, p.device, p.shape, p.strides, p.dtype)
			_, errRW := dlpack.FromRawPartsMut(p.data, p.device, p.shape, p.strides, p.dtype)
			if tc.mutOnl {
				if errRO != nil {
					t.Fatalf("FromRawParts: %v, want success", errRO)
				}
			} else {
				checkErr(t, errRO, tc.kind, tc.field, tc.value)
			}
			checkErr(t, errRW, tc.kind, tc.field, tc.value)
		})
	}
}

func checkErr(t *testing.T, err, kind error, field, value string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", kind)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("error %q is not %v", err, kind)
	}
	if !errors.Is(err, dlpack.ErrInvalidArgument) {
		t.Errorf("error %q is not dlpack.ErrInvalidArgument", err)
	}
	var e *dlpack.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %q is not a *dlpack.Error", err)
	}
	if !strings.HasPrefix(e.Field, field) {
		t.Errorf("field %q, want %q (error %q)", e.Field, field, err)
	}
	if !strings.Contains(err.Error(), value) {
		t.Errorf("error %q does not name the value %q", err, value)
	}
}

func TestFromRawPartsLayouts(t *testing.T) {
	base := fakePtr(fakeBase)
	cases := []struct {
		name        string
		shape       []int64
		strides     []int64
		layout      dlpack.Layout
		wantStrides []int64
		mutOK       bool
	}{
		{"row-major, nil strides", []int64{3, 4}, nil, dlpack.RowMajor, []int64{4, 1}, true},
		{"row-major, explicit", []int64{3, 4}, []int64{4, 1}, dlpack.RowMajor, []int64{4, 1}, true},
		{"col-major", []int64{3, 4}, []int64{1, 3}, dlpack.ColMajor, []int64{1, 3}, true},
		{"strided rows", []int64{3, 4}, []int64{8, 1}, dlpack.Strided, []int64{8, 1}, true},
		{"transposed strided", []int64{3, 4}, []int64{2, 8}, dlpack.Strided, []int64{2, 8}, true},
		{"vector", []int64{7}, nil, dlpack.RowMajor | dlpack.ColMajor, []int64{1}, true},
		{"strided vector", []int64{7}, []int64{3}, dlpack.Strided, []int64{3}, true},
		{"column vector, odd stride on extent 1", []int64{5, 1}, []int64{1, 99}, dlpack.RowMajor | dlpack.ColMajor, []int64{1, 99}, true},
		{"row of a col-major matrix", []int64{1, 4}, []int64{1, 3}, dlpack.Strided, []int64{1, 3}, true},
		{"single element", []int64{1, 1, 1}, []int64{0, 0, 0}, dlpack.RowMajor | dlpack.ColMajor, []int64{0, 0, 0}, true},
		{"empty", []int64{0, 4}, nil, dlpack.RowMajor | dlpack.ColMajor, []int64{4, 1}, true},
		{"broadcast (zero stride)", []int64{3, 4}, []int64{0, 1}, dlpack.Strided, []int64{0, 1}, false},
		{"negative strides", []int64{3, 4}, []int64{-4, -1}, dlpack.Strided, []int64{-4, -1}, true},
		{"rank 8", []int64{1, 2, 1, 2, 1, 2, 1, 2}, nil, dlpack.RowMajor, []int64{16, 8, 8, 4, 4, 2, 2, 1}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := base
			if tc.strides != nil && tc.strides[0] < 0 {
				data = fakePtr(fakeBase + 4*11) // the last element: span reaches back to base
			}
			v, err := dlpack.FromRawParts(data, cuda0, tc.shape, tc.strides, dlpack.Float32)
			if err != nil {
				t.Fatal(err)
			}
			if v.Layout() != tc.layout {
				t.Errorf("layout %v, want %v", v.Layout(), tc.layout)
			}
			if fmt.Sprint(v.Strides()) != fmt.Sprint(tc.wantStrides) {
				t.Errorf("strides %v, want %v", v.Strides(), tc.wantStrides)
			}
			if fmt.Sprint(v.Shape()) != fmt.Sprint(tc.shape) || v.NDim() != len(tc.shape) {
				t.Errorf("shape %v (ndim %d), want %v", v.Shape(), v.NDim(), tc.shape)
			}
			var n int64 = 1
			for _, e := range tc.shape {
				n *= e
			}
			if v.Len() != n || v.Bytes() != 4*n {
				t.Errorf("Len %d Bytes %d, want %d, %d", v.Len(), v.Bytes(), n, 4*n)
			}
			if p, err := v.Data(); err != nil || p != data {
				t.Errorf("Data = %p, %v; want %p", p, err, data)
			}
			if v.Device() != cuda0 || v.DType() != dlpack.Float32 {
				t.Errorf("device %v dtype %v", v.Device(), v.DType())
			}
			_, err = dlpack.FromRawPartsMut(data, cuda0, tc.shape, tc.strides, dlpack.Float32)
			if (err == nil) != tc.mutOK {
				t.Errorf("FromRawPartsMut: %v, want ok=%v", err, tc.mutOK)
			}
		})
	}
}

func TestEmptyTensorMayHaveNilData(t *testing.T) {
	for _, shape := range [][]int64{{0}, {3, 0}, {0, 1 << 40}} {
		v, err := dlpack.FromRawParts(nil, dlpack.HostDevice, shape, nil, dlpack.Float64)
		if err != nil {
			t.Fatalf("shape %v: %v", shape, err)
		}
		if v.Len() != 0 {
			t.Errorf("Len %d", v.Len())
		}
	}
}

func TestZeroView(t *testing.T) {
	var v dlpack.View
	if err := v.Err(); !errors.Is(err, dlpack.ErrInvalidMetadata) {
		t.Errorf("zero View Err = %v", err)
	}
	c := dlpack.Begin("zero")
	defer c.End()
	if _, err := c.In(&v); !errors.Is(err, dlpack.ErrInvalidMetadata) {
		t.Errorf("binding the zero View: %v", err)
	}
	var m dlpack.ViewMut
	if _, err := c.Out(&m); !errors.Is(err, dlpack.ErrInvalidMetadata) {
		t.Errorf("binding the zero ViewMut: %v", err)
	}
	if v.String() != "View{}" {
		t.Errorf("String %q", v.String())
	}
}

func TestFromDLTensor(t *testing.T) {
	shape := dlpacktest.Malloc(16)
	defer dlpacktest.Release(shape)
	sh := unsafe.Slice((*int64)(shape), 2)
	sh[0], sh[1] = 2, 3
	data := dlpacktest.Malloc(64)
	defer dlpacktest.Release(data)
	mk := func() *generated.DLTensor {
		return &generated.DLTensor{
			Data:   data,
			Device: generated.DLDevice{DeviceType: generated.DLDeviceType_kDLCPU},
			Ndim:   2,
			Dtype:  generated.DLDataType{Code: uint8(generated.DLDataTypeCode_kDLFloat), Bits: 32, Lanes: 1},
			Shape:  (*int64)(shape),
		}
	}
	dt := mk()
	dt.ByteOffset = 8
	v, err := dlpack.FromDLTensor(dt)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := v.Data(); p != unsafe.Add(data, 8) {
		t.Errorf("byte_offset not folded: %p, base %p", p, data)
	}
	if v.Layout() != dlpack.RowMajor || v.Dim(0) != 2 || v.Dim(1) != 3 {
		t.Errorf("view %v", v)
	}
	sh[1] = 99 // the view copied the shape
	if v.Dim(1) != 3 {
		t.Errorf("shape not copied")
	}
	sh[1] = 3

	bad := []struct {
		name  string
		mod   func(*generated.DLTensor) *generated.DLTensor
		kind  error
		field string
	}{
		{"nil tensor", func(*generated.DLTensor) *generated.DLTensor { return nil }, dlpack.ErrInvalidMetadata, "tensor"},
		{"ndim -1", func(d *generated.DLTensor) *generated.DLTensor { d.Ndim = -1; return d }, dlpack.ErrInvalidMetadata, "ndim"},
		{"ndim 0", func(d *generated.DLTensor) *generated.DLTensor { d.Ndim = 0; return d }, dlpack.ErrInvalidMetadata, "ndim"},
		{"ndim 40", func(d *generated.DLTensor) *generated.DLTensor { d.Ndim = 40; return d }, dlpack.ErrInvalidMetadata, "ndim"},
		{"nil shape", func(d *generated.DLTensor) *generated.DLTensor { d.Shape = nil; return d }, dlpack.ErrInvalidMetadata, "shape"},
		{"offset from nil", func(d *generated.DLTensor) *generated.DLTensor { d.Data, d.ByteOffset = nil, 8; return d }, dlpack.ErrInvalidMetadata, "byte_offset"},
		{"huge offset", func(d *generated.DLTensor) *generated.DLTensor { d.ByteOffset = math.MaxUint64 - 4; return d }, dlpack.ErrInvalidMetadata, "byte_offset"},
		{"misaligned offset", func(d *generated.DLTensor) *generated.DLTensor { d.ByteOffset = 2; return d }, dlpack.ErrInvalidMetadata, "data"},
		{"unknown device", func(d *generated.DLTensor) *generated.DLTensor { d.Device.DeviceType = 6; return d }, dlpack.ErrUnsupportedDevice, "device.device_type"},
		{"offset into a handle", func(d *generated.DLTensor) *generated.DLTensor {
			d.Device.DeviceType, d.ByteOffset = generated.DLDeviceType_kDLOpenCL, 16
			return d
		}, dlpack.ErrInvalidMetadata, "byte_offset"},
		{"offset on an unknown device", func(d *generated.DLTensor) *generated.DLTensor { d.Device.DeviceType, d.ByteOffset = 99, 4; return d }, dlpack.ErrUnsupportedDevice, "device.device_type"},
		{"unknown code", func(d *generated.DLTensor) *generated.DLTensor { d.Dtype.Code = 200; return d }, dlpack.ErrUnsupportedDType, "dtype.code"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dlpack.FromDLTensor(tc.mod(mk()))
			checkErr(t, err, tc.kind, tc.field, "")
			_, err = dlpack.FromDLTensorMut(tc.mod(mk()))
			checkErr(t, err, tc.kind, tc.field, "")
		})
	}
}

func TestDataTypes(t *testing.T) {
	cases := []struct {
		got  dlpack.DataType
		want dlpack.DataType
		name string
	}{
		{dlpack.DataTypeOf[float32](), dlpack.DataType{Code: dlpack.Float, Bits: 32, Lanes: 1}, "float32"},
		{dlpack.DataTypeOf[float64](), dlpack.DataType{Code: dlpack.Float, Bits: 64, Lanes: 1}, "float64"},
		{dlpack.DataTypeOf[float16.Float16](), dlpack.DataType{Code: dlpack.Float, Bits: 16, Lanes: 1}, "float16"},
		{dlpack.DataTypeOf[int8](), dlpack.DataType{Code: dlpack.Int, Bits: 8, Lanes: 1}, "int8"},
		{dlpack.DataTypeOf[int16](), dlpack.DataType{Code: dlpack.Int, Bits: 16, Lanes: 1}, "int16"},
		{dlpack.DataTypeOf[int32](), dlpack.DataType{Code: dlpack.Int, Bits: 32, Lanes: 1}, "int32"},
		{dlpack.DataTypeOf[int64](), dlpack.DataType{Code: dlpack.Int, Bits: 64, Lanes: 1}, "int64"},
		{dlpack.DataTypeOf[uint8](), dlpack.DataType{Code: dlpack.UInt, Bits: 8, Lanes: 1}, "uint8"},
		{dlpack.DataTypeOf[uint16](), dlpack.DataType{Code: dlpack.UInt, Bits: 16, Lanes: 1}, "uint16"},
		{dlpack.DataTypeOf[uint32](), dlpack.DataType{Code: dlpack.UInt, Bits: 32, Lanes: 1}, "uint32"},
		{dlpack.DataTypeOf[uint64](), dlpack.DataType{Code: dlpack.UInt, Bits: 64, Lanes: 1}, "uint64"},
		{dlpack.DataType{Code: dlpack.Bfloat, Bits: 16, Lanes: 1}, dlpack.DataType{Code: 4, Bits: 16, Lanes: 1}, "bfloat16"},
		{dlpack.DataType{Code: dlpack.Float, Bits: 32, Lanes: 4}, dlpack.DataType{Code: 2, Bits: 32, Lanes: 4}, "float32x4"},
		{dlpack.DataType{Code: 9, Bits: 8, Lanes: 1}, dlpack.DataType{Code: 9, Bits: 8, Lanes: 1}, "code(9)8"},
		// The zero DataType (a deserialized IVF-PQ's: an element type not
		// known) is not "int0x0" (issue 46).
		{dlpack.DataType{}, dlpack.DataType{Code: dlpack.Int, Bits: 0, Lanes: 0}, "unknown"},
	}
	for _, tc := range cases {
		if tc.got != tc.want || tc.got.String() != tc.name {
			t.Errorf("%s: got %+v %q", tc.name, tc.got, tc.got.String())
		}
	}
	if !dlpack.Is[float16.Float16](dlpack.Float16) || dlpack.Is[uint16](dlpack.Float16) {
		t.Error("Is confuses float16 and uint16")
	}
	if dlpack.Float32.ElemSize() != 4 || (dlpack.DataType{Code: dlpack.Float, Bits: 16, Lanes: 4}).ElemSize() != 8 {
		t.Error("ElemSize")
	}
	// The Go constants agree with the generated C enumerators.
	if dlpack.CUDAManaged != dlpack.DeviceType(generated.DLDeviceType_kDLCUDAManaged) || dlpack.Bool != dlpack.TypeCode(generated.DLDataTypeCode_kDLBool) {
		t.Error("constants drifted from generated")
	}
	for dt, name := range map[dlpack.DeviceType]string{dlpack.CPU: "cpu", dlpack.CUDA: "cuda", dlpack.CUDAHost: "cuda_host", dlpack.CUDAManaged: "cuda_managed", 5: "device_type(5)"} {
		if dt.String() != name {
			t.Errorf("%d: %q, want %q", int32(dt), dt.String(), name)
		}
	}
	if !dlpack.CUDAManaged.HostAccessible() || dlpack.CUDA.HostAccessible() || dlpack.DeviceType(5).Known() {
		t.Error("device table")
	}
}

func TestHostSlice(t *testing.T) {
	data := []float32{1, 2, 3, 4, 5, 6}
	m, err := dlpack.NewHostMatrix(data, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := m.View()
	s, err := dlpack.HostSlice[float32](v)
	if err != nil || &s[0] != &data[0] || len(s) != 6 {
		t.Fatalf("HostSlice = %v, %v", s, err)
	}
	if _, err := dlpack.HostSlice[int32](v); !errors.Is(err, dlpack.ErrUnsupportedDType) {
		t.Errorf("wrong type: %v", err)
	}
	mv, _ := m.ViewMut()
	if s, err := dlpack.HostSliceMut[float32](mv); err != nil || len(s) != 6 {
		t.Errorf("HostSliceMut: %v", err)
	}
	dv, _ := dlpack.FromRawParts(fakePtr(fakeBase), cuda0, []int64{6}, nil, dlpack.Float32)
	if _, err := dlpack.HostSlice[float32](dv); !errors.Is(err, dlpack.ErrUnsupportedDevice) {
		t.Errorf("device memory: %v", err)
	}
	sv, _ := dlpack.FromRawParts(unsafe.Pointer(&data[0]), dlpack.HostDevice, []int64{3}, []int64{2}, dlpack.Float32)
	if _, err := dlpack.HostSlice[float32](sv); !errors.Is(err, dlpack.ErrInvalidMetadata) {
		t.Errorf("strided: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := dlpack.HostSlice[float32](v); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("after Close: %v", err)
	}
}

func TestHostAdapters(t *testing.T) {
	if _, err := dlpack.NewHostMatrix(make([]int8, 5), 2, 3); !errors.Is(err, dlpack.ErrInvalidMetadata) || !strings.Contains(err.Error(), "len(data) = 5") {
		t.Errorf("short data: %v", err)
	}
	if _, err := dlpack.NewHostMatrix(make([]int8, 0), -1, 0); !errors.Is(err, dlpack.ErrInvalidMetadata) || !strings.Contains(err.Error(), "rows = -1") {
		t.Errorf("negative rows: %v", err)
	}
	if _, err := dlpack.NewHostMatrix(make([]int8, 0), 0, -3); !errors.Is(err, dlpack.ErrInvalidMetadata) {
		t.Errorf("negative cols: %v", err)
	}
	if _, err := dlpack.NewHostMatrix(make([]int8, 0), 1<<40, 1<<40); !errors.Is(err, dlpack.ErrInvalidMetadata) {
		t.Errorf("overflowing shape: %v", err)
	}
	m, err := dlpack.NewHostMatrix([]float16.Float16{1, 2, 3, 4, 5, 6}, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := m.View()
	if v.String() != "float16 cpu:0 [3 2] row-major" || m.Rows() != 3 || m.Cols() != 2 || len(m.Row(1)) != 2 || m.Row(2)[0] != 5 {
		t.Errorf("matrix view %v", v)
	}
	empty, _ := dlpack.NewHostMatrix([]float32{}, 0, 128)
	ev, err := empty.View()
	if err != nil || ev.Len() != 0 {
		t.Errorf("empty matrix: %v %v", ev, err)
	}
	vec := dlpack.NewHostVector([]uint64{7, 8, 9})
	vv, _ := vec.View()
	mv, _ := vec.ViewMut()
	if vv.String() != "uint64 cpu:0 [3] row-major|col-major" || mv.String() != vv.String()+" (mut)" || vec.Len() != 3 || vec.Data()[2] != 9 {
		t.Errorf("vector views %v / %v", vv, mv)
	}
	if vec.Owner().Label() != "host vector [3]uint64" {
		t.Errorf("label %q", vec.Owner().Label())
	}
	if err := vec.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := vec.View(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("View after Close: %v", err)
	}
	if _, err := vec.ViewMut(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("ViewMut after Close: %v", err)
	}
	if err := mv.Err(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("old ViewMut after Close: %v", err)
	}
	if _, err := mv.Data(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("old ViewMut Data after Close: %v", err)
	}
}

func TestLayoutString(t *testing.T) {
	for l, s := range map[dlpack.Layout]string{dlpack.Strided: "strided", dlpack.RowMajor: "row-major", dlpack.ColMajor: "col-major", dlpack.RowMajor | dlpack.ColMajor: "row-major|col-major", 4: "layout(4)"} {
		if l.String() != s {
			t.Errorf("%d: %q", l, l.String())
		}
	}
	if !dlpack.ColMajor.IsContiguous() || dlpack.Strided.IsContiguous() || !(dlpack.RowMajor | dlpack.ColMajor).IsColMajor() {
		t.Error("Layout predicates")
	}
}
