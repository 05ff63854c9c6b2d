package ivfsq

import (
	"fmt"
	"sync/atomic"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/ivffilter"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

var elemTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16}

// The tensor rules of IVF-SQ, in one place. Build and Extend take host or
// device memory (the C code picks the path from the tensor); Extend's ids
// must be on the same side as its vectors. Search wants device memory.
var (
	datasetRule = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	vectorsRule = kit.Rule{Arg: "vectors", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	idsRule     = kit.Rule{Arg: "ids", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 1, RowMajor: true}
	searchRules = kit.SearchRules{
		Queries:   kit.Rule{Arg: "queries", Memory: kit.DeviceMemory, DTypes: elemTypes, Rank: 2, RowMajor: true},
		Neighbors: kit.Rule{Arg: "neighbors", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 2, RowMajor: true},
		Distances: kit.Rule{Arg: "distances", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true},
	}
)

// deviceCompatible is cuVS's is_dlpack_device_compatible.
func deviceCompatible(d dlpack.Device) bool {
	return d.Type == dlpack.CUDA || d.Type == dlpack.CUDAHost || d.Type == dlpack.CUDAManaged
}

// Index is an IVF-SQ index: each row's residual from its list's center,
// 8 bits per dimension. Any number of goroutines may search it at once,
// each with its own safe.Resources; Extend needs it alone (it waits its
// turn, and searches wait for it), and Close waits for both.
type Index struct {
	c      core.Index[generated.CuvsIvfSqIndex_t]
	ivf    core.IVF
	dtype  atomic.Uint32 // packed code, bits, lanes; changed by Extend after Deserialize
	metric safe.Metric   // as built, or the file's header: for the memory count (center norms)
	cma    bool          // ConservativeMemoryAllocation, as built or read: the lists' capacities
}

// kind is IVF-SQ for the index core.
var kind = core.Kind[Index, generated.CuvsIvfSqIndex_t]{
	Name: "ivfsq", Create: generated.CuvsIvfSqIndexCreate, Destroy: generated.CuvsIvfSqIndexDestroy,
	SerializeC: generated.CuvsIvfSqSerialize, DeserializeC: generated.CuvsIvfSqDeserialize,
	CheckFile: func(op, path string, size int64) error { return kit.CheckItemsN(op, path, size, true, nil) },
	FileNeed:  fileNeed,
	Core:      func(i *Index) *core.Index[generated.CuvsIvfSqIndex_t] { return &i.c },
	Release:   func(i *Index) { _ = i.ivf.Hosts.Close() },
	Refresh:   (*Index).refresh,
	Loaded:    (*Index).loaded,
	Held:      (*Index).held,
}

func init() { kind.Init() }

// refresh reads size, lists and dimension from the library and the dtype
// from the handle.
func (idx *Index) refresh(op string) error {
	var nLists, dim int64
	if err := generated.CuvsIvfSqIndexGetNLists(idx.c.H, &nLists); err != nil {
		return kit.Wrap(op, err)
	}
	if err := generated.CuvsIvfSqIndexGetDim(idx.c.H, &dim); err != nil {
		return kit.Wrap(op, err)
	}
	idx.ivf.NLists, idx.c.Dim = nLists, dim
	return idx.refreshExtended(op)
}

// refreshExtended reads what an Extend changes, the size and the dtype
// (both atomic: searches read them meanwhile, outside the Extend); the
// lists and dimension stay. The dtype's lanes 0, which cuVS leaves, read
// as 1; all zero after Deserialize.
func (idx *Index) refreshExtended(op string) error {
	var size int64
	if err := generated.CuvsIvfSqIndexGetSize(idx.c.H, &size); err != nil {
		return kit.Wrap(op, err)
	}
	idx.c.Rows.Store(size)
	d := idx.c.H.Ref().Dtype
	if d.Lanes == 0 && d.Bits != 0 {
		d.Lanes = 1
	}
	idx.dtype.Store(uint32(d.Code) | uint32(d.Bits)<<8 | uint32(d.Lanes)<<16)
	return nil
}

// Build trains NLists centers by k-means and an 8-bit scalar quantiser on
// dataset (rows × dim, float32 or float16, row-major, host or device
// memory) and, with p.AddDataOnBuild, encodes its rows with ids
// 0..rows-1. cuVS copies what it needs: the index keeps no reference.
//
// C calls: cuvsIvfSqIndexCreate, cuvsIvfSqBuild, cuvsStreamSync,
// cuvsIvfSqIndexGetSize/GetNLists/GetDim.
// Nil params means cuVS's defaults (DefaultIndexParams).
func Build(res *safe.Resources, dataset dlpack.Tensor, params *IndexParams) (*Index, error) {
	const op = "ivfsq.Build"
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
	idx, err := kind.New(op, res)
	if err != nil {
		return nil, err
	}
	cp := p.cValue()
	err = kit.CallWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsIvfSqBuild(h, kit.Params[generated.CuvsIvfSqIndexParams_t](res, &cp), t[0], idx.c.H)
	})
	if idx, err = kind.Made(op, res, idx, err); err == nil {
		idx.metric, idx.cma = p.Metric, p.ConservativeMemoryAllocation
		idx.c.Mem.Set(op, res, est.Index)
	}
	return idx, err
}

