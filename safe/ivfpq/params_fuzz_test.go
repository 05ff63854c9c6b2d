package ivfpq

import (
	"errors"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
)

// FuzzParams feeds arbitrary index and search parameters (a service may
// take them from its users) to the checks Build and Search make before any
// C call: they never panic, every refusal is an *ArgError naming a field of
// params, and what they accept is within the ranges cuVS checks.
func FuzzParams(f *testing.F) {
	f.Add(int32(0), uint32(1024), uint32(20), 0.5, uint32(8), uint32(0), int32(0), int32(1), uint32(256), int64(128),
		uint32(20), int32(0), int32(0), int32(0), uint32(4096), 1.0)
	f.Add(int32(99), uint32(0), uint32(0), 0.0, uint32(3), uint32(7), int32(5), int32(-1), uint32(0), int64(10),
		uint32(0), int32(8), int32(2), int32(3), uint32(0), 2.0)
	f.Fuzz(func(t *testing.T, metric int32, nLists, iters uint32, frac float64, bits, pqDim uint32, kind, layout int32,
		maxTrain uint32, dim int64, nProbes uint32, lut, internal, coarse int32, batch uint32, carveout float64) {
		p := IndexParams{Metric: safe.Metric(metric), NLists: nLists, KMeansNIters: iters, KMeansTrainsetFraction: frac,
			PQBits: bits, PQDim: pqDim, CodebookKind: CodebookKind(kind), CodesLayout: CodesLayout(layout),
			MaxTrainPointsPerPQCode: maxTrain}
		named := func(err error) {
			var ae *safe.ArgError
			if !errors.As(err, &ae) || !strings.HasPrefix(ae.Arg, "params.") {
				t.Fatalf("refusal %v (%T) names no field of params", err, err)
			}
		}
		if err := p.validate("fuzz", dim); err != nil {
			named(err)
		} else if p.NLists < 1 || p.NLists > 1<<24 || p.PQBits < 4 || p.PQBits > 8 || !(frac > 0 && frac <= 1) ||
			(dim > 0 && p.PQDim != 0 && p.PQDim*p.PQBits%8 != 0) {
			t.Fatalf("accepted out-of-range index params %+v (dim %d)", p, dim)
		}
		s := SearchParams{NProbes: nProbes, LUTDtype: CUDAType(lut), InternalDistanceDtype: CUDAType(internal),
			CoarseSearchDtype: CUDAType(coarse), MaxInternalBatchSize: batch, PreferredShmemCarveout: carveout}
		if err := s.validate("fuzz"); err != nil {
			named(err)
		} else if s.NProbes < 1 || s.MaxInternalBatchSize < 1 || s.LUTDtype.size() > s.InternalDistanceDtype.size() ||
			!(carveout >= 0 && carveout <= 1) {
			t.Fatalf("accepted out-of-range search params %+v", s)
		}
	})
}
