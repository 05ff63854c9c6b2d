package ivfpq

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

var (
	elemTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16, dlpack.Int8, dlpack.Uint8}
	f32       = []dlpack.DataType{dlpack.Float32}
)

// The tensor rules of IVF-PQ, in one place (c/src/neighbors/ivf_pq.cpp).
var (
	datasetRule    = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	vectorsRule    = kit.Rule{Arg: "vectors", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	idsRule        = kit.Rule{Arg: "ids", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 1, RowMajor: true}
	pqCentersRule  = kit.Rule{Arg: "pqCenters", Memory: kit.DeviceMemory, DTypes: f32, Rank: 3, RowMajor: true}
	centersRule    = kit.Rule{Arg: "centers", Memory: kit.DeviceMemory, DTypes: f32, Rank: 2, RowMajor: true}
	centersRotRule = kit.Rule{Arg: "centersRot", Memory: kit.DeviceMemory, DTypes: f32, Rank: 2, RowMajor: true}
	rotationRule   = kit.Rule{Arg: "rotation", Memory: kit.DeviceMemory, DTypes: f32, Rank: 2, RowMajor: true}
	inputRule      = kit.Rule{Arg: "input", Memory: kit.DeviceMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	labelsRule     = kit.Rule{Arg: "labels", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Uint32}, Rank: 1, RowMajor: true}
	codesRule      = kit.Rule{Arg: "codes", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Uint8}, Rank: 2, RowMajor: true}
	searchRules    = kit.SearchRules{
		Queries:   kit.Rule{Arg: "queries", Memory: kit.DeviceMemory, DTypes: elemTypes, Rank: 2, RowMajor: true},
		Neighbors: kit.Rule{Arg: "neighbors", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 2, RowMajor: true},
		Distances: kit.Rule{Arg: "distances", Memory: kit.DeviceMemory, DTypes: f32, Rank: 2, RowMajor: true},
	}
)

// Index is an IVF-PQ index. Any number of goroutines may search it at once,
// each with its own safe.Resources; Extend needs it alone (it waits its
// turn, and searches wait for it), and Close waits for both.
type Index struct {
	c     core.Index[generated.CuvsIvfPqIndex_t] // Rows read from the library, changed by Extend; Life guards the views too
	dtype atomic.Uint32                          // packed dlpack.DataType; 0 while unknown
	// read from the library when the index is made
	nLists, pqDim, pqBits, pqLen int64
	layout                       CodesLayout
	layoutKnown                  bool        // false after a failed Deserialize only
	metric                       safe.Metric // from the params, or the file's header (no C getter)
	// for the device memory the index counts: from the params, or the
	// file's header
	codebook    CodebookKind
	cma         bool // ConservativeMemoryAllocation: the lists' capacities
	precomputed bool // BuildPrecomputed: the codebooks and centers are the caller's
}

// kind is IVF-PQ for the index core.
var kind = core.Kind[Index, generated.CuvsIvfPqIndex_t]{
	Name: "ivfpq", Create: generated.CuvsIvfPqIndexCreate, Destroy: generated.CuvsIvfPqIndexDestroy,
	SerializeC: generated.CuvsIvfPqSerialize, DeserializeC: generated.CuvsIvfPqDeserialize,
	CheckFile: func(op, path string, size int64) error {
		return kit.CheckItemsN(op, path, size, false, new(pqLayout).visit)
	},
	FileNeed: fileNeed,
	Core:     func(i *Index) *core.Index[generated.CuvsIvfPqIndex_t] { return &i.c },
	Refresh:  (*Index).refresh,
	Loaded:   (*Index).loaded,
	Held:     (*Index).held,
}

func init() { kind.Init() }

func packDType(d dlpack.DataType) uint32 {
	return uint32(d.Code) | uint32(d.Bits)<<8 | uint32(d.Lanes)<<16
}

func unpackDType(v uint32) dlpack.DataType {
	return dlpack.DataType{Code: dlpack.TypeCode(v), Bits: uint8(v >> 8), Lanes: uint16(v >> 16)}
}

// readDType reads the index's element type from the C handle. cuVS writes
// code and bits only (lanes stay 0 from cuvsIvfPqIndexCreate, read here as
// 1); code 0 and bits 0 is cuVS's "not known yet" (after
// cuvsIvfPqBuildPrecomputed or cuvsIvfPqDeserialize, until Extend).
func (idx *Index) readDType() {
	d := idx.c.H.Ref().Dtype
	if d.Code == 0 && d.Bits == 0 {
		idx.dtype.Store(0)
		return
	}
	lanes := d.Lanes
	if lanes == 0 {
		lanes = 1
	}
	idx.dtype.Store(packDType(dlpack.DataType{Code: dlpack.TypeCode(d.Code), Bits: d.Bits, Lanes: lanes}))
}

