package pca_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/pca"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const dim = 5

// data returns rows with distinct variances along rotated axes.
func data(seed uint64, rows int) []float32 {
	r := rand.New(rand.NewPCG(seed, 3))
	scale := []float64{5, 3, 2, 1, 0.5}
	// a fixed rotation: Gram-Schmidt of random vectors
	basis := make([][]float64, dim)
	for i := range basis {
		v := make([]float64, dim)
		for j := range v {
			v[j] = r.NormFloat64()
		}
		for _, b := range basis[:i] {
			d := dot(v, b)
			for j := range v {
				v[j] -= d * b[j]
			}
		}
		n := math.Sqrt(dot(v, v))
		for j := range v {
			v[j] /= n
		}
		basis[i] = v
	}
	out := make([]float32, 0, rows*dim)
	for range rows {
		x := []float64{10, -3, 1, 0, 2} // an offset mean
		for a := range dim {
			z := r.NormFloat64() * scale[a]
			for j := range x {
				x[j] += z * basis[a][j]
			}
		}
		for _, v := range x {
			out = append(out, float32(v))
		}
	}
	return out
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// goPCA is Go's PCA: means, eigenvalues (decreasing) and eigenvectors of
// the covariance (rows - 1), by Jacobi rotations.
func goPCA(x []float32, rows int) (mean, vals []float64, vecs [][]float64) {
	mean = make([]float64, dim)
	for i := range rows {
		for j := range dim {
			mean[j] += float64(x[i*dim+j]) / float64(rows)
		}
	}
	a := make([][]float64, dim)
	for r := range dim {
		a[r] = make([]float64, dim)
		for c := range dim {
			for i := range rows {
				a[r][c] += (float64(x[i*dim+r]) - mean[r]) * (float64(x[i*dim+c]) - mean[c])
			}
			a[r][c] /= float64(rows - 1)
		}
	}
	v := make([][]float64, dim)
	for i := range v {
		v[i] = make([]float64, dim)
		v[i][i] = 1
	}
	for range 100 {
		for p := range dim {
			for q := p + 1; q < dim; q++ {
				if math.Abs(a[p][q]) < 1e-300 {
					continue
				}
				th := (a[q][q] - a[p][p]) / (2 * a[p][q])
				t := math.Copysign(1, th) / (math.Abs(th) + math.Sqrt(th*th+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := range dim {
					akp, akq := a[k][p], a[k][q]
					a[k][p], a[k][q] = c*akp-s*akq, s*akp+c*akq
				}
				for k := range dim {
					apk, aqk := a[p][k], a[q][k]
					a[p][k], a[q][k] = c*apk-s*aqk, s*apk+c*aqk
				}
				for k := range dim {
					vkp, vkq := v[k][p], v[k][q]
					v[k][p], v[k][q] = c*vkp-s*vkq, s*vkp+c*vkq
				}
			}
		}
	}
	idx := []int{0, 1, 2, 3, 4}
	sort.Slice(idx, func(i, j int) bool { return a[idx[i]][idx[i]] > a[idx[j]][idx[j]] })
	for _, e := range idx {
		vals = append(vals, a[e][e])
		col := make([]float64, dim)
		for k := range dim {
			col[k] = v[k][e]
		}
		vecs = append(vecs, col)
	}
	return mean, vals, vecs
}

func near(t *testing.T, what string, got float32, want, rel float64) {
	t.Helper()
	if math.Abs(float64(got)-want) > rel*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func TestDefaultParams(t *testing.T) {
	safetest.Check(t)
	p, err := pca.DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	if want := (pca.Params{Components: 1, Solver: pca.CovEigDQ, Iterations: 15}); p != want {
		t.Fatalf("%+v, want %+v", p, want)
	}
}

// Fit's outputs are Go's PCA under cuVS's conventions, for every number of
// components (one component included: a one-row matrix on 26.06's
// column-major path) and both solvers.
func TestFit(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows = 300
	x := data(1, rows)
	mean, vals, vecs := goPCA(x, rows)
	total := 0.0
	for _, v := range vals {
		total += v
	}
	for _, solver := range []pca.Solver{pca.CovEigDQ, pca.CovEigJacobi} {
		for k := 1; k <= dim; k++ {
			p, _ := pca.DefaultParams()
			p.Components, p.Solver = k, solver
			m, err := pca.Fit(res, &p, x, dim)
			if err != nil {
				t.Fatalf("%s, k %d: %v", solver, k, err)
			}
			if m.NComponents() != k || m.Dim != dim || len(m.Components) != k*dim {
				t.Fatalf("k %d: shape %d × %d", k, m.NComponents(), m.Dim)
			}
			for j := range dim {
				near(t, "mean", m.Mean[j], mean[j], 1e-4)
			}
			noise := 0.0
			for c := k; c < dim; c++ {
				noise += vals[c] / float64(dim-k)
			}
			near(t, "noise variance", m.NoiseVariance, noise, 1e-3)
			for c := range k {
				near(t, "explained variance", m.ExplainedVariance[c], vals[c], 1e-3)
				near(t, "ratio", m.ExplainedVarianceRatio[c], vals[c]/total, 1e-3)
				near(t, "singular value", m.SingularValues[c], math.Sqrt(vals[c]*(rows-1)), 1e-3)
				comp := m.Components[c*dim : (c+1)*dim]
				d, big := 0.0, float32(0)
				for j := range dim {
					d += float64(comp[j]) * vecs[c][j]
					if math.Abs(float64(comp[j])) > math.Abs(float64(big)) {
						big = comp[j]
					}
				}
				if math.Abs(math.Abs(d)-1) > 1e-3 {
					t.Fatalf("%s k %d: component %d is %v, Go's eigenvector %v", solver, k, c, comp, vecs[c])
				}
				if big < 0 {
					t.Fatalf("component %d %v: its largest entry is negative", c, comp)
				}
			}
		}
	}
}

// Transform is (x − mean)·Cᵀ, FitTransform gives the same, and the inverse
// reconstructs the data with every component (the projection with fewer).
func TestTransformRoundTrip(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows = 120
	x := data(2, rows)
	for _, k := range []int{1, 2, dim} {
		p, _ := pca.DefaultParams()
		p.Components = k
		m, ft, err := pca.FitTransform(res, &p, x, dim)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := m.Transform(res, x)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			for c := range k {
				want := 0.0
				for j := range dim {
					want += (float64(x[i*dim+j]) - float64(m.Mean[j])) * float64(m.Components[c*dim+j])
				}
				near(t, "transform", tr[i*k+c], want, 1e-3)
				near(t, "fit-transform", ft[i*k+c], want, 1e-3)
			}
		}
		back, err := m.InverseTransform(res, tr)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			for j := range dim {
				want := float64(m.Mean[j])
				for c := range k {
					want += float64(tr[i*k+c]) * float64(m.Components[c*dim+j])
				}
				near(t, "inverse", back[i*dim+j], want, 1e-3)
				if k == dim {
					near(t, "reconstruction", back[i*dim+j], float64(x[i*dim+j]), 1e-3)
				}
			}
		}
	}
}

// Whitened components of the fitted data have unit variance, and the
// inverse undoes the whitening.
func TestWhiten(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows = 200
	x := data(3, rows)
	p, _ := pca.DefaultParams()
	p.Components, p.Whiten = dim, true
	m, tr, err := pca.FitTransform(res, &p, x, dim)
	if err != nil {
		t.Fatal(err)
	}
	for c := range dim {
		s := 0.0
		for i := range rows {
			s += float64(tr[i*dim+c]) * float64(tr[i*dim+c])
		}
		near(t, "whitened variance", float32(s/(rows-1)), 1, 1e-3)
	}
	back, err := m.InverseTransform(res, tr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range x {
		near(t, "whitened reconstruction", back[i], float64(x[i]), 1e-3)
	}
}

// With FlipSignsBasedOnU the largest-magnitude projection of each
// component is positive.
// FlipSignsBasedOnU picks each component's sign another way (RAFT's sign
// flip, from U rather than from V.T): the fit is the same but for one sign
// per component, which the transform follows. Which sign comes out is
// RAFT's rule, not asserted here: on the real library (26.06, H200) the
// largest projection of component 1 came out negative, so "the largest
// projection is positive" does not hold there.
func TestFlipSignsBasedOnU(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, k = 100, 3
	x := data(4, rows)
	p, _ := pca.DefaultParams()
	p.Components = k
	byV, trV, err := pca.FitTransform(res, &p, x, dim)
	if err != nil {
		t.Fatal(err)
	}
	p.FlipSignsBasedOnU = true
	byU, trU, err := pca.FitTransform(res, &p, x, dim)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-3*(1+math.Abs(float64(b))) }
	for c := range k {
		sign := float32(1)
		if byU.Components[c*dim]*byV.Components[c*dim] < 0 {
			sign = -1
		}
		for j := range dim {
			if !near(byU.Components[c*dim+j], sign*byV.Components[c*dim+j]) {
				t.Fatalf("component %d: %v by U, %v by V: not the same up to a sign", c, byU.Components[c*dim:(c+1)*dim], byV.Components[c*dim:(c+1)*dim])
			}
		}
		if !near(byU.ExplainedVariance[c], byV.ExplainedVariance[c]) {
			t.Errorf("component %d: explained variance %v by U, %v by V", c, byU.ExplainedVariance[c], byV.ExplainedVariance[c])
		}
		for i := range rows {
			if !near(trU[i*k+c], sign*trV[i*k+c]) {
				t.Fatalf("row %d component %d: projection %v by U, %v by V (sign %v)", i, c, trU[i*k+c], trV[i*k+c], sign)
			}
		}
	}
}

// Bad params, data and models are refused naming the argument, before C.
func TestRefusals(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	x := data(5, 10)
	def, _ := pca.DefaultParams()
	fit := func(p *pca.Params, d []float32, cols int) func() error {
		return func() error { _, err := pca.Fit(res, p, d, cols); return err }
	}
	for _, c := range []struct {
		arg string
		mod func(*pca.Params)
	}{
		{"params.Components", func(p *pca.Params) { p.Components = 0 }},
		{"params.Components", func(p *pca.Params) { p.Components = dim + 1 }},
		{"params.Solver", func(p *pca.Params) { p.Solver = 5 }},
		{"params.Tol", func(p *pca.Params) { p.Tol = -1 }},
		{"params.Iterations", func(p *pca.Params) { p.Solver, p.Iterations = pca.CovEigJacobi, 0 }},
	} {
		p := def
		c.mod(&p)
		safetest.Refused(t, c.arg, c.arg, "", fit(&p, x, dim))
	}
	safetest.Refused(t, "zero params", "params.Components", "", fit(&pca.Params{}, x, dim))
	safetest.Refused(t, "one column", "dim", "two", fit(&def, x, 1))
	safetest.Refused(t, "one row", "data", "two", fit(&def, x[:dim], dim))
	safetest.Refused(t, "ragged", "data", "multiple", fit(&def, x[:7], dim))
	nan := append([]float32(nil), x...)
	nan[3] = float32(math.Inf(1))
	safetest.Refused(t, "infinite", "data", "Inf", fit(&def, nan, dim))
	p := def
	p.Components = 2
	m, err := pca.Fit(res, &p, x, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Refused(t, "transform columns", "data", "multiple", func() error { _, err := m.Transform(res, x[:dim-1]); return err })
	safetest.Refused(t, "inverse columns", "trans", "multiple", func() error { _, err := m.InverseTransform(res, x[:3]); return err })
	bad := *m
	bad.Components = bad.Components[:dim]
	safetest.Refused(t, "model components", "model", "component", func() error { _, err := bad.Transform(res, x); return err })
	bad = *m
	bad.Mean = nil
	safetest.Refused(t, "model mean", "model", "means", func() error { _, err := bad.InverseTransform(res, x[:4]); return err })
	var nilModel *pca.Model
	safetest.Refused(t, "nil model", "model", "nil", func() error { _, err := nilModel.Transform(res, x); return err })
	if nilModel.NComponents() != 0 {
		t.Error("nil model has components")
	}
}

// A failure inside cuVS comes back as a *safe.Error, and everything is
// released (safetest.Check).
func TestFault(t *testing.T) {
	ctl := safetest.Double(t, "fault injection")
	safetest.Check(t)
	res := safetest.Resources(t)
	x := data(6, 20)
	p, _ := pca.DefaultParams()
	var se *safe.Error
	for _, fn := range []string{"cuvsPcaFit", "cuvsPcaParamsCreate"} {
		ctl.FailNext(fn, "injected")
		if _, err := pca.Fit(res, &p, x, dim); !errors.As(err, &se) {
			t.Fatalf("%s failing: %v, want a *safe.Error", fn, err)
		}
	}
	m, err := pca.Fit(res, &p, x, dim)
	if err != nil {
		t.Fatal(err)
	}
	ctl.FailNext("cuvsPcaInverseTransform", "injected")
	if _, err := m.InverseTransform(res, []float32{1, 2}); !errors.As(err, &se) {
		t.Fatalf("%v, want a *safe.Error", err)
	}
}

// Nil params mean DefaultParams, as in the other packages.
func TestNilParams(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	x := data(7, 30)
	def, err := pca.DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	got, err := pca.Fit(res, nil, x, dim)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pca.Fit(res, &def, x, dim)
	if err != nil {
		t.Fatal(err)
	}
	if got.NComponents() != def.Components || got.NComponents() != want.NComponents() {
		t.Fatalf("nil params: %d components; DefaultParams: %d", got.NComponents(), want.NComponents())
	}
	near(t, "noise variance", got.NoiseVariance, float64(want.NoiseVariance), 1e-4)
	for i := range want.Components {
		near(t, "component value", got.Components[i], float64(want.Components[i]), 1e-4)
	}
	if _, tr, err := pca.FitTransform(res, nil, x, dim); err != nil || len(tr) != 30*def.Components {
		t.Fatalf("FitTransform with nil params: %d values, %v", len(tr), err)
	}
}
