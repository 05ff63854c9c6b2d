package dlpack

import (
	"strconv"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/x448/float16"
)

// DeviceType says where a tensor's memory lives. Its values are DLPack's
// DLDeviceType enumerators.
type DeviceType int32

// The DLPack device types (dlpack.h's DLDeviceType).
const (
	CPU         = DeviceType(generated.DLDeviceType_kDLCPU)
	CUDA        = DeviceType(generated.DLDeviceType_kDLCUDA)
	CUDAHost    = DeviceType(generated.DLDeviceType_kDLCUDAHost)
	OpenCL      = DeviceType(generated.DLDeviceType_kDLOpenCL)
	Vulkan      = DeviceType(generated.DLDeviceType_kDLVulkan)
	Metal       = DeviceType(generated.DLDeviceType_kDLMetal)
	VPI         = DeviceType(generated.DLDeviceType_kDLVPI)
	ROCM        = DeviceType(generated.DLDeviceType_kDLROCM)
	ROCMHost    = DeviceType(generated.DLDeviceType_kDLROCMHost)
	ExtDev      = DeviceType(generated.DLDeviceType_kDLExtDev)
	CUDAManaged = DeviceType(generated.DLDeviceType_kDLCUDAManaged)
	OneAPI      = DeviceType(generated.DLDeviceType_kDLOneAPI)
	WebGPU      = DeviceType(generated.DLDeviceType_kDLWebGPU)
	Hexagon     = DeviceType(generated.DLDeviceType_kDLHexagon)
)

// deviceInfo is what the package knows about one device type.
type deviceInfo struct {
	name string
	// address: the data pointer is a plain virtual address in the process's
	// unified address space (host and CUDA/ROCm unified addressing), so
	// alignment and overlap between views can be judged from it. For the
	// other kinds it is a handle (cl_mem, VkBuffer, ...).
	address bool
	// host: the CPU can read the memory directly.
	host bool
}

// devices is the one table of known device types, indexed by type; an
// entry with an empty name is not a device type.
var devices = [...]deviceInfo{
	CPU:         {"cpu", true, true},
	CUDA:        {"cuda", true, false},
	CUDAHost:    {"cuda_host", true, true},
	OpenCL:      {"opencl", false, false},
	Vulkan:      {"vulkan", false, false},
	Metal:       {"metal", false, false},
	VPI:         {"vpi", false, false},
	ROCM:        {"rocm", true, false},
	ROCMHost:    {"rocm_host", true, true},
	ExtDev:      {"ext_dev", false, false},
	CUDAManaged: {"cuda_managed", true, true},
	OneAPI:      {"oneapi", false, false},
	WebGPU:      {"webgpu", false, false},
	Hexagon:     {"hexagon", false, false},
}

func (t DeviceType) info() deviceInfo {
	if t < 0 || int(t) >= len(devices) {
		return deviceInfo{}
	}
	return devices[t]
}

// hasAddress reports whether data on t is an address (not a handle).
func (t DeviceType) hasAddress() bool {
	return t >= 0 && int(t) < len(devices) && devices[t].address
}

// Known reports whether t is a DLPack device type this package knows.
func (t DeviceType) Known() bool { return t.info().name != "" }

// HostAccessible reports whether the CPU can read memory of this device type
// directly (kDLCPU, kDLCUDAHost, kDLCUDAManaged, kDLROCMHost).
func (t DeviceType) HostAccessible() bool { return t.info().host }

// String returns the device type's short name ("cpu", "cuda", ...), or
// "device_type(N)" for an unknown value.
func (t DeviceType) String() string {
	if d := t.info(); d.name != "" {
		return d.name
	}
	return "device_type(" + strconv.Itoa(int(t)) + ")"
}

// Device is a device type and a device ordinal, as DLPack's DLDevice.
type Device struct {
	Type DeviceType
	ID   int32
}

// String formats the device as "type:id", e.g. "cuda:0".
func (d Device) String() string { return d.Type.String() + ":" + strconv.Itoa(int(d.ID)) }

// HostDevice is the CPU device, where Go memory lives.
var HostDevice = Device{Type: CPU, ID: 0}

// TypeCode is the kind of a tensor element, as DLPack's DLDataTypeCode.
type TypeCode uint8

// The DLPack type codes (dlpack.h's DLDataTypeCode).
const (
	Int          = TypeCode(generated.DLDataTypeCode_kDLInt)
	UInt         = TypeCode(generated.DLDataTypeCode_kDLUInt)
	Float        = TypeCode(generated.DLDataTypeCode_kDLFloat)
	OpaqueHandle = TypeCode(generated.DLDataTypeCode_kDLOpaqueHandle)
	Bfloat       = TypeCode(generated.DLDataTypeCode_kDLBfloat)
	Complex      = TypeCode(generated.DLDataTypeCode_kDLComplex)
	Bool         = TypeCode(generated.DLDataTypeCode_kDLBool)
)