// Rows returns the number of rows indexed (cuvsIvfSqIndexGetSize, read
// after every change).
func (idx *Index) Rows() int { return kind.Rows(idx) }

// Dim returns the vectors' dimension (cuvsIvfSqIndexGetDim).
func (idx *Index) Dim() int { return kind.Dim(idx) }

// NLists returns the number of lists (cuvsIvfSqIndexGetNLists).
func (idx *Index) NLists() int {
	if kind.Gone(idx) {
		return 0
	}
	return int(idx.ivf.NLists)
}

// DType returns the element type the index was built (or first extended)
// from. cuVS does not keep it in the file: it is the zero DataType after
// Deserialize until an Extend. It constrains nothing: the index holds
// codes, and Search and Extend take float32 or float16 alike.
func (idx *Index) DType() dlpack.DataType {
	if kind.Gone(idx) {
		return dlpack.DataType{}
	}
	v := idx.dtype.Load()
	return dlpack.DataType{Code: dlpack.TypeCode(v & 0xff), Bits: uint8(v >> 8), Lanes: uint16(v >> 16)}
}

// Extend encodes rows (n × Dim(), float32 or float16, host or device
// memory, copied) with ids, an int64 vector of n ids in the same kind of
// memory (host, or device-compatible), or, with ids nil, the ids
// Rows()..Rows()+n-1 (cuVS itself numbers rows only into an empty index:
// the package passes that vector otherwise, made in the vectors' kind of
// memory and freed before Extend returns). Filters select rows by id.
//
// It needs the index alone, and waits its turn: new searches wait
// while it is pending, it waits for the searches in flight (and for a
// running Extend), runs alone, and then lets the searches that waited in
// before another Extend. It never fails because the index is busy; it
// fails with safe.ErrClosed once Close has begun, even while waiting.
//
// Once its turn comes, it refuses with a *safe.MemoryError (matching
// safe.ErrOutOfMemory), before calling cuVS and leaving the index as it
// was, an Extend whose estimate (EstimateExtend) exceeds what the device
// can still give, unless res was made safe.WithoutMemoryCheck;
// safe.DeviceMemory.InUse then counts the grown index in place of the old.
//
// C calls: cuvsIvfSqExtend, cuvsStreamSync, cuvsIvfSqIndexGetSize/
// GetNLists/GetDim (and cuvsRMMAlloc/Free, cuvsMatrixCopy for device ids
// made by the package).
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
	if vv.Dim(1) != c.Dim {
		return kit.Argf(op, "vectors", "%d columns, the index has dimension %d", vv.Dim(1), c.Dim)
	}
	n := vv.Dim(0)
	if n < 1 {
		return kit.Argf(op, "vectors", "no rows")
	}
	onDevice := deviceCompatible(vv.Device())
	var iv dlpack.View
	pass := false
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
		if deviceCompatible(iv.Device()) != onDevice {
			return kit.Argf(op, "ids", "%s memory, the vectors are in %s memory: both must be on the device or both on the host", iv.Device(), vv.Device())
		}
		pass = true
	}
	return c.Life.Exclusive(op, func() error {
		if err := c.Life.Keep(res, op); err != nil {
			return err
		}
		est := idx.extendEstimate(n, vv.DType().ElemSize(), !onDevice, ids == nil && onDevice)
		done, err := kit.ReserveExtend(op, "the Extend (EstimateExtend: BuildPeak + Dataset)", res, est)
		if err != nil {
			return err
		}
		defer done()
		if ids == nil && c.Rows.Load() > 0 {
			seq := make([]int64, n)
			base := c.Rows.Load()
			for i := range seq {
				seq[i] = base + int64(i)
			}
			if onDevice {
				dev, err := safe.DeviceVectorFrom(res, seq)
				if err != nil {
					return fmt.Errorf("%s: ids: %w", op, err)
				}
				defer dev.Close()
				iv, _ = dev.View()
			} else {
				iv, _ = dlpack.NewHostVector(seq).View()
			}
			pass = true
		}
		in := []*dlpack.View{&vv, nil}
		if pass {
			in[1] = &iv
		}
		err = kit.CallWith(op, res, in, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
			return generated.CuvsIvfSqExtend(h, t[0], t[1], c.H)
		})
		rerr := idx.refreshExtended(op)
		if rerr == nil {
			kind.Recount(idx, op, res)
		} else if err == nil {
			err = rerr
		}
		return err
	})
}

func queryDType(queries dlpack.Tensor) dlpack.DataType {
	if queries == nil {
		return dlpack.DataType{}
	}
	v, err := queries.View()
	if err != nil {
		return dlpack.DataType{}
	}
	return v.DType()
}

func queryDTypeMut(queries dlpack.TensorMut) dlpack.DataType {
	if queries == nil {
		return dlpack.DataType{}
	}
	m, err := queries.ViewMut()
	if err != nil {
		return dlpack.DataType{}
	}
	return m.DType()
}

