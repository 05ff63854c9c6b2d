package ivfpq

/*
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
)

// cDLManaged allocates a zeroed DLManagedTensor in C memory, for the
// getters that fill one in.
func cDLManaged() *generated.DLManagedTensor {
	var zero generated.DLManagedTensor
	return (*generated.DLManagedTensor)(C.calloc(1, C.size_t(unsafe.Sizeof(zero))))
}

func cFree(p unsafe.Pointer) { C.free(p) }
