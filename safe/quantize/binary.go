package quantize

import (
	"fmt"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

var (
	binaryDataRule = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: floatTypes, Rank: 2, RowMajor: true}
	binaryOutRule  = kit.Rule{Arg: "out", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Uint8}, Rank: 2, RowMajor: true}
)

var liveBinary = live.New("quantize.Binary")

// Threshold is what a bit of the binary quantizer compares each value
// with (cuvsBinaryQuantizerThreshold).
type Threshold int32

// The thresholds.
const (
	// ThresholdZero sets a bit for a positive value.
	ThresholdZero = Threshold(generated.CuvsBinaryQuantizerThreshold_ZERO)
	// ThresholdMean sets a bit for a value above its column's mean over the
	// training set.
	ThresholdMean = Threshold(generated.CuvsBinaryQuantizerThreshold_MEAN)
	// ThresholdSamplingMedian sets a bit for a value above its column's
	// median over a sample of the training rows (SamplingRatio of them).
	// On device memory it does not give medians in cuVS 26.06 and 26.08:
	// after sorting the sampled columns, the C++ code copies the
	// thresholds from the unsorted samples. On host memory it is the
	// median of an odd sample of rows taken with a fixed prime stride
	// (every row when SamplingRatio is 1 and the rows are odd in number).
	ThresholdSamplingMedian = Threshold(generated.CuvsBinaryQuantizerThreshold_SAMPLING_MEDIAN)
)

// String returns the threshold's name.
func (t Threshold) String() string {
	switch t {
	case ThresholdZero:
		return "Zero"
	case ThresholdMean:
		return "Mean"
	case ThresholdSamplingMedian:
		return "SamplingMedian"
	}
	return fmt.Sprintf("Threshold(%d)", int32(t))
}

// BinaryParams configures TrainBinary (cuvsBinaryQuantizerParams).
type BinaryParams struct {
	// Threshold: ThresholdZero, ThresholdMean (cuVS's default) or
	// ThresholdSamplingMedian.
	Threshold Threshold
	// SamplingRatio, in (0, 1], is the fraction of the rows the median is
	// taken over (ThresholdSamplingMedian only; cuVS's default 0.1).
	SamplingRatio float32
}

// DefaultBinaryParams returns cuVS's defaults, read from the library
// (cuvsBinaryQuantizerParamsCreate/Destroy): ThresholdMean, SamplingRatio
// 0.1.
func DefaultBinaryParams() (BinaryParams, error) {
	const op = "quantize.DefaultBinaryParams"
	var p generated.CuvsBinaryQuantizerParams_t
	if err := generated.CuvsBinaryQuantizerParamsCreate(&p); err != nil {
		return BinaryParams{}, kit.Wrap(op, err)
	}
	out := BinaryParams{Threshold: Threshold(p.Ref().Threshold), SamplingRatio: p.Ref().SamplingRatio}
	return out, kit.Wrap(op, generated.CuvsBinaryQuantizerParamsDestroy(p))
}

func (p *BinaryParams) validate(op string) error {
	switch p.Threshold {
	case ThresholdZero, ThresholdMean:
	case ThresholdSamplingMedian:
		if !(p.SamplingRatio > 0 && p.SamplingRatio <= 1) {
			return kit.Argf(op, "params.SamplingRatio", "%v, want a value in (0, 1]", p.SamplingRatio)
		}
	default:
		return kit.Argf(op, "params.Threshold", "%s, want Zero, Mean or SamplingMedian", p.Threshold)
	}
	return nil
}

// BinaryCols is the number of bytes a binary code of dim values takes,
// ceil(dim/8): bit j%8 of byte j/8 is value j's.
func BinaryCols(dim int) int { return (dim + 7) / 8 }

// Binary is a trained binary quantizer: one bit per value, set when the
// value exceeds its column's threshold. It holds the thresholds in the
// library; transforms may run from any number of goroutines, each with its
// own safe.Resources; Close waits for them.
type Binary struct {
	h         generated.CuvsBinaryQuantizer_t // C memory
	dtype     dlpack.DataType
	dim       int64
	threshold Threshold
	life      kit.Life
}

// TrainBinary learns the thresholds of a binary quantizer from dataset
// (rows × dim, float32, float16 or float64, row-major, host or device
// memory; host data must be finite). The quantizer transforms data of that
// element type and dimension only. Nil params means cuVS's defaults
// (DefaultBinaryParams).
//
// cuVS 26.06 and 26.08 never free a trained binary quantizer's thresholds
// (dim values of the element type, in device memory): Close frees the
// handle, cuvsBinaryQuantizerDestroy frees nothing more.
//
// C calls: cuvsBinaryQuantizerCreate, cuvsBinaryQuantizerTrain,
// cuvsStreamSync (cuvsBinaryQuantizerDestroy on failure).
func TrainBinary(res *safe.Resources, dataset dlpack.Tensor, params *BinaryParams) (*Binary, error) {
	const op = "quantize.TrainBinary"
	p, err := kit.Or(params, DefaultBinaryParams)
	if err != nil {
		return nil, err
	}
	if err := p.validate(op); err != nil {
		return nil, err
	}
	dv, err := input(op, res, binaryDataRule, dataset)
	if err != nil {
		return nil, err
	}
	var h generated.CuvsBinaryQuantizer_t
	if err := generated.CuvsBinaryQuantizerCreate(&h); err != nil {
		return nil, kit.Wrap(op, err)
	}
	q := &Binary{h: h, dtype: dv.DType(), dim: dv.Dim(1), threshold: p.Threshold}
	kit.Start(&q.life, q, "quantize.Binary(%p)", liveBinary, func() error { return generated.CuvsBinaryQuantizerDestroy(h) })
	_ = q.life.Keep(res, op) // the build that follows refuses res as Keep would
	cp := generated.CuvsBinaryQuantizerParams{Threshold: generated.CuvsBinaryQuantizerThreshold(p.Threshold), SamplingRatio: p.SamplingRatio}
	if err := call(op, res, []*dlpack.View{&dv}, nil, func(r generated.CuvsResources_t, in, _ []*generated.DLManagedTensor) error {
		return generated.CuvsBinaryQuantizerTrain(r, kit.Params[generated.CuvsBinaryQuantizerParams_t](res, &cp), in[0], h)
	}); err != nil {
		q.life.Fail()
		return nil, err
	}
	return q, nil
}

