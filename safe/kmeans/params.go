package kmeans

import (
	"errors"
	"math"
	"strconv"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/release"
)

// InitMethod is how Fit chooses the initial centroids (cuvsKMeansInitMethod).
type InitMethod int32

// Initialization methods.
const (
	// KMeansPlusPlus seeds by k-means++ (cuVS runs its scalable variant,
	// k-means||, when OversamplingFactor > 0).
	KMeansPlusPlus = InitMethod(generated.CuvsKMeansInitMethod_KMeansPlusPlus)
	// Random picks Clusters rows at random.
	Random = InitMethod(generated.CuvsKMeansInitMethod_Random)
	// Array starts from the centroids tensor as given (one run, whatever
	// NInit says).
	Array = InitMethod(generated.CuvsKMeansInitMethod_Array)
)

// String returns cuVS's name of the method, e.g. "KMeansPlusPlus".
func (m InitMethod) String() string {
	switch m {
	case KMeansPlusPlus, Random, Array:
		return generated.CuvsKMeansInitMethod(m).String()
	}
	return "InitMethod(" + strconv.Itoa(int(m)) + ")"
}

// Params configures Fit and Predict (cuvsKMeansParams). Start from
// DefaultParams, which reads cuVS's defaults from the loaded library. One
// Params serves every release: each call converts it into the C struct the
// loaded release has (26.06's cuvsKMeansParams_v2, or its older
// cuvsKMeansParams when the library lacks the _v2 functions; 26.08's
// cuvsKMeansParams), so the layouts can never be mixed up.
//
// The zero Params is refused: Clusters, MaxIter, NInit and BatchSamples
// must be at least 1 and Tol above 0.
//
// Balanced k-means ignores Clusters in Fit (it uses the centroids' rows),
// Init, MaxIter, Tol, NInit and OversamplingFactor; it refuses host data,
// weights and float64; its Fit reports Iterations = BalancedIters and its
// Predict an inertia of 0. It re-balances as it trains
// (cpp/src/cluster/detail/kmeans_balanced.cuh) by moving the centroids of
// small clusters next to large ones: 26.06 those of clusters under 0.25 ×
// the mean size (0.2 in its last pass), 26.08 while a cluster is under
// 0.333 × the mean or another over 3 × (tolerances the C API does not
// expose); the last step is a plain k-means one, so these are targets, not
// bounds. The offsets it draws rows with come from a counter cuVS keeps
// across calls: two balanced fits of the same data may differ.
type Params struct {
	// Metric: L2Expanded or L2SqrtExpanded (Predict's inertia in its
	// distances, Fit's in squared distances either way); balanced k-means
	// also takes CosineExpanded and InnerProduct.
	Metric safe.Metric
	// Clusters is the number of centroids, at least 1 and at most the rows.
	Clusters int
	// Init selects the initial centroids (regular k-means only).
	Init InitMethod
	// MaxIter bounds Lloyd's iterations of one run.
	MaxIter int
	// Tol is the convergence threshold, above 0.
	Tol float64
	// NInit is the number of runs from different seeds; the best (lowest
	// inertia) is kept. Init Array runs once whatever NInit says.
	NInit int
	// OversamplingFactor is k-means||'s oversampling (0: plain k-means++).
	OversamplingFactor float64
	// BatchSamples and BatchCentroids tile the nearest-centroid search
	// (BatchCentroids 0: all centroids at once).
	BatchSamples, BatchCentroids int
	// Balanced selects cuVS's balanced (hierarchical) k-means: float32 data
	// in device memory, no sample weights, BalancedIters iterations; it
	// ignores Init, MaxIter, Tol, NInit and OversamplingFactor.
	Balanced bool
	// BalancedIters is balanced k-means' iteration count (at least 1 when
	// Balanced).
	BalancedIters int
	// HostBatchRows is how many rows of host data Fit moves to the GPU at a
	// time (0: all); 26.06 calls it streaming_batch_size, 26.08
	// device_buffer_samples. Ignored for device data.
	HostBatchRows int64
	// InitSize is the number of rows k-means++ seeds from (0: cuVS's
	// choice: min(3 × Clusters, rows) for host data, with a warning in
	// cuVS's log, all rows for device data).
	InitSize int64
}

var defaults = kit.Defaults[Params]{Read: readDefaults}

// DefaultParams returns cuVS's defaults, read from the loaded library
// (cuvsKMeansParamsCreate/Destroy of the loaded release, _v2 on 26.06):
// L2Expanded, 8 clusters, k-means++, 300 iterations, tol 1e-4, one run,
// oversampling 2, batches of 32768 samples, balanced off with 20
// iterations, in v26.06 and v26.08.
func DefaultParams() (Params, error) {
	p, err := defaults.Get()
	if err != nil {
		return Params{}, err
	}
	return *p, nil
}

