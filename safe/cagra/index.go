package cagra

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/release"
)

var elemTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16, dlpack.Int8, dlpack.Uint8}

// The tensor rules of CAGRA, in one place.
var (
	datasetRule = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	extendRule  = kit.Rule{Arg: "additional", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	graphRule   = kit.Rule{Arg: "graph", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Uint32}, Rank: 2, RowMajor: true}
	searchRules = kit.SearchRules{
		Queries:   kit.Rule{Arg: "queries", Memory: kit.DeviceMemory, DTypes: elemTypes, Rank: 2, RowMajor: true},
		Neighbors: kit.Rule{Arg: "neighbors", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Uint32, dlpack.Int64}, Rank: 2, RowMajor: true},
		Distances: kit.Rule{Arg: "distances", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true},
	}
)

// Index is a CAGRA index. Any number of goroutines may search it at once,
// each with its own safe.Resources; Extend needs it alone (it waits its
// turn, and searches wait for it), and Close waits for both.
//
// # Building
//
// Build makes an index from a dataset (float32, float16, int8 or uint8,
// row-major, in host or device memory) with IndexParams: start from
// DefaultIndexParams, which reads cuVS's defaults from the library, and
// choose the graph build (IVF-PQ, NN-Descent, iterative search, ACE for
// datasets larger than device memory) and optional VQ/PQ compression.
// FromHNSWParams derives the parameters from HNSW's M and ef_construction.
// IndexFromArgs makes an index from a graph you already have, Merge one
// index from several, Deserialize one from a file written by Serialize.
//
// # Searching
//
// Search takes queries, neighbors (uint32 or int64) and distances (float32)
// in device memory, k being the number of columns of neighbors, and
// optionally a bitset filter (safe.NewBitsetFilterAllowing) for the index's
// row count. Results are ready once the Resources' stream is synchronized.
// Any number of goroutines may search one index at once, each with its own
// safe.Resources and output buffers: Search takes no lock across the C call
// and allocates nothing on the Go heap. Extend needs the index alone: it
// waits its turn under search traffic, and searches wait for it (at most
// one Extend's time) instead of failing. Close waits for the searches in flight; later calls fail
// with safe.ErrClosed.
//
// # Filtered search
//
// cuVS's graph search under a bitset filter walks through the rows the
// filter rejects and returns only allowed ones, so its recall falls with
// the allowed fraction (on the real library, 20,000 × 64: 0.985 with every
// row allowed, 0.709 at 10%, 0.250 at 2%, degree 64, itopk 64; slots it
// cannot fill hold SentinelID). This package adds a policy
// (SearchParams.FilterPath, safe.FilterAuto by default): exact brute force
// (cuvsBruteForceSearch over the index's own dataset) or graph search with
// the internal top-k raised for the allowed fraction (from 45% to 75%
// allowed, an unfiltered graph search for 2k/f candidates filtered on the
// host: see PostFilterFrom), chosen by a cost model fitted to the real
// library's timings, and an exact second pass for the queries that came
// back short. On the test double fitted to the real
// library its recall stays within 0.03 of the unfiltered search from 100%
// down to a single allowed row, and no slot is left unfilled while at
// least k rows are allowed. safe.FilterIndex (the graph search) and
// safe.FilterExact force either path.
//
// For a serving loop that searches batch after batch into the same
// buffers, Prepare checks and binds the tensors once and Prepared.Run is
// then a single C call (about 1.3 times a bare cgo call; Search, which
// redoes the checks and binding each time, about 4 times); SetQueries and
// Results move the data in and out. WarmUp runs one search before serving:
// the first search of a process links cuVS's kernels (seconds).
//
// # Lifetimes
//
// cuVS copies a host dataset, but keeps a reference to a device dataset
// whose rows are a multiple of 16 bytes (float32 rows of 4, 8, 12, ...
// values; on 26.08 C-contiguous rows in device or managed memory), unless
// it compresses it: the index then borrows the dataset
// until Close, and its owner (a safe.DeviceMatrix, say) refuses to be freed
// or written meanwhile, with an error that names the index. IndexFromArgs
// borrows a device graph, and the dataset under the same rule. The views
// Dataset and Graph look into the index's own memory: they expire when the
// index is closed or extended, and the index refuses to close while one is
// in use.
type Index struct {
	c      core.Index[generated.CuvsCagraIndex_t] // Rows changed by Extend; Life also holds the dataset and graph views
	degree atomic.Int64
	dtype  dlpack.DataType

	metric      safe.Metric // as built; for the exact path
	metricKnown bool
	onDisk      bool        // an ACE build that left the index on disk
	noDataset   bool        // 26.08: deserialized without its dataset (cuvsCagraDeserializeGraph), until UpdateDataset
	ownsRows    atomic.Bool // the index (26.08: its dataset) holds a padded device copy of its rows: counted in held
	exactMu     sync.Mutex  // builds left.exact

	exact   *exactSlot   // the exact path's brute-force index, once built; released with the index
	scratch *scratchSlot // the exact path's and the second pass's scratch memory; freed with the index
	ds      *dsSlot      // on cuVS 26.08: the dataset the index references, destroyed after it
}

// kind is CAGRA for the index core. It has no SerializeC or DeserializeC:
// Serialize takes options and, like Deserialize, picks its C call
// by release (see those). Its own buffers (exact, scratch, ds) are freed
// through the life's OnRelease and Own, which also run when an Index is
// dropped without Close, so it has no Release.
var kind = core.Kind[Index, generated.CuvsCagraIndex_t]{
	Name: "cagra", Create: generated.CuvsCagraIndexCreate, Destroy: generated.CuvsCagraIndexDestroy,
	Core:    func(i *Index) *core.Index[generated.CuvsCagraIndex_t] { return &i.c },
	Refresh: (*Index).refresh,
	Held:    (*Index).held,
}

