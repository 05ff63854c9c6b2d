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
// stored rows, and a fresh tier, searched by brute force, over the rows
// added since. It owns a copy of every row in device memory: nothing the
// caller passed is referenced.
//
// Any number of goroutines may search it at once, each with its own
// safe.Resources; Delete runs beside them; Extend and Compact need it
// alone to swap their storage in (they wait their turn); Close waits.
//
// # Ids and deletions
//
// A row's id is the number of rows added before it (Build's rows are 0
// to n-1, an Extend's the next ones; Merge shifts index i's ids by the
// Rows() of the indexes before it) and never changes: no id is given
// twice. Delete marks rows deleted; searches never return them. Their
// storage is freed by a compaction (Compact, the ANN rebuild of an
// Extend, Merge, DeserializeFrom), which moves rows but keeps their ids:
// the index then maps storage positions to ids (results, filters and
// Delete all speak ids). Rows() counts the ids given (a filter's size),
// Live() the rows not deleted, Stored() the rows held. cuVS's tiered
// index has no delete (both releases: create, build, extend, merge,
// search): the deletions are the package's, a bitset by position combined
// with the caller's filter into each tier's prefilter.
//
// # Building, growing, merging, persisting
//
// Build copies float32 rows (Go, host or device memory; host values must
// be finite) into the index's device storage and builds the ANN index
// over more than IndexParams.MinANNRows rows (otherwise every row is
// fresh). Extend appends to the fresh tier (Go, host or device memory);
// with CreateANNIndexOnExtend, once the tier holds more than MinANNRows
// rows, the ANN index is rebuilt over every row. Merge concatenates
// indexes and builds as Build does (an ANN index over every row above
// MinANNRows). SerializeTo/Serialize write the parameters, the tier split,
// the live rows and their ids (format version 2; version 1 files are
// read); DeserializeFrom/Deserialize rebuild the ANN index over the same
// ANN rows (cuVS has no serializer for a tiered index), so ids and the
// fresh tier's results are exact after a round trip and the ANN tier's
// approximate as any build is. NewSearcher adapts an index to
// package batch (its Rows() is the index's).
//
// Memory: the ANN rows are held twice on the device (the package's copy,
// which cuVS's CAGRA index may reference and which serialization, merges,
// rebuilds and the exact filter path read, and cuVS's tiered storage,
// which takes four times the rows' bytes, with 1/16 room to grow: see
// EstimateMemory, whose figures Build, Extend's rebuild and Merge check
// and count in safe.DeviceMemory.InUse), the
// fresh rows once (plus their norms), the brute force over the ANN rows
// (norms) only once a selective filter needed it; deleted rows until a
// compaction; per composed search in flight (up to 32 kept idle) 12 bytes
// per candidate on the device and in pinned host memory. On the host: a bit per stored row once a row is deleted,
// 8 bytes per stored row once a compaction has moved rows (the id map).
//
// # Unfilled slots
//
// Every path that merges (both tiers, a filter, deletions, k past a
// tier's rows) and
// every result in Go memory (SearchSlice, the batcher) holds
// safe.SentinelID64 with distance +Inf in a slot it cannot fill: a filter
// allowing fewer than k rows, say. The one-call paths write what their
// backend writes (see Search).
type Index struct {
	st      *parts
	rows    atomic.Int64 // ids given: the next row's id
	stored  atomic.Int64 // rows held (both tiers), deleted ones until compacted
	annRows atomic.Int64 // stored rows under the ANN index: positions 0..annRows-1
	live    atomic.Int64 // rows not deleted
	dim     int64
	p       IndexParams // as built (Metric, Backend, MinANNRows, CreateANNIndexOnExtend)
	dev     dlpack.Device

	life   kit.Life
	grow   sync.Mutex      // held by Extend and Compact: one at a time
	del    sync.Mutex      // held by Delete: one at a time
	slices hostsearch.Pool // SearchSlice's device buffers
}