// Search finds the k nearest rows for each query, k being the number of
// columns of neighbors, among the rows of the params.NProbes lists whose
// centers are nearest the query, by distance to the rows' 8-bit codes.
// queries is n × Dim(), float32 or float16; neighbors (int64, the rows'
// ids) and distances (float32) are n × k; all in device memory. filter, if
// not nil, is a bitset for Rows() rows, by id. The results are ready once
// res's stream is synchronized.
//
// Slots that no allowed row fills (fewer rows in the probed lists, or
// allowed, than k) come last in a row and hold id math.MaxInt64
// (safe.SentinelID64) with distance +Inf (-Inf for InnerProduct), as cuVS
// writes them (seen on an H200). SearchSlice's results hold
// safe.SentinelID64 with +Inf there.
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
// C calls: cuvsIvfSqSearch; safe.FilterAuto's second look also cuvsMatrixCopy
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
		s := core.IVFSearch{Path: ivffilter.Path(sp.FilterPath), Probes: sp.NProbes, DType: queryDType(queries), Filter: filter}
		return idx.c.SearchIVF(&idx.ivf, op, call, res, &searchRules, queries, neighbors, distances, &s, idx.search)
	})
}

// search is IVF-SQ's C search.
func (idx *Index) search(res *safe.Resources, h generated.CuvsResources_t, probes uint32, q, n, d *generated.DLManagedTensor, f generated.CuvsFilter) error {
	cp := generated.CuvsIvfSqSearchParams{NProbes: probes}
	return generated.CuvsIvfSqSearch(h, kit.Params[generated.CuvsIvfSqSearchParams_t](res, &cp), idx.c.H, q, n, d, f)
}

// Centers copies the lists' centers, NLists() × Dim() float32, into dst
// (host or device memory, rows contiguous; e.g. a dlpack.NewHostMatrix
// over a Go slice) and waits for the copy: the same shape as every IVF
// package's Centers.
// cuvsIvfSqIndexGetCenters overwrites the tensor it is given with a view
// into the index (it does not copy): the package hands it a tensor of its
// own and copies from that view.
//
// C calls: cuvsIvfSqIndexGetCenters, cuvsMatrixCopy, cuvsStreamSync, and
// the view's deleter.
func (idx *Index) Centers(res *safe.Resources, dst dlpack.TensorMut) error {
	return kind.Centers(idx, "ivfsq.Index.Centers", res, dst, func() int64 { return idx.ivf.NLists }, generated.CuvsIvfSqIndexGetCenters)
}

// Serialize writes the index to a file (cuvsIvfSqSerialize).
//
// The file is cuVS's bytes followed by the bindings' checksum trailer
// (CRC-32C sums, 4 bytes per MiB), which cuVS's reader, stopping at its
// last field, ignores: cuVS (C, C++, Python) reads the file as its own.
func (idx *Index) Serialize(res *safe.Resources, path string) error {
	return kind.Serialize(idx, res, path)
}

// Deserialize reads an index written by Serialize. Its DType is the zero
// DataType: cuvsIvfSqDeserialize zeroes the handle's dtype. The device
// memory it holds (its lists, read from the file's header) counts in
// safe.DeviceMemory.InUse until Close.
//
// A file whose index does not fit in what the device can still give
// (safe.DeviceMemory.Available) is refused with a *safe.MemoryError before
// cuVS reads it, unless res was made safe.WithoutMemoryCheck: its need, a
// lower bound from the header, is EstimateMemory's fixed part and the
// file's codes and ids, the lists' capacities left out (their sizes are in
// the body).
//
// A file that is not a whole IVF-SQ index (truncated, damaged, with bytes
// after the index) is refused with safe.ErrCorruptIndex: its layout is
// checked before any C call, and cuVS's own refusals of its contents
// carry the sentinel too.
//
// The file's checksum trailer is checked first, where it has one: a
// flipped bit anywhere is safe.ErrCorruptIndex naming the damaged byte
// range. A file cuVS wrote has none and loads unproved (the checks above
// only): safe.RequireChecksum refuses it, safe.Verified tells which.
//
// C calls: cuvsIvfSqIndexCreate, cuvsIvfSqDeserialize,
// cuvsIvfSqIndexGetSize/GetNLists/GetDim.
func Deserialize(res *safe.Resources, path string, opts ...safe.DeserializeOption) (*Index, error) {
	return kind.Deserialize(res, path, opts)
}

// loaded reads the metric and list allocation from the file's header, for
// the device memory the index counts: a 4-byte NumPy dtype, then .npy
// scalars: format version, size, dim, n_lists, metric,
// conservative_memory_allocation (ivf_sq_serialize.cuh).
func (idx *Index) loaded(op, path string) error {
	v, err := npy.ReadHeader(path, "an IVF-SQ index", true, 6)
	if err != nil {
		return kit.Corrupt(op, err)
	}
	idx.metric, idx.cma = safe.Metric(v[4]), v[5] != 0
	return nil
}

// Close frees the index, waiting for the searches and the Extend in
// flight. Closing twice, or closing the zero Index, is harmless; if freeing
// fails, a later Close tries again. C call: cuvsIvfSqIndexDestroy.
func (idx *Index) Close() error { return kind.Close(idx) }
