// Command cshared is built with -buildmode=c-shared into the library that the
// DLPack interop tests load from Python (ctypes): it exports tensors of Go or
// CUDA memory through dlpack.Export and reads tensors from NumPy, PyTorch or
// CuPy through dlpack.Import. CUDA is opened at run time (libcudart.so.13,
// dlopen): building needs no CUDA headers, and the CPU tests never touch it.
// See dlpack/testdata/interop.py.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../../generated
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "cuvs_decls.h"

static void dlpt_call_deleter_c(DLManagedTensor* t) {
	if (t != NULL && t->deleter != NULL) t->deleter(t);
}

// The few CUDA runtime functions used, declared here: cudaError_t is an int,
// cudaMemcpyKind too.
typedef int (*cuda_malloc_fn)(void**, size_t);
typedef int (*cuda_free_fn)(void*);
typedef int (*cuda_memcpy_fn)(void*, const void*, size_t, int);
typedef int (*cuda_set_device_fn)(int);
typedef int (*cuda_get_device_fn)(int*);
typedef int (*cuda_get_device_count_fn)(int*);
typedef int (*cuda_pointer_attrs_fn)(void*, const void*);
typedef const char* (*cuda_error_string_fn)(int);

static struct {
	cuda_malloc_fn malloc_;
	cuda_free_fn free_;
	cuda_memcpy_fn memcpy_;
	cuda_set_device_fn set_device;
	cuda_get_device_fn get_device;
	cuda_get_device_count_fn get_device_count;
	cuda_pointer_attrs_fn pointer_attrs;
	cuda_error_string_fn error_string;
} cu;

static const char* cu_open(const char* path) {
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) return dlerror();
	cu.malloc_ = (cuda_malloc_fn)dlsym(h, "cudaMalloc");
	cu.free_ = (cuda_free_fn)dlsym(h, "cudaFree");
	cu.memcpy_ = (cuda_memcpy_fn)dlsym(h, "cudaMemcpy");
	cu.set_device = (cuda_set_device_fn)dlsym(h, "cudaSetDevice");
	cu.get_device = (cuda_get_device_fn)dlsym(h, "cudaGetDevice");
	cu.get_device_count = (cuda_get_device_count_fn)dlsym(h, "cudaGetDeviceCount");
	cu.pointer_attrs = (cuda_pointer_attrs_fn)dlsym(h, "cudaPointerGetAttributes");
	cu.error_string = (cuda_error_string_fn)dlsym(h, "cudaGetErrorString");
	if (!cu.malloc_ || !cu.free_ || !cu.memcpy_ || !cu.set_device || !cu.get_device ||
	    !cu.get_device_count || !cu.pointer_attrs || !cu.error_string) {
		cu.malloc_ = NULL;
		return "a CUDA runtime symbol is missing";
	}
	return NULL;
}

static int cu_ready(void) { return cu.malloc_ != NULL; }
static int cu_malloc(void** p, size_t n) { return cu.malloc_(p, n); }
static int cu_free(void* p) { return cu.free_(p); }
static int cu_memcpy(void* dst, const void* src, size_t n) { return cu.memcpy_(dst, src, n, 4); } // cudaMemcpyDefault
static int cu_set_device(int d) { return cu.set_device(d); }
static int cu_get_device(int* d) { return cu.get_device(d); }
static int cu_device_count(int* n) { return cu.get_device_count(n); }
static const char* cu_error_string(int rc) { return cu.error_string(rc); }

// The device that owns p. cudaPointerAttributes starts with
// { enum cudaMemoryType type; int device; ... }; room is left for growth.
static int cu_pointer_device(const void* p, int* dev) {
	int attrs[64];
	memset(attrs, 0, sizeof attrs);
	int rc = cu.pointer_attrs(attrs, p);
	*dev = attrs[1];
	return rc;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/x448/float16"
)

func main() {}

var (
	released atomic.Int64
	errMu    sync.Mutex
	lastErr  string
)

func fail(err error) {
	errMu.Lock()
	lastErr = err.Error()
	errMu.Unlock()
}

