package distance_test

import (
	"errors"
	"math"
	"testing"
	"unsafe"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/distance"
)

func TestMain(m *testing.M) { safetest.Main(m) }

// probabilities returns rows of positive values summing to 1 (what the
// divergences and Hellinger are for; the other metrics take them too).
func probabilities(seed uint64, rows, dim int) []float32 {
	v := safetest.Random(seed, rows, dim)
	for i := 0; i < rows; i++ {
		var s float32
		for j := range dim {
			v[i*dim+j] += 0.05
			s += v[i*dim+j]
		}
		for j := range dim {
			v[i*dim+j] /= s
		}
	}
	return v
}

func to64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, f := range v {
		out[i] = float64(f)
	}
	return out
}

func argOf(m safe.Metric) float32 {
	if m == safe.LpUnexpanded {
		return 3
	}
	return 2
}

func checkAll(t *testing.T, m safe.Metric, got []float64, x, y []float64, dim int, tol float64) {
	t.Helper()
	n, k := len(x)/dim, len(y)/dim
	for i := range n {
		for j := range k {
			want := safetest.RefDistance(m, float64(argOf(m)), x[i*dim:(i+1)*dim], y[j*dim:(j+1)*dim])
			if g := got[i*k+j]; math.Abs(g-want) > tol*math.Max(1, math.Abs(want)) {
				t.Fatalf("%s: d(%d,%d) = %v, want %v", m, i, j, g, want)
			}
		}
	}
}

// Every metric, float32 and float64, as Go computes it.
func TestEveryMetric(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const dim = 12
	x, y := probabilities(1, 9, dim), probabilities(2, 7, dim)
	for _, m := range distance.Metrics() {
		got, err := distance.PairwiseSlice(res, x, y, dim, m, argOf(m))
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		g := to64(got)
		checkAll(t, m, g, to64(x), to64(y), dim, 2e-3)
		got64, err := distance.PairwiseSlice(res, to64(x), to64(y), dim, m, argOf(m))
		if err != nil {
			t.Fatalf("%s float64: %v", m, err)
		}
		checkAll(t, m, got64, to64(x), to64(y), dim, 1e-6)
	}
}

// The expanded and unexpanded L2 agree, the Sqrt variants are the square
// roots, and a row's distance to itself is 0 under each.
func TestL2Variants(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const dim = 16
	x := safetest.Random(3, 20, dim)
	get := func(m safe.Metric) []float32 {
		d, err := distance.PairwiseSlice(res, x, x, dim, m, 2)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	e, se, u, su := get(safe.L2Expanded), get(safe.L2SqrtExpanded), get(safe.L2Unexpanded), get(safe.L2SqrtUnexpanded)
	for i := range e {
		if math.Abs(float64(e[i]-u[i])) > 1e-3 || math.Abs(math.Sqrt(float64(u[i]))-float64(su[i])) > 1e-3 ||
			math.Abs(math.Sqrt(math.Max(0, float64(e[i])))-float64(se[i])) > 2e-2 {
			t.Fatalf("entry %d: L2Expanded %v, L2Unexpanded %v, L2SqrtExpanded %v, L2SqrtUnexpanded %v", i, e[i], u[i], se[i], su[i])
		}
	}
	for i := range 20 {
		if u[i*20+i] != 0 || su[i*20+i] != 0 {
			t.Fatalf("row %d to itself: %v, %v", i, u[i*20+i], su[i*20+i])
		}
	}
}

// colMajor uploads rows × cols row-major values as a column-major device
// tensor (its memory is the transpose's, row-major).
func colMajor[T dlpack.DType](t *testing.T, res *safe.Resources, v []T, rows, cols int) (dlpack.ViewMut, func()) {
	t.Helper()
	tr := make([]T, len(v))
	for i := range rows {
		for j := range cols {
			tr[j*rows+i] = v[i*cols+j]
		}
	}
	m, err := safe.DeviceMatrixFrom(res, tr, cols, rows)
	if err != nil {
		t.Fatal(err)
	}
	mv, err := m.ViewMut()
	if err != nil {
		t.Fatal(err)
	}
	p, err := mv.Data()
	if err != nil {
		t.Fatal(err)
	}
	cv, err := dlpack.FromRawPartsMut(p, m.Device(), []int64{int64(rows), int64(cols)}, []int64{1, int64(rows)}, dlpack.DataTypeOf[T]())
	if err != nil {
		t.Fatal(err)
	}
	return cv.WithOwner(m.Owner()), func() { _ = m.Close() }
}

// Column-major inputs give the column-major distances of the same rows.
func TestColumnMajor(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const n, m, dim = 6, 5, 4
	x, y := safetest.Random(4, n, dim), safetest.Random(5, m, dim)
	want, err := distance.PairwiseSlice(res, x, y, dim, safe.L1, 2)
	if err != nil {
		t.Fatal(err)
	}
	cx, fx := colMajor(t, res, x, n, dim)
	defer fx()
	cy, fy := colMajor(t, res, y, m, dim)
	defer fy()
	cd, fd := colMajor(t, res, make([]float32, n*m), n, m)
	defer fd()
	if err := distance.Pairwise(res, cx, cy, cd, safe.L1, 2); err != nil {
		t.Fatal(err)
	}
	// read back through a row-major view of the transpose
	tr := make([]float32, n*m)
	cdm, _ := cd.ViewMut()
	p, _ := cdm.Data()
	rv, err := dlpack.FromRawParts(p, cd.Device(), []int64{m, n}, nil, dlpack.Float32)
	if err != nil {
		t.Fatal(err)
	}
	rv = rv.WithOwner(cd.Owner())
	th, _ := dlpack.FromRawPartsMut(unsafe.Pointer(unsafe.SliceData(tr)), dlpack.HostDevice, []int64{m, n}, nil, dlpack.Float32)
	if err := safe.Copy(res, &rv, &th); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		for j := range m {
			if g, w := tr[j*n+i], want[i*m+j]; math.Abs(float64(g-w)) > 1e-4 {
				t.Fatalf("d(%d,%d) = %v column-major, %v row-major", i, j, g, w)
			}
		}
	}
}