// parts is what the index holds, shared with its Life's destroy function
// (which must hold no pointer to the Index). Its storage is by position:
// the ANN rows (positions 0..annRows-1), then the fresh rows; ids maps a
// position to the row's id. What a search reads changes only while the
// index is held alone, except dead (a new state published by Delete).
type parts struct {
	// ann is the C tiered index over annData's rows, never extended: its
	// searches are the ANN index's (cuVS searches a tiered index without
	// fresh rows with its ANN index alone, the filter by id). Zero while
	// no ANN index is built.
	ann     generated.CuvsTieredIndex_t
	annMem  func()                      // gives back ann's device memory in DeviceMemory.InUse (EstimateMemory's)
	cRows   int64                       // the rows cuVS's storage in ann has room for
	annData *safe.DeviceMatrix[float32] // the ANN rows (ann was built from it)
	fresh   *safe.DeviceMatrix[float32] // the fresh rows in its first stored-annRows rows (capacity: its Rows())
	freshBF *bruteforce.Index           // brute force over the fresh rows

	// ids is the id of each stored row by position, ascending (ids only
	// grow and storage keeps their order); nil while every id given is
	// stored, position p holding id p.
	ids  []int64
	dead atomic.Pointer[deletions] // the deleted stored rows; nil: none

	mu       sync.Mutex        // annExact and filters, made during searches
	annExact *bruteforce.Index // brute force over annData, for selective filters (made on first use)
	filters  map[weak.Pointer[safe.Filter]]*derived
	noFilter *derived // the deletions alone, for searches without a filter

	merges mergePool // the composed searches' idle memory
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
	s.merges.close()
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
	if s.annMem != nil {
		s.annMem()
		s.annMem = nil
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
// index: more than p.MinANNRows rows), refused before cuVS when the device
// cannot give its estimated peak; mem gives back its device memory in
// DeviceMemory.InUse, cRows is its storage's room (rows + rows/16).
func newTiered(op string, res *safe.Resources, p *IndexParams, data *safe.DeviceMatrix[float32]) (h generated.CuvsTieredIndex_t, mem func(), cRows int64, err error) {
	dv, err := data.View()
	if err != nil {
		return 0, nil, 0, kit.Wrap(op, err)
	}
	n := dv.Dim(0)
	peak, held, err := cTier(op, p, n, n+n/16, dv.Dim(1))
	if err != nil {
		return 0, nil, 0, err
	}
	done, keep, err := reserveTier(op, res, peak, held)
	if err != nil {
		return 0, nil, 0, err
	}
	defer done()
	cp, err := newCParams(op, p)
	if err != nil {
		return 0, nil, 0, err
	}
	defer cp.free()
	if err := generated.CuvsTieredIndexCreate(&h); err != nil {
		return 0, nil, 0, kit.Wrap(op, err)
	}
	if err := kit.CallWith(op, res, []*dlpack.View{&dv}, func(r generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		if release.Has(release.TieredParams2608) {
			return generated.CuvsTieredIndexBuild_v2608(r, cp.p08, t[0], h)
		}
		return generated.CuvsTieredIndexBuild(r, cp.p06, t[0], h)
	}); err != nil {
		_ = generated.CuvsTieredIndexDestroy(h)
		return 0, nil, 0, err
	}
	return h, keep(), n + n/16, nil
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
	// the whole build's estimate, checked before the rows are copied (the
	// copy and each part count themselves as they are made)
	est, err := EstimateMemory(safe.MemoryShape{Rows: int(dv.Dim(0)), Dim: int(dv.Dim(1)), DType: dlpack.Float32}, &p, nil)
	if err != nil {
		return nil, err
	}
	if err := kit.CheckMemory(op, res, est.BuildPeak); err != nil {
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
	return build(op, res, &p, data, dv.Dim(1), dv.Dim(0), dv.Dim(0), nil)
}

// build makes an index of data's first n rows (the index takes data; nil
// for none) of dimension dim, rows ids given, ids those of data's rows
// (nil: 0..n-1, rows being n).
func build(op string, res *safe.Resources, p *IndexParams, data *safe.DeviceMatrix[float32], dim, n, rows int64, ids []int64) (*Index, error) {
	lay, err := makeLayout(op, res, p, data, n)
	if err != nil {
		return nil, err
	}
	lay.ids = ids
	return newWith(op, res, p, dim, rows, &lay)
}

// newWith makes an index of lay (it takes it), rows ids given, every
// stored row live.
func newWith(op string, res *safe.Resources, p *IndexParams, dim, rows int64, lay *layout) (*Index, error) {
	idx, err := newIndex(op, res)
	if err != nil {
		lay.free()
		return nil, err
	}
	idx.dim, idx.p = dim, *p
	idx.rows.Store(rows)
	idx.live.Store(lay.stored)
	idx.install(lay, nil)
	idx.dev, _ = kit.DeviceOf(res, op)
	return idx, nil
}

// layout is the index's storage: the ANN tier, the fresh tier, the id of
// each stored row (nil: its position).
type layout struct {
	ann             generated.CuvsTieredIndex_t
	annMem          func() // gives back ann's count in DeviceMemory.InUse
	cRows           int64  // ann's storage room
	annData         *safe.DeviceMatrix[float32]
	fresh           *safe.DeviceMatrix[float32]
	freshBF         *bruteforce.Index
	annRows, stored int64
	ids             []int64
}

// makeLayout builds over data's first n rows (it takes data) as Build
// does: an ANN index over them above p.MinANNRows, else a fresh tier.
// Zero rows make an empty layout (data nil).
func makeLayout(op string, res *safe.Resources, p *IndexParams, data *safe.DeviceMatrix[float32], n int64) (layout, error) {
	l := layout{stored: n}
	var err error
	switch {
	case n == 0:
		if data != nil {
			_ = data.Close()
		}
	case n > p.MinANNRows:
		l.annData, l.annRows = data, n
		if l.ann, l.annMem, l.cRows, err = newTiered(op, res, p, data); err != nil {
			l.free()
			return layout{}, err
		}
	default:
		l.fresh = data
		if l.freshBF, err = freshIndex(res, p.Metric, data, n); err != nil {
			l.free()
			return layout{}, err
		}
	}
	return l, nil
}

// free releases a layout the index has not taken.
func (l *layout) free() {
	if l.freshBF != nil {
		_ = l.freshBF.Close()
	}
	if l.ann != 0 {
		_ = generated.CuvsTieredIndexDestroy(l.ann)
	}
	if l.annMem != nil {
		l.annMem()
	}
	for _, m := range []*safe.DeviceMatrix[float32]{l.annData, l.fresh} {
		if m != nil {
			_ = m.Close()
		}
	}
	*l = layout{}
}

// install makes lay the index's storage, freeing the one it replaces (the
// index held alone, or not yet shared). gathered is the deletion state
// lay was gathered under (nil for none): the rows deleted since are
// carried to their new positions.
func (idx *Index) install(lay *layout, gathered *deletions) {
	st := idx.st
	cur := st.dead.Load()
	var next *deletions
	if cur != gathered {
		next = remap(cur, st.ids, idx.stored.Load(), lay.ids)
	}
	st.mu.Lock()
	if st.annExact != nil {
		_ = st.annExact.Close()
		st.annExact = nil
	}
	st.dropFilters()
	st.mu.Unlock()
	old := layout{ann: st.ann, annMem: st.annMem, annData: st.annData, fresh: st.fresh, freshBF: st.freshBF}
	st.ann, st.annData, st.fresh, st.freshBF = lay.ann, lay.annData, lay.fresh, lay.freshBF
	st.annMem, st.cRows = lay.annMem, lay.cRows
	st.ids = lay.ids
	if st.ids != nil && int64(len(st.ids)) == idx.rows.Load() {
		st.ids = nil // every id stored: position p holds id p
	}
	st.dead.Store(next)
	idx.annRows.Store(lay.annRows)
	idx.stored.Store(lay.stored)
	*lay = layout{}
	old.free()
}

// freshIndex builds brute force over data's first n rows (it borrows them).
func freshIndex(res *safe.Resources, metric safe.Metric, data *safe.DeviceMatrix[float32], n int64) (*bruteforce.Index, error) {
	v, err := data.RowsView(0, int(n))
	if err != nil {
		return nil, err
	}
	return bruteforce.Build(res, v, &bruteforce.BuildParams{Metric: metric, MetricArg: 2})
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

// Rows returns the number of ids given (every row ever added, deleted or
// not): the next row's id, the rows a filter covers (its bits are ids),
// and the largest k a search takes (slots past the live rows hold the
// sentinel). Live() counts the rows not deleted.
func (idx *Index) Rows() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.rows.Load())
}

// ANNRows returns the stored rows under the ANN index (deleted ones
// included until a compaction); the other Stored() rows are in the fresh
// tier.
func (idx *Index) ANNRows() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.annRows.Load())
}

