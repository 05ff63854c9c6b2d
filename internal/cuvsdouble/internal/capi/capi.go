// Package capi calls the libcuvs_c ABI directly, through dlsym, for the
// tests of the test double itself (it does not depend on the generated
// bindings). Every wrapper reads the error text in the same C call as the
// function it wraps. All memory it deals in (tensors, handles, data) is C
// memory.
package capi

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include <string.h>
#include "capi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// DLPack device types and dtype codes used by the tests.
const (
	CPU         = 1
	CUDA        = 2
	CUDAHost    = 3
	CUDAManaged = 13

	Int   = 0
	UInt  = 1
	Float = 2
)

// cuVS enum values used by the tests.
const (
	L2Expanded     = 0
	L2SqrtExpanded = 1
	CosineExpanded = 2
	L1             = 3
	InnerProduct   = 6
	Hellinger      = 12
	Haversine      = 13
	BrayCurtis     = 14
	JensenShannon  = 15
	KLDivergence   = 17
	BitwiseHamming = 20

	NoFilter = 0
	Bitset   = 1
	Bitmap   = 2

	AutoSelect = 0
	IvfPq      = 1
	NNDescent  = 2
	Iterative  = 3
	Ace        = 4
)

// Error is a failed call: CUVS_ERROR with the error text, or a missing symbol.
type Error struct {
	Func    string
	Text    string
	Missing bool
}

func (e *Error) Error() string {
	if e.Missing {
		return e.Func + ": symbol missing"
	}
	return e.Func + ": " + e.Text
}

// Lib is an opened library.
type Lib struct{ l *C.capi_lib }

// Open dlopens path (RTLD_NOW|RTLD_LOCAL).
func Open(path string) (*Lib, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	var cerr *C.char
	l := C.capi_open(cp, &cerr)
	if l == nil {
		defer C.free(unsafe.Pointer(cerr))
		return nil, errors.New(C.GoString(cerr))
	}
	return &Lib{l}, nil
}

// Close dlcloses the library.
func (l *Lib) Close() { C.capi_close(l.l); l.l = nil }

// Has reports whether the library exports name.
func (l *Lib) Has(name string) bool {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.capi_has(l.l, cn) != 0
}

func check(fn string, r C.capi_ret) error {
	text, had := "", r.err != nil
	if had {
		text = C.GoString(r.err)
		C.free(unsafe.Pointer(r.err))
	}
	switch r.st {
	case 1:
		// cuvsVersionGet neither sets nor clears the text, so one may linger
		if had && fn != "cuvsVersionGet" {
			return &Error{Func: fn, Text: "succeeded but left an error text: " + text}
		}
		return nil
	case -1:
		return &Error{Func: fn, Missing: true}
	default:
		return &Error{Func: fn, Text: text}
	}
}