// float16 inputs give float32 distances, those of the rounded values.
func TestFloat16(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const n, m, dim = 5, 4, 8
	x, y := safetest.Random(6, n, dim), safetest.Random(7, m, dim)
	half := func(v []float32) ([]float16.Float16, []float64) {
		h, r := make([]float16.Float16, len(v)), make([]float64, len(v))
		for i, f := range v {
			h[i] = float16.Fromfloat32(f)
			r[i] = float64(h[i].Float32())
		}
		return h, r
	}
	hx, rx := half(x)
	hy, ry := half(y)
	dx, err := safe.DeviceMatrixFrom(res, hx, n, dim)
	if err != nil {
		t.Fatal(err)
	}
	defer dx.Close()
	dy, err := safe.DeviceMatrixFrom(res, hy, m, dim)
	if err != nil {
		t.Fatal(err)
	}
	defer dy.Close()
	dd, err := safe.NewDeviceMatrix[float32](res, n, m)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	if err := distance.Pairwise(res, dx, dy, dd, safe.L2Unexpanded, 2); err != nil {
		t.Fatal(err)
	}
	got, err := dd.ToHost(res)
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, safe.L2Unexpanded, to64(got), rx, ry, dim, 1e-3)
	// float16 distances are refused
	dh, err := safe.NewDeviceMatrix[float16.Float16](res, n, m)
	if err != nil {
		t.Fatal(err)
	}
	defer dh.Close()
	safetest.Refused(t, "float16 dist", "dist", "dtype", func() error {
		return distance.Pairwise(res, dx, dy, dh, safe.L2Unexpanded, 2)
	})
}

// Hellinger and KL write into their inputs inside cuVS: they need writable
// tensors, which come back as they were (up to rounding), and x == y works.
func TestWritingMetrics(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const n, dim = 6, 10
	x := probabilities(8, n, dim)
	dx, err := safe.DeviceMatrixFrom(res, x, n, dim)
	if err != nil {
		t.Fatal(err)
	}
	defer dx.Close()
	dd, err := safe.NewDeviceMatrix[float32](res, n, n)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	ro, err := dx.View() // a read-only view: not a dlpack.TensorMut
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []safe.Metric{safe.HellingerExpanded, safe.KLDivergence} {
		safetest.Refused(t, m.String()+" read-only", "y", "writable", func() error {
			return distance.Pairwise(res, dx, ro, dd, m, 2)
		})
		if err := distance.Pairwise(res, dx, dx, dd, m, 2); err != nil {
			t.Fatalf("%s, x == y: %v", m, err)
		}
		got, err := dd.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if math.Abs(float64(got[i*n+i])) > 2e-3 {
				t.Fatalf("%s: d(%d,%d) = %v, want 0", m, i, i, got[i*n+i])
			}
		}
		checkAll(t, m, to64(got), to64(x), to64(x), dim, 2e-3)
		back, err := dx.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		for i := range back {
			if math.Abs(float64(back[i]-x[i])) > 1e-5 {
				t.Fatalf("%s: x[%d] is %v after the call, was %v", m, i, back[i], x[i])
			}
		}
	}
}

// cuVS undoes Hellinger's and KL's rewrite of the inputs on the call's
// stream, after the distances: Pairwise waits for it, so the inputs are
// back (up to rounding) when it returns, even to a reader on another stream
// that never synchronizes with the call's.
func TestWritingMetricsReturnInputs(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	other := safetest.Resources(t)
	const nx, ny, dim = 5, 7, 12
	x, y := probabilities(9, nx, dim), probabilities(10, ny, dim)
	for _, m := range []safe.Metric{safe.HellingerExpanded, safe.KLDivergence} {
		dx, err := safe.DeviceMatrixFrom(res, x, nx, dim)
		if err != nil {
			t.Fatal(err)
		}
		dy, err := safe.DeviceMatrixFrom(res, y, ny, dim)
		if err != nil {
			t.Fatal(err)
		}
		dd, err := safe.NewDeviceMatrix[float32](res, nx, ny)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, dx)
		safetest.Close(t, dy)
		safetest.Close(t, dd)
		if err := distance.Pairwise(res, dx, dy, dd, m, 2); err != nil {
			t.Fatal(err)
		}
		for _, in := range []struct {
			name string
			m    *safe.DeviceMatrix[float32]
			want []float32
		}{{"x", dx, x}, {"y", dy, y}} {
			back, err := in.m.ToHost(other)
			if err != nil {
				t.Fatal(err)
			}
			for i := range back {
				if math.Abs(float64(back[i]-in.want[i])) > 1e-5 {
					t.Fatalf("%s: %s[%d] is %v right after the call, was %v", m, in.name, i, back[i], in.want[i])
				}
			}
		}
		got, err := dd.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		checkAll(t, m, to64(got), to64(x), to64(y), dim, 2e-3)
	}
}

