package kmeans_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/kmeans"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const dim = 3

// blobs returns k well-separated clusters of per rows each (centers 20
// apart, noise ±0.5), the true cluster of each row, and the true means.
func blobs(seed uint64, k, per int) (data []float32, truth []int, means []float64) {
	r := rand.New(rand.NewPCG(seed, 7))
	means = make([]float64, k*dim)
	for c := range k {
		for j := range dim {
			center := float64(20 * ((c >> j) & 1))
			if j == 0 {
				center += float64(40 * (c / 8))
			}
			means[c*dim+j] = center
		}
	}
	for i := range k * per {
		c := i % k
		truth = append(truth, c)
		for j := range dim {
			data = append(data, float32(means[c*dim+j]+r.Float64()-0.5))
		}
	}
	// the empirical means
	for c := range k {
		for j := range dim {
			s := 0.0
			for i := c; i < k*per; i += k {
				s += float64(data[i*dim+j])
			}
			means[c*dim+j] = s / float64(per)
		}
	}
	return data, truth, means
}

func sq[T kmeans.Float](a []T, b []T) float64 {
	s := 0.0
	for j := range a {
		d := float64(a[j]) - float64(b[j])
		s += d * d
	}
	return s
}

// nearest is Go's assignment of each row to its nearest centroid, and the
// inertia.
func nearest[T kmeans.Float](data, cent []T, k int) ([]int32, float64) {
	n := len(data) / dim
	labels := make([]int32, n)
	inertia := 0.0
	for i := range n {
		best := math.Inf(1)
		for c := range k {
			if d := sq(data[i*dim:(i+1)*dim], cent[c*dim:(c+1)*dim]); d < best {
				best, labels[i] = d, int32(c)
			}
		}
		inertia += best
	}
	return labels, inertia
}

// checkPartition: every true cluster has one label, and different clusters
// different labels.
func checkPartition(t *testing.T, labels []int32, truth []int, k int) []int32 {
	t.Helper()
	of := make([]int32, k)
	for i := range of {
		of[i] = -1
	}
	used := map[int32]int{}
	for i, l := range labels {
		c := truth[i]
		if of[c] == -1 {
			if prev, ok := used[l]; ok {
				t.Fatalf("clusters %d and %d share label %d", prev, c, l)
			}
			of[c], used[l] = l, c
		} else if of[c] != l {
			t.Fatalf("row %d of cluster %d has label %d, others %d", i, c, l, of[c])
		}
	}
	return of
}

func TestDefaultParams(t *testing.T) {
	safetest.Check(t)
	p, err := kmeans.DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	want := kmeans.Params{Metric: safe.L2Expanded, Clusters: 8, Init: kmeans.KMeansPlusPlus, MaxIter: 300, Tol: 1e-4,
		NInit: 1, OversamplingFactor: 2, BatchSamples: 1 << 15, BalancedIters: 20}
	if p != want {
		t.Fatalf("%+v, want %+v", p, want)
	}
}

