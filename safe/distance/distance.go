package distance

import (
	"errors"
	"math"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// metrics are the metrics cuvsPairwiseDistance computes, for every input
// dtype (cpp/src/distance/distance-inl.cuh dispatches these 16 and throws on
// any other).
var metrics = []safe.Metric{
	safe.L2Expanded, safe.L2SqrtExpanded, safe.L2Unexpanded, safe.L2SqrtUnexpanded,
	safe.InnerProduct, safe.CosineExpanded, safe.CorrelationExpanded, safe.L1, safe.Linf,
	safe.LpUnexpanded, safe.Canberra, safe.HammingUnexpanded, safe.RusselRaoExpanded,
	safe.HellingerExpanded, safe.JensenShannon, safe.KLDivergence,
}

// Metrics returns the metrics Pairwise accepts, for every input dtype:
// L2Expanded, L2SqrtExpanded, L2Unexpanded, L2SqrtUnexpanded, InnerProduct,
// CosineExpanded, CorrelationExpanded, L1, Linf, LpUnexpanded, Canberra,
// HammingUnexpanded, RusselRaoExpanded, HellingerExpanded, JensenShannon
// and KLDivergence. The others (JaccardExpanded, Haversine, BrayCurtis,
// DiceExpanded, BitwiseHamming) are refused: cuVS's dense pairwise distance
// has no kernel for them.
//
// The metrics are cuVS's definitions, which are not always the textbook's:
//
//   - L2Expanded and L2Unexpanded are squared Euclidean distances (the
//     expanded form computes ‖x‖² + ‖y‖² − 2x·y and so loses precision for
//     nearby rows); L2SqrtExpanded and L2SqrtUnexpanded their roots;
//   - InnerProduct is x·y itself (larger is nearer), CosineExpanded 1 − cos,
//     CorrelationExpanded 1 − Pearson's r;
//   - L1, Linf, Canberra (Σ|x−y|/(|x|+|y|), 0/0 terms skipped), LpUnexpanded
//     ((Σ|x−y|^p)^(1/p), p = metricArg);
//   - HammingUnexpanded is the fraction of differing coordinates,
//     RusselRaoExpanded (k − x·y)/k;
//   - HellingerExpanded is sqrt(1 − Σ sqrt(x·y)), JensenShannon sqrt(½ Σ (x
//     log(x/m) + y log(y/m))) with m = (x+y)/2, and KLDivergence ½ Σ x
//     log(x/y) (note the ½; a zero x contributes 0, a zero y is read as
//     log y = 0).
func Metrics() []safe.Metric { return append([]safe.Metric(nil), metrics...) }

// Supported reports whether Pairwise computes metric m.
func Supported(m safe.Metric) bool {
	for _, s := range metrics {
		if s == m {
			return true
		}
	}
	return false
}

var inDTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16, dlpack.Float64}

// distDType returns the distances' dtype for inputs of dtype in: float32 for
// float16 and float32 inputs, float64 for float64.
func distDType(in dlpack.DataType) dlpack.DataType {
	if in == dlpack.Float64 {
		return dlpack.Float64
	}
	return dlpack.Float32
}

func checkMetric(op string, m safe.Metric, arg float32) error {
	if !Supported(m) {
		return kit.Argf(op, "metric", "%s is not computed by cuvsPairwiseDistance (see Metrics)", m)
	}
	if m == safe.LpUnexpanded && !(arg > 0 && !math.IsInf(float64(arg), 0)) {
		return kit.Argf(op, "metricArg", "p = %v for LpUnexpanded, want a finite p > 0", arg)
	}
	return nil
}