// dlpt_last_error copies the last error's text into buf (NUL-terminated) and
// returns its length.
//
//export dlpt_last_error
func dlpt_last_error(buf *C.char, n C.int) C.int {
	errMu.Lock()
	defer errMu.Unlock()
	out := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	k := copy(out[:max(int(n)-1, 0)], lastErr)
	if int(n) > 0 {
		out[k] = 0
	}
	return C.int(len(lastErr))
}

// dlpt_released returns how many exported tensors have been released by
// their consumers' deleter calls.
//
//export dlpt_released
func dlpt_released() C.int64_t { return C.int64_t(released.Load()) }

// dlpt_live returns dlpack.LiveExports().
//
//export dlpt_live
func dlpt_live() C.int64_t { return C.int64_t(dlpack.LiveExports()) }

// dlpt_call_deleter calls a tensor's deleter, as a capsule destructor does for
// a capsule nobody consumed.
//
//export dlpt_call_deleter
func dlpt_call_deleter(mt unsafe.Pointer) { C.dlpt_call_deleter_c((*C.DLManagedTensor)(mt)) }

// fill returns rows*cols values start+step*k, k the row-major index, stored
// in row- or column-major order.
func fill[T dlpack.DType](rows, cols int64, colMajor bool, start, step float64, conv func(float64) T) []T {
	data := make([]T, rows*cols)
	for i := int64(0); i < rows; i++ {
		for j := int64(0); j < cols; j++ {
			at := i*cols + j
			if colMajor {
				at = j*rows + i
			}
			data[at] = conv(start + step*float64(i*cols+j))
		}
	}
	return data
}

func exportHost[T dlpack.DType](rows, cols int64, colMajor bool, start, step float64, conv func(float64) T) (*generated.DLManagedTensor, error) {
	data := fill(rows, cols, colMajor, start, step, conv)
	var strides []int64
	if colMajor {
		strides = []int64{1, rows}
	}
	v, err := dlpack.FromRawParts(unsafe.Pointer(unsafe.SliceData(data)), dlpack.HostDevice, []int64{rows, cols}, strides, dlpack.DataTypeOf[T]())
	if err != nil {
		return nil, err
	}
	return dlpack.Export(v, func() { released.Add(1) })
}

// dlpt_export_host exports a rows x cols tensor of Go memory with the given
// DLPack type code and bits, holding start+step*k at row-major index k, stored
// row-major or (colMajor != 0) column-major. NULL on error.
//
//export dlpt_export_host
func dlpt_export_host(code, bits C.int, rows, cols C.int64_t, colMajor C.int, start, step C.double) unsafe.Pointer {
	r, c, cm, s, d := int64(rows), int64(cols), colMajor != 0, float64(start), float64(step)
	var mt *generated.DLManagedTensor
	var err error
	switch (dlpack.DataType{Code: dlpack.TypeCode(code), Bits: uint8(bits), Lanes: 1}) {
	case dlpack.Float16:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) float16.Float16 { return float16.Fromfloat32(float32(x)) })
	case dlpack.Float32:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) float32 { return float32(x) })
	case dlpack.Float64:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) float64 { return x })
	case dlpack.Int8:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) int8 { return int8(x) })
	case dlpack.Int16:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) int16 { return int16(x) })
	case dlpack.Int32:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) int32 { return int32(x) })
	case dlpack.Int64:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) int64 { return int64(x) })
	case dlpack.Uint8:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) uint8 { return uint8(x) })
	case dlpack.Uint16:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) uint16 { return uint16(x) })
	case dlpack.Uint32:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) uint32 { return uint32(x) })
	case dlpack.Uint64:
		mt, err = exportHost(r, c, cm, s, d, func(x float64) uint64 { return uint64(x) })
	default:
		err = fmt.Errorf("no Go type for code %d bits %d", code, bits)
	}
	if err != nil {
		fail(err)
		return nil
	}
	return unsafe.Pointer(mt)
}