// LastText reads cuvsGetLastErrorText in a call of its own: the caller must
// have locked its OS thread. ok is false for NULL.
func (l *Lib) LastText() (text string, ok bool) {
	p := C.capi_last_text(l.l)
	if p == nil {
		return "", false
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoString(p), true
}

// SetLastText calls cuvsSetLastErrorText ("" passes NULL when null is true).
func (l *Lib) SetLastText(text string, null bool) {
	if null {
		C.capi_set_last_text(l.l, nil)
		return
	}
	ct := C.CString(text)
	defer C.free(unsafe.Pointer(ct))
	C.capi_set_last_text(l.l, ct)
}

// Version calls cuvsVersionGet.
func (l *Lib) Version() (major, minor, patch uint16, err error) {
	var a, b, c C.uint16_t
	err = check("cuvsVersionGet", C.capi_version(l.l, &a, &b, &c))
	return uint16(a), uint16(b), uint16(c), err
}

// LogLevel calls cuvsGetLogLevel.
func (l *Lib) LogLevel() int { return int(C.capi_get_log_level(l.l)) }

// SetLogLevel calls cuvsSetLogLevel.
func (l *Lib) SetLogLevel(level int) { C.capi_set_log_level(l.l, C.int(level)) }

// Res is a cuvsResources_t.
type Res uintptr

// ResourcesCreate calls cuvsResourcesCreate (multi: cuvsMultiGpuResourcesCreate).
func (l *Lib) ResourcesCreate(multi bool) (Res, error) {
	var r C.uintptr_t
	fn := "cuvsResourcesCreate"
	if multi {
		fn = "cuvsMultiGpuResourcesCreate"
	}
	err := check(fn, C.capi_resources_create(l.l, &r, b2i(multi)))
	return Res(r), err
}

// ResourcesDestroy calls cuvsResourcesDestroy (multi: the multi-GPU one).
func (l *Lib) ResourcesDestroy(r Res, multi bool) error {
	return check("cuvsResourcesDestroy", C.capi_resources_destroy(l.l, C.uintptr_t(r), b2i(multi)))
}

// StreamSet calls cuvsStreamSet.
func (l *Lib) StreamSet(r Res, stream uintptr) error {
	return check("cuvsStreamSet", C.capi_stream_set(l.l, C.uintptr_t(r), C.uintptr_t(stream)))
}

// StreamGet calls cuvsStreamGet.
func (l *Lib) StreamGet(r Res) (uintptr, error) {
	var s C.uintptr_t
	err := check("cuvsStreamGet", C.capi_stream_get(l.l, C.uintptr_t(r), &s))
	return uintptr(s), err
}

// StreamSync calls cuvsStreamSync.
func (l *Lib) StreamSync(r Res) error {
	return check("cuvsStreamSync", C.capi_stream_sync(l.l, C.uintptr_t(r)))
}

// DeviceID calls cuvsDeviceIdGet.
func (l *Lib) DeviceID(r Res) (int, error) {
	var id C.int
	err := check("cuvsDeviceIdGet", C.capi_device_id(l.l, C.uintptr_t(r), &id))
	return int(id), err
}

// RMMAlloc calls cuvsRMMAlloc.
func (l *Lib) RMMAlloc(r Res, n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := check("cuvsRMMAlloc", C.capi_rmm_alloc(l.l, C.uintptr_t(r), &p, C.size_t(n)))
	return p, err
}

// RMMFree calls cuvsRMMFree.
func (l *Lib) RMMFree(r Res, p unsafe.Pointer, n int) error {
	return check("cuvsRMMFree", C.capi_rmm_free(l.l, C.uintptr_t(r), p, C.size_t(n)))
}

// HostAlloc calls cuvsRMMHostAlloc.
func (l *Lib) HostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := check("cuvsRMMHostAlloc", C.capi_host_alloc(l.l, &p, C.size_t(n)))
	return p, err
}

// HostFree calls cuvsRMMHostFree.
func (l *Lib) HostFree(p unsafe.Pointer, n int) error {
	return check("cuvsRMMHostFree", C.capi_host_free(l.l, p, C.size_t(n)))
}

// PoolEnable calls cuvsRMMPoolMemoryResourceEnable.
func (l *Lib) PoolEnable(initial, max int, managed bool) error {
	return check("cuvsRMMPoolMemoryResourceEnable", C.capi_pool_enable(l.l, C.int(initial), C.int(max), b2i(managed)))
}

// PoolReset calls cuvsRMMMemoryResourceReset.
func (l *Lib) PoolReset() error {
	return check("cuvsRMMMemoryResourceReset", C.capi_pool_reset(l.l))
}

// Tensor is a DLManagedTensor in C memory with room for its shape/strides.
type Tensor struct{ p *C.capi_tensor }