// Pairwise computes the distance of every row of x to every row of y into
// dist: dist[i][j] = metric(x_i, y_j), for x of n rows and y of m rows with
// the same number of columns, dist n × m. All three in device memory (CUDA,
// pinned or managed), rank 2, contiguous, and in the same layout: all
// row-major or all column-major. x and y share a dtype (float32, float16 or
// float64); dist is float32 for float32 and float16 inputs, float64 for
// float64. metricArg is p for LpUnexpanded (a finite p > 0) and read by no
// other metric. The distances are ready once res's stream is synchronized
// (res.Sync).
//
// A tensor of one row or one column is both row- and column-major, and
// reaches C as row-major (cuVS tests C-contiguity first): a column-major
// call needs every tensor to have at least two rows and two columns. cuVS
// casts the extents to 32-bit ints: Pairwise refuses larger ones (products
// of extents beyond 2^31 are not checked here and were not tried on a GPU).
//
// HellingerExpanded writes square roots into x and y during the call, and
// KLDivergence logarithms into y (cuVS restores them afterwards, up to
// rounding; KLDivergence turns an element equal to 1 into 0): for those
// metrics the tensors written must be writable (dlpack.TensorMut) and are
// held exclusively for the call, so no other call can read them meanwhile,
// and Pairwise waits for res's stream before returning (cuVS queues the
// restoring there), so the distances are then ready too.
//
// Every shape, dtype, layout and memory mistake is an *safe.ArgError naming
// the argument, before the C call.
//
// C calls: cuvsPairwiseDistance; for HellingerExpanded and KLDivergence
// also cuvsStreamSync.
func Pairwise(res *safe.Resources, x, y dlpack.Tensor, dist dlpack.TensorMut, metric safe.Metric, metricArg float32) error {
	const op = "distance.Pairwise"
	if err := checkMetric(op, metric, metricArg); err != nil {
		return err
	}
	if x == nil {
		return kit.Argf(op, "x", "nil")
	}
	if y == nil {
		return kit.Argf(op, "y", "nil")
	}
	if dist == nil {
		return kit.Argf(op, "dist", "nil")
	}
	wx, wy := kit.RewritesInputs(metric)
	xv, xm, err := input(op, "x", x, wx)
	if err != nil {
		return err
	}
	yv, ym, err := input(op, "y", y, wy)
	if err != nil {
		return err
	}
	dv, err := dist.ViewMut()
	if err != nil {
		return kit.Argf(op, "dist", "%w", err)
	}
	inRule := kit.Rule{Memory: kit.DeviceMemory, DTypes: inDTypes, Rank: 2, RowMajor: true, ColMajor: true}
	inRule.Arg = "x"
	if err := inRule.CheckOn(op, res, &xv); err != nil {
		return err
	}
	inRule.Arg = "y"
	inRule.DTypes = []dlpack.DataType{xv.DType()}
	if err := inRule.CheckOn(op, res, &yv); err != nil {
		return err
	}
	outRule := kit.Rule{Arg: "dist", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{distDType(xv.DType())}, Rank: 2, RowMajor: true, ColMajor: true}
	if err := outRule.CheckMut(op, &dv); err != nil {
		return err
	}
	if err := kit.CheckDevice(res, op, "dist", dv.Device()); err != nil {
		return err
	}
	n, m, k := xv.Dim(0), yv.Dim(0), xv.Dim(1)
	switch {
	case yv.Dim(1) != k:
		return kit.Argf(op, "y", "%d columns, x has %d", yv.Dim(1), k)
	case dv.Dim(0) != n || dv.Dim(1) != m:
		return kit.Argf(op, "dist", "shape %v, want [%d %d] (rows of x × rows of y)", dv.Shape(), n, m)
	case n < 1 || m < 1 || k < 1:
		return kit.Argf(op, "x", "shapes %v and %v: every extent must be at least 1", xv.Shape(), yv.Shape())
	case n > math.MaxInt32 || m > math.MaxInt32 || k > math.MaxInt32:
		return kit.Argf(op, "x", "shapes %v and %v: cuVS indexes with 32-bit ints", xv.Shape(), yv.Shape())
	}
	// One layout for all three. A tensor that is both row- and column-major
	// (one row or one column) reaches C as row-major, so column-major calls
	// need every tensor to be column-major only.
	xl, yl, dl := xv.Layout(), yv.Layout(), dv.Layout()
	if !(xl.IsRowMajor() && yl.IsRowMajor() && dl.IsRowMajor()) {
		for _, t := range []struct {
			arg string
			l   dlpack.Layout
		}{{"x", xl}, {"y", yl}, {"dist", dl}} {
			if !t.l.IsColMajor() || t.l.IsRowMajor() {
				return kit.Argf(op, t.arg, "layout %s: cuVS wants x, y and dist all row-major or all column-major "+
					"(a column-major call needs every tensor with at least two rows and two columns)", t.l)
			}
		}
	}
	c := dlpack.Begin(op)
	defer c.End()
	same := sameMemory(&xv, &yv)
	var tx, ty *generated.DLManagedTensor
	if wx {
		tx, err = c.Out(&xm)
	} else {
		tx, err = c.In(&xv)
	}
	if err != nil {
		return kit.Argf(op, "x", "%w", err)
	}
	switch {
	case same:
		ty = tx // one tensor for both: cuVS's x == y paths (KL writes nothing then)
	case wy:
		ty, err = c.Out(&ym)
	default:
		ty, err = c.In(&yv)
	}
	if err != nil {
		return kit.Argf(op, "y", "%w", err)
	}
	td, err := c.Out(&dv)
	if err != nil {
		return kit.Argf(op, "dist", "%w", err)
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(res)
	err = generated.CuvsPairwiseDistance(h, tx, ty, td, kit.CMetric(metric), metricArg)
	if wx || wy {
		// cuVS queues the undoing of its rewrite on the stream, after the
		// distances: the inputs are the caller's again only once it ran.
		err = errors.Join(err, generated.CuvsStreamSync(h))
	}
	return kit.Wrap(op, err)
}

// input returns the view of an input, and its writable view when cuVS
// writes into it for the metric.
func input(op, arg string, t dlpack.Tensor, write bool) (dlpack.View, dlpack.ViewMut, error) {
	if !write {
		v, err := t.View()
		if err != nil {
			return dlpack.View{}, dlpack.ViewMut{}, kit.Argf(op, arg, "%w", err)
		}
		return v, dlpack.ViewMut{}, nil
	}
	tm, ok := t.(dlpack.TensorMut)
	if !ok {
		return dlpack.View{}, dlpack.ViewMut{}, kit.Argf(op, arg, "cuVS writes into %s during this metric's call: pass a writable tensor (dlpack.TensorMut)", arg)
	}
	m, err := tm.ViewMut()
	if err != nil {
		return dlpack.View{}, dlpack.ViewMut{}, kit.Argf(op, arg, "%w", err)
	}
	v, err := m.View()
	if err != nil {
		return dlpack.View{}, dlpack.ViewMut{}, kit.Argf(op, arg, "%w", err)
	}
	return v, m, nil
}

// sameMemory reports whether a and b are the same tensor (data, device,
// shape and layout).
func sameMemory(a, b *dlpack.View) bool {
	pa, ea := a.Data()
	pb, eb := b.Data()
	if ea != nil || eb != nil || pa != pb || a.Device() != b.Device() || a.NDim() != b.NDim() {
		return false
	}
	for i := 0; i < a.NDim(); i++ {
		if a.Dim(i) != b.Dim(i) || a.Stride(i) != b.Stride(i) {
			return false
		}
	}
	return a.DType() == b.DType()
}

// Float is the element type PairwiseSlice computes in.
type Float interface{ float32 | float64 }

// PairwiseSlice computes the n × m distances between the rows of x (n × dim,
// row-major, Go memory) and of y (m × dim) on the GPU and returns them
// row-major (dist[i*m+j] = metric(x_i, y_j)). It uploads x and y to device
// memory it allocates for the call and waits for the result. Values that
// are not finite are refused (an *safe.ArgError naming the input).
//
// C calls: cuvsRMMAlloc/Free, cuvsMatrixCopy, cuvsPairwiseDistance,
// cuvsStreamSync.
func PairwiseSlice[T Float](res *safe.Resources, x, y []T, dim int, metric safe.Metric, metricArg float32) ([]T, error) {
	const op = "distance.PairwiseSlice"
	if err := checkMetric(op, metric, metricArg); err != nil {
		return nil, err
	}
	if dim < 1 {
		return nil, kit.Argf(op, "dim", "%d, want at least 1", dim)
	}
	for _, in := range []struct {
		arg string
		v   []T
	}{{"x", x}, {"y", y}} {
		if len(in.v) == 0 || len(in.v)%dim != 0 {
			return nil, kit.Argf(op, in.arg, "%d values is not a positive multiple of dim %d", len(in.v), dim)
		}
		for i, f := range in.v {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, kit.Argf(op, in.arg, "value %d is %v", i, f)
			}
		}
	}
	if err := kit.Open(res, op); err != nil {
		return nil, err
	}
	n, m := len(x)/dim, len(y)/dim
	dx, err := safe.DeviceMatrixFrom(res, x, n, dim)
	if err != nil {
		return nil, err
	}
	defer dx.Close()
	dy, err := safe.DeviceMatrixFrom(res, y, m, dim)
	if err != nil {
		return nil, err
	}
	defer dy.Close()
	dd, err := safe.NewDeviceMatrix[T](res, n, m)
	if err != nil {
		return nil, err
	}
	defer dd.Close()
	if err := Pairwise(res, dx, dy, dd, metric, metricArg); err != nil {
		return nil, err
	}
	return dd.ToHost(res)
}
