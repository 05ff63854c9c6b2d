package quantize

import (
	"math"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

var (
	scalarDataRule  = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: floatTypes, Rank: 2, RowMajor: true}
	scalarCodesRule = kit.Rule{Arg: "codes", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Int8}, Rank: 2, RowMajor: true}
	scalarOutRule   = kit.Rule{Arg: "out", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Int8}, Rank: 2, RowMajor: true}
	scalarFloatOut  = kit.Rule{Arg: "out", Memory: kit.AnyMemory, DTypes: floatTypes, Rank: 2, RowMajor: true}
)

// ScalarParams configures TrainScalar (cuvsScalarQuantizerParams).
type ScalarParams struct {
	// Quantile, in (0, 1], is the fraction of the values the int8 range
	// covers: the range runs from the (1-Quantile)/2 to the (1+Quantile)/2
	// quantile of the training values, so that outliers at both ends are
	// clamped. cuVS's default is 0.99.
	Quantile float32
}

// DefaultScalarParams returns cuVS's defaults, read from the library
// (cuvsScalarQuantizerParamsCreate/Destroy): Quantile 0.99.
func DefaultScalarParams() (ScalarParams, error) {
	const op = "quantize.DefaultScalarParams"
	var p generated.CuvsScalarQuantizerParams_t
	if err := generated.CuvsScalarQuantizerParamsCreate(&p); err != nil {
		return ScalarParams{}, kit.Wrap(op, err)
	}
	out := ScalarParams{Quantile: p.Ref().Quantile}
	return out, kit.Wrap(op, generated.CuvsScalarQuantizerParamsDestroy(p))
}

// Scalar is a trained scalar (int8) quantizer: the range [Min, Max] mapped
// linearly onto -128..127. It is plain data (cuVS's cuvsScalarQuantizer is
// two doubles): copy it, compare it, keep it; it holds nothing to free. The
// zero Scalar is no quantizer: its methods refuse it. A value inside the
// range comes back from InverseTransform within Step()/2.
type Scalar struct {
	min, max float64
	ok       bool
}

// NewScalar returns the quantizer of the range [min, max] (finite, min <=
// max), as trained earlier (Scalar.Min and Max).
func NewScalar(min, max float64) (Scalar, error) {
	const op = "quantize.NewScalar"
	if math.IsNaN(min) || math.IsInf(min, 0) || math.IsNaN(max) || math.IsInf(max, 0) {
		return Scalar{}, kit.Argf(op, "min", "range [%v, %v], want finite bounds", min, max)
	}
	if min > max {
		return Scalar{}, kit.Argf(op, "min", "%v exceeds max %v", min, max)
	}
	return Scalar{min: min, max: max, ok: true}, nil
}

// Min is the value mapped to -128 (and everything below it).
func (q Scalar) Min() float64 { return q.min }

// Max is the value mapped to 127 (and everything above it).
func (q Scalar) Max() float64 { return q.max }

// Step is the width of one int8 step, (Max-Min)/255 (1 when Max <= Min,
// as cuVS then uses a scale of 1): a value inside the range comes back from
// a round trip within Step/2 (plus the rounding of the element type).
func (q Scalar) Step() float64 {
	if q.max > q.min {
		return (q.max - q.min) / 255
	}
	return 1
}

func (q Scalar) c() generated.CuvsScalarQuantizer {
	return generated.CuvsScalarQuantizer{Min: q.min, Max: q.max}
}

func (q Scalar) check(op string) error {
	if !q.ok {
		return kit.Argf(op, "quantizer", "the zero Scalar: train one with TrainScalar or make one with NewScalar")
	}
	return nil
}

