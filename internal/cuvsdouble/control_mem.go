package cuvsdouble

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

static void* dblmem_sym(void* h, const char* name) { return dlsym(h, name); }
static void dblmem_set_bytes(void* f, uint64_t b) { ((void (*)(uint64_t))f)(b); }
static void dblmem_get(void* f, int dev, uint64_t* out) { ((void (*)(int, uint64_t*))f)(dev, out); }
static void dblmem_reset_peak(void* f, int dev) { ((void (*)(int))f)(dev); }
*/
import "C"

import "unsafe"

// DeviceMemory is the double's model of one fake device's memory (see
// csrc/dbl_devmem.c): its size, what was taken from it, and what the
// memory resource (the pool, or the device directly) has handed out.
type DeviceMemory struct {
	Total     uint64 // the device's size (cudaMemGetInfo's total)
	Used      uint64 // taken from the device: blocks outside a pool, plus the pool's size
	Allocated uint64 // handed out by the memory resource now: cuvsRMMAlloc and indexes' storage
	Peak      uint64 // the most Allocated has been since the last ResetDevicePeak
	PoolOn    bool
	PoolSize  uint64 // bytes the pool holds from the device
	PoolMax   uint64 // its maximum
	PoolInUse uint64 // bytes it has handed out
}

// Free is what cudaMemGetInfo reports free.
func (m DeviceMemory) Free() uint64 { return m.Total - m.Used }

func (c *Control) memSym(name string) unsafe.Pointer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handle == nil {
		panic("cuvsdouble: Control used after Close")
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	f := C.dblmem_sym(c.handle, cs)
	if f == nil {
		panic("cuvsdouble: the library lacks " + name)
	}
	return f
}

// SetDeviceBytes sets every fake device's size (0: back to
// $CUVSDOUBLE_DEVICE_BYTES, else 141 GiB). Set it while nothing is
// allocated.
func (c *Control) SetDeviceBytes(n uint64) {
	C.dblmem_set_bytes(c.memSym("cuvsdouble_set_device_bytes"), C.uint64_t(n))
}

// DeviceMemory reports device dev's memory as the double models it.
func (c *Control) DeviceMemory(dev int) DeviceMemory {
	var out [8]C.uint64_t
	C.dblmem_get(c.memSym("cuvsdouble_device_memory"), C.int(dev), &out[0])
	return DeviceMemory{
		Total: uint64(out[0]), Used: uint64(out[1]), Allocated: uint64(out[2]), Peak: uint64(out[3]),
		PoolSize: uint64(out[4]), PoolMax: uint64(out[5]), PoolInUse: uint64(out[6]), PoolOn: out[7] != 0,
	}
}

// ResetDevicePeak restarts device dev's peak from what is allocated now.
func (c *Control) ResetDevicePeak(dev int) {
	C.dblmem_reset_peak(c.memSym("cuvsdouble_reset_device_peak"), C.int(dev))
}