// k-means finds separable clusters: labels that partition them as they
// are, centroids at their means, a fit inertia and cluster cost equal to
// Go's sum of squared distances, a predict inertia within the GPU's
// expanded-distance error of it (see predictBound).
func TestFitSeparable(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const k = 6
	data, truth, means := blobs(1, k, 40)
	p, _ := kmeans.DefaultParams()
	p.Clusters, p.NInit = k, 3
	m, err := kmeans.FitSlice(res, &p, data, dim, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Iterations < 1 || m.Iterations > p.MaxIter {
		t.Errorf("%d iterations", m.Iterations)
	}
	labels, inertia, err := m.Predict(res, data, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	of := checkPartition(t, labels, truth, k)
	for c := range k {
		got := m.Centroids[int(of[c])*dim : int(of[c]+1)*dim]
		for j := range dim {
			if math.Abs(float64(got[j])-means[c*dim+j]) > 1e-3 {
				t.Fatalf("cluster %d: centroid %v, mean %v", c, got, means[c*dim:(c+1)*dim])
			}
		}
	}
	goLabels, goInertia := nearest(data, m.Centroids, k)
	for i := range goLabels {
		if goLabels[i] != labels[i] {
			t.Fatalf("row %d: label %d, Go's nearest %d", i, labels[i], goLabels[i])
		}
	}
	if math.Abs(m.Inertia-goInertia) > 1e-3*goInertia {
		t.Errorf("fit inertia %v, Go %v", m.Inertia, goInertia)
	}
	checkPredict(t, "predict", data, m.Centroids, k, safe.L2Expanded, nil, labels, inertia)
	cost, err := m.Cost(res, data)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(cost-goInertia) > 1e-3*goInertia {
		t.Errorf("cluster cost %v, Go %v", cost, goInertia)
	}
}

// float64 data, random init, and Array init from the true means.
func TestFitFloat64AndInits(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const k = 4
	d32, truth, means := blobs(2, k, 30)
	data := make([]float64, len(d32))
	for i, f := range d32 {
		data[i] = float64(f)
	}
	p, _ := kmeans.DefaultParams()
	p.Clusters, p.NInit, p.Init = k, 5, kmeans.Random
	m, err := kmeans.FitSlice(res, &p, data, dim, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	labels, _, err := m.Predict(res, data, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	checkPartition(t, labels, truth, k)
	p.Init = kmeans.Array
	m, err = kmeans.FitSlice(res, &p, data, dim, nil, means)
	if err != nil {
		t.Fatal(err)
	}
	for i := range means {
		if math.Abs(m.Centroids[i]-means[i]) > 1e-9 {
			t.Fatalf("Array init from the means moved centroid value %d: %v, was %v", i, m.Centroids[i], means[i])
		}
	}
	_, goInertia := nearest(data, means, k)
	if math.Abs(m.Inertia-goInertia) > 1e-6*goInertia {
		t.Errorf("inertia %v, Go %v", m.Inertia, goInertia)
	}
}

// predictBound returns, for each row of data, the exact squared distance
// to its nearest centroid (min) and how far a GPU's value of it may be from
// that (slack), and the exact squared distance to every centroid (all,
// rows × k).
//
// cuVS's predict takes its distances from minClusterAndDistanceCompute
// (cpp/src/cluster/detail/minClusterDistanceCompute.cu), which on SM 9.x
// below 4096 rows and 4096 centroids, and on SM 10 and later always
// (use_fused, detail/kmeans_common.cuh), runs unfusedDistanceNNMinReduce
// (cpp/src/distance/unfused_distance_nn.cuh): ||x||² + ||c||² − 2 x·c
// with x·c from a cuBLAS GEMM in CUBLAS_COMPUTE_32F_FAST_TF32, clamped at 0,
// the first minimum. TF32 keeps 10 mantissa bits, so each product is off
// by up to 2⁻⁹ of |x_j c_j| (truncated operands) and the distance by twice
// the sum: on an H200 the predict inertia of separable data came out 34%
// above the exact sum that the fit's inertia (the fused, 3xTF32 path)
// matched. float64 is exact; larger problems take the fused path.
func predictBound[T kmeans.Float](data, cent []T, k int) (min, slack, all []float64) {
	n := len(data) / dim
	tf32 := 2 * math.Ldexp(1, -9)
	if _, ok := any(data).([]float64); ok {
		tf32 = 0
	}
	for i := range n {
		x := data[i*dim : (i+1)*dim]
		best, e := math.Inf(1), 0.0
		for c := range k {
			y := cent[c*dim : (c+1)*dim]
			d := sq(x, y)
			all = append(all, d)
			best = math.Min(best, d)
			abs, xn, cn := 0.0, 0.0, 0.0
			for j := range dim {
				abs += math.Abs(float64(x[j]) * float64(y[j]))
				xn += float64(x[j]) * float64(x[j])
				cn += float64(y[j]) * float64(y[j])
			}
			// TF32 products, float32 norms, sums and the subtraction
			e = math.Max(e, tf32*abs+math.Ldexp(8, -24)*(xn+cn+2*abs))
		}
		min, slack = append(min, best), append(slack, e)
	}
	return min, slack, all
}

// checkPredict checks a predict's labels and inertia against predictBound:
// each label's centroid is among the nearest up to the GPU's error; the
// inertia is the sum of the weights (nil: 1) times the metric's distance
// (squared, or its square root for L2SqrtExpanded) within the summed
// error and float32 rounding of the sum.
func checkPredict[T kmeans.Float](t *testing.T, what string, data, cent []T, k int, metric safe.Metric, w []float64, labels []int32, inertia float64) {
	t.Helper()
	min, slack, all := predictBound(data, cent, k)
	want, tol := 0.0, 0.0
	for i := range min {
		if d := all[i*k+int(labels[i])]; d > min[i]+2*slack[i] {
			t.Fatalf("%s: row %d: label %d at squared distance %v, the nearest at %v (allowed error %v)", what, i, labels[i], d, min[i], slack[i])
		}
		v, e := min[i], slack[i]
		if metric == safe.L2SqrtExpanded {
			// |√a − √b| ≤ min(√|a−b|, |a−b|/√b)
			v, e = math.Sqrt(min[i]), math.Sqrt(slack[i])
			if min[i] > 0 {
				e = math.Min(e, slack[i]/math.Sqrt(min[i]))
			}
		}
		wi := 1.0
		if w != nil {
			wi = w[i]
		}
		want += wi * v
		tol += wi * e
	}
	tol += 1e-5 * want
	if inertia < 0 || math.Abs(inertia-want) > tol {
		t.Errorf("%s inertia %v, Go %v ± %v", what, inertia, want, tol)
	}
}

// uniform returns n rows of uniform values in [-1, 1): data for which the
// GPU's expanded distances are close to exact (norms of the order of the
// distances), unlike far-apart blobs.
func uniform(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 11))
	v := make([]float32, n*dim)
	for i := range v {
		v[i] = float32(2*r.Float64() - 1)
	}
	return v
}

// Predict's inertia weighs the metric's distances with the weights as
// given, or rescaled to sum to the rows with normalizeWeights
// (cpp/src/cluster/detail/kmeans.cuh, kmeans_predict); the same call twice
// gives the same result.
func TestPredictWeights(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const k, n = 3, 60
	data, cent := uniform(3, n), uniform(4, k)
	p, _ := kmeans.DefaultParams()
	p.Clusters = k
	m := &kmeans.Model[float32]{Centroids: cent, Clusters: k, Dim: dim, Params: &p}
	w := make([]float32, n)
	w64 := make([]float64, n)
	wsum := 0.0
	for i := range w {
		w[i] = float32(1 + i%5)
		w64[i] = float64(w[i])
		wsum += w64[i]
	}
	for _, metric := range []safe.Metric{safe.L2Expanded, safe.L2SqrtExpanded} {
		p.Metric = metric
		labels, raw, err := m.Predict(res, data, w, false)
		if err != nil {
			t.Fatal(err)
		}
		checkPredict(t, metric.String()+" weighted", data, cent, k, metric, w64, labels, raw)
		labels2, again, err := m.Predict(res, data, w, false)
		if err != nil {
			t.Fatal(err)
		}
		if again != raw || !equal(labels, labels2) {
			t.Errorf("%s: a second predict gave inertia %v (first %v), labels equal %v", metric, again, raw, equal(labels, labels2))
		}
		_, norm, err := m.Predict(res, data, w, true)
		if err != nil {
			t.Fatal(err)
		}
		// the same distances, each weight times n / Σw (float32 rounding)
		if want := raw * n / wsum; math.Abs(norm-want) > 1e-4*want {
			t.Errorf("%s: normalized inertia %v, want %v (raw %v × %d / %v)", metric, norm, want, raw, n, wsum)
		}
		_, plain, err := m.Predict(res, data, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		checkPredict(t, metric.String()+" unweighted", data, cent, k, metric, nil, labels, plain)
	}
}

// Fit's inertia is cuVS's cluster cost whatever the metric: squared
// distances with L2SqrtExpanded too (the end of each run in
// detail/kmeans.cuh's kmeans_fit calls cluster_cost, which always uses
// L2Expanded); predict's is in the metric's distances.
func TestL2SqrtInertia(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const k = 4
	data, truth, _ := blobs(10, k, 25)
	p, _ := kmeans.DefaultParams()
	p.Clusters, p.NInit, p.Metric = k, 3, safe.L2SqrtExpanded
	m, err := kmeans.FitSlice(res, &p, data, dim, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	labels, inertia, err := m.Predict(res, data, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	checkPartition(t, labels, truth, k)
	_, squared := nearest(data, m.Centroids, k)
	if math.Abs(m.Inertia-squared) > 1e-3*squared {
		t.Errorf("fit inertia %v, Go's sum of squared distances %v", m.Inertia, squared)
	}
	checkPredict(t, "L2SqrtExpanded predict", data, m.Centroids, k, safe.L2SqrtExpanded, nil, labels, inertia)
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Fit takes host data (and host weights) as well as device data.
func TestFitHostData(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const k = 4
	data, truth, _ := blobs(4, k, 25)
	n := len(data) / dim
	hx, err := dlpack.NewHostMatrix(data, n, dim)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]float32, n)
	for i := range w {
		w[i] = 1
	}
	hw := dlpack.NewHostVector(w)
	p, _ := kmeans.DefaultParams()
	p.Clusters, p.NInit, p.InitSize = k, 3, int64(n)
	dc, err := safe.NewDeviceMatrix[float32](res, k, dim)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	r, err := kmeans.Fit(res, &p, hx, hw, dc)
	if err != nil {
		t.Fatal(err)
	}
	cent, err := dc.ToHost(res)
	if err != nil {
		t.Fatal(err)
	}
	labels, inertia := nearest(data, cent, k)
	checkPartition(t, labels, truth, k)
	if math.Abs(r.Inertia-inertia) > 1e-3*inertia {
		t.Errorf("inertia %v, Go %v", r.Inertia, inertia)
	}
	// device data with host weights is refused
	dx, _ := safe.DeviceMatrixFrom(res, data, n, dim)
	defer dx.Close()
	safetest.Refused(t, "device x, host weights", "weights", "device", func() error {
		_, err := kmeans.Fit(res, &p, dx, hw, dc)
		return err
	})
}

// gaussBlobs returns k Gaussian blobs (σ 1, centers drawn in [-10, 10)^d)
// of per rows each, in random order.
func gaussBlobs(seed uint64, k, per, d int) []float32 {
	r := rand.New(rand.NewPCG(seed, 11))
	centers := make([]float64, k*d)
	for i := range centers {
		centers[i] = 20*r.Float64() - 10
	}
	data := make([]float32, 0, k*per*d)
	for i := range k * per {
		c := i % k
		for j := range d {
			data = append(data, float32(centers[c*d+j]+r.NormFloat64()))
		}
	}
	r.Shuffle(k*per, func(a, b int) {
		for j := range d {
			data[a*d+j], data[b*d+j] = data[b*d+j], data[a*d+j]
		}
	})
	return data
}

// balanceBounds are the cluster sizes, as fractions of the mean size, that
// cuVS's balanced k-means rebalances towards in its last pass
// (cpp/src/cluster/detail/kmeans_balanced.cuh, build_hierarchical's
// balancing_em_iters): 26.06 moves clusters of at most 0.2 × the mean and
// has no upper bound; 26.08 pairs clusters under 0.333 × the mean or over
// 3 × with each other (balanced_params' defaults, which the C API keeps).
func balanceBounds() (lower, upper float64) {
	if safe.Release() == "26.06" {
		return 0.2, math.Inf(1)
	}
	return 0.333, 3
}

// Balanced k-means ends with cluster sizes within cuVS's tolerance of the
// mean on separated blobs whose rows come in random order (not laid out by
// cluster, which its round-robin seeding would find at once); its fit's
// inertia is the cluster cost; its predict reports inertia 0 (cuVS's C
// code sets it so).
func TestBalanced(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const k, per, d = 8, 256, 16
	lower, upper := balanceBounds()
	for seed := range uint64(12) {
		data := gaussBlobs(seed, k, per, d)
		p, _ := kmeans.DefaultParams()
		p.Clusters, p.Balanced = k, true
		m, err := kmeans.FitSlice(res, &p, data, d, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.Iterations != p.BalancedIters {
			t.Errorf("%d iterations, want BalancedIters %d", m.Iterations, p.BalancedIters)
		}
		labels, inertia, err := m.Predict(res, data, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if inertia != 0 {
			t.Errorf("balanced predict inertia %v, want 0", inertia)
		}
		sizes := make([]int, k)
		for i, l := range labels {
			if l < 0 || l >= k {
				t.Fatalf("row %d: label %d of %d clusters", i, l, k)
			}
			sizes[l]++
		}
		for c, n := range sizes {
			if f := float64(n) / per; f < lower || f > upper {
				t.Errorf("seed %d: sizes %v: cluster %d holds %.3g × the mean %d, want %g..%g", seed, sizes, c, f, per, lower, upper)
				break
			}
		}
		cost := 0.0
		for i := range k * per {
			best := math.Inf(1)
			for c := range k {
				best = min(best, sq(data[i*d:(i+1)*d], m.Centroids[c*d:(c+1)*d]))
			}
			cost += best
		}
		if math.Abs(m.Inertia-cost) > 1e-3*cost {
			t.Errorf("seed %d: fit inertia %v, Go's cluster cost %v", seed, m.Inertia, cost)
		}
	}
	p, _ := kmeans.DefaultParams()
	p.Clusters, p.Balanced = 4, true
	data, _, _ := blobs(5, 4, 50)
	d64 := []float64{0, 0, 0, 1, 1, 1}
	safetest.Refused(t, "balanced float64", "data", "float32", func() error {
		p := p
		p.Clusters = 1
		_, err := kmeans.FitSlice(res, &p, d64, dim, nil, nil)
		return err
	})
	safetest.Refused(t, "balanced weights", "weights", "balanced", func() error {
		_, err := kmeans.FitSlice(res, &p, data, dim, make([]float32, len(data)/dim), nil)
		return err
	})
	hx, _ := dlpack.NewHostMatrix(data, len(data)/dim, dim)
	dc, _ := safe.NewDeviceMatrix[float32](res, 4, dim)
	defer dc.Close()
	safetest.Refused(t, "balanced host data", "x", "device", func() error {
		_, err := kmeans.Fit(res, &p, hx, nil, dc)
		return err
	})
}

// On 26.06 the _v2 functions serve every call, on 26.08 the only ones
// there are: Go's Params never reaches C in the other layout.
func TestReleaseFunctions(t *testing.T) {
	ctl := safetest.Double(t, "call counts")
	safetest.Check(t)
	res := safetest.Resources(t)
	data, _, _ := blobs(6, 2, 10)
	fit, pred, v1fit := "cuvsKMeansFit_v2", "cuvsKMeansPredict_v2", "cuvsKMeansFit"
	if safe.Release() == "26.08" {
		fit, pred, v1fit = "cuvsKMeansFit", "cuvsKMeansPredict", ""
	}
	f0, p0 := ctl.Calls(fit), ctl.Calls(pred)
	var v0 int64
	if v1fit != "" {
		v0 = ctl.Calls(v1fit)
	}
	p, _ := kmeans.DefaultParams()
	p.Clusters = 2
	m, err := kmeans.FitSlice(res, &p, data, dim, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Predict(res, data, nil, false); err != nil {
		t.Fatal(err)
	}
	if ctl.Calls(fit) != f0+1 || ctl.Calls(pred) != p0+1 {
		t.Errorf("%s %d calls, %s %d", fit, ctl.Calls(fit)-f0, pred, ctl.Calls(pred)-p0)
	}
	if v1fit != "" && ctl.Calls(v1fit) != v0 {
		t.Errorf("%s called on 26.06", v1fit)
	}
	// a failure inside cuVS comes back as a *safe.Error; the params are
	// destroyed anyway (safetest.Check counts them)
	ctl.FailNext(fit, "injected")
	_, err = kmeans.FitSlice(res, &p, data, dim, nil, nil)
	var se *safe.Error
	if !errors.As(err, &se) {
		t.Fatalf("%v, want a *safe.Error", err)
	}
	ctl.FailNext("cuvsKMeansClusterCost", "injected")
	if _, err := m.Cost(res, data); !errors.As(err, &se) {
		t.Fatalf("%v, want a *safe.Error", err)
	}
}

// Bad params and tensors are refused naming the argument, before C.
func TestRefusals(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data, _, _ := blobs(7, 2, 5)
	n := len(data) / dim
	def, _ := kmeans.DefaultParams()
	def.Clusters = 2
	for _, c := range []struct {
		arg string
		mod func(*kmeans.Params)
	}{
		{"params.Clusters", func(p *kmeans.Params) { p.Clusters = 0 }},
		{"params.Clusters", func(p *kmeans.Params) { p.Clusters = n + 1 }},
		{"params.Tol", func(p *kmeans.Params) { p.Tol = 0 }},
		{"params.MaxIter", func(p *kmeans.Params) { p.MaxIter = 0 }},
		{"params.NInit", func(p *kmeans.Params) { p.NInit = 0 }},
		{"params.Metric", func(p *kmeans.Params) { p.Metric = safe.InnerProduct }},
		{"params.Init", func(p *kmeans.Params) { p.Init = 7 }},
		{"params.OversamplingFactor", func(p *kmeans.Params) { p.OversamplingFactor = -1 }},
		{"params.BatchSamples", func(p *kmeans.Params) { p.BatchSamples = 0 }},
		{"init", func(p *kmeans.Params) { p.Init = kmeans.Array }},
	} {
		p := def
		c.mod(&p)
		safetest.Refused(t, c.arg, c.arg, "", func() error {
			_, err := kmeans.FitSlice(res, &p, data, dim, nil, nil)
			return err
		})
	}
	safetest.Refused(t, "zero params", "params.Clusters", "", func() error {
		_, err := kmeans.FitSlice(res, &kmeans.Params{}, data, dim, nil, nil)
		return err
	})
	safetest.Refused(t, "ragged", "data", "multiple", func() error {
		_, err := kmeans.FitSlice(res, &def, data[:4], dim, nil, nil)
		return err
	})
	safetest.Refused(t, "weights", "weights", "weights", func() error {
		_, err := kmeans.FitSlice(res, &def, data, dim, []float32{1}, nil)
		return err
	})
	dx, _ := safe.DeviceMatrixFrom(res, data, n, dim)
	defer dx.Close()
	dc3, _ := safe.NewDeviceMatrix[float32](res, 3, dim)
	defer dc3.Close()
	dc2, _ := safe.NewDeviceMatrix[float32](res, 2, dim)
	defer dc2.Close()
	dcd, _ := safe.NewDeviceMatrix[float32](res, 2, dim+1)
	defer dcd.Close()
	d64, _ := safe.NewDeviceMatrix[float64](res, 2, dim)
	defer d64.Close()
	l32, _ := safe.NewDeviceVector[int32](res, n)
	defer l32.Close()
	l64, _ := safe.NewDeviceVector[int64](res, n)
	defer l64.Close()
	lShort, _ := safe.NewDeviceVector[int32](res, n-1)
	defer lShort.Close()
	hx, _ := dlpack.NewHostMatrix(data, n, dim)
	safetest.Refused(t, "centroid rows", "centroids", "Clusters", func() error { _, err := kmeans.Fit(res, &def, dx, nil, dc3); return err })
	safetest.Refused(t, "centroid cols", "centroids", "columns", func() error { _, err := kmeans.Fit(res, &def, dx, nil, dcd); return err })
	safetest.Refused(t, "centroid dtype", "centroids", "dtype", func() error { _, err := kmeans.Fit(res, &def, dx, nil, d64); return err })
	safetest.Refused(t, "nil centroids", "centroids", "nil", func() error { _, err := kmeans.Fit(res, &def, dx, nil, nil); return err })
	safetest.Refused(t, "labels dtype", "labels", "dtype", func() error { _, err := kmeans.Predict(res, &def, dx, nil, dc2, l64, false); return err })
	safetest.Refused(t, "labels length", "labels", "labels", func() error { _, err := kmeans.Predict(res, &def, dx, nil, dc2, lShort, false); return err })
	safetest.Refused(t, "predict host x", "x", "device", func() error { _, err := kmeans.Predict(res, &def, hx, nil, dc2, l32, false); return err })
	safetest.Refused(t, "cost host x", "x", "device", func() error { _, err := kmeans.ClusterCost(res, hx, dc2); return err })
	safetest.Refused(t, "cost columns", "centroids", "columns", func() error { _, err := kmeans.ClusterCost(res, dx, dcd); return err })
	var nilModel *kmeans.Model[float32]
	if _, _, err := nilModel.Predict(res, data, nil, false); !safetest.IsArg(err, "model") {
		t.Errorf("nil model: %v", err)
	}
}

// With one cluster the centroid is the weighted mean, and the inertia is
// weighted by the weights scaled to sum to the rows.
func TestFitWeights(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data, _, _ := blobs(9, 2, 15)
	n := len(data) / dim
	w := make([]float32, n)
	wsum := 0.0
	for i := range w {
		w[i] = float32(1 + 3*(i%2)) // one blob weighs 4 times the other
		wsum += float64(w[i])
	}
	mean := make([]float32, dim)
	for j := range dim {
		s := 0.0
		for i := range n {
			s += float64(w[i]) * float64(data[i*dim+j])
		}
		mean[j] = float32(s / wsum)
	}
	p, _ := kmeans.DefaultParams()
	p.Clusters = 1
	m, err := kmeans.FitSlice(res, &p, data, dim, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := 0.0
	for i := range n {
		want += float64(w[i]) * float64(n) / wsum * sq(data[i*dim:(i+1)*dim], mean)
	}
	for j := range dim {
		if math.Abs(float64(m.Centroids[j]-mean[j])) > 1e-3 {
			t.Fatalf("centroid %v, weighted mean %v", m.Centroids, mean)
		}
	}
	if math.Abs(m.Inertia-want) > 1e-3*want {
		t.Errorf("inertia %v, Go %v", m.Inertia, want)
	}
}

// The double imitates the device the real library was measured on (an
// H200, SM 9.0): a float32 predict below 4096 rows and centroids computes
// its distances with a TF32 GEMM, so on blobs far from the origin its
// inertia is well above the exact sum (34% on the H200 for
// TestFitSeparable's data) while the fit's stays exact; 4096 rows take the
// fused path, and float64 is exact.
func TestDoublePredictTF32(t *testing.T) {
	safetest.Double(t, "the double's imitation of an SM 9.x device")
	safetest.Check(t)
	res := safetest.Resources(t)
	const k = 6
	p, _ := kmeans.DefaultParams()
	p.Clusters = k
	for _, per := range []int{40, 700} {
		data, _, means := blobs(1, k, per)
		cent := make([]float32, len(means))
		for i, v := range means {
			cent[i] = float32(v)
		}
		m := &kmeans.Model[float32]{Centroids: cent, Clusters: k, Dim: dim}
		_, got, err := m.Predict(res, data, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		_, exact := nearest(data, cent, k)
		rel := (got - exact) / exact
		if n := k * per; n < 4096 && rel < 0.05 {
			t.Errorf("%d rows: predict inertia %v, exact %v: not the TF32 path", n, got, exact)
		} else if n >= 4096 && math.Abs(rel) > 1e-4 {
			t.Errorf("%d rows: predict inertia %v, exact %v: not the fused path", n, got, exact)
		}
		if per == 40 {
			// the H200's values on these data (centroids fitted there, within
			// float32 rounding of the means): predict 77.18, exact 57.74
			if math.Abs(got-77.18) > 0.02 {
				t.Errorf("predict inertia %v, the H200 gave 77.18", got)
			}
			d64 := make([]float64, len(data))
			for i, v := range data {
				d64[i] = float64(v)
			}
			m64 := &kmeans.Model[float64]{Centroids: means, Clusters: k, Dim: dim}
			_, got, err := m64.Predict(res, d64, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if _, exact := nearest(d64, means, k); math.Abs(got-exact) > 1e-9*exact {
				t.Errorf("float64 predict inertia %v, exact %v", got, exact)
			}
		}
	}
	// TestPredictWeights' former data (blobs at their means, weights 1..5):
	// the H200 gave 48.17 weighted and 16.06 normalized (exact: 44.14, 14.71)
	data, _, means := blobs(3, 3, 20)
	cent := make([]float32, len(means))
	for i, v := range means {
		cent[i] = float32(v)
	}
	m := &kmeans.Model[float32]{Centroids: cent, Clusters: 3, Dim: dim}
	p.Clusters = 3
	w := make([]float32, len(data)/dim)
	for i := range w {
		w[i] = float32(1 + i%5)
	}
	for _, c := range []struct {
		norm bool
		want float64
	}{{false, 48.17}, {true, 16.06}} {
		_, got, err := m.Predict(res, data, w, c.norm)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-c.want) > 0.01 {
			t.Errorf("normalize %v: predict inertia %v, the H200 gave %v", c.norm, got, c.want)
		}
	}
}

// Nil params mean DefaultParams, as in the other packages; a model keeps
// the params it was fitted with, which its Predict uses.
func TestNilParams(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	def, _ := kmeans.DefaultParams()
	data, _, _ := blobs(11, def.Clusters, 10)
	m, err := kmeans.FitSlice(res, nil, data, dim, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Clusters != def.Clusters || m.Params == nil || *m.Params != def {
		t.Fatalf("nil params: %d clusters, params %+v, want DefaultParams %+v", m.Clusters, m.Params, def)
	}
	labels, _, err := m.Predict(res, data, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range labels {
		if l < 0 || int(l) >= def.Clusters {
			t.Fatalf("row %d: label %d of %d clusters", i, l, def.Clusters)
		}
	}
	// the tensor Predict takes its cluster count from the centroids
	n := len(data) / dim
	dx, _ := safe.DeviceMatrixFrom(res, data, n, dim)
	defer dx.Close()
	dc, _ := safe.DeviceMatrixFrom(res, m.Centroids, m.Clusters, dim)
	defer dc.Close()
	dl, _ := safe.NewDeviceVector[int32](res, n)
	defer dl.Close()
	if _, err := kmeans.Predict(res, nil, dx, nil, dc, dl, false); err != nil {
		t.Fatal(err)
	}
	l3 := make([]int32, n)
	if err := dl.CopyToHost(res, l3); err != nil {
		t.Fatal(err)
	}
	if !equal(labels, l3) {
		t.Errorf("tensor Predict with nil params: labels %v, want %v", l3, labels)
	}
}

// Model.Predict takes no params: it predicts with the model's own (a
// FitSlice model's copy of the fit's, a hand-made model's Params, or the
// defaults with its cluster count), and refuses a model whose Params do not
// fit it. The tensor Predict refuses params whose cluster count is not the
// centroids' rows, balanced ones too.
func TestModelParams(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const k = 4
	data, truth, _ := blobs(12, k, 10)
	p, _ := kmeans.DefaultParams()
	p.Clusters, p.NInit, p.Metric = k, 3, safe.L2SqrtExpanded
	m, err := kmeans.FitSlice(res, &p, data, dim, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Metric = safe.L2Expanded // the caller's copy changes, the model's does not
	if m.Params.Metric != safe.L2SqrtExpanded {
		t.Fatalf("the model's params changed with the caller's: %v", m.Params.Metric)
	}
	labels, kept, err := m.Predict(res, data, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	checkPartition(t, labels, truth, k)
	checkPredict(t, "the model's L2SqrtExpanded", data, m.Centroids, k, safe.L2SqrtExpanded, nil, labels, kept)

	// a model made by hand: its Params, or the defaults (L2Expanded)
	sqrtP := *m.Params
	hand := &kmeans.Model[float32]{Centroids: m.Centroids, Clusters: k, Dim: dim, Params: &sqrtP}
	l2, same, err := hand.Predict(res, data, nil, false)
	if err != nil || same != kept || !equal(labels, l2) {
		t.Errorf("hand-made model with the fit's params: inertia %v, %v, labels equal %v; want %v", same, err, equal(labels, l2), kept)
	}
	hand.Params = nil
	l2, squared, err := hand.Predict(res, data, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(labels, l2) {
		t.Errorf("hand-made model's labels %v, fitted model's %v", l2, labels)
	}
	checkPredict(t, "the defaults' L2Expanded", data, m.Centroids, k, safe.L2Expanded, nil, l2, squared)

	// params that do not fit the model
	other := sqrtP
	other.Clusters = k + 1
	hand.Params = &other
	safetest.Refused(t, "model params of another cluster count", "model", "Clusters", func() error {
		_, _, err := hand.Predict(res, data, nil, false)
		return err
	})
	other = sqrtP
	other.Metric = safe.CosineExpanded
	safetest.Refused(t, "model params of a metric k-means lacks", "model", "Metric", func() error {
		_, _, err := hand.Predict(res, data, nil, false)
		return err
	})
	var ae *safe.ArgError
	if _, _, err := hand.Predict(res, data, nil, false); !errors.As(err, &ae) || !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("refused model params: %v, want an *safe.ArgError", err)
	}

	// the tensor Predict: Clusters must be the centroids' rows, balanced too
	n := len(data) / dim
	dx, _ := safe.DeviceMatrixFrom(res, data, n, dim)
	defer dx.Close()
	dc, _ := safe.DeviceMatrixFrom(res, m.Centroids, k, dim)
	defer dc.Close()
	dl, _ := safe.NewDeviceVector[int32](res, n)
	defer dl.Close()
	for _, balanced := range []bool{false, true} {
		q := sqrtP
		q.Clusters, q.Balanced = k+1, balanced
		safetest.Refused(t, "tensor Predict, params of another cluster count", "centroids", "Clusters", func() error {
			_, err := kmeans.Predict(res, &q, dx, nil, dc, dl, false)
			return err
		})
	}
}
