package vamana

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// datasetRule is the tensor rule of cuvsVamanaBuild: float32, int8 or
// uint8 rows, row-major, in host or device memory (cuVS picks the path from
// the tensor).
var datasetRule = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32, dlpack.Int8, dlpack.Uint8}, Rank: 2, RowMajor: true}

// Index is a Vamana graph index (the graph DiskANN searches), built on the
// GPU. cuVS's C API has no search for it: write it with Serialize and
// serve it with DiskANN (or build CAGRA or HNSW for search on the GPU or
// CPU). Serialize may run from several goroutines at once; Close waits for
// them.
type Index struct {
	h        generated.CuvsVamanaIndex_t
	rows     int64
	dim      int64
	degree   int64
	dtype    dlpack.DataType
	borrowed bool
	life     kit.Life
}

// keepsReference reports whether cuVS keeps a view of v rather than a
// copy: device-compatible memory whose rows are a multiple of 16 bytes
// (26.06's make_aligned_dataset, 26.08's padded view when the row width
// already matches), as for CAGRA.
func keepsReference(v *dlpack.View) bool {
	switch v.Device().Type {
	case dlpack.CUDA, dlpack.CUDAHost, dlpack.CUDAManaged:
	default:
		return false
	}
	return (v.Dim(1)*v.DType().ElemSize())%16 == 0
}

// Build makes a Vamana graph of dataset (rows × dim, float32, int8 or
// uint8, row-major, host or device memory, at least two rows): each row is
// inserted by a greedy search from the medoid and its neighbours chosen by
// RobustPrune with p.Alpha, at most p.GraphDegree of them.
//
// cuVS keeps a view of a device dataset whose rows are a multiple of 16
// bytes: the index then borrows it until Close, and its owner (a
// safe.DeviceMatrix, say) refuses to be freed or written meanwhile (see
// Borrows). A device dataset of other widths is copied by cuVS.
//
// A dataset in host memory (kDLCPU: Go memory, say) is copied to device
// memory by Build first: cuVS's host path hands the host pointer to its GPU
// kernels, which fault (cudaErrorIllegalAddress, after which the process's
// CUDA context is unusable; cuVS issue #1380, in v26.06 and v26.08). The
// index owns that copy until Close (or cuVS copies it again, for widths
// other than multiples of 16 bytes, and Build frees it); the caller may
// change or free the host rows once Build returns. Pinned and managed
// memory go to cuVS as they are (its device path).
//
// C calls: cuvsRMMAlloc, cuvsMatrixCopy and cuvsStreamSync for a host
// dataset (its device copy), cuvsVamanaIndexCreate, cuvsVamanaBuild,
// cuvsStreamSync, cuvsVamanaIndexGetDims. Nil params means cuVS's defaults
// (DefaultIndexParams); Build hands them to C as a Go value.
func Build(res *safe.Resources, dataset dlpack.Tensor, params *IndexParams) (*Index, error) {
	const op = "vamana.Build"
	pd, err := kit.Or(params, DefaultIndexParams)
	if err != nil {
		return nil, err
	}
	p := *pd
	dv, err := datasetRule.Take(op, res, dataset)
	if err != nil {
		return nil, err
	}
	if dv.Dim(0) < 2 || dv.Dim(1) < 1 {
		return nil, kit.Argf(op, "dataset", "shape %v, want at least two rows and one column", dv.Shape())
	}
	if dv.Dim(0) >= 1<<31-1 || dv.Dim(1) >= 1<<31-1 {
		return nil, kit.Argf(op, "dataset", "shape %v exceeds cuVS's int counters", dv.Shape())
	}
	if err := p.validate(op, dv.Dim(0), dv.Dim(1), int(dv.DType().ElemSize())); err != nil {
		return nil, err
	}
	// cuVS's host path hands the host pointer to its GPU kernels, which
	// fault on pageable memory (cudaErrorIllegalAddress, and the process's
	// CUDA context is lost: cuVS issue #1380, both releases). Build gives
	// cuVS a device copy instead.
	var freeUpload func() error
	if kit.IsHost(&dv) {
		uv, free, err := kit.Upload(op, "dataset", res, &dv)
		if err != nil {
			return nil, err
		}
		freeUpload = free
		dv = uv
	}
	return build(op, res, dv, &p, freeUpload)
}

