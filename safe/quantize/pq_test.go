package quantize_test

import (
	"errors"
	"math"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/quantize"
)

func code(row []uint8, j, bits int) int {
	bit := j * bits
	v := uint32(row[bit/8])
	if bit/8+1 < len(row) {
		v |= uint32(row[bit/8+1]) << 8
	}
	if bit/8+2 < len(row) {
		v |= uint32(row[bit/8+2]) << 16
	}
	return int(v>>(bit%8)) & (1<<bits - 1)
}

func sq(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i] - b[i])
		s += d * d
	}
	return s
}

// tf32Slack bounds how far cuVS's squared distance between x and c may be
// from the exact one where it assigns VQ labels: predict_vq
// (cpp/src/neighbors/detail/vpq_dataset.cuh) is a balanced k-means predict
// (L2Expanded) through minClusterAndDistanceCompute, which on SM 9.x below
// 4096 rows and 4096 centers (on SM 10 and later always) computes
// ||x||² + ||c||² − 2 x·c with x·c from a TF32 GEMM (10-bit mantissas; see
// safe/kmeans's tests): each product off by up to 2⁻⁹, the distance by
// twice their sum, plus float32 rounding of the norms and sums. On an H200
// a label was a center at 1.73454 where another was at 1.73373.
func tf32Slack(x, c []float32) float64 {
	abs, xn, cn := 0.0, 0.0, 0.0
	for j := range x {
		abs += math.Abs(float64(x[j]) * float64(c[j]))
		xn += float64(x[j]) * float64(x[j])
		cn += float64(c[j]) * float64(c[j])
	}
	return math.Ldexp(1, -8)*abs + math.Ldexp(float64(len(x)+4), -24)*(xn+cn+2*abs)
}

// checkPQ verifies a PQ round trip against the codebooks read through the
// views: every label is the nearest VQ center (up to cuVS's TF32
// rounding, tf32Slack), every code the nearest codebook entry of its
// residual sub-vector, and the decoded rows are the entries (plus the VQ
// center) exactly.
func checkPQ(t *testing.T, res *safe.Resources, q *quantize.PQ, data []float32, rows int, withLabels bool) {
	t.Helper()
	p := q.Params()
	dim, pl, bits, book := q.Dim(), q.PQLen(), int(p.PQBits), 1<<p.PQBits
	pv, err := q.PQCodebook()
	must(t, err)
	wantRows := book
	if p.UseSubspaces {
		wantRows = int(p.PQDim) * book
	}
	if pv.Dim(0) != int64(wantRows) || pv.Dim(1) != int64(pl) || pv.DType() != dlpack.Float32 {
		t.Fatalf("PQ codebook %v %s, want [%d %d] float32", pv.Shape(), pv.DType(), wantRows, pl)
	}
	cb := viewToHost(t, res, pv)
	vv, err := q.VQCodebook()
	must(t, err)
	var vq []float32
	if p.UseVQ {
		if vv.Dim(0) != int64(p.VQNCenters) || vv.Dim(1) != int64(dim) {
			t.Fatalf("VQ codebook %v, want [%d %d]", vv.Shape(), p.VQNCenters, dim)
		}
		vq = viewToHost(t, res, vv)
	} else if vv.Dim(0) != 0 {
		t.Fatalf("VQ codebook %v without VQ", vv.Shape())
	}
	codes := devZero[uint8](t, res, rows, q.EncodedDim())
	var labels *safe.DeviceVector[uint32]
	if withLabels {
		labels = devVec[uint32](t, res, rows)
	}
	var lin dlpack.Tensor
	var lout dlpack.TensorMut
	if labels != nil {
		lin, lout = labels, labels
	}
	must(t, q.Transform(res, host(t, data, rows, dim), codes, lout))
	out := devZero[float32](t, res, rows, dim)
	must(t, q.InverseTransform(res, codes, out, lin))
	hc, back := toHost(t, res, codes), toHost(t, res, out)
	var lab []uint32
	if labels != nil {
		lab = make([]uint32, rows)
		must(t, labels.CopyToHost(res, lab))
	}
	var errSum, varSum float64
	mean := columnMeans(data, rows, dim)
	for i := 0; i < rows; i++ {
		x := data[i*dim : (i+1)*dim]
		r := append([]float32(nil), x...)
		if vq != nil {
			best, bd := 0, sq(x, vq[:dim])
			slack := 0.0
			for c := 0; c < int(p.VQNCenters); c++ {
				y := vq[c*dim : (c+1)*dim]
				if d := sq(x, y); d < bd {
					best, bd = c, d
				}
				slack = math.Max(slack, tf32Slack(x, y))
			}
			if d := sq(x, vq[int(lab[i])*dim:(int(lab[i])+1)*dim]); d > bd+2*slack {
				t.Fatalf("row %d: label %d at %v, center %d at %v (allowed error %v)", i, lab[i], d, best, bd, slack)
			}
			for j := range r {
				r[j] -= vq[int(lab[i])*dim+j]
			}
		}
		row := hc[i*q.EncodedDim() : (i+1)*q.EncodedDim()]
		for m := 0; m < int(p.PQDim); m++ {
			base := 0
			if p.UseSubspaces {
				base = m * book
			}
			sub := r[m*pl : (m+1)*pl]
			c := code(row, m, bits)
			bd := sq(sub, cb[base*pl:(base+1)*pl])
			for e := 1; e < book; e++ {
				if d := sq(sub, cb[(base+e)*pl:(base+e+1)*pl]); d < bd {
					bd = d
				}
			}
			entry := cb[(base+c)*pl : (base+c+1)*pl]
			if d := sq(sub, entry); d > bd*(1+1e-5)+1e-6 {
				t.Fatalf("row %d sub-vector %d: code %d at %v, the nearest at %v", i, m, c, d, bd)
			}
			for k := 0; k < pl; k++ {
				want := entry[k]
				if vq != nil {
					want += vq[int(lab[i])*dim+m*pl+k]
				}
				if got := back[i*dim+m*pl+k]; got != want {
					t.Fatalf("row %d value %d decoded as %v, want %v", i, m*pl+k, got, want)
				}
			}
		}
		for j := range x {
			errSum += float64((back[i*dim+j] - x[j]) * (back[i*dim+j] - x[j]))
			varSum += (float64(x[j]) - mean[j]) * (float64(x[j]) - mean[j])
		}
	}
	if errSum >= varSum/2 {
		t.Errorf("squared error %v, at least half the data's variance %v: no quantizer", errSum, varSum)
	}
}

