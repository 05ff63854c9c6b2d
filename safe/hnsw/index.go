package hnsw

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/cagraref"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/stream"
)

var elemTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16, dlpack.Int8, dlpack.Uint8}

// The tensor rules of HNSW, in one place (c/src/neighbors/hnsw.cpp): every
// tensor is a host_matrix_view (from_dlpack: CPU, pinned or managed
// memory), row-major; neighbors are uint64 in C (int64, the family's, is
// handed to C as uint64: the ids are rows, below 2^63), distances float32.
var (
	datasetRule = kit.Rule{Arg: "dataset", Memory: kit.HostMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	vectorsRule = kit.Rule{Arg: "vectors", Memory: kit.HostMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	searchRules = kit.SearchRules{
		Queries:   kit.Rule{Arg: "queries", Memory: kit.HostMemory, DTypes: elemTypes, Rank: 2, RowMajor: true},
		Neighbors: kit.Rule{Arg: "neighbors", Memory: kit.HostMemory, DTypes: []dlpack.DataType{dlpack.Int64, dlpack.Uint64}, Rank: 2, RowMajor: true},
		Distances: kit.Rule{Arg: "distances", Memory: kit.HostMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true},
	}
)

// ErrNotBuilt is wrapped by every error of a call the loaded libcuvs_c does
// not export: a library built without HNSW (cuVS's BUILD_CAGRA_HNSWLIB
// off) lacks all of cuvsHnsw*. errors.Is(err, safe.ErrMissingSymbol) holds
// too.
var ErrNotBuilt = errors.New("HNSW is not built into this libcuvs")

// wrap is kit.Wrap, naming a missing HNSW symbol as ErrNotBuilt.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, generated.ErrMissingSymbol) {
		return fmt.Errorf("%s: %w: %w", op, ErrNotBuilt, err)
	}
	return kit.Wrap(op, err)
}

// Index is an HNSW index in host memory, searched on the CPU. It owns all
// its data: hnswlib copies every vector into its elements, so nothing the
// index was made from (dataset, CAGRA index) is referenced afterwards.
//
// Searches with the same SearchParams.Ef run concurrently, from any
// number of goroutines (each also spread over SearchParams.NumThreads CPU
// threads by cuVS): hnswlib keeps one search list size per index (ef_),
// which cuvsHnswSearch sets on every call, so a search with another Ef
// waits for the searches in flight to end. An index left on disk by ACE
// is loaded by its first search, which runs alone. Extend needs the index
// alone; Close waits for everything.
type Index struct {
	c         core.Index[generated.CuvsHnswIndex_t] // Rows kept by the package: the C API has no getter
	dtype     dlpack.DataType
	metric    safe.Metric
	hierarchy Hierarchy
	// labelsNotRows: a deserialized file's labels (the ids searches
	// return) are not its rows 0..Rows()-1, so a filter over rows cannot
	// apply to them.
	labelsNotRows bool

	gate efGate // concurrent searches share one ef: hnswlib's ef_ is per index
}

// kind is HNSW for the index core. Deserialize is the package's own: it
// takes what the file does not hold (element type, metric).
var kind = core.Kind[Index, generated.CuvsHnswIndex_t]{
	Name: "hnsw", Create: generated.CuvsHnswIndexCreate, Destroy: generated.CuvsHnswIndexDestroy, Wrap: wrap,
	SerializeC: func(h generated.CuvsResources_t, p *byte, idx generated.CuvsHnswIndex_t) error {
		// saveIndex (or the copy of an index left on disk) only reads the
		// index: it runs beside the searches, whatever their ef.
		return wrapMissing(generated.CuvsHnswSerialize(h, p, idx))
	},
	Core: func(i *Index) *core.Index[generated.CuvsHnswIndex_t] { return &i.c },
	// hnswlib's loadIndex refuses a file longer than its data.
	Sidecar: true,
}

func init() { kind.Init() }

func newIndex(op string, res *safe.Resources) (*Index, error) {
	idx, err := kind.New(op, res)
	if err != nil {
		return nil, err
	}
	idx.gate.init(false)
	return idx, nil
}

func (idx *Index) fail() { kind.Fail(idx) }