// readElem converts the element at p to float64.
func readElem(p unsafe.Pointer, dt dlpack.DataType) (float64, bool) {
	switch dt {
	case dlpack.Float16:
		return float64(float16.Frombits(*(*uint16)(p)).Float32()), true
	case dlpack.Float32:
		return float64(*(*float32)(p)), true
	case dlpack.Float64:
		return *(*float64)(p), true
	case dlpack.Int8:
		return float64(*(*int8)(p)), true
	case dlpack.Int16:
		return float64(*(*int16)(p)), true
	case dlpack.Int32:
		return float64(*(*int32)(p)), true
	case dlpack.Int64:
		return float64(*(*int64)(p)), true
	case dlpack.Uint8:
		return float64(*(*uint8)(p)), true
	case dlpack.Uint16:
		return float64(*(*uint16)(p)), true
	case dlpack.Uint32:
		return float64(*(*uint32)(p)), true
	case dlpack.Uint64:
		return float64(*(*uint64)(p)), true
	}
	return 0, false
}

// Layout of the info array dlpt_import fills (int64 each).
const (
	infoDeviceType = iota
	infoDeviceID
	infoNDim
	infoLayout
	infoCode
	infoBits
	infoPointerDevice // the device CUDA says owns the data, -1 when not asked
	infoShape         = 8
	infoStrides       = infoShape + dlpack.MaxRank
	infoLen           = infoStrides + dlpack.MaxRank
)

// dlpt_import imports the DLManagedTensor mt (taking it over), describes it in
// info[0:24], writes its n or fewer values in row-major index order to out,
// and closes it, which calls the producer's deleter. It returns the number of
// elements, or -1 if the import was refused (the caller keeps mt), or -2 if
// it was taken over and released but its values could not be read. Device
// memory is copied to the host with the CUDA runtime (dlpt_cuda_init first).
//
//export dlpt_import
func dlpt_import(mt unsafe.Pointer, out *C.double, n C.int64_t, info *C.int64_t) C.int64_t {
	im, err := dlpack.Import((*generated.DLManagedTensor)(mt))
	if err != nil {
		fail(err)
		return -1
	}
	defer func() {
		if err := im.Close(); err != nil {
			panic(err)
		}
	}()
	v, _ := im.View()
	inf := unsafe.Slice((*int64)(unsafe.Pointer(info)), infoLen)
	inf[infoDeviceType], inf[infoDeviceID] = int64(v.Device().Type), int64(v.Device().ID)
	inf[infoNDim], inf[infoLayout] = int64(v.NDim()), int64(v.Layout())
	inf[infoCode], inf[infoBits] = int64(v.DType().Code), int64(v.DType().Bits)
	inf[infoPointerDevice] = -1
	for i := 0; i < v.NDim(); i++ {
		inf[infoShape+i], inf[infoStrides+i] = v.Dim(i), v.Stride(i)
	}
	count, err := readAll(v, unsafe.Slice((*float64)(unsafe.Pointer(out)), int(n)), &inf[infoPointerDevice])
	if err != nil {
		fail(err)
		return -2
	}
	return C.int64_t(count)
}

// readAll reads v's elements in row-major index order into out.
func readAll(v dlpack.View, out []float64, pointerDevice *int64) (int64, error) {
	count := v.Len()
	if count > int64(len(out)) {
		return 0, fmt.Errorf("%d elements, room for %d", count, len(out))
	}
	if _, ok := readElem(unsafe.Pointer(&[8]byte{}), v.DType()); !ok {
		return 0, fmt.Errorf("cannot read %v", v.DType())
	}
	if count == 0 {
		return 0, nil
	}
	elem := v.DType().ElemSize()
	var lo, hi int64 // the span, in bytes from the data pointer
	for i := 0; i < v.NDim(); i++ {
		if d := (v.Dim(i) - 1) * v.Stride(i) * elem; d < 0 {
			lo += d
		} else {
			hi += d
		}
	}
	hi += elem
	data, err := v.Data()
	if err != nil {
		return 0, err
	}
	base := unsafe.Add(data, lo) // the lowest byte
	if !v.Device().Type.HostAccessible() {
		if v.Device().Type != dlpack.CUDA {
			return 0, fmt.Errorf("cannot read %v memory", v.Device())
		}
		if C.cu_ready() == 0 {
			return 0, errors.New("CUDA is not loaded (dlpt_cuda_init)")
		}
		var dev C.int
		if rc := C.cu_pointer_device(data, &dev); rc != 0 {
			return 0, cudaError("cudaPointerGetAttributes", rc)
		}
		*pointerDevice = int64(dev)
		host := make([]byte, hi-lo)
		if rc := C.cu_memcpy(unsafe.Pointer(&host[0]), base, C.size_t(len(host))); rc != 0 {
			return 0, cudaError("cudaMemcpy", rc)
		}
		base = unsafe.Pointer(&host[0]) // keeps host alive while it is read
	}
	idx := make([]int64, v.NDim())
	for k := int64(0); k < count; k++ {
		off := -lo
		for i, x := range idx {
			off += x * v.Stride(i) * elem
		}
		out[k], _ = readElem(unsafe.Add(base, off), v.DType())
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < v.Dim(i) {
				break
			}
			idx[i] = 0
		}
	}
	return count, nil
}

