package quantize_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/quantize"
)

// Why PQ.Transform and InverseTransform require labels with UseVQ, read
// from cuVS's C++ (process_and_fill_codes_subspaces: labels are predicted
// only into a vector given; the kernels use label 0 without one), checked
// through the raw C call: without labels, the codes are those of every row
// taken against VQ center 0, which decode (without labels, against center
// 0 too) to rows far from the originals.
func TestCuVSEncodesAgainstCenterZeroWithoutLabels(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim = 200, 8
	data := safetest.Random(23, rows, dim)
	for i := 0; i < rows/2; i++ { // two far-apart clusters
		for j := 0; j < dim; j++ {
			data[i*dim+j] += 10
		}
	}
	in := host(t, data, rows, dim)
	q, err := quantize.BuildPQ(res, in, &quantize.PQParams{PQBits: 4, PQDim: 4, UseSubspaces: true, UseVQ: true, VQNCenters: 2,
		KMeansNIters: 5, KMeansType: quantize.KMeansBalanced, MaxTrainPointsPerPQCode: 256, MaxTrainPointsPerVQCluster: 1024})
	must(t, err)
	safetest.Close(t, q)
	labels := devVec[uint32](t, res, rows)
	good := devZero[uint8](t, res, rows, q.EncodedDim())
	must(t, q.Transform(res, in, good, labels))
	lab := make([]uint32, rows)
	must(t, labels.CopyToHost(res, lab))
	zero := make([]uint32, rows)
	zeros, err := safe.DeviceVectorFrom(res, zero)
	must(t, err)
	defer zeros.Close()
	// The raw call without labels, as cuVS allows it.
	raw := devZero[uint8](t, res, rows, q.EncodedDim())
	rv, err := in.View()
	must(t, err)
	rm, err := raw.ViewMut()
	must(t, err)
	c := dlpack.Begin("test")
	a, err := c.In(&rv)
	must(t, err)
	b, err := c.Out(&rm)
	must(t, err)
	h, err := kit.Lock(res, "test")
	must(t, err)
	err = generated.CuvsProductQuantizerTransform(h, quantize.PQHandle(q), a, b, nil)
	if err == nil {
		err = generated.CuvsStreamSync(h)
	}
	kit.Unlock(res)
	c.End()
	must(t, err)
	// Decoded against center 0 for every row (what cuVS does without labels).
	out := devZero[float32](t, res, rows, dim)
	must(t, q.InverseTransform(res, raw, out, zeros))
	back := toHost(t, res, out)
	out2 := devZero[float32](t, res, rows, dim)
	must(t, q.InverseTransform(res, good, out2, labels))
	back2 := toHost(t, res, out2)
	var bad, ok float64
	for i := range data {
		bad += float64((back[i] - data[i]) * (back[i] - data[i]))
		ok += float64((back2[i] - data[i]) * (back2[i] - data[i]))
	}
	if !(bad > 4*ok) {
		t.Errorf("without labels: squared error %v, with labels %v: center 0 for every row should be much worse", bad, ok)
	}
}
