package cagra

import (
	"fmt"
	"math"
	"sync"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// GraphBuildAlgo is how Build makes the kNN graph CAGRA prunes.
type GraphBuildAlgo int32

// Graph build algorithms.
const (
	AutoSelect      = GraphBuildAlgo(generated.CuvsCagraGraphBuildAlgo_AUTO_SELECT)
	IVFPQ           = GraphBuildAlgo(generated.CuvsCagraGraphBuildAlgo_IVF_PQ)
	NNDescent       = GraphBuildAlgo(generated.CuvsCagraGraphBuildAlgo_NN_DESCENT)
	IterativeSearch = GraphBuildAlgo(generated.CuvsCagraGraphBuildAlgo_ITERATIVE_CAGRA_SEARCH)
	ACE             = GraphBuildAlgo(generated.CuvsCagraGraphBuildAlgo_ACE)
)

// String returns cuVS's name of the algorithm, e.g. "NN_DESCENT".
func (a GraphBuildAlgo) String() string { return generated.CuvsCagraGraphBuildAlgo(a).String() }

// IndexParams configures Build (and Merge). Start from DefaultIndexParams,
// which holds cuVS's defaults read from the library, and change what you
// need; Build checks the values before any C call. The zero IndexParams is
// refused (GraphDegree must be at least 1): pass nil params for the
// defaults.
type IndexParams struct {
	// Metric is the distance: CAGRA supports L2Expanded, InnerProduct,
	// CosineExpanded and (int8/uint8 data) BitwiseHamming.
	Metric safe.Metric
	// IntermediateGraphDegree is the degree of the kNN graph before
	// pruning, at least 1. As cuVS does (check_graph_degree), a build
	// lowers it to rows-1 when it is not below the number of rows, and
	// lowers GraphDegree to it when it is below GraphDegree (IterativeSearch
	// excepted: there it must be at least GraphDegree). Degrees tells the
	// degrees a build uses.
	IntermediateGraphDegree int
	// GraphDegree is the degree of the final graph, at least 1: lowered to
	// the (lowered) IntermediateGraphDegree when above it, so an index over
	// few rows has degree rows-1 at most; Index.GraphDegree reports it.
	GraphDegree int
	// BuildAlgo is how the kNN graph is made. IterativeSearch does not
	// lower the degrees and needs enough rows: cuVS refuses ("Could not
	// generate an intermediate CAGRA graph because the initial kNN graph
	// contains too many invalid or duplicated neighbor nodes.") a build
	// over fewer than GraphDegree rows, or whose first round (the first
	// ceil(rows/2) rows, halved again while above GraphDegree × 64) has
	// fewer rows than max(GraphDegree/2, min(GraphDegree, 24)): with the
	// defaults, fewer than 64 rows. Build refuses those beforehand.
	BuildAlgo GraphBuildAlgo
	// NNDescentIterations bounds the NNDescent graph build.
	NNDescentIterations int
	// IVFPQ tunes the IVFPQ graph build; nil lets cuVS choose from the
	// dataset's shape.
	IVFPQ *IVFPQGraphParams
	// ACE configures the ACE graph build (BuildAlgo ACE); nil uses cuVS's
	// defaults. A non-nil value replaces all of them: start from
	// DefaultACEParams.
	ACE *ACEParams
	// Compression, if not nil, compresses the dataset (VQ + PQ) in the
	// index (L2Expanded only); start from DefaultCompressionParams.
	Compression *CompressionParams
}

// IVFPQGraphParams tunes the IVF-PQ graph build. A nil Build or Search keeps
// cuVS's choice for the dataset's shape; start non-nil ones from
// DefaultIVFPQBuildParams and DefaultIVFPQSearchParams.
type IVFPQGraphParams struct {
	Build          *IVFPQBuildParams  // IVF-PQ index parameters
	Search         *IVFPQSearchParams // IVF-PQ search parameters
	RefinementRate float32            // > 1 refines the graph with exact distances
}

// IVFPQBuildParams are IVF-PQ's index parameters: safe/ivfpq's, checked
// as ivfpq.Build checks them. For CAGRA's graph build, cuVS v26.06 reads
// AddDataOnBuild, NLists, KMeansNIters, KMeansTrainsetFraction, PQBits,
// PQDim, CodebookKind, ForceRandomRotation, ConservativeMemoryAllocation and
// MaxTrainPointsPerPQCode; the metric is IndexParams.Metric.
type IVFPQBuildParams = ivfpq.IndexParams

// IVFPQSearchParams are IVF-PQ's search parameters: safe/ivfpq's. For
// CAGRA's graph build, cuVS v26.06 reads NProbes, LUTDtype,
// InternalDistanceDtype and PreferredShmemCarveout.
type IVFPQSearchParams = ivfpq.SearchParams

// ACEParams configure the ACE graph build (partitioned, for datasets larger
// than device memory; the dataset must be in host memory).
type ACEParams struct {
	NPartitions     int     // partitions; 0 lets cuVS choose
	EFConstruction  int     // search width while building
	BuildDir        string  // where ACE writes its files when UseDisk
	UseDisk         bool    // keep partitions on disk rather than in memory
	MaxHostMemoryGB float64 // host memory ACE may use; 0 lets cuVS choose
	MaxGPUMemoryGB  float64 // device memory ACE may use; 0 lets cuVS choose
}

// CompressionParams configure VQ + PQ compression of the dataset
// (cuvsCagraCompressionParams); zero sizes and fractions let cuVS choose.
// cuVS's search kernels exist for L2Expanded with 8-bit codes (PQBits 0 or
// 8) and 2 or 4 dimensions per PQ subspace (dim / PQDim rounded up; PQDim
// 0 means dim / 4) only: an index compressed otherwise builds, but its
// searches fail with "No dataset descriptor instance compiled for this
// parameter combination" (cpp/src/neighbors/detail/cagra/
// compute_distance_vpq_matrix.json). 256 PQ centers also need at least 256
// training samples.
type CompressionParams struct {
	PQBits                   uint32  // bits per PQ code
	PQDim                    uint32  // PQ dimension
	VQNCenters               uint32  // VQ centers
	KMeansNIters             uint32  // k-means iterations
	VQKMeansTrainsetFraction float64 // fraction of the data that trains VQ
	PQKMeansTrainsetFraction float64 // fraction of the data that trains PQ
}

// ExtendParams configure Extend.
type ExtendParams struct {
	MaxChunkSize uint32 // rows added per batch; 0 lets cuVS choose
}

// SearchAlgo is CAGRA's search kernel.
//
// cuVS's C API leaves the kernel at SingleCTA (cuvsCagraSearchParamsCreate
// does not set it, and SINGLE_CTA is 0), where its C++ API defaults to
// AUTO; DefaultSearchParams returns the C default. AutoAlgo lets cuVS pick
// by the batch alone: MultiCTA below twice the GPU's multiprocessors in
// queries (264 on an H200), SingleCTA from there (and MultiCTA above an
// ITopKSize of 512). The trade-off, measured on an H200 with the real
// library (N = 100k, D = 128, degree 32, ITopKSize 64, search + sync;
// BENCHMARKS.md, "the two kernels"):
//
//   - a lone one-query search takes ~205 µs on MultiCTA, ~345 µs on
//     SingleCTA; recall@10 was within 0.012 (multi-CTA the higher);
//   - cuVS runs at most ~38k MultiCTA searches a second across goroutines:
//     8 concurrent one-query searches took 240 µs each, 32 took 830 µs
//     (38k queries/s), where SingleCTA's 32 took 380 µs (82k);
//   - concurrent batches of up to 256 queries share the GPU at ~1.15M
//     queries/s on MultiCTA and ~1.25M on SingleCTA.
//
// So one-query searches from up to ~8 goroutines at once are fastest on
// MultiCTA (or AutoAlgo), and more on SingleCTA; a batch.Batcher over a
// CAGRA Searcher with AutoAlgo picks the kernel by its load.
type SearchAlgo int32

// Search kernels.
const (
	SingleCTA   = SearchAlgo(generated.CuvsCagraSearchAlgo_SINGLE_CTA)
	MultiCTA    = SearchAlgo(generated.CuvsCagraSearchAlgo_MULTI_CTA)
	MultiKernel = SearchAlgo(generated.CuvsCagraSearchAlgo_MULTI_KERNEL)
	AutoAlgo    = SearchAlgo(generated.CuvsCagraSearchAlgo_AUTO)
)

// String returns cuVS's name of the kernel, e.g. "SINGLE_CTA".
func (a SearchAlgo) String() string { return generated.CuvsCagraSearchAlgo(a).String() }

// HashMode is the visited-set hashmap CAGRA's search uses.
type HashMode int32

// Hash modes.
const (
	HashFull  = HashMode(generated.CuvsCagraHashMode_HASH)
	HashSmall = HashMode(generated.CuvsCagraHashMode_SMALL)
	HashAuto  = HashMode(generated.CuvsCagraHashMode_AUTO_HASH)
)

// String returns cuVS's name of the mode, e.g. "HASH".
func (m HashMode) String() string { return generated.CuvsCagraHashMode(m).String() }

// SearchParams configure Search. Start from DefaultSearchParams, or use
// the zero value: a zero ITopKSize, SearchWidth, HashmapMaxFillRate,
// NumRandomSamplings, PersistentLifetime or PersistentDeviceUsage means
// cuVS's default (read from the library once), zero FilterExactBelow and
// FilterPath mean this package's filter policy, and the other zeros are values cuVS accepts
// (Algo 0 is SingleCTA, HashmapMode 0 HashFull, 0 sizes let cuVS choose).
// Search checks every documented range in Go, naming the field.
//
// Persistent selects the persistent-kernel search: one long-running kernel
// serves the searches of every goroutine through a queue, which cuts the
// per-search launch cost for many small concurrent batches. Its caveats:
// the kernel occupies PersistentDeviceUsage (a fraction, 0..1) of the GPU's
// multiprocessors for PersistentLifetime seconds after the last search, the
// first persistent search pays the kernel's start, every search that shares
// it must use the same index and parameters, and it helps only for small
// batches (cuVS's documentation recommends it for batch sizes of a few
// queries issued from many threads). Measured on an H200 with the real
// library (v26.06), persistent-kernel searches stalled for seconds, from C
// and from Go alike: with 8 threads, 8 searches completed in 3 s, each
// taking ~3 s; the maximum latency was 2–6 s at 1 and at 32 threads.
// Search refuses Persistent on every release: PersistentRefused says why
// (the stall's cause, read in cuVS's sources).
//
// FilterPath and FilterExactBelow go beyond cuVS. CAGRA's graph search
// degrades under a bitset filter: it walks through the rows the filter
// rejects but returns only allowed ones, so the fewer rows are allowed the
// fewer it finds. On the real library (v26.06, 20,000 × 64 uniform, 200
// queries, k 10, degree 64, itopk 64) recall@10 against the exact answer
// among the allowed rows fell from 0.985 (all allowed) to 0.887 at 20%,
// 0.709 at 10% (114 of 2,000 slots empty) and 0.250 at 2%; with 3 or 50
// rows allowed only the query's own row came back. With FilterPath
// safe.FilterAuto (the zero value, the default) a filtered search follows
// this package's policy instead:
//   - fewer rows allowed than k: exact brute force over the index's
//     dataset (cuvsBruteForceBuild once, kept until Extend or Close;
//     cuvsBruteForceSearch with the same bitset), SentinelID /
//     SentinelDistance past the allowed count;
//   - otherwise the internal top-k a graph search would need is cuVS's
//     rule for the allowed fraction (k/f + (ITopKSize-k)/√f, from 75%
//     allowed unchanged); past MaxFilterITopK the search is exact, else a
//     cost model fitted to the real library's timings (allowed count, Rows,
//     Dim, batch size: see filterCost in filterpolicy.go) picks the cheaper
//     of exact and graph;
//   - from PostFilterFrom (45%) to 75% allowed the graph path is a
//     post-filter: an unfiltered graph search (no filter given to cuVS)
//     for 2k/f candidates, at the caller's ITopKSize when the graph's
//     degree and ITopKSize are at least 64 (cuVS's defaults), else at
//     the raised one, read back and filtered on the host against the
//     bitset (copied to the host once, kept with the filter): cuVS's
//     filtered walk loses recall with every rejected row it expands, an
//     unfiltered one does not (see PostFilterFrom for the numbers);
//   - a graph search with some rows rejected reads its results back
//     (cuvsMatrixCopy, cuvsStreamSync) and, when a query came back with
//     fewer than min(k, allowed) rows, searches those queries again
//     exactly (the whole batch when more than a quarter came back short).
//
// On the double fitted to the real library this keeps recall@10 within
// 0.03 of the unfiltered search at every fraction from 100% to 3 rows
// (TestFilterRecallFloor). safe.FilterIndex (the graph) always runs
// cuVS's graph search with the caller's parameters as they are (no raised
// top-k, no second pass): cuVS's own behaviour, slots it cannot fill
// holding SentinelID. safe.FilterExact always runs exact brute force over
// the index's dataset (cuvsBruteForceSearch with the same bitset).
// FilterExactBelow, if positive, replaces the model by a fixed threshold:
// exact below that fraction of Rows() (or below k rows), the policy's
// graph search above; a negative value means safe.FilterIndex; above 1 is
// refused. FilterPlanQueries, if positive, makes the policy plan a search
// as it would plan one of that many queries, whatever the search's own
// count: batch.CAGRA sets 1, so that a query searched in a batch of other
// callers' queries takes the path (exact or graph, and the graph's top-k)
// its caller's search of it alone would take, and gets the same recall;
// the policy's cost model would otherwise move a batch to the graph path
// where one query alone goes exact (at 50% allowed and degree 32: one query
// exact, 16 and more the graph). Negative is refused. The exact path
// needs the index's dataset in float32 or float16 and the L2Expanded
// metric, known to this package (not so for an index deserialized from a
// file in another format, a compressed one, one serialized without its
// dataset or one ACE left on disk): safe.FilterAuto then searches the
// graph (with the raised top-k, up to MaxFilterITopK), safe.FilterExact and
// a positive FilterExactBelow refuse with an *safe.ArgError. The exact path
// copies the dataset once if its rows are padded to 16 bytes, and
// synchronizes the stream unless neighbors are int64 and at least k rows
// are allowed; it keeps its scratch memory with the index, so that a
// search allocates nothing on the Go heap on any path.
type SearchParams struct {
	MaxQueries            int             // queries per batch; 0 lets cuVS choose
	ITopKSize             int             // size of the internal top-k list (at least k): raise for recall
	MaxIterations         int             // 0 lets cuVS choose
	Algo                  SearchAlgo      // search kernel
	TeamSize              int             // threads per distance computation; 0 lets cuVS choose
	SearchWidth           int             // graph nodes expanded per iteration
	MinIterations         int             // iterations before the search may stop
	ThreadBlockSize       int             // 0 lets cuVS choose, else 64 to 1024, a power of two
	HashmapMode           HashMode        // visited-set hashmap
	HashmapMinBitlen      int             // hashmap size: at least 2^HashmapMinBitlen (≤ 20); 0 lets cuVS choose
	HashmapMaxFillRate    float32         // in [0.1, 0.9)
	NumRandomSamplings    uint32          // random starting nodes sampled per query
	RandXORMask           uint64          // seed of that sampling
	Persistent            bool            // use the persistent kernel (see above)
	PersistentLifetime    float32         // seconds the persistent kernel outlives the last search
	PersistentDeviceUsage float32         // fraction of the device the persistent kernel uses, in (0, 1]
	FilterExactBelow      float64         // if positive, the fraction of rows allowed below which a filtered search is exact (see above)
	FilterPath            safe.FilterPath // how a filtered search runs: safe.FilterAuto (the policy, see above), safe.FilterIndex (the graph) or safe.FilterExact
	FilterPlanQueries     int             // if positive, the policy plans a filtered search as one of this many queries (see above)
}

// DefaultIndexParams returns cuVS's defaults, read from the loaded library
// (cuvsCagraIndexParamsCreate): L2Expanded, intermediate graph degree 128,
// graph degree 64, the IVFPQ graph build, 20 NN-Descent iterations in
// cuVS v26.06. IVFPQ, ACE and Compression are nil: cuVS picks them from the
// dataset (start from DefaultIVFPQBuildParams, DefaultIVFPQSearchParams,
// DefaultACEParams or DefaultCompressionParams to set them).
func DefaultIndexParams() (IndexParams, error) {
	const op = "cagra.DefaultIndexParams"
	p, err := createParams()
	if err != nil {
		return IndexParams{}, kit.Wrap(op, err)
	}
	out := p.fromC()
	// p is destroyed exactly as created (build_algo untouched), so
	// cuvsCagraIndexParamsDestroy frees what Create allocated.
	return out, kit.Wrap(op, p.destroy())
}

// Heuristic chooses how FromHNSWParams maps HNSW's parameters.
type Heuristic int32

// Heuristics for FromHNSWParams.
const (
	SimilarSearchPerformance = Heuristic(generated.CuvsCagraHnswHeuristicType_CUVS_CAGRA_HEURISTIC_SIMILAR_SEARCH_PERFORMANCE)
	SameGraphFootprint       = Heuristic(generated.CuvsCagraHnswHeuristicType_CUVS_CAGRA_HEURISTIC_SAME_GRAPH_FOOTPRINT)
)

// String returns cuVS's name of the heuristic.
func (h Heuristic) String() string { return generated.CuvsCagraHnswHeuristicType(h).String() }

// FromHNSWParams returns the CAGRA parameters cuVS derives from HNSW's M and
// ef_construction for a rows × dim dataset (cuvsCagraIndexParamsFromHnswParams).
func FromHNSWParams(rows, dim int, m, efConstruction int, h Heuristic, metric safe.Metric) (IndexParams, error) {
	const op = "cagra.FromHNSWParams"
	if rows < 1 || dim < 1 || m < 1 || efConstruction < 1 {
		return IndexParams{}, kit.Argf(op, "rows/dim/m/efConstruction", "all must be positive (got %d, %d, %d, %d)", rows, dim, m, efConstruction)
	}
	if h != SimilarSearchPerformance && h != SameGraphFootprint {
		return IndexParams{}, kit.Argf(op, "h", "%d is not a heuristic", h)
	}
	if !metric.Valid() {
		return IndexParams{}, kit.Argf(op, "metric", "%d is not a metric", metric)
	}
	return populate(op, metric, func(p cParams) error {
		if p.p08 != 0 {
			return generated.CuvsCagraIndexParamsFromHnswParams_v2608(p.p08, int64(rows), int64(dim), int32(m), int32(efConstruction), generated.CuvsCagraHnswHeuristicType(h), kit.CMetric(metric))
		}
		return generated.CuvsCagraIndexParamsFromHnswParams(p.p06, int64(rows), int64(dim), int32(m), int32(efConstruction), generated.CuvsCagraHnswHeuristicType(h), kit.CMetric(metric))
	})
}

// populate runs fill, a cuVS call that overwrites index params with those
// it derives (_populate_cagra_index_params_from_cpp), on params of the
// loaded release, and reads them back.
func populate(op string, metric safe.Metric, fill func(cParams) error) (IndexParams, error) {
	p, err := createParams()
	if err != nil {
		return IndexParams{}, kit.Wrap(op, err)
	}
	pf := p.fields()
	created := *pf.gbp // the IVF-PQ object Create allocated
	// From 1e6 rows cuVS writes through the IVF-PQ object's build and search
	// params, which Create leaves NULL: give it real ones
	// (destroyIndexParams frees them).
	ip := (*generated.CuvsIvfPqParams)(created)
	if err := generated.CuvsIvfPqIndexParamsCreate(&ip.IvfPqBuildParams); err != nil {
		ip.IvfPqBuildParams = 0
		destroyIndexParams(p, created)
		return IndexParams{}, kit.Wrap(op, err)
	}
	if err := generated.CuvsIvfPqSearchParamsCreate(&ip.IvfPqSearchParams); err != nil {
		ip.IvfPqSearchParams = 0
		destroyIndexParams(p, created)
		return IndexParams{}, kit.Wrap(op, err)
	}
	err = fill(p)
	out := p.fromC()
	// cuVS v26.06 writes its C++ default metric (L2Expanded) whatever
	// metric it is given.
	out.Metric = metric
	if err == nil && out.BuildAlgo == IVFPQ && *pf.gbp == created {
		out.IVFPQ = ivfpqFromC(ip)
	}
	if g := *pf.gbp; g != nil && g != created && *pf.algo == generated.CuvsCagraGraphBuildAlgo_ACE {
		// cuVS replaced graph_build_params by ACE params of its own (new,
		// build_dir strdup'd), which cuvsAceParamsDestroy frees.
		a := generated.CuvsAceParams_t(uintptr(g))
		if err == nil {
			out.ACE = aceFromC(a.Ref())
		}
		_ = generated.CuvsAceParamsDestroy(a)
	}
	destroyIndexParams(p, created)
	if err != nil {
		return IndexParams{}, kit.Wrap(op, err)
	}
	return out, nil
}

// IndexParamsFromDataset returns the CAGRA parameters cuVS chooses for a
// rows × dim dataset, a graph degree, a metric and a build quality (higher
// builds better graphs, at more cost, up to a point): cuVS 26.08's
// cuvsCagraIndexParamsFromDataset, which picks the graph build algorithm
// and its parameters from the dataset's shape. On cuVS 26.06 it returns an
// error wrapping safe.ErrNotInRelease, before any other work.
func IndexParamsFromDataset(rows, dim, graphDegree int, metric safe.Metric, buildQuality int) (IndexParams, error) {
	const op = "cagra.IndexParamsFromDataset"
	if err := kit.InRelease(op, "cuvsCagraIndexParamsFromDataset"); err != nil {
		return IndexParams{}, err
	}
	if rows < 1 || dim < 1 || graphDegree < 1 {
		return IndexParams{}, kit.Argf(op, "rows/dim/graphDegree", "all must be positive (got %d, %d, %d)", rows, dim, graphDegree)
	}
	if buildQuality < 0 {
		return IndexParams{}, kit.Argf(op, "buildQuality", "%d is negative", buildQuality)
	}
	if !metric.Valid() {
		return IndexParams{}, kit.Argf(op, "metric", "%d is not a metric", metric)
	}
	return populate(op, metric, func(p cParams) error {
		return generated.CuvsCagraIndexParamsFromDataset(p.p08, int64(rows), int64(dim), uint64(graphDegree), kit.CMetric(metric), uint64(buildQuality))
	})
}

func ivfpqFromC(ip *generated.CuvsIvfPqParams) *IVFPQGraphParams {
	g := &IVFPQGraphParams{RefinementRate: ip.RefinementRate}
	if b := ip.IvfPqBuildParams; b != 0 {
		g.Build = &IVFPQBuildParams{
			Metric: safe.Metric(b.Ref().Metric), MetricArg: b.Ref().MetricArg, AddDataOnBuild: b.Ref().AddDataOnBuild,
			NLists: b.Ref().NLists, KMeansNIters: b.Ref().KmeansNIters, KMeansTrainsetFraction: b.Ref().KmeansTrainsetFraction,
			PQBits: b.Ref().PqBits, PQDim: b.Ref().PqDim, CodebookKind: ivfpq.CodebookKind(b.Ref().CodebookKind),
			ForceRandomRotation: b.Ref().ForceRandomRotation, ConservativeMemoryAllocation: b.Ref().ConservativeMemoryAllocation,
			MaxTrainPointsPerPQCode: b.Ref().MaxTrainPointsPerPqCode, CodesLayout: ivfpq.CodesLayout(b.Ref().CodesLayout),
		}
	}
	if s := ip.IvfPqSearchParams; s != 0 {
		g.Search = &IVFPQSearchParams{
			NProbes: s.Ref().NProbes, LUTDtype: ivfpq.CUDAType(s.Ref().LutDtype), InternalDistanceDtype: ivfpq.CUDAType(s.Ref().InternalDistanceDtype),
			CoarseSearchDtype: ivfpq.CUDAType(s.Ref().CoarseSearchDtype), MaxInternalBatchSize: s.Ref().MaxInternalBatchSize,
			PreferredShmemCarveout: s.Ref().PreferredShmemCarveout,
		}
	}
	return g
}

// DefaultIVFPQBuildParams returns IVF-PQ's default index parameters, read
// from the library (ivfpq.DefaultIndexParams).
func DefaultIVFPQBuildParams() (IVFPQBuildParams, error) { return ivfpq.DefaultIndexParams() }

// DefaultIVFPQSearchParams returns IVF-PQ's default search parameters, read
// from the library (ivfpq.DefaultSearchParams).
func DefaultIVFPQSearchParams() (IVFPQSearchParams, error) { return ivfpq.DefaultSearchParams() }

// DefaultCompressionParams returns cuVS's default VQ/PQ compression
// parameters, read from the library.
func DefaultCompressionParams() (CompressionParams, error) {
	const op = "cagra.DefaultCompressionParams"
	var p generated.CuvsCagraCompressionParams_t
	if err := generated.CuvsCagraCompressionParamsCreate(&p); err != nil {
		return CompressionParams{}, kit.Wrap(op, err)
	}
	out := CompressionParams{
		PQBits: p.Ref().PqBits, PQDim: p.Ref().PqDim, VQNCenters: p.Ref().VqNCenters, KMeansNIters: p.Ref().KmeansNIters,
		VQKMeansTrainsetFraction: p.Ref().VqKmeansTrainsetFraction, PQKMeansTrainsetFraction: p.Ref().PqKmeansTrainsetFraction,
	}
	return out, kit.Wrap(op, generated.CuvsCagraCompressionParamsDestroy(p))
}

// DefaultACEParams returns cuVS's default ACE graph-build parameters,
// read from the library (cuvsAceParamsCreate).
func DefaultACEParams() (ACEParams, error) {
	const op = "cagra.DefaultACEParams"
	var p generated.CuvsAceParams_t
	if err := generated.CuvsAceParamsCreate(&p); err != nil {
		return ACEParams{}, kit.Wrap(op, err)
	}
	out := *aceFromC(p.Ref())
	return out, kit.Wrap(op, generated.CuvsAceParamsDestroy(p))
}

// DefaultExtendParams returns cuVS's default extend parameters.
func DefaultExtendParams() (ExtendParams, error) {
	const op = "cagra.DefaultExtendParams"
	var p generated.CuvsCagraExtendParams_t
	if err := generated.CuvsCagraExtendParamsCreate(&p); err != nil {
		return ExtendParams{}, kit.Wrap(op, err)
	}
	out := ExtendParams{MaxChunkSize: p.Ref().MaxChunkSize}
	return out, kit.Wrap(op, generated.CuvsCagraExtendParamsDestroy(p))
}

// DefaultSearchParams returns cuVS's default search parameters, read from
// the library: its C API's, whose Algo is SingleCTA (see SearchAlgo).
func DefaultSearchParams() (SearchParams, error) {
	const op = "cagra.DefaultSearchParams"
	var p generated.CuvsCagraSearchParams_t
	if err := generated.CuvsCagraSearchParamsCreate(&p); err != nil {
		return SearchParams{}, kit.Wrap(op, err)
	}
	out := SearchParams{
		MaxQueries: int(p.Ref().MaxQueries), ITopKSize: int(p.Ref().ItopkSize), MaxIterations: int(p.Ref().MaxIterations),
		Algo: SearchAlgo(p.Ref().Algo), TeamSize: int(p.Ref().TeamSize), SearchWidth: int(p.Ref().SearchWidth),
		MinIterations: int(p.Ref().MinIterations), ThreadBlockSize: int(p.Ref().ThreadBlockSize),
		HashmapMode: HashMode(p.Ref().HashmapMode), HashmapMinBitlen: int(p.Ref().HashmapMinBitlen),
		HashmapMaxFillRate: p.Ref().HashmapMaxFillRate, NumRandomSamplings: p.Ref().NumRandomSamplings,
		RandXORMask: p.Ref().RandXorMask, Persistent: p.Ref().Persistent, PersistentLifetime: p.Ref().PersistentLifetime,
		PersistentDeviceUsage: p.Ref().PersistentDeviceUsage,
	}
	return out, kit.Wrap(op, generated.CuvsCagraSearchParamsDestroy(p))
}

// searchDefaults holds cuVS's defaults for the fields whose zero means
// "cuVS's default", read from the library once.
var searchDefaults = sync.OnceValues(DefaultSearchParams)

// withDefaults returns s with its zero fields replaced by cuVS's defaults.
func (s *SearchParams) withDefaults(op string) (SearchParams, error) {
	out := *s
	if s.ITopKSize != 0 && s.SearchWidth != 0 && s.HashmapMaxFillRate != 0 && s.NumRandomSamplings != 0 &&
		s.PersistentLifetime != 0 && s.PersistentDeviceUsage != 0 {
		return out, nil
	}
	d, err := searchDefaults()
	if err != nil {
		return out, fmt.Errorf("%s: reading cuVS's default search parameters: %w", op, err)
	}
	if out.ITopKSize == 0 {
		out.ITopKSize = d.ITopKSize
	}
	if out.SearchWidth == 0 {
		out.SearchWidth = d.SearchWidth
	}
	if out.HashmapMaxFillRate == 0 {
		out.HashmapMaxFillRate = d.HashmapMaxFillRate
	}
	if out.NumRandomSamplings == 0 {
		out.NumRandomSamplings = d.NumRandomSamplings
	}
	if out.PersistentLifetime == 0 {
		out.PersistentLifetime = d.PersistentLifetime
	}
	if out.PersistentDeviceUsage == 0 {
		out.PersistentDeviceUsage = d.PersistentDeviceUsage
	}
	return out, nil
}

// cValue fills the C search parameters: a plain struct (no pointers) that
// cuVS only reads during the call, so a Go value can be handed to C.
func (s *SearchParams) cValue() generated.CuvsCagraSearchParams {
	return generated.CuvsCagraSearchParams{
		MaxQueries: uint64(s.MaxQueries), ItopkSize: uint64(s.ITopKSize), MaxIterations: uint64(s.MaxIterations),
		Algo: generated.CuvsCagraSearchAlgo(s.Algo), TeamSize: uint64(s.TeamSize), SearchWidth: uint64(s.SearchWidth),
		MinIterations: uint64(s.MinIterations), ThreadBlockSize: uint64(s.ThreadBlockSize),
		HashmapMode: generated.CuvsCagraHashMode(s.HashmapMode), HashmapMinBitlen: uint64(s.HashmapMinBitlen),
		HashmapMaxFillRate: s.HashmapMaxFillRate, NumRandomSamplings: s.NumRandomSamplings,
		RandXorMask: s.RandXORMask, Persistent: s.Persistent, PersistentLifetime: s.PersistentLifetime,
		PersistentDeviceUsage: s.PersistentDeviceUsage,
	}
}

// validate checks s, whose zeros withDefaults has already replaced, as
// cuVS v26.06 would (search_plan.cuh's check_params), before any C call.
func (s *SearchParams) validate(op string) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxQueries", s.MaxQueries}, {"ITopKSize", s.ITopKSize}, {"MaxIterations", s.MaxIterations},
		{"TeamSize", s.TeamSize}, {"SearchWidth", s.SearchWidth}, {"MinIterations", s.MinIterations},
		{"ThreadBlockSize", s.ThreadBlockSize}, {"HashmapMinBitlen", s.HashmapMinBitlen}} {
		if f.v < 0 {
			return kit.Argf(op, "params."+f.name, "%d is negative", f.v)
		}
	}
	switch s.Algo {
	case SingleCTA, MultiCTA, MultiKernel, AutoAlgo:
	default:
		return kit.Argf(op, "params.Algo", "%d is not a search algorithm", s.Algo)
	}
	if s.ITopKSize > 1024 && s.Algo == SingleCTA {
		return kit.Argf(op, "params.ITopKSize", "%d, the single-CTA kernel takes at most 1024", s.ITopKSize)
	}
	switch s.HashmapMode {
	case HashFull, HashSmall, HashAuto:
	default:
		return kit.Argf(op, "params.HashmapMode", "%d is not a hash mode", s.HashmapMode)
	}
	if s.HashmapMode == HashSmall && s.Algo == MultiCTA {
		return kit.Argf(op, "params.HashmapMode", "HashSmall is not available with the MultiCTA kernel")
	}
	switch s.ThreadBlockSize {
	case 0, 64, 128, 256, 512, 1024:
	default:
		return kit.Argf(op, "params.ThreadBlockSize", "%d, want 0, 64, 128, 256, 512 or 1024", s.ThreadBlockSize)
	}
	if s.HashmapMinBitlen > 20 {
		return kit.Argf(op, "params.HashmapMinBitlen", "%d, want at most 20", s.HashmapMinBitlen)
	}
	if !(s.HashmapMaxFillRate >= 0.1 && s.HashmapMaxFillRate < 0.9) {
		return kit.Argf(op, "params.HashmapMaxFillRate", "%g is not in [0.1, 0.9)", s.HashmapMaxFillRate)
	}
	if s.Persistent {
		return kit.Argf(op, "params.Persistent", "%s", PersistentRefused)
	}
	if !(s.PersistentDeviceUsage > 0 && s.PersistentDeviceUsage <= 1) {
		return kit.Argf(op, "params.PersistentDeviceUsage", "%g is not in (0, 1]", s.PersistentDeviceUsage)
	}
	if !(s.PersistentLifetime > 0) || math.IsInf(float64(s.PersistentLifetime), 0) {
		return kit.Argf(op, "params.PersistentLifetime", "%g, want a positive number of seconds", s.PersistentLifetime)
	}
	if err := kit.CheckFilterPath(op, s.FilterPath); err != nil {
		return err
	}
	if math.IsNaN(s.FilterExactBelow) || s.FilterExactBelow > 1 {
		return kit.Argf(op, "params.FilterExactBelow", "%g, want a fraction of the rows at most 1 (0: the default, negative: never)", s.FilterExactBelow)
	}
	if s.FilterPlanQueries < 0 {
		return kit.Argf(op, "params.FilterPlanQueries", "%d, want 0 (the search's own count) or a positive number of queries", s.FilterPlanQueries)
	}
	return nil
}

// checkFiltered checks what depends on the search (a graph search, not the
// exact path): the single-CTA and multi-kernel searches need k ≤
// ITopKSize, and a filtered search cannot use HashSmall.
func (s *SearchParams) checkFiltered(op string, filtered bool, k int64) error {
	if filtered && s.HashmapMode == HashSmall {
		return kit.Argf(op, "params.HashmapMode", "HashSmall is not available with a filter")
	}
	if (s.Algo == SingleCTA || s.Algo == MultiKernel) && k > int64(s.ITopKSize) {
		return kit.Argf(op, "params.ITopKSize", "%d is below k = %d", s.ITopKSize, k)
	}
	return nil
}

// zeroSearchParams is what a nil *SearchParams means: every field zero,
// that is cuVS's default (see SearchParams).
var zeroSearchParams SearchParams
