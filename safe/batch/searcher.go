package batch

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

// Searcher is what a Batcher searches: an index with its search parameters
// fixed, and its filter, if it has one (a FilterSearcher takes the
// requests' filters instead). A Batcher calls SearchBatch from one goroutine per slot,
// each slot with its own Resources, so SearchBatch must allow concurrent
// calls on different Resources (every index of the safe layer does).
//
// CAGRA, BruteForce, IVFFlat, IVFSQ and IVFPQ adapt this module's indexes; another
// index type plugs in by implementing these five methods, usually in a few
// lines around its Search.
type Searcher interface {
	// DType is the element type of the queries (and of the index); the
	// zero DataType when the index does not know it yet (an IVF-PQ index
	// deserialized and not extended), which lets any T through to the
	// index's own check.
	DType() dlpack.DataType
	// Dim is the width of a query.
	Dim() int
	// Rows is the number of rows indexed: a request's k may not exceed it.
	Rows() int
	// NeighborTypes lists the neighbor id types SearchBatch can write
	// (dlpack.Uint32, dlpack.Int64).
	NeighborTypes() []dlpack.DataType
	// SearchBatch searches queries (n × Dim(), device memory) for the k
	// nearest rows, k being the columns of neighbors and distances (n × k,
	// device memory), queued on res's stream: the Batcher synchronizes the
	// stream after copying the results out, so SearchBatch need not wait.
	SearchBatch(res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error
}

// FilterSearcher is a Searcher that can search a batch with a filter of
// its requests (Batcher.SearchFiltered, SearchIntoFiltered): requests with
// one filter share a batch, and the batch is searched with it. CAGRA,
// BruteForce, IVFFlat and IVFSQ made without a filter are FilterSearchers,
// and IVFPQFiltered of ivfpq.Filtered made without one.
type FilterSearcher interface {
	Searcher
	// SearchBatchFiltered is SearchBatch restricted to the rows filter
	// lets through: a bitset over Rows() rows, not nil.
	SearchBatchFiltered(res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error
}

// index is what the adapters need of an index of this module.
type index interface {
	DType() dlpack.DataType
	Dim() int
}

// searchFunc is a search of a batch with a filter (nil: none), as
// FilterSearcher.SearchBatchFiltered.
type searchFunc func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, f *safe.Filter) error

// adapter is a Searcher made of an index and its search, with the
// parameters and the Searcher's filter bound.
type adapter struct {
	idx    index
	rows   func() int
	types  []dlpack.DataType
	search searchFunc
	filter *safe.Filter // the Searcher's filter, for every batch; nil: none, or the requests'
	device bool         // the search wants device memory: the Batcher gives its slots device buffers
	// perRequest: requests may carry filters (SearchFiltered): the index
	// takes a bitset and the Searcher has no filter of its own.
	perRequest bool
	// fillsK: the index refuses a filter letting fewer than k rows through
	// (brute force: cuVS returns garbage there), so a request's filter
	// must let the Batcher's MaxK through.
	fillsK bool
	// bitmap: the index takes a bitmap filter, so that a batch of requests
	// with different filters is one search (brute force; CAGRA's exact
	// path; mixed.go).
	bitmap bool
	// scanOf, if set, classes a batch by its filter (nil: none) for maxK
	// neighbours (scanner).
	scanOf func(f *safe.Filter, maxK int) (scan, mix bool)
}

// scanner is what a Searcher implements whose batches may be scans:
// searches that read every allowed row (brute force; CAGRA's exact path),
// whose cost hardly grows with the batch (cagra's cost table, measured on
// the real H200, 100k × 128: brute force 755 µs for 16 queries, 779 µs for
// 256) and which do not share the GPU well: through the Batcher on the
// real H200, 11 exact batches of ~36 queries in flight answered 68.7k
// queries/s (BENCHMARKS.md, "Many tenants"), what they would one after the
// other at ~0.5 ms each, where one search of 256 takes 0.5-0.8 ms. So at
// most scanStreams scan batches search at once, and the requests queued
// meanwhile make the next one large.
type scanner interface {
	// scan reports whether a batch with filter f (nil: none) is a scan,
	// and whether requests of f may share a scan batch with requests of
	// other filters (one search with a bitmap: mixed.go).
	scan(f *safe.Filter, maxK int) (scan, mix bool)
}

// scanStreams is the most scan batches in flight at once: two, so that one
// batch's staging, bitmap and delivery on the host overlap the other's
// search.
const scanStreams = 2

func (a *adapter) scan(f *safe.Filter, maxK int) (bool, bool) {
	if a.scanOf == nil {
		return false, false
	}
	if f == nil {
		f = a.filter
	}
	return a.scanOf(f, maxK)
}

// filters is what a Searcher of this package says of per-request filters.
type filters interface {
	// perRequestFilters reports whether requests may carry filters.
	perRequestFilters() bool
	// checkFilter refuses a request's filter the index would refuse for a
	// batch searched for maxK neighbours.
	checkFilter(op string, f *safe.Filter, maxK int) error
}

func (a *adapter) perRequestFilters() bool { return a.perRequest }

func (a *adapter) checkFilter(op string, f *safe.Filter, maxK int) error {
	if a.fillsK && f.Allowed() < maxK {
		return kit.Argf(op, "filter", "lets %d rows through, fewer than the Batcher's MaxK %d (brute force refuses a filter that cannot fill k)", f.Allowed(), maxK)
	}
	return nil
}

// twoKernels is what a Searcher implements that has a kernel for light
// load, faster alone but worse when many batches share the GPU: CAGRA with
// AutoAlgo (multi-CTA for light load, single-CTA for heavy). SearchBatch is
// the heavy load's search.
type twoKernels interface {
	// lightLoad returns the load (requests queued or searching) up to
	// which batches search with searchLight, and how many batches may
	// then be in flight at once.
	lightLoad() (upTo, streams int)
	searchLight(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, f *safe.Filter) error
}

// twoKernelAdapter is an adapter with a light-load search.
type twoKernelAdapter struct {
	adapter
	light         searchFunc
	upTo, streams int
}

func (a *twoKernelAdapter) lightLoad() (int, int) { return a.upTo, a.streams }
func (a *twoKernelAdapter) searchLight(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, f *safe.Filter) error {
	if f == nil {
		f = a.filter
	}
	return a.light(res, q, n, d, f)
}

// The CAGRA kernels' regimes under AutoAlgo, measured on the real H200
// (N = 100k, D = 128, degree 32, itopk 64, one-query callers; BENCHMARKS.md
// "the two kernels"): multi-CTA answers a lone query in ~205 µs against
// single-CTA's ~345, but cuVS runs at most ~38k multi-CTA searches a second
// and its batches of up to 256 share the GPU at ~1.15M queries a second;
// single-CTA has no such limit and shares ~1.25M.
const (
	// cagraLightUpTo is the load up to which batches search on multi-CTA:
	// the Batcher then answered more queries a second on multi-CTA with 8
	// batches in flight than on single-CTA with its heavy-load cap at 256
	// callers, and fewer at 512.
	cagraLightUpTo = 384
	// cagraLightStreams is the batches in flight on multi-CTA: 8 one-query
	// searches at once take 237 µs each, 32 take 833 µs (the searches a
	// second are capped).
	cagraLightStreams = 8
)

// wantsDevice is what a Searcher implements to have the Batcher give its
// slots device buffers (Options.DeviceBuffers) whatever the options say.
type wantsDevice interface{ wantsDeviceBuffers() bool }

func (a *adapter) wantsDeviceBuffers() bool { return a.device }

func (a *adapter) DType() dlpack.DataType           { return a.idx.DType() }
func (a *adapter) Dim() int                         { return a.idx.Dim() }
func (a *adapter) Rows() int                        { return a.rows() }
func (a *adapter) NeighborTypes() []dlpack.DataType { return a.types }
func (a *adapter) SearchBatch(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
	return a.search(res, q, n, d, a.filter)
}

// SearchBatchFiltered searches with f, a request's filter; a Searcher made
// with a filter of its own refuses one.
func (a *adapter) SearchBatchFiltered(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, f *safe.Filter) error {
	if f == nil {
		f = a.filter
	} else if !a.perRequest {
		return kit.Argf("batch.Searcher.SearchBatchFiltered", "filter", "this Searcher takes no filter per batch (it was made with one, or its index takes none)")
	}
	return a.search(res, q, n, d, f)
}

var int64Only = []dlpack.DataType{dlpack.Int64}

// checkBitset refuses a filter a batch cannot share: a bitmap's bits belong
// to query positions, and a request's position changes from batch to batch.
func checkBitset(op string, filter *safe.Filter) error {
	if filter != nil && filter.Kind() != safe.Bitset {
		return kit.Argf(op, "filter", "a %s: a batch's rows belong to different requests each time, so only a bitset can be shared", filter.Kind())
	}
	return nil
}

// CAGRA adapts a CAGRA index for a Batcher: every batch is searched with
// params (copied; nil: cuVS's defaults with Algo AutoAlgo) and filter, a
// bitset for the index's rows or nil.
//
// With params.Algo AutoAlgo (and params both kernels take: no persistent
// kernel, no HashSmall, ITopKSize at most 512) the Batcher picks
// the kernel by its load, where cuVS's AUTO would pick by the batch's size
// alone: multi-CTA while up to 384 requests are queued or searching, with at
// most 8 batches in flight, and single-CTA beyond, with the Batcher's usual
// cap. On an H200 multi-CTA answers a lone query in ~60% of single-CTA's
// time, but cuVS runs at most ~38k multi-CTA searches a second, and under
// heavy load single-CTA batches share the GPU better (BENCHMARKS.md, "the
// two kernels"). A query's neighbors may then differ with the load, as
// they do with its batch: both kernels are approximate (on the benchmark's
// index multi-CTA's recall@10 was 0.007-0.011 above single-CTA's). With
// SingleCTA, MultiCTA or MultiKernel every batch uses that kernel. Note
// that cagra.DefaultSearchParams returns cuVS's C default, SingleCTA.
//
// Neighbor ids may be uint32 or int64. With filter nil, requests may carry
// filters of their own (Batcher.SearchFiltered); with a filter, it serves
// every request. Filtered batches follow cagra's filter policy
// (cagra.SearchParams.FilterPath) planned as for one query
// (params.FilterPlanQueries, 1 unless params set it): a batch takes the
// path (exact or graph, and the graph's top-k) a search of one of its
// queries alone would take, so that a batched filtered request gets the
// recall of its caller's direct search, and the queries a graph search
// left short are searched again exactly. The index must outlive the
// Batcher (close the Batcher first).
//
// C calls: cuvsCagraSearch, per batch.
func CAGRA(idx *cagra.Index, params *cagra.SearchParams, filter *safe.Filter) (Searcher, error) {
	const op = "batch.CAGRA"
	if idx == nil {
		return nil, kit.Argf(op, "idx", "nil")
	}
	if err := checkBitset(op, filter); err != nil {
		return nil, err
	}
	p := cagra.SearchParams{Algo: cagra.AutoAlgo} // zero otherwise: cuVS's defaults
	if params != nil {
		p = *params
	}
	if p.FilterPlanQueries == 0 {
		p.FilterPlanQueries = 1 // a batched query takes the path it would take alone
	}
	with := func(p *cagra.SearchParams) searchFunc {
		return func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, f *safe.Filter) error {
			return idx.Search(res, p, q, n, d, f)
		}
	}
	a := adapter{idx: idx, rows: idx.Rows, types: []dlpack.DataType{dlpack.Uint32, dlpack.Int64}, search: with(&p), filter: filter, perRequest: filter == nil, bitmap: filter == nil}
	a.scanOf = func(f *safe.Filter, maxK int) (bool, bool) {
		if f == nil {
			return false, false
		}
		path, err := idx.PlanFilter(&p, f, maxK, 1)
		if err != nil || path != safe.FilterExact {
			return false, false // the search reports the error
		}
		// A bitmap search must fill every query's k (cagra.Index.Search).
		return true, filter == nil && f.Allowed() >= maxK
	}
	if p.Algo != cagra.AutoAlgo || p.Persistent || p.HashmapMode == cagra.HashSmall || p.ITopKSize > 512 {
		// A kernel chosen, or params only one kernel takes (cuVS's AUTO
		// then picks multi-CTA above an internal top-k of 512, and
		// multi-CTA has no small hash): cuVS's choice for every batch.
		return &a, nil
	}
	heavy, light := p, p
	heavy.Algo, light.Algo = cagra.SingleCTA, cagra.MultiCTA
	a.search = with(&heavy)
	return &twoKernelAdapter{adapter: a, upTo: cagraLightUpTo, streams: cagraLightStreams, light: with(&light)}, nil
}

