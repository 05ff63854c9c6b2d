package multigpu

import (
	"runtime"
	"strconv"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// KMeansInit is how KMeansFit picks its first centroids
// (cuvsKMeansInitMethod).
type KMeansInit int32

const (
	// KMeansPlusPlus seeds by k-means++ (k-means|| with
	// OversamplingFactor > 0).
	KMeansPlusPlus = KMeansInit(generated.CuvsKMeansInitMethod_KMeansPlusPlus)
	// KMeansRandom picks Clusters rows at random.
	KMeansRandom = KMeansInit(generated.CuvsKMeansInitMethod_Random)
	// KMeansArray starts from the centroids tensor as given.
	KMeansArray = KMeansInit(generated.CuvsKMeansInitMethod_Array)
)

// String returns cuVS's name of the method, e.g. "KMeansPlusPlus".
func (m KMeansInit) String() string {
	switch m {
	case KMeansPlusPlus, KMeansRandom, KMeansArray:
		return generated.CuvsKMeansInitMethod(m).String()
	}
	return "KMeansInit(" + strconv.Itoa(int(m)) + ")"
}

// KMeansParams configures KMeansFit (26.08's cuvsKMeansParams, the fields
// the multi-GPU fit reads; its hierarchical mode is refused by cuVS and not
// offered). The names follow safe/kmeans.Params. The zero KMeansParams is
// refused: Clusters, MaxIter, NInit and BatchSamples must be at least 1 and
// Tol above 0; start from DefaultKMeansParams.
type KMeansParams struct {
	// Metric: L2Expanded (inertia in squared distances) or L2SqrtExpanded.
	Metric safe.Metric
	// Clusters is the number of centroids, at least 1 and at most the rows.
	Clusters int
	// Init selects the initial centroids.
	Init KMeansInit
	// MaxIter bounds Lloyd's iterations of one run.
	MaxIter int
	// Tol is the convergence threshold, above 0.
	Tol float64
	// NInit is the number of runs; the best is kept.
	NInit int
	// OversamplingFactor is k-means||'s oversampling (0: plain k-means++).
	OversamplingFactor float64
	// BatchSamples and BatchCentroids tile the nearest-centroid search.
	BatchSamples, BatchCentroids int
	// HostBatchRows is how many host rows each device takes at a time
	// (device_buffer_samples; 0: cuVS's choice).
	HostBatchRows int64
	// InitSize is the number of rows k-means++ seeds from (0: cuVS's
	// choice).
	InitSize int64
}

// KMeansResult is what KMeansFit reports besides the centroids.
type KMeansResult struct {
	Inertia    float64
	Iterations int
}

// DefaultKMeansParams returns cuVS's k-means defaults, read from the
// library (cuvsKMeansParamsCreate/Destroy of 26.08). On 26.06 it returns an
// error wrapping safe.ErrNotInRelease (there is no multi-GPU k-means).
func DefaultKMeansParams() (KMeansParams, error) {
	const op = "multigpu.DefaultKMeansParams"
	if err := kit.InRelease(op, "cuvsMultiGpuKMeansFit"); err != nil {
		return KMeansParams{}, err
	}
	var c generated.CuvsKMeansParams_t_v2608
	if err := generated.CuvsKMeansParamsCreate_v2608(&c); err != nil {
		return KMeansParams{}, kit.Wrap(op, err)
	}
	p := KMeansParams{
		Metric: safe.Metric(c.Ref().Metric), Clusters: int(c.Ref().NClusters), Init: KMeansInit(c.Ref().Init), MaxIter: int(c.Ref().MaxIter),
		Tol: c.Ref().Tol, NInit: int(c.Ref().NInit), OversamplingFactor: c.Ref().OversamplingFactor,
		BatchSamples: int(c.Ref().BatchSamples), BatchCentroids: int(c.Ref().BatchCentroids),
		HostBatchRows: c.Ref().DeviceBufferSamples, InitSize: c.Ref().InitSize,
	}
	return p, kit.Wrap(op, generated.CuvsKMeansParamsDestroy_v2608(c))
}

func (p *KMeansParams) validate(op string, rows int64) error {
	switch {
	case p.Metric != safe.L2Expanded && p.Metric != safe.L2SqrtExpanded:
		return kit.Argf(op, "params.Metric", "%s: k-means takes L2Expanded or L2SqrtExpanded", p.Metric)
	case p.Clusters < 1:
		return kit.Argf(op, "params.Clusters", "%d, want at least 1", p.Clusters)
	case int64(p.Clusters) > rows:
		return kit.Argf(op, "params.Clusters", "%d, X has only %d rows", p.Clusters, rows)
	case p.Init != KMeansPlusPlus && p.Init != KMeansRandom && p.Init != KMeansArray:
		return kit.Argf(op, "params.Init", "%d is not an init method", p.Init)
	case p.MaxIter < 1:
		return kit.Argf(op, "params.MaxIter", "%d, want at least 1", p.MaxIter)
	case !(p.Tol > 0):
		return kit.Argf(op, "params.Tol", "%g, want above 0", p.Tol)
	case p.NInit < 1:
		return kit.Argf(op, "params.NInit", "%d, want at least 1", p.NInit)
	case p.BatchSamples < 1:
		return kit.Argf(op, "params.BatchSamples", "%d, want at least 1", p.BatchSamples)
	case p.BatchCentroids < 0 || p.OversamplingFactor < 0 || p.HostBatchRows < 0 || p.InitSize < 0:
		return kit.Argf(op, "params", "negative batch, oversampling or size in %+v", *p)
	}
	return nil
}

var (
	floats         = []dlpack.DataType{dlpack.Float32, dlpack.Float64}
	kmXRule        = kit.Rule{Arg: "x", Memory: kit.HostMemory, DTypes: floats, Rank: 2, RowMajor: true}
	kmWeightsRule  = kit.Rule{Arg: "weights", Memory: kit.HostMemory, DTypes: floats, Rank: 1, RowMajor: true}
	kmCentroidRule = kit.Rule{Arg: "centroids", Memory: kit.HostMemory, DTypes: floats, Rank: 2, RowMajor: true}
)

// KMeansFit clusters x (rows × dim, float32 or float64, host memory: the
// C API splits it over res's devices itself) into p.Clusters centroids,
// written to centroids (Clusters × dim, x's dtype, host memory; with
// KMeansArray also the starting centroids), with optional per-row weights
// (rows, x's dtype, host memory; nil: all 1): cuVS 26.08's
// cuvsMultiGpuKMeansFit. It returns once the centroids are written. On
// 26.06 it returns an error wrapping safe.ErrNotInRelease, before any
// other work.
//
// C calls: cuvsMultiGpuKMeansFit (with a cuvsKMeansParams of 26.08 made in
// Go memory: the C function only reads it).
func KMeansFit(res *Resources, p *KMeansParams, x, weights dlpack.Tensor, centroids dlpack.TensorMut) (KMeansResult, error) {
	const op = "multigpu.KMeansFit"
	if err := kit.InRelease(op, "cuvsMultiGpuKMeansFit"); err != nil {
		return KMeansResult{}, err
	}
	if p == nil {
		return KMeansResult{}, kit.Argf(op, "params", "nil (start from DefaultKMeansParams)")
	}
	xv, err := take(op, &kmXRule, x)
	if err != nil {
		return KMeansResult{}, err
	}
	n, dim := xv.Dim(0), xv.Dim(1)
	if n < 1 || dim < 1 {
		return KMeansResult{}, kit.Argf(op, "x", "shape %v, want at least one row and one column", xv.Shape())
	}
	if err := p.validate(op, n); err != nil {
		return KMeansResult{}, err
	}
	var wv *dlpack.View
	if weights != nil {
		v, err := take(op, &kmWeightsRule, weights)
		if err != nil {
			return KMeansResult{}, err
		}
		if v.DType() != xv.DType() || v.Dim(0) != n {
			return KMeansResult{}, kit.Argf(op, "weights", "%s × %d, want %s × %d (x's dtype and rows)", v.DType(), v.Dim(0), xv.DType(), n)
		}
		wv = &v
	}
	if centroids == nil {
		return KMeansResult{}, kit.Argf(op, "centroids", "nil")
	}
	cv, err := centroids.ViewMut()
	if err != nil {
		return KMeansResult{}, kit.Argf(op, "centroids", "%w", err)
	}
	if err := kmCentroidRule.CheckMut(op, &cv); err != nil {
		return KMeansResult{}, err
	}
	if cv.DType() != xv.DType() || cv.Dim(0) != int64(p.Clusters) || cv.Dim(1) != dim {
		return KMeansResult{}, kit.Argf(op, "centroids", "%s %v, want %s [%d %d]", cv.DType(), cv.Shape(), xv.DType(), p.Clusters, dim)
	}
	c := generated.CuvsKMeansParams_v2608{
		Metric: kit.CMetric(p.Metric), NClusters: int32(p.Clusters), Init: generated.CuvsKMeansInitMethod(p.Init),
		MaxIter: int32(p.MaxIter), Tol: p.Tol, NInit: int32(p.NInit), OversamplingFactor: p.OversamplingFactor,
		BatchSamples: int32(p.BatchSamples), BatchCentroids: int32(p.BatchCentroids),
		DeviceBufferSamples: p.HostBatchRows, InitSize: p.InitSize,
	}
	var inertia float64
	var iters int32
	err = withCall(op, res, []*dlpack.View{&xv, wv}, []*dlpack.ViewMut{&cv}, func(h generated.CuvsResources_t, in [3]*generated.DLManagedTensor, out [2]*generated.DLManagedTensor) error {
		var pin runtime.Pinner // a multigpu.Resources has no params memory: k-means is no hot path
		defer pin.Unpin()
		return generated.CuvsMultiGpuKMeansFit(h, c.Pin(&pin), in[0], in[1], out[0], &inertia, &iters)
	})
	if err != nil {
		return KMeansResult{}, err
	}
	return KMeansResult{Inertia: inertia, Iterations: int(iters)}, nil
}
