package capi

/*
#include <stdlib.h>
#include <string.h>
#include "capi.h"

// 26.08's cuvsDataset (c/include/cuvs/core/dataset.h).
typedef struct {
  uintptr_t addr;
  void (*destroy_addr)(void*);
  capi_dtype dtype;
  int mem_type;
  int layout;
  bool is_owning;
} capi_dataset;

// 26.08's 48-byte cuvsCagraIndexParams (no compression member).
typedef struct {
  int metric;
  size_t intermediate_graph_degree;
  size_t graph_degree;
  int build_algo;
  size_t nn_descent_niter;
  void* graph_build_params;
} capi_cagra_index_params_2608;

static capi_ret c26_fin(capi_lib* l, int st)
{
  capi_ret r = {st, NULL};
  const char* (*get)(void) = (const char* (*)(void))capi_sym(l, "cuvsGetLastErrorText");
  const char* e = get ? get() : NULL;
  if (e) r.err = strdup(e);
  return r;
}

#define C26(name, type, ...)                              \
  do {                                                    \
    __typeof__(type) fn_ = (type)capi_sym(l, name);       \
    if (!fn_) { capi_ret m_ = {-1, NULL}; return m_; }    \
    return c26_fin(l, fn_(__VA_ARGS__));                  \
  } while (0)

static capi_managed* c26_m(capi_tensor* t) { return t ? &t->m : NULL; }

static capi_ret c26_ds_create(capi_lib* l, capi_dataset** d)
{ C26("cuvsDatasetCreate", int (*)(capi_dataset**), d); }
static capi_ret c26_ds_destroy(capi_lib* l, capi_dataset* d)
{ C26("cuvsDatasetDestroy", int (*)(capi_dataset*), d); }
static capi_ret c26_ds_make_padded(capi_lib* l, uintptr_t r, capi_tensor* t, int mem, capi_dataset** d)
{ C26("cuvsDatasetMakePadded", int (*)(uintptr_t, capi_managed*, int, capi_dataset**), r, c26_m(t), mem, d); }
static capi_ret c26_ds_make_view(capi_lib* l, const char* name, uintptr_t r, capi_tensor* t, capi_dataset** d)
{ C26(name, int (*)(uintptr_t, capi_managed*, capi_dataset**), r, c26_m(t), d); }
static capi_ret c26_ds_get_int(capi_lib* l, const char* name, capi_dataset* d, int* out)
{ C26(name, int (*)(capi_dataset*, int*), d, out); }
static capi_ret c26_ds_get_owning(capi_lib* l, capi_dataset* d, bool* out)
{ C26("cuvsDatasetGetIsOwning", int (*)(capi_dataset*, bool*), d, out); }
static capi_ret c26_ds_get_dtype(capi_lib* l, capi_dataset* d, capi_dtype* out)
{ C26("cuvsDatasetGetDtype", int (*)(capi_dataset*, capi_dtype*), d, out); }

static capi_ret c26_cagra_build(capi_lib* l, uintptr_t r, void* p, capi_dataset* d, capi_index* x)
{ C26("cuvsCagraBuild", int (*)(uintptr_t, void*, capi_dataset*, capi_index*), r, p, d, x); }
static capi_ret c26_cagra_extend(capi_lib* l, uintptr_t r, void* p, capi_dataset* d, int64_t start, capi_index* x)
{ C26("cuvsCagraExtend", int (*)(uintptr_t, void*, capi_dataset*, int64_t, capi_index*), r, p, d, start, x); }
static capi_ret c26_cagra_update(capi_lib* l, uintptr_t r, capi_dataset* d, capi_index* x)
{ C26("cuvsCagraUpdateDataset", int (*)(uintptr_t, capi_dataset*, capi_index*), r, d, x); }
static capi_ret c26_cagra_merge(capi_lib* l, uintptr_t r, void* p, capi_index** in, size_t n,
                                capi_tensor* f, int ftype, capi_dataset* merged, capi_index* out)
{
  capi_filter flt = {f ? (uintptr_t)&f->m : 0, ftype};
  C26("cuvsCagraMerge", int (*)(uintptr_t, void*, capi_index**, size_t, capi_filter, capi_dataset*, capi_index*),
      r, p, in, n, flt, merged, out);
}
static capi_ret c26_cagra_file(capi_lib* l, const char* name, uintptr_t r, const char* path, capi_index* x)
{ C26(name, int (*)(uintptr_t, const char*, capi_index*), r, path, x); }
static capi_ret c26_cagra_deser_ds(capi_lib* l, uintptr_t r, const char* path, capi_index* x, capi_dataset** d)
{ C26("cuvsCagraDeserializeGraphAndDataset", int (*)(uintptr_t, const char*, capi_index*, capi_dataset**), r, path, x, d); }
static capi_ret c26_cagra_mp(capi_lib* l, uintptr_t r, void* p, uint32_t n, capi_index** idx,
                             capi_tensor* q, capi_tensor* pid, capi_tensor* nb, capi_tensor* d,
                             capi_filter* filters)
{
  C26("cuvsCagraSearchMultiPartition",
      int (*)(uintptr_t, void*, uint32_t, capi_index**, capi_managed*, capi_managed*, capi_managed*, capi_managed*, capi_filter*),
      r, p, n, idx, c26_m(q), c26_m(pid), c26_m(nb), c26_m(d), filters);
}
static capi_ret c26_from_dataset(capi_lib* l, void* p, int64_t n, int64_t dim, size_t degree, int metric, size_t q)
{ C26("cuvsCagraIndexParamsFromDataset", int (*)(void*, int64_t, int64_t, size_t, int, size_t), p, n, dim, degree, metric, q); }
static capi_ret c26_select_k(capi_lib* l, uintptr_t r, capi_tensor* in, capi_tensor* ov, capi_tensor* oi)
{ C26("cuvsSelectK", int (*)(uintptr_t, capi_managed*, capi_managed*, capi_managed*), r, c26_m(in), c26_m(ov), c26_m(oi)); }
static capi_ret c26_res_tracking(capi_lib* l, uintptr_t* r, const char* path, int64_t ms)
{ C26("cuvsResourcesCreateWithMemoryTracking", int (*)(uintptr_t*, const char*, int64_t), r, path, ms); }
static capi_ret c26_ws_pool(capi_lib* l, uintptr_t r, size_t n)
{ C26("cuvsResourcesSetWorkspacePool", int (*)(uintptr_t, size_t), r, n); }
static capi_ret c26_async_mr(capi_lib* l)
{ C26("cuvsRMMAsyncMemoryResourceEnable", int (*)(void)); }
*/
import "C"

