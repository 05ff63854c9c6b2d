package pca

import (
	"math"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/release"
)

// Model is a fitted PCA in Go memory, row-major whatever the release.
type Model struct {
	// Components holds one principal component per row (k rows of Dim
	// values), by decreasing explained variance; unit vectors.
	Components []float32
	// ExplainedVariance holds the covariance's eigenvalues of the k
	// components (the covariance divides by rows - 1).
	ExplainedVariance []float32
	// ExplainedVarianceRatio is each eigenvalue over the sum of all Dim.
	ExplainedVarianceRatio []float32
	// SingularValues are the centered data's: sqrt(eigenvalue × (rows - 1)).
	SingularValues []float32
	// Mean holds the column means of the fitted data (Dim values).
	Mean []float32
	// NoiseVariance is the mean of the eigenvalues left out (0 when k is
	// not below both Dim and the rows).
	NoiseVariance float32
	// Dim is the number of columns.
	Dim int
	// Whiten is whether Transform scales components to unit variance.
	Whiten bool
}

// NComponents returns the number of components k.
func (m *Model) NComponents() int {
	if m == nil {
		return 0
	}
	return len(m.SingularValues)
}

func (m *Model) check(op string) (int, error) {
	if m == nil {
		return 0, kit.Argf(op, "model", "nil")
	}
	k := len(m.SingularValues)
	switch {
	case m.Dim == 0 && k == 0 && len(m.Components) == 0 && len(m.Mean) == 0:
		return 0, kit.Argf(op, "model", "the zero value, never fitted (Fit makes a Model)")
	case m.Dim < 2:
		return 0, kit.Argf(op, "model", "Dim %d: cuVS's PCA needs at least two columns", m.Dim)
	case k < 1 || k > m.Dim:
		return 0, kit.Argf(op, "model", "%d singular values for Dim %d, want 1..Dim", k, m.Dim)
	case len(m.Components) != k*m.Dim:
		return 0, kit.Argf(op, "model", "%d component values, want %d × %d", len(m.Components), k, m.Dim)
	case len(m.Mean) != m.Dim:
		return 0, kit.Argf(op, "model", "%d means for Dim %d", len(m.Mean), m.Dim)
	}
	for _, v := range [][]float32{m.Components, m.SingularValues, m.Mean} {
		if err := finite(op, "model", v); err != nil {
			return 0, err
		}
	}
	return k, nil
}

func finite(op, name string, v []float32) error {
	for i, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return kit.Argf(op, name, "value %d is %v", i, f)
		}
	}
	return nil
}

func rowsOf(op, name string, v []float32, cols int) (int, error) {
	if len(v) == 0 || len(v)%cols != 0 {
		return 0, kit.Argf(op, name, "%d values is not a positive multiple of %d columns", len(v), cols)
	}
	return len(v) / cols, finite(op, name, v)
}

// colMajor reports whether the loaded release wants column-major matrices
// (26.06); 26.08 takes row-major ones as they are.
func colMajor() bool { return !release.Has(release.PCARowMajor) }

// dev is device memory for one tensor of a call: a rank-2 matrix (row- or
// column-major) or a rank-1 vector (rank 0, no shape, only in tests).
type dev struct {
	m          *safe.DeviceMatrix[float32]
	rank       int
	rows, cols int
	col        bool
}

func alloc(res *safe.Resources, rank, rows, cols int, col bool) (*dev, error) {
	r, c := rows, cols
	if col {
		r, c = cols, rows // the transpose, row-major, is the column-major matrix
	}
	m, err := safe.NewDeviceMatrix[float32](res, r, c)
	if err != nil {
		return nil, err
	}
	return &dev{m: m, rank: rank, rows: rows, cols: cols, col: col}, nil
}

func transpose(v []float32, rows, cols int) []float32 {
	t := make([]float32, len(v))
	for i := range rows {
		for j := range cols {
			t[j*rows+i] = v[i*cols+j]
		}
	}
	return t
}

// put copies row-major host values in (transposing them on the host for a
// column-major matrix).
func (d *dev) put(res *safe.Resources, v []float32) error {
	if d.col {
		v = transpose(v, d.rows, d.cols)
	}
	return d.m.CopyFromHost(res, v)
}

// get copies the values out, row-major, after res's stream is synchronized.
func (d *dev) get(res *safe.Resources) ([]float32, error) {
	v, err := d.m.ToHost(res)
	if err != nil || !d.col {
		return v, err
	}
	return transpose(v, d.cols, d.rows), nil
}

func (d *dev) close() { _ = d.m.Close() }