func TestPQRoundTrip(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim = 600, 16
	data := safetest.Random(21, rows, dim)
	d, err := quantize.DefaultPQParams()
	must(t, err)
	if d.PQBits != 8 || d.PQDim != 0 || !d.UseSubspaces || d.UseVQ || d.KMeansNIters != 25 || d.KMeansType != quantize.KMeansBalanced ||
		d.MaxTrainPointsPerPQCode != 256 || d.MaxTrainPointsPerVQCluster != 1024 {
		t.Errorf("defaults %+v, want cuVS's", d)
	}
	for _, c := range []struct {
		name string
		mod  func(*quantize.PQParams)
	}{
		{"subspaces 4 bits", func(p *quantize.PQParams) { p.PQBits, p.PQDim = 4, 4 }},
		{"subspaces 5 bits default PQDim", func(p *quantize.PQParams) { p.PQBits = 5 }},
		{"one codebook", func(p *quantize.PQParams) { p.PQBits, p.PQDim, p.UseSubspaces = 4, 8, false }},
		{"VQ", func(p *quantize.PQParams) { p.PQBits, p.PQDim, p.UseVQ, p.VQNCenters = 4, 4, true, 6 }},
		{"VQ default centers", func(p *quantize.PQParams) { p.PQBits, p.PQDim, p.UseVQ = 6, 2, true }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := d
			p.KMeansNIters = 5
			c.mod(&p)
			for _, onDevice := range []bool{false, true} {
				var in dlpack.Tensor = host(t, data, rows, dim)
				if onDevice {
					in = dev(t, res, data, rows, dim)
				}
				q, err := quantize.BuildPQ(res, in, &p)
				must(t, err)
				got := q.Params()
				if p.PQDim == 0 && got.PQDim != dim/4 {
					t.Errorf("PQDim %d, want cuVS's dim/4 = %d", got.PQDim, dim/4)
				}
				if p.UseVQ && p.VQNCenters == 0 && got.VQNCenters != 24 {
					t.Errorf("VQNCenters %d, want sqrt(600) = 24.5 truncated and rounded up to 8 = 24", got.VQNCenters)
				}
				if want := (int(got.PQDim)*int(got.PQBits) + 7) / 8; q.EncodedDim() != want {
					t.Errorf("EncodedDim %d, want %d", q.EncodedDim(), want)
				}
				checkPQ(t, res, q, data, rows, p.UseVQ)
				must(t, q.Close())
			}
		})
	}
}

// The codebook views expire with the quantizer.
func TestPQCodebookViewExpires(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim = 64, 8
	data := safetest.Random(5, rows, dim)
	q, err := quantize.BuildPQ(res, host(t, data, rows, dim), &quantize.PQParams{PQBits: 4, PQDim: 2, UseSubspaces: true,
		KMeansNIters: 2, KMeansType: quantize.KMeansBalanced, MaxTrainPointsPerPQCode: 256})
	must(t, err)
	v, err := q.PQCodebook()
	must(t, err)
	must(t, q.Close())
	if _, err := v.Data(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("codebook view after Close: %v, want dlpack.ErrExpired", err)
	}
	if _, err := q.PQCodebook(); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("PQCodebook after Close: %v, want safe.ErrClosed", err)
	}
}

