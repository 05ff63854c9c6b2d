package allneighbors

import (
	"math"
	"strconv"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Algo is the builder of the local kNN graphs (cuvsAllNeighborsAlgo).
type Algo int32

// The builders.
const (
	// BruteForce: exact kNN (each row finds itself, at distance 0).
	BruteForce = Algo(generated.CuvsAllNeighborsAlgo_CUVS_ALL_NEIGHBORS_ALGO_BRUTE_FORCE)
	// IVFPQ: an IVF-PQ index searched for candidates, refined with exact
	// distances; L2Expanded only.
	IVFPQ = Algo(generated.CuvsAllNeighborsAlgo_CUVS_ALL_NEIGHBORS_ALGO_IVF_PQ)
	// NNDescent: NN-Descent (package nndescent), with the row itself put
	// first (except for InnerProduct, where no row lists itself).
	NNDescent = Algo(generated.CuvsAllNeighborsAlgo_CUVS_ALL_NEIGHBORS_ALGO_NN_DESCENT)
)

// String returns the builder's name.
func (a Algo) String() string {
	switch a {
	case BruteForce:
		return "BruteForce"
	case IVFPQ:
		return "IVFPQ"
	case NNDescent:
		return "NNDescent"
	}
	return "Algo(" + strconv.Itoa(int(a)) + ")"
}

// IndexParams configures a build (cuvsAllNeighborsIndexParams). Start from
// DefaultIndexParams, which reads cuVS's defaults from the library.
//
// The zero IndexParams is refused (NClusters and OverlapFactor must be at
// least 1); with those set, it is a brute-force L2Expanded build.
type IndexParams struct {
	// Algo builds the local kNN graphs.
	Algo Algo
	// Metric: for BruteForce L2Expanded, L2SqrtExpanded, CosineExpanded,
	// L1, L2Unexpanded, L2SqrtUnexpanded, InnerProduct, Linf, Canberra,
	// LpUnexpanded, CorrelationExpanded or JensenShannon; for NNDescent
	// L2Expanded, L2SqrtExpanded, CosineExpanded or InnerProduct; for IVFPQ
	// L2Expanded. Mutual-reachability builds take L2Expanded,
	// L2SqrtExpanded or CosineExpanded (not IVFPQ).
	Metric safe.Metric
	// NClusters partitions a host dataset into this many batches (1: no
	// batching; more than 1 needs the dataset in host memory).
	NClusters int
	// OverlapFactor is the number of batches each row joins, below
	// NClusters when batching (ignored without).
	OverlapFactor int
	// IVFPQ configures the IVF-PQ builder; nil lets cuVS choose from the
	// dataset's shape. Only read with Algo IVFPQ.
	IVFPQ *IVFPQParams
	// NNDescent configures the NN-Descent builder; nil is cuVS's defaults.
	// Only read with Algo NNDescent.
	NNDescent *NNDescentParams
}

// IVFPQParams are the IVF-PQ build parameters of an IVFPQ build (the
// members of cuvsIvfPqIndexParams that matter there). A zero field is the
// value cuvsIvfPqIndexParamsCreate gives (1024 lists, 20 k-means
// iterations, a training fraction of 0.5, 8 bits, pq_dim chosen by cuVS;
// the 1024 lists are refused for fewer rows); the metric is always
// IndexParams.Metric. Without IVFPQParams cuVS chooses the IVF-PQ index
// from the dataset's shape; with them, every member counts.
type IVFPQParams struct {
	NLists                 int     // inverted lists, at most the rows of a batch
	KMeansNIters           int     // k-means iterations
	KMeansTrainsetFraction float64 // fraction of rows k-means trains on, in (0, 1]
	PQBits                 int     // bits per code, 4 to 8
	PQDim                  int     // codes per row, at most the dataset's dimension (0: cuVS's choice)
}

// NNDescentParams are the NN-Descent parameters of an NNDescent build. A
// zero field is cuVS's default (DefaultIndexParams of package nndescent:
// graph degree 64, intermediate 96, 20 iterations, threshold 0.0001);
// cuVS raises GraphDegree to k. The metric is always IndexParams.Metric
// (cuVS would otherwise build with this struct's own and check the
// other).
type NNDescentParams struct {
	GraphDegree             int     // neighbours NN-Descent keeps per row (raised to k by cuVS)
	IntermediateGraphDegree int     // the degree it works with
	MaxIterations           int     // iterations at most
	TerminationThreshold    float32 // stop once an iteration changes less than this fraction
}

// DefaultIndexParams returns cuVS's defaults, read from the loaded library
// (cuvsAllNeighborsIndexParamsCreate/Destroy): brute force, L2Expanded, one
// cluster, overlap 1, no IVF-PQ or NN-Descent params, in v26.06 and v26.08.
func DefaultIndexParams() (IndexParams, error) {
	const op = "allneighbors.DefaultIndexParams"
	var p generated.CuvsAllNeighborsIndexParams_t
	if err := generated.CuvsAllNeighborsIndexParamsCreate(&p); err != nil {
		return IndexParams{}, kit.Wrap(op, err)
	}
	out := IndexParams{Algo: Algo(p.Ref().Algo), Metric: safe.Metric(p.Ref().Metric), NClusters: int(p.Ref().NClusters), OverlapFactor: int(p.Ref().OverlapFactor)}
	return out, kit.Wrap(op, generated.CuvsAllNeighborsIndexParamsDestroy(p))
}

var (
	bfMetrics  = []safe.Metric{safe.L2Expanded, safe.L2SqrtExpanded, safe.CosineExpanded, safe.L1, safe.L2Unexpanded, safe.L2SqrtUnexpanded, safe.InnerProduct, safe.Linf, safe.Canberra, safe.LpUnexpanded, safe.CorrelationExpanded, safe.JensenShannon}
	nndMetrics = []safe.Metric{safe.L2Expanded, safe.L2SqrtExpanded, safe.CosineExpanded, safe.InnerProduct}
	mrdMetrics = []safe.Metric{safe.L2Expanded, safe.L2SqrtExpanded, safe.CosineExpanded}
)

func has(ms []safe.Metric, m safe.Metric) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// validate checks p for rows × dim rows and k neighbours, as cuVS's
// check_params_validity and batch build do.
func (p *IndexParams) validate(op string, rows, dim, k int64, hostData, mrd bool) error {
	switch p.Algo {
	case BruteForce:
		if mrd && !has(mrdMetrics, p.Metric) {
			return kit.Argf(op, "params.Metric", "%s: mutual reachability needs L2Expanded, L2SqrtExpanded or CosineExpanded", p.Metric)
		}
		if !has(bfMetrics, p.Metric) {
			return kit.Argf(op, "params.Metric", "%s is not supported by the brute-force builder", p.Metric)
		}
		if k > rows {
			return kit.Argf(op, "indices", "k = %d exceeds the %d rows", k, rows)
		}
	case NNDescent:
		if mrd && !has(mrdMetrics, p.Metric) {
			return kit.Argf(op, "params.Metric", "%s: mutual reachability needs L2Expanded, L2SqrtExpanded or CosineExpanded", p.Metric)
		}
		if !has(nndMetrics, p.Metric) {
			return kit.Argf(op, "params.Metric", "%s is not supported by the NN-Descent builder (L2Expanded, L2SqrtExpanded, CosineExpanded, InnerProduct)", p.Metric)
		}
		if k > rows-1 {
			return kit.Argf(op, "indices", "k = %d, NN-Descent finds at most rows-1 = %d neighbours", k, rows-1)
		}
		if err := p.NNDescent.validate(op); err != nil {
			return err
		}
	case IVFPQ:
		if p.Metric != safe.L2Expanded {
			return kit.Argf(op, "params.Metric", "%s: the IVF-PQ builder takes L2Expanded only", p.Metric)
		}
		if mrd {
			return kit.Argf(op, "params.Algo", "cuVS cannot compute mutual-reachability distances with IVF-PQ")
		}
		if k > rows {
			return kit.Argf(op, "indices", "k = %d exceeds the %d rows", k, rows)
		}
		if err := p.IVFPQ.validate(op, rows, dim); err != nil {
			return err
		}
	default:
		return kit.Argf(op, "params.Algo", "%s is not a builder", p.Algo)
	}
	if p.NClusters < 1 {
		return kit.Argf(op, "params.NClusters", "%d, want at least 1", p.NClusters)
	}
	if int64(p.NClusters) > rows {
		return kit.Argf(op, "params.NClusters", "%d clusters for %d rows", p.NClusters, rows)
	}
	if p.NClusters > 1 {
		if !hostData {
			return kit.Argf(op, "dataset", "batching (params.NClusters %d) needs the dataset in host memory", p.NClusters)
		}
		if p.OverlapFactor < 1 || p.OverlapFactor >= p.NClusters {
			return kit.Argf(op, "params.OverlapFactor", "%d, want 1 to NClusters-1 = %d", p.OverlapFactor, p.NClusters-1)
		}
	} else if p.OverlapFactor < 1 {
		return kit.Argf(op, "params.OverlapFactor", "%d, want at least 1", p.OverlapFactor)
	}
	return nil
}

func (q *IVFPQParams) validate(op string, rows, dim int64) error {
	if q == nil {
		return nil
	}
	switch {
	case q.NLists < 0 || int64(q.NLists) > rows:
		return kit.Argf(op, "params.IVFPQ.NLists", "%d for %d rows", q.NLists, rows)
	case q.KMeansNIters < 0:
		return kit.Argf(op, "params.IVFPQ.KMeansNIters", "%d is negative", q.KMeansNIters)
	case math.IsNaN(q.KMeansTrainsetFraction) || q.KMeansTrainsetFraction < 0 || q.KMeansTrainsetFraction > 1:
		return kit.Argf(op, "params.IVFPQ.KMeansTrainsetFraction", "%v, want (0, 1] (0: cuVS's default)", q.KMeansTrainsetFraction)
	case q.PQBits != 0 && (q.PQBits < 4 || q.PQBits > 8):
		return kit.Argf(op, "params.IVFPQ.PQBits", "%d, want 4 to 8", q.PQBits)
	case q.PQDim < 0 || int64(q.PQDim) > dim:
		return kit.Argf(op, "params.IVFPQ.PQDim", "%d for dimension %d", q.PQDim, dim)
	}
	if q.NLists == 0 && rows < 1024 {
		return kit.Argf(op, "params.IVFPQ.NLists", "0 means cuVS's default of 1024 lists, more than the %d rows: set it", rows)
	}
	return nil
}

func (n *NNDescentParams) validate(op string) error {
	if n == nil {
		return nil
	}
	switch {
	case n.GraphDegree < 0:
		return kit.Argf(op, "params.NNDescent.GraphDegree", "%d is negative", n.GraphDegree)
	case n.IntermediateGraphDegree < 0:
		return kit.Argf(op, "params.NNDescent.IntermediateGraphDegree", "%d is negative", n.IntermediateGraphDegree)
	case n.MaxIterations < 0:
		return kit.Argf(op, "params.NNDescent.MaxIterations", "%d is negative", n.MaxIterations)
	case math.IsNaN(float64(n.TerminationThreshold)) || math.IsInf(float64(n.TerminationThreshold), 0) || n.TerminationThreshold < 0:
		return kit.Argf(op, "params.NNDescent.TerminationThreshold", "%v, want a finite value of 0 or more", n.TerminationThreshold)
	}
	return nil
}

// cParams is the C params struct of one build, made by the library, with
// the IVF-PQ or NN-Descent params it points to (freed with it: cuVS's
// cuvsAllNeighborsIndexParamsDestroy destroys them too).
type cParams struct {
	p generated.CuvsAllNeighborsIndexParams_t
}

func (c *cParams) release() {
	if c.p != 0 {
		_ = generated.CuvsAllNeighborsIndexParamsDestroy(c.p)
		c.p = 0
	}
}

// toC makes the C params for p. On error, what was made is freed.
func (p *IndexParams) toC(op string) (cParams, error) {
	var c cParams
	if err := generated.CuvsAllNeighborsIndexParamsCreate(&c.p); err != nil {
		return cParams{}, kit.Wrap(op, err)
	}
	c.p.Ref().Algo = generated.CuvsAllNeighborsAlgo(p.Algo)
	c.p.Ref().Metric = kit.CMetric(p.Metric)
	c.p.Ref().NClusters = uint64(p.NClusters)
	c.p.Ref().OverlapFactor = uint64(p.OverlapFactor)
	switch {
	case p.Algo == IVFPQ && p.IVFPQ != nil:
		if err := generated.CuvsIvfPqIndexParamsCreate(&c.p.Ref().IvfPqParams); err != nil {
			c.p.Ref().IvfPqParams = 0
			c.release()
			return cParams{}, kit.Wrap(op, err)
		}
		q, ip := p.IVFPQ, c.p.Ref().IvfPqParams
		ip.Ref().Metric = kit.CMetric(p.Metric)
		if q.NLists > 0 {
			ip.Ref().NLists = uint32(q.NLists)
		}
		if q.KMeansNIters > 0 {
			ip.Ref().KmeansNIters = uint32(q.KMeansNIters)
		}
		if q.KMeansTrainsetFraction > 0 {
			ip.Ref().KmeansTrainsetFraction = q.KMeansTrainsetFraction
		}
		if q.PQBits > 0 {
			ip.Ref().PqBits = uint32(q.PQBits)
		}
		if q.PQDim > 0 {
			ip.Ref().PqDim = uint32(q.PQDim)
		}
	case p.Algo == NNDescent && p.NNDescent != nil:
		if err := generated.CuvsNNDescentIndexParamsCreate(&c.p.Ref().NnDescentParams); err != nil {
			c.p.Ref().NnDescentParams = 0
			c.release()
			return cParams{}, kit.Wrap(op, err)
		}
		n, np := p.NNDescent, c.p.Ref().NnDescentParams
		np.Ref().Metric = kit.CMetric(p.Metric)
		if n.GraphDegree > 0 {
			np.Ref().GraphDegree = uint64(n.GraphDegree)
		}
		if n.IntermediateGraphDegree > 0 {
			np.Ref().IntermediateGraphDegree = uint64(n.IntermediateGraphDegree)
		}
		if n.MaxIterations > 0 {
			np.Ref().MaxIterations = uint64(n.MaxIterations)
		}
		if n.TerminationThreshold > 0 {
			np.Ref().TerminationThreshold = n.TerminationThreshold
		}
	}
	return c, nil
}