// fill describes d in s, with explicit strides for matrices.
func (d *dev) fill(s *slot) error {
	mv, err := d.m.ViewMut()
	if err != nil {
		return err
	}
	p, err := mv.Data()
	if err != nil {
		return err
	}
	dv := d.m.Device()
	t := &s.mt.DlTensor
	*t = generated.DLTensor{
		Data:   p,
		Device: generated.DLDevice{DeviceType: generated.DLDeviceType(dv.Type), DeviceId: dv.ID},
		Ndim:   int32(d.rank),
		Dtype:  generated.DLDataType{Code: uint8(dlpack.Float32.Code), Bits: dlpack.Float32.Bits, Lanes: dlpack.Float32.Lanes},
	}
	switch d.rank {
	case 2:
		s.shape = [2]int64{int64(d.rows), int64(d.cols)}
		if d.col {
			s.strides = [2]int64{1, int64(d.rows)}
		} else {
			s.strides = [2]int64{int64(d.cols), 1}
		}
		t.Shape, t.Strides = &s.shape[0], &s.strides[0]
	case 1:
		s.shape = [2]int64{int64(d.rows * d.cols)}
		t.Shape = &s.shape[0]
	}
	return nil
}

// call runs one PCA C call on tensors ds (in order), with p's C params.
func call(op string, res *safe.Resources, p *Params, k int, ds []*dev, f func(h generated.CuvsResources_t, c generated.CuvsPcaParams_t, ts []*generated.DLManagedTensor) error) error {
	sl := newSlots(len(ds))
	defer sl.free()
	ts := make([]*generated.DLManagedTensor, len(ds))
	for i, d := range ds {
		if err := d.fill(sl.at(i)); err != nil {
			return kit.Wrap(op, err)
		}
		ts[i] = &sl.at(i).mt
	}
	return withC(op, p, k, func(c generated.CuvsPcaParams_t) error {
		h, err := kit.Lock(res, op)
		if err != nil {
			return err
		}
		defer kit.Unlock(res)
		return kit.Wrap(op, f(h, c, ts))
	})
}

// Fit computes the principal components of data (rows × dim, row-major, Go
// memory; at least two rows and two columns) and returns them with the
// explained variances, singular values, means and noise variance. Nil p
// means DefaultParams (one component).
//
// C calls: cuvsPcaParamsCreate/Destroy, cuvsPcaFit, and cuvsRMMAlloc/Free,
// cuvsMatrixCopy, cuvsStreamSync for the copies.
func Fit(res *safe.Resources, p *Params, data []float32, dim int) (*Model, error) {
	m, _, err := fit("pca.Fit", res, p, data, dim, false)
	return m, err
}

// FitTransform is Fit, and returns data projected onto the components too
// (rows × k, row-major), as Transform would.
//
// C calls: cuvsPcaParamsCreate/Destroy, cuvsPcaFitTransform, and
// cuvsRMMAlloc/Free, cuvsMatrixCopy, cuvsStreamSync for the copies.
//
// With FlipSignsBasedOnU it is Fit, then Model.Transform (cuvsPcaFit,
// cuvsPcaTransform): on the real library (26.06, H200) the fused
// cuvsPcaFitTransform returned, with that flag, projections that were not
// those of the components it returned (row 0: 5.219 where the data and
// the components give ±3.801), while the components themselves agreed
// with the V-based fit's up to one sign each.
func FitTransform(res *safe.Resources, p *Params, data []float32, dim int) (*Model, []float32, error) {
	const op = "pca.FitTransform"
	if p != nil && p.FlipSignsBasedOnU {
		m, _, err := fit(op, res, p, data, dim, false)
		if err != nil {
			return nil, nil, err
		}
		tr, err := m.tx(op, res, data, false)
		if err != nil {
			return nil, nil, err
		}
		return m, tr, nil
	}
	return fit(op, res, p, data, dim, true)
}

func fit(op string, res *safe.Resources, p *Params, data []float32, dim int, transform bool) (*Model, []float32, error) {
	p, err := kit.Or(p, DefaultParams)
	if err != nil {
		return nil, nil, err
	}
	if err := p.validate(op); err != nil {
		return nil, nil, err
	}
	if dim < 2 {
		return nil, nil, kit.Argf(op, "dim", "%d: cuVS's PCA needs at least two columns", dim)
	}
	rows, err := rowsOf(op, "data", data, dim)
	if err != nil {
		return nil, nil, err
	}
	k := p.Components
	switch {
	case rows < 2:
		return nil, nil, kit.Argf(op, "data", "%d row: fitting needs at least two", rows)
	case k > dim:
		return nil, nil, kit.Argf(op, "params.Components", "%d for %d columns", k, dim)
	case rows > math.MaxInt32 || dim > math.MaxInt32:
		return nil, nil, kit.Argf(op, "data", "%d × %d: too large", rows, dim)
	}
	col := colMajor()
	// noise_vars is a device_scalar_view, whose extents are rank 1 of static
	// extent 1 (c/src/preprocessing/pca.cpp converts it so): a one-value
	// vector, not a rank-0 tensor.
	specs := []struct{ rank, rows, cols int }{
		{2, rows, dim}, {2, k, dim}, {1, 1, k}, {1, 1, k}, {1, 1, k}, {1, 1, dim}, {1, 1, 1},
	}
	if transform {
		specs = append(specs, struct{ rank, rows, cols int }{2, rows, k})
	}
	if err := kit.Open(res, op); err != nil {
		return nil, nil, err
	}
	ds := make([]*dev, 0, len(specs))
	defer func() {
		for _, d := range ds {
			d.close()
		}
	}()
	for _, s := range specs {
		d, err := alloc(res, s.rank, s.rows, s.cols, col && s.rank == 2)
		if err != nil {
			return nil, nil, err
		}
		ds = append(ds, d)
	}
	if err := ds[0].put(res, data); err != nil {
		return nil, nil, err
	}
	flip := p.FlipSignsBasedOnU
	err = call(op, res, p, k, ds, func(h generated.CuvsResources_t, c generated.CuvsPcaParams_t, t []*generated.DLManagedTensor) error {
		if transform {
			return generated.CuvsPcaFitTransform(h, c, t[0], t[7], t[1], t[2], t[3], t[4], t[5], t[6], flip)
		}
		return generated.CuvsPcaFit(h, c, t[0], t[1], t[2], t[3], t[4], t[5], t[6], flip)
	})
	if err != nil {
		return nil, nil, err
	}
	out := make([][]float32, len(ds))
	for i := 1; i < len(ds); i++ {
		if out[i], err = ds[i].get(res); err != nil {
			return nil, nil, err
		}
	}
	m := &Model{Components: out[1], ExplainedVariance: out[2], ExplainedVarianceRatio: out[3],
		SingularValues: out[4], Mean: out[5], NoiseVariance: out[6][0], Dim: dim, Whiten: p.Whiten}
	if transform {
		return m, out[7], nil
	}
	return m, nil, nil
}