// build runs cuvsVamanaBuild over dv, in device-compatible memory. upload,
// if not nil, frees dv (Build's device copy of a host dataset): the index
// owns the copy when cuVS keeps a view of it, and build frees it on return
// otherwise (cuVS then made its own).
func build(op string, res *safe.Resources, dv dlpack.View, p *IndexParams, upload func() error) (*Index, error) {
	handed := false
	if upload != nil {
		defer func() {
			if !handed {
				_ = upload()
			}
		}()
	}
	var h generated.CuvsVamanaIndex_t
	if err := generated.CuvsVamanaIndexCreate(&h); err != nil {
		return nil, kit.Wrap(op, err)
	}
	idx := &Index{h: h}
	kit.Start(&idx.life, idx, "vamana.Index(%p)", liveIndexes, func() error { return generated.CuvsVamanaIndexDestroy(h) })
	_ = idx.life.Keep(res, op) // the build that follows refuses res as Keep would
	switch {
	case keepsReference(&dv) && upload != nil:
		idx.life.Own(upload) // freed after the handle, by Close or a failure below
		handed = true
	case keepsReference(&dv):
		r, err := dv.Retain(idx.life.Label())
		if err != nil {
			idx.life.Fail()
			return nil, kit.Argf(op, "dataset", "%w", err)
		}
		idx.life.Borrow(r)
		idx.borrowed = true
	}
	cp := p.cValue()
	if err := kit.CallWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsVamanaBuild(h, kit.Params[generated.CuvsVamanaIndexParams_t](res, &cp), t[0], idx.h)
	}); err != nil {
		idx.life.Fail()
		return nil, err
	}
	var d int32
	if err := generated.CuvsVamanaIndexGetDims(idx.h, &d); err != nil {
		idx.life.Fail()
		return nil, kit.Wrap(op, err)
	}
	idx.rows, idx.dim, idx.degree, idx.dtype = dv.Dim(0), int64(d), int64(p.GraphDegree), dv.DType()
	return idx, nil
}

// Rows returns the number of rows in the graph (the dataset's).
func (idx *Index) Rows() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.rows)
}

// Dim returns the rows' dimension (cuvsVamanaIndexGetDims, read after
// Build).
func (idx *Index) Dim() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.dim)
}

// GraphDegree returns the most neighbours a row has (IndexParams.
// GraphDegree); rows may have fewer.
func (idx *Index) GraphDegree() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.degree)
}

// DType returns the dataset's element type.
func (idx *Index) DType() dlpack.DataType {
	if idx == nil || idx.life.Closed() {
		return dlpack.DataType{}
	}
	return idx.dtype
}

// Borrows reports whether the index keeps a view of the caller's dataset
// (borrowed until Close) rather than a copy.
func (idx *Index) Borrows() bool { return idx != nil && !idx.life.Closed() && idx.borrowed }

// Serialize writes the index in Microsoft DiskANN's in-memory index format
// to path (cuvsVamanaSerialize, not sector aligned): a 24-byte header
// (uint64 file size, uint32 largest degree, uint32 medoid — the search's
// entry point — and uint64 frozen points, 0), then for each row a uint32
// degree and that many uint32 neighbour ids, little-endian. Unless
// safe.WithoutDataset is given, cuVS also writes the rows to path + ".data" in DiskANN's
// .bin format (int32 rows, int32 dim, the rows); cuVS ignores a failure to
// write that file (it logs it), so Serialize checks that it exists and is
// complete, and reports an error otherwise. DiskANN's in-memory index
// (diskann::Index::load) reads the pair; cuVS's C API reads neither back.
func (idx *Index) Serialize(res *safe.Resources, path string, opts ...safe.SerializeOption) error {
	if idx == nil {
		return kit.NilIndex("vamana.Index.Serialize")
	}
	if err := idx.life.Built("vamana.Index.Serialize"); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	const op = "vamana.Index.Serialize"
	s, err := kit.SerializeSettings(op, opts)
	if err != nil {
		return err
	}
	includeDataset := !s.WithoutDataset
	if err := kit.Serialize(op, res, &idx.life, path, func(h generated.CuvsResources_t, p *byte) error {
		return generated.CuvsVamanaSerialize(h, p, idx.h, includeDataset)
	}); err != nil {
		return err
	}
	if includeDataset {
		return idx.checkDataFile(op, path+".data")
	}
	return nil
}

// Close frees the index (cuvsVamanaIndexDestroy) and ends its borrow of
// the dataset, after the serializations in flight. Closing twice is
// harmless.
func (idx *Index) Close() error {
	if idx == nil {
		return nil
	}
	return idx.life.Close("vamana.Index.Close")
}

// liveIndexes counts the indexes not yet destroyed, for tests' leak checks.
var liveIndexes = live.New("vamana.Index")