// Build builds an HNSW index from dataset (rows × dim, float32, float16,
// int8 or uint8, row-major, in host memory: CPU, pinned or managed) with
// ACE: cuVS builds a CAGRA graph of degree 2*p.M on the GPU (ACE's
// partitions, through files in p.ACE.BuildDir with p.ACE.UseDisk), then
// converts it as FromCagra does with p.Hierarchy. The index copies the
// rows; the dataset may be freed once Build returns. p.ACE nil means
// DefaultACEParams (cuVS refuses a build without ACE parameters); nil p
// means DefaultIndexParams.
//
// With p.ACE.UseDisk, cuVS leaves the index in BuildDir/hnsw_index.bin and
// loads it at its first Search or Extend; Serialize then copies that file.
// cuVS makes that file for HierarchyNone and HierarchyGPU only: UseDisk
// with HierarchyCPU is refused before any C call (cuVS would refuse it
// after the whole ACE build: "Disk serialization not supported for CPU
// hierarchy", "Disk2disk ..." in v26.06).
//
// C calls: cuvsHnswIndexCreate, cuvsHnswAceParamsCreate/Destroy,
// cuvsHnswBuild, cuvsStreamSync (and cuvsHnswIndexParamsCreate/Destroy
// for nil p).
func Build(res *safe.Resources, dataset dlpack.Tensor, params *IndexParams) (*Index, error) {
	const op = "hnsw.Build"
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
		return nil, kit.Argf(op, "dataset", "shape %v, want at least two rows (a graph) and one column", dv.Shape())
	}
	if err := p.validate(op, true); err != nil {
		return nil, err
	}
	ace := p.ACE
	if ace == nil {
		d, err := DefaultACEParams()
		if err != nil {
			return nil, err
		}
		ace = &d
	}
	var dir []byte
	if ace.BuildDir != "" {
		if dir, err = kit.CPath(op, ace.BuildDir); err != nil {
			return nil, kit.Argf(op, "params.ACE.BuildDir", "%w", err)
		}
	}
	var ap generated.CuvsHnswAceParams_t
	if err := generated.CuvsHnswAceParamsCreate(&ap); err != nil {
		return nil, wrap(op, err)
	}
	defer generated.CuvsHnswAceParamsDestroy(ap) //nolint:errcheck // plain delete
	ap.Ref().Npartitions, ap.Ref().UseDisk = ace.NPartitions, ace.UseDisk
	ap.Ref().MaxHostMemoryGb, ap.Ref().MaxGpuMemoryGb = ace.MaxHostMemoryGB, ace.MaxGPUMemoryGB
	if dir != nil {
		cs := cString(string(dir[:len(dir)-1]))
		defer cFree(unsafe.Pointer(cs))
		ap.Ref().BuildDir = cs // cuVS copies it into a std::string
	}
	pe := p
	pe.ACE = ace
	est, err := EstimateMemory(safe.MemoryShape{Rows: int(dv.Dim(0)), Dim: int(dv.Dim(1)), DType: dv.DType(), HostDataset: true}, &pe)
	if err != nil {
		return nil, err
	}
	done, err := kit.ReserveBuild(op, res, est)
	if err != nil {
		return nil, err
	}
	defer done()
	idx, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	cp := p.cValue()
	cp.AceParams = ap
	if err := kit.CallWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsHnswBuild(h, kit.Params[generated.CuvsHnswIndexParams_t](res, &cp), t[0], idx.c.H)
	}); err != nil {
		idx.fail()
		return nil, rewrap(op, err)
	}
	idx.c.Rows.Store(dv.Dim(0))
	idx.c.Dim, idx.dtype, idx.metric, idx.hierarchy = dv.Dim(1), dv.DType(), p.Metric, p.Hierarchy
	idx.gate.cold = ace.UseDisk // loaded from BuildDir by its first search
	return idx, nil
}

// rewrap names a missing symbol in an error kit made (kit.CallWith).
func rewrap(op string, err error) error {
	if errors.Is(err, generated.ErrMissingSymbol) && !errors.Is(err, ErrNotBuilt) {
		return fmt.Errorf("%w: %w", ErrNotBuilt, err)
	}
	return err
}