// modelParams are the params a model's transforms run with.
func (m *Model) params() *Params {
	return &Params{Components: len(m.SingularValues), Whiten: m.Whiten, Solver: CovEigDQ, Iterations: 15}
}

// Transform projects data (rows × Dim, row-major, Go memory) onto the
// model's components: (x − Mean) · Componentsᵀ, rows × k, each column
// scaled to unit variance when the model whitens. data needs at least one
// row and two columns.
//
// Whitening divides each projected component by sqrt(eigenvalue),
// computed as singular value / sqrt(rows − 1), and cuVS counts the rows of
// the data being transformed, not the rows fitted: Transform of n rows
// scales by sqrt(n − 1) / singular value, so whitened transforms of a few
// rows are not on the fitted scale, and a single row transforms to 0 (the
// inverse of one row returns the mean). Read from raft's pcaTransform and
// pcaInverseTransform; not tried on a GPU.
//
// C calls: cuvsPcaParamsCreate/Destroy, cuvsPcaTransform, and
// cuvsRMMAlloc/Free, cuvsMatrixCopy, cuvsStreamSync for the copies.
func (m *Model) Transform(res *safe.Resources, data []float32) ([]float32, error) {
	const op = "pca.Model.Transform"
	return m.tx(op, res, data, false)
}

// InverseTransform maps transformed rows (rows × k, row-major, Go memory)
// back to the original space: t · Components + Mean (undoing the
// whitening), rows × Dim. With fewer components than columns it is the
// projection onto the components' span, not the original data. A whitened
// model counts the rows of trans (see Transform).
//
// C calls: cuvsPcaParamsCreate/Destroy, cuvsPcaInverseTransform, and
// cuvsRMMAlloc/Free, cuvsMatrixCopy, cuvsStreamSync for the copies.
func (m *Model) InverseTransform(res *safe.Resources, trans []float32) ([]float32, error) {
	const op = "pca.Model.InverseTransform"
	return m.tx(op, res, trans, true)
}

func (m *Model) tx(op string, res *safe.Resources, in []float32, inverse bool) ([]float32, error) {
	k, err := m.check(op)
	if err != nil {
		return nil, err
	}
	inCols, outCols, name := m.Dim, k, "data"
	if inverse {
		inCols, outCols, name = k, m.Dim, "trans"
	}
	rows, err := rowsOf(op, name, in, inCols)
	if err != nil {
		return nil, err
	}
	if rows > math.MaxInt32 {
		return nil, kit.Argf(op, name, "%d rows: too many", rows)
	}
	col := colMajor()
	specs := []struct{ rank, rows, cols int }{
		{2, rows, inCols}, {2, k, m.Dim}, {1, 1, k}, {1, 1, m.Dim}, {2, rows, outCols},
	}
	if err := kit.Open(res, op); err != nil {
		return nil, err
	}
	ds := make([]*dev, 0, len(specs))
	defer func() {
		for _, d := range ds {
			d.close()
		}
	}()
	for _, s := range specs {
		d, err := alloc(res, s.rank, s.rows, s.cols, col && s.rank == 2)
		if err != nil {
			return nil, err
		}
		ds = append(ds, d)
	}
	for i, v := range [][]float32{in, m.Components, m.SingularValues, m.Mean} {
		if err := ds[i].put(res, v); err != nil {
			return nil, err
		}
	}
	err = call(op, res, m.params(), k, ds, func(h generated.CuvsResources_t, c generated.CuvsPcaParams_t, t []*generated.DLManagedTensor) error {
		if inverse {
			return generated.CuvsPcaInverseTransform(h, c, t[0], t[1], t[2], t[3], t[4])
		}
		return generated.CuvsPcaTransform(h, c, t[0], t[1], t[2], t[3], t[4])
	})
	if err != nil {
		return nil, err
	}
	return ds[4].get(res)
}