// BruteForce adapts a brute-force index for a Batcher: every batch is
// searched with filter, a bitset for the index's rows or nil (a bitmap is
// refused). Neighbor ids are int64. The index must outlive the Batcher
// (close the Batcher first).
//
// With filter nil, requests may carry filters of their own
// (Batcher.SearchFiltered), each letting at least MaxK rows through; a
// batch of requests with different filters is one search with a bitmap
// made of their bitsets (each filter's words copied to the host once, a
// slot's bitmap allocated on its first such batch: Rows()/8 bytes per
// query row of MaxBatch, pinned and on the device).
//
// Brute force is exact: a query's neighbors from a batch are those of a
// search of that query alone (distances may differ in the last bits, as
// the GPU's matrix products depend on the batch's shape).
//
// C calls: cuvsBruteForceSearch, per batch.
func BruteForce(idx *bruteforce.Index, filter *safe.Filter) (Searcher, error) {
	const op = "batch.BruteForce"
	if idx == nil {
		return nil, kit.Argf(op, "idx", "nil")
	}
	if err := checkBitset(op, filter); err != nil {
		return nil, err
	}
	return &adapter{idx: idx, rows: idx.Rows, types: int64Only, filter: filter, perRequest: filter == nil, fillsK: true, bitmap: filter == nil,
		search: func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, f *safe.Filter) error {
			return idx.Search(res, q, n, d, f)
		},
		scanOf: func(*safe.Filter, int) (bool, bool) { return true, filter == nil }}, nil
}