// refresh reads the index's shape from the library. The out-parameters
// are locals: a pointer into the Index, which holds Go pointers, may not be
// passed to C.
func (idx *Index) refresh(op string) error {
	var v [6]int64
	gets := [...]func(generated.CuvsIvfPqIndex_t, *int64) error{
		generated.CuvsIvfPqIndexGetSize, generated.CuvsIvfPqIndexGetDim, generated.CuvsIvfPqIndexGetNLists,
		generated.CuvsIvfPqIndexGetPqDim, generated.CuvsIvfPqIndexGetPqBits, generated.CuvsIvfPqIndexGetPqLen,
	}
	for i, get := range gets {
		var x int64
		if err := get(idx.c.H, &x); err != nil {
			return kit.Wrap(op, err)
		}
		v[i] = x
	}
	idx.c.Rows.Store(v[0])
	idx.c.Dim, idx.nLists, idx.pqDim, idx.pqBits, idx.pqLen = v[1], v[2], v[3], v[4], v[5]
	idx.readDType()
	return nil
}

func deviceCompatible(v *dlpack.View) bool {
	switch v.Device().Type {
	case dlpack.CUDA, dlpack.CUDAHost, dlpack.CUDAManaged:
		return true
	}
	return false
}

// Build trains an IVF-PQ index on dataset (rows × dim, at least NLists
// rows; float32, float16, int8 or uint8; host or device memory, row-major)
// and, with p.AddDataOnBuild, adds its rows with ids 0..rows-1. cuVS copies
// (and compresses) the data: the index keeps no reference to dataset.
//
// C calls: cuvsIvfPqIndexParamsCreate/Destroy, cuvsIvfPqIndexCreate,
// cuvsIvfPqBuild, cuvsStreamSync, and the
// getters cuvsIvfPqIndexGetSize/GetDim/GetNLists/GetPqDim/GetPqBits/GetPqLen.
// Nil params means cuVS's defaults (DefaultIndexParams).
func Build(res *safe.Resources, dataset dlpack.Tensor, params *IndexParams) (*Index, error) {
	const op = "ivfpq.Build"
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
	if dv.Dim(1) > 1<<31 {
		return nil, kit.Argf(op, "dataset", "dimension %d is too large", dv.Dim(1))
	}
	if err := p.validate(op, dv.Dim(1)); err != nil {
		return nil, err
	}
	if int64(p.NLists) > dv.Dim(0) {
		return nil, kit.Argf(op, "params.NLists", "%d lists for %d rows: want at most one list per row (cuVS: number of rows can't be less than n_lists)", p.NLists, dv.Dim(0))
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
	cp, err := p.toC(op)
	if err != nil {
		return nil, err
	}
	defer generated.CuvsIvfPqIndexParamsDestroy(cp)
	idx, err := kind.New(op, res)
	if err != nil {
		return nil, err
	}
	err = kit.CallWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsIvfPqBuild(h, cp, t[0], idx.c.H)
	})
	if idx, err = kind.Made(op, res, idx, err); err == nil {
		idx.layout, idx.layoutKnown, idx.metric = p.CodesLayout, true, p.Metric
		idx.codebook, idx.cma = p.CodebookKind, p.ConservativeMemoryAllocation
		idx.c.Mem.Set(op, res, est.Index)
	}
	return idx, err
}