// Dim returns the vectors' dimension.
func (idx *Index) Dim() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.dim)
}

// DType returns float32, the only element type of the C API.
func (idx *Index) DType() dlpack.DataType {
	if idx == nil || idx.life.Closed() {
		return dlpack.DataType{}
	}
	return dlpack.Float32
}

// Backend returns the ANN backend.
func (idx *Index) Backend() Backend {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return idx.p.Backend
}

// Params returns the parameters the index was built with.
func (idx *Index) Params() IndexParams {
	if idx == nil || idx.life.Closed() {
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
// (cuvsTieredIndexExtend, which then compacts), or, with no ANN index yet
// or with deleted rows stored, a new tiered index built from a copy of
// the live rows (a compaction: see Compact). It needs the index alone.
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
	rows, stored, ann := idx.rows.Load(), idx.stored.Load(), idx.annRows.Load()
	rebuild := idx.p.CreateANNIndexOnExtend && stored-ann+n > idx.p.MinANNRows
	var next freshTier
	if rebuild {
		err = idx.p.checkANNRows(op, "vectors", stored-idx.st.dead.Load().count()+n)
	}
	if err == nil {
		next, err = idx.grownFresh(op, res, &vv, stored-ann)
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
		if st.ids != nil {
			for id := rows; id < rows+n; id++ {
				st.ids = append(st.ids, id)
			}
		}
		idx.rows.Store(rows + n)
		idx.stored.Store(stored + n)
		idx.live.Add(n)
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
	bf, err := freshIndex(res, idx.p.Metric, t.m, f+n)
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

// compact rebuilds the ANN index over every stored row and empties the
// fresh tier, or, with deleted rows stored, builds anew over the live rows
// (the index held alone).
func (idx *Index) compact(op string, res *safe.Resources) error {
	st := idx.st
	if st.dead.Load().count() > 0 {
		lay, snap, err := idx.liveLayout(op, res)
		if err != nil {
			return err
		}
		idx.install(&lay, snap)
		return nil
	}
	stored := idx.stored.Load()
	all, err := idx.gather(res, stored)
	if err != nil {
		return kit.Wrap(op, err)
	}
	lay := layout{annData: all, annRows: stored, stored: stored, ids: st.ids}
	if st.ann != 0 && idx.p.CreateANNIndexOnExtend {
		// cuVS's own extend: it appends the fresh rows to the tiered
		// index's storage and, the brute-force tier then holding more than
		// MinANNRows rows with create_ann_index_on_extend set, compacts:
		// the ANN index is rebuilt over every row and the tier emptied
		// (cpp/src/neighbors/detail/tiered_index.cuh, extend and compact,
		// both releases), so the C index again holds ANN rows only, in
		// the order of their positions.
		//
		// Its device memory: the storage grown (by doubling, or to the
		// rows) while the old one is held, then the new ANN index built
		// while the old one is held; refused before cuVS when the device
		// cannot give that.
		cRows := st.cRows
		var grown int64
		if cRows < stored {
			cRows = max(stored, 2*st.cRows)
			grown = storageBytes(cRows, idx.dim, idx.p.Metric)
		}
		peak, held, err := cTier(op, &idx.p, stored, cRows, idx.dim)
		var done func()
		var keep func() func()
		if err == nil {
			done, keep, err = reserveTier(op, res, grown+peak, held)
		}
		if err != nil {
			_ = all.Close()
			return err
		}
		defer done()
		fv, err := st.fresh.RowsView(0, int(stored-idx.annRows.Load()))
		if err == nil {
			err = kit.CallWith(op, res, []*dlpack.View{&fv}, func(r generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
				return generated.CuvsTieredIndexExtend(r, t[0], st.ann)
			})
		}
		if err != nil {
			_ = all.Close()
			return err
		}
		lay.ann, st.ann = st.ann, 0 // extended in place: moved to the new layout
		lay.annMem, lay.cRows = keep(), cRows
		// the old count goes with the old layout (install frees it)
	} else if lay.ann, lay.annMem, lay.cRows, err = newTiered(op, res, &idx.p, all); err != nil {
		_ = all.Close()
		return err
	}
	idx.install(&lay, nil)
	return nil
}

// gather copies the index's stored rows, by position, into a new device
// matrix of rows rows (the index held).
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

// copyInto copies the index's stored rows into dst from row at on.
func (idx *Index) copyInto(res *safe.Resources, dst *safe.DeviceMatrix[float32], at int64) error {
	st := idx.st
	rows, ann := idx.stored.Load(), idx.annRows.Load()
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

// Merge makes a new index of the live rows of indexes (at least two, one
// backend, one dimension), in their order: index 0's rows first, then
// index 1's, ..., built as Build builds: an ANN index over every row when
// there are more than params.MinANNRows of them, otherwise all rows in
// the fresh tier. Ids: index i's id x is Rows(0) + ... + Rows(i-1) + x in
// the merged index (index 0's ids unchanged), whose Rows() is the sum of
// theirs; a deleted row is not copied and its id stays deleted. params
// (nil: DefaultIndexParams with the indexes' backend and metric)
// configures that build; its Backend must be theirs. The inputs are left
// as they were.
//
// C calls: cuvsRMMAlloc/cuvsMatrixCopy (the rows), then those of Build;
// when every input's rows are all under its ANN index, none deleted, and
// the rows past index 0's exceed MinANNRows, cuvsTieredIndexCreate and
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
	// each input's live rows: one deletion state read per input
	var rows, stored int64
	type input struct {
		spans []span
		live  int64
		dead  bool
	}
	ins := make([]input, len(indexes))
	for i, x := range indexes {
		d := x.st.dead.Load()
		ins[i].spans, ins[i].live = liveSpans(d, x.stored.Load())
		ins[i].dead = d.count() > 0
		rows += x.rows.Load()
		stored += ins[i].live
	}
	if err := p.checkANNRows(op, "indexes", stored); err != nil {
		return nil, err
	}
	dim := indexes[0].dim
	var all *safe.DeviceMatrix[float32]
	if stored > 0 {
		var err error
		if all, err = safe.NewDeviceMatrix[float32](res, int(stored), int(dim)); err != nil {
			return nil, kit.Wrap(op, err)
		}
	}
	var ids []int64
	if stored != rows {
		ids = make([]int64, 0, stored)
	}
	var at, off int64
	for i, x := range indexes {
		var err error
		if ins[i].dead {
			err = x.copySpans(res, ins[i].spans, ins[i].live, all, at)
		} else if ins[i].live > 0 {
			err = x.copyInto(res, all, at)
		}
		if err != nil {
			_ = all.Close()
			return nil, kit.Wrap(op, err)
		}
		if ids != nil {
			for _, s := range ins[i].spans {
				for q := s.from; q < s.from+s.n; q++ {
					ids = append(ids, off+idAt(x.st.ids, q))
				}
			}
		}
		at += ins[i].live
		off += x.rows.Load()
	}
	if ids == nil && mergeInC(indexes, &p, rows) {
		return mergeC(op, res, &p, indexes, all, rows)
	}
	return build(op, res, &p, all, dim, stored, rows, ids)
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
		if x.st.ann == 0 || x.st.ids != nil || x.st.dead.Load().count() > 0 || x.annRows.Load() != x.rows.Load() {
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
	// cuVS's merge: a storage of the rows exactly, then (the merged tier
	// past MinANNRows) the ANN index rebuilt over them
	peak, held, err := cTier(op, p, rows, rows, int64(all.Cols()))
	var done func()
	var keep func() func()
	if err == nil {
		done, keep, err = reserveTier(op, res, storageBytes(rows, int64(all.Cols()), p.Metric)+peak, held)
	}
	if err != nil {
		_ = all.Close()
		return nil, err
	}
	defer done()
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
	st.annMem, st.cRows = keep(), rows
	idx.annRows.Store(rows)
	idx.stored.Store(rows)
	idx.live.Store(rows)
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