// IVFFlat adapts an IVF-Flat index for a Batcher: every batch is searched
// with params (copied; nil: cuVS's defaults) and filter, a bitset for the
// index's rows or nil (then requests may carry filters of their own,
// Batcher.SearchFiltered). Neighbor ids are int64. The index must outlive
// the Batcher; it may be extended while it serves (a batch then waits for
// the Extend, and a filter must still match the index's rows).
//
// C calls: cuvsIvfFlatSearch, per batch.
func IVFFlat(idx *ivfflat.Index, params *ivfflat.SearchParams, filter *safe.Filter) (Searcher, error) {
	const op = "batch.IVFFlat"
	if idx == nil {
		return nil, kit.Argf(op, "idx", "nil")
	}
	if err := checkBitset(op, filter); err != nil {
		return nil, err
	}
	p, err := kit.Or(params, ivfflat.DefaultSearchParams)
	if err != nil {
		return nil, err
	}
	sp := *p
	return &adapter{idx: idx, rows: idx.Rows, types: int64Only, filter: filter, perRequest: filter == nil,
		search: func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, f *safe.Filter) error {
			return idx.Search(res, &sp, q, n, d, f)
		}}, nil
}

// IVFPQ adapts an IVF-PQ index for a Batcher: every batch is searched with
// params (copied; nil: cuVS's defaults). cuVS's IVF-PQ search takes no
// filter. Neighbor ids are int64. The index must outlive the Batcher; it
// may be extended while it serves (a batch then waits for the Extend).
//
// C calls: cuvsIvfPqSearch, per batch.
func IVFPQ(idx *ivfpq.Index, params *ivfpq.SearchParams) (Searcher, error) {
	const op = "batch.IVFPQ"
	if idx == nil {
		return nil, kit.Argf(op, "idx", "nil")
	}
	p, err := kit.Or(params, ivfpq.DefaultSearchParams)
	if err != nil {
		return nil, err
	}
	sp := *p
	// IVF-PQ's search refuses pointers it does not find device-accessible
	// (check_pointer_residency: "all pointers must be accessible from the
	// device"); on the real library (26.06, H200) it refused the pinned
	// staging of a batch now and then (the first searches of a process),
	// so its batches search device buffers.
	return &adapter{idx: idx, rows: idx.Rows, types: int64Only, device: true,
		search: func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, _ *safe.Filter) error {
			return idx.Search(res, &sp, q, n, d)
		}}, nil
}