func init() { kind.Init() }

// exactSlot holds the exact path's index apart from the Index, so that the
// cleanup of an Index dropped without Close can release it.
type exactSlot struct{ e *exactState }

func (s *exactSlot) release() {
	s.e.release()
	s.e = nil
}

// newIndex is kind.New with CAGRA's own slots, released with the index
// (by Close, or the cleanup of an Index dropped without it).
func newIndex(op string, res *safe.Resources) (*Index, error) {
	idx, err := kind.New(op, res)
	if err != nil {
		return nil, err
	}
	ds := &dsSlot{}
	idx.exact, idx.scratch, idx.ds = &exactSlot{}, &scratchSlot{}, ds
	idx.c.Life.OnRelease(idx.exact.release)
	idx.c.Life.OnRelease(idx.scratch.release)
	idx.c.Life.Own(func() error { ds.release(); return nil })
	return idx, nil
}

// refresh reads the index's shape from the library. The out-parameters are
// locals: a pointer into the Index, which holds Go pointers, may not be
// passed to C.
func (idx *Index) refresh(op string) error {
	var rows, dim, degree int64
	if err := generated.CuvsCagraIndexGetSize(idx.c.H, &rows); err != nil {
		return kit.Wrap(op, err)
	}
	if err := generated.CuvsCagraIndexGetDims(idx.c.H, &dim); err != nil {
		return kit.Wrap(op, err)
	}
	if err := generated.CuvsCagraIndexGetGraphDegree(idx.c.H, &degree); err != nil {
		return kit.Wrap(op, err)
	}
	idx.c.Rows.Store(rows)
	idx.c.Dim = dim
	idx.degree.Store(degree)
	// Only code and bits: cuvsCagraDeserialize (and maybe other paths of
	// the real library) leave lanes at the 0 cuvsCagraIndexCreate wrote.
	d := idx.c.H.Ref().Dtype
	idx.dtype = kit.DataType(d)
	return nil
}

// graphRows reads the graph's row count (cuvsCagraIndexGetGraph): 0 for an
// index ACE left on disk, whose graph lives in a file.
func (idx *Index) graphRows(op string) (int64, error) {
	return idx.viewRows(op, generated.CuvsCagraIndexGetGraph)
}

// viewRows reads the row count of a view get hands out: 0 when it comes
// without a usable 2-D view (an empty graph or dataset).
func (idx *Index) viewRows(op string, get func(generated.CuvsCagraIndex_t, *generated.DLManagedTensor) error) (int64, error) {
	mt := cDLManaged()
	defer cFree(unsafe.Pointer(mt))
	if err := get(idx.c.H, mt); err != nil {
		return 0, kit.Wrap(op, err)
	}
	im, err := dlpack.Import(mt)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	defer im.Close()
	v, err := im.View()
	if err != nil || v.NDim() != 2 {
		return 0, nil
	}
	return v.Dim(0), nil
}

// refuseOnDisk refuses what cuVS refuses for an index ACE left on disk.
func (idx *Index) refuseOnDisk(op string) error {
	if !idx.onDisk {
		return nil
	}
	return kit.Argf(op, "index", "%w: %s", ErrOnDisk, onDiskHelp)
}

// keepsReference reports whether cuVS keeps a pointer to v's memory rather
// than a copy: device-accessible memory whose rows are a multiple of 16
// bytes (cuVS's make_strided_dataset compares the row stride with the
// 16-byte aligned one; it does not look at the pointer's alignment).
func keepsReference(v *dlpack.View) bool {
	switch v.Device().Type {
	case dlpack.CUDA, dlpack.CUDAHost, dlpack.CUDAManaged:
	default:
		return false
	}
	return (v.Dim(1)*v.DType().ElemSize())%16 == 0
}

