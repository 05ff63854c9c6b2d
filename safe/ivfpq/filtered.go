package ivfpq

import (
	"math"
	"sync"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/ivffilter"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// The filtered search's constants.
const (
	// FilterExactBelow: with a dataset, safe.FilterAuto searches exactly when
	// the filter allows at most this fraction of the rows. On the real
	// library (H200, issue 18's table) brute force with a filter allowing
	// 1% of the rows took 135/161/213 µs (100k rows, batch 1/16/256) and
	// 210/490/805 µs (1M rows), no more than a graph search's 389-531 µs;
	// at 10% it took up to 6.3 ms at 1M rows.
	FilterExactBelow = 0.01
	// MaxOverFetch bounds the candidates fetched per query.
	MaxOverFetch = 1024
	// maxRefine is device refine's bound on its k (cuVS's warp-sort
	// capacity, 256).
	maxRefine = 256
)

// overFetch is the candidates a query fetches for k neighbours when
// allowed of rows pass the filter: 2k/f, at least 2k, at most
// MaxOverFetch and rows. With k' = 2k/f candidates a query expects 2k
// allowed among them; fewer than k is rare (at 50% and k = 10, 40
// candidates: 3·10⁻⁴ per query) and the second pass catches it.
func overFetch(k, allowed, rows int64) int64 {
	kc := int64(math.Ceil(2 * float64(k) * float64(rows) / float64(max(allowed, 1))))
	return min(max(kc, 2*k), MaxOverFetch, rows)
}

// Filtered is a filtered IVF-PQ search with its buffers, made once by
// Index.NewFiltered for up to a number of queries and k neighbours and
// run many times (Search). One goroutine uses it at a time (Search
// serializes its callers).
type Filtered struct {
	mu      sync.Mutex
	idx     *Index
	sp      SearchParams
	cp, all *generated.CuvsIvfPqSearchParams // Go memory without pointers, read by C
	base    *generated.CuvsIvfPqSearchParams // the caller's params as they are: an unfiltered search (perSearch)
	filter  *safe.Filter                     // the filter of every search, or of the search running (perSearch)
	// perSearch: made without a filter, it takes one per search
	// (SearchWith) and plans each search for its filter; its buffers are
	// sized for any filter.
	perSearch bool
	unkeep    func()   // ends the retention of the Resources bf was built on
	words     []uint32 // the bitset's host copy, kept with the filter (read-only)
	rows      int64
	allowed   int64
	maxN, k   int64
	kc, c     int64 // candidates fetched; refined per query
	bfa       int64 // the exact path's columns when fewer than k rows are allowed: max(allowed, 1)
	metric    safe.Metric
	exact     bool // every search takes the exact path
	plain     bool // every row allowed: the plain search
	probes    uint32

	call dlpack.Call // binds the buffers, the dataset and the filter for the Filtered's life
	ds   *generated.DLManagedTensor
	fl   generated.CuvsFilter
	bf   generated.CuvsBruteForceIndex_t

	candN, candD, hCandN, hCandD *generated.DLManagedTensor // n×kc: the search's candidates, on the device and in pinned memory
	refC, refN, refD             *generated.DLManagedTensor // n×c device: refine's candidates and results
	hRefC, hRefN, hRefD          *generated.DLManagedTensor // their pinned copies
	outN, outD                   *generated.DLManagedTensor // n×k pinned: the results
	bfN, bfD, hBfN, hBfD         *generated.DLManagedTensor // n×allowed, when fewer than k rows are allowed (exact path)

	hcN []int64 // the pinned memory, as Go sees it
	hcD []float32
	// Without a dataset, the second pass's deeper candidate lists (kc2 per
	// query, every list probed), for the queries the first left short.
	kc2                              int64
	cand2N, cand2D, hCand2N, hCand2D *generated.DLManagedTensor
	hc2N                             []int64
	hc2D                             []float32
	hrC, hrN                         []int64
	hrD                              []float32
	oN                               []int64
	oD                               []float32
	hbN                              []int64
	hbD                              []float32
	short                            []bool
	closers                          []interface{ Close() error }
	sized                            []*generated.DLManagedTensor // the buffers narrowed to a batch's rows
	cols                             []*int64                     // each sized buffer's columns for the search (nil: fixed)
	closed                           bool
}

// NewFiltered prepares filtered searches of up to maxQueries queries for
// k neighbours among the rows filter (a bitset for Rows() rows) allows.
// With filter nil the Filtered takes a filter per search instead
// (SearchWith; Search is then unfiltered), planning each search as below
// for its filter, its buffers sized for any filter (the over-fetch's
// MaxOverFetch candidates per query): a batch.Batcher's requests of
// different filters share it.
// dataset, optional, is the index's rows (Rows() × Dim(), the index's
// element type, device memory, row i the row of id i): with it, the
// candidates are refined (cuvsRefine: exact distances) and selective
// filters are searched exactly (brute force with the filter), in the
// index's Metric (L2Expanded, InnerProduct or CosineExpanded; an
// L2SqrtExpanded index takes no dataset). The dataset and the filter are
// borrowed until Close.
//
// What a search does (safe.FilterAuto):
//   - every row allowed: the plain search (cuvsIvfPqSearch), one C call;
//   - with a dataset, when at most FilterExactBelow of the rows, or fewer
//     than k, are allowed, or the over-fetch would pass MaxOverFetch:
//     brute force over the dataset with the filter (cuvsBruteForceSearch on
//     an index cuvsBruteForceBuild made once here): exact;
//   - otherwise the over-fetch path: cuvsIvfPqSearch for k' = 2k/f
//     candidates (f: the fraction allowed; at most MaxOverFetch) probing
//     the lists package ivfflat's safe.FilterAuto would (NProbes / f, at
//     least 8k × lists / allowed); the candidates' ids (and distances) are
//     copied to pinned host memory and the disallowed ones dropped there,
//     on the host, against the bitset's host copy (taken once and kept
//     with the filter; the C API has no device function that could do it:
//     no gather, no mask); with a
//     dataset, the survivors (at most 256 per query) go back to the device
//     and cuvsRefine ranks them exactly (refine reads every candidate id as
//     a dataset row, so a query's short candidate list is padded with its
//     first survivor, and the duplicates are dropped after), without one
//     the survivors keep their PQ distances; the k best are copied into
//     neighbors and distances.
//   - queries left with fewer than min(k, allowed) neighbours are searched
//     again: with a dataset, exactly (brute force, those queries only);
//     without one, the batch again with every list probed and four times
//     the candidates, whose rows replace the short queries' only. Slots still
//     unfilled hold safe.SentinelID64 and +Inf.
//
// The over-fetch path waits for the device several times per search (it
// filters on the host). Without a dataset, a very selective filter may
// leave slots unfilled (the allowed rows are not among the MaxOverFetch
// best of every list): give the dataset.
//
// C calls: cuvsMatrixCopy, cuvsStreamSync, cuvsRMMAlloc (the buffers),
// cuvsBruteForceIndexCreate and cuvsBruteForceBuild (with a dataset).
func (idx *Index) NewFiltered(res *safe.Resources, params *SearchParams, filter *safe.Filter, dataset dlpack.Tensor, maxQueries, k int) (*Filtered, error) {
	const op = "ivfpq.Index.NewFiltered"
	c, err := kind.Enter(idx, op)
	if err != nil {
		return nil, err
	}
	defer c.Leave()
	sp, err := idx.checkSearch(op, params)
	if err != nil {
		return nil, err
	}
	rows := c.Rows.Load()
	if err := kit.CheckFilter(filter, op, rows, int64(maxQueries), safe.Bitset); err != nil {
		return nil, err
	}
	if maxQueries < 1 {
		return nil, kit.Argf(op, "maxQueries", "%d, want at least 1", maxQueries)
	}
	if k < 1 || int64(k) > rows {
		return nil, kit.Argf(op, "k", "%d, want 1 to the index's %d rows", k, rows)
	}
	metric := idx.metric
	f := &Filtered{idx: idx, sp: sp, rows: rows, perSearch: filter == nil,
		maxN: int64(maxQueries), k: int64(k), metric: metric, call: dlpack.Begin(op)}
	ok := false
	defer func() {
		if !ok {
			f.release()
		}
	}()
	if dataset != nil {
		dv, err := dataset.View()
		if err != nil {
			return nil, kit.Argf(op, "dataset", "%w", err)
		}
		if err := searchRules.Queries.CheckOn(op, res, &dv); err != nil {
			return nil, kit.Argf(op, "dataset", "%v", err)
		}
		if dv.Dim(0) != rows || dv.Dim(1) != c.Dim {
			return nil, kit.Argf(op, "dataset", "shape %v, the index holds %d × %d", dv.Shape(), rows, c.Dim)
		}
		if dt := idx.DType(); dt != (dlpack.DataType{}) && dv.DType() != dt {
			return nil, kit.Argf(op, "dataset", "dtype %s, the index holds %s", dv.DType(), dt)
		}
		if dv.DType() != dlpack.Float32 && dv.DType() != dlpack.Float16 {
			// brute force, the exact path, takes these only
			return nil, kit.Argf(op, "dataset", "dtype %s: the filtered search's exact path (brute force) takes float32 or float16", dv.DType())
		}
		if metric != safe.L2Expanded && metric != safe.InnerProduct && metric != safe.CosineExpanded {
			return nil, kit.Argf(op, "dataset", "the index's metric is %s: the exact path takes L2Expanded, InnerProduct or CosineExpanded", metric)
		}
		if f.ds, err = f.call.In(&dv); err != nil {
			return nil, kit.Argf(op, "dataset", "%w", err)
		}
	}
	if sp.FilterPath == safe.FilterExact && f.ds == nil {
		return nil, kit.Argf(op, "params.FilterPath", "safe.FilterExact needs the dataset")
	}
	cp, all, base := sp.cValue(), sp.cValue(), sp.cValue()
	f.cp, f.all, f.base = &cp, &all, &base
	f.all.NProbes = uint32(min(max(idx.nLists, 1), math.MaxUint32))
	if filter != nil {
		if err := f.plan(op, res, filter, f.call, f.maxN); err != nil {
			return nil, err
		}
	}
	if err := f.alloc(op, res); err != nil {
		return nil, err
	}
	ok = true
	return f, nil
}

// plan binds filter to call c (a search of n queries) and plans the
// searches with it: the allowed count, the probes, the over-fetch's
// candidates and the path.
func (f *Filtered) plan(op string, res *safe.Resources, filter *safe.Filter, c dlpack.Call, n int64) error {
	var err error
	if f.fl, err = kit.BindFilter(filter, op, c, f.rows, n, safe.Bitset); err != nil {
		return err
	}
	if f.words, err = kit.FilterHostWords(filter, op, res); err != nil {
		return err
	}
	f.filter, f.allowed = filter, int64(filter.Allowed())
	rows, sp := f.rows, &f.sp
	path := ivffilter.Auto
	if sp.FilterPath == safe.FilterIndex {
		path = ivffilter.Index // the caller's probes
	}
	f.probes = ivffilter.Decide(path, sp.NProbes, f.idx.nLists, rows, f.allowed, f.k, true).Probes
	f.kc = overFetch(f.k, f.allowed, rows)
	f.c = min(f.kc, maxRefine)
	f.kc2 = 0
	if f.ds == nil {
		// The second pass: every list, and 4k' candidates, so that a
		// query short of allowed rows among its first k' (k' = 2k/f: at
		// 20% allowed and k = 10, a binomial(100, 0.2) below 10, ~0.3% of
		// the queries, seen on the real library) gets them.
		f.kc2 = min(4*f.kc, MaxOverFetch, rows)
	}
	f.bfa = max(f.allowed, 1)
	f.exact, f.plain = false, false
	switch {
	case sp.FilterPath == safe.FilterExact:
		f.exact = true
	case sp.FilterPath == safe.FilterIndex:
	case f.allowed >= rows:
		f.plain = true
	case f.ds != nil && (float64(f.allowed) <= FilterExactBelow*float64(rows) || f.allowed < f.k ||
		2*f.k*rows > MaxOverFetch*f.allowed):
		f.exact = true
	}
	f.cp.NProbes = f.probes
	return nil
}

// devBuf and pinBuf allocate a buffer of r × c, bind it to f's call and
// keep it for Close; a search narrows it to its queries and, when cols is
// not nil, to *cols columns (at most c).
func devBuf[T dlpack.DType](f *Filtered, res *safe.Resources, r, c int64, cols *int64) (*generated.DLManagedTensor, error) {
	m, err := safe.NewDeviceMatrix[T](res, int(r), int(c))
	if err != nil {
		return nil, err
	}
	f.closers = append(f.closers, m)
	vm, err := m.ViewMut()
	if err != nil {
		return nil, err
	}
	mt, err := f.call.Out(&vm)
	f.sized, f.cols = append(f.sized, mt), append(f.cols, cols)
	return mt, err
}

func pinBuf[T dlpack.DType](f *Filtered, r, c int64, cols *int64) (*generated.DLManagedTensor, []T, error) {
	m, err := safe.NewPinnedMatrix[T](int(r), int(c))
	if err != nil {
		return nil, nil, err
	}
	f.closers = append(f.closers, m)
	vm, err := m.ViewMut()
	if err != nil {
		return nil, nil, err
	}
	mt, err := f.call.Out(&vm)
	f.sized, f.cols = append(f.sized, mt), append(f.cols, cols)
	return mt, m.Data(), err
}

func (f *Filtered) alloc(op string, res *safe.Resources) error {
	var err error
	n := f.maxN
	f.short = make([]bool, n)
	// The sizes: the plan's, or for a filter per search the largest any
	// filter's plan takes.
	bfa, kc, c, kc2 := f.bfa, f.kc, f.c, f.kc2
	needBF, needCand := f.allowed < f.k, !f.plain && !f.exact
	if f.perSearch {
		bfa, kc = f.k, min(MaxOverFetch, f.rows)
		c, kc2 = min(kc, maxRefine), kc
		needBF, needCand = true, f.sp.FilterPath != safe.FilterExact
	}
	if f.ds != nil {
		if err := f.buildExact(op, res); err != nil {
			return err
		}
		if needBF {
			if f.bfN, err = devBuf[int64](f, res, n, bfa, &f.bfa); err != nil {
				return err
			}
			if f.bfD, err = devBuf[float32](f, res, n, bfa, &f.bfa); err != nil {
				return err
			}
			if f.hBfN, f.hbN, err = pinBuf[int64](f, n, bfa, &f.bfa); err != nil {
				return err
			}
			if f.hBfD, f.hbD, err = pinBuf[float32](f, n, bfa, &f.bfa); err != nil {
				return err
			}
		}
	}
	if f.outN, f.oN, err = pinBuf[int64](f, n, f.k, nil); err != nil {
		return err
	}
	if f.outD, f.oD, err = pinBuf[float32](f, n, f.k, nil); err != nil {
		return err
	}
	if !needCand {
		return nil
	}
	if f.candN, err = devBuf[int64](f, res, n, kc, &f.kc); err != nil {
		return err
	}
	if f.candD, err = devBuf[float32](f, res, n, kc, &f.kc); err != nil {
		return err
	}
	if f.hCandN, f.hcN, err = pinBuf[int64](f, n, kc, &f.kc); err != nil {
		return err
	}
	if f.hCandD, f.hcD, err = pinBuf[float32](f, n, kc, &f.kc); err != nil {
		return err
	}
	if f.ds == nil {
		if kc2 > kc || f.perSearch {
			if f.cand2N, err = devBuf[int64](f, res, n, kc2, &f.kc2); err != nil {
				return err
			}
			if f.cand2D, err = devBuf[float32](f, res, n, kc2, &f.kc2); err != nil {
				return err
			}
			if f.hCand2N, f.hc2N, err = pinBuf[int64](f, n, kc2, &f.kc2); err != nil {
				return err
			}
			f.hCand2D, f.hc2D, err = pinBuf[float32](f, n, kc2, &f.kc2)
		}
		return err
	}
	for _, p := range []**generated.DLManagedTensor{&f.refC, &f.refN} {
		if *p, err = devBuf[int64](f, res, n, c, &f.c); err != nil {
			return err
		}
	}
	if f.refD, err = devBuf[float32](f, res, n, c, &f.c); err != nil {
		return err
	}
	if f.hRefC, f.hrC, err = pinBuf[int64](f, n, c, &f.c); err != nil {
		return err
	}
	if f.hRefN, f.hrN, err = pinBuf[int64](f, n, c, &f.c); err != nil {
		return err
	}
	f.hRefD, f.hrD, err = pinBuf[float32](f, n, c, &f.c)
	return err
}

// buildExact makes the brute-force index over the dataset.
func (f *Filtered) buildExact(op string, res *safe.Resources) error {
	// bf's memory is freed on res's stream: res must outlive it.
	unkeep, err := kit.Retain(res, op)
	if err != nil {
		return err
	}
	f.unkeep = unkeep
	var bf generated.CuvsBruteForceIndex_t
	if err := generated.CuvsBruteForceIndexCreate(&bf); err != nil {
		return kit.Wrap(op, err)
	}
	f.bf = bf
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(res)
	if err := generated.CuvsBruteForceBuild(h, f.ds, kit.CMetric(f.metric), 0, f.bf); err != nil {
		return kit.Wrap(op, err)
	}
	return kit.Wrap(op, generated.CuvsStreamSync(h))
}

// Index returns the index searched.
func (f *Filtered) Index() *Index {
	if f == nil {
		return nil
	}
	return f.idx
}

// K returns the neighbours per query each search finds.
func (f *Filtered) K() int {
	if f == nil {
		return 0
	}
	return int(f.k)
}

// MaxQueries returns the most queries one search takes.
func (f *Filtered) MaxQueries() int {
	if f == nil {
		return 0
	}
	return int(f.maxN)
}

// Close frees the buffers and the brute-force index and ends the borrows
// of the dataset and the filter. Closing twice is harmless.
func (f *Filtered) Close() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	return f.release()
}

