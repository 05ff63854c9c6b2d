package ivfsq

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/hostsearch"
	"github.com/cuvs-go/cuvs/safe/internal/ivffilter"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

var elemTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16}

// The tensor rules of IVF-SQ, in one place. Build and Extend take host or
// device memory (the C code picks the path from the tensor); Extend's ids
// must be on the same side as its vectors. Search wants device memory.
var (
	datasetRule = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	vectorsRule = kit.Rule{Arg: "vectors", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	idsRule     = kit.Rule{Arg: "ids", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 1, RowMajor: true}
	centersRule = kit.Rule{Arg: "dst", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2}
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
	dev    dlpack.Device              // where the index keeps its memory: the device of the resources that made it
	h      generated.CuvsIvfSqIndex_t // C memory
	rows   atomic.Int64
	dim    int64
	nLists int64
	dtype  atomic.Uint32 // packed code, bits, lanes; changed by Extend after Deserialize

	life   kit.Life        // Close, cleanup, searches, Extend
	slices hostsearch.Pool // SearchSlice's device buffers
	hosts  ivffilter.Pool  // pinned buffers of filtered searches' second passes
}

func newIndex(op string, res *safe.Resources) (*Index, error) {
	var h generated.CuvsIvfSqIndex_t
	if err := generated.CuvsIvfSqIndexCreate(&h); err != nil {
		return nil, kit.Wrap(op, err)
	}
	idx := &Index{h: h}
	kit.Start(&idx.life, idx, "ivfsq.Index(%p)", liveIndexes, func() error { return generated.CuvsIvfSqIndexDestroy(h) })
	// The build, deserialization or merge that follows runs on res and
	// refuses it as Keep would: Keep's error is theirs.
	_ = idx.life.Keep(res, op)
	return idx, nil
}

// fail destroys a half-made index.
func (idx *Index) fail() { idx.life.Fail() }

// refresh reads size, lists and dimension from the library and the dtype
// from the handle (lanes 0, which cuVS leaves, read as 1; all zero after
// Deserialize).
func (idx *Index) refresh(op string) error {
	var size, nLists, dim int64
	if err := generated.CuvsIvfSqIndexGetSize(idx.h, &size); err != nil {
		return kit.Wrap(op, err)
	}
	if err := generated.CuvsIvfSqIndexGetNLists(idx.h, &nLists); err != nil {
		return kit.Wrap(op, err)
	}
	if err := generated.CuvsIvfSqIndexGetDim(idx.h, &dim); err != nil {
		return kit.Wrap(op, err)
	}
	idx.rows.Store(size)
	idx.nLists, idx.dim = nLists, dim
	d := idx.h.Ref().Dtype
	if d.Lanes == 0 && d.Bits != 0 {
		d.Lanes = 1
	}
	idx.dtype.Store(uint32(d.Code) | uint32(d.Bits)<<8 | uint32(d.Lanes)<<16)
	return nil
}

// refreshExtended reads what an Extend changes, the size and the dtype
// (both atomic: searches read them meanwhile, outside the Extend); the
// lists and dimension stay.
func (idx *Index) refreshExtended(op string) error {
	var size int64
	if err := generated.CuvsIvfSqIndexGetSize(idx.h, &size); err != nil {
		return kit.Wrap(op, err)
	}
	idx.rows.Store(size)
	d := idx.h.Ref().Dtype
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
	idx, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	cp := p.cValue()
	if err := kit.CallWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsIvfSqBuild(h, kit.Params[generated.CuvsIvfSqIndexParams_t](res, &cp), t[0], idx.h)
	}); err != nil {
		idx.fail()
		return nil, err
	}
	if err := idx.refresh(op); err != nil {
		idx.fail()
		return nil, err
	}
	idx.dev, _ = kit.DeviceOf(res, op) // unknown (zero) if it cannot be read: then not checked
	return idx, nil
}

// Rows returns the number of rows indexed (cuvsIvfSqIndexGetSize, read
// after every change).
func (idx *Index) Rows() int {
	if idx == nil {
		return 0
	}
	return int(idx.rows.Load())
}

// Dim returns the vectors' dimension (cuvsIvfSqIndexGetDim).
func (idx *Index) Dim() int {
	if idx == nil {
		return 0
	}
	return int(idx.dim)
}

