package tiered

import (
	"sync/atomic"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// The tensor rules of the tiered index (c/src/neighbors/tiered_index.cpp):
// float32 rows in device memory (device_matrix_view), int64 neighbors,
// float32 distances.
var (
	f32         = []dlpack.DataType{dlpack.Float32}
	datasetRule = kit.Rule{Arg: "dataset", Memory: kit.DeviceMemory, DTypes: f32, Rank: 2, RowMajor: true}
	vectorsRule = kit.Rule{Arg: "vectors", Memory: kit.DeviceMemory, DTypes: f32, Rank: 2, RowMajor: true}
	searchRules = kit.SearchRules{
		Queries:   kit.Rule{Arg: "queries", Memory: kit.DeviceMemory, DTypes: f32, Rank: 2, RowMajor: true},
		Neighbors: kit.Rule{Arg: "neighbors", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 2, RowMajor: true},
		Distances: kit.Rule{Arg: "distances", Memory: kit.DeviceMemory, DTypes: f32, Rank: 2, RowMajor: true},
	}
)

// Index is a tiered index: an ANN index (CAGRA, IVF-Flat or IVF-PQ) over
// its first ANNRows() rows and a brute-force tier over the rows added
// since, searched together. It owns a copy of every row (cuVS's storage,
// in device memory): nothing the caller passed is referenced.
//
// Any number of goroutines may search it at once, each with its own
// safe.Resources; Extend needs it alone (it waits its turn); Close waits.
type Index struct {
	h       generated.CuvsTieredIndex_t // C memory
	rows    atomic.Int64
	annRows atomic.Int64
	dim     int64
	p       IndexParams // as built (Metric, Backend, MinANNRows, CreateANNIndexOnExtend)
	dev     dlpack.Device

	life kit.Life
}

func newIndex(op string, res *safe.Resources) (*Index, error) {
	var h generated.CuvsTieredIndex_t
	if err := generated.CuvsTieredIndexCreate(&h); err != nil {
		return nil, kit.Wrap(op, err)
	}
	idx := &Index{h: h}
	kit.Start(&idx.life, idx, "tiered.Index(%p)", liveIndexes, func() error { return generated.CuvsTieredIndexDestroy(h) })
	// The build, deserialization or merge that follows runs on res and
	// refuses it as Keep would: Keep's error is theirs.
	_ = idx.life.Keep(res, op)
	return idx, nil
}

// Build copies dataset (rows × dim float32, row-major, device memory) into
// the index's storage and, when it has more than p.MinANNRows rows, builds
// the backend's ANN index over them; otherwise every row is in the
// brute-force tier. Nil p means DefaultIndexParams.
//
// C calls: cuvsTieredIndexParamsCreate/Destroy, the backend's
// cuvs...IndexParamsCreate/Destroy, cuvsTieredIndexCreate,
// cuvsTieredIndexBuild, cuvsStreamSync.
func Build(res *safe.Resources, dataset dlpack.Tensor, params *IndexParams) (*Index, error) {
	const op = "tiered.Build"
	pd, err := kit.Or(params, DefaultIndexParams)
	if err != nil {
		return nil, err
	}
	p := *pd
	dv, err := datasetRule.Take(op, res, dataset)
	if err != nil {
		return nil, err
	}
	if dv.Dim(0) < 1 || dv.Dim(1) < 1 {
		return nil, kit.Argf(op, "dataset", "shape %v, want at least one row and one column", dv.Shape())
	}
	if err := p.validate(op); err != nil {
		return nil, err
	}
	n := dv.Dim(0)
	if err := p.checkANNRows(op, "dataset", n); err != nil {
		return nil, err
	}
	cp, err := newCParams(op, &p)
	if err != nil {
		return nil, err
	}
	defer cp.free()
	idx, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	if err := kit.CallWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		if is2608() {
			return generated.CuvsTieredIndexBuild_v2608(h, cp.p08, t[0], idx.h)
		}
		return generated.CuvsTieredIndexBuild(h, cp.p06, t[0], idx.h)
	}); err != nil {
		idx.life.Fail()
		return nil, err
	}
	idx.dim, idx.p = dv.Dim(1), p
	idx.rows.Store(n)
	if n > p.MinANNRows {
		idx.annRows.Store(n)
	}
	idx.dev, _ = kit.DeviceOf(res, op)
	return idx, nil
}

// checkANNRows refuses an ANN build an IVF backend cannot make: k-means
// needs at least NLists rows.
func (p *IndexParams) checkANNRows(op, arg string, rows int64) error {
	if rows > p.MinANNRows && p.annLists() > rows {
		return kit.Argf(op, arg, "%d rows for an ANN index of %d lists (%s builds one over more than MinANNRows = %d rows)", rows, p.annLists(), p.Backend, p.MinANNRows)
	}
	return nil
}

