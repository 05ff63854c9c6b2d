package kmeans

import (
	"math"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Float is the element type k-means computes in.
type Float interface{ float32 | float64 }

var floats = []dlpack.DataType{dlpack.Float32, dlpack.Float64}

// FitResult is what Fit reports besides the centroids.
type FitResult struct {
	// Inertia is the sum of each row's squared Euclidean distance to its
	// nearest centroid, whatever the metric (cuVS's cluster_cost, which
	// both releases' fits call, the balanced one too), each times its
	// weight rescaled to sum to the rows: for an unweighted fit, what
	// ClusterCost gives for the same data and centroids. Predict's
	// inertia is in the metric's distances instead.
	Inertia float64
	// Iterations is the number of iterations of the kept run (balanced
	// k-means: BalancedIters).
	Iterations int
}

// arg is one argument's view (set: given).
type arg struct {
	v   dlpack.View
	set bool
}

func view(op, name string, t dlpack.Tensor) (arg, error) {
	if t == nil {
		return arg{}, kit.Argf(op, name, "nil")
	}
	v, err := t.View()
	if err != nil {
		return arg{}, kit.Argf(op, name, "%w", err)
	}
	return arg{v: v, set: true}, nil
}

// shapes checks x (rows × dim), the optional weights (rows) and the
// centroids (clusters × dim) against each other and the rules of the call.
func shapes(op string, res *safe.Resources, p *Params, x, w *arg, cent *dlpack.View, xMem kit.Memory, clustersFromParams bool) error {
	xr := kit.Rule{Arg: "x", Memory: xMem, DTypes: floats, Rank: 2, RowMajor: true}
	if p.Balanced {
		xr.DTypes = []dlpack.DataType{dlpack.Float32}
	}
	if err := xr.CheckOn(op, res, &x.v); err != nil {
		if p.Balanced && x.v.Err() == nil && x.v.DType() == dlpack.Float64 {
			return kit.Argf(op, "x", "float64: balanced k-means takes float32 only")
		}
		return err
	}
	dt := x.v.DType()
	rows, dim := x.v.Dim(0), x.v.Dim(1)
	if rows < 1 || dim < 1 {
		return kit.Argf(op, "x", "shape %v, want at least one row and one column", x.v.Shape())
	}
	if rows > math.MaxInt32 || dim > math.MaxInt32 {
		return kit.Argf(op, "x", "shape %v: cuVS's predict and cluster cost index with 32-bit ints", x.v.Shape())
	}
	if w != nil && w.set {
		if p.Balanced {
			return kit.Argf(op, "weights", "balanced k-means takes no sample weights")
		}
		wm := kit.DeviceMemory
		if x.v.Device().Type == dlpack.CPU {
			wm = kit.HostMemory // host data: cuVS wants host weights
		}
		wr := kit.Rule{Arg: "weights", Memory: wm, DTypes: []dlpack.DataType{dt}, Rank: 1, RowMajor: true}
		if err := wr.CheckOn(op, res, &w.v); err != nil {
			return err
		}
		if w.v.Dim(0) != rows {
			return kit.Argf(op, "weights", "%d weights for %d rows", w.v.Dim(0), rows)
		}
	}
	cr := kit.Rule{Arg: "centroids", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dt}, Rank: 2, RowMajor: true}
	if err := cr.CheckOn(op, res, cent); err != nil {
		return err
	}
	k := cent.Dim(0)
	switch {
	case cent.Dim(1) != dim:
		return kit.Argf(op, "centroids", "%d columns, x has %d", cent.Dim(1), dim)
	case clustersFromParams && k != int64(p.Clusters):
		return kit.Argf(op, "centroids", "%d rows, params.Clusters is %d", k, p.Clusters)
	case k < 1:
		return kit.Argf(op, "centroids", "no rows")
	}
	return nil
}

