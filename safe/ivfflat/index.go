package ivfflat

import (
	"fmt"
	"os"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/ivffilter"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

var elemTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16, dlpack.Int8, dlpack.Uint8}

// The tensor rules of IVF-Flat, in one place. cuVS's C code converts every
// input with from_dlpack to a device_matrix_view: device memory (CUDA,
// pinned or managed) only, row-major.
var (
	datasetRule = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	vectorsRule = kit.Rule{Arg: "vectors", Memory: kit.DeviceMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	idsRule     = kit.Rule{Arg: "ids", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 1, RowMajor: true}
	searchRules = kit.SearchRules{
		Queries:   kit.Rule{Arg: "queries", Memory: kit.DeviceMemory, DTypes: elemTypes, Rank: 2, RowMajor: true},
		Neighbors: kit.Rule{Arg: "neighbors", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 2, RowMajor: true},
		Distances: kit.Rule{Arg: "distances", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true},
	}
)

// Index is an IVF-Flat index: the rows, copied into lists, one per k-means
// center. Any number of goroutines may search it at once, each with its own
// safe.Resources; Extend needs it alone (it waits its turn, and searches
// wait for it), and Close waits for both.
type Index struct {
	c      core.Index[generated.CuvsIvfFlatIndex_t] // Rows kept here: the C API has no size getter
	ivf    core.IVF
	dtype  dlpack.DataType
	metric safe.Metric // as built, or the file's header: for the memory count (center norms)
	cma    bool        // ConservativeMemoryAllocation, as built or read: the lists' capacities
}

// kind is IVF-Flat for the index core.
var kind = core.Kind[Index, generated.CuvsIvfFlatIndex_t]{
	Name: "ivfflat", Create: generated.CuvsIvfFlatIndexCreate, Destroy: generated.CuvsIvfFlatIndexDestroy,
	SerializeC: generated.CuvsIvfFlatSerialize, DeserializeC: generated.CuvsIvfFlatDeserialize,
	CheckFile: checkFile,
	FileNeed:  fileNeed,
	Core:      func(i *Index) *core.Index[generated.CuvsIvfFlatIndex_t] { return &i.c },
	Release:   func(i *Index) { _ = i.ivf.Hosts.Close() },
	Refresh:   (*Index).refresh,
	Loaded:    (*Index).loaded,
	Held:      (*Index).held,
}

func init() { kind.Init() }

// refresh reads the lists and dimension from the library, and the dtype
// from the handle, lanes 0 read as 1 (cuvsIvfFlatDeserialize sets code and
// bits only).
func (idx *Index) refresh(op string) error {
	var nLists, dim int64
	if err := generated.CuvsIvfFlatIndexGetNLists(idx.c.H, &nLists); err != nil {
		return kit.Wrap(op, err)
	}
	if err := generated.CuvsIvfFlatIndexGetDim(idx.c.H, &dim); err != nil {
		return kit.Wrap(op, err)
	}
	idx.ivf.NLists, idx.c.Dim = nLists, dim
	idx.dtype = kit.DataType(idx.c.H.Ref().Dtype)
	return nil
}

// Build trains NLists centers by k-means on dataset (rows × dim, float32,
// float16, int8 or uint8, row-major, in host or device memory) and, with
// p.AddDataOnBuild, adds its rows with ids 0..rows-1. cuVS copies the rows
// into the lists: the index keeps no reference to dataset. cuVS's build
// reads device memory only (CUDA, pinned or managed): a dataset in Go
// (host) memory is first copied to device memory, freed before Build
// returns.
//
// C calls: cuvsIvfFlatIndexCreate, cuvsIvfFlatBuild, cuvsStreamSync,
// cuvsIvfFlatIndexGetNLists, cuvsIvfFlatIndexGetDim; for a host dataset
// also cuvsRMMAlloc, cuvsMatrixCopy, cuvsRMMFree.
// Nil params means cuVS's defaults (DefaultIndexParams).
func Build(res *safe.Resources, dataset dlpack.Tensor, params *IndexParams) (*Index, error) {
	const op = "ivfflat.Build"
	pd, perr := kit.Or(params, DefaultIndexParams)
	if perr != nil {
		return nil, perr
	}
	p := *pd
	dv, err := datasetRule.Take(op, res, dataset)
	if err != nil {
		return nil, err
	}
	if dv.Dim(0) < 1 || dv.Dim(1) < 1 {
		return nil, kit.Argf(op, "dataset", "shape %v, want at least one row and one column", dv.Shape())
	}
	if err := p.validate(op, dv.Dim(0), dv.Dim(1)); err != nil {
		return nil, err
	}
	est, err := EstimateMemory(safe.MemoryShape{Rows: int(dv.Dim(0)), Dim: int(dv.Dim(1)), DType: dv.DType(), HostDataset: kit.IsHost(&dv)}, &p, nil)
	if err != nil {
		return nil, err
	}
	done, err := kit.ReserveBuild(op, res, est)
	if err != nil {
		return nil, err
	}
	defer done()
	if kit.IsHost(&dv) {
		uv, free, err := kit.Upload(op, "dataset", res, &dv)
		if err != nil {
			return nil, err
		}
		defer free()
		dv = uv
	}
	idx, err := kind.New(op, res)
	if err != nil {
		return nil, err
	}
	cp := p.cValue()
	err = kit.CallWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsIvfFlatBuild(h, kit.Params[generated.CuvsIvfFlatIndexParams_t](res, &cp), t[0], idx.c.H)
	})
	if idx, err = kind.Made(op, res, idx, err); err == nil {
		idx.metric, idx.cma = p.Metric, p.ConservativeMemoryAllocation
		idx.c.Mem.Set(op, res, est.Index)
		if p.AddDataOnBuild {
			idx.c.Rows.Store(dv.Dim(0))
		}
	}
	return idx, err
}