// codeInfo is what the package knows about one type code.
type codeInfo struct {
	name string
	bits []uint8 // the widths a consumer can meet; nil: any multiple of 8
	// alignDiv: the data pointer must be aligned to bits/8/alignDiv bytes:
	// 1 for scalars, 2 for complex (aligned as one part), 0 for opaque
	// handles (no requirement).
	alignDiv uint8
}

// codes is the one table of known type codes and their legal widths, indexed
// by code; an entry with an empty name is not a type code.
var codes = [...]codeInfo{
	Int:          {"int", []uint8{8, 16, 32, 64}, 1},
	UInt:         {"uint", []uint8{8, 16, 32, 64}, 1},
	Float:        {"float", []uint8{16, 32, 64}, 1},
	OpaqueHandle: {"handle", nil, 0},
	Bfloat:       {"bfloat", []uint8{16}, 1},
	Complex:      {"complex", []uint8{64, 128}, 2},
	Bool:         {"bool", []uint8{8}, 1},
}

func (c TypeCode) info() codeInfo {
	if int(c) >= len(codes) {
		return codeInfo{}
	}
	return codes[c]
}

// String returns the type code's name ("int", "float", ...), or "code(N)".
func (c TypeCode) String() string {
	if ci := c.info(); ci.name != "" {
		return ci.name
	}
	return "code(" + strconv.Itoa(int(c)) + ")"
}

// DataType is an element type, as DLPack's DLDataType: a kind, a width in
// bits and a number of vector lanes (1 for scalars).
type DataType struct {
	Code  TypeCode
	Bits  uint8
	Lanes uint16
}

// The element types of the Go types that satisfy [DType].
var (
	Float16 = DataType{Float, 16, 1}
	Float32 = DataType{Float, 32, 1}
	Float64 = DataType{Float, 64, 1}
	Int8    = DataType{Int, 8, 1}
	Int16   = DataType{Int, 16, 1}
	Int32   = DataType{Int, 32, 1}
	Int64   = DataType{Int, 64, 1}
	Uint8   = DataType{UInt, 8, 1}
	Uint16  = DataType{UInt, 16, 1}
	Uint32  = DataType{UInt, 32, 1}
	Uint64  = DataType{UInt, 64, 1}
)

// ElemSize is the size in bytes of one element (all lanes). It is 0 for a
// width that is not a whole number of bytes.
func (dt DataType) ElemSize() int64 {
	if dt.Bits%8 != 0 {
		return 0
	}
	return int64(dt.Bits/8) * int64(dt.Lanes)
}

// String formats the type as NumPy names it ("float32", "uint8"), with an
// "xN" suffix for N lanes; the zero DataType (an element type not known,
// as a deserialized IVF-PQ index's) is "unknown".
func (dt DataType) String() string {
	if dt == (DataType{}) {
		return "unknown"
	}
	s := dt.Code.String() + strconv.Itoa(int(dt.Bits))
	if dt.Lanes != 1 {
		s += "x" + strconv.Itoa(int(dt.Lanes))
	}
	return s
}

// DType is the set of Go element types with a DLPack mapping; use it as a type
// constraint. float16.Float16 (github.com/x448/float16) stands for IEEE half
// precision. Only exact types qualify: a named type such as
// float16.Float16, whose underlying type is uint16, must not be confused with
// uint16.
type DType interface {
	float32 | float64 | float16.Float16 |
		int8 | int16 | int32 | int64 |
		uint8 | uint16 | uint32 | uint64
}

// DataTypeOf returns the DLPack element type of T.
func DataTypeOf[T DType]() DataType {
	switch any((*T)(nil)).(type) {
	case *float32:
		return Float32
	case *float64:
		return Float64
	case *float16.Float16:
		return Float16
	case *int8:
		return Int8
	case *int16:
		return Int16
	case *int32:
		return Int32
	case *int64:
		return Int64
	case *uint8:
		return Uint8
	case *uint16:
		return Uint16
	case *uint32:
		return Uint32
	default: // *uint64: the constraint admits nothing else.
		return Uint64
	}
}

// Is reports whether dt is T's element type.
func Is[T DType](dt DataType) bool { return dt == DataTypeOf[T]() }

func (d Device) raw() generated.DLDevice {
	return generated.DLDevice{DeviceType: generated.DLDeviceType(d.Type), DeviceId: d.ID}
}

func (dt DataType) raw() generated.DLDataType {
	return generated.DLDataType{Code: uint8(dt.Code), Bits: dt.Bits, Lanes: dt.Lanes}
}