// BuildPrecomputed makes an index from a model trained elsewhere, with no
// rows (cuvsIvfPqBuildPrecomputed): add them with Extend. The tensors are
// float32, row-major, in device memory, shaped as the views of an index
// with these parameters (see the getters of the same names):
//
//	pqCenters   [PQDim or NLists, PQLen, 2^PQBits]  (PQDim for PerSubspace codebooks)
//	centers     [NLists, round_up(dim+1, 8)]         (as CentersPadded)
//	centersRot  [NLists, PQLen × PQDim]
//	rotation    [PQLen × PQDim, dim]
//
// where PQDim is p.PQDim, or cuVS's choice for dim when 0, and
// PQLen = ceil(dim / PQDim). cuVS keeps references to all four: the index
// borrows them until Close, and their owners refuse to be freed or written
// meanwhile. The index's element type is unknown (DType returns the zero
// DataType) until the first Extend sets it.
//
// C calls: cuvsIvfPqIndexParamsCreate/Destroy, cuvsIvfPqIndexCreate,
// cuvsIvfPqBuildPrecomputed, and the getters as Build.
// Nil params means cuVS's defaults (DefaultIndexParams).
func BuildPrecomputed(res *safe.Resources, params *IndexParams, dim int, pqCenters, centers, centersRot, rotation dlpack.Tensor) (*Index, error) {
	const op = "ivfpq.BuildPrecomputed"
	pd, perr := kit.Or(params, DefaultIndexParams)
	if perr != nil {
		return nil, perr
	}
	p := *pd
	if dim < 1 || int64(dim) > 1<<31 {
		return nil, kit.Argf(op, "dim", "%d, want at least 1", dim)
	}
	if err := p.validate(op, int64(dim)); err != nil {
		return nil, err
	}
	ts := []dlpack.Tensor{pqCenters, centers, centersRot, rotation}
	rules := []*kit.Rule{&pqCentersRule, &centersRule, &centersRotRule, &rotationRule}
	vs := make([]dlpack.View, 4)
	for i, t := range ts {
		if t == nil {
			return nil, kit.Argf(op, rules[i].Arg, "nil")
		}
		v, err := t.View()
		if err != nil {
			return nil, kit.Argf(op, rules[i].Arg, "%w", err)
		}
		if err := rules[i].CheckOn(op, res, &v); err != nil {
			return nil, err
		}
		vs[i] = v
	}
	pqDim := int64(p.PQDim)
	if pqDim == 0 {
		pqDim = int64(calcPQDim(uint32(dim)))
	}
	pqLen := (int64(dim) + pqDim - 1) / pqDim
	books := pqDim
	if p.CodebookKind == PerCluster {
		books = int64(p.NLists)
	}
	nl := int64(p.NLists)
	want := [][]int64{
		{books, pqLen, 1 << p.PQBits},
		{nl, (int64(dim) + 1 + 7) / 8 * 8},
		{nl, pqLen * pqDim},
		{pqLen * pqDim, int64(dim)},
	}
	for i := range vs {
		for j, w := range want[i] {
			if vs[i].Dim(j) != w {
				return nil, kit.Argf(op, rules[i].Arg, "shape %v, want %v for these parameters", vs[i].Shape(), want[i])
			}
		}
	}
	cp, err := p.toC(op)
	if err != nil {
		return nil, err
	}
	defer generated.CuvsIvfPqIndexParamsDestroy(cp)
	idx, err := kind.New(op, res)
	if err != nil {
		return nil, err
	}
	for i := range vs {
		r, err := vs[i].Retain(idx.c.Life.Label())
		if err != nil {
			kind.Fail(idx)
			return nil, kit.Argf(op, rules[i].Arg, "%w", err)
		}
		idx.c.Life.Borrow(r)
	}
	in := []*dlpack.View{&vs[0], &vs[1], &vs[2], &vs[3]}
	err = kit.CallWith(op, res, in, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsIvfPqBuildPrecomputed(h, cp, uint32(dim), t[0], t[1], t[2], t[3], idx.c.H)
	})
	if idx, err = kind.Made(op, res, idx, err); err == nil {
		idx.layout, idx.layoutKnown, idx.metric = p.CodesLayout, true, p.Metric
		idx.codebook, idx.cma, idx.precomputed = p.CodebookKind, p.ConservativeMemoryAllocation, true
		kind.Recount(idx, op, res)
	}
	return idx, err
}

// Rows returns the number of rows indexed (cuvsIvfPqIndexGetSize, read
// when the index was made and kept up to date by Extend).
func (idx *Index) Rows() int { return kind.Rows(idx) }

// Dim returns the vectors' dimension (cuvsIvfPqIndexGetDim).
func (idx *Index) Dim() int { return kind.Dim(idx) }

// NLists returns the number of inverted lists (cuvsIvfPqIndexGetNLists).
func (idx *Index) NLists() int {
	if kind.Gone(idx) {
		return 0
	}
	return int(idx.nLists)
}

// PQDim returns the number of PQ sub-spaces, the codes per vector
// (cuvsIvfPqIndexGetPqDim).
func (idx *Index) PQDim() int {
	if kind.Gone(idx) {
		return 0
	}
	return int(idx.pqDim)
}

// PQBits returns the bits per PQ code (cuvsIvfPqIndexGetPqBits).
func (idx *Index) PQBits() int {
	if kind.Gone(idx) {
		return 0
	}
	return int(idx.pqBits)
}