// Fit clusters the rows of x (rows × dim, float32 or float64, row-major)
// into centroids (Clusters × dim, device memory, x's dtype), which it
// overwrites; with Init Array it starts from the centroids given. x may be
// host or device memory (balanced k-means: device only, float32);
// weights, if not nil, hold one weight per row, in host memory for host x
// and device memory for device x (cuVS scales them to sum to rows), and are
// refused by balanced k-means. Clusters may not exceed the rows (cuVS's
// seeding samples rows; what it does with too few was not tried on a GPU).
// The centroids are ready once res's stream is synchronized (res.Sync); the
// inertia and iteration count come back at once. cuVS draws its random
// numbers from a fixed seed: the same call on the same data gives the same
// centroids (balanced k-means excepted: see Params).
//
// Every shape, dtype, memory and params mistake is an *safe.ArgError
// naming the argument, before the C call.
//
// Nil p means DefaultParams (8 clusters).
//
// C calls: cuvsKMeansParamsCreate/Destroy and cuvsKMeansFit of the loaded
// release (cuvsKMeansParamsCreate_v2, cuvsKMeansFit_v2,
// cuvsKMeansParamsDestroy_v2 on 26.06; the unversioned ones on a 26.06
// library without them, and on 26.08).
func Fit(res *safe.Resources, p *Params, x, weights dlpack.Tensor, centroids dlpack.TensorMut) (FitResult, error) {
	const op = "kmeans.Fit"
	p, err := kit.Or(p, DefaultParams)
	if err != nil {
		return FitResult{}, err
	}
	if err := p.validate(op, p.Balanced); err != nil {
		return FitResult{}, err
	}
	xa, err := view(op, "x", x)
	if err != nil {
		return FitResult{}, err
	}
	var wa arg
	if weights != nil {
		if wa, err = view(op, "weights", weights); err != nil {
			return FitResult{}, err
		}
	}
	if centroids == nil {
		return FitResult{}, kit.Argf(op, "centroids", "nil")
	}
	cm, err := centroids.ViewMut()
	if err != nil {
		return FitResult{}, kit.Argf(op, "centroids", "%w", err)
	}
	cv, err := cm.View()
	if err != nil {
		return FitResult{}, kit.Argf(op, "centroids", "%w", err)
	}
	mem := kit.AnyMemory
	if p.Balanced {
		mem = kit.DeviceMemory
	}
	if err := shapes(op, res, p, &xa, &wa, &cv, mem, true); err != nil {
		return FitResult{}, err
	}
	if int64(p.Clusters) > xa.v.Dim(0) {
		return FitResult{}, kit.Argf(op, "params.Clusters", "%d clusters for %d rows", p.Clusters, xa.v.Dim(0))
	}
	var out FitResult
	err = withC(op, p, func(c *cParams) error {
		call := dlpack.Begin(op)
		defer call.End()
		tx, err := call.In(&xa.v)
		if err != nil {
			return kit.Argf(op, "x", "%w", err)
		}
		var tw *generated.DLManagedTensor
		if wa.set {
			if tw, err = call.In(&wa.v); err != nil {
				return kit.Argf(op, "weights", "%w", err)
			}
		}
		tc, err := call.Out(&cm)
		if err != nil {
			return kit.Argf(op, "centroids", "%w", err)
		}
		h, err := kit.Lock(res, op)
		if err != nil {
			return err
		}
		defer kit.Unlock(res)
		var n int32
		if err := c.fit(h, tx, tw, tc, &out.Inertia, &n); err != nil {
			return kit.Wrap(op, err)
		}
		out.Iterations = int(n)
		return nil
	})
	if err != nil {
		return FitResult{}, err
	}
	return out, nil
}