// FromCagra converts a CAGRA index to HNSW (cuvsHnswFromCagra): its graph
// becomes the base layer and its dataset the vectors, with the upper
// layers p.Hierarchy asks for (p.EfConstruction and p.NumThreads are used
// by the CPU hierarchy; the metric is the CAGRA index's, and must be
// L2Expanded or InnerProduct). Nil p means DefaultIndexParams.
//
// This is how to serve a CAGRA index that an ACE build left on disk
// (cagra.ErrOnDisk): cuVS writes hnsw_index.bin next to its graph file and
// the HNSW index loads it at its first search; cuVS converts such an index
// for HierarchyNone and HierarchyGPU only, and HierarchyCPU is refused. An
// index without its dataset (cagra.ErrNoDataset) needs
// FromCagraWithDataset.
//
// The HNSW index copies what it needs: cagraIdx may be closed afterwards.
// cagraIdx is held (as a search holds it) during the call.
//
// C calls: cuvsHnswIndexCreate, cuvsHnswFromCagra, cuvsStreamSync.
func FromCagra(res *safe.Resources, cagraIdx *cagra.Index, params *IndexParams) (*Index, error) {
	return fromCagra("hnsw.FromCagra", res, cagraIdx, nil, params)
}

// FromCagraWithDataset is FromCagra with the vectors taken from dataset
// instead of the CAGRA index (cuvsHnswFromCagraWithDataset): rows ×
// dim of the CAGRA index's element type in host memory (CPU, pinned or
// managed), row i being graph row i, so exactly cagraIdx.Rows() rows. For
// a CAGRA index deserialized without its dataset, or to save the device
// to host copy. The HNSW index copies the rows.
//
// C calls: cuvsHnswIndexCreate, cuvsHnswFromCagraWithDataset,
// cuvsStreamSync.
func FromCagraWithDataset(res *safe.Resources, cagraIdx *cagra.Index, dataset dlpack.Tensor, params *IndexParams) (*Index, error) {
	const op = "hnsw.FromCagraWithDataset"
	if dataset == nil {
		return nil, kit.Argf(op, "dataset", "nil")
	}
	return fromCagra(op, res, cagraIdx, dataset, params)
}