// Rows returns the number of rows (both tiers).
func (idx *Index) Rows() int {
	if idx == nil {
		return 0
	}
	return int(idx.rows.Load())
}

// ANNRows returns the rows under the ANN index (the first ones); the rest
// are in the brute-force tier.
func (idx *Index) ANNRows() int {
	if idx == nil {
		return 0
	}
	return int(idx.annRows.Load())
}

// Dim returns the vectors' dimension.
func (idx *Index) Dim() int {
	if idx == nil {
		return 0
	}
	return int(idx.dim)
}

// DType returns float32, the only element type of the C API.
func (idx *Index) DType() dlpack.DataType {
	if idx == nil {
		return dlpack.DataType{}
	}
	return dlpack.Float32
}

// Backend returns the ANN backend.
func (idx *Index) Backend() Backend {
	if idx == nil {
		return 0
	}
	return idx.p.Backend
}

// Extend appends vectors (n × Dim() float32, device memory; copied) to the
// brute-force tier, with ids Rows()..Rows()+n-1; with
// CreateANNIndexOnExtend, once the tier holds more than MinANNRows rows
// the ANN index is rebuilt over every row. It needs the index alone.
//
// C calls: cuvsTieredIndexExtend, cuvsStreamSync.
func (idx *Index) Extend(res *safe.Resources, vectors dlpack.Tensor) error {
	if idx == nil {
		return kit.NilIndex("tiered.Index.Extend")
	}
	const op = "tiered.Index.Extend"
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
	return idx.life.Exclusive(op, func() error {
		if err := idx.life.Keep(res, op); err != nil {
			return err
		}
		rows, ann := idx.rows.Load()+n, idx.annRows.Load()
		rebuild := idx.p.CreateANNIndexOnExtend && rows-ann > idx.p.MinANNRows
		if rebuild {
			if err := idx.p.checkANNRows(op, "vectors", rows); err != nil {
				return err
			}
		}
		if err := kit.CallWith(op, res, []*dlpack.View{&vv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
			return generated.CuvsTieredIndexExtend(h, t[0], idx.h)
		}); err != nil {
			return err
		}
		idx.rows.Store(rows)
		if rebuild {
			idx.annRows.Store(rows)
		}
		return nil
	})
}

// Merge makes a new index of the rows of indexes (at least two, one
// backend, one dimension), in their order: index 0's rows first, then
// index 1's, ... (ids shifted accordingly). The result keeps index 0's ANN
// index over index 0's first ANNRows() rows, the other rows in its
// brute-force tier, unless that tier holds more than params.MinANNRows
// rows: then the ANN index is rebuilt over every row (cuVS's
// tiered_index::merge). params (nil: DefaultIndexParams with the indexes'
// backend and metric) configures that build; its Backend must be theirs.
// The inputs are left as they were.
//
// C calls: the parameters' Create/Destroy (as Build), cuvsTieredIndexCreate,
// cuvsTieredIndexMerge, cuvsStreamSync.
func Merge(res *safe.Resources, params *IndexParams, indexes ...*Index) (*Index, error) {
	const op = "tiered.Merge"
	if len(indexes) < 2 {
		return nil, kit.Argf(op, "indexes", "%d indexes, want at least two (cuVS returns the state of a single index shared, not a copy)", len(indexes))
	}
	for i, x := range indexes {
		if x == nil {
			return nil, kit.Argf(op, "indexes", "index %d is nil", i)
		}
		if x.life.Closed() {
			return nil, kit.Argf(op, "indexes", "index %d: %w", i, safe.ErrClosed)
		}
		if x.p.Backend != indexes[0].p.Backend {
			return nil, kit.Argf(op, "indexes", "index %d is %s, index 0 %s", i, x.p.Backend, indexes[0].p.Backend)
		}
		if x.dim != indexes[0].dim {
			return nil, kit.Argf(op, "indexes", "index %d has dimension %d, index 0 %d", i, x.dim, indexes[0].dim)
		}
	}
	var p IndexParams
	if params != nil {
		p = *params
	} else {
		d, err := DefaultIndexParams()
		if err != nil {
			return nil, err
		}
		p = d
		p.Backend, p.Metric = indexes[0].p.Backend, indexes[0].p.Metric
	}
	if err := p.validate(op); err != nil {
		return nil, err
	}
	if p.Backend != indexes[0].p.Backend {
		return nil, kit.Argf(op, "params.Backend", "%s, the indexes are %s", p.Backend, indexes[0].p.Backend)
	}
	// every input held (shared) for the call
	for i, x := range indexes {
		if err := x.life.Enter(op); err != nil {
			for _, y := range indexes[:i] {
				y.life.Leave()
			}
			return nil, err
		}
	}
	defer func() {
		for _, x := range indexes {
			x.life.Leave()
		}
	}()
	var rows int64
	for _, x := range indexes {
		rows += x.rows.Load()
	}
	ann := indexes[0].annRows.Load()
	rebuild := rows-ann > p.MinANNRows
	if rebuild {
		ann = rows
		if err := p.checkANNRows(op, "indexes", rows); err != nil {
			return nil, err
		}
	}
	cp, err := newCParams(op, &p)
	if err != nil {
		return nil, err
	}
	defer cp.free()
	out, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	hs := (*[1 << 20]generated.CuvsTieredIndex_t)(cAlloc(uintptr(len(indexes)) * unsafe.Sizeof(out.h)))[:len(indexes):len(indexes)]
	defer cFree(unsafe.Pointer(&hs[0]))
	for i, x := range indexes {
		hs[i] = x.h
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		out.life.Fail()
		return nil, err
	}
	if is2608() {
		err = generated.CuvsTieredIndexMerge_v2608(h, cp.p08, &hs[0], uint64(len(indexes)), out.h)
	} else {
		err = generated.CuvsTieredIndexMerge(h, cp.p06, &hs[0], uint64(len(indexes)), out.h)
	}
	if err == nil {
		err = generated.CuvsStreamSync(h)
	}
	kit.Unlock(res)
	if err != nil {
		out.life.Fail()
		return nil, kit.Wrap(op, err)
	}
	out.dim, out.p = indexes[0].dim, p
	out.rows.Store(rows)
	out.annRows.Store(ann)
	out.dev, _ = kit.DeviceOf(res, op)
	return out, nil
}

