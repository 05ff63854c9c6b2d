package tiered

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/internal/hostsearch"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/release"
)

// The tensor rules of the tiered index: float32 rows in host or device
// memory for Build and Extend (copied into the index's own device
// storage), and cuvsTieredIndexSearch's (c/src/neighbors/tiered_index.cpp)
// for Search: device queries and outputs, int64 neighbors, float32
// distances.
var (
	f32         = []dlpack.DataType{dlpack.Float32}
	datasetRule = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: f32, Rank: 2, RowMajor: true}
	vectorsRule = kit.Rule{Arg: "vectors", Memory: kit.AnyMemory, DTypes: f32, Rank: 2, RowMajor: true}
	searchRules = kit.SearchRules{
		Queries:   kit.Rule{Arg: "queries", Memory: kit.DeviceMemory, DTypes: f32, Rank: 2, RowMajor: true},
		Neighbors: kit.Rule{Arg: "neighbors", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 2, RowMajor: true},
		Distances: kit.Rule{Arg: "distances", Memory: kit.DeviceMemory, DTypes: f32, Rank: 2, RowMajor: true},
	}
)

// Index is a growable index: an ANN index (CAGRA, IVF-Flat or IVF-PQ, a
// cuVS tiered index holding exactly those rows) over its first ANNRows()
// rows, and a fresh tier, searched by brute force, over the rows added
// since. It owns a copy of every row in device memory: nothing the caller
// passed is referenced.
//
// Any number of goroutines may search it at once, each with its own
// safe.Resources; Extend needs it alone (it waits its turn); Close waits.
type Index struct {
	st      *parts
	rows    atomic.Int64
	annRows atomic.Int64
	dim     int64
	p       IndexParams // as built (Metric, Backend, MinANNRows, CreateANNIndexOnExtend)
	dev     dlpack.Device

	life   kit.Life
	grow   sync.Mutex      // held by Extend: one at a time
	slices hostsearch.Pool // SearchSlice's device buffers
}

// parts is what the index holds, shared with its Life's destroy function
// (which must hold no pointer to the Index).
type parts struct {
	// ann is the C tiered index over annData's rows, never extended: its
	// searches are the ANN index's (cuVS searches a tiered index without
	// fresh rows with its ANN index alone, the filter by id). Zero while
	// no ANN index is built.
	ann     generated.CuvsTieredIndex_t
	annData *safe.DeviceMatrix[float32] // the ANN rows, ids 0..annRows-1 (ann was built from it)
	fresh   *safe.DeviceMatrix[float32] // the fresh rows in its first rows-annRows rows (capacity: its Rows())
	freshBF *bruteforce.Index           // brute force over the fresh rows

	mu       sync.Mutex        // annExact and filters, made during searches
	annExact *bruteforce.Index // brute force over annData, for selective filters (made on first use)
	filters  map[weak.Pointer[safe.Filter]]*derived
}

// free releases everything; the first error is returned, the rest freed
// anyway.
func (s *parts) free() error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	s.mu.Lock()
	s.dropFilters()
	if s.annExact != nil {
		keep(s.annExact.Close())
		s.annExact = nil
	}
	s.mu.Unlock()
	if s.freshBF != nil {
		keep(s.freshBF.Close())
		s.freshBF = nil
	}
	if s.ann != 0 {
		if err := generated.CuvsTieredIndexDestroy(s.ann); err != nil {
			return err // kept for a later Close
		}
		s.ann = 0
	}
	for _, m := range []**safe.DeviceMatrix[float32]{&s.annData, &s.fresh} {
		if *m != nil {
			keep((*m).Close())
			*m = nil
		}
	}
	return first
}

func newIndex(op string, res *safe.Resources) (*Index, error) {
	idx := &Index{st: &parts{}}
	st := idx.st
	kit.Start(&idx.life, idx, "tiered.Index(%p)", liveIndexes, st.free)
	if err := idx.life.Keep(res, op); err != nil {
		idx.life.Fail()
		return nil, err
	}
	return idx, nil
}

