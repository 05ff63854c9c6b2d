package ivfflat

/*
#include <stdlib.h>

typedef void (*cuvsgo_ivfflat_deleter)(void*);
static void cuvsgo_ivfflat_call_deleter(void* fn, void* self) { ((cuvsgo_ivfflat_deleter)fn)(self); }
*/
import "C"

import (
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
)

// cDLManaged allocates a zeroed DLManagedTensor in C memory for
// cuvsIvfFlatIndexGetCenters to fill in.
func cDLManaged() *generated.DLManagedTensor {
	var zero generated.DLManagedTensor
	return (*generated.DLManagedTensor)(C.calloc(1, C.size_t(unsafe.Sizeof(zero))))
}

func cFree(p unsafe.Pointer) { C.free(p) }

// callDeleter runs a DLManagedTensor's deleter (tests).
func callDeleter(mt *generated.DLManagedTensor) {
	C.cuvsgo_ivfflat_call_deleter(unsafe.Pointer(mt.Deleter), unsafe.Pointer(mt))
}
