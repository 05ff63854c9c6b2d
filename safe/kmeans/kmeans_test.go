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
// are, centroids at their means, the inertia Go computes, cluster cost
// equal to it.
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
	labels, inertia, err := m.Predict(res, &p, data, nil, false)
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
	for what, v := range map[string]float64{"fit": m.Inertia, "predict": inertia} {
		if math.Abs(v-goInertia) > 1e-3*goInertia {
			t.Errorf("%s inertia %v, Go %v", what, v, goInertia)
		}
	}
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
	labels, _, err := m.Predict(res, &p, data, nil, false)
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

// Predict's inertia with weights is the weighted sum of Go's distances;
// normalized weights are scaled to sum to the rows.
func TestPredictWeights(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const k = 3
	data, _, means := blobs(3, k, 20)
	cent := make([]float32, len(means))
	for i, v := range means {
		cent[i] = float32(v)
	}
	m := &kmeans.Model[float32]{Centroids: cent, Clusters: k, Dim: dim}
	p, _ := kmeans.DefaultParams()
	p.Clusters = k
	n := len(data) / dim
	w := make([]float32, n)
	wsum := 0.0
	for i := range w {
		w[i] = float32(1 + i%5)
		wsum += float64(w[i])
	}
	want := 0.0
	for i := range n {
		_, d := nearest(data[i*dim:(i+1)*dim], cent, k)
		want += float64(w[i]) * d
	}
	_, got, err := m.Predict(res, &p, data, w, false)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-want) > 1e-3*want {
		t.Errorf("weighted inertia %v, Go %v", got, want)
	}
	_, got, err = m.Predict(res, &p, data, w, true)
	if err != nil {
		t.Fatal(err)
	}
	if norm := want * float64(n) / wsum; math.Abs(got-norm) > 1e-3*norm {
		t.Errorf("normalized inertia %v, Go %v", got, norm)
	}
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

// Balanced k-means partitions equal separable clusters; its predict
// reports inertia 0 (cuVS's C code sets it so).
func TestBalanced(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const k = 4
	data, truth, _ := blobs(5, k, 50)
	p, _ := kmeans.DefaultParams()
	p.Clusters, p.Balanced = k, true
	m, err := kmeans.FitSlice(res, &p, data, dim, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Iterations != p.BalancedIters {
		t.Errorf("%d iterations, want BalancedIters %d", m.Iterations, p.BalancedIters)
	}
	labels, inertia, err := m.Predict(res, &p, data, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	checkPartition(t, labels, truth, k)
	if inertia != 0 {
		t.Errorf("balanced predict inertia %v, want 0", inertia)
	}
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
	dc, _ := safe.NewDeviceMatrix[float32](res, k, dim)
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
	if _, _, err := m.Predict(res, &p, data, nil, false); err != nil {
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
	safetest.Refused(t, "nil params", "params", "nil", func() error {
		_, err := kmeans.FitSlice(res, nil, data, dim, nil, nil)
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
	if _, _, err := nilModel.Predict(res, &def, data, nil, false); !safetest.IsArg(err, "model") {
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