// NewTensor describes data (C memory) of the given device type, dtype and
// shape, row-major (no strides).
func NewTensor(data unsafe.Pointer, device int, code, bits int, shape ...int64) *Tensor {
	p := (*C.capi_tensor)(C.calloc(1, C.size_t(unsafe.Sizeof(C.capi_tensor{}))))
	p.m.dl_tensor.data = data
	p.m.dl_tensor.device.device_type = C.int32_t(device)
	p.m.dl_tensor.ndim = C.int32_t(len(shape))
	p.m.dl_tensor.dtype.code = C.uint8_t(code)
	p.m.dl_tensor.dtype.bits = C.uint8_t(bits)
	p.m.dl_tensor.dtype.lanes = 1
	for i, s := range shape {
		p.shape[i] = C.int64_t(s)
	}
	p.m.dl_tensor.shape = &p.shape[0]
	return &Tensor{p}
}

// Empty returns a zeroed tensor, to be filled by the library.
func Empty() *Tensor {
	return &Tensor{(*C.capi_tensor)(C.calloc(1, C.size_t(unsafe.Sizeof(C.capi_tensor{}))))}
}

// SetStrides gives the tensor explicit strides (in elements).
func (t *Tensor) SetStrides(strides ...int64) {
	for i, s := range strides {
		t.p.strides[i] = C.int64_t(s)
	}
	t.p.m.dl_tensor.strides = &t.p.strides[0]
}

// SetByteOffset sets dl_tensor.byte_offset.
func (t *Tensor) SetByteOffset(off uint64) { t.p.m.dl_tensor.byte_offset = C.uint64_t(off) }

// Free releases the tensor struct (not its data).
func (t *Tensor) Free() { C.free(unsafe.Pointer(t.p)); t.p = nil }

// Data is dl_tensor.data.
func (t *Tensor) Data() unsafe.Pointer { return t.p.m.dl_tensor.data }

// Device is dl_tensor.device.device_type.
func (t *Tensor) Device() int { return int(t.p.m.dl_tensor.device.device_type) }

// DType returns the dtype code and bits.
func (t *Tensor) DType() (code, bits int) {
	return int(t.p.m.dl_tensor.dtype.code), int(t.p.m.dl_tensor.dtype.bits)
}

// Shape copies dl_tensor.shape.
func (t *Tensor) Shape() []int64 {
	n := int(t.p.m.dl_tensor.ndim)
	if t.p.m.dl_tensor.shape == nil {
		return nil
	}
	s := unsafe.Slice((*int64)(unsafe.Pointer(t.p.m.dl_tensor.shape)), n)
	return append([]int64(nil), s...)
}

// Strides copies dl_tensor.strides (nil when NULL).
func (t *Tensor) Strides() []int64 {
	if t.p.m.dl_tensor.strides == nil {
		return nil
	}
	s := unsafe.Slice((*int64)(unsafe.Pointer(t.p.m.dl_tensor.strides)), int(t.p.m.dl_tensor.ndim))
	return append([]int64(nil), s...)
}

// HasDeleter reports whether the library installed a deleter.
func (t *Tensor) HasDeleter() bool { return t.p.m.deleter != nil }

// CallDeleter calls the deleter, if any.
func (t *Tensor) CallDeleter() { C.capi_call_deleter(t.p) }

// MatrixCopy calls cuvsMatrixCopy.
func (l *Lib) MatrixCopy(r Res, src, dst *Tensor) error {
	return check("cuvsMatrixCopy", C.capi_matrix_copy(l.l, C.uintptr_t(r), src.p, dst.p))
}

// MatrixSliceRows calls cuvsMatrixSliceRows into a fresh tensor.
func (l *Lib) MatrixSliceRows(r Res, src *Tensor, start, end int64) (*Tensor, error) {
	dst := Empty()
	err := check("cuvsMatrixSliceRows", C.capi_matrix_slice(l.l, C.uintptr_t(r), src.p, C.int64_t(start), C.int64_t(end), dst.p))
	return dst, err
}

// Index is a cuvsBruteForceIndex_t or cuvsCagraIndex_t.
type Index struct{ p *C.capi_index }

