package hnsw

/*
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"
)

// cString copies s into C memory (freed with cFree).
func cString(s string) *byte { return (*byte)(unsafe.Pointer(C.CString(s))) }

func cFree(p unsafe.Pointer) { C.free(p) }

// goString reads a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	return C.GoString((*C.char)(unsafe.Pointer(p)))
}