func cudaError(op string, rc C.int) error {
	return fmt.Errorf("%s: %s (%d)", op, C.GoString(C.cu_error_string(rc)), int(rc))
}

// dlpt_cuda_init opens the CUDA runtime at path (e.g. "libcudart.so.13") and
// returns the number of devices, or -1 (see dlpt_last_error).
//
//export dlpt_cuda_init
func dlpt_cuda_init(path *C.char) C.int {
	if msg := C.cu_open(path); msg != nil {
		fail(errors.New(C.GoString(msg)))
		return -1
	}
	var n C.int
	if rc := C.cu_device_count(&n); rc != 0 {
		fail(cudaError("cudaGetDeviceCount", rc))
		return -1
	}
	return n
}

// dlpt_export_cuda exports a rows x cols row-major float32 tensor in device
// memory of the given device, holding start+step*k at index k. Its release
// frees the memory. NULL on error.
//
//export dlpt_export_cuda
func dlpt_export_cuda(device C.int, rows, cols C.int64_t, start, step C.double) unsafe.Pointer {
	mt, err := exportCUDA(int(device), int64(rows), int64(cols), float64(start), float64(step))
	if err != nil {
		fail(err)
		return nil
	}
	return unsafe.Pointer(mt)
}

func exportCUDA(device int, rows, cols int64, start, step float64) (*generated.DLManagedTensor, error) {
	if C.cu_ready() == 0 {
		return nil, errors.New("CUDA is not loaded (dlpt_cuda_init)")
	}
	host := fill(rows, cols, false, start, step, func(x float64) float32 { return float32(x) })
	var old C.int
	if rc := C.cu_get_device(&old); rc != 0 {
		return nil, cudaError("cudaGetDevice", rc)
	}
	defer C.cu_set_device(old)
	if rc := C.cu_set_device(C.int(device)); rc != 0 {
		return nil, cudaError("cudaSetDevice", rc)
	}
	var p unsafe.Pointer
	if rc := C.cu_malloc(&p, C.size_t(4*max(len(host), 1))); rc != 0 {
		return nil, cudaError("cudaMalloc", rc)
	}
	if len(host) > 0 {
		if rc := C.cu_memcpy(p, unsafe.Pointer(&host[0]), C.size_t(4*len(host))); rc != 0 {
			C.cu_free(p)
			return nil, cudaError("cudaMemcpy", rc)
		}
	}
	v, err := dlpack.FromRawParts(p, dlpack.Device{Type: dlpack.CUDA, ID: int32(device)}, []int64{rows, cols}, nil, dlpack.Float32)
	if err == nil {
		var mt *generated.DLManagedTensor
		mt, err = dlpack.Export(v, func() {
			// The consumer's thread may have another current device.
			var cur C.int
			C.cu_get_device(&cur)
			C.cu_set_device(C.int(device))
			C.cu_free(p)
			C.cu_set_device(cur)
			released.Add(1)
		})
		if err == nil {
			return mt, nil
		}
	}
	C.cu_free(p)
	return nil, err
}