// newTiered builds a C tiered index over data (all of it under the ANN
// index: more than p.MinANNRows rows).
func newTiered(op string, res *safe.Resources, p *IndexParams, data *safe.DeviceMatrix[float32]) (generated.CuvsTieredIndex_t, error) {
	dv, err := data.View()
	if err != nil {
		return 0, kit.Wrap(op, err)
	}
	cp, err := newCParams(op, p)
	if err != nil {
		return 0, err
	}
	defer cp.free()
	var h generated.CuvsTieredIndex_t
	if err := generated.CuvsTieredIndexCreate(&h); err != nil {
		return 0, kit.Wrap(op, err)
	}
	if err := kit.CallWith(op, res, []*dlpack.View{&dv}, func(r generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		if release.Has(release.TieredParams2608) {
			return generated.CuvsTieredIndexBuild_v2608(r, cp.p08, t[0], h)
		}
		return generated.CuvsTieredIndexBuild(r, cp.p06, t[0], h)
	}); err != nil {
		_ = generated.CuvsTieredIndexDestroy(h)
		return 0, err
	}
	return h, nil
}

// Build copies dataset (rows × dim float32, row-major; Go, host or device
// memory; host values must be finite) into the index's device storage
// and, when it has more than p.MinANNRows rows, builds the backend's ANN
// index over them; otherwise every row is in the fresh tier. Nil p means
// DefaultIndexParams.
//
// C calls: cuvsRMMAlloc and cuvsMatrixCopy (the copy),
// cuvsTieredIndexParamsCreate/Destroy, the backend's
// cuvs...IndexParamsCreate/Destroy, cuvsTieredIndexCreate,
// cuvsTieredIndexBuild, cuvsStreamSync; below MinANNRows
// cuvsBruteForceBuild instead.
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
	if err := p.checkANNRows(op, "dataset", dv.Dim(0)); err != nil {
		return nil, err
	}
	data, err := safe.NewDeviceMatrix[float32](res, int(dv.Dim(0)), int(dv.Dim(1)))
	if err != nil {
		return nil, kit.Wrap(op, err)
	}
	if err := copyRows(res, &dv, data, 0); err != nil {
		_ = data.Close()
		return nil, kit.Wrap(op, err)
	}
	return build(op, res, &p, data, dv.Dim(0))
}

// build makes an index of data's first n rows (the index takes data).
func build(op string, res *safe.Resources, p *IndexParams, data *safe.DeviceMatrix[float32], n int64) (*Index, error) {
	idx, err := newIndex(op, res)
	if err != nil {
		_ = data.Close()
		return nil, err
	}
	idx.dim, idx.p = int64(data.Cols()), *p
	st := idx.st
	if n > p.MinANNRows {
		st.annData = data
		if st.ann, err = newTiered(op, res, p, data); err != nil {
			idx.life.Fail()
			return nil, err
		}
		idx.annRows.Store(n)
	} else {
		st.fresh = data
		if st.freshBF, err = idx.freshIndex(op, res, data, n); err != nil {
			idx.life.Fail()
			return nil, err
		}
	}
	idx.rows.Store(n)
	idx.dev, _ = kit.DeviceOf(res, op)
	return idx, nil
}

// freshIndex builds brute force over data's first n rows (it borrows them).
func (idx *Index) freshIndex(op string, res *safe.Resources, data *safe.DeviceMatrix[float32], n int64) (*bruteforce.Index, error) {
	v, err := data.RowsView(0, int(n))
	if err != nil {
		return nil, kit.Wrap(op, err)
	}
	return bruteforce.Build(res, v, &bruteforce.BuildParams{Metric: idx.p.Metric, MetricArg: 2})
}

// copyRows copies src (a row-major matrix, host or device) into dst's rows
// from row at on (cuvsMatrixCopy) and waits for the copy.
func copyRows(res *safe.Resources, src *dlpack.View, dst *safe.DeviceMatrix[float32], at int64) error {
	dm, err := dst.ViewMut()
	if err != nil {
		return err
	}
	base, err := dm.Data()
	if err != nil {
		return err
	}
	cols := int64(dst.Cols())
	sub, err := dlpack.FromRawPartsMut(unsafe.Add(base, at*cols*4), dm.Device(), []int64{src.Dim(0), cols}, nil, dlpack.Float32)
	if err != nil {
		return err
	}
	return safe.Copy(res, src, &sub)
}

// checkANNRows refuses an ANN build an IVF backend cannot make: k-means
// needs at least NLists rows.
func (p *IndexParams) checkANNRows(op, arg string, rows int64) error {
	if rows > p.MinANNRows && p.annLists() > rows {
		return kit.Argf(op, arg, "%d rows for an ANN index of %d lists (%s builds one over more than MinANNRows = %d rows)", rows, p.annLists(), p.Backend, p.MinANNRows)
	}
	return nil
}

// Rows returns the number of rows (both tiers): the largest k a search
// takes.
func (idx *Index) Rows() int {
	if idx == nil {
		return 0
	}
	return int(idx.rows.Load())
}

