// Package bench holds the benchmarks of what a call through the bindings
// costs (run them with `make bench`; BENCHMARKS.md explains the table), and
// the C these benchmarks need for their reference rows: the floor (a C loop
// calling a cuVS search function through its dlsym'd pointer, no Go at all)
// and the bare cgo call of that same pointer, with none of the generated
// shim's error handling.
//
// It is test support only: nothing outside the benchmarks imports it.
package bench

/*
#cgo CFLAGS: -I${SRCDIR}/../../generated
#cgo LDFLAGS: -ldl
#cgo noescape bench_cagra_search_once
#cgo nocallback bench_cagra_search_once
#cgo noescape bench_cagra_search_loop
#cgo nocallback bench_cagra_search_loop
#cgo noescape bench_bf_search_once
#cgo nocallback bench_bf_search_once
#cgo noescape bench_bf_search_loop
#cgo nocallback bench_bf_search_loop

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include "cuvs_decls.h"

typedef cuvsError_t (*bench_cagra_search_fn)(cuvsResources_t, cuvsCagraSearchParams_t,
                                             cuvsCagraIndex_t, DLManagedTensor*,
                                             DLManagedTensor*, DLManagedTensor*, cuvsFilter);
typedef cuvsError_t (*bench_bf_search_fn)(cuvsResources_t, cuvsBruteForceIndex_t,
                                          DLManagedTensor*, DLManagedTensor*, DLManagedTensor*,
                                          cuvsFilter);

// Set by bench_bind, which the benchmarks call before any call through
// them (and again, to the same values, in each benchmark function).
static bench_cagra_search_fn bench_cagra_search;
static bench_bf_search_fn bench_bf_search;
static void* bench_handle;

// Finds the two search functions in the library the bindings loaded:
// RTLD_NOLOAD succeeds only for a library already in the process and then
// returns that very instance, so dlsym yields the addresses the generated
// shims call. Returns NULL or what failed (static text or dlerror's).
static const char* bench_bind(const char* path) {
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!h) {
		const char* e = dlerror();
		return e ? e : "dlopen(RTLD_NOLOAD) failed: the library is not loaded";
	}
	bench_cagra_search_fn c = (bench_cagra_search_fn)dlsym(h, "cuvsCagraSearch");
	bench_bf_search_fn b = (bench_bf_search_fn)dlsym(h, "cuvsBruteForceSearch");
	if (!c || !b) {
		dlclose(h);
		return "cuvsCagraSearch or cuvsBruteForceSearch missing";
	}
	if (bench_handle) dlclose(bench_handle);
	bench_handle = h; // kept: the pointers must stay valid
	bench_cagra_search = c;
	bench_bf_search = b;
	return NULL;
}

// One call, as a bare cgo call reaches it: the arguments as the generated
// shim takes them (the filter by address), no status or error text.
static int32_t bench_cagra_search_once(uintptr_t res, uintptr_t params, uintptr_t index, void* q,
                                       void* n, void* d, const void* filter) {
	return (int32_t)bench_cagra_search(res, (cuvsCagraSearchParams_t)params, (cuvsCagraIndex_t)index, q, n, d,
	                                   *(const cuvsFilter*)filter);
}

// The floor: iters calls from C through the same pointer. Returns how many
// did not succeed.
static int64_t bench_cagra_search_loop(int64_t iters, uintptr_t res, uintptr_t params, uintptr_t index,
                                       void* q, void* n, void* d, const void* filter) {
	cuvsFilter f = *(const cuvsFilter*)filter;
	int64_t failed = 0;
	for (int64_t i = 0; i < iters; i++) {
		failed += bench_cagra_search(res, (cuvsCagraSearchParams_t)params, (cuvsCagraIndex_t)index, q, n, d, f) !=
		          CUVS_SUCCESS;
	}
	return failed;
}

static int32_t bench_bf_search_once(uintptr_t res, uintptr_t index, void* q, void* n, void* d,
                                    const void* filter) {
	return (int32_t)bench_bf_search(res, (cuvsBruteForceIndex_t)index, q, n, d, *(const cuvsFilter*)filter);
}

static int64_t bench_bf_search_loop(int64_t iters, uintptr_t res, uintptr_t index, void* q, void* n,
                                    void* d, const void* filter) {
	cuvsFilter f = *(const cuvsFilter*)filter;
	int64_t failed = 0;
	for (int64_t i = 0; i < iters; i++) {
		failed += bench_bf_search(res, (cuvsBruteForceIndex_t)index, q, n, d, f) != CUVS_SUCCESS;
	}
	return failed;
}
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
)

// Bind finds cuvsCagraSearch and cuvsBruteForceSearch in the library at
// path, which the bindings must have loaded already (the same path they were
// given): the pointers are then the ones the generated shims call.
func Bind(path string) error {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	if msg := C.bench_bind(cs); msg != nil {
		return errors.New("bench: " + C.GoString(msg))
	}
	return nil
}

// CagraSearchArgs are the arguments of one cuvsCagraSearch call.
type CagraSearchArgs struct {
	Res                           generated.CuvsResources_t
	Params                        generated.CuvsCagraSearchParams_t
	Index                         generated.CuvsCagraIndex_t
	Queries, Neighbors, Distances *generated.DLManagedTensor
	Filter                        generated.CuvsFilter
}

// CagraSearchBare makes one bare cgo call of cuvsCagraSearch and returns its
// cuvsError_t.
func CagraSearchBare(a *CagraSearchArgs) int32 {
	return int32(C.bench_cagra_search_once(C.uintptr_t(a.Res), C.uintptr_t(a.Params), C.uintptr_t(a.Index),
		unsafe.Pointer(a.Queries), unsafe.Pointer(a.Neighbors), unsafe.Pointer(a.Distances), unsafe.Pointer(&a.Filter)))
}

// CagraSearchLoop calls cuvsCagraSearch iters times from C, in one cgo call,
// and returns how many calls did not succeed.
func CagraSearchLoop(iters int, a *CagraSearchArgs) int64 {
	return int64(C.bench_cagra_search_loop(C.int64_t(iters), C.uintptr_t(a.Res), C.uintptr_t(a.Params), C.uintptr_t(a.Index),
		unsafe.Pointer(a.Queries), unsafe.Pointer(a.Neighbors), unsafe.Pointer(a.Distances), unsafe.Pointer(&a.Filter)))
}

// BruteForceSearchArgs are the arguments of one cuvsBruteForceSearch call.
type BruteForceSearchArgs struct {
	Res                           generated.CuvsResources_t
	Index                         generated.CuvsBruteForceIndex_t
	Queries, Neighbors, Distances *generated.DLManagedTensor
	Filter                        generated.CuvsFilter
}

// BruteForceSearchBare makes one bare cgo call of cuvsBruteForceSearch and
// returns its cuvsError_t.
func BruteForceSearchBare(a *BruteForceSearchArgs) int32 {
	return int32(C.bench_bf_search_once(C.uintptr_t(a.Res), C.uintptr_t(a.Index),
		unsafe.Pointer(a.Queries), unsafe.Pointer(a.Neighbors), unsafe.Pointer(a.Distances), unsafe.Pointer(&a.Filter)))
}

// BruteForceSearchLoop calls cuvsBruteForceSearch iters times from C, in
// one cgo call, and returns how many calls did not succeed.
func BruteForceSearchLoop(iters int, a *BruteForceSearchArgs) int64 {
	return int64(C.bench_bf_search_loop(C.int64_t(iters), C.uintptr_t(a.Res), C.uintptr_t(a.Index),
		unsafe.Pointer(a.Queries), unsafe.Pointer(a.Neighbors), unsafe.Pointer(a.Distances), unsafe.Pointer(&a.Filter)))
}
