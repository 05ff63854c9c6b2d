package capi

/*
#include <stdlib.h>
#include <string.h>
#include "capi.h"

// The multi-GPU params (c/include/cuvs/neighbors/mg_*.h): the base params
// and the distribution mode.
typedef struct {
  void* base;
  int mode;
} capi_mg_params;

// The common prefix of cuvsCagraIndexParams on 26.06 and 26.08.
typedef struct {
  int metric;
  size_t intermediate_graph_degree;
  size_t graph_degree;
  int build_algo;
} capi_mg_cagra_base;

// The common prefix of cuvsIvfFlatIndexParams and cuvsIvfPqIndexParams.
typedef struct {
  int metric;
  float metric_arg;
  bool add_data_on_build;
  uint32_t n_lists;
} capi_mg_ivf_base;

static capi_ret mg_fin(capi_lib* l, int st)
{
  capi_ret r = {st, NULL};
  const char* (*get)(void) = (const char* (*)(void))capi_sym(l, "cuvsGetLastErrorText");
  const char* e = get ? get() : NULL;
  if (e) r.err = strdup(e);
  return r;
}

#define MGC(name, type, ...)                             \
  do {                                                   \
    __typeof__(type) fn_ = (type)capi_sym(l, name);      \
    if (!fn_) { capi_ret m_ = {-1, NULL}; return m_; }   \
    return mg_fin(l, fn_(__VA_ARGS__));                  \
  } while (0)

static capi_managed* mg_m(capi_tensor* t) { return t ? &t->m : NULL; }

static capi_ret mg_build(capi_lib* l, const char* name, uintptr_t r, void* p, capi_tensor* ds, void* x)
{ MGC(name, int (*)(uintptr_t, void*, capi_managed*, void*), r, p, mg_m(ds), x); }
static capi_ret mg_extend(capi_lib* l, const char* name, uintptr_t r, void* x, capi_tensor* v, capi_tensor* ids)
{ MGC(name, int (*)(uintptr_t, void*, capi_managed*, capi_managed*), r, x, mg_m(v), mg_m(ids)); }
static capi_ret mg_search(capi_lib* l, const char* name, uintptr_t r, void* p, void* x, capi_tensor* q,
                          capi_tensor* nb, capi_tensor* d)
{ MGC(name, int (*)(uintptr_t, void*, void*, capi_managed*, capi_managed*, capi_managed*), r, p, x, mg_m(q), mg_m(nb), mg_m(d)); }
static capi_ret mg_file(capi_lib* l, const char* name, uintptr_t r, void* x, const char* path, int load)
{
  if (load) MGC(name, int (*)(uintptr_t, const char*, void*), r, path, x);
  MGC(name, int (*)(uintptr_t, void*, const char*), r, x, path);
}
*/
import "C"

import "unsafe"

// Multi-GPU distribution modes (cuvsMultiGpuDistributionMode).
const (
	MgReplicated = 0
	MgSharded    = 1
)

// SetMgMode sets the params' distribution mode.
func SetMgMode(p unsafe.Pointer, mode int) { (*C.capi_mg_params)(p).mode = C.int(mode) }

// SetMgCagraDegrees sets the CAGRA base params' degrees.
func SetMgCagraDegrees(p unsafe.Pointer, intermediate, degree uint64) {
	b := (*C.capi_mg_cagra_base)((*C.capi_mg_params)(p).base)
	b.intermediate_graph_degree = C.size_t(intermediate)
	b.graph_degree = C.size_t(degree)
}

// SetMgCagraBuildAlgo sets the CAGRA base params' build algorithm and
// returns the previous one (put it back before the params are destroyed:
// cuVS frees graph_build_params by the algorithm).
func SetMgCagraBuildAlgo(p unsafe.Pointer, algo int) (previous int) {
	b := (*C.capi_mg_cagra_base)((*C.capi_mg_params)(p).base)
	previous = int(b.build_algo)
	b.build_algo = C.int(algo)
	return previous
}

// SetMgIvfLists sets the IVF-Flat or IVF-PQ base params' n_lists and
// add_data_on_build.
func SetMgIvfLists(p unsafe.Pointer, nLists uint32, addData bool) {
	b := (*C.capi_mg_ivf_base)((*C.capi_mg_params)(p).base)
	b.n_lists = C.uint32_t(nLists)
	b.add_data_on_build = C.bool(addData)
}

// MgBuild calls cuvsMultiGpu<algo>Build (algo "Cagra", "IvfFlat", "IvfPq").
func (l *Lib) MgBuild(algo string, r Res, params unsafe.Pointer, ds *Tensor, x unsafe.Pointer) error {
	fn := "cuvsMultiGpu" + algo + "Build"
	cn := C.CString(fn)
	defer C.free(unsafe.Pointer(cn))
	return check(fn, C.mg_build(l.l, cn, C.uintptr_t(r), params, tp(ds), x))
}

// MgExtend calls cuvsMultiGpu<algo>Extend (ids may be nil: NULL).
func (l *Lib) MgExtend(algo string, r Res, x unsafe.Pointer, v, ids *Tensor) error {
	fn := "cuvsMultiGpu" + algo + "Extend"
	cn := C.CString(fn)
	defer C.free(unsafe.Pointer(cn))
	return check(fn, C.mg_extend(l.l, cn, C.uintptr_t(r), x, tp(v), tp(ids)))
}

// MgSearch calls cuvsMultiGpu<algo>Search.
func (l *Lib) MgSearch(algo string, r Res, params, x unsafe.Pointer, q, nb, d *Tensor) error {
	fn := "cuvsMultiGpu" + algo + "Search"
	cn := C.CString(fn)
	defer C.free(unsafe.Pointer(cn))
	return check(fn, C.mg_search(l.l, cn, C.uintptr_t(r), params, x, tp(q), tp(nb), tp(d)))
}

// MgFile calls cuvsMultiGpu<algo><op> for op "Serialize", "Deserialize" or
// "Distribute".
func (l *Lib) MgFile(algo, op string, r Res, x unsafe.Pointer, path string) error {
	fn := "cuvsMultiGpu" + algo + op
	cn := C.CString(fn)
	defer C.free(unsafe.Pointer(cn))
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	load := 0
	if op != "Serialize" {
		load = 1
	}
	return check(fn, C.mg_file(l.l, cn, C.uintptr_t(r), x, cp, C.int(load)))
}