// Build makes a CAGRA index from dataset (rows × dim, at least two rows;
// float32, float16, int8 or uint8; host or device memory, row-major).
//
// A dataset of few rows builds as cuVS builds it: cuVS lowers
// IntermediateGraphDegree to rows-1 when it is not below rows, then
// GraphDegree to IntermediateGraphDegree when it is above it (p.Degrees
// says what it builds with; GraphDegree reports the degree built), so 50
// rows index with the defaults, at graph degree 49. Refused, as cuVS cannot
// build them: one row (the degree would be 0), and an IterativeSearch build
// over too few rows, with cuVS's reason (see IndexParams.BuildAlgo).
//
// cuVS copies a host dataset, and keeps a reference to a device dataset
// whose rows are a multiple of 16 bytes (unless p.Compression is set): the
// index then borrows it until Close, and its owner (a safe.DeviceMatrix,
// say) refuses to be freed or written meanwhile. The ACE graph build needs
// the dataset in host memory (CPU or pinned).
//
// On cuVS 26.08 (safe.Release), whose cuvsCagraBuild takes a cuvsDataset_t
// and whose index never owns its rows, Build wraps dataset in the Dataset
// API and the Index keeps that dataset until Close (cuvsDatasetDestroy
// after cuvsCagraIndexDestroy):
//   - device or managed memory, C-contiguous rows of a multiple of 16 bytes:
//     a view (cuvsDatasetMakePaddedView), no copy; the index borrows the
//     caller's memory until Close (or until Extend or UpdateDataset rebind
//     it), as on 26.06;
//   - anything else (host or pinned memory, rows of another width): a
//     padded copy in device memory that the index owns
//     (cuvsDatasetMakePadded); strided device rows go through one more
//     contiguous device copy first;
//   - ACE (host memory): the build reads a standard view of the host rows
//     (cuvsDatasetMakeStandardView), then a padded device copy is attached
//     (cuvsDatasetMakePadded, cuvsCagraUpdateDataset).
//
// p.Compression is refused on 26.08 (an *safe.ArgError naming it and the
// release): 26.08's index params have no compression member and no C call
// takes compression parameters.
//
// C calls: cuvsCagraIndexParamsCreate/Destroy (and, as p asks,
// cuvsIvfPqIndexParamsCreate/Destroy, cuvsIvfPqSearchParamsCreate/Destroy,
// cuvsCagraCompressionParamsCreate/Destroy), cuvsCagraIndexCreate,
// cuvsCagraBuild (26.06's, or 26.08's with the Dataset calls above),
// cuvsStreamSync, and cuvsCagraIndexGetSize/GetDims/GetGraphDegree.
// Nil params means cuVS's defaults (DefaultIndexParams).
func Build(res *safe.Resources, dataset dlpack.Tensor, params *IndexParams) (*Index, error) {
	const op = "cagra.Build"
	pd, perr := kit.Or(params, DefaultIndexParams)
	if perr != nil {
		return nil, perr
	}
	p := *pd
	dv, err := datasetRule.Take(op, res, dataset)
	if err != nil {
		return nil, err
	}
	if dv.Dim(0) < 2 || dv.Dim(1) < 1 {
		return nil, kit.Argf(op, "dataset", "shape %v, want at least two rows (cuVS would lower the graph degree to rows-1 = 0) and one column", dv.Shape())
	}
	if err := p.validate(op); err != nil {
		return nil, err
	}
	if err := p.checkRows(op, "dataset", dv.Dim(0)); err != nil {
		return nil, err
	}
	if err := p.checkCompression(op, dv.Dim(0), dv.Dim(1)); err != nil {
		return nil, err
	}
	if t := dv.Device().Type; p.BuildAlgo == ACE && t != dlpack.CPU && t != dlpack.CUDAHost {
		return nil, kit.Argf(op, "dataset", "the ACE graph build needs host memory, got %s", dv.Device())
	}
	est, eerr := EstimateMemory(safe.MemoryShape{Rows: int(dv.Dim(0)), Dim: int(dv.Dim(1)), DType: dv.DType(), HostDataset: dv.Device().Type == dlpack.CPU}, &p, nil)
	if eerr != nil && !errors.Is(eerr, ErrNotEstimated) {
		return nil, eerr
	}
	if eerr == nil {
		done, err := kit.ReserveBuild(op, res, est)
		if err != nil {
			return nil, err
		}
		defer done()
	}
	cp, err := p.toC(op)
	defer cp.release()
	if err != nil {
		return nil, err
	}
	idx, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	if release.Has(release.CagraDataset) {
		err = idx.build2608(op, res, &dv, cp.p.p08)
	} else {
		if p.Compression == nil && keepsReference(&dv) {
			r, err := dv.Retain(idx.c.Life.Label())
			if err != nil {
				kind.Fail(idx)
				return nil, kit.Argf(op, "dataset", "%w", err)
			}
			idx.c.Life.Borrow(r)
		}
		err = kit.CallWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
			return generated.CuvsCagraBuild(h, cp.p.p06, t[0], idx.c.H)
		})
	}
	if idx, err = kind.Made(op, res, idx, err); err != nil {
		return nil, err
	}
	// what est.Index counts: the rows cuVS (on 26.08 the dataset) copied
	idx.ownsRows.Store(p.BuildAlgo == ACE || dv.Device().Type == dlpack.CPU || (dv.Dim(1)*dv.DType().ElemSize())%16 != 0)
	if eerr == nil {
		idx.c.Mem.Set(op, res, est.Index)
	}
	idx.metric, idx.metricKnown = p.Metric, true
	if p.BuildAlgo == ACE {
		// ACE goes to disk when asked, or when it estimates that host or
		// device memory is short: ask the index.
		g, err := idx.graphRows(op)
		if err != nil {
			kind.Fail(idx)
			return nil, err
		}
		idx.onDisk = (p.ACE != nil && p.ACE.UseDisk) || (g == 0 && idx.c.Rows.Load() > 0)
		if idx.onDisk {
			kind.Recount(idx, op, res) // nothing on the device: the graph and rows are files
		}
	}
	return idx, nil
}

// IndexFromArgs makes an index from a graph (rows × degree, uint32, every
// id below rows) and its dataset (rows × dim), with no build
// (cuvsCagraIndexFromArgs). The index borrows a device graph until Close
// (a host graph is copied), and the dataset when cuVS keeps a reference to
// it (device memory with rows a multiple of 16 bytes).
//
// On cuVS 26.08, whose cuvsCagraIndexFromArgs refuses host datasets and
// whose search takes device-padded indexes only, a dataset that is not
// already padded rows in device memory is copied: a host one uploaded
// first, then (unless the upload is padded) copied into a padded device
// dataset the index owns and attached with cuvsCagraUpdateDataset.
//
// C calls: cuvsCagraIndexCreate, cuvsCagraIndexFromArgs, cuvsStreamSync,
// and cuvsCagraIndexGetSize/GetDims/GetGraphDegree; on 26.08 also
// cuvsRMMAlloc/cuvsMatrixCopy (host datasets), cuvsDatasetMakePadded[View]
// and cuvsCagraUpdateDataset.
func IndexFromArgs(res *safe.Resources, metric safe.Metric, graph, dataset dlpack.Tensor) (*Index, error) {
	const op = "cagra.IndexFromArgs"
	if graph == nil || dataset == nil {
		return nil, kit.Argf(op, "graph/dataset", "nil")
	}
	gv, err := graph.View()
	if err != nil {
		return nil, kit.Argf(op, "graph", "%w", err)
	}
	dv, err := dataset.View()
	if err != nil {
		return nil, kit.Argf(op, "dataset", "%w", err)
	}
	if err := graphRule.CheckOn(op, res, &gv); err != nil {
		return nil, err
	}
	if err := datasetRule.CheckOn(op, res, &dv); err != nil {
		return nil, err
	}
	if gv.Dim(0) != dv.Dim(0) {
		return nil, kit.Argf(op, "graph", "%d rows, the dataset has %d", gv.Dim(0), dv.Dim(0))
	}
	if gv.Dim(1) < 1 || gv.Dim(1) >= gv.Dim(0) {
		return nil, kit.Argf(op, "graph", "degree %d for %d rows", gv.Dim(1), gv.Dim(0))
	}
	if !metric.Valid() {
		return nil, kit.Argf(op, "metric", "%d is not a metric", metric)
	}
	idx, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	for _, v := range []*dlpack.View{&gv, &dv} {
		if v == &gv && v.Device().Type == dlpack.CPU {
			continue // a host graph is copied
		}
		if v == &dv && !keepsReference(v) || v == &dv && release.Has(release.CagraDataset) && !(deviceMemory(v.Device().Type) && padded(v)) {
			continue
		}
		r, err := v.Retain(idx.c.Life.Label())
		if err != nil {
			kind.Fail(idx)
			return nil, kit.Argf(op, "graph/dataset", "%w", err)
		}
		idx.c.Life.Borrow(r)
	}
	if release.Has(release.CagraDataset) {
		err = idx.fromArgs2608(op, res, metric, &gv, &dv)
	} else {
		err = kit.CallWith(op, res, []*dlpack.View{&gv, &dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
			return generated.CuvsCagraIndexFromArgs(h, kit.CMetric(metric), t[0], t[1], idx.c.H)
		})
	}
	if idx, err = kind.Made(op, res, idx, err); err != nil {
		return nil, err
	}
	idx.metric, idx.metricKnown = metric, true
	return idx, nil
}