// Bad input is refused naming the argument, before any C call.
func TestRefusals(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	x := safetest.Random(9, 4, 3)
	for _, m := range []safe.Metric{safe.BrayCurtis, safe.JaccardExpanded, safe.Haversine, safe.DiceExpanded, safe.BitwiseHamming, safe.Metric(99)} {
		safetest.Refused(t, m.String(), "metric", "cuvsPairwiseDistance", func() error {
			_, err := distance.PairwiseSlice(res, x, x, 3, m, 2)
			return err
		})
	}
	safetest.Refused(t, "p = 0", "metricArg", "p > 0", func() error {
		_, err := distance.PairwiseSlice(res, x, x, 3, safe.LpUnexpanded, 0)
		return err
	})
	safetest.Refused(t, "ragged x", "x", "multiple", func() error {
		_, err := distance.PairwiseSlice(res, x[:5], x, 3, safe.L1, 2)
		return err
	})
	safetest.Refused(t, "dim 0", "dim", "", func() error {
		_, err := distance.PairwiseSlice(res, x, x, 0, safe.L1, 2)
		return err
	})
	nan := append([]float32(nil), x...)
	nan[4] = float32(math.NaN())
	safetest.Refused(t, "NaN", "y", "NaN", func() error {
		_, err := distance.PairwiseSlice(res, x, nan, 3, safe.L1, 2)
		return err
	})
	dx, _ := safe.DeviceMatrixFrom(res, x, 4, 3)
	defer dx.Close()
	dy, _ := safe.DeviceMatrixFrom(res, safetest.Random(10, 5, 2), 5, 2)
	defer dy.Close()
	d64, _ := safe.DeviceMatrixFrom(res, to64(x), 4, 3)
	defer d64.Close()
	dd, _ := safe.NewDeviceMatrix[float32](res, 4, 4)
	defer dd.Close()
	dd45, _ := safe.NewDeviceMatrix[float32](res, 4, 5)
	defer dd45.Close()
	hm, _ := dlpack.NewHostMatrix(x, 4, 3)
	safetest.Refused(t, "nil x", "x", "nil", func() error { return distance.Pairwise(res, nil, dx, dd, safe.L1, 2) })
	safetest.Refused(t, "nil dist", "dist", "nil", func() error { return distance.Pairwise(res, dx, dx, nil, safe.L1, 2) })
	safetest.Refused(t, "columns", "y", "columns", func() error { return distance.Pairwise(res, dx, dy, dd45, safe.L1, 2) })
	safetest.Refused(t, "dist shape", "dist", "shape", func() error { return distance.Pairwise(res, dx, dx, dd45, safe.L1, 2) })
	safetest.Refused(t, "dtypes", "y", "dtype", func() error { return distance.Pairwise(res, dx, d64, dd, safe.L1, 2) })
	safetest.Refused(t, "f64 into f32", "dist", "dtype", func() error { return distance.Pairwise(res, d64, d64, dd, safe.L1, 2) })
	safetest.Refused(t, "host x", "x", "device", func() error { return distance.Pairwise(res, hm, dx, dd, safe.L1, 2) })
	vec, _ := safe.DeviceVectorFrom(res, x)
	defer vec.Close()
	safetest.Refused(t, "rank 1", "x", "rank", func() error { return distance.Pairwise(res, vec, dx, dd, safe.L1, 2) })
	cx, free := colMajor(t, res, x, 4, 3)
	defer free()
	safetest.Refused(t, "mixed layouts", "dist", "column-major", func() error { return distance.Pairwise(res, cx, cx, dd, safe.L1, 2) })
}

// A failure inside cuVS comes back as a *safe.Error and leaks nothing.
func TestFault(t *testing.T) {
	ctl := safetest.Double(t, "fault injection")
	safetest.Check(t)
	res := safetest.Resources(t)
	x := safetest.Random(11, 3, 2)
	ctl.FailNext("cuvsPairwiseDistance", "injected")
	_, err := distance.PairwiseSlice(res, x, x, 2, safe.L2Expanded, 2)
	var se *safe.Error
	if !errors.As(err, &se) {
		t.Fatalf("%v, want a *safe.Error", err)
	}
	if _, err := distance.PairwiseSlice(res, x, x, 2, safe.L2Expanded, 2); err != nil {
		t.Fatalf("after the fault: %v", err)
	}
}
