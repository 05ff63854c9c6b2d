package quantize_test

import (
	"math"
	"sort"
	"testing"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/quantize"
)

// wantRange is cuVS's quantile_min_max over every value (all rows are
// sampled when rows <= 1e6/dim).
func wantRange(vals []float64, quantile float64) (float64, float64) {
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	pos := (0.5 + 0.5*quantile) * float64(len(s))
	pmax := int(math.Ceil(pos)) - 1
	pmin := len(s) - pmax - 1
	return s[pmin], s[pmax]
}

// wantCode is cuVS's quantize_op for one value.
func wantCode(x, min, max float64) int8 {
	scale := 1.0
	if max > min {
		scale = 255 / (max - min)
	}
	offset := -128 - min*scale
	switch {
	case !(min < x):
		return -128
	case !(x < max):
		return 127
	}
	return int8(math.Round(float64(float32(scale*x + offset))))
}

// halfway reports a value whose scaled position is within 1e-4 of a
// rounding boundary, where a compiler's fused multiply-add may round the
// other way.
func halfway(x, min, max float64) bool {
	scale := 255 / (max - min)
	r := scale*x + (-128 - min*scale)
	return math.Abs(r-math.Floor(r)-0.5) < 1e-4
}

func scalarData(rows, dim int) []float32 {
	d := safetest.Random(7, rows, dim)
	for i := range d {
		d[i] = d[i]*4 - 2
	}
	d[3], d[17] = 40, -55 // outliers the quantile clamps
	return d
}

// Train on host float32 rows: the range is the quantiles computed in Go,
// every code is the quantize_op computed in Go, and the values inside the
// range come back within half a step.
func TestScalarRoundTripHost(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim = 300, 8
	data := scalarData(rows, dim)
	p, err := quantize.DefaultScalarParams()
	must(t, err)
	if p.Quantile != 0.99 {
		t.Errorf("default quantile %v, want cuVS's 0.99", p.Quantile)
	}
	p.Quantile = 0.9
	q, err := quantize.TrainScalar(res, host(t, data, rows, dim), &p)
	must(t, err)
	vals := make([]float64, len(data))
	for i, v := range data {
		vals[i] = float64(v)
	}
	wmin, wmax := wantRange(vals, float64(float32(0.9)))
	if q.Min() != wmin || q.Max() != wmax {
		t.Fatalf("range [%v, %v], want [%v, %v]", q.Min(), q.Max(), wmin, wmax)
	}
	codes := make([]int8, rows*dim)
	must(t, q.Transform(res, host(t, data, rows, dim), host(t, codes, rows, dim)))
	for i, v := range data {
		w := wantCode(float64(v), q.Min(), q.Max())
		if codes[i] != w && !(halfway(float64(v), q.Min(), q.Max()) && (codes[i]-w == 1 || w-codes[i] == 1)) {
			t.Fatalf("code %d of %v = %d, want %d", i, v, codes[i], w)
		}
	}
	back := make([]float32, rows*dim)
	must(t, q.InverseTransform(res, host(t, codes, rows, dim), host(t, back, rows, dim)))
	step := q.Step()
	for i, v := range data {
		x := float64(v)
		if x <= q.Min() || x >= q.Max() {
			continue
		}
		if d := math.Abs(float64(back[i]) - x); d > step/2+1e-5 {
			t.Fatalf("value %d: %v came back as %v, %v away (step %v)", i, v, back[i], d, step)
		}
	}
}

// The device path gives the same range and codes (within one step: a GPU
// may fuse the multiply-add), and float64 and float16 rows are accepted.
func TestScalarDeviceAndTypes(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim = 200, 6
	data := scalarData(rows, dim)
	q, err := quantize.TrainScalar(res, dev(t, res, data, rows, dim), nil)
	must(t, err)
	vals := make([]float64, len(data))
	for i, v := range data {
		vals[i] = float64(v)
	}
	wmin, wmax := wantRange(vals, float64(float32(0.99)))
	if q.Min() != wmin || q.Max() != wmax {
		t.Fatalf("device range [%v, %v], want [%v, %v]", q.Min(), q.Max(), wmin, wmax)
	}
	out := devZero[int8](t, res, rows, dim)
	must(t, q.Transform(res, dev(t, res, data, rows, dim), out))
	for i, c := range toHost(t, res, out) {
		if w := wantCode(float64(data[i]), q.Min(), q.Max()); c-w > 1 || w-c > 1 {
			t.Fatalf("device code %d = %d, want %d", i, c, w)
		}
	}

	d64 := make([]float64, len(data))
	h16 := make([]float16.Float16, len(data))
	for i, v := range data {
		d64[i] = float64(v) + 1e-9 // not representable in float32
		h16[i] = float16.Fromfloat32(v)
	}
	q64, err := quantize.TrainScalar(res, host(t, d64, rows, dim), nil)
	must(t, err)
	w64min, w64max := wantRange(d64, float64(float32(0.99)))
	if q64.Min() != w64min || q64.Max() != w64max {
		t.Errorf("float64 range [%v, %v], want [%v, %v]", q64.Min(), q64.Max(), w64min, w64max)
	}
	c64 := make([]int8, len(d64))
	must(t, q64.Transform(res, host(t, d64, rows, dim), host(t, c64, rows, dim)))
	back64 := make([]float64, len(d64))
	must(t, q64.InverseTransform(res, host(t, c64, rows, dim), host(t, back64, rows, dim)))
	for i, x := range d64 {
		if x > q64.Min() && x < q64.Max() && math.Abs(back64[i]-x) > q64.Step()/2+1e-12 {
			t.Fatalf("float64 value %v came back as %v", x, back64[i])
		}
	}
	q16, err := quantize.TrainScalar(res, host(t, h16, rows, dim), nil)
	must(t, err)
	c16 := make([]int8, len(h16))
	must(t, q16.Transform(res, host(t, h16, rows, dim), host(t, c16, rows, dim)))
	back16 := make([]float16.Float16, len(h16))
	must(t, q16.InverseTransform(res, host(t, c16, rows, dim), host(t, back16, rows, dim)))
	for i, h := range h16 {
		x := float64(h.Float32())
		// half precision: the step plus float16's rounding of the result
		if x > q16.Min() && x < q16.Max() && math.Abs(float64(back16[i].Float32())-x) > q16.Step()/2+math.Abs(x)/1024+1e-3 {
			t.Fatalf("float16 value %v came back as %v", x, back16[i].Float32())
		}
	}
}

// A Scalar made from a saved range quantizes as the trained one.
func TestNewScalar(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim = 50, 4
	data := scalarData(rows, dim)
	q, err := quantize.TrainScalar(res, host(t, data, rows, dim), nil)
	must(t, err)
	r, err := quantize.NewScalar(q.Min(), q.Max())
	must(t, err)
	if r != q {
		t.Errorf("NewScalar(%v, %v) = %+v, want %+v", q.Min(), q.Max(), r, q)
	}
	for _, c := range [][2]float64{{1, 0}, {math.NaN(), 1}, {0, math.Inf(1)}} {
		safetest.Refused(t, "NewScalar", "min", "", func() error { _, err := quantize.NewScalar(c[0], c[1]); return err })
	}
	var zero quantize.Scalar
	safetest.Refused(t, "zero Scalar", "quantizer", "zero Scalar", func() error {
		return zero.Transform(res, host(t, data, rows, dim), host(t, make([]int8, rows*dim), rows, dim))
	})
}