func readDefaults() (Params, error) {
	const op = "kmeans.DefaultParams"
	c, err := createC(op)
	if err != nil {
		return Params{}, err
	}
	p := c.read()
	return p, kit.Wrap(op, c.destroy())
}

func (p *Params) validate(op string, balanced bool) error {
	if p == nil {
		return kit.Argf(op, "params", "nil")
	}
	switch {
	case p.Metric == safe.L2Expanded || p.Metric == safe.L2SqrtExpanded:
	case balanced && (p.Metric == safe.CosineExpanded || p.Metric == safe.InnerProduct):
	default:
		if balanced {
			return kit.Argf(op, "params.Metric", "%s: balanced k-means takes L2Expanded, L2SqrtExpanded, CosineExpanded or InnerProduct", p.Metric)
		}
		return kit.Argf(op, "params.Metric", "%s: k-means takes L2Expanded or L2SqrtExpanded", p.Metric)
	}
	switch {
	case p.Clusters < 1 || p.Clusters > math.MaxInt32:
		return kit.Argf(op, "params.Clusters", "%d, want 1..2^31-1", p.Clusters)
	case p.Balanced && (p.BalancedIters < 1 || p.BalancedIters > math.MaxInt32):
		return kit.Argf(op, "params.BalancedIters", "%d, want at least 1", p.BalancedIters)
	case p.HostBatchRows < 0:
		return kit.Argf(op, "params.HostBatchRows", "%d, want 0 (all) or more", p.HostBatchRows)
	case p.InitSize < 0:
		return kit.Argf(op, "params.InitSize", "%d, want 0 (cuVS's choice) or more", p.InitSize)
	}
	if p.Balanced {
		return nil
	}
	switch {
	case p.Init != KMeansPlusPlus && p.Init != Random && p.Init != Array:
		return kit.Argf(op, "params.Init", "%s is not an InitMethod", p.Init)
	case p.MaxIter < 1 || p.MaxIter > math.MaxInt32:
		return kit.Argf(op, "params.MaxIter", "%d, want at least 1", p.MaxIter)
	case !(p.Tol > 0) || math.IsInf(p.Tol, 0):
		return kit.Argf(op, "params.Tol", "%v, want a finite tolerance above 0", p.Tol)
	case p.NInit < 1 || p.NInit > math.MaxInt32:
		return kit.Argf(op, "params.NInit", "%d, want at least 1", p.NInit)
	case !(p.OversamplingFactor >= 0) || math.IsInf(p.OversamplingFactor, 0):
		return kit.Argf(op, "params.OversamplingFactor", "%v, want a finite factor of at least 0", p.OversamplingFactor)
	case p.BatchSamples < 1 || p.BatchSamples > math.MaxInt32:
		return kit.Argf(op, "params.BatchSamples", "%d, want at least 1", p.BatchSamples)
	case p.BatchCentroids < 0 || p.BatchCentroids > math.MaxInt32:
		return kit.Argf(op, "params.BatchCentroids", "%d, want 0 (all) or more", p.BatchCentroids)
	}
	return nil
}

// cParams is the C struct of the loaded release: exactly one member is set.
type cParams struct {
	v1 generated.CuvsKMeansParams_t       // 26.06, without the _v2 functions
	v2 generated.CuvsKMeansParams_v2_t    // 26.06
	v8 generated.CuvsKMeansParams_t_v2608 // 26.08
}

// createC calls the loaded release's params constructor.
func createC(op string) (*cParams, error) {
	c := &cParams{}
	if release.Has(release.KMeansParams2608) {
		return c, kit.Wrap(op, generated.CuvsKMeansParamsCreate_v2608(&c.v8))
	}
	err := generated.CuvsKMeansParamsCreate_v2(&c.v2)
	if errors.Is(err, generated.ErrMissingSymbol) {
		err = generated.CuvsKMeansParamsCreate(&c.v1)
	}
	return c, kit.Wrap(op, err)
}

func (c *cParams) destroy() error {
	switch {
	case c.v8 != 0:
		return generated.CuvsKMeansParamsDestroy_v2608(c.v8)
	case c.v2 != 0:
		return generated.CuvsKMeansParamsDestroy_v2(c.v2)
	case c.v1 != 0:
		return generated.CuvsKMeansParamsDestroy(c.v1)
	}
	return nil
}

