package quantize_test

import (
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/quantize"
)

// Every C call of every operation made to fail in turn: the operation
// returns the library's error, consumes the fault, and leaks nothing
// (safetest.Check: every handle and allocation released, no misuse). A
// failing destroy leaves its object in the library, whatever the caller
// does: only Close's, which can be retried, is injected.
func TestFaults(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "fault injection")
	res := safetest.Resources(t)
	const rows, dim = 64, 8
	data := safetest.Random(13, rows, dim)
	in := host(t, data, rows, dim)
	sq, err := quantize.TrainScalar(res, in, nil)
	must(t, err)
	bq, err := quantize.TrainBinary(res, in, nil)
	must(t, err)
	safetest.Close(t, bq)
	pp := &quantize.PQParams{PQBits: 4, PQDim: 2, UseSubspaces: true, KMeansNIters: 2, KMeansType: quantize.KMeansBalanced, MaxTrainPointsPerPQCode: 256}
	pq, err := quantize.BuildPQ(res, in, pp)
	must(t, err)
	safetest.Close(t, pq)
	codes := devZero[uint8](t, res, rows, pq.EncodedDim())
	out := devZero[float32](t, res, rows, dim)
	must(t, pq.Transform(res, in, codes, nil))
	errOf := func(_ any, err error) error { return err }
	ops := []struct {
		name string
		fns  []string
		call func() error
	}{
		{"DefaultScalarParams", []string{"cuvsScalarQuantizerParamsCreate"}, func() error { return errOf(quantize.DefaultScalarParams()) }},
		{"TrainScalar", []string{"cuvsScalarQuantizerCreate", "cuvsScalarQuantizerTrain", "cuvsStreamSync"},
			func() error { return errOf(quantize.TrainScalar(res, in, &quantize.ScalarParams{Quantile: 0.9})) }},
		{"Scalar.Transform", []string{"cuvsScalarQuantizerTransform", "cuvsStreamSync"},
			func() error { return sq.Transform(res, in, host(t, make([]int8, rows*dim), rows, dim)) }},
		{"Scalar.InverseTransform", []string{"cuvsScalarQuantizerInverseTransform", "cuvsStreamSync"},
			func() error {
				return sq.InverseTransform(res, host(t, make([]int8, rows*dim), rows, dim), host(t, make([]float32, rows*dim), rows, dim))
			}},
		{"DefaultBinaryParams", []string{"cuvsBinaryQuantizerParamsCreate"}, func() error { return errOf(quantize.DefaultBinaryParams()) }},
		{"TrainBinary", []string{"cuvsBinaryQuantizerCreate", "cuvsBinaryQuantizerTrain", "cuvsStreamSync"},
			func() error {
				return errOf(quantize.TrainBinary(res, in, &quantize.BinaryParams{Threshold: quantize.ThresholdMean}))
			}},
		{"Binary.Transform", []string{"cuvsBinaryQuantizerTransformWithParams", "cuvsStreamSync"},
			func() error { return bq.Transform(res, in, host(t, make([]uint8, rows), rows, 1)) }},
		{"BinaryTransform", []string{"cuvsBinaryQuantizerTransform", "cuvsStreamSync"},
			func() error { return quantize.BinaryTransform(res, in, host(t, make([]uint8, rows), rows, 1)) }},
		{"DefaultPQParams", []string{"cuvsProductQuantizerParamsCreate"}, func() error { return errOf(quantize.DefaultPQParams()) }},
		{"BuildPQ", []string{"cuvsProductQuantizerCreate", "cuvsProductQuantizerBuild", "cuvsStreamSync", "cuvsProductQuantizerGetPqBits",
			"cuvsProductQuantizerGetPqDim", "cuvsProductQuantizerGetEncodedDim", "cuvsProductQuantizerGetUseVq"},
			func() error { return errOf(quantize.BuildPQ(res, in, pp)) }},
		{"PQ.Transform", []string{"cuvsProductQuantizerTransform", "cuvsStreamSync"}, func() error { return pq.Transform(res, in, codes, nil) }},
		{"PQ.InverseTransform", []string{"cuvsProductQuantizerInverseTransform", "cuvsStreamSync"}, func() error { return pq.InverseTransform(res, codes, out, nil) }},
		{"PQ.PQCodebook", []string{"cuvsProductQuantizerGetPqCodebook"}, func() error { return errOf(pq.PQCodebook()) }},
		{"PQ.VQCodebook", []string{"cuvsProductQuantizerGetVqCodebook"}, func() error { return errOf(pq.VQCodebook()) }},
	}
	for _, op := range ops {
		for _, fn := range op.fns {
			ctl.FailNext(fn, "injected "+fn)
			err := op.call()
			if err == nil || !strings.Contains(err.Error(), "injected "+fn) {
				t.Errorf("%s with %s failing: %v, want the library's error", op.name, fn, err)
			}
			if n := ctl.PendingFaults(); n != 0 {
				t.Errorf("%s never called %s", op.name, fn)
				ctl.ClearFaults()
			}
		}
	}
	// Close whose destroy fails keeps the quantizer; the next Close frees it.
	q2, err := quantize.BuildPQ(res, in, pp)
	must(t, err)
	ctl.FailNext("cuvsProductQuantizerDestroy", "injected destroy")
	if err := q2.Close(); err == nil {
		t.Error("Close with a failing destroy: no error")
	}
	must(t, q2.Close())
}