// Addr is the index's addr field (0 until built).
func (x Index) Addr() uintptr { return uintptr(x.p.addr) }

// DType is the index's dtype field.
func (x Index) DType() (code, bits, lanes int) {
	return int(x.p.dtype.code), int(x.p.dtype.bits), int(x.p.dtype.lanes)
}

// Filter is a cuvsFilter: a uint32 tensor and a filter type.
type Filter struct {
	Words *Tensor
	Type  int
}

func (f Filter) c() (*C.capi_tensor, C.int) {
	if f.Words == nil {
		return nil, C.int(f.Type)
	}
	return f.Words.p, C.int(f.Type)
}

// BFCreate calls cuvsBruteForceIndexCreate.
func (l *Lib) BFCreate() (Index, error) {
	var p *C.capi_index
	err := check("cuvsBruteForceIndexCreate", C.capi_bf_create(l.l, &p))
	return Index{p}, err
}

// BFDestroy calls cuvsBruteForceIndexDestroy.
func (l *Lib) BFDestroy(x Index) error {
	return check("cuvsBruteForceIndexDestroy", C.capi_bf_destroy(l.l, x.p))
}

// BFBuild calls cuvsBruteForceBuild.
func (l *Lib) BFBuild(r Res, ds *Tensor, metric int, arg float32, x Index) error {
	return check("cuvsBruteForceBuild", C.capi_bf_build(l.l, C.uintptr_t(r), tp(ds), C.int(metric), C.float(arg), x.p))
}

// BFSearch calls cuvsBruteForceSearch.
func (l *Lib) BFSearch(r Res, x Index, q, nb, d *Tensor, f Filter) error {
	ft, typ := f.c()
	return check("cuvsBruteForceSearch", C.capi_bf_search(l.l, C.uintptr_t(r), x.p, tp(q), tp(nb), tp(d), ft, typ))
}

// BFSerialize calls cuvsBruteForceSerialize.
func (l *Lib) BFSerialize(r Res, path string, x Index) error {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	return check("cuvsBruteForceSerialize", C.capi_bf_serialize(l.l, C.uintptr_t(r), cp, x.p))
}

// BFDeserialize calls cuvsBruteForceDeserialize.
func (l *Lib) BFDeserialize(r Res, path string, x Index) error {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	return check("cuvsBruteForceDeserialize", C.capi_bf_deserialize(l.l, C.uintptr_t(r), cp, x.p))
}

// ParamsCreate calls cuvs<kind>Create, e.g. kind "CagraIndexParams".
func (l *Lib) ParamsCreate(kind string) (unsafe.Pointer, error) {
	ck := C.CString(kind)
	defer C.free(unsafe.Pointer(ck))
	var p unsafe.Pointer
	err := check("cuvs"+kind+"Create", C.capi_params_create(l.l, ck, &p))
	return p, err
}

// ParamsDestroy calls cuvs<kind>Destroy.
func (l *Lib) ParamsDestroy(kind string, p unsafe.Pointer) error {
	ck := C.CString(kind)
	defer C.free(unsafe.Pointer(ck))
	return check("cuvs"+kind+"Destroy", C.capi_params_destroy(l.l, ck, p))
}

// FromHnswParams calls cuvsCagraIndexParamsFromHnswParams.
func (l *Lib) FromHnswParams(p unsafe.Pointer, n, dim int64, m, ef, heuristic, metric int) error {
	return check("cuvsCagraIndexParamsFromHnswParams", C.capi_from_hnsw(l.l, p, C.int64_t(n), C.int64_t(dim), C.int(m), C.int(ef), C.int(heuristic), C.int(metric)))
}

// CagraCreate calls cuvsCagraIndexCreate.
func (l *Lib) CagraCreate() (Index, error) {
	var p *C.capi_index
	err := check("cuvsCagraIndexCreate", C.capi_cagra_create(l.l, &p))
	return Index{p}, err
}