import "unsafe"

// Dataset memory types and layouts (26.08's cuvsDatasetMemType_t and
// cuvsDatasetLayout_t).
const (
	DatasetHost    = 0
	DatasetDevice  = 1
	LayoutStandard = 0
	LayoutPadded   = 1
)

// Dataset is a 26.08 cuvsDataset_t.
type Dataset struct{ p *C.capi_dataset }

// Nil reports whether the handle is NULL.
func (d Dataset) Nil() bool { return d.p == nil }

// Addr, MemType, Layout, Owning and DType read the struct's fields.
func (d Dataset) Addr() uintptr { return uintptr(d.p.addr) }
func (d Dataset) MemType() int  { return int(d.p.mem_type) }
func (d Dataset) Layout() int   { return int(d.p.layout) }
func (d Dataset) Owning() bool  { return bool(d.p.is_owning) }
func (d Dataset) DType() (code, bits int) {
	return int(d.p.dtype.code), int(d.p.dtype.bits)
}

// DatasetCreate calls cuvsDatasetCreate.
func (l *Lib) DatasetCreate() (Dataset, error) {
	var p *C.capi_dataset
	err := check("cuvsDatasetCreate", C.c26_ds_create(l.l, &p))
	return Dataset{p}, err
}

// DatasetCreateNullOut calls cuvsDatasetCreate(NULL).
func (l *Lib) DatasetCreateNullOut() error {
	return check("cuvsDatasetCreate", C.c26_ds_create(l.l, nil))
}

// DatasetDestroy calls cuvsDatasetDestroy.
func (l *Lib) DatasetDestroy(d Dataset) error {
	return check("cuvsDatasetDestroy", C.c26_ds_destroy(l.l, d.p))
}

// DatasetMakePadded calls cuvsDatasetMakePadded.
func (l *Lib) DatasetMakePadded(r Res, t *Tensor, mem int) (Dataset, error) {
	var p *C.capi_dataset
	err := check("cuvsDatasetMakePadded", C.c26_ds_make_padded(l.l, C.uintptr_t(r), tp(t), C.int(mem), &p))
	return Dataset{p}, err
}

// DatasetMakePaddedView calls cuvsDatasetMakePaddedView.
func (l *Lib) DatasetMakePaddedView(r Res, t *Tensor) (Dataset, error) {
	return l.dsView("cuvsDatasetMakePaddedView", r, t)
}

// DatasetMakeStandardView calls cuvsDatasetMakeStandardView.
func (l *Lib) DatasetMakeStandardView(r Res, t *Tensor) (Dataset, error) {
	return l.dsView("cuvsDatasetMakeStandardView", r, t)
}

func (l *Lib) dsView(name string, r Res, t *Tensor) (Dataset, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var p *C.capi_dataset
	err := check(name, C.c26_ds_make_view(l.l, cn, C.uintptr_t(r), tp(t), &p))
	return Dataset{p}, err
}

