package quantize_test

import (
	"math"
	"sort"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/quantize"
)

// wantBits packs x_j > th_j, bit j%8 of byte j/8; skip reports values too
// close to their threshold for the GPU's rounding to be predictable.
func wantBits(data []float32, rows, dim int, th []float64) (bits []uint8, near []bool) {
	cols := quantize.BinaryCols(dim)
	bits = make([]uint8, rows*cols)
	near = make([]bool, rows*dim)
	for i := 0; i < rows; i++ {
		for j := 0; j < dim; j++ {
			v := float64(data[i*dim+j])
			t := 0.0
			if th != nil {
				t = th[j]
			}
			if math.Abs(v-t) < 1e-4 {
				near[i*dim+j] = true
			}
			if v-t > 0 {
				bits[i*cols+j/8] |= 1 << (j % 8)
			}
		}
	}
	return bits, near
}

func checkBits(t *testing.T, what string, got, want []uint8, near []bool, rows, dim int) {
	t.Helper()
	cols := quantize.BinaryCols(dim)
	for i := 0; i < rows; i++ {
		for j := 0; j < dim; j++ {
			if near[i*dim+j] {
				continue
			}
			g, w := got[i*cols+j/8]>>(j%8)&1, want[i*cols+j/8]>>(j%8)&1
			if g != w {
				t.Fatalf("%s: row %d value %d: bit %d, want %d", what, i, j, g, w)
			}
		}
	}
}

func columnMeans(data []float32, rows, dim int) []float64 {
	m := make([]float64, dim)
	for j := 0; j < dim; j++ {
		for i := 0; i < rows; i++ {
			m[j] += float64(data[i*dim+j])
		}
		m[j] /= float64(rows)
	}
	return m
}

// Zero, mean and (host) median thresholds, each checked bit by bit against
// the thresholds computed in Go; dim 13 leaves a partial last byte.
func TestBinaryThresholds(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim = 101, 13
	data := safetest.Random(11, rows, dim)
	for i := range data {
		data[i] = data[i]*2 - 0.7
	}
	d, err := quantize.DefaultBinaryParams()
	must(t, err)
	if d.Threshold != quantize.ThresholdMean || d.SamplingRatio != 0.1 {
		t.Errorf("defaults %+v, want cuVS's Mean and 0.1", d)
	}
	medians := make([]float64, dim)
	for j := range medians {
		col := make([]float64, rows)
		for i := range col {
			col[i] = float64(data[i*dim+j])
		}
		sort.Float64s(col)
		medians[j] = col[(rows-1)/2]
	}
	for _, c := range []struct {
		p  quantize.BinaryParams
		th []float64
	}{
		{quantize.BinaryParams{Threshold: quantize.ThresholdZero}, nil},
		{quantize.BinaryParams{Threshold: quantize.ThresholdMean}, columnMeans(data, rows, dim)},
		// every row, odd in number: the exact medians
		{quantize.BinaryParams{Threshold: quantize.ThresholdSamplingMedian, SamplingRatio: 1}, medians},
	} {
		for _, onDevice := range []bool{false, true} {
			if onDevice && c.p.Threshold == quantize.ThresholdSamplingMedian {
				continue // not a median on device memory (see the package doc)
			}
			var in dlpack.Tensor = host(t, data, rows, dim)
			if onDevice {
				in = dev(t, res, data, rows, dim)
			}
			q, err := quantize.TrainBinary(res, in, &c.p)
			must(t, err)
			safetest.Close(t, q)
			if q.Dim() != dim || q.DType() != dlpack.Float32 || q.Threshold() != c.p.Threshold {
				t.Errorf("quantizer %d %s %s", q.Dim(), q.DType(), q.Threshold())
			}
			want, near := wantBits(data, rows, dim, c.th)
			got := make([]uint8, rows*quantize.BinaryCols(dim))
			must(t, q.Transform(res, host(t, data, rows, dim), host(t, got, rows, quantize.BinaryCols(dim))))
			checkBits(t, c.p.Threshold.String()+" host", got, want, near, rows, dim)
			dout := devZero[uint8](t, res, rows, quantize.BinaryCols(dim))
			must(t, q.Transform(res, dev(t, res, data, rows, dim), dout))
			checkBits(t, c.p.Threshold.String()+" device", toHost(t, res, dout), want, near, rows, dim)
		}
	}
	got := make([]uint8, rows*quantize.BinaryCols(dim))
	must(t, quantize.BinaryTransform(res, host(t, data, rows, dim), host(t, got, rows, quantize.BinaryCols(dim))))
	want, near := wantBits(data, rows, dim, nil)
	checkBits(t, "BinaryTransform", got, want, near, rows, dim)
}

// A quantizer transforms its own element type and dimension only.
func TestBinaryRefusesOtherData(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim = 20, 9
	data := safetest.Random(3, rows, dim)
	q, err := quantize.TrainBinary(res, host(t, data, rows, dim), nil)
	must(t, err)
	safetest.Close(t, q)
	out := host(t, make([]uint8, rows*2), rows, 2)
	d64 := make([]float64, len(data))
	safetest.Refused(t, "float64 rows", "dataset", "float32", func() error {
		return q.Transform(res, host(t, d64, rows, dim), out)
	})
	safetest.Refused(t, "8 columns", "dataset", "columns", func() error {
		return q.Transform(res, host(t, data[:rows*8], rows, 8), host(t, make([]uint8, rows), rows, 1))
	})
	safetest.Refused(t, "one byte per row", "out", "shape", func() error {
		return q.Transform(res, host(t, data, rows, dim), host(t, make([]uint8, rows), rows, 1))
	})
	dout, din := devZero[uint8](t, res, rows, 2), dev(t, res, data, rows, dim)
	safetest.Refused(t, "device out for host rows", "out", "host", func() error {
		return q.Transform(res, host(t, data, rows, dim), dout)
	})
	safetest.Refused(t, "host out for device rows", "out", "device", func() error {
		return q.Transform(res, din, out)
	})
	safetest.Refused(t, "int8 out", "out", "", func() error {
		return q.Transform(res, host(t, data, rows, dim), host(t, make([]int8, rows*2), rows, 2))
	})
	safetest.Refused(t, "median ratio 0", "params.SamplingRatio", "", func() error {
		_, err := quantize.TrainBinary(res, host(t, data, rows, dim), &quantize.BinaryParams{Threshold: quantize.ThresholdSamplingMedian})
		return err
	})
	safetest.Refused(t, "threshold 7", "params.Threshold", "", func() error {
		_, err := quantize.TrainBinary(res, host(t, data, rows, dim), &quantize.BinaryParams{Threshold: 7})
		return err
	})
	nan := append([]float32(nil), data...)
	nan[5] = float32(math.NaN())
	safetest.Refused(t, "NaN rows", "dataset", "", func() error {
		_, err := quantize.TrainBinary(res, host(t, nan, rows, dim), nil)
		return err
	})
	must(t, q.Close())
	if err := q.Transform(res, host(t, data, rows, dim), out); err == nil {
		t.Error("Transform after Close: no error")
	}
}