// TrainScalar learns the range of an int8 quantizer from dataset (rows ×
// dim, float32, float16 or float64, row-major, host or device memory; cuVS
// samples at most 1e6/dim rows of it, at random). Nil params means cuVS's
// defaults (DefaultScalarParams).
//
// C calls: cuvsScalarQuantizerCreate, cuvsScalarQuantizerTrain,
// cuvsStreamSync, cuvsScalarQuantizerDestroy.
func TrainScalar(res *safe.Resources, dataset dlpack.Tensor, params *ScalarParams) (Scalar, error) {
	const op = "quantize.TrainScalar"
	p, err := kit.Or(params, DefaultScalarParams)
	if err != nil {
		return Scalar{}, err
	}
	if !(p.Quantile > 0 && p.Quantile <= 1) {
		return Scalar{}, kit.Argf(op, "params.Quantile", "%v, want a value in (0, 1]", p.Quantile)
	}
	dv, err := input(op, res, scalarDataRule, dataset)
	if err != nil {
		return Scalar{}, err
	}
	var h generated.CuvsScalarQuantizer_t
	if err := generated.CuvsScalarQuantizerCreate(&h); err != nil {
		return Scalar{}, kit.Wrap(op, err)
	}
	cp := generated.CuvsScalarQuantizerParams{Quantile: p.Quantile}
	err = call(op, res, []*dlpack.View{&dv}, nil, func(r generated.CuvsResources_t, in, _ []*generated.DLManagedTensor) error {
		return generated.CuvsScalarQuantizerTrain(r, kit.Params[generated.CuvsScalarQuantizerParams_t](res, &cp), in[0], h)
	})
	q := Scalar{min: h.Ref().Min, max: h.Ref().Max, ok: true}
	if derr := generated.CuvsScalarQuantizerDestroy(h); err == nil && derr != nil {
		err = kit.Wrap(op, derr)
	}
	if err != nil {
		return Scalar{}, err
	}
	return q, nil
}

// Transform quantizes dataset (rows × dim, float32, float16 or float64,
// row-major, host or device memory) into out (rows × dim int8, on the same
// side: device-accessible when dataset is, host-accessible when it is in
// host memory): values at or below Min give -128, at or above Max 127, the
// others round to the nearest step. It waits for res's stream: out is
// ready when it returns. Host data must be finite.
//
// C calls: cuvsScalarQuantizerTransform, cuvsStreamSync.
func (q Scalar) Transform(res *safe.Resources, dataset dlpack.Tensor, out dlpack.TensorMut) error {
	const op = "quantize.Scalar.Transform"
	if err := q.check(op); err != nil {
		return err
	}
	dv, err := input(op, res, scalarDataRule, dataset)
	if err != nil {
		return err
	}
	om, err := output(op, res, scalarOutRule, out)
	if err != nil {
		return err
	}
	if err := sameSide(op, "out", dv.Device(), om.Device()); err != nil {
		return err
	}
	if err := shape(op, "out", &om, dv.Dim(0), dv.Dim(1)); err != nil {
		return err
	}
	cq := q.c()
	return call(op, res, []*dlpack.View{&dv}, []*dlpack.ViewMut{&om}, func(r generated.CuvsResources_t, in, o []*generated.DLManagedTensor) error {
		return generated.CuvsScalarQuantizerTransform(r, kit.Params[generated.CuvsScalarQuantizer_t](res, &cq), in[0], o[0])
	})
}

// InverseTransform maps int8 codes (rows × dim, row-major, host or device
// memory) back to values in out (rows × dim, float32, float16 or float64,
// on the same side): Min + (code+128) × Step. It waits for res's stream.
//
// C calls: cuvsScalarQuantizerInverseTransform, cuvsStreamSync.
func (q Scalar) InverseTransform(res *safe.Resources, codes dlpack.Tensor, out dlpack.TensorMut) error {
	const op = "quantize.Scalar.InverseTransform"
	if err := q.check(op); err != nil {
		return err
	}
	cv, err := input(op, res, scalarCodesRule, codes)
	if err != nil {
		return err
	}
	om, err := output(op, res, scalarFloatOut, out)
	if err != nil {
		return err
	}
	if err := sameSide(op, "out", cv.Device(), om.Device()); err != nil {
		return err
	}
	if err := shape(op, "out", &om, cv.Dim(0), cv.Dim(1)); err != nil {
		return err
	}
	cq := q.c()
	return call(op, res, []*dlpack.View{&cv}, []*dlpack.ViewMut{&om}, func(r generated.CuvsResources_t, in, o []*generated.DLManagedTensor) error {
		return generated.CuvsScalarQuantizerInverseTransform(r, kit.Params[generated.CuvsScalarQuantizer_t](res, &cq), in[0], o[0])
	})
}