// Rows returns the number of rows indexed. The C API has no size getter:
// the count is kept by Build and Extend, and read from the file by
// Deserialize.
func (idx *Index) Rows() int { return kind.Rows(idx) }

// Dim returns the vectors' dimension (cuvsIvfFlatIndexGetDim).
func (idx *Index) Dim() int { return kind.Dim(idx) }

// NLists returns the number of lists (cuvsIvfFlatIndexGetNLists).
func (idx *Index) NLists() int {
	if kind.Gone(idx) {
		return 0
	}
	return int(idx.ivf.NLists)
}

// DType returns the element type of the vectors.
func (idx *Index) DType() dlpack.DataType {
	if kind.Gone(idx) {
		return dlpack.DataType{}
	}
	return idx.dtype
}

// Extend adds rows (n × Dim() of the index's element type, device memory,
// copied) with ids, an int64 device vector of n ids, or, with ids nil, the
// ids Rows()..Rows()+n-1: the C function dereferences its ids argument
// unconditionally, so the package makes that vector (in device memory,
// freed before Extend returns). Filters select rows by id: a filter made
// for Rows() rows cannot let through ids at or past Rows().
//
// It needs the index alone, and waits its turn: new searches wait
// while it is pending, it waits for the searches in flight (and for a
// running Extend), runs alone, and then lets the searches that waited in
// before another Extend. It never fails because the index is busy; it
// fails with safe.ErrClosed once Close has begun, even while waiting.
//
// Once its turn comes, it refuses with a *safe.MemoryError (matching
// safe.ErrOutOfMemory), before calling cuVS and leaving the index as it
// was, an Extend whose estimate (EstimateExtend: cuVS extends a copy of
// the index) exceeds what the device can still give, unless res was made
// safe.WithoutMemoryCheck; safe.DeviceMemory.InUse then counts the grown
// index in place of the old.
//
// C calls: cuvsRMMAlloc/Free (ids nil), cuvsMatrixCopy, cuvsIvfFlatExtend,
// cuvsStreamSync.
func (idx *Index) Extend(res *safe.Resources, vectors dlpack.Tensor, ids dlpack.Tensor) error {
	op := kind.Op.Extend
	c, err := kind.Of(idx, op) // a zero index says so, before its arguments are checked
	if err != nil {
		return err
	}
	if err := kit.CheckIndexDevice(res, op, c.Dev); err != nil {
		return err
	}
	vv, err := vectorsRule.Take(op, res, vectors)
	if err != nil {
		return err
	}
	if vv.DType() != idx.dtype || vv.Dim(1) != c.Dim {
		return kit.Argf(op, "vectors", "%s × %d columns, the index holds %s × %d", vv.DType(), vv.Dim(1), idx.dtype, c.Dim)
	}
	n := vv.Dim(0)
	if n < 1 {
		return kit.Argf(op, "vectors", "no rows")
	}
	var iv dlpack.View
	if ids != nil {
		if iv, err = ids.View(); err != nil {
			return kit.Argf(op, "ids", "%w", err)
		}
		if err := idsRule.CheckOn(op, res, &iv); err != nil {
			return err
		}
		if iv.Dim(0) != n {
			return kit.Argf(op, "ids", "%d ids for %d rows", iv.Dim(0), n)
		}
	}
	return c.Life.Exclusive(op, func() error {
		if err := c.Life.Keep(res, op); err != nil {
			return err
		}
		done, err := kit.ReserveExtend(op, "the Extend (EstimateExtend: BuildPeak + Dataset)", res, idx.extendEstimate(n, ids == nil))
		if err != nil {
			return err
		}
		defer done()
		if ids == nil {
			seq := make([]int64, n)
			base := c.Rows.Load()
			for i := range seq {
				seq[i] = base + int64(i)
			}
			dev, err := safe.DeviceVectorFrom(res, seq)
			if err != nil {
				return fmt.Errorf("%s: ids: %w", op, err)
			}
			defer dev.Close()
			if iv, err = dev.View(); err != nil {
				return kit.Argf(op, "ids", "%w", err)
			}
		}
		extended := false
		err = kit.CallWith(op, res, []*dlpack.View{&vv, &iv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
			err := generated.CuvsIvfFlatExtend(h, t[0], t[1], c.H)
			extended = err == nil
			return err
		})
		if extended {
			// the count follows even if the sync after it failed
			c.Rows.Add(n)
			kind.Recount(idx, op, res)
		}
		return err
	})
}