// Dim returns the dimension the quantizer was trained on (0 for a nil or
// zero Binary).
func (q *Binary) Dim() int {
	if q == nil {
		return 0
	}
	return int(q.dim)
}

// DType returns the element type the quantizer was trained on and
// transforms.
func (q *Binary) DType() dlpack.DataType {
	if q == nil {
		return dlpack.DataType{}
	}
	return q.dtype
}

// Threshold returns the threshold it was trained with.
func (q *Binary) Threshold() Threshold {
	if q == nil {
		return 0
	}
	return q.threshold
}

// Transform writes the binary codes of dataset (rows × Dim(), DType(),
// row-major, host or device memory; cuVS reads the quantizer as the
// dataset's element type, so another one is refused) into out (rows ×
// BinaryCols(Dim()) uint8, on the same side). It waits for res's stream.
//
// C calls: cuvsBinaryQuantizerTransformWithParams, cuvsStreamSync.
func (q *Binary) Transform(res *safe.Resources, dataset dlpack.Tensor, out dlpack.TensorMut) error {
	if q == nil {
		return kit.Argf("quantize.Binary.Transform", "quantizer", "nil *Binary")
	}
	const op = "quantize.Binary.Transform"
	if err := q.life.Enter(op); err != nil {
		return err
	}
	defer q.life.Leave()
	dv, err := input(op, res, binaryDataRule, dataset)
	if err != nil {
		return err
	}
	if dv.DType() != q.dtype {
		return kit.Argf(op, "dataset", "%s elements, the quantizer was trained on %s", dv.DType(), q.dtype)
	}
	if dv.Dim(1) != q.dim {
		return kit.Argf(op, "dataset", "%d columns, the quantizer was trained on %d", dv.Dim(1), q.dim)
	}
	om, err := binaryOut(op, res, &dv, out)
	if err != nil {
		return err
	}
	return call(op, res, []*dlpack.View{&dv}, []*dlpack.ViewMut{&om}, func(r generated.CuvsResources_t, in, o []*generated.DLManagedTensor) error {
		return generated.CuvsBinaryQuantizerTransformWithParams(r, q.h, in[0], o[0])
	})
}

func binaryOut(op string, res *safe.Resources, dv *dlpack.View, out dlpack.TensorMut) (dlpack.ViewMut, error) {
	om, err := output(op, res, binaryOutRule, out)
	if err != nil {
		return om, err
	}
	if err := sameSide(op, "out", dv.Device(), om.Device()); err != nil {
		return om, err
	}
	return om, shape(op, "out", &om, dv.Dim(0), int64(BinaryCols(int(dv.Dim(1)))))
}

// BinaryTransform writes the sign bits of dataset (rows × dim, float32,
// float16 or float64, row-major, host or device memory) into out (rows ×
// BinaryCols(dim) uint8, on the same side): a bit is set for a positive
// value, as with a ThresholdZero quantizer, without keeping one. It waits
// for res's stream.
//
// cuvsBinaryQuantizerTransform trains a quantizer for each call and, like
// cuvsBinaryQuantizerDestroy, never frees it (an empty threshold vector:
// no device memory, a small host allocation per call).
//
// C calls: cuvsBinaryQuantizerTransform, cuvsStreamSync.
func BinaryTransform(res *safe.Resources, dataset dlpack.Tensor, out dlpack.TensorMut) error {
	const op = "quantize.BinaryTransform"
	dv, err := input(op, res, binaryDataRule, dataset)
	if err != nil {
		return err
	}
	om, err := binaryOut(op, res, &dv, out)
	if err != nil {
		return err
	}
	return call(op, res, []*dlpack.View{&dv}, []*dlpack.ViewMut{&om}, func(r generated.CuvsResources_t, in, o []*generated.DLManagedTensor) error {
		return generated.CuvsBinaryQuantizerTransform(r, in[0], o[0])
	})
}

// Close frees the quantizer's handle (cuvsBinaryQuantizerDestroy), waiting
// for the transforms in flight. Closing twice, or closing the zero Binary,
// is harmless. cuVS keeps the trained thresholds allocated (see
// TrainBinary).
func (q *Binary) Close() error {
	if q == nil {
		return nil
	}
	return q.life.Close("quantize.Binary.Close")
}