// IVFPQFiltered adapts filtered IVF-PQ searches (ivfpq.Index.NewFiltered)
// for a Batcher: each batch takes one of f and more (Filtered of one index,
// made alike: the same filter or each without one, the same K and
// MaxQueries), searches with it and gives it back, so that as many batches
// search at once as there are Filtered (a Filtered's buffers serve one
// search at a time). The Batcher's MaxK must be their K and its MaxBatch at
// most their MaxQueries (New refuses others). Neighbor ids are int64.
//
// Made without a filter (NewFiltered with a nil filter), requests may
// carry filters of their own (Batcher.SearchFiltered): each batch is one
// filter's, planned for it (ivfpq.Filtered.SearchWith: exact, over-fetch
// or plain, as a direct search with that filter), and a request without
// one searches every row. Made with a filter, it serves every request.
// The Filtered must outlive the Batcher; the index may not be extended
// while it serves (the Filtered then refuses: make it again).
//
// C calls: those of ivfpq.Filtered.SearchWith, per batch.
func IVFPQFiltered(f *ivfpq.Filtered, more ...*ivfpq.Filtered) (Searcher, error) {
	const op = "batch.IVFPQFiltered"
	if f == nil || f.Index() == nil {
		return nil, kit.Argf(op, "f", "nil or not made by ivfpq.Index.NewFiltered")
	}
	idx := f.Index()
	free := make(chan *ivfpq.Filtered, 1+len(more))
	free <- f
	for i, m := range more {
		switch {
		case m == nil || m.Index() == nil:
			return nil, kit.Argf(op, "more", "[%d] is nil or not made by ivfpq.Index.NewFiltered", i)
		case m.Index() != idx:
			return nil, kit.Argf(op, "more", "[%d] searches another index than f", i)
		case m.Filter() != f.Filter() || m.K() != f.K() || m.MaxQueries() != f.MaxQueries():
			return nil, kit.Argf(op, "more", "[%d] is not made as f is (filter, k and max queries)", i)
		}
		free <- m
	}
	return &ivfpqAdapter{adapter: adapter{idx: idx, rows: idx.Rows, types: int64Only, device: true, // as IVFPQ's
		perRequest: f.Filter() == nil,
		search: func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, filter *safe.Filter) error {
			fs := <-free
			defer func() { free <- fs }()
			return fs.SearchWith(res, q, n, d, filter)
		}}, maxQueries: f.MaxQueries(), k: f.K()}, nil
}