func (f *Filtered) release() error {
	f.call.End()
	var first error
	if f.bf != 0 {
		first = generated.CuvsBruteForceIndexDestroy(f.bf)
		f.bf = 0
	}
	if f.unkeep != nil {
		f.unkeep()
		f.unkeep = nil
	}
	for _, c := range f.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	f.closers = nil
	return first
}

// Search searches queries (n × Dim(), n at most the maxQueries of
// NewFiltered, device memory) for the k nearest allowed rows into
// neighbors (int64) and distances (float32), n × k device memory, as
// NewFiltered describes. The results are ready once res is synchronized.
// It allocates nothing on the Go heap. A Filtered made without a filter
// searches every row (cuvsIvfPqSearch): see SearchWith.
func (f *Filtered) Search(res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error {
	return f.search("ivfpq.Filtered.Search", res, queries, neighbors, distances, nil)
}

// SearchWith is Search with filter (a bitset for Rows() rows; nil: every
// row), for a Filtered made without a filter (NewFiltered with a nil
// filter), which plans each search for its filter as NewFiltered
// describes. A Filtered made with a filter takes only that one (or nil).
// The filter is borrowed for the call.
func (f *Filtered) SearchWith(res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	return f.search("ivfpq.Filtered.SearchWith", res, queries, neighbors, distances, filter)
}

// Filter returns the filter f was made with (nil: a filter per search).
func (f *Filtered) Filter() *safe.Filter {
	if f == nil || f.perSearch {
		return nil
	}
	return f.filter
}

func (f *Filtered) search(op string, res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	if f == nil || f.idx == nil {
		return kit.Argf(op, "f", "a Filtered not made by Index.NewFiltered")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return kit.Argf(op, "f", "closed")
	}
	idx := f.idx
	if err := idx.c.Life.Enter(op); err != nil {
		return err
	}
	defer idx.c.Leave()
	if err := kit.CheckIndexDevice(res, op, idx.c.Dev); err != nil {
		return err
	}
	if rows := idx.c.Rows.Load(); rows != f.rows {
		return kit.Argf(op, "index", "made for %d rows, the index has %d since Extend: make it again", f.rows, rows)
	}
	c := dlpack.Begin(op)
	defer c.End()
	var t kit.SearchTensors
	if err := searchRules.Bind(op, c, queries, neighbors, distances, idx.searchDType(queries), idx.c.Dim, f.rows, &t); err != nil {
		return err
	}
	if t.N > f.maxN {
		return kit.Argf(op, "queries", "%d queries, the Filtered was made for at most %d", t.N, f.maxN)
	}
	if t.K != f.k {
		return kit.Argf(op, "neighbors", "k %d, the Filtered was made for %d", t.K, f.k)
	}
	switch {
	case !f.perSearch && filter != nil && filter != f.filter:
		return kit.Argf(op, "filter", "not the filter the Filtered was made with (make it with a nil filter to take one per search)")
	case f.perSearch && filter == nil:
		return f.pq(op, res, f.base, t.Queries, t.Neighbors, t.Distances)
	case f.perSearch:
		// the filter is the call's: nothing of it outlives the search
		defer f.forget()
		if err := f.plan(op, res, filter, c, t.N); err != nil {
			return err
		}
	}
	for i, mt := range f.sized {
		sh := unsafe.Slice(mt.DlTensor.Shape, 2)
		sh[0] = t.N
		if p := f.cols[i]; p != nil {
			sh[1] = *p
		}
	}
	defer func() {
		for _, mt := range f.sized {
			*mt.DlTensor.Shape = f.maxN
		}
	}()
	ft := ivffilter.Tensors{Q: t.Queries, N: t.Neighbors, D: t.Distances, Rows: t.N, K: t.K, QRowSize: core.RowBytes(t.Queries)}
	switch {
	case f.plain:
		return f.pq(op, res, f.cp, t.Queries, t.Neighbors, t.Distances)
	case f.exact && f.allowed >= f.k:
		return f.brute(op, res, t.Queries, t.Neighbors, t.Distances)
	case f.exact:
		return f.bruteFew(op, res, &t)
	}
	if err := f.overFetch(op, res, &t, f.cp); err != nil {
		return err
	}
	again := false
	for _, s := range f.short[:t.N] {
		again = again || s
	}
	if !again {
		return nil
	}
	if f.ds == nil {
		if f.kc2 <= f.kc {
			if f.cp.NProbes >= f.all.NProbes {
				return nil
			}
			return f.overFetch(op, res, &t, f.all)
		}
		return f.deeper(op, res, &t)
	}
	for q := int64(0); q < t.N; {
		if !f.short[q] {
			q++
			continue
		}
		end := q + 1
		for end < t.N && f.short[end] {
			end++
		}
		if err := ivffilter.SearchRows(op, res, &ft, q, end, 0, f.bruteCall); err != nil {
			return err
		}
		q = end
	}
	return nil
}

// forget drops what plan kept of a search's filter (perSearch).
func (f *Filtered) forget() {
	f.filter, f.words, f.fl = nil, nil, generated.CuvsFilter{}
}

func (f *Filtered) pq(op string, res *safe.Resources, cp *generated.CuvsIvfPqSearchParams, q, n, d *generated.DLManagedTensor) error {
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = generated.CuvsIvfPqSearch(h, kit.Params[generated.CuvsIvfPqSearchParams_t](res, cp), f.idx.c.H, q, n, d)
	kit.Unlock(res)
	return kit.Wrap(op, err)
}

func (f *Filtered) bruteCall(_ *safe.Resources, h generated.CuvsResources_t, _ uint32, q, n, d *generated.DLManagedTensor) error {
	return generated.CuvsBruteForceSearch(h, f.bf, q, n, d, f.fl)
}

func (f *Filtered) brute(op string, res *safe.Resources, q, n, d *generated.DLManagedTensor) error {
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = f.bruteCall(res, h, 0, q, n, d)
	kit.Unlock(res)
	return kit.Wrap(op, err)
}

// bruteFew is the exact path with fewer than k rows allowed: brute force
// for all of them, then the sentinels after.
func (f *Filtered) bruteFew(op string, res *safe.Resources, t *kit.SearchTensors) error {
	n, k := t.N, f.k
	if f.allowed > 0 {
		if err := f.brute(op, res, t.Queries, f.bfN, f.bfD); err != nil {
			return err
		}
		if err := kit.CopyBound(op, res, f.bfN, f.hBfN); err != nil {
			return err
		}
		if err := kit.CopyBound(op, res, f.bfD, f.hBfD); err != nil {
			return err
		}
	}
	a := f.allowed
	for q := int64(0); q < n; q++ {
		for j := int64(0); j < k; j++ {
			if j < a {
				f.oN[q*k+j], f.oD[q*k+j] = f.hbN[q*a+j], f.hbD[q*a+j]
			} else {
				f.oN[q*k+j], f.oD[q*k+j] = safe.SentinelID64, float32(math.Inf(1))
			}
		}
	}
	return f.deliver(op, res, t)
}

// deliver copies the pinned results into the caller's tensors.
func (f *Filtered) deliver(op string, res *safe.Resources, t *kit.SearchTensors) error {
	if err := kit.CopyBound(op, res, f.outN, t.Neighbors); err != nil {
		return err
	}
	return kit.CopyBound(op, res, f.outD, t.Distances)
}

func (f *Filtered) allowedID(id int64) bool {
	return id >= 0 && id < f.rows && f.words[id>>5]>>(uint(id)&31)&1 != 0
}

// deeper is the second pass without a dataset: every list probed for kc2
// candidates per query; the rows of the queries the first pass left short
// are filled again from them (the others keep theirs), and delivered.
func (f *Filtered) deeper(op string, res *safe.Resources, t *kit.SearchTensors) error {
	n, k, kc2 := t.N, f.k, f.kc2
	if err := f.pq(op, res, f.all, t.Queries, f.cand2N, f.cand2D); err != nil {
		return err
	}
	if err := kit.CopyBound(op, res, f.cand2N, f.hCand2N); err != nil {
		return err
	}
	if err := kit.CopyBound(op, res, f.cand2D, f.hCand2D); err != nil {
		return err
	}
	want := min(k, f.allowed)
	for q := int64(0); q < n; q++ {
		if !f.short[q] {
			continue
		}
		f.short[q] = f.fillRow(q, f.hc2N[q*kc2:(q+1)*kc2], f.hc2D[q*kc2:(q+1)*kc2]) < want
	}
	return f.deliver(op, res, t)
}

// fillRow writes query q's result row from its candidates (ids and PQ
// distances, nearest first): the first k allowed ones, then sentinels. It
// returns how many it found.
func (f *Filtered) fillRow(q int64, ids []int64, dists []float32) int64 {
	k, got := f.k, int64(0)
	for j := 0; j < len(ids) && got < k; j++ {
		if id, d := ids[j], dists[j]; f.allowedID(id) && !math.IsInf(float64(d), 0) {
			f.oN[q*k+got], f.oD[q*k+got] = id, d
			got++
		}
	}
	found := got
	for ; got < k; got++ {
		f.oN[q*k+got], f.oD[q*k+got] = safe.SentinelID64, float32(math.Inf(1))
	}
	return found
}

// overFetch runs the over-fetch path with cp for every query of t and
// marks the short ones.
func (f *Filtered) overFetch(op string, res *safe.Resources, t *kit.SearchTensors, cp *generated.CuvsIvfPqSearchParams) error {
	n, k, kc, c := t.N, f.k, f.kc, f.c
	if err := f.pq(op, res, cp, t.Queries, f.candN, f.candD); err != nil {
		return err
	}
	if err := kit.CopyBound(op, res, f.candN, f.hCandN); err != nil {
		return err
	}
	want := min(k, f.allowed)
	if f.ds == nil {
		if err := kit.CopyBound(op, res, f.candD, f.hCandD); err != nil {
			return err
		}
		for q := int64(0); q < n; q++ {
			f.short[q] = f.fillRow(q, f.hcN[q*kc:(q+1)*kc], f.hcD[q*kc:(q+1)*kc]) < want
		}
		return f.deliver(op, res, t)
	}
	// survivors, padded with each query's first one, refined exactly
	for q := int64(0); q < n; q++ {
		got := int64(0)
		for j := int64(0); j < kc && got < c; j++ {
			if id := f.hcN[q*kc+j]; f.allowedID(id) {
				f.hrC[q*c+got] = id
				got++
			}
		}
		f.short[q] = got < want
		pad := int64(0) // a row of the dataset: never delivered for an empty query
		if got > 0 {
			pad = f.hrC[q*c]
		}
		for ; got < c; got++ {
			f.hrC[q*c+got] = pad
		}
	}
	if err := kit.CopyBound(op, res, f.hRefC, f.refC); err != nil {
		return err
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = generated.CuvsRefine(h, f.ds, t.Queries, f.refC, kit.CMetric(f.metric), f.refN, f.refD)
	kit.Unlock(res)
	if err != nil {
		return kit.Wrap(op, err)
	}
	if err := kit.CopyBound(op, res, f.refN, f.hRefN); err != nil {
		return err
	}
	if err := kit.CopyBound(op, res, f.refD, f.hRefD); err != nil {
		return err
	}
	for q := int64(0); q < n; q++ {
		got := int64(0)
		for j := int64(0); j < c && got < k; j++ {
			id := f.hrN[q*c+j]
			if !f.allowedID(id) || seen(f.oN[q*k:q*k+got], id) {
				continue
			}
			f.oN[q*k+got], f.oD[q*k+got] = id, f.hrD[q*c+j]
			got++
		}
		f.short[q] = got < want
		for ; got < k; got++ {
			f.oN[q*k+got], f.oD[q*k+got] = safe.SentinelID64, float32(math.Inf(1))
		}
	}
	return f.deliver(op, res, t)
}

func seen(ids []int64, id int64) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}