// DatasetGetMemType, DatasetGetLayout, DatasetGetIsOwning and DatasetGetDtype
// call the getters.
func (l *Lib) DatasetGetMemType(d Dataset) (int, error) { return l.dsInt("cuvsDatasetGetMemType", d) }
func (l *Lib) DatasetGetLayout(d Dataset) (int, error)  { return l.dsInt("cuvsDatasetGetLayout", d) }
func (l *Lib) DatasetGetIsOwning(d Dataset) (bool, error) {
	var b C.bool
	err := check("cuvsDatasetGetIsOwning", C.c26_ds_get_owning(l.l, d.p, &b))
	return bool(b), err
}
func (l *Lib) DatasetGetDtype(d Dataset) (code, bits int, err error) {
	var dt C.capi_dtype
	err = check("cuvsDatasetGetDtype", C.c26_ds_get_dtype(l.l, d.p, &dt))
	return int(dt.code), int(dt.bits), err
}

func (l *Lib) dsInt(name string, d Dataset) (int, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var v C.int
	err := check(name, C.c26_ds_get_int(l.l, cn, d.p, &v))
	return int(v), err
}

// CagraBuildDataset calls 26.08's cuvsCagraBuild.
func (l *Lib) CagraBuildDataset(r Res, params unsafe.Pointer, d Dataset, x Index) error {
	return check("cuvsCagraBuild", C.c26_cagra_build(l.l, C.uintptr_t(r), params, d.p, x.p))
}

// CagraExtendDataset calls 26.08's cuvsCagraExtend.
func (l *Lib) CagraExtendDataset(r Res, params unsafe.Pointer, d Dataset, newStartRow int64, x Index) error {
	return check("cuvsCagraExtend", C.c26_cagra_extend(l.l, C.uintptr_t(r), params, d.p, C.int64_t(newStartRow), x.p))
}

// CagraUpdateDataset calls cuvsCagraUpdateDataset.
func (l *Lib) CagraUpdateDataset(r Res, d Dataset, x Index) error {
	return check("cuvsCagraUpdateDataset", C.c26_cagra_update(l.l, C.uintptr_t(r), d.p, x.p))
}

