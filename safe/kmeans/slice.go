package kmeans

import (
	"errors"
	"math"
	"strings"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Model is a fitted clustering in Go memory.
type Model[T Float] struct {
	// Centroids holds Clusters rows of Dim values, row-major.
	Centroids []T
	// Clusters and Dim are the centroids' shape.
	Clusters, Dim int
	// FitResult is the inertia and iteration count of the fit.
	FitResult
	// Params are those FitSlice fitted the model with (nil for a model made
	// by hand: DefaultParams with Clusters). Predict uses them.
	Params *Params
}

func finite[T Float](op, name string, v []T) error {
	for i, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return kit.Argf(op, name, "value %d is %v", i, f)
		}
	}
	return nil
}

func rowsOf[T Float](op, name string, v []T, dim int) (int, error) {
	if dim < 1 {
		return 0, kit.Argf(op, "dim", "%d, want at least 1", dim)
	}
	if len(v) == 0 || len(v)%dim != 0 {
		return 0, kit.Argf(op, name, "%d values is not a positive multiple of dim %d", len(v), dim)
	}
	return len(v) / dim, finite(op, name, v)
}

// FitSlice clusters the rows of data (row-major, dim columns, Go memory)
// with p and returns the centroids in Go memory. weights, if not nil, hold
// one weight per row. With Init Array, init holds the Clusters × dim
// starting centroids (nil otherwise). Nil p means DefaultParams (8
// clusters). It uploads the data to device memory it allocates for the
// call, and waits. The model keeps a copy of the params.
//
// C calls: those of Fit, and cuvsRMMAlloc/Free, cuvsMatrixCopy,
// cuvsStreamSync.
func FitSlice[T Float](res *safe.Resources, p *Params, data []T, dim int, weights, init []T) (*Model[T], error) {
	const op = "kmeans.FitSlice"
	p, err := kit.Or(p, DefaultParams)
	if err != nil {
		return nil, err
	}
	if err := p.validate(op, p.Balanced); err != nil {
		return nil, err
	}
	rows, err := rowsOf(op, "data", data, dim)
	if err != nil {
		return nil, err
	}
	if p.Clusters > rows {
		return nil, kit.Argf(op, "params.Clusters", "%d clusters for %d rows", p.Clusters, rows)
	}
	if p.Balanced {
		if dlpack.DataTypeOf[T]() != dlpack.Float32 {
			return nil, kit.Argf(op, "data", "%s: balanced k-means takes float32 only", dlpack.DataTypeOf[T]())
		}
		if weights != nil {
			return nil, kit.Argf(op, "weights", "balanced k-means takes no sample weights")
		}
	}
	if weights != nil {
		if len(weights) != rows {
			return nil, kit.Argf(op, "weights", "%d weights for %d rows", len(weights), rows)
		}
		if err := finite(op, "weights", weights); err != nil {
			return nil, err
		}
	}
	if (init != nil) != (p.Init == Array && !p.Balanced) {
		return nil, kit.Argf(op, "init", "%d values: starting centroids go with Init Array (and only with it)", len(init))
	}
	if init != nil {
		if len(init) != p.Clusters*dim {
			return nil, kit.Argf(op, "init", "%d values, want Clusters × dim = %d", len(init), p.Clusters*dim)
		}
		if err := finite(op, "init", init); err != nil {
			return nil, err
		}
	}
	if err := kit.Open(res, op); err != nil {
		return nil, err
	}
	dx, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	if err != nil {
		return nil, err
	}
	defer dx.Close()
	var w dlpack.Tensor
	if weights != nil {
		dw, err := safe.DeviceVectorFrom(res, weights)
		if err != nil {
			return nil, err
		}
		defer dw.Close()
		w = dw
	}
	dc, err := safe.NewDeviceMatrix[T](res, p.Clusters, dim)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	if init != nil {
		if err := dc.CopyFromHost(res, init); err != nil {
			return nil, err
		}
	}
	r, err := Fit(res, p, dx, w, dc)
	if err != nil {
		return nil, err
	}
	c, err := dc.ToHost(res)
	if err != nil {
		return nil, err
	}
	kept := *p
	return &Model[T]{Centroids: c, Clusters: p.Clusters, Dim: dim, FitResult: r, Params: &kept}, nil
}