// ANNRows returns the rows under the ANN index (the first ones); the rest
// are in the fresh tier.
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

// Params returns the parameters the index was built with.
func (idx *Index) Params() IndexParams {
	if idx == nil {
		return IndexParams{}
	}
	return idx.p
}

// Extend appends vectors (n × Dim() float32, row-major; Go, host or device
// memory, copied; host values must be finite) to the fresh tier, with ids
// Rows()..Rows()+n-1, and rebuilds the fresh tier's brute-force index
// (its norms: one pass over the fresh rows). The tier's storage grows by
// doubling. With CreateANNIndexOnExtend, once the tier holds more than
// MinANNRows rows the ANN index is rebuilt over every row and the tier
// emptied: by cuVS's own extend of the tiered index with the fresh rows
// (cuvsTieredIndexExtend, which then compacts), or, with no ANN index yet,
// a new tiered index built from a copy of all rows. It needs the index
// alone.
//
// If the ANN rebuild fails, the rows stay added (in the fresh tier) and
// the error is returned.
//
// C calls: cuvsRMMAlloc/cuvsMatrixCopy, cuvsBruteForceBuild (and
// cuvsBruteForceIndexDestroy of the previous one), cuvsStreamSync; for a
// rebuild cuvsTieredIndexExtend, or those of Build.
func (idx *Index) Extend(res *safe.Resources, vectors dlpack.Tensor) error {
	if idx == nil {
		return kit.NilIndex("tiered.Index.Extend")
	}
	if err := idx.life.Built("tiered.Index.Extend"); err != nil { // a zero index says so, before its arguments are checked
		return err
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
	// One Extend at a time. It makes the grown fresh tier (rows and
	// brute-force index) while searches go on, the index shared: they read
	// the fresh tier's first rows-annRows rows and the current brute-force
	// index, and the new rows are written after them, or into a new
	// matrix. Only the swap, and a compaction, hold the index alone, so a
	// search waits for the swap and not for the copy and the build.
	idx.grow.Lock()
	defer idx.grow.Unlock()
	if err := idx.life.Enter(op); err != nil {
		return err
	}
	rows, ann := idx.rows.Load(), idx.annRows.Load()
	rebuild := idx.p.CreateANNIndexOnExtend && rows-ann+n > idx.p.MinANNRows
	var next freshTier
	if rebuild {
		err = idx.p.checkANNRows(op, "vectors", rows+n)
	}
	if err == nil {
		next, err = idx.grownFresh(op, res, &vv, rows-ann)
	}
	idx.life.Leave()
	if err != nil {
		return err
	}
	err = idx.life.Exclusive(op, func() error {
		if err := idx.life.Keep(res, op); err != nil {
			return err
		}
		st := idx.st
		if st.freshBF != nil {
			_ = st.freshBF.Close()
		}
		if next.own && st.fresh != nil {
			_ = st.fresh.Close()
		}
		st.fresh, st.freshBF = next.m, next.bf
		next = freshTier{}
		st.mu.Lock()
		st.dropFilters()
		st.mu.Unlock()
		idx.rows.Store(rows + n)
		if rebuild {
			return idx.compact(op, res)
		}
		return nil
	})
	next.free()
	return err
}

// freshTier is a fresh tier made by Extend: its rows (the index's fresh
// matrix, or a larger copy of it: own) and brute force over them.
type freshTier struct {
	m   *safe.DeviceMatrix[float32]
	own bool
	bf  *bruteforce.Index
}

// free releases what the index has not taken.
func (t *freshTier) free() {
	if t.bf != nil {
		_ = t.bf.Close()
	}
	if t.own {
		_ = t.m.Close()
	}
}

// grownFresh writes vv after the f fresh rows, in the fresh matrix when it
// has room (after the rows searches read), else in a new one with the f
// rows copied first, and builds brute force over the f+n rows, finished
// on res's stream before it returns (searches on other streams use it
// once swapped in). The index is held shared, Extends one at a time.
func (idx *Index) grownFresh(op string, res *safe.Resources, vv *dlpack.View, f int64) (freshTier, error) {
	st := idx.st
	n := vv.Dim(0)
	t := freshTier{m: st.fresh}
	if t.m == nil || int64(t.m.Rows()) < f+n {
		grown, err := safe.NewDeviceMatrix[float32](res, int(max(f+n, 2*f)), int(idx.dim))
		if err != nil {
			return freshTier{}, kit.Wrap(op, err)
		}
		t.m, t.own = grown, true
		if f > 0 {
			old, err := st.fresh.RowsView(0, int(f))
			if err == nil {
				err = copyRows(res, &old, grown, 0)
			}
			if err != nil {
				t.free()
				return freshTier{}, kit.Wrap(op, err)
			}
		}
	}
	if err := copyRows(res, vv, t.m, f); err != nil {
		t.free()
		return freshTier{}, kit.Wrap(op, err)
	}
	bf, err := idx.freshIndex(op, res, t.m, f+n)
	if err == nil {
		t.bf = bf
		err = kit.Wrap(op, res.Sync())
	}
	if err != nil {
		t.free()
		return freshTier{}, err
	}
	return t, nil
}

// compact rebuilds the ANN index over every row and empties the fresh
// tier (the index held alone).
func (idx *Index) compact(op string, res *safe.Resources) error {
	st := idx.st
	rows := idx.rows.Load()
	all, err := idx.gather(res, rows)
	if err != nil {
		return kit.Wrap(op, err)
	}
	var h generated.CuvsTieredIndex_t
	if st.ann != 0 && idx.p.CreateANNIndexOnExtend {
		// cuVS's own extend: it appends the fresh rows to the tiered
		// index's storage and, the brute-force tier then holding more than
		// MinANNRows rows with create_ann_index_on_extend set, compacts:
		// the ANN index is rebuilt over every row and the tier emptied
		// (cpp/src/neighbors/detail/tiered_index.cuh, extend and compact,
		// both releases), so the C index again holds ANN rows only.
		fv, err := st.fresh.RowsView(0, int(rows-idx.annRows.Load()))
		if err == nil {
			err = kit.CallWith(op, res, []*dlpack.View{&fv}, func(r generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
				return generated.CuvsTieredIndexExtend(r, t[0], st.ann)
			})
		}
		if err != nil {
			_ = all.Close()
			return err
		}
		h = st.ann // extended in place
	} else if h, err = newTiered(op, res, &idx.p, all); err != nil {
		_ = all.Close()
		return err
	}
	old, oldData := st.ann, st.annData
	if old == h {
		old = 0
	}
	st.ann, st.annData = h, all
	st.mu.Lock()
	if st.annExact != nil {
		_ = st.annExact.Close()
		st.annExact = nil
	}
	st.dropFilters()
	st.mu.Unlock()
	if st.freshBF != nil {
		_ = st.freshBF.Close()
		st.freshBF = nil
	}
	if st.fresh != nil {
		_ = st.fresh.Close()
		st.fresh = nil
	}
	idx.annRows.Store(rows)
	if old != 0 {
		_ = generated.CuvsTieredIndexDestroy(old)
	}
	if oldData != nil {
		_ = oldData.Close()
	}
	return nil
}

// gather copies the index's rows, in id order, into a new device matrix of
// rows rows (the index held).
func (idx *Index) gather(res *safe.Resources, rows int64) (*safe.DeviceMatrix[float32], error) {
	all, err := safe.NewDeviceMatrix[float32](res, int(rows), int(idx.dim))
	if err != nil {
		return nil, err
	}
	if err := idx.copyInto(res, all, 0); err != nil {
		_ = all.Close()
		return nil, err
	}
	return all, nil
}

// copyInto copies the index's rows into dst from row at on.
func (idx *Index) copyInto(res *safe.Resources, dst *safe.DeviceMatrix[float32], at int64) error {
	st := idx.st
	rows, ann := idx.rows.Load(), idx.annRows.Load()
	if ann > 0 {
		v, err := st.annData.RowsView(0, int(ann))
		if err == nil {
			err = copyRows(res, &v, dst, at)
		}
		if err != nil {
			return err
		}
	}
	if f := rows - ann; f > 0 {
		v, err := st.fresh.RowsView(0, int(f))
		if err == nil {
			err = copyRows(res, &v, dst, at+ann)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Merge makes a new index of the rows of indexes (at least two, one
// backend, one dimension), in their order: index 0's rows first, then
// index 1's, ... (ids shifted accordingly), built as Build builds: an ANN
// index over every row when there are more than params.MinANNRows of them,
// otherwise all rows in the fresh tier. params (nil: DefaultIndexParams
// with the indexes' backend and metric) configures that build; its
// Backend must be theirs. The inputs are left as they were.
//
// C calls: cuvsRMMAlloc/cuvsMatrixCopy (the rows), then those of Build;
// when every input's rows are all under its ANN index and the rows past
// index 0's exceed MinANNRows, cuvsTieredIndexCreate and
// cuvsTieredIndexMerge instead of the build (cuVS merges and rebuilds).
func Merge(res *safe.Resources, params *IndexParams, indexes ...*Index) (*Index, error) {
	const op = "tiered.Merge"
	if len(indexes) < 2 {
		return nil, kit.Argf(op, "indexes", "%d indexes, want at least two", len(indexes))
	}
	for i, x := range indexes {
		if x == nil {
			return nil, kit.Argf(op, "indexes", "index %d is nil", i)
		}
		if err := x.life.Built(fmt.Sprintf("index %d", i)); err != nil {
			return nil, kit.Argf(op, "indexes", "%w", err)
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
	if err := p.checkANNRows(op, "indexes", rows); err != nil {
		return nil, err
	}
	all, err := safe.NewDeviceMatrix[float32](res, int(rows), int(indexes[0].dim))
	if err != nil {
		return nil, kit.Wrap(op, err)
	}
	var at int64
	for _, x := range indexes {
		if err := x.copyInto(res, all, at); err != nil {
			_ = all.Close()
			return nil, kit.Wrap(op, err)
		}
		at += x.rows.Load()
	}
	if mergeInC(indexes, &p, rows) {
		return mergeC(op, res, &p, indexes, all, rows)
	}
	return build(op, res, &p, all, rows)
}

// mergeInC reports whether cuVS's own merge gives what Merge promises: an
// index whose C tiered index holds every row under its ANN index. It does
// when every input's rows are all under its ANN index (their C indexes
// then hold them all, in id order) and the merged rows past index 0's
// exceed MinANNRows: cuvsTieredIndexMerge concatenates the storages and
// then compacts (rebuilds the ANN index over all of them) only past that
// count (cpp/src/neighbors/detail/tiered_index.cuh, merge, both releases).
func mergeInC(indexes []*Index, p *IndexParams, rows int64) bool {
	for _, x := range indexes {
		if x.st.ann == 0 || x.annRows.Load() != x.rows.Load() {
			return false
		}
	}
	return rows-indexes[0].annRows.Load() > p.MinANNRows
}

// mergeC merges the inputs' C tiered indexes (cuvsTieredIndexMerge) into
// the new index's, which then holds every row under its ANN index; all
// (the rows in id order) becomes its ANN rows' copy.
func mergeC(op string, res *safe.Resources, p *IndexParams, indexes []*Index, all *safe.DeviceMatrix[float32], rows int64) (*Index, error) {
	cp, err := newCParams(op, p)
	if err != nil {
		_ = all.Close()
		return nil, err
	}
	defer cp.free()
	idx, err := newIndex(op, res)
	if err != nil {
		_ = all.Close()
		return nil, err
	}
	idx.dim, idx.p = int64(all.Cols()), *p
	st := idx.st
	st.annData = all
	var ch generated.CuvsTieredIndex_t // a local: st holds Go pointers
	if err := generated.CuvsTieredIndexCreate(&ch); err != nil {
		idx.life.Fail()
		return nil, kit.Wrap(op, err)
	}
	st.ann = ch
	// The inputs' handles, in C memory (an array C reads).
	hs := unsafe.Slice((*generated.CuvsTieredIndex_t)(cAlloc(uintptr(len(indexes))*unsafe.Sizeof(st.ann))), len(indexes))
	defer cFree(unsafe.Pointer(&hs[0]))
	for i, x := range indexes {
		hs[i] = x.st.ann
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		idx.life.Fail()
		return nil, err
	}
	if release.Has(release.TieredParams2608) {
		err = generated.CuvsTieredIndexMerge_v2608(h, cp.p08, &hs[0], uint64(len(indexes)), st.ann)
	} else {
		err = generated.CuvsTieredIndexMerge(h, cp.p06, &hs[0], uint64(len(indexes)), st.ann)
	}
	if err == nil {
		err = generated.CuvsStreamSync(h)
	}
	kit.Unlock(res)
	if err != nil {
		idx.life.Fail()
		return nil, kit.Wrap(op, err)
	}
	idx.annRows.Store(rows)
	idx.rows.Store(rows)
	idx.dev, _ = kit.DeviceOf(res, op)
	return idx, nil
}

// Close frees the index, waiting for the searches and the Extend in
// flight. Closing twice, or the zero Index, is harmless. C calls:
// cuvsTieredIndexDestroy, cuvsBruteForceIndexDestroy, cuvsRMMFree.
func (idx *Index) Close() error {
	if idx == nil {
		return nil
	}
	return idx.life.Close("tiered.Index.Close", func() { _ = idx.slices.Close() })
}

var liveIndexes = live.New("tiered.Index")