// Rows returns the number of rows indexed (cuvsCagraIndexGetSize, read
// when the index was made and kept up to date by Extend).
func (idx *Index) Rows() int { return kind.Rows(idx) }

// Dim returns the vectors' dimension (cuvsCagraIndexGetDims). On cuVS
// 26.06 it is 0 for an index deserialized from a file written without its
// dataset: cuVS reports the dimension of the dataset it holds, and it holds
// none; on 26.08 it may be the file's (such an index is refused by Search,
// Prepare and Extend with ErrNoDataset either way).
func (idx *Index) Dim() int { return kind.Dim(idx) }

// GraphDegree returns the graph's degree (cuvsCagraIndexGetGraphDegree):
// the degree cuVS built, which is below IndexParams.GraphDegree when the
// rows were too few for it (IndexParams.Degrees).
func (idx *Index) GraphDegree() int {
	if kind.Gone(idx) {
		return 0
	}
	return int(idx.degree.Load())
}

// DType returns the element type of the vectors.
func (idx *Index) DType() dlpack.DataType {
	if kind.Gone(idx) {
		return dlpack.DataType{}
	}
	return idx.dtype
}

// Extend adds rows to the index (cuvsCagraExtend): additional holds them,
// of the index's element type and dimension, in host or device memory
// (copied). It needs the index alone, and waits its turn: new searches wait
// while it is pending, it waits for the searches in flight (and for a
// running Extend), runs alone, and then lets the searches that waited in
// before another Extend. It never fails because the index is busy; it
// fails with safe.ErrClosed once Close has begun, even while waiting.
// The views from Dataset and Graph expire (it refuses while one is in use).
//
// On cuVS 26.08, whose cuvsCagraExtend takes the old and the new rows
// concatenated in one device-padded dataset and rebinds the index to it,
// Extend builds that dataset on the device: it allocates Rows() + n rows
// (cuvsRMMAlloc), copies the index's rows from its dataset
// (cuvsCagraIndexGetDataset, cuvsMatrixCopy) and the new ones after them,
// and wraps them as a padded view (rows of a multiple of 16 bytes) or
// copies them once more into a padded dataset (cuvsDatasetMakePadded); the
// dataset the index referenced before is destroyed (a view of the
// caller's rows stops being borrowed). So each Extend costs a device copy
// of the whole dataset (two for rows that are not 16-byte multiples), and
// device memory for the old and the new dataset while it runs: extend in
// few large batches rather than many small ones.
//
// Once its turn comes, it refuses with a *safe.MemoryError (matching
// safe.ErrOutOfMemory), before calling cuVS and leaving the index as it
// was, an Extend whose estimate (EstimateExtend) exceeds what the device
// can still give, unless res was made safe.WithoutMemoryCheck;
// safe.DeviceMemory.InUse then counts the grown index in place of the old.
//
// C calls: cuvsCagraExtendParamsCreate/Destroy, cuvsCagraExtend and
// cuvsStreamSync (on 26.08 also the calls above, cuvsDatasetDestroy).
// Nil params means cuVS's defaults (DefaultExtendParams).
func (idx *Index) Extend(res *safe.Resources, additional dlpack.Tensor, params *ExtendParams) error {
	op := kind.Op.Extend
	c, err := kind.Of(idx, op) // a zero index says so, before its arguments are checked
	if err != nil {
		return err
	}
	if err := kit.CheckIndexDevice(res, op, c.Dev); err != nil {
		return err
	}
	pd, perr := kit.Or(params, DefaultExtendParams)
	if perr != nil {
		return perr
	}
	p := *pd
	if err := idx.refuseGraphOnly(op); err != nil {
		return err
	}
	av, err := extendRule.Take(op, res, additional)
	if err != nil {
		return err
	}
	if av.DType() != idx.dtype || av.Dim(1) != idx.c.Dim {
		return kit.Argf(op, "additional", "%s × %d columns, the index holds %s × %d", av.DType(), av.Dim(1), idx.dtype, idx.c.Dim)
	}
	if av.Dim(0) < 1 {
		return kit.Argf(op, "additional", "no rows")
	}
	if err := idx.refuseOnDisk(op); err != nil {
		return err
	}
	added := av.Dim(0)
	return idx.c.Life.Exclusive(op, func() error {
		if err := idx.c.Life.Keep(res, op); err != nil {
			return err
		}
		done, err := kit.ReserveExtend(op, "the Extend (EstimateExtend: BuildPeak + Dataset)", res, idx.extendEstimate(added, int64(p.MaxChunkSize)))
		if err != nil {
			return err
		}
		defer done()
		// The exact path's brute-force index reads the old dataset.
		idx.exact.release()
		var cp generated.CuvsCagraExtendParams_t
		if err := generated.CuvsCagraExtendParamsCreate(&cp); err != nil {
			return kit.Wrap(op, err)
		}
		defer generated.CuvsCagraExtendParamsDestroy(cp)
		cp.Ref().MaxChunkSize = p.MaxChunkSize
		if release.Has(release.CagraDataset) {
			extended, err := idx.extend2608(op, res, cp, &av)
			if extended {
				idx.c.Rows.Add(added)
				// a padded copy of Extend's rows, or a view of them (which
				// count as a matrix)
				idx.ownsRows.Store((idx.c.Dim*idx.dtype.ElemSize())%16 != 0)
				kind.Recount(idx, op, res)
			}
			return err
		}
		extended := false
		err = kit.CallWith(op, res, []*dlpack.View{&av}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
			err := generated.CuvsCagraExtend(h, cp, t[0], idx.c.H)
			extended = err == nil
			return err
		})
		if extended {
			// cuVS appended exactly the new rows and kept the graph degree;
			// the count must follow even if the stream sync after it
			// failed, or filters would be sized for the old count.
			idx.c.Rows.Add(added)
			idx.ownsRows.Store(true) // extend_core's padded copy of every row
			kind.Recount(idx, op, res)
		}
		return err
	})
}

