package cudart

/*
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

extern void* cudart_handle;

typedef int (*gc_malloc_fn)(void**, size_t);
typedef int (*gc_free_fn)(void*);
typedef int (*gc_attrs_fn)(void*, const void*);

// Allocates n bytes with the current device, asks the runtime which device
// owns them (cudaPointerAttributes starts { int type; int device; ... }),
// and frees them. Returns a CUDA status, or -1 when a function is missing.
static int gc_alloc_device(size_t n, int* dev) {
	gc_malloc_fn m = (gc_malloc_fn)dlsym(cudart_handle, "cudaMalloc");
	gc_free_fn f = (gc_free_fn)dlsym(cudart_handle, "cudaFree");
	gc_attrs_fn a = (gc_attrs_fn)dlsym(cudart_handle, "cudaPointerGetAttributes");
	if (!m || !f || !a) return -1;
	void* p = NULL;
	int rc = m(&p, n);
	if (rc != 0) return rc;
	int attrs[64];
	memset(attrs, 0, sizeof attrs);
	rc = a(attrs, p);
	*dev = attrs[1];
	int rc2 = f(p);
	return rc != 0 ? rc : rc2;
}
*/
import "C"

import "fmt"

// allocDevice allocates a few bytes with the calling thread's current
// device, and returns the device the CUDA runtime says owns them; for the
// GPU check (gpu_test.go), on a real CUDA runtime only.
func allocDevice() (int, error) {
	var dev C.int
	rc := C.gc_alloc_device(256, &dev)
	if rc == -1 {
		return 0, fmt.Errorf("cudaMalloc, cudaFree or cudaPointerGetAttributes missing from %s", Path())
	}
	if rc != 0 {
		return 0, fail("cudaMalloc/cudaPointerGetAttributes/cudaFree", rc)
	}
	return int(dev), nil
}