// Search finds the k nearest rows for each query, k being the columns of
// neighbors: the ANN index and the brute-force tier are each searched for
// k, and the results merged by distance (knn_merge_parts). queries (n ×
// Dim() float32), neighbors (int64 ids) and distances (float32), n × k, in
// device memory; the results are ready once res's stream is synchronized.
// k may not exceed the rows of either tier that holds rows.
//
// filter, if not nil, is a bitset over Rows() rows by id. cuVS hands the
// same bitset to both tiers, and the brute-force tier tests its row j
// (id ANNRows()+j) against bit j: a filter is only right while one tier is
// empty, and is refused otherwise (ArgError naming filter).
//
// C calls: cuvsTieredIndexSearch. Nil params means cuVS's defaults.
func (idx *Index) Search(res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	if idx == nil {
		return kit.NilIndex("tiered.Index.Search")
	}
	const op = "tiered.Index.Search"
	if err := idx.life.Enter(op); err != nil {
		return err
	}
	defer idx.life.Leave()
	if err := kit.CheckIndexDevice(res, op, idx.dev); err != nil {
		return err
	}
	c := dlpack.Begin(op)
	defer c.End()
	rows, ann := idx.rows.Load(), idx.annRows.Load()
	limit := rows
	if ann > 0 && ann < limit {
		limit = ann
	}
	if bf := rows - ann; bf > 0 && bf < limit {
		limit = bf
	}
	var t kit.SearchTensors
	if err := searchRules.Bind(op, c, queries, neighbors, distances, dlpack.Float32, idx.dim, limit, &t); err != nil {
		return err
	}
	if filter != nil && ann > 0 && rows > ann {
		return kit.Argf(op, "filter", "the index has rows in both tiers (%d under the ANN index, %d fresh): cuVS tests the fresh rows against the wrong bits", ann, rows-ann)
	}
	f, err := kit.BindFilter(filter, op, c, rows, t.N, safe.Bitset)
	if err != nil {
		return err
	}
	sp, size, err := idx.searchParams(params)
	if err != nil {
		return err
	}
	mem := cAlloc(size)
	defer cFree(mem)
	switch idx.p.Backend {
	case CAGRA:
		*(*generated.CuvsCagraSearchParams)(mem) = sp.cagra
	case IVFFlat:
		*(*generated.CuvsIvfFlatSearchParams)(mem) = sp.flat
	case IVFPQ:
		*(*generated.CuvsIvfPqSearchParams)(mem) = sp.pq
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = generated.CuvsTieredIndexSearch(h, mem, idx.h, t.Queries, t.Neighbors, t.Distances, f)
	kit.Unlock(res)
	return kit.Wrap(op, err)
}

// Close frees the index, waiting for the searches and the Extend in
// flight. Closing twice, or the zero Index, is harmless. C call:
// cuvsTieredIndexDestroy.
func (idx *Index) Close() error {
	if idx == nil {
		return nil
	}
	return idx.life.Close("tiered.Index.Close")
}

var liveIndexes = live.New("tiered.Index")
