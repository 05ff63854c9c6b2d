package dlpack

/*
#include <stdlib.h>

// The DLPack ABI is all C sees of this package; the deleter's type is
// void (*)(DLManagedTensor*), declared here on an incomplete struct so that no
// dlpack header is needed.
struct DLManagedTensor;
typedef void (*cuvsgo_dlpack_deleter)(struct DLManagedTensor*);

extern void cuvsgoDLPackExportDeleter(void*);

static void cuvsgo_dlpack_export_deleter(struct DLManagedTensor* self) {
	cuvsgoDLPackExportDeleter(self);
}

static void* cuvsgo_dlpack_export_deleter_addr(void) {
	return (void*)cuvsgo_dlpack_export_deleter;
}

static void cuvsgo_dlpack_call_deleter(void* fn, void* self) {
	((cuvsgo_dlpack_deleter)fn)((struct DLManagedTensor*)self);
}
*/
import "C"

import "unsafe"

// cAlloc returns n zeroed bytes of C memory.
func cAlloc(n uintptr) unsafe.Pointer {
	p := C.calloc(1, C.size_t(n))
	if p == nil {
		panic("dlpack: out of C memory")
	}
	return p
}

func cFree(p unsafe.Pointer) { C.free(p) }

// exportDeleterAddr is the C address of the deleter of exported tensors.
var exportDeleterAddr = C.cuvsgo_dlpack_export_deleter_addr()

// callDeleter calls the C function fn, a DLPack deleter, on self.
func callDeleter(fn, self unsafe.Pointer) { C.cuvsgo_dlpack_call_deleter(fn, self) }