// Search finds the k nearest rows for each query, k being the number of
// columns of neighbors, among the rows of the params.NProbes lists whose
// centers are nearest the query. queries is n × Dim() of the index's
// element type; neighbors (int64, the rows' ids) and distances (float32)
// are n × k; all in device memory. filter, if not nil, is a bitset for
// Rows() rows, by id. The results are ready once res's stream is
// synchronized (res.Sync).
//
// Slots that no allowed row fills (fewer rows in the probed lists, or
// allowed, than k) come last in a row with distance +Inf (-Inf for
// InnerProduct) and, as cuVS writes them, a row id again: the first row
// stored in the first non-empty probed list, whether the filter allows it
// or not (math.MaxInt64 if every probed list is empty; seen on an H200 and
// read from cuVS's code). Tell them by the infinite distance. SearchSlice's
// results hold safe.SentinelID64 with +Inf there instead.
//
// Search allocates nothing on the Go heap when its tensors are pointers
// (e.g. *safe.DeviceMatrix) and holds no lock across the C call.
//
// While an Extend runs or waits for the searches in flight, a new search
// waits for it (it does not fail for it): at most the duration of
// one Extend, since the searches that waited go in before the next one.
//
// With a filter, SearchParams.FilterPath decides how it runs: safe.FilterAuto
// (the default) may probe more lists than NProbes and, when it keeps some
// lists unprobed, reads the distances and searches the queries that came
// back short again with every list; that second look waits for the
// device (the results are still ready only after res.Sync).
//
// C calls: cuvsIvfFlatSearch; safe.FilterAuto's second look also cuvsMatrixCopy
// and cuvsStreamSync (into pinned memory, cuvsRMMHostAlloc, kept by the
// index).
// Nil params means cuVS's defaults (DefaultSearchParams).
func (idx *Index) Search(res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	op := kind.Op.Search
	return kind.Search(idx, op, func(call dlpack.Call) error {
		sp, err := params.resolve(op)
		if err != nil {
			return err
		}
		s := core.IVFSearch{Path: ivffilter.Path(sp.FilterPath), Probes: sp.NProbes, DType: idx.dtype, Filter: filter}
		return idx.c.SearchIVF(&idx.ivf, op, call, res, &searchRules, queries, neighbors, distances, &s, idx.search)
	})
}

// search is IVF-Flat's C search.
func (idx *Index) search(res *safe.Resources, h generated.CuvsResources_t, probes uint32, q, n, d *generated.DLManagedTensor, f generated.CuvsFilter) error {
	cp := generated.CuvsIvfFlatSearchParams{NProbes: probes}
	return generated.CuvsIvfFlatSearch(h, kit.Params[generated.CuvsIvfFlatSearchParams_t](res, &cp), idx.c.H, q, n, d, f)
}

