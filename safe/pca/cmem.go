package pca

/*
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
)

// slot is one tensor handed to C, its metadata in C memory: cuVS's PCA
// needs explicit strides (a one-column matrix must still read as
// column-major on 26.06), which package dlpack's calls do not make.
type slot struct {
	mt      generated.DLManagedTensor
	shape   [2]int64
	strides [2]int64
}

// slots is C memory for n slots, freed by free.
type slots struct {
	p *slot
	n int
}

func newSlots(n int) slots {
	var s slot
	return slots{p: (*slot)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(s)))), n: n}
}

func (s slots) at(i int) *slot { return &unsafe.Slice(s.p, s.n)[i] }

func (s slots) free() { C.free(unsafe.Pointer(s.p)) }