// Predict labels the rows of data (row-major, m.Dim columns, Go memory)
// with their nearest centroid and returns the labels and the inertia, as
// the package-level Predict (weighted by weights if not nil, scaled to sum
// to the rows when normalizeWeights), with the model's own params: those
// FitSlice fitted it with (their Metric and Balanced decide the
// assignment), or for a model made by hand with nil Params, DefaultParams
// with Clusters m.Clusters. Set m.Params to predict a hand-made model with
// another metric; params whose Clusters is not m.Clusters are refused.
//
// C calls: those of the package-level Predict, and cuvsRMMAlloc/Free,
// cuvsMatrixCopy, cuvsStreamSync.
func (m *Model[T]) Predict(res *safe.Resources, data, weights []T, normalizeWeights bool) ([]int32, float64, error) {
	const op = "kmeans.Model.Predict"
	p, err := m.params(op)
	if err != nil {
		return nil, 0, err
	}
	rows, err := rowsOf(op, "data", data, m.Dim)
	if err != nil {
		return nil, 0, err
	}
	if weights != nil && len(weights) != rows {
		return nil, 0, kit.Argf(op, "weights", "%d weights for %d rows", len(weights), rows)
	}
	if err := kit.Open(res, op); err != nil {
		return nil, 0, err
	}
	dx, err := safe.DeviceMatrixFrom(res, data, rows, m.Dim)
	if err != nil {
		return nil, 0, err
	}
	defer dx.Close()
	dc, err := safe.DeviceMatrixFrom(res, m.Centroids, m.Clusters, m.Dim)
	if err != nil {
		return nil, 0, err
	}
	defer dc.Close()
	var w dlpack.Tensor
	if weights != nil {
		dw, err := safe.DeviceVectorFrom(res, weights)
		if err != nil {
			return nil, 0, err
		}
		defer dw.Close()
		w = dw
	}
	dl, err := safe.NewDeviceVector[int32](res, rows)
	if err != nil {
		return nil, 0, err
	}
	defer dl.Close()
	inertia, err := Predict(res, p, dx, w, dc, dl, normalizeWeights)
	if err != nil {
		return nil, 0, err
	}
	labels := make([]int32, rows)
	if err := dl.CopyToHost(res, labels); err != nil {
		return nil, 0, err
	}
	return labels, inertia, nil
}

// params returns the params m predicts with, checked against m.
func (m *Model[T]) params(op string) (*Params, error) {
	if m == nil || m.Dim < 1 || m.Clusters < 1 || len(m.Centroids) != m.Clusters*m.Dim {
		return nil, kit.Argf(op, "model", "not a fitted model")
	}
	if m.Params == nil {
		d, err := DefaultParams()
		if err != nil {
			return nil, err
		}
		d.Clusters = m.Clusters
		return &d, nil
	}
	if m.Params.Clusters != m.Clusters {
		return nil, kit.Argf(op, "model", "Params.Clusters is %d, the model has %d centroids", m.Params.Clusters, m.Clusters)
	}
	if err := m.Params.validate(op, m.Params.Balanced); err != nil {
		var ae *safe.ArgError
		if errors.As(err, &ae) {
			return nil, kit.Argf(op, "model", "P%s: %s", strings.TrimPrefix(ae.Arg, "p"), ae.Reason)
		}
		return nil, err
	}
	p := *m.Params
	return &p, nil
}

// Cost returns ClusterCost of the rows of data (row-major, m.Dim columns,
// Go memory) against the model's centroids.
//
// C calls: cuvsKMeansClusterCost, and cuvsRMMAlloc/Free, cuvsMatrixCopy,
// cuvsStreamSync.
func (m *Model[T]) Cost(res *safe.Resources, data []T) (float64, error) {
	const op = "kmeans.Model.Cost"
	if m == nil || m.Dim < 1 || m.Clusters < 1 || len(m.Centroids) != m.Clusters*m.Dim {
		return 0, kit.Argf(op, "model", "not a fitted model")
	}
	rows, err := rowsOf(op, "data", data, m.Dim)
	if err != nil {
		return 0, err
	}
	if err := kit.Open(res, op); err != nil {
		return 0, err
	}
	dx, err := safe.DeviceMatrixFrom(res, data, rows, m.Dim)
	if err != nil {
		return 0, err
	}
	defer dx.Close()
	dc, err := safe.DeviceMatrixFrom(res, m.Centroids, m.Clusters, m.Dim)
	if err != nil {
		return 0, err
	}
	defer dc.Close()
	return ClusterCost(res, dx, dc)
}