// Predict writes each row's nearest centroid (0..Clusters-1) into labels
// (int32, one per row of x, device memory) and returns the inertia of that
// assignment: the sum of the metric's distances (squared for L2Expanded,
// not squared for L2SqrtExpanded), weighted by weights if not nil (as
// given, or scaled to sum to the rows when normalizeWeights). The
// distances are cuVS's expanded ones, on some GPUs from a TF32 product
// (below): the inertia may exceed the exact sum and a label may be nearest
// only within that rounding. x, weights and centroids are device memory of
// one dtype (float32 or float64; balanced k-means: float32, no weights, and
// cuVS reports inertia 0). The labels are ready once res's stream is
// synchronized (res.Sync). cuVS indexes with 32-bit ints: rows and columns
// up to 2^31-1, and rows × columns too for the balanced predict.
//
// The distances are computed as ‖x‖² + ‖c‖² − 2x·c, clamped at 0. On some
// GPUs (compute capability 9.x below 4096 rows and 4096 centroids, 10 and
// later always) x·c comes from a TF32 matrix product (10-bit mantissas), so
// for float32 data far from the origin each distance may be off by up to
// about 2⁻⁸ × Σ|x_j c_j|: on an H200, 240 rows in clusters 20 apart gave a
// predict inertia of 77.18 where the exact sum (Fit's, and ClusterCost's)
// was 57.74, and a label may pick a centroid that is nearest only within
// that error. Fit's inertia and ClusterCost use a kernel as exact as
// float32; float64 is exact. Center your data, or use ClusterCost, where
// the inertia matters.
//
// p must be the params the centroids were fitted with: its Metric and
// Balanced decide the assignment, and cuVS cannot tell them from the
// centroids, so another metric is not refused (Model.Predict keeps the
// fit's); its Clusters must be the centroids' rows (balanced k-means too,
// as its Fit wants). Nil p means DefaultParams with Clusters the
// centroids' rows.
//
// C calls: cuvsKMeansParamsCreate/Destroy and cuvsKMeansPredict of the
// loaded release (the _v2 ones on 26.06, as Fit).
func Predict(res *safe.Resources, p *Params, x, weights, centroids dlpack.Tensor, labels dlpack.TensorMut, normalizeWeights bool) (float64, error) {
	const op = "kmeans.Predict"
	ca, err := view(op, "centroids", centroids)
	if err != nil {
		return 0, err
	}
	if p == nil {
		d, err := DefaultParams()
		if err != nil {
			return 0, err
		}
		if ca.v.NDim() == 2 {
			d.Clusters = int(ca.v.Dim(0))
		}
		p = &d
	}
	if err := p.validate(op, p.Balanced); err != nil {
		return 0, err
	}
	xa, err := view(op, "x", x)
	if err != nil {
		return 0, err
	}
	var wa arg
	if weights != nil {
		if wa, err = view(op, "weights", weights); err != nil {
			return 0, err
		}
	}
	if labels == nil {
		return 0, kit.Argf(op, "labels", "nil")
	}
	lm, err := labels.ViewMut()
	if err != nil {
		return 0, kit.Argf(op, "labels", "%w", err)
	}
	if err := shapes(op, res, p, &xa, &wa, &ca.v, kit.DeviceMemory, true); err != nil {
		return 0, err
	}
	if p.Balanced && xa.v.Dim(0)*xa.v.Dim(1) > math.MaxInt32 {
		return 0, kit.Argf(op, "x", "shape %v: balanced predict indexes the data with 32-bit ints", xa.v.Shape())
	}
	lr := kit.Rule{Arg: "labels", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Int32}, Rank: 1, RowMajor: true}
	if err := lr.CheckMut(op, &lm); err != nil {
		return 0, err
	}
	if err := kit.CheckDevice(res, op, "labels", lm.Device()); err != nil {
		return 0, err
	}
	if lm.Dim(0) != xa.v.Dim(0) {
		return 0, kit.Argf(op, "labels", "%d labels for %d rows", lm.Dim(0), xa.v.Dim(0))
	}
	var inertia float64
	err = withC(op, p, func(c *cParams) error {
		call := dlpack.Begin(op)
		defer call.End()
		tx, err := call.In(&xa.v)
		if err != nil {
			return kit.Argf(op, "x", "%w", err)
		}
		var tw *generated.DLManagedTensor
		if wa.set {
			if tw, err = call.In(&wa.v); err != nil {
				return kit.Argf(op, "weights", "%w", err)
			}
		}
		tc, err := call.In(&ca.v)
		if err != nil {
			return kit.Argf(op, "centroids", "%w", err)
		}
		tl, err := call.Out(&lm)
		if err != nil {
			return kit.Argf(op, "labels", "%w", err)
		}
		h, err := kit.Lock(res, op)
		if err != nil {
			return err
		}
		defer kit.Unlock(res)
		return kit.Wrap(op, c.predict(h, tx, tw, tc, tl, normalizeWeights, &inertia))
	})
	if err != nil {
		return 0, err
	}
	return inertia, nil
}

// ClusterCost returns the sum over the rows of x of the squared Euclidean
// distance to the nearest of centroids, unweighted, whatever metric a fit
// used: cuvsKMeansClusterCost calls cuVS's cluster_cost with no weights
// and L2Expanded (c/src/cluster/kmeans.cpp, cpp/src/cluster/kmeans.cuh, in
// both releases). It is FitResult.Inertia for an unweighted fit of x
// (regular or balanced, any metric); a weighted fit's Inertia weighs each
// squared distance with the weights rescaled to sum to the rows, which
// this C function does not take. x and centroids are device memory of one
// dtype (float32 or float64), row-major, with the same number of columns;
// cuVS indexes them with 32-bit ints (rows and columns up to 2^31-1).
//
// C calls: cuvsKMeansClusterCost.
func ClusterCost(res *safe.Resources, x, centroids dlpack.Tensor) (float64, error) {
	const op = "kmeans.ClusterCost"
	xa, err := view(op, "x", x)
	if err != nil {
		return 0, err
	}
	ca, err := view(op, "centroids", centroids)
	if err != nil {
		return 0, err
	}
	p := Params{Metric: safe.L2Expanded}
	if err := shapes(op, res, &p, &xa, nil, &ca.v, kit.DeviceMemory, false); err != nil {
		return 0, err
	}
	var cost float64
	err = kit.CallWith(op, res, []*dlpack.View{&xa.v, &ca.v}, func(h generated.CuvsResources_t, ts []*generated.DLManagedTensor) error {
		return generated.CuvsKMeansClusterCost(h, ts[0], ts[1], &cost)
	})
	if err != nil {
		return 0, err
	}
	return cost, nil
}