// Search finds the k nearest rows for each query, k being the number of
// columns of neighbors. queries is n × Dim() of the index's element type;
// neighbors (uint32 or int64) and distances (float32) are n × k; all in
// device memory. filter, if not nil, is a bitset for Rows() rows, or a
// bitmap (a row of bits per query, n × Rows()): CAGRA's graph search takes
// bitsets only, so a bitmap is searched exactly (brute force over the
// dataset, as FilterPath safe.FilterExact) and must let every query
// through at least k rows. The results are ready once res's stream is
// synchronized (res.Sync).
//
// A slot CAGRA could not fill holds SentinelID (safe.SentinelID32, in
// uint32 and int64 neighbors alike) and SentinelDistance (last in its row;
// see Valid and Trim; SearchSlice's results hold safe.SentinelID64 with
// +Inf there instead, as every package's): with a filter that allows fewer
// rows than k, or, with FilterPath safe.FilterIndex, whose allowed rows graph
// search cannot reach. A filtered search follows the policy of
// SearchParams.FilterPath: exact brute force over the index's dataset or
// graph search with a raised internal top-k, whichever costs less, with an
// exact second pass for the queries that came back short. An index ACE left on disk is refused (ErrOnDisk), and so
// is one deserialized without its dataset (ErrNoDataset).
//
// Search allocates nothing on the Go heap when its tensors are pointers
// (e.g. *safe.DeviceMatrix), on every path (the exact path keeps its
// scratch memory with the index), and holds no lock across the C call: any
// number of goroutines may search one index, each with its own Resources.
//
// The search parameters are handed to C as a Go value (a plain struct
// that cuVS only reads during the call), so a search makes one C call.
//
// While an Extend runs or waits for the searches in flight, a new search
// waits for it (it does not fail for it): at most the duration of
// one Extend, since the searches that waited go in before the next one.
//
// C calls: cuvsCagraSearch; on the exact path cuvsCagraIndexGetDataset,
// cuvsBruteForceIndexCreate/Build (once), cuvsBruteForceSearch, and
// cuvsMatrixCopy/cuvsStreamSync where results pass through the host.
// Nil params means cuVS's defaults (DefaultSearchParams).
func (idx *Index) Search(res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	op := kind.Op.Search
	// The work is in search, whose many returns would make the shell's
	// defers the slower, heap-style kind.
	return kind.Search(idx, op, func(c dlpack.Call) error {
		return idx.search(op, c, res, params, queries, neighbors, distances, filter)
	})
}

func (idx *Index) search(op string, c dlpack.Call, res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	if err := kit.CheckIndexDevice(res, op, idx.c.Dev); err != nil {
		return err
	}
	if params == nil {
		params = &zeroSearchParams // its zeros are cuVS's defaults
	}
	sp, err := params.withDefaults(op)
	if err != nil {
		return err
	}
	if err := sp.validate(op); err != nil {
		return err
	}
	if err := idx.refuseOnDisk(op); err != nil {
		return err
	}
	if err := idx.refuseGraphOnly(op); err != nil {
		return err
	}
	rows := idx.c.Rows.Load()
	var t kit.SearchTensors
	if err := searchRules.BindOn(op, res, c, queries, neighbors, distances, idx.dtype, idx.c.Dim, rows, &t); err != nil {
		return err
	}
	f, err := kit.BindFilter(filter, op, c, rows, t.N, safe.Bitset, safe.Bitmap)
	if err != nil {
		return err
	}
	if filter != nil && filter.Kind() == safe.Bitmap {
		return idx.searchBitmap(op, res, sp, &t, f, filter)
	}
	if filter == nil {
		if err := sp.checkFiltered(op, false, t.K); err != nil {
			return err
		}
		cp := sp.cValue()
		h, err := kit.Lock(res, op)
		if err != nil {
			return err
		}
		err = generated.CuvsCagraSearch(h, kit.Params[generated.CuvsCagraSearchParams_t](res, &cp), idx.c.H, t.Queries, t.Neighbors, t.Distances, f)
		kit.Unlock(res)
		return kit.Wrap(op, err)
	}
	allowed := int64(filter.Allowed())
	plan := sp.planFilter(filter, rows, idx.c.Dim, idx.degree.Load(), t.K, t.N, idx.noExact())
	if plan.exact {
		return idx.searchExact(op, res, &t, f, allowed)
	}
	sp.ITopKSize = int(plan.itopk)
	if err := sp.checkFiltered(op, true, t.K); err != nil {
		return err
	}
	cp := sp.cValue()
	return idx.searchGraph(op, res, &cp, &t, f, plan, allowed)
}