// CagraDestroy calls cuvsCagraIndexDestroy.
func (l *Lib) CagraDestroy(x Index) error {
	return check("cuvsCagraIndexDestroy", C.capi_cagra_destroy(l.l, x.p))
}

// CagraBuild calls cuvsCagraBuild.
func (l *Lib) CagraBuild(r Res, params unsafe.Pointer, ds *Tensor, x Index) error {
	return check("cuvsCagraBuild", C.capi_cagra_build(l.l, C.uintptr_t(r), params, tp(ds), x.p))
}

// CagraSearch calls cuvsCagraSearch.
func (l *Lib) CagraSearch(r Res, params unsafe.Pointer, x Index, q, nb, d *Tensor, f Filter) error {
	ft, typ := f.c()
	return check("cuvsCagraSearch", C.capi_cagra_search(l.l, C.uintptr_t(r), params, x.p, tp(q), tp(nb), tp(d), ft, typ))
}

// CagraExtend calls cuvsCagraExtend.
func (l *Lib) CagraExtend(r Res, params unsafe.Pointer, add *Tensor, x Index) error {
	return check("cuvsCagraExtend", C.capi_cagra_extend(l.l, C.uintptr_t(r), params, tp(add), x.p))
}

// CagraSerialize calls cuvsCagraSerialize.
func (l *Lib) CagraSerialize(r Res, path string, x Index, includeDataset bool) error {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	return check("cuvsCagraSerialize", C.capi_cagra_serialize(l.l, C.uintptr_t(r), cp, x.p, b2i(includeDataset)))
}

// CagraSerializeToHnswlib calls cuvsCagraSerializeToHnswlib.
func (l *Lib) CagraSerializeToHnswlib(r Res, path string, x Index) error {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	return check("cuvsCagraSerializeToHnswlib", C.capi_cagra_serialize_hnsw(l.l, C.uintptr_t(r), cp, x.p))
}

// CagraDeserialize calls cuvsCagraDeserialize.
func (l *Lib) CagraDeserialize(r Res, path string, x Index) error {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	return check("cuvsCagraDeserialize", C.capi_cagra_deserialize(l.l, C.uintptr_t(r), cp, x.p))
}

// CagraFromArgs calls cuvsCagraIndexFromArgs.
func (l *Lib) CagraFromArgs(r Res, metric int, graph, ds *Tensor, x Index) error {
	return check("cuvsCagraIndexFromArgs", C.capi_cagra_from_args(l.l, C.uintptr_t(r), C.int(metric), tp(graph), tp(ds), x.p))
}