// fields points at the members the three layouts share.
type fields struct {
	metric                               *generated.CuvsDistanceType
	nClusters, maxIter, nInit            *int32
	init                                 *generated.CuvsKMeansInitMethod
	tol, oversampling                    *float64
	batchSamples, batchCentroids, hIters *int32
	hierarchical                         *bool
	buffer, initSize                     *int64
}

func (c *cParams) fields() fields {
	if p := c.v8; p != 0 {
		return fields{&p.Ref().Metric, &p.Ref().NClusters, &p.Ref().MaxIter, &p.Ref().NInit, &p.Ref().Init, &p.Ref().Tol, &p.Ref().OversamplingFactor,
			&p.Ref().BatchSamples, &p.Ref().BatchCentroids, &p.Ref().HierarchicalNIters, &p.Ref().Hierarchical, &p.Ref().DeviceBufferSamples, &p.Ref().InitSize}
	}
	if p := c.v2; p != 0 {
		return fields{&p.Ref().Metric, &p.Ref().NClusters, &p.Ref().MaxIter, &p.Ref().NInit, &p.Ref().Init, &p.Ref().Tol, &p.Ref().OversamplingFactor,
			&p.Ref().BatchSamples, &p.Ref().BatchCentroids, &p.Ref().HierarchicalNIters, &p.Ref().Hierarchical, &p.Ref().StreamingBatchSize, &p.Ref().InitSize}
	}
	p := c.v1
	return fields{&p.Ref().Metric, &p.Ref().NClusters, &p.Ref().MaxIter, &p.Ref().NInit, &p.Ref().Init, &p.Ref().Tol, &p.Ref().OversamplingFactor,
		&p.Ref().BatchSamples, &p.Ref().BatchCentroids, &p.Ref().HierarchicalNIters, &p.Ref().Hierarchical, &p.Ref().StreamingBatchSize, &p.Ref().InitSize}
}

func (c *cParams) read() Params {
	f := c.fields()
	return Params{
		Metric: safe.Metric(*f.metric), Clusters: int(*f.nClusters), Init: InitMethod(*f.init),
		MaxIter: int(*f.maxIter), Tol: *f.tol, NInit: int(*f.nInit), OversamplingFactor: *f.oversampling,
		BatchSamples: int(*f.batchSamples), BatchCentroids: int(*f.batchCentroids),
		Balanced: *f.hierarchical, BalancedIters: int(*f.hIters), HostBatchRows: *f.buffer, InitSize: *f.initSize,
	}
}

func (c *cParams) write(p *Params) {
	f := c.fields()
	*f.metric = kit.CMetric(p.Metric)
	*f.nClusters = int32(p.Clusters)
	*f.init = generated.CuvsKMeansInitMethod(p.Init)
	*f.maxIter = int32(p.MaxIter)
	*f.tol = p.Tol
	*f.nInit = int32(p.NInit)
	*f.oversampling = p.OversamplingFactor
	*f.batchSamples = int32(p.BatchSamples)
	*f.batchCentroids = int32(p.BatchCentroids)
	*f.hierarchical = p.Balanced
	*f.hIters = int32(p.BalancedIters)
	*f.buffer = p.HostBatchRows
	*f.initSize = p.InitSize
	if c.v1 != 0 {
		c.v1.Ref().InertiaCheck = false // cuVS never reads it
	}
}

// withC runs f with p converted into the loaded release's C struct.
func withC(op string, p *Params, f func(c *cParams) error) error {
	c, err := createC(op)
	if err != nil {
		return err
	}
	c.write(p)
	err = f(c)
	if derr := kit.Wrap(op, c.destroy()); err == nil {
		err = derr
	}
	return err
}

func (c *cParams) fit(h generated.CuvsResources_t, x, w, cent *generated.DLManagedTensor, inertia *float64, n *int32) error {
	switch {
	case c.v8 != 0:
		return generated.CuvsKMeansFit_v2608(h, c.v8, x, w, cent, inertia, n)
	case c.v2 != 0:
		return generated.CuvsKMeansFit_v2(h, c.v2, x, w, cent, inertia, n)
	}
	return generated.CuvsKMeansFit(h, c.v1, x, w, cent, inertia, n)
}

func (c *cParams) predict(h generated.CuvsResources_t, x, w, cent, labels *generated.DLManagedTensor, normalize bool, inertia *float64) error {
	switch {
	case c.v8 != 0:
		return generated.CuvsKMeansPredict_v2608(h, c.v8, x, w, cent, labels, normalize, inertia)
	case c.v2 != 0:
		return generated.CuvsKMeansPredict_v2(h, c.v2, x, w, cent, labels, normalize, inertia)
	}
	return generated.CuvsKMeansPredict(h, c.v1, x, w, cent, labels, normalize, inertia)
}