// NLists returns the number of lists (cuvsIvfSqIndexGetNLists).
func (idx *Index) NLists() int {
	if idx == nil {
		return 0
	}
	return int(idx.nLists)
}

// DType returns the element type the index was built (or first extended)
// from. cuVS does not keep it in the file: it is the zero DataType after
// Deserialize until an Extend. It constrains nothing: the index holds
// codes, and Search and Extend take float32 or float16 alike.
func (idx *Index) DType() dlpack.DataType {
	if idx == nil {
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
// C calls: cuvsIvfSqExtend, cuvsStreamSync, cuvsIvfSqIndexGetSize/
// GetNLists/GetDim (and cuvsRMMAlloc/Free, cuvsMatrixCopy for device ids
// made by the package).
func (idx *Index) Extend(res *safe.Resources, vectors dlpack.Tensor, ids dlpack.Tensor) error {
	if idx == nil {
		return kit.NilIndex("ivfsq.Index.Extend")
	}
	if err := idx.life.Built("ivfsq.Index.Extend"); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	const op = "ivfsq.Index.Extend"
	if err := kit.CheckIndexDevice(res, op, idx.dev); err != nil {
		return err
	}
	vv, err := vectorsRule.Take(op, res, vectors)
	if err != nil {
		return err
	}
	if vv.Dim(1) != idx.dim {
		return kit.Argf(op, "vectors", "%d columns, the index has dimension %d", vv.Dim(1), idx.dim)
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
	return idx.life.Exclusive(op, func() error {
		if err := idx.life.Keep(res, op); err != nil {
			return err
		}
		if ids == nil && idx.rows.Load() > 0 {
			seq := make([]int64, n)
			base := idx.rows.Load()
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
			return generated.CuvsIvfSqExtend(h, t[0], t[1], idx.h)
		})
		if rerr := idx.refreshExtended(op); err == nil {
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
// waits for it (never failing with safe.ErrBusy): at most the duration of
// one Extend, since the searches that waited go in before the next one.
//
// With a filter, SearchParams.FilterPath decides how it runs: FilterAuto
// (the default) may probe more lists than NProbes and, when it keeps some
// lists unprobed, reads the distances and searches the queries that came
// back short again with every list; that second look waits for the
// device (the results are still ready only after res.Sync).
//
// C calls: cuvsIvfSqSearch; FilterAuto's second look also cuvsMatrixCopy
// and cuvsStreamSync (into pinned memory, cuvsRMMHostAlloc, kept by the
// index).
// Nil params means cuVS's defaults (DefaultSearchParams).
func (idx *Index) Search(res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	if idx == nil {
		return kit.NilIndex("ivfsq.Index.Search")
	}
	const op = "ivfsq.Index.Search"
	if err := idx.life.Enter(op); err != nil {
		return err
	}
	defer idx.life.Leave()
	c := dlpack.Begin(op)
	defer c.End()
	return idx.search(op, c, res, params, queries, neighbors, distances, filter)
}

func (idx *Index) search(op string, c dlpack.Call, res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	if err := kit.CheckIndexDevice(res, op, idx.dev); err != nil {
		return err
	}
	sp, err := params.resolve(op)
	if err != nil {
		return err
	}
	rows := idx.rows.Load()
	var t kit.SearchTensors
	if err := searchRules.Bind(op, c, queries, neighbors, distances, queryDType(queries), idx.dim, rows, &t); err != nil {
		return err
	}
	f, err := kit.BindFilter(filter, op, c, rows, t.N, safe.Bitset)
	if err != nil {
		return err
	}
	plan := idx.plan(&sp, filter, rows, t.K)
	ft := ivffilter.Tensors{Q: t.Queries, N: t.Neighbors, D: t.Distances, Rows: t.N, K: t.K, QRowSize: rowBytes(t.Queries)}
	return ivffilter.Run(op, res, &idx.hosts, plan, idx.allLists(), &ft, func(res *safe.Resources, h generated.CuvsResources_t, probes uint32, q, n, d *generated.DLManagedTensor) error {
		cp := generated.CuvsIvfSqSearchParams{NProbes: probes}
		return generated.CuvsIvfSqSearch(h, kit.Params[generated.CuvsIvfSqSearchParams_t](res, &cp), idx.h, q, n, d, f)
	})
}

// plan is the filter policy's plan for a search of k neighbours with sp
// and filter (see SearchParams.FilterPath).
func (idx *Index) plan(sp *SearchParams, filter *safe.Filter, rows, k int64) ivffilter.Plan {
	allowed := rows
	if filter != nil {
		allowed = int64(filter.Allowed())
	}
	return ivffilter.Decide(ivffilter.Path(sp.FilterPath), sp.NProbes, idx.nLists, rows, allowed, k, filter != nil)
}

// allLists is the probes of the exact path: every list.
func (idx *Index) allLists() uint32 { return uint32(min(max(idx.nLists, 1), 1<<31)) }

// rowBytes is the size of one row of a bound, packed row-major matrix.
func rowBytes(mt *generated.DLManagedTensor) int64 {
	dl := &mt.DlTensor
	cols := *(*int64)(unsafe.Add(unsafe.Pointer(dl.Shape), 8))
	return cols * int64(dl.Dtype.Bits) / 8 * int64(max(dl.Dtype.Lanes, 1))
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
	if idx == nil {
		return kit.NilIndex("ivfsq.Index.Centers")
	}
	if err := idx.life.Built("ivfsq.Index.Centers"); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	const op = "ivfsq.Index.Centers"
	if dst == nil {
		return kit.Argf(op, "dst", "nil")
	}
	dm, err := dst.ViewMut()
	if err != nil {
		return kit.Argf(op, "dst", "%w", err)
	}
	if err := centersRule.CheckMut(op, &dm); err != nil {
		return err
	}
	if err := idx.life.Enter(op); err != nil {
		return err
	}
	defer idx.life.Leave()
	if dm.Dim(0) != idx.nLists || dm.Dim(1) != idx.dim {
		return kit.Argf(op, "dst", "shape %v, want [%d %d]", dm.Shape(), idx.nLists, idx.dim)
	}
	return kit.CopyOut(op, res, &dm, func(mt *generated.DLManagedTensor) error {
		return generated.CuvsIvfSqIndexGetCenters(idx.h, mt)
	})
}

// Serialize writes the index to a file (cuvsIvfSqSerialize).
func (idx *Index) Serialize(res *safe.Resources, path string) error {
	if idx == nil {
		return kit.NilIndex("ivfsq.Index.Serialize")
	}
	const op = "ivfsq.Index.Serialize"
	return kit.Serialize(op, res, &idx.life, path, func(h generated.CuvsResources_t, p *byte) error {
		return generated.CuvsIvfSqSerialize(h, p, idx.h)
	})
}

// Deserialize reads an index written by Serialize. Its DType is the zero
// DataType: cuvsIvfSqDeserialize zeroes the handle's dtype.
//
// A file that is not a whole IVF-SQ index (truncated, damaged, with bytes
// after the index) is refused with safe.ErrCorruptIndex: its layout is
// checked before any C call, and cuVS's own refusals of its contents
// carry the sentinel too.
//
// C calls: cuvsIvfSqIndexCreate, cuvsIvfSqDeserialize,
// cuvsIvfSqIndexGetSize/GetNLists/GetDim.
func Deserialize(res *safe.Resources, path string) (*Index, error) {
	const op = "ivfsq.Deserialize"
	if err := kit.CheckFile(op, path); err != nil { // refused before any C call: a missing file is fs.ErrNotExist
		return nil, err
	}
	if err := kit.CheckItems(op, path, true, nil); err != nil {
		return nil, err
	}
	idx, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	if err := kit.Deserialize(op, res, path, func(h generated.CuvsResources_t, p *byte) error {
		return generated.CuvsIvfSqDeserialize(h, p, idx.h)
	}); err != nil {
		idx.fail()
		return nil, err
	}
	if err := idx.refresh(op); err != nil {
		idx.fail()
		return nil, err
	}
	idx.dev, _ = kit.DeviceOf(res, op) // unknown (zero) if it cannot be read: then not checked
	return idx, nil
}

// Close frees the index, waiting for the searches and the Extend in
// flight. Closing twice, or closing the zero Index, is harmless; if freeing
// fails, a later Close tries again. C call: cuvsIvfSqIndexDestroy.
func (idx *Index) Close() error {
	if idx == nil {
		return nil
	}
	return idx.life.Close("ivfsq.Index.Close", func() { _ = idx.slices.Close(); _ = idx.hosts.Close() })
}

// liveIndexes counts the indexes not yet destroyed, for tests' leak checks.
var liveIndexes = live.New("ivfsq.Index")