// CagraMergeDataset calls 26.08's cuvsCagraMerge.
func (l *Lib) CagraMergeDataset(r Res, params unsafe.Pointer, in []Index, f Filter, merged Dataset, out Index) error {
	arr := (**C.capi_index)(C.calloc(C.size_t(len(in)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(arr))
	s := unsafe.Slice(arr, len(in)+1)
	for i, x := range in {
		s[i] = x.p
	}
	ft, typ := f.c()
	return check("cuvsCagraMerge", C.c26_cagra_merge(l.l, C.uintptr_t(r), params, arr, C.size_t(len(in)), ft, typ, merged.p, out.p))
}

// CagraSerializeGraph calls cuvsCagraSerializeGraph, or
// cuvsCagraSerializeGraphAndDataset when withDataset.
func (l *Lib) CagraSerializeGraph(r Res, path string, x Index, withDataset bool) error {
	name := "cuvsCagraSerializeGraph"
	if withDataset {
		name = "cuvsCagraSerializeGraphAndDataset"
	}
	return l.cagraFile(name, r, path, x)
}

// CagraDeserializeGraph calls cuvsCagraDeserializeGraph.
func (l *Lib) CagraDeserializeGraph(r Res, path string, x Index) error {
	return l.cagraFile("cuvsCagraDeserializeGraph", r, path, x)
}

func (l *Lib) cagraFile(name string, r Res, path string, x Index) error {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	return check(name, C.c26_cagra_file(l.l, cn, C.uintptr_t(r), cp, x.p))
}

// CagraDeserializeGraphAndDataset calls cuvsCagraDeserializeGraphAndDataset
// with a NULL *out_dataset.
func (l *Lib) CagraDeserializeGraphAndDataset(r Res, path string, x Index) (Dataset, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	var p *C.capi_dataset
	err := check("cuvsCagraDeserializeGraphAndDataset", C.c26_cagra_deser_ds(l.l, C.uintptr_t(r), cp, x.p, &p))
	return Dataset{p}, err
}

// CagraSearchMultiPartition calls cuvsCagraSearchMultiPartition; filters nil
// passes NULL.
func (l *Lib) CagraSearchMultiPartition(r Res, params unsafe.Pointer, idx []Index, q, pids, nb, d *Tensor, filters []Filter) error {
	arr := (**C.capi_index)(C.calloc(C.size_t(len(idx)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(arr))
	s := unsafe.Slice(arr, len(idx)+1)
	for i, x := range idx {
		s[i] = x.p
	}
	var fs *C.capi_filter
	if filters != nil {
		fs = (*C.capi_filter)(C.calloc(C.size_t(len(filters)+1), C.size_t(unsafe.Sizeof(C.capi_filter{}))))
		defer C.free(unsafe.Pointer(fs))
		fsl := unsafe.Slice(fs, len(filters)+1)
		for i, f := range filters {
			ft, typ := f.c()
			fsl[i].addr = 0
			if ft != nil {
				fsl[i].addr = C.uintptr_t(uintptr(unsafe.Pointer(&ft.m)))
			}
			fsl[i]._type = typ
		}
	}
	return check("cuvsCagraSearchMultiPartition", C.c26_cagra_mp(l.l, C.uintptr_t(r), params, C.uint32_t(len(idx)), arr, tp(q), tp(pids), tp(nb), tp(d), fs))
}

// CagraSearchMultiPartitionN is CagraSearchMultiPartition with an explicit
// num_partitions (for its refusals).
func (l *Lib) CagraSearchMultiPartitionN(r Res, params unsafe.Pointer, n uint32, idx []Index, q, pids, nb, d *Tensor) error {
	var arr **C.capi_index
	if idx != nil {
		arr = (**C.capi_index)(C.calloc(C.size_t(len(idx)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
		defer C.free(unsafe.Pointer(arr))
		s := unsafe.Slice(arr, len(idx)+1)
		for i, x := range idx {
			s[i] = x.p
		}
	}
	return check("cuvsCagraSearchMultiPartition", C.c26_cagra_mp(l.l, C.uintptr_t(r), params, C.uint32_t(n), arr, tp(q), tp(pids), tp(nb), tp(d), nil))
}

// FromDataset calls cuvsCagraIndexParamsFromDataset.
func (l *Lib) FromDataset(p unsafe.Pointer, n, dim int64, degree, metric, quality int) error {
	return check("cuvsCagraIndexParamsFromDataset", C.c26_from_dataset(l.l, p, C.int64_t(n), C.int64_t(dim), C.size_t(degree), C.int(metric), C.size_t(quality)))
}

// SelectK calls cuvsSelectK.
func (l *Lib) SelectK(r Res, in, outVal, outIdx *Tensor) error {
	return check("cuvsSelectK", C.c26_select_k(l.l, C.uintptr_t(r), tp(in), tp(outVal), tp(outIdx)))
}

// ResourcesCreateWithMemoryTracking calls cuvsResourcesCreateWithMemoryTracking.
func (l *Lib) ResourcesCreateWithMemoryTracking(path string, intervalMS int64) (Res, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	var r C.uintptr_t
	err := check("cuvsResourcesCreateWithMemoryTracking", C.c26_res_tracking(l.l, &r, cp, C.int64_t(intervalMS)))
	return Res(r), err
}

// SetWorkspacePool calls cuvsResourcesSetWorkspacePool.
func (l *Lib) SetWorkspacePool(r Res, bytes int) error {
	return check("cuvsResourcesSetWorkspacePool", C.c26_ws_pool(l.l, C.uintptr_t(r), C.size_t(bytes)))
}

// AsyncMemoryResourceEnable calls cuvsRMMAsyncMemoryResourceEnable.
func (l *Lib) AsyncMemoryResourceEnable() error {
	return check("cuvsRMMAsyncMemoryResourceEnable", C.c26_async_mr(l.l))
}

// CagraIndexParams2608 is 26.08's cuvsCagraIndexParams, but for
// graph_build_params.
type CagraIndexParams2608 struct {
	Metric                  int
	IntermediateGraphDegree int
	GraphDegree             int
	BuildAlgo               int
	NNDescentNiter          int
	GraphBuildParams        unsafe.Pointer
}

// GetCagraIndexParams2608 reads *p as 26.08's layout.
func GetCagraIndexParams2608(p unsafe.Pointer) CagraIndexParams2608 {
	c := (*C.capi_cagra_index_params_2608)(p)
	return CagraIndexParams2608{int(c.metric), int(c.intermediate_graph_degree), int(c.graph_degree),
		int(c.build_algo), int(c.nn_descent_niter), c.graph_build_params}
}

// SetCagraIndexParams2608 writes *p as 26.08's layout, graph_build_params
// included.
func SetCagraIndexParams2608(p unsafe.Pointer, v CagraIndexParams2608) {
	c := (*C.capi_cagra_index_params_2608)(p)
	c.metric = C.int(v.Metric)
	c.intermediate_graph_degree = C.size_t(v.IntermediateGraphDegree)
	c.graph_degree = C.size_t(v.GraphDegree)
	c.build_algo = C.int(v.BuildAlgo)
	c.nn_descent_niter = C.size_t(v.NNDescentNiter)
	c.graph_build_params = v.GraphBuildParams
}

// CagraIndexParams2608Size is sizeof(26.08's cuvsCagraIndexParams).
const CagraIndexParams2608Size = int(unsafe.Sizeof(C.capi_cagra_index_params_2608{}))

// Must2 is Must for two results.
func Must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}