// Centers copies the lists' centers, NLists() × Dim() float32, into dst
// (host or device memory, rows contiguous; e.g. a dlpack.NewHostMatrix
// over a Go slice) and waits for the copy: the same shape as every IVF
// package's Centers.
// cuvsIvfFlatIndexGetCenters does not copy (whatever its header says): it
// overwrites the tensor it is given with a view into the index; the package
// hands it a tensor of its own and copies from that view.
//
// C calls: cuvsIvfFlatIndexGetCenters, cuvsMatrixCopy, cuvsStreamSync, and
// the view's deleter.
func (idx *Index) Centers(res *safe.Resources, dst dlpack.TensorMut) error {
	return kind.Centers(idx, "ivfflat.Index.Centers", res, dst, func() int64 { return idx.ivf.NLists }, generated.CuvsIvfFlatIndexGetCenters)
}

// Serialize writes the index to a file (cuvsIvfFlatSerialize).
//
// The file is cuVS's bytes followed by the bindings' checksum trailer
// (CRC-32C sums, 4 bytes per MiB), which cuVS's reader, stopping at its
// last field, ignores: cuVS (C, C++, Python) reads the file as its own.
func (idx *Index) Serialize(res *safe.Resources, path string) error {
	return kind.Serialize(idx, res, path)
}

// Deserialize reads an index written by Serialize. Its size (and its
// metric and list allocation, for the device memory it counts in
// safe.DeviceMemory.InUse) is read from the file's header (the C API has
// no size getter); its element type from
// the handle, whose lanes cuvsIvfFlatDeserialize leaves 0 (read as 1).
//
// A file whose index does not fit in what the device can still give
// (safe.DeviceMemory.Available) is refused with a *safe.MemoryError before
// cuVS reads it, unless res was made safe.WithoutMemoryCheck: its need, a
// lower bound from the header, is EstimateMemory's fixed part and the
// file's rows and ids, the lists' capacities left out (their sizes are in
// the body).
//
// A file that is not a whole IVF-Flat index (truncated, damaged, with
// bytes after the index) is refused with safe.ErrCorruptIndex: its header
// and layout are checked before any C call, and cuVS's own refusals of
// its contents carry the sentinel too.
//
// The file's checksum trailer is checked first, where it has one: a
// flipped bit anywhere is safe.ErrCorruptIndex naming the damaged byte
// range. A file cuVS wrote has none and loads unproved (the checks above
// only): safe.RequireChecksum refuses it, safe.Verified tells which.
//
// C calls: cuvsIvfFlatIndexCreate, cuvsIvfFlatDeserialize,
// cuvsIvfFlatIndexGetNLists, cuvsIvfFlatIndexGetDim.
func Deserialize(res *safe.Resources, path string, opts ...safe.DeserializeOption) (*Index, error) {
	return kind.Deserialize(res, path, opts)
}

// checkFile refuses, before any C call, a file whose header is not an
// IVF-Flat index's or that is not whole .npy items to its end.
func checkFile(op, path string, size int64) error {
	if _, err := readHeader(path); err != nil {
		if _, ok := err.(*os.PathError); ok { // not opened: not corrupt
			return fmt.Errorf("%s: %w", op, err)
		}
		return kit.Corrupt(op, err)
	}
	return kit.CheckItemsN(op, path, size, true, nil)
}

// loaded reads the size, metric and list allocation from the file's
// header, once cuVS has read the file.
func (idx *Index) loaded(op, path string) error {
	h, err := readHeader(path)
	if err != nil {
		return kit.Corrupt(op, err)
	}
	idx.c.Rows.Store(h.size)
	idx.metric, idx.cma = h.metric, h.cma
	return nil
}

// header is what Deserialize reads from a file's header.
type header struct {
	size   int64
	metric safe.Metric
	cma    bool
}

// readHeader reads a serialized IVF-Flat index's header: a 4-byte NumPy
// dtype, then .npy scalars: format version, size, dim, n_lists, metric,
// adaptive_centers, conservative_memory_allocation
// (ivf_flat_serialize.cuh).
func readHeader(path string) (header, error) {
	v, err := npy.ReadHeader(path, "an IVF-Flat index", true, 7)
	if err != nil {
		return header{}, err
	}
	if v[1] < 0 {
		return header{}, fmt.Errorf("not an IVF-Flat index (size %d)", v[1])
	}
	return header{size: v[1], metric: safe.Metric(v[4]), cma: v[6] != 0}, nil
}

// Close frees the index, waiting for the searches and the Extend in
// flight. Closing twice, or closing the zero Index, is harmless; if freeing
// fails, a later Close tries again. C call: cuvsIvfFlatIndexDestroy.
func (idx *Index) Close() error { return kind.Close(idx) }