// Serialize writes the index to a file, with its dataset unless
// safe.WithoutDataset is given: cuvsCagraSerialize on cuVS 26.06,
// cuvsCagraSerializeGraphAndDataset or cuvsCagraSerializeGraph on 26.08.
// cuVS's bytes are followed by the bindings' checksum trailer (CRC-32C
// sums, 4 bytes per MiB), which cuVS's reader, stopping at its last field
// (cagra_serialize.cuh), ignores: cuVS reads the file as its own.
//
// Files are not read across releases: cuVS 26.08's format is version 6
// (with the dataset's kind after the version), 26.06's an earlier one, and
// each release's reader refuses any version but its own
// (cagra_serialize.cuh: "serialization version mismatch"), so a file
// written on one release is refused, as safe.ErrCorruptIndex, by
// Deserialize on the other. Re-serialize after upgrading.
func (idx *Index) Serialize(res *safe.Resources, path string, opts ...safe.SerializeOption) error {
	op := kind.Op.Serialize
	s, err := kit.SerializeSettings(op, opts)
	if err != nil {
		return err
	}
	if err := idx.serialize(op, res, path, !s.WithoutDataset); err != nil {
		return err
	}
	return kit.Seal(op, path, false)
}

// serialize writes the index to a file as cuVS does, without a checksum.
func (idx *Index) serialize(op string, res *safe.Resources, path string, includeDataset bool) error {
	if idx == nil {
		return kit.NilIndex(op)
	}
	return idx.write(op, res, path, func(h generated.CuvsResources_t, p *byte) error {
		switch {
		case !release.Has(release.CagraDataset):
			return generated.CuvsCagraSerialize(h, p, idx.c.H, includeDataset)
		case includeDataset:
			return generated.CuvsCagraSerializeGraphAndDataset(h, p, idx.c.H)
		default:
			return generated.CuvsCagraSerializeGraph(h, p, idx.c.H)
		}
	})
}

// SerializeToHnswlib writes the index in hnswlib's format
// (cuvsCagraSerializeToHnswlib), for CPU search with hnswlib, and its
// checksum to the sidecar file path+".crc32c" (hnswlib refuses bytes
// after its data), which hnsw.Deserialize checks.
func (idx *Index) SerializeToHnswlib(res *safe.Resources, path string) error {
	if idx == nil {
		return kit.NilIndex("cagra.Index.SerializeToHnswlib")
	}
	const op = "cagra.Index.SerializeToHnswlib"
	if err := idx.write(op, res, path, func(h generated.CuvsResources_t, p *byte) error {
		return generated.CuvsCagraSerializeToHnswlib(h, p, idx.c.H)
	}); err != nil {
		return err
	}
	return kit.Seal(op, path, true)
}

func (idx *Index) write(op string, res *safe.Resources, path string, f func(generated.CuvsResources_t, *byte) error) error {
	if err := idx.c.Life.Enter(op); err != nil {
		return err
	}
	defer idx.c.Life.Leave()
	if err := idx.refuseOnDisk(op); err != nil {
		return err
	}
	return kit.WithPath(op, res, path, f)
}

// Deserialize reads an index written by Serialize. The index owns its data.
// Its metric, which the exact path of selective filters needs, is read
// from the file's header (cuVS's format: a dtype tag and NumPy scalars);
// from a file in another format it stays unknown, and such searches are
// refused (see SearchParams.FilterExactBelow). A file that is not a whole
// CAGRA index (truncated, damaged, with bytes after the index) is refused
// with safe.ErrCorruptIndex: its layout is checked before any C call, and
// cuVS's own refusals of its contents carry the sentinel too.
//
// On cuVS 26.08 the file's header says whether it holds its dataset:
// cuvsCagraDeserializeGraphAndDataset then gives an owning dataset that the
// index references and destroys on Close (cuvsDatasetDestroy), and
// cuvsCagraDeserializeGraph reads a file without one (a graph-only index,
// refused with ErrNoDataset until UpdateDataset). Files of the other
// release are refused (see Serialize).
//
// The file's checksum trailer is checked first, where it has one: a
// flipped bit anywhere is safe.ErrCorruptIndex naming the damaged byte
// range. A file cuVS wrote has none and loads unproved (the checks above
// only): safe.RequireChecksum refuses it, safe.Verified tells which.
//
// The device memory it holds, its graph and its rows, counts in
// safe.DeviceMemory.InUse until Close. A file whose index does not fit in
// what the device can still give (safe.DeviceMemory.Available: the graph,
// and the rows where they go to the device, as its header tells) is
// refused with a *safe.MemoryError before cuVS reads it, unless res was
// made safe.WithoutMemoryCheck.
//
// C calls: cuvsCagraIndexCreate, cuvsCagraDeserialize (26.06, then
// cuvsCagraIndexGetDataset) or cuvsCagraDeserializeGraph[AndDataset]
// (26.08), and cuvsCagraIndexGetSize/GetDims/GetGraphDegree.
func Deserialize(res *safe.Resources, path string, opts ...safe.DeserializeOption) (*Index, error) {
	op := kind.Op.Deserialize
	lim, err := kit.Limits(op, opts)
	if err != nil {
		return nil, err
	}
	if err := kit.CheckFile(op, path); err != nil { // refused before any C call: a missing file is fs.ErrNotExist
		return nil, err
	}
	info, err := kit.VerifyFile(op, path, false, lim)
	if err != nil {
		return nil, err
	}
	if err := kit.CheckItemsN(op, path, info.DataLen, true, nil); err != nil {
		return nil, err
	}
	need, err := fileNeed(path, info.DataLen)
	if err != nil {
		return nil, kit.Corrupt(op, err)
	}
	if err := kit.CheckFileMemory(op, res, need); err != nil {
		return nil, err
	}
	idx, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	noDataset := false
	err = kit.Deserialize(op, res, path, func(h generated.CuvsResources_t, p *byte) error {
		if !release.Has(release.CagraDataset) {
			return generated.CuvsCagraDeserialize(h, p, idx.c.H)
		}
		if has, _ := fileHasDataset(path); !has {
			noDataset = true
			return generated.CuvsCagraDeserializeGraph(h, p, idx.c.H)
		}
		var ds generated.CuvsDataset_t
		err := generated.CuvsCagraDeserializeGraphAndDataset(h, p, idx.c.H, &ds)
		idx.ds.replace(dsSlot{ds: ds})
		return err
	})
	idx.noDataset = noDataset
	if idx, err = kind.Made(op, res, idx, err); err != nil {
		return nil, err
	}
	idx.metric, idx.metricKnown = readMetric(path)
	// the rows read from the file, padded to 16 bytes in device memory
	// (26.06: cagra_serialize.cuh deserialize, update_dataset; 26.08: the
	// owning dataset cuvsCagraDeserializeGraphAndDataset gives)
	owns := !noDataset
	if !release.Has(release.CagraDataset) {
		n, err := idx.datasetRows(op)
		if err != nil {
			kind.Fail(idx)
			return nil, err
		}
		owns = n > 0
	}
	idx.ownsRows.Store(owns)
	kind.Recount(idx, op, res)
	return idx, nil
}

