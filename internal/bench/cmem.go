package bench

/*
#include <stdlib.h>
*/
import "C"

import "unsafe"

// CAlloc returns n bytes of C memory (malloc), as a binding that copies
// tensors into C memory allocates them; it panics when malloc fails.
func CAlloc(n int) unsafe.Pointer {
	p := C.malloc(C.size_t(n))
	if p == nil {
		panic("bench: out of C memory")
	}
	return p
}

// CFree frees memory from CAlloc.
func CFree(p unsafe.Pointer) { C.free(p) }