// PQLen returns the length of a PQ sub-space, ceil(Dim/PQDim)
// (cuvsIvfPqIndexGetPqLen).
func (idx *Index) PQLen() int {
	if kind.Gone(idx) {
		return 0
	}
	return int(idx.pqLen)
}

// RotDim returns the dimension of the rotated space, PQLen × PQDim.
func (idx *Index) RotDim() int {
	if kind.Gone(idx) {
		return 0
	}
	return int(idx.pqLen * idx.pqDim)
}

// CodeBytes returns the bytes of one vector's packed codes,
// ceil(PQDim × PQBits / 8): the width of Transform's and UnpackListCodes's
// codes.
func (idx *Index) CodeBytes() int {
	if kind.Gone(idx) {
		return 0
	}
	return idx.codeBytes()
}

// codeBytes is CodeBytes for the package's own checks, closed or not.
func (idx *Index) codeBytes() int { return int((idx.pqDim*idx.pqBits + 7) / 8) }

// DType returns the element type of the vectors the index was built or
// extended with, or the zero DataType while it is unknown: cuVS records it
// in Build and the first Extend, not in BuildPrecomputed or Deserialize.
// While it is unknown, Search, Extend and Transform accept any of float32,
// float16, int8 and uint8.
func (idx *Index) DType() dlpack.DataType {
	if kind.Gone(idx) {
		return dlpack.DataType{}
	}
	return idx.elemType()
}

// Metric returns the index's distance: the one it was built with, or, for
// a deserialized index, the one its file records.
func (idx *Index) Metric() safe.Metric {
	if kind.Gone(idx) {
		return 0
	}
	return idx.metric
}

// elemType is DType for the package's own checks: the index's element type,
// closed or not.
func (idx *Index) elemType() dlpack.DataType { return unpackDType(idx.dtype.Load()) }

// checkDType checks an input's element type against the index's, when
// known.
func (idx *Index) checkDType(op, arg string, dt dlpack.DataType) error {
	if want := idx.elemType(); want != (dlpack.DataType{}) && dt != want {
		return kit.Argf(op, arg, "dtype %s, the index holds %s", dt, want)
	}
	return nil
}

// Extend adds rows to the index (cuvsIvfPqExtend): vectors (n × Dim(), the
// index's element type, host or device memory, copied and compressed) with
// ids (n int64, in the same kind of memory: both host, or both device,
// pinned or managed). ids nil numbers the rows Rows(), Rows()+1, ...: the
// ids Build gave when the index has only those. Ids need not be unique or
// in order; Search returns them.
//
// It needs the index alone, and waits its turn: new searches wait
// while it is pending, it waits for the searches in flight (and for a
// running Extend), runs alone, and then lets the searches that waited in
// before another Extend. It never fails because the index is busy; it
// fails with safe.ErrClosed once Close has begun, even while waiting.
// The views into the index expire (it refuses while one is in use).
//
// Once its turn comes, it refuses with a *safe.MemoryError (matching
// safe.ErrOutOfMemory), before calling cuVS and leaving the index as it
// was, an Extend whose estimate (EstimateExtend) exceeds what the device
// can still give, unless res was made safe.WithoutMemoryCheck;
// safe.DeviceMemory.InUse then counts the grown index in place of the old.
//
// C calls: cuvsIvfPqExtend, cuvsStreamSync,
// cuvsIvfPqIndexGetSize; with ids nil and vectors not in Go memory, also
// those of safe.DeviceVectorFrom and its Close (cuvsRMMAlloc,
// cuvsMatrixCopy, cuvsStreamSync, cuvsRMMFree).
func (idx *Index) Extend(res *safe.Resources, vectors, ids dlpack.Tensor) error {
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
	if err := idx.checkDType(op, "vectors", vv.DType()); err != nil {
		return err
	}
	if vv.Dim(1) != c.Dim {
		return kit.Argf(op, "vectors", "%d columns, the index has dimension %d", vv.Dim(1), c.Dim)
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
		if deviceCompatible(&iv) != deviceCompatible(&vv) {
			return kit.Argf(op, "ids", "%s memory with vectors in %s memory: both must be host or both device memory", iv.Device(), vv.Device())
		}
	}
	return c.Life.Exclusive(op, func() error {
		if err := c.Life.Keep(res, op); err != nil {
			return err
		}
		est := idx.extendEstimate(n, vv.DType().ElemSize(), !deviceCompatible(&vv), ids == nil && deviceCompatible(&vv))
		done, err := kit.ReserveExtend(op, "the Extend (EstimateExtend: BuildPeak + Dataset)", res, est)
		if err != nil {
			return err
		}
		defer done()
		iv := iv
		if ids == nil {
			gen := make([]int64, n)
			base := c.Rows.Load()
			for i := range gen {
				gen[i] = base + int64(i)
			}
			if deviceCompatible(&vv) {
				d, err := safe.DeviceVectorFrom(res, gen)
				if err != nil {
					return fmt.Errorf("%s: the ids: %w", op, err)
				}
				defer d.Close()
				iv, _ = d.View()
			} else {
				iv, _ = dlpack.NewHostVector(gen).View()
			}
		}
		extended := false
		err = kit.CallWith(op, res, []*dlpack.View{&vv, &iv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
			err := generated.CuvsIvfPqExtend(h, t[0], t[1], c.H)
			extended = err == nil
			return err
		})
		if extended {
			// cuVS added exactly the new rows, and set the dtype if it was
			// unknown; the count must follow even if the sync after it
			// failed.
			c.Rows.Add(n)
			idx.readDType()
			kind.Recount(idx, op, res)
		}
		return err
	})
}