// CagraMerge calls cuvsCagraMerge.
func (l *Lib) CagraMerge(r Res, params unsafe.Pointer, in []Index, f Filter, out Index) error {
	arr := (**C.capi_index)(C.calloc(C.size_t(len(in)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(arr))
	s := unsafe.Slice(arr, len(in)+1)
	for i, x := range in {
		s[i] = x.p
	}
	ft, typ := f.c()
	return check("cuvsCagraMerge", C.capi_cagra_merge(l.l, C.uintptr_t(r), params, arr, C.size_t(len(in)), ft, typ, out.p))
}

// CagraDims, CagraSize and CagraGraphDegree call the getters.
func (l *Lib) CagraDims(x Index) (int64, error) { return l.cagraGet(x, 0, "cuvsCagraIndexGetDims") }
func (l *Lib) CagraSize(x Index) (int64, error) { return l.cagraGet(x, 1, "cuvsCagraIndexGetSize") }
func (l *Lib) CagraGraphDegree(x Index) (int64, error) {
	return l.cagraGet(x, 2, "cuvsCagraIndexGetGraphDegree")
}

func (l *Lib) cagraGet(x Index, which int, fn string) (int64, error) {
	var v C.int64_t
	err := check(fn, C.capi_cagra_get(l.l, x.p, C.int(which), &v))
	return int64(v), err
}

// CagraDataset calls cuvsCagraIndexGetDataset into a fresh tensor.
func (l *Lib) CagraDataset(x Index) (*Tensor, error) {
	t := Empty()
	err := check("cuvsCagraIndexGetDataset", C.capi_cagra_view(l.l, x.p, 0, t.p))
	return t, err
}

// CagraGraph calls cuvsCagraIndexGetGraph into a fresh tensor.
func (l *Lib) CagraGraph(x Index) (*Tensor, error) {
	t := Empty()
	err := check("cuvsCagraIndexGetGraph", C.capi_cagra_view(l.l, x.p, 1, t.p))
	return t, err
}

// CagraIndexParams mirrors struct cuvsCagraIndexParams.
type CagraIndexParams struct {
	Metric                  int
	IntermediateGraphDegree uint64
	GraphDegree             uint64
	BuildAlgo               int
	NNDescentNiter          uint64
	Compression             unsafe.Pointer
	GraphBuildParams        unsafe.Pointer
}

// GetCagraIndexParams reads *p.
func GetCagraIndexParams(p unsafe.Pointer) CagraIndexParams {
	c := (*C.capi_cagra_index_params)(p)
	return CagraIndexParams{int(c.metric), uint64(c.intermediate_graph_degree), uint64(c.graph_degree),
		int(c.build_algo), uint64(c.nn_descent_niter), c.compression, c.graph_build_params}
}

// SetCagraIndexParams writes *p.
func SetCagraIndexParams(p unsafe.Pointer, v CagraIndexParams) {
	c := (*C.capi_cagra_index_params)(p)
	c.metric = C.int(v.Metric)
	c.intermediate_graph_degree = C.size_t(v.IntermediateGraphDegree)
	c.graph_degree = C.size_t(v.GraphDegree)
	c.build_algo = C.int(v.BuildAlgo)
	c.nn_descent_niter = C.size_t(v.NNDescentNiter)
	c.compression = v.Compression
	c.graph_build_params = v.GraphBuildParams
}

// IvfPqParams mirrors struct cuvsIvfPqParams.
type IvfPqParams struct {
	BuildParams, SearchParams unsafe.Pointer
	RefinementRate            float32
}

// GetIvfPqParams reads *p.
func GetIvfPqParams(p unsafe.Pointer) IvfPqParams {
	c := (*C.capi_ivf_pq_params)(p)
	return IvfPqParams{c.ivf_pq_build_params, c.ivf_pq_search_params, float32(c.refinement_rate)}
}

// SetIvfPqParams writes *p.
func SetIvfPqParams(p unsafe.Pointer, v IvfPqParams) {
	c := (*C.capi_ivf_pq_params)(p)
	c.ivf_pq_build_params = v.BuildParams
	c.ivf_pq_search_params = v.SearchParams
	c.refinement_rate = C.float(v.RefinementRate)
}

// CompressionParams mirrors struct cuvsCagraCompressionParams.
type CompressionParams struct {
	PqBits, PqDim, VqNCenters, KmeansNIters            uint32
	VqKmeansTrainsetFraction, PqKmeansTrainsetFraction float64
}

// GetCompressionParams reads *p.
func GetCompressionParams(p unsafe.Pointer) CompressionParams {
	c := (*C.capi_compression_params)(p)
	return CompressionParams{uint32(c.pq_bits), uint32(c.pq_dim), uint32(c.vq_n_centers), uint32(c.kmeans_n_iters),
		float64(c.vq_kmeans_trainset_fraction), float64(c.pq_kmeans_trainset_fraction)}
}

// AceParams mirrors struct cuvsAceParams.
type AceParams struct {
	NPartitions, EfConstruction     uint64
	BuildDir                        string
	BuildDirNull                    bool
	UseDisk                         bool
	MaxHostMemoryGB, MaxGPUMemoryGB float64
}

// GetAceParams reads *p.
func GetAceParams(p unsafe.Pointer) AceParams {
	c := (*C.capi_ace_params)(p)
	a := AceParams{NPartitions: uint64(c.npartitions), EfConstruction: uint64(c.ef_construction),
		UseDisk: bool(c.use_disk), MaxHostMemoryGB: float64(c.max_host_memory_gb), MaxGPUMemoryGB: float64(c.max_gpu_memory_gb)}
	if c.build_dir == nil {
		a.BuildDirNull = true
	} else {
		a.BuildDir = C.GoString(c.build_dir)
	}
	return a
}

// SetAceBuildDirNull sets build_dir to NULL, returning the old pointer (to be
// freed with C.free by the caller via FreeC).
func SetAceBuildDirNull(p unsafe.Pointer) unsafe.Pointer {
	c := (*C.capi_ace_params)(p)
	old := unsafe.Pointer(c.build_dir)
	c.build_dir = nil
	return old
}

// FreeC frees C memory.
func FreeC(p unsafe.Pointer) { C.free(p) }

// ExtendParams mirrors struct cuvsCagraExtendParams.
type ExtendParams struct{ MaxChunkSize uint32 }

// GetExtendParams reads *p.
func GetExtendParams(p unsafe.Pointer) ExtendParams {
	return ExtendParams{uint32((*C.capi_extend_params)(p).max_chunk_size)}
}

// SearchParams mirrors struct cuvsCagraSearchParams.
type SearchParams struct {
	MaxQueries, ItopkSize, MaxIterations uint64
	Algo                                 int
	TeamSize, SearchWidth, MinIterations uint64
	ThreadBlockSize                      uint64
	HashmapMode                          int
	HashmapMinBitlen                     uint64
	HashmapMaxFillRate                   float32
	NumRandomSamplings                   uint32
	RandXorMask                          uint64
	Persistent                           bool
	PersistentLifetime                   float32
	PersistentDeviceUsage                float32
}

// GetSearchParams reads *p.
func GetSearchParams(p unsafe.Pointer) SearchParams {
	c := (*C.capi_search_params)(p)
	return SearchParams{uint64(c.max_queries), uint64(c.itopk_size), uint64(c.max_iterations), int(c.algo),
		uint64(c.team_size), uint64(c.search_width), uint64(c.min_iterations), uint64(c.thread_block_size),
		int(c.hashmap_mode), uint64(c.hashmap_min_bitlen), float32(c.hashmap_max_fill_rate),
		uint32(c.num_random_samplings), uint64(c.rand_xor_mask), bool(c.persistent),
		float32(c.persistent_lifetime), float32(c.persistent_device_usage)}
}

// SetSearchParams writes *p.
func SetSearchParams(p unsafe.Pointer, v SearchParams) {
	c := (*C.capi_search_params)(p)
	c.max_queries = C.size_t(v.MaxQueries)
	c.itopk_size = C.size_t(v.ItopkSize)
	c.max_iterations = C.size_t(v.MaxIterations)
	c.algo = C.int(v.Algo)
	c.team_size = C.size_t(v.TeamSize)
	c.search_width = C.size_t(v.SearchWidth)
	c.min_iterations = C.size_t(v.MinIterations)
	c.thread_block_size = C.size_t(v.ThreadBlockSize)
	c.hashmap_mode = C.int(v.HashmapMode)
	c.hashmap_min_bitlen = C.size_t(v.HashmapMinBitlen)
	c.hashmap_max_fill_rate = C.float(v.HashmapMaxFillRate)
	c.num_random_samplings = C.uint32_t(v.NumRandomSamplings)
	c.rand_xor_mask = C.uint64_t(v.RandXorMask)
	c.persistent = C.bool(v.Persistent)
	c.persistent_lifetime = C.float(v.PersistentLifetime)
	c.persistent_device_usage = C.float(v.PersistentDeviceUsage)
}

// IvfPqIndexParams mirrors struct cuvsIvfPqIndexParams.
type IvfPqIndexParams struct {
	Metric                       int
	MetricArg                    float32
	AddDataOnBuild               bool
	NLists, KmeansNIters         uint32
	KmeansTrainsetFraction       float64
	PqBits, PqDim                uint32
	CodebookKind                 int
	ForceRandomRotation          bool
	ConservativeMemoryAllocation bool
	MaxTrainPointsPerPqCode      uint32
	CodesLayout                  int
}

// GetIvfPqIndexParams reads *p.
func GetIvfPqIndexParams(p unsafe.Pointer) IvfPqIndexParams {
	c := (*C.capi_ivf_pq_index_params)(p)
	return IvfPqIndexParams{int(c.metric), float32(c.metric_arg), bool(c.add_data_on_build), uint32(c.n_lists),
		uint32(c.kmeans_n_iters), float64(c.kmeans_trainset_fraction), uint32(c.pq_bits), uint32(c.pq_dim),
		int(c.codebook_kind), bool(c.force_random_rotation), bool(c.conservative_memory_allocation),
		uint32(c.max_train_points_per_pq_code), int(c.codes_layout)}
}

// IvfPqSearchParams mirrors struct cuvsIvfPqSearchParams.
type IvfPqSearchParams struct {
	NProbes                                            uint32
	LutDtype, InternalDistanceDtype, CoarseSearchDtype int
	MaxInternalBatchSize                               uint32
	PreferredShmemCarveout                             float64
}

// GetIvfPqSearchParams reads *p.
func GetIvfPqSearchParams(p unsafe.Pointer) IvfPqSearchParams {
	c := (*C.capi_ivf_pq_search_params)(p)
	return IvfPqSearchParams{uint32(c.n_probes), int(c.lut_dtype), int(c.internal_distance_dtype),
		int(c.coarse_search_dtype), uint32(c.max_internal_batch_size), float64(c.preferred_shmem_carveout)}
}

// NNDescentParams mirrors struct cuvsNNDescentIndexParams.
type NNDescentParams struct {
	Metric                               int
	MetricArg                            float32
	GraphDegree, IntermediateGraphDegree uint64
	MaxIterations                        uint64
	TerminationThreshold                 float32
	ReturnDistances                      bool
	DistCompDtype                        int
}

// GetNNDescentParams reads *p.
func GetNNDescentParams(p unsafe.Pointer) NNDescentParams {
	c := (*C.capi_nnd_params)(p)
	return NNDescentParams{int(c.metric), float32(c.metric_arg), uint64(c.graph_degree),
		uint64(c.intermediate_graph_degree), uint64(c.max_iterations), float32(c.termination_threshold),
		bool(c.return_distances), int(c.dist_comp_dtype)}
}

// Malloc allocates n bytes of C memory (zeroed).
func Malloc(n int) unsafe.Pointer { return C.calloc(1, C.size_t(n)) }

// CopyIn copies src into C memory at dst.
func CopyIn[T any](dst unsafe.Pointer, src []T) {
	if len(src) == 0 {
		return
	}
	var z T
	C.memcpy(dst, unsafe.Pointer(&src[0]), C.size_t(uintptr(len(src))*unsafe.Sizeof(z)))
}

// CopyOut copies n elements of C memory at src into a new slice.
func CopyOut[T any](src unsafe.Pointer, n int) []T {
	if n == 0 {
		return nil
	}
	// Device and pinned memory is written asynchronously, on streams: wait
	// for all of it, as a host read of device memory must.
	C.capi_device_sync()
	return append([]T(nil), unsafe.Slice((*T)(src), n)...)
}

func tp(t *Tensor) *C.capi_tensor {
	if t == nil {
		return nil
	}
	return t.p
}

func b2i(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Must panics on err; for test set-up steps.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return v
}