func TestPQRefusals(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim = 64, 8
	data := safetest.Random(9, rows, dim)
	base := quantize.PQParams{PQBits: 4, PQDim: 2, UseSubspaces: true, KMeansNIters: 2, KMeansType: quantize.KMeansBalanced,
		MaxTrainPointsPerPQCode: 256, MaxTrainPointsPerVQCluster: 64}
	build := func(mod func(*quantize.PQParams), rows int) func() error {
		return func() error {
			p := base
			mod(&p)
			q, err := quantize.BuildPQ(res, host(t, data[:rows*dim], rows, dim), &p)
			if q != nil {
				_ = q.Close()
			}
			return err
		}
	}
	safetest.Refused(t, "3 bits", "params.PQBits", "", build(func(p *quantize.PQParams) { p.PQBits = 3 }, rows))
	safetest.Refused(t, "17 bits", "params.PQBits", "", build(func(p *quantize.PQParams) { p.PQBits = 17 }, rows))
	safetest.Refused(t, "PQDim 3", "params.PQDim", "multiple", build(func(p *quantize.PQParams) { p.PQDim = 3 }, rows))
	safetest.Refused(t, "PQDim 16", "params.PQDim", "", build(func(p *quantize.PQParams) { p.PQDim = 16 }, rows))
	safetest.Refused(t, "8 rows for 16 centers", "dataset", "16", build(func(p *quantize.PQParams) {}, 8))
	safetest.Refused(t, "0 iterations", "params.KMeansNIters", "", build(func(p *quantize.PQParams) { p.KMeansNIters = 0 }, rows))
	safetest.Refused(t, "kmeans 5", "params.KMeansType", "", build(func(p *quantize.PQParams) { p.KMeansType = 5 }, rows))
	safetest.Refused(t, "VQ 100 centers", "params.VQNCenters", "", build(func(p *quantize.PQParams) { p.UseVQ, p.VQNCenters = true, 100 }, rows))
	d64 := make([]float64, rows*dim)
	safetest.Refused(t, "float64 rows", "dataset", "float64", func() error {
		_, err := quantize.BuildPQ(res, host(t, d64, rows, dim), &base)
		return err
	})

	q, err := quantize.BuildPQ(res, host(t, data, rows, dim), &base)
	must(t, err)
	safetest.Close(t, q)
	vqp := base
	vqp.UseVQ, vqp.VQNCenters = true, 4
	qv, err := quantize.BuildPQ(res, host(t, data, rows, dim), &vqp)
	must(t, err)
	safetest.Close(t, qv)
	codes := devZero[uint8](t, res, rows, q.EncodedDim())
	labels := devVec[uint32](t, res, rows)
	short := devVec[uint32](t, res, rows-1)
	out := devZero[float32](t, res, rows, dim)
	wide := devZero[uint8](t, res, rows, q.EncodedDim()+1)
	in := host(t, data, rows, dim)
	safetest.Refused(t, "labels without VQ", "labels", "UseVQ", func() error { return q.Transform(res, in, codes, labels) })
	safetest.Refused(t, "no labels with VQ", "labels", "center 0", func() error { return qv.Transform(res, in, codes, nil) })
	safetest.Refused(t, "short labels", "labels", "labels for", func() error { return qv.Transform(res, in, codes, short) })
	safetest.Refused(t, "no labels to decode with VQ", "labels", "center 0", func() error { return qv.InverseTransform(res, codes, out, nil) })
	safetest.Refused(t, "host codes", "codes", "", func() error {
		return q.Transform(res, in, host(t, make([]uint8, rows*q.EncodedDim()), rows, q.EncodedDim()), nil)
	})
	safetest.Refused(t, "wide codes", "codes", "shape", func() error { return q.Transform(res, in, wide, nil) })
	safetest.Refused(t, "decode wide codes", "codes", "bytes", func() error { return q.InverseTransform(res, wide, out, nil) })
	safetest.Refused(t, "7 columns", "dataset", "columns", func() error {
		return q.Transform(res, host(t, data[:rows*7], rows, 7), codes, nil)
	})
	narrow := devZero[float32](t, res, rows, dim-1)
	safetest.Refused(t, "decode into 7 columns", "out", "shape", func() error { return q.InverseTransform(res, codes, narrow, nil) })
	var nilq *quantize.PQ
	safetest.Refused(t, "nil PQ", "quantizer", "nil", func() error { return nilq.Transform(res, in, codes, nil) })
}