// datasetRows reads the dataset's row count (cuvsCagraIndexGetDataset): 0
// for an index without rows (a file written without them, a compressed
// index).
func (idx *Index) datasetRows(op string) (int64, error) {
	return idx.viewRows(op, generated.CuvsCagraIndexGetDataset)
}

// Merge makes one index of several, with p's parameters for the merged
// graph. Its rows are the indexes' rows, concatenated in
// order; filter, if not nil, is a bitset over those concatenated rows, and
// only the rows it lets through are kept (numbered in the same order). The
// indexes must hold the same element type and dimension, and stay usable.
// The merged graph is built over the kept rows as Build builds one: its
// degrees lowered to fit them (GraphDegree reports the degree built); fewer
// than two kept rows are refused.
//
// Merge refuses with a *safe.MemoryError (matching safe.ErrOutOfMemory),
// before calling cuVS, a merge whose peak (the rows gathered on the
// device, then Build over the kept rows; see EstimateMemory) exceeds what
// the device can still give, unless res was made safe.WithoutMemoryCheck
// (the ACE, IterativeSearch and compressed builds are not estimated:
// unchecked); the merged index, its graph and its rows, counts in
// safe.DeviceMemory.InUse until Close.
//
// On cuVS 26.08 cuvsCagraMerge fills an empty owning dataset
// (cuvsDatasetCreate) with the merged rows, in device memory, and the new
// index references it: the Index keeps it until Close. When that device
// allocation fails cuVS falls back to host memory for an unfiltered merge,
// and the merged index then fails Search (cuVS refuses host-backed
// indexes) until UpdateDataset gives it device rows.
//
// C calls: those of Build's parameters, cuvsCagraIndexCreate,
// cuvsCagraMerge, and cuvsCagraIndexGetSize/GetDims/GetGraphDegree (on
// 26.08 also cuvsDatasetCreate, cuvsStreamSync).
// Nil params means cuVS's defaults (DefaultIndexParams).
func Merge(res *safe.Resources, params *IndexParams, indexes []*Index, filter *safe.Filter) (*Index, error) {
	const op = "cagra.Merge"
	pd, perr := kit.Or(params, DefaultIndexParams)
	if perr != nil {
		return nil, perr
	}
	p := *pd
	if len(indexes) < 2 {
		return nil, kit.Argf(op, "indexes", "%d indexes, want at least 2", len(indexes))
	}
	if err := p.validate(op); err != nil {
		return nil, err
	}
	hs := make([]generated.CuvsCagraIndex_t, len(indexes))
	var total int64
	for i, x := range indexes {
		if x == nil {
			return nil, kit.Argf(op, "indexes", "entry %d is nil", i)
		}
		if err := x.c.Life.Enter(fmt.Sprintf("%s: indexes[%d]", op, i)); err != nil {
			return nil, err
		}
		defer x.c.Life.Leave()
		if err := x.refuseOnDisk(fmt.Sprintf("%s: indexes[%d]", op, i)); err != nil {
			return nil, err
		}
		if x.dtype != indexes[0].dtype || x.c.Dim != indexes[0].c.Dim {
			return nil, kit.Argf(op, "indexes", "entry %d holds %s × %d, entry 0 %s × %d", i, x.dtype, x.c.Dim, indexes[0].dtype, indexes[0].c.Dim)
		}
		hs[i] = x.c.H
		total += x.c.Rows.Load()
	}
	kept, arg := total, "indexes"
	if filter != nil {
		kept, arg = int64(filter.Allowed()), "filter"
	}
	// cuVS builds the merged graph over the kept rows (cagra::build), its
	// degrees adjusted to them as Build's are.
	if err := p.checkRows(op, arg, kept); err != nil {
		return nil, err
	}
	if err := p.checkCompression(op, kept, indexes[0].c.Dim); err != nil {
		return nil, err
	}
	if p.Compression == nil {
		est, ok, err := mergeEstimate(&p, total, kept, indexes[0].c.Dim, indexes[0].dtype, filter != nil)
		if err != nil {
			return nil, err
		}
		if ok {
			done, err := kit.ReserveExtend(op, "the merge (its rows and their build)", res, safe.MemoryEstimate{BuildPeak: est.BuildPeak})
			if err != nil {
				return nil, err
			}
			defer done()
		}
	}
	c := dlpack.Begin(op)
	defer c.End()
	f, err := kit.BindFilter(filter, op, c, total, 0, safe.Bitset)
	if err != nil {
		return nil, err
	}
	cp, err := p.toC(op)
	defer cp.release()
	if err != nil {
		return nil, err
	}
	out, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		kind.Fail(out)
		return nil, err
	}
	if release.Has(release.CagraDataset) {
		// 26.08's merge fills an empty owning dataset with the merged rows
		// (in device memory, or in host memory when the device allocation
		// fails for an unfiltered merge) and binds the output index to it.
		var merged generated.CuvsDataset_t
		if err = generated.CuvsDatasetCreate(&merged); err == nil {
			out.ds.replace(dsSlot{ds: merged})
			err = generated.CuvsCagraMerge_v2608(h, cp.p.p08, &hs[0], uint64(len(hs)), f, merged, out.c.H)
		}
		if err == nil {
			err = generated.CuvsStreamSync(h)
		}
	} else {
		err = generated.CuvsCagraMerge(h, cp.p.p06, &hs[0], uint64(len(hs)), f, out.c.H)
	}
	kit.Unlock(res)
	runtime.KeepAlive(hs)
	if out, err = kind.Made(op, res, out, kit.Wrap(op, err)); err != nil {
		return nil, err
	}
	out.metric, out.metricKnown = p.Metric, true
	out.ownsRows.Store(true) // the merged rows (cagra_merge.cuh)
	kind.Recount(out, op, res)
	return out, nil
}