func fromCagra(op string, res *safe.Resources, cagraIdx *cagra.Index, dataset dlpack.Tensor, params *IndexParams) (*Index, error) {
	if cagraIdx == nil {
		return nil, kit.Argf(op, "cagraIdx", "nil *cagra.Index")
	}
	pd, err := kit.Or(params, DefaultIndexParams)
	if err != nil {
		return nil, err
	}
	p := *pd
	if err := p.validate(op, false); err != nil {
		return nil, err
	}
	var dv dlpack.View
	if dataset != nil {
		if dv, err = datasetRule.Take(op, res, dataset); err != nil {
			return nil, err
		}
	}
	var idx *Index
	err = cagraref.Use(cagraIdx, op, "cagraIdx", func(ch generated.CuvsCagraIndex_t, info cagraref.Info) error {
		if err := kit.CheckIndexDevice(res, op, info.Device); err != nil {
			return err
		}
		if info.MetricKnown {
			if err := checkMetric(op, "cagraIdx", info.Metric); err != nil {
				return err
			}
		}
		dim := info.Dim
		if dataset == nil {
			if info.GraphOnly {
				return kit.Argf(op, "cagraIdx", "%w: give the rows with FromCagraWithDataset", cagra.ErrNoDataset)
			}
		} else {
			if dv.DType() != info.DType {
				return kit.Argf(op, "dataset", "dtype %s, the CAGRA index holds %s", dv.DType(), info.DType)
			}
			if dv.Dim(0) != info.Rows {
				return kit.Argf(op, "dataset", "%d rows, the CAGRA graph has %d (row i of the dataset is graph row i)", dv.Dim(0), info.Rows)
			}
			if info.Dim != 0 && !info.GraphOnly && dv.Dim(1) != info.Dim {
				return kit.Argf(op, "dataset", "%d columns, the CAGRA index has dimension %d", dv.Dim(1), info.Dim)
			}
			dim = dv.Dim(1)
		}
		if info.Rows < 1 {
			return kit.Argf(op, "cagraIdx", "an empty index")
		}
		if info.OnDisk && p.Hierarchy == HierarchyCPU {
			return errDiskCPU(op)
		}
		var est safe.MemoryEstimate
		if p.Hierarchy == HierarchyGPU && dim > 0 { // the others convert on the host
			var err error
			if est, err = EstimateFromCagra(safe.MemoryShape{Rows: int(info.Rows), Dim: int(dim), DType: info.DType, HostDataset: dataset != nil}, int(max(info.Degree, 1)), &p); err != nil {
				return err
			}
		}
		done, err := kit.ReserveBuild(op, res, est)
		if err != nil {
			return err
		}
		defer done()
		if idx, err = newIndex(op, res); err != nil {
			return err
		}
		cp := p.cValue()
		in := []*dlpack.View{nil}
		if dataset != nil {
			in[0] = &dv
		}
		if err := kit.CallWith(op, res, in, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
			if t[0] != nil {
				return generated.CuvsHnswFromCagraWithDataset(h, kit.Params[generated.CuvsHnswIndexParams_t](res, &cp), ch, idx.c.H, t[0])
			}
			return generated.CuvsHnswFromCagra(h, kit.Params[generated.CuvsHnswIndexParams_t](res, &cp), ch, idx.c.H)
		}); err != nil {
			idx.fail()
			idx = nil
			return rewrap(op, err)
		}
		idx.c.Rows.Store(info.Rows)
		idx.c.Dim, idx.dtype, idx.hierarchy = dim, info.DType, p.Hierarchy
		idx.metric = info.Metric
		idx.gate.cold = info.OnDisk // loaded from hnsw_index.bin by its first search
		return nil
	})
	if err != nil {
		return nil, err
	}
	return idx, nil
}

// Rows returns the number of vectors in the index (kept by the package:
// the C API has no getter).
func (idx *Index) Rows() int { return kind.Rows(idx) }

// Dim returns the vectors' dimension.
func (idx *Index) Dim() int { return kind.Dim(idx) }

// DType returns the vectors' element type.
func (idx *Index) DType() dlpack.DataType {
	if kind.Gone(idx) {
		return dlpack.DataType{}
	}
	return idx.dtype
}

// Metric returns the index's metric: L2Expanded or InnerProduct (for an
// index from a CAGRA index whose metric was not known, the zero Metric).
func (idx *Index) Metric() safe.Metric {
	if kind.Gone(idx) {
		return 0
	}
	return idx.metric
}

// Hierarchy returns the hierarchy the index was made or deserialized with.
func (idx *Index) Hierarchy() Hierarchy {
	if kind.Gone(idx) {
		return 0
	}
	return idx.hierarchy
}