// Search finds the k nearest rows for each query, k being the number of
// columns of neighbors, among the rows of the params.NProbes lists nearest
// to the query. queries is n × Dim() of the index's element type (any of
// the four while DType is unknown); neighbors (int64: the ids given to
// Extend, 0..rows-1 for Build's rows) and distances (float32, approximate:
// computed from the compressed codes) are n × k; all in device memory. The
// results are ready once res's stream is synchronized (res.Sync).
//
// Slots that no row fills (fewer rows in the probed lists than k) come
// last in a row and hold id math.MaxInt64 (safe.SentinelID64) with
// distance +Inf (-Inf for InnerProduct), as cuVS writes them (seen on an
// H200). SearchSlice's results hold safe.SentinelID64 with +Inf there.
//
// cuVS's IVF-PQ C API takes no filter. Search allocates nothing on the Go
// heap when its tensors are pointers (e.g. *safe.DeviceMatrix), and holds no
// lock across the C call: any number of goroutines may search one index,
// each with its own Resources. cuVS v26.06 cannot search an index whose
// CodesLayout is Flat: Search refuses it when the layout is known.
//
// While an Extend runs or waits for the searches in flight, a new search
// waits for it (it does not fail for it): at most the duration of
// one Extend, since the searches that waited go in before the next one.
//
// C calls: cuvsIvfPqSearch (the parameters are handed to C as a Go value,
// which cuVS copies).
// Nil params means cuVS's defaults (DefaultSearchParams).
func (idx *Index) Search(res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error {
	op := kind.Op.Search
	return kind.Search(idx, op, func(c dlpack.Call) error {
		return idx.search(op, c, res, params, queries, neighbors, distances)
	})
}

// searchDType is the element type a search binds queries with: the index's,
// or, while unknown, the queries' own (whose rule still limits it).
func (idx *Index) searchDType(queries dlpack.Tensor) dlpack.DataType {
	dt := idx.elemType()
	if dt == (dlpack.DataType{}) && queries != nil {
		if qv, err := queries.View(); err == nil {
			dt = qv.DType()
		}
	}
	return dt
}

// checkSearch checks params and the index for a search, and returns the
// params to use: params with its zero fields filled in by cuVS's defaults
// (nil: all of DefaultSearchParams).
func (idx *Index) checkSearch(op string, params *SearchParams) (SearchParams, error) {
	sp, err := params.resolve(op)
	if err != nil {
		return SearchParams{}, err
	}
	if idx.layoutKnown && idx.layout != Interleaved {
		return SearchParams{}, kit.Argf(op, "index", "the index's codes layout is %s: cuVS searches only Interleaved", idx.layout)
	}
	return sp, nil
}

func (idx *Index) search(op string, c dlpack.Call, res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error {
	if err := kit.CheckIndexDevice(res, op, idx.c.Dev); err != nil {
		return err
	}
	sp, err := idx.checkSearch(op, params)
	if err != nil {
		return err
	}
	var t kit.SearchTensors
	if err := searchRules.Bind(op, c, queries, neighbors, distances, idx.searchDType(queries), idx.c.Dim, idx.c.Rows.Load(), &t); err != nil {
		return err
	}
	cp := sp.cValue()
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = generated.CuvsIvfPqSearch(h, kit.Params[generated.CuvsIvfPqSearchParams_t](res, &cp), idx.c.H, t.Queries, t.Neighbors, t.Distances)
	kit.Unlock(res)
	return kit.Wrap(op, err)
}

// Transform encodes input (n × Dim(), device memory) as the index would
// store it (cuvsIvfPqTransform): labels (n uint32) receives each row's
// nearest list, codes (n × CodeBytes() uint8) its packed PQ codes. All in
// device memory; ready once res is synchronized.
func (idx *Index) Transform(res *safe.Resources, input dlpack.Tensor, labels, codes dlpack.TensorMut) error {
	const op = "ivfpq.Index.Transform"
	c, err := kind.Of(idx, op) // a zero index says so, before its arguments are checked
	if err != nil {
		return err
	}
	if input == nil || labels == nil || codes == nil {
		return kit.Argf(op, "input/labels/codes", "nil tensor")
	}
	if err := c.Life.Enter(op); err != nil {
		return err
	}
	defer c.Leave()
	iv, err := input.View()
	if err != nil {
		return kit.Argf(op, "input", "%w", err)
	}
	lm, err := labels.ViewMut()
	if err != nil {
		return kit.Argf(op, "labels", "%w", err)
	}
	cm, err := codes.ViewMut()
	if err != nil {
		return kit.Argf(op, "codes", "%w", err)
	}
	if err := inputRule.CheckOn(op, res, &iv); err != nil {
		return err
	}
	if err := idx.checkDType(op, "input", iv.DType()); err != nil {
		return err
	}
	if iv.Dim(1) != c.Dim {
		return kit.Argf(op, "input", "%d columns, the index has dimension %d", iv.Dim(1), c.Dim)
	}
	if err := labelsRule.CheckMut(op, &lm); err != nil {
		return err
	}
	if err := codesRule.CheckMut(op, &cm); err != nil {
		return err
	}
	n := iv.Dim(0)
	if lm.Dim(0) != n {
		return kit.Argf(op, "labels", "%d entries for %d rows", lm.Dim(0), n)
	}
	if cm.Dim(0) != n || cm.Dim(1) != int64(idx.codeBytes()) {
		return kit.Argf(op, "codes", "shape %v, want [%d %d]", cm.Shape(), n, idx.codeBytes())
	}
	call := dlpack.Begin(op)
	defer call.End()
	it, err := call.In(&iv)
	if err != nil {
		return kit.Argf(op, "input", "%w", err)
	}
	lt, err := call.Out(&lm)
	if err != nil {
		return kit.Argf(op, "labels", "%w", err)
	}
	ct, err := call.Out(&cm)
	if err != nil {
		return kit.Argf(op, "codes", "%w", err)
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(res)
	return kit.Wrap(op, generated.CuvsIvfPqTransform(h, c.H, it, lt, ct))
}

// ListSizesToHost returns the number of rows in each list, read from the
// index (cuvsIvfPqIndexGetListSizes, then cuvsMatrixCopy and
// cuvsStreamSync into Go memory).
func (idx *Index) ListSizesToHost(res *safe.Resources) ([]uint32, error) {
	const op = "ivfpq.Index.ListSizesToHost"
	c, err := kind.Enter(idx, op)
	if err != nil {
		return nil, err
	}
	defer c.Leave()
	return idx.listSizes(op, res)
}

func (idx *Index) listSizes(op string, res *safe.Resources) ([]uint32, error) {
	mt := cDLManaged()
	defer cFree(unsafe.Pointer(mt))
	if err := generated.CuvsIvfPqIndexGetListSizes(idx.c.H, mt); err != nil {
		return nil, kit.Wrap(op, err)
	}
	im, err := dlpack.Import(mt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer im.Close()
	v, err := im.View()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out := make([]uint32, v.Len())
	hm, err := dlpack.NewHostVector(out).ViewMut()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := safe.Copy(res, &v, &hm); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// UnpackListCodes copies the packed PQ codes of rows offset, offset+1, ...
// of list label into codes (n × CodeBytes() uint8, device memory, n rows
// unpacked) (cuvsIvfPqIndexUnpackContiguousListData); ready once res is
// synchronized. The rows must exist (offset + n ≤ the list's size), and the
// index's layout must be Interleaved (cuVS v26.06 unpacks no other).
//
// C calls: cuvsIvfPqIndexGetListSizes, cuvsMatrixCopy, cuvsStreamSync (to
// check the range), cuvsIvfPqIndexUnpackContiguousListData.
func (idx *Index) UnpackListCodes(res *safe.Resources, label, offset uint32, codes dlpack.TensorMut) error {
	const op = "ivfpq.Index.UnpackListCodes"
	c, err := kind.Of(idx, op) // a zero index says so, before its arguments are checked
	if err != nil {
		return err
	}
	if codes == nil {
		return kit.Argf(op, "codes", "nil")
	}
	if err := c.Life.Enter(op); err != nil {
		return err
	}
	defer c.Leave()
	if int64(label) >= idx.nLists {
		return kit.Argf(op, "label", "%d, the index has %d lists", label, idx.nLists)
	}
	if idx.layoutKnown && idx.layout != Interleaved {
		return kit.Argf(op, "index", "the index's codes layout is %s: cuVS unpacks only Interleaved", idx.layout)
	}
	cm, err := codes.ViewMut()
	if err != nil {
		return kit.Argf(op, "codes", "%w", err)
	}
	if err := codesRule.CheckMut(op, &cm); err != nil {
		return err
	}
	if cm.Dim(1) != int64(idx.codeBytes()) {
		return kit.Argf(op, "codes", "%d columns, want CodeBytes() = %d", cm.Dim(1), idx.codeBytes())
	}
	if c.Rows.Load() == 0 {
		return kit.Argf(op, "label", "the index holds no rows")
	}
	sizes, err := idx.listSizes(op, res)
	if err != nil {
		return err
	}
	if int64(offset)+cm.Dim(0) > int64(sizes[label]) {
		return kit.Argf(op, "offset", "rows %d..%d of list %d, which holds %d", offset, int64(offset)+cm.Dim(0), label, sizes[label])
	}
	call := dlpack.Begin(op)
	defer call.End()
	ct, err := call.Out(&cm)
	if err != nil {
		return kit.Argf(op, "codes", "%w", err)
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(res)
	return kit.Wrap(op, generated.CuvsIvfPqIndexUnpackContiguousListData(h, c.H, ct, label, offset))
}

// Serialize writes the index to a file (cuvsIvfPqSerialize).
//
// The file is cuVS's bytes followed by the bindings' checksum trailer
// (CRC-32C sums, 4 bytes per MiB), which cuVS's reader, stopping at its
// last field, ignores: cuVS (C, C++, Python) reads the file as its own.
func (idx *Index) Serialize(res *safe.Resources, path string) error {
	return kind.Serialize(idx, res, path)
}

// Deserialize reads an index written by Serialize. The index owns its data.
// cuVS's file does not record the element type: DType is unknown until the
// first Extend, and Search accepts queries of any of the four types (the
// index's codes are the same whatever type the vectors had). The metric and
// the codes layout, which the C API does not report, are read from the
// file's header.
//
// A file whose index does not fit in what the device can still give
// (safe.DeviceMemory.Available) is refused with a *safe.MemoryError before
// cuVS reads it, unless res was made safe.WithoutMemoryCheck: its need, a
// lower bound from the header, is EstimateMemory's fixed part and the
// file's codes and ids, the lists' capacities left out (their sizes are in
// the body).
//
// A file that is not a whole IVF-PQ index (truncated, damaged, with bytes
// after the index) is refused with safe.ErrCorruptIndex: its layout is
// checked before any C call, and cuVS's own refusals of its contents
// carry the sentinel too.
//
// The file's checksum trailer is checked first, where it has one: a
// flipped bit anywhere is safe.ErrCorruptIndex naming the damaged byte
// range. A file cuVS wrote has none and loads unproved (the checks above
// only): safe.RequireChecksum refuses it, safe.Verified tells which.
//
// C calls: cuvsIvfPqIndexCreate, cuvsIvfPqDeserialize, and the getters as
// Build.
func Deserialize(res *safe.Resources, path string, opts ...safe.DeserializeOption) (*Index, error) {
	return kind.Deserialize(res, path, opts)
}

// Centers copies the coarse cluster centres, NLists() × Dim() float32,
// into dst (host or device memory, rows contiguous; e.g. a
// dlpack.NewHostMatrix over a Go slice) and waits for the copy: the same
// shape as ivfflat's and ivfsq's Centers. cuvsIvfPqIndexGetCenters hands
// out a strided view into the index (rows of CentersPadded's width); a
// copy stays valid after Extend and Close, which a view would not. The
// view itself, padded, is CentersPadded.
//
// C calls: cuvsIvfPqIndexGetCenters, cuvsMatrixCopy, cuvsStreamSync, and
// the view's deleter.
func (idx *Index) Centers(res *safe.Resources, dst dlpack.TensorMut) error {
	return kind.Centers(idx, "ivfpq.Index.Centers", res, dst, func() int64 { return idx.nLists }, generated.CuvsIvfPqIndexGetCenters)
}

// CentersPadded returns a view of the centres as the index stores them,
// NLists × round_up(Dim+1, 8) float32, each row the centre, its squared
// norm and zeros (cuvsIvfPqIndexGetCentersPadded).
func (idx *Index) CentersPadded() (dlpack.View, error) {
	if idx == nil {
		return dlpack.View{}, kit.NilIndex("ivfpq.Index.CentersPadded")
	}
	return idx.internalView("ivfpq.Index.CentersPadded", generated.CuvsIvfPqIndexGetCentersPadded)
}

// PQCenters returns a view of the PQ codebooks, float32 [PQDim (or NLists
// for PerCluster codebooks), PQLen, 2^PQBits] (cuvsIvfPqIndexGetPqCenters).
func (idx *Index) PQCenters() (dlpack.View, error) {
	if idx == nil {
		return dlpack.View{}, kit.NilIndex("ivfpq.Index.PQCenters")
	}
	return idx.internalView("ivfpq.Index.PQCenters", generated.CuvsIvfPqIndexGetPqCenters)
}

// CentersRot returns a view of the centres in the rotated space, NLists ×
// RotDim float32 (cuvsIvfPqIndexGetCentersRot).
func (idx *Index) CentersRot() (dlpack.View, error) {
	if idx == nil {
		return dlpack.View{}, kit.NilIndex("ivfpq.Index.CentersRot")
	}
	return idx.internalView("ivfpq.Index.CentersRot", generated.CuvsIvfPqIndexGetCentersRot)
}

// RotationMatrix returns a view of the rotation, RotDim × Dim float32
// (cuvsIvfPqIndexGetRotationMatrix).
func (idx *Index) RotationMatrix() (dlpack.View, error) {
	if idx == nil {
		return dlpack.View{}, kit.NilIndex("ivfpq.Index.RotationMatrix")
	}
	return idx.internalView("ivfpq.Index.RotationMatrix", generated.CuvsIvfPqIndexGetRotationMatrix)
}

// ListSizes returns a view of the lists' sizes, NLists uint32 in device
// memory (cuvsIvfPqIndexGetListSizes); ListSizesToHost copies them.
func (idx *Index) ListSizes() (dlpack.View, error) {
	if idx == nil {
		return dlpack.View{}, kit.NilIndex("ivfpq.Index.ListSizes")
	}
	return idx.internalView("ivfpq.Index.ListSizes", generated.CuvsIvfPqIndexGetListSizes)
}

// ListIndices returns a view of the ids stored in list label, int64 in
// device memory (cuvsIvfPqIndexGetListIndices). Its length is the list's
// capacity: only the first ListSizes()[label] entries are ids, the rest
// are cuVS's filler. The index must hold rows (cuVS allocates no lists
// before).
func (idx *Index) ListIndices(label uint32) (dlpack.View, error) {
	const op = "ivfpq.Index.ListIndices"
	c, err := kind.Of(idx, op) // a zero index says so, before its arguments are checked
	if err != nil {
		return dlpack.View{}, err
	}
	if int64(label) >= idx.nLists {
		return dlpack.View{}, kit.Argf(op, "label", "%d, the index has %d lists", label, idx.nLists)
	}
	if c.Rows.Load() == 0 {
		return dlpack.View{}, kit.Argf(op, "label", "the index holds no rows: cuVS has no lists yet")
	}
	return idx.internalView(op, func(h generated.CuvsIvfPqIndex_t, mt *generated.DLManagedTensor) error {
		return generated.CuvsIvfPqIndexGetListIndices(h, label, mt)
	})
}

func (idx *Index) internalView(op string, get func(generated.CuvsIvfPqIndex_t, *generated.DLManagedTensor) error) (dlpack.View, error) {
	return idx.c.Life.View(op, func(mt *generated.DLManagedTensor) error { return get(idx.c.H, mt) })
}

// Close frees the index, waiting for the searches and the Extend in
// flight, expires its views and ends its borrows (BuildPrecomputed's
// tensors). It refuses while a view of the index is in use (bound to a
// call, or retained by another index). Closing twice, or closing the zero
// Index, is harmless; if freeing the index fails, the index keeps its
// borrows and a later Close tries again. C call: cuvsIvfPqIndexDestroy.
func (idx *Index) Close() error { return kind.Close(idx) }