// Dataset returns a read-only view of the index's dataset, rows × dim in
// device memory (cuvsCagraIndexGetDataset). Its rows may be padded to 16
// bytes (the view is then strided), and it is empty (no rows) for a
// compressed index. The view expires when the index is closed or extended;
// while it is bound to a call or retained (by an index made with
// IndexFromArgs, say), the index refuses Close and Extend.
func (idx *Index) Dataset() (dlpack.View, error) {
	if idx == nil {
		return dlpack.View{}, kit.NilIndex("cagra.Index.Dataset")
	}
	v, err := idx.internalView("cagra.Index.Dataset", generated.CuvsCagraIndexGetDataset)
	if err != nil {
		return v, err
	}
	return logicalRows("cagra.Index.Dataset", v, idx.c.Dim)
}

// logicalRows is the dataset view v of cuvsCagraIndexGetDataset as rows ×
// dim, tied to v's owner. The two releases describe padded rows
// differently. cuVS 26.06 hands out the index's strided view: shape [rows,
// dim], strides [row width, 1] (index::dataset() is a layout_stride
// mdspan; c/src/core/detail/interop.hpp to_dlpack writes its strides).
// cuVS 26.08 hands out the storage behind its padded dataset view: a
// row-major [rows, row width] matrix with no strides
// (dense_row_major_dataset_view_storage::view() in
// cpp/include/cuvs/neighbors/common.hpp is the whole padded matrix; the
// logical dimension is kept beside it, and to_dlpack leaves strides NULL
// for row_major), so dim 3 float32 comes back as [rows, 4]. The second is
// narrowed here to the first: the padding columns are not data.
func logicalRows(op string, v dlpack.View, dim int64) (dlpack.View, error) {
	if v.NDim() != 2 || dim <= 0 || v.Dim(0) == 0 || v.Dim(1) <= dim || !v.Layout().IsRowMajor() {
		return v, nil
	}
	p, err := v.Data()
	if err != nil {
		return dlpack.View{}, fmt.Errorf("%s: %w", op, err)
	}
	w, err := dlpack.FromRawParts(p, v.Device(), []int64{v.Dim(0), dim}, []int64{v.Dim(1), 1}, v.DType())
	if err != nil {
		return dlpack.View{}, fmt.Errorf("%s: the index's dataset %v as %d columns: %w", op, v.Shape(), dim, err)
	}
	return w.WithOwner(v.Owner()), nil
}

// Graph returns a read-only view of the index's graph, rows × degree uint32
// in device memory (cuvsCagraIndexGetGraph). It expires as Dataset's does.
func (idx *Index) Graph() (dlpack.View, error) {
	if idx == nil {
		return dlpack.View{}, kit.NilIndex("cagra.Index.Graph")
	}
	return idx.internalView("cagra.Index.Graph", generated.CuvsCagraIndexGetGraph)
}

func (idx *Index) internalView(op string, get func(generated.CuvsCagraIndex_t, *generated.DLManagedTensor) error) (dlpack.View, error) {
	return idx.c.Life.View(op, func(mt *generated.DLManagedTensor) error { return get(idx.c.H, mt) })
}

// Close frees the index, waiting for the searches and the Extend in
// flight, expires its dataset and graph views and ends its borrows. It
// refuses while a view of the index is in use (bound to a call, or
// retained by another index). Closing twice, or closing the zero Index, is
// harmless; if freeing the index fails, the index keeps its borrows and a
// later Close tries again. C call: cuvsCagraIndexDestroy.
func (idx *Index) Close() error { return kind.Close(idx) }

// ErrOnDisk is wrapped by the refusals of an index that an ACE build left
// on disk (ACE's disk mode): cuVS cannot search, extend, merge or serialize
// it.
var ErrOnDisk = errors.New("cagra: the index is stored on disk (ACE disk mode)")

const onDiskHelp = "to search it, convert it to an HNSW index with hnsw.FromCagra (package safe/hnsw: cuvsHnswFromCagra writes hnsw_index.bin next to the graph and loads it at the first search)"
