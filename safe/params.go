package safe

/*
#include <stdlib.h>
*/
import "C"

import "fmt"

// paramsBytes is the size of a Resources' C memory for the parameters of
// one C call (kit.Params): above every params struct of the C API that the
// safe layer fills in Go memory (TestParamsMemFits).
const paramsBytes = 512

// newParamsMem allocates a Resources' params memory.
func newParamsMem(op string) (uintptr, error) {
	if a := uintptr(C.calloc(1, paramsBytes)); a != 0 {
		return a, nil
	}
	return 0, fmt.Errorf("%s: no host memory for the Resources' %d bytes of call parameters", op, paramsBytes)
}

// freeParamsMem frees what newParamsMem allocated.
func freeParamsMem(a uintptr) {
	if a != 0 {
		C.free(cPtr(a))
	}
}

// params returns r's C memory for the parameters of the C call r is locked
// for (lock: r.mu held by the caller), n bytes at most. The struct a
// handle addresses must be C memory while C reads it; this is that memory
// for params the safe layer fills per call, without a Go allocation.
func (r *Resources) params(n uintptr) uintptr {
	if n > paramsBytes {
		panic(fmt.Sprintf("safe: a params struct of %d bytes, above the Resources' %d", n, paramsBytes))
	}
	if r.mu.TryLock() {
		r.mu.Unlock()
		panic("safe: a Resources' params memory used without the Resources locked for a call")
	}
	return r.pmem
}