// Extend adds vectors (n × Dim(), the index's element type, row-major, in
// host memory; copied) with ids Rows()..Rows()+n-1, by hnswlib's insertion
// (cuvsHnswExtend: resizeIndex, then addPoint per row over p.NumThreads
// threads). Nil p means DefaultExtendParams.
//
// An index of HierarchyNone is refused: it has no upper layers, and
// hnswlib's insertion descends through them from the entry point (cuVS
// documents Extend for the CPU hierarchy). HierarchyGPU indexes have the
// same layered structure and are accepted.
//
// It needs the index alone and waits its turn; it fails with
// safe.ErrClosed once Close has begun.
//
// C calls: cuvsHnswExtend, cuvsStreamSync (and
// cuvsHnswExtendParamsCreate/Destroy for nil p).
func (idx *Index) Extend(res *safe.Resources, vectors dlpack.Tensor, params *ExtendParams) error {
	if idx == nil {
		return kit.NilIndex("hnsw.Index.Extend")
	}
	if err := idx.c.Life.Built("hnsw.Index.Extend"); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	const op = "hnsw.Index.Extend"
	pd, err := kit.Or(params, DefaultExtendParams)
	if err != nil {
		return err
	}
	if pd.NumThreads < 0 {
		return kit.Argf(op, "params.NumThreads", "%d, want 0 (all) or more", pd.NumThreads)
	}
	vv, err := vectorsRule.Take(op, res, vectors)
	if err != nil {
		return err
	}
	if vv.DType() != idx.dtype {
		return kit.Argf(op, "vectors", "dtype %s, the index holds %s", vv.DType(), idx.dtype)
	}
	if vv.Dim(1) != idx.c.Dim {
		return kit.Argf(op, "vectors", "%d columns, the index has dimension %d", vv.Dim(1), idx.c.Dim)
	}
	if vv.Dim(0) < 1 {
		return kit.Argf(op, "vectors", "no rows")
	}
	if idx.hierarchy == HierarchyNone {
		return kit.Argf(op, "index", "an index of HierarchyNone cannot be extended (no upper layers: make it with HierarchyCPU)")
	}
	cp := generated.CuvsHnswExtendParams{NumThreads: pd.NumThreads}
	return idx.c.Life.Exclusive(op, func() error {
		if err := idx.c.Life.Keep(res, op); err != nil {
			return err
		}
		err := kit.CallWith(op, res, []*dlpack.View{&vv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
			return generated.CuvsHnswExtend(h, kit.Params[generated.CuvsHnswExtendParams_t](res, &cp), t[0], idx.c.H)
		})
		if err == nil {
			idx.c.Rows.Add(vv.Dim(0))
			idx.gate.warm() // cuvsHnswExtend loads an index left on disk
		}
		return rewrap(op, err)
	})
}