// ivfpqAdapter is IVFPQFiltered's Searcher: its Filtered fix the batch's
// size and k.
type ivfpqAdapter struct {
	adapter
	maxQueries, k int
}

// checkOptions refuses options the Searcher cannot serve.
func (a *ivfpqAdapter) checkOptions(op string, o Options) error {
	if o.MaxK != a.k {
		return kit.Argf(op, "MaxK", "%d, the ivfpq.Filtered search %d neighbours", o.MaxK, a.k)
	}
	if o.MaxBatch > a.maxQueries {
		return kit.Argf(op, "MaxBatch", "%d, the ivfpq.Filtered take at most %d queries", o.MaxBatch, a.maxQueries)
	}
	return nil
}

func (a *ivfpqAdapter) maxBatch() int { return a.maxQueries }

// optionChecker is what a Searcher implements whose searches fix some of
// the Batcher's options.
type optionChecker interface {
	// checkOptions refuses options the Searcher cannot serve.
	checkOptions(op string, o Options) error
	// maxBatch is the largest batch it takes: the default MaxBatch when
	// smaller than DefaultMaxBatch.
	maxBatch() int
}

// IVFSQ adapts an IVF-SQ index for a Batcher: every batch is searched with
// params (copied; nil: cuVS's defaults) and filter, a bitset for the
// index's rows or nil (then requests may carry filters of their own,
// Batcher.SearchFiltered). Neighbor ids are int64. The index must outlive
// the Batcher; it may be extended while it serves (a batch then waits for
// the Extend, and a filter must still match the index's rows).
//
// An IVF-SQ index deserialized and not yet extended has no element type
// (DType is the zero DataType) and takes float32 or float16 queries.
//
// C calls: cuvsIvfSqSearch, per batch.
func IVFSQ(idx *ivfsq.Index, params *ivfsq.SearchParams, filter *safe.Filter) (Searcher, error) {
	const op = "batch.IVFSQ"
	if idx == nil {
		return nil, kit.Argf(op, "idx", "nil")
	}
	if err := checkBitset(op, filter); err != nil {
		return nil, err
	}
	p, err := kit.Or(params, ivfsq.DefaultSearchParams)
	if err != nil {
		return nil, err
	}
	sp := *p
	return &adapter{idx: idx, rows: idx.Rows, types: int64Only, filter: filter, perRequest: filter == nil,
		search: func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut, f *safe.Filter) error {
			return idx.Search(res, &sp, q, n, d, f)
		}}, nil
}