// Search finds the k nearest vectors for each query on the CPU, k being
// the number of columns of neighbors: queries (n × Dim(), the index's
// element type), neighbors (int64 ids, as in every package, or uint64,
// cuvsHnswSearch's own type) and distances (float32), n × k, all
// row-major in host memory (CPU, pinned or managed: cuvsHnswSearch
// refuses device memory). 1 <= k <= Rows() (hnswlib pops k results from
// its queue, which holds fewer for a larger k). Distances are hnswlib's:
// squared L2, or 1 - <q, x> for InnerProduct. The results are written when
// Search returns (no stream is involved). SearchSlice is the same search
// from and into Go slices, with a filter.
//
// Queries holding a NaN or an infinity are refused (an *safe.ArgError
// naming queries and the row; hnswlib would answer them with arbitrary
// rows), read in CPU or pinned memory; managed memory is not read.
//
// Searches of one index with the same Ef run concurrently (each over
// params.NumThreads threads): serve one index from many goroutines with
// one Ef (and NumThreads 1 for one-query searches: cuVS starts an OpenMP
// team per call). A search with another Ef waits until the searches in
// flight are done, as hnswlib's ef is per index. Each goroutine needs
// its own Resources (a Resources serves one call at a time).
//
// C calls: cuvsHnswSearch. Nil params means DefaultSearchParams.
func (idx *Index) Search(res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error {
	const op = "hnsw.Index.Search"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.c.Life.Enter(op); err != nil {
		return err
	}
	defer idx.c.Life.Leave()
	sp, err := params.resolve(op)
	if err != nil {
		return err
	}
	if queries == nil || neighbors == nil || distances == nil {
		return kit.Argf(op, "queries/neighbors/distances", "nil tensor")
	}
	qv, err := queries.View()
	if err != nil {
		return kit.Argf(op, searchRules.Queries.Arg, "%w", err)
	}
	nv, err := neighbors.ViewMut()
	if err != nil {
		return kit.Argf(op, searchRules.Neighbors.Arg, "%w", err)
	}
	dv, err := distances.ViewMut()
	if err != nil {
		return kit.Argf(op, searchRules.Distances.Arg, "%w", err)
	}
	return idx.search(op, res, &sp, &qv, &nv, &dv, true)
}

// search is Search inside the index's life, with resolved params, of
// views; finite false skips the queries' check (SearchSlice made it on
// the Go slice).
func (idx *Index) search(op string, res *safe.Resources, sp *SearchParams, qv *dlpack.View, nv, dv *dlpack.ViewMut, finite bool) error {
	if _, err := searchRules.Check(op, qv, nv, dv, idx.dtype, idx.c.Dim, idx.c.Rows.Load()); err != nil {
		return err
	}
	if finite {
		if err := kit.CheckFinite(op, "queries", qv); err != nil {
			return err
		}
	}
	c := dlpack.Begin(op)
	defer c.End()
	tq, err := c.In(qv)
	if err != nil {
		return kit.Argf(op, searchRules.Queries.Arg, "%w", err)
	}
	tn, err := c.Out(nv)
	if err != nil {
		return kit.Argf(op, searchRules.Neighbors.Arg, "%w", err)
	}
	td, err := c.Out(dv)
	if err != nil {
		return kit.Argf(op, searchRules.Distances.Arg, "%w", err)
	}
	// int64 ids go to C as uint64 (cuvsHnswSearch takes nothing else):
	// hnswlib's labels here are below 2^63 (row numbers, or a file's
	// labels, which Deserialize checks), so both read the same.
	tn.DlTensor.Dtype = generated.DLDataType{Code: uint8(dlpack.Uint64.Code), Bits: 64, Lanes: 1}
	cp := generated.CuvsHnswSearchParams{Ef: sp.Ef, NumThreads: sp.NumThreads}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	idx.gate.enter(cp.Ef)
	err = generated.CuvsHnswSearch(h, kit.Params[generated.CuvsHnswSearchParams_t](res, &cp), idx.c.H, tq, tn, td)
	idx.gate.leave(err == nil)
	kit.Unlock(res)
	return wrap(op, err)
}

// Serialize writes the index to a file in hnswlib's format
// (cuvsHnswSerialize: hnswlib's saveIndex; an index ACE left on disk is
// copied from its hnsw_index.bin). hnswlib's own loadIndex reads it, and so
// does Deserialize given the element type and metric, which the file does
// not hold. Its checksum (CRC-32C sums, 4 bytes per MiB) goes to the
// sidecar file path+".crc32c", not after the data: hnswlib's loadIndex
// (hnswalg.h) refuses a file longer than its data.
func (idx *Index) Serialize(res *safe.Resources, path string) error {
	return kind.Serialize(idx, res, path)
}

// wrapMissing marks a missing symbol before kit wraps the error.
func wrapMissing(err error) error {
	if errors.Is(err, generated.ErrMissingSymbol) {
		return fmt.Errorf("%w: %w", ErrNotBuilt, err)
	}
	return err
}

// Deserialize reads an hnswlib file (Serialize's, cagra.Index's
// SerializeToHnswlib, or hnswlib's saveIndex of a compatible index) as an
// index of dtype elements with metric: the file gives the byte size of a
// vector, from which the dimension follows once the element type is
// known, but holds neither the element type nor the metric (hnswlib's
// spaces are not saved). params.Hierarchy says how to search it: None
// searches the base layer only; CPU and GPU descend through the upper
// layers, which a base-layer-only file (FromCagra with HierarchyNone,
// SerializeToHnswlib) does not have. Nil params reads the hierarchy from
// the file: None for a base-layer-only file, else DefaultIndexParams'
// (GPU).
//
// A file that cannot be opened is refused before any C call with os's
// error, path included (errors.Is(err, fs.ErrNotExist) for a missing
// one). The file is walked to its end before cuVS reads it; a file
// whose vectors are not a whole number of dtype elements, that is
// truncated, has bytes after the index, or links outside its elements is
// refused with safe.ErrCorruptIndex, and so is a base-layer-only file
// asked for with a hierarchy, a float16 or float32 one holding a NaN or
// an infinity (what 8-bit vectors read as floats tend to hold), and one
// with a label of 2^63 - 1 or more (hnswlib labels are any uint64; the
// package returns int64 ids with safe.SentinelID64 for none).
//
// What cannot be checked: any bytes are valid 8-bit integers, so a
// float32 file of dimension d read as uint8 or int8 loads with dimension
// 4d and answers with meaningless distances; other files read as floats
// are refused only when they hit a NaN or infinity bit pattern; and a
// metric cannot be told from the vectors. Pass the dtype and metric the
// index was made with; compare Dim() with what you expect.
//
// The checksum is checked first: the sidecar path+".crc32c" where there
// is one, else a trailer after the data (a stream SerializeTo wrote, saved
// to a file: then read from a copy in memory without it). A flipped bit
// anywhere is safe.ErrCorruptIndex naming the damaged byte range. A file
// without either loads unproved: safe.RequireChecksum refuses it,
// safe.Verified tells which.
//
// C calls: cuvsHnswIndexCreate, cuvsHnswDeserialize.
func Deserialize(res *safe.Resources, path string, dtype dlpack.DataType, metric safe.Metric, params *IndexParams, opts ...safe.DeserializeOption) (*Index, error) {
	const op = "hnsw.Deserialize"
	lim, err := kit.Limits(op, opts)
	if err != nil {
		return nil, err
	}
	if err := kit.CheckFile(op, path); err != nil { // a missing file is fs.ErrNotExist
		return nil, err
	}
	info, err := kit.VerifyFile(op, path, true, lim)
	if err != nil {
		return nil, err
	}
	if !info.Appended {
		return load(op, res, path, dtype, metric, params)
	}
	// hnswlib reads the file to its end: a copy without the trailer.
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer f.Close()
	var idx *Index
	_, err = stream.FromReader(io.NewSectionReader(f, 0, info.DataLen), 0, func(copyPath string) error {
		idx, err = load(op, res, copyPath, dtype, metric, params)
		return kit.RenamePath(op, copyPath, path, err)
	})
	if err != nil {
		return nil, err
	}
	return idx, nil
}

// load is Deserialize of a file without an appended trailer, checked.
func load(op string, res *safe.Resources, path string, dtype dlpack.DataType, metric safe.Metric, params *IndexParams) (*Index, error) {
	ok := false
	for _, t := range elemTypes {
		ok = ok || t == dtype
	}
	if !ok {
		return nil, kit.Argf(op, "dtype", "%s is not one of %v", dtype, elemTypes)
	}
	if err := checkMetric(op, "metric", metric); err != nil {
		return nil, err
	}
	pd, err := kit.Or(params, DefaultIndexParams)
	if err != nil {
		return nil, err
	}
	p := *pd
	if !p.Hierarchy.valid() {
		return nil, kit.Argf(op, "params.Hierarchy", "%s, want HierarchyNone, HierarchyCPU or HierarchyGPU", p.Hierarchy)
	}
	info, err := readFile(path, dtype)
	var oe openError
	if errors.As(err, &oe) {
		return nil, fmt.Errorf("%s: %w", op, oe.err) // before C, which would say "Cannot open file" without the path
	}
	if err != nil {
		return nil, kit.Corrupt(op, err)
	}
	baseOnly := info.count > 0 && info.entryLevel < info.maxLevel
	if params == nil && baseOnly {
		p.Hierarchy = HierarchyNone // what the file holds
	}
	if p.Hierarchy != HierarchyNone && baseOnly {
		return nil, kit.Corrupt(op, fmt.Errorf("a base-layer-only file (its entry point has no level %d): deserialize it with HierarchyNone", info.maxLevel))
	}
	idx, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	idx.c.H.Ref().Dtype = generated.DLDataType{Code: uint8(dtype.Code), Bits: dtype.Bits, Lanes: 1}
	cp := p.cValue()
	if err := kit.Deserialize(op, res, path, func(h generated.CuvsResources_t, fp *byte) error {
		return wrapMissing(generated.CuvsHnswDeserialize(h, kit.Params[generated.CuvsHnswIndexParams_t](res, &cp), fp, int32(info.dim), kit.CMetric(metric), idx.c.H))
	}); err != nil {
		idx.fail()
		return nil, err
	}
	idx.c.Rows.Store(info.count)
	idx.c.Dim, idx.dtype, idx.metric, idx.hierarchy = info.dim, dtype, metric, p.Hierarchy
	idx.labelsNotRows = info.labelsNotRows
	return idx, nil
}

// Close frees the index, waiting for the searches and the Extend in
// flight. Closing twice, or closing the zero Index, is harmless; if freeing
// fails, a later Close tries again. C call: cuvsHnswIndexDestroy.
func (idx *Index) Close() error { return kind.Close(idx) }
