package allneighbors

import (
	"math"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/release"
)

// The tensor rules of cuvsAllNeighborsBuild: a float32 dataset in host or
// device memory; int64 indices, float32 distances and core distances, in
// device memory or, with a host dataset, in host memory (all in the same
// kind; on 26.06, which writes device memory only, host outputs are copied
// through device buffers).
var (
	datasetRule = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true}
	indicesRule = kit.Rule{Arg: "indices", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 2, RowMajor: true}
	distRule    = kit.Rule{Arg: "distances", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true}
	coreRule    = kit.Rule{Arg: "coreDistances", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 1, RowMajor: true}
)

// hostCompatible is cuVS's is_dlpack_host_compatible.
func hostCompatible(d dlpack.Device) bool {
	return d.Type == dlpack.CPU || d.Type == dlpack.CUDAHost || d.Type == dlpack.CUDAManaged
}

// Build writes the k-nearest-neighbour graph of dataset (rows × dim,
// float32, row-major, host or device memory) into indices (rows × k, int64)
// and, unless distances is nil, distances (rows × k, float32): row i's k
// nearest rows, nearest first. The brute-force and IVF-PQ builders list
// the row itself (first, at distance 0, unless rows tie with it); so does
// NN-Descent, which cuVS shifts to put it first, except with InnerProduct.
//
// Outputs live in device memory, or in host memory (CPU, pinned or
// managed: all of them in the same kind) when the dataset is in host
// memory, on both releases: cuVS 26.08 writes host outputs itself, 26.06
// writes device memory only, so there the outputs are written into device
// buffers (cuvsRMMAlloc) copied to yours (cuvsMatrixCopy) and freed before
// Build returns. Batching (p.NClusters > 1) needs the dataset in host
// memory.
//
// C calls: cuvsAllNeighborsIndexParamsCreate/Destroy (and, as p asks,
// cuvsIvfPqIndexParamsCreate or cuvsNNDescentIndexParamsCreate, destroyed
// with them), cuvsAllNeighborsBuild (core_distances NULL), cuvsStreamSync;
// on 26.06 with host outputs also cuvsRMMAlloc/Free and cuvsMatrixCopy.
// Nil params means cuVS's defaults (DefaultIndexParams).
func Build(res *safe.Resources, dataset dlpack.Tensor, indices, distances dlpack.TensorMut, params *IndexParams) error {
	return build("allneighbors.Build", res, dataset, indices, distances, nil, 1, params)
}

// BuildMutualReachability is Build with mutual-reachability distances (for
// HDBSCAN-style clustering): coreDistances (rows float32s, in the outputs'
// kind of memory) gets each row's distance to its k-th neighbour, and the
// graph and distances are those of the distance max(core[i], core[j],
// alpha × d(i, j)) instead of d. distances is required; alpha must be a
// positive finite number. The metric must be L2Expanded, L2SqrtExpanded or
// CosineExpanded; IVF-PQ cannot do it.
//
// C calls: as Build, with core_distances and alpha.
func BuildMutualReachability(res *safe.Resources, dataset dlpack.Tensor, indices, distances, coreDistances dlpack.TensorMut, alpha float32, params *IndexParams) error {
	const op = "allneighbors.BuildMutualReachability"
	if distances == nil {
		return kit.Argf(op, "distances", "nil: mutual reachability needs the distances")
	}
	if coreDistances == nil {
		return kit.Argf(op, "coreDistances", "nil")
	}
	if a := float64(alpha); math.IsNaN(a) || math.IsInf(a, 0) || a <= 0 {
		return kit.Argf(op, "alpha", "%v, want a positive finite number", alpha)
	}
	return build(op, res, dataset, indices, distances, coreDistances, alpha, params)
}

func build(op string, res *safe.Resources, dataset dlpack.Tensor, indices, distances, core dlpack.TensorMut, alpha float32, params *IndexParams) error {
	pd, err := kit.Or(params, DefaultIndexParams)
	if err != nil {
		return err
	}
	p := *pd
	dv, err := datasetRule.Take(op, res, dataset)
	if err != nil {
		return err
	}
	rows, dim := dv.Dim(0), dv.Dim(1)
	if rows < 1 || dim < 1 {
		return kit.Argf(op, "dataset", "shape %v, want at least one row and one column", dv.Shape())
	}
	hostData := hostCompatible(dv.Device())
	out := func(arg string, t dlpack.TensorMut, rule *kit.Rule) (*dlpack.ViewMut, error) {
		if t == nil {
			return nil, nil
		}
		m, err := t.ViewMut()
		if err != nil {
			return nil, kit.Argf(op, arg, "%w", err)
		}
		if err := rule.CheckMut(op, &m); err != nil {
			return nil, err
		}
		return &m, kit.CheckDevice(res, op, arg, m.Device())
	}
	if indices == nil {
		return kit.Argf(op, "indices", "nil")
	}
	im, err := out("indices", indices, &indicesRule)
	if err != nil {
		return err
	}
	dm, err := out("distances", distances, &distRule)
	if err != nil {
		return err
	}
	cm, err := out("coreDistances", core, &coreRule)
	if err != nil {
		return err
	}
	hostOut := hostCompatible(im.Device())
	switch {
	case hostOut && !hostData:
		return kit.Argf(op, "indices", "%s memory with a dataset in %s memory: host outputs need a host dataset", im.Device(), dv.Device())
	case dm != nil && hostCompatible(dm.Device()) != hostOut:
		return kit.Argf(op, "distances", "%s memory, indices are in %s memory: all outputs in the same kind", dm.Device(), im.Device())
	case cm != nil && hostCompatible(cm.Device()) != hostOut:
		return kit.Argf(op, "coreDistances", "%s memory, indices are in %s memory: all outputs in the same kind", cm.Device(), im.Device())
	}
	k := im.Dim(1)
	if im.Dim(0) != rows {
		return kit.Argf(op, "indices", "%d rows, the dataset has %d", im.Dim(0), rows)
	}
	if k < 1 {
		return kit.Argf(op, "indices", "k = %d, want at least 1", k)
	}
	if dm != nil && (dm.Dim(0) != rows || dm.Dim(1) != k) {
		return kit.Argf(op, "distances", "shape %v, indices are [%d %d]", dm.Shape(), rows, k)
	}
	if cm != nil && cm.Dim(0) != rows {
		return kit.Argf(op, "coreDistances", "%d values for %d rows", cm.Dim(0), rows)
	}
	if err := p.validate(op, rows, dim, k, hostData, core != nil); err != nil {
		return err
	}
	if hostOut && !release.Has(release.AllNeighborsHostOutput) {
		return viaDevice(op, res, dataset, im, dm, cm, alpha, &p)
	}
	cp, err := p.toC(op)
	defer cp.release()
	if err != nil {
		return err
	}
	return kit.CallInOut(op, res, []*dlpack.View{&dv}, []*dlpack.ViewMut{im, dm, cm}, func(h generated.CuvsResources_t, in, o []*generated.DLManagedTensor) error {
		return generated.CuvsAllNeighborsBuild(h, cp.p, in[0], o[0], o[1], o[2], alpha)
	})
}

// viaDevice runs a checked build whose outputs are in host memory on cuVS
// 26.06, which writes device memory only: into device buffers of the
// outputs' shapes, copied to im, dm and cm (those given) and freed before
// it returns.
func viaDevice(op string, res *safe.Resources, dataset dlpack.Tensor, im, dm, cm *dlpack.ViewMut, alpha float32, p *IndexParams) error {
	if err := kit.Open(res, op); err != nil {
		return err
	}
	rows, k := int(im.Dim(0)), int(im.Dim(1))
	di, err := safe.NewDeviceMatrix[int64](res, rows, k)
	if err != nil {
		return err
	}
	defer di.Close()
	srcs := []func() (dlpack.View, error){di.View}
	dsts := []*dlpack.ViewMut{im}
	var dist, core dlpack.TensorMut // nil interfaces unless given
	if dm != nil {
		dd, err := safe.NewDeviceMatrix[float32](res, rows, k)
		if err != nil {
			return err
		}
		defer dd.Close()
		dist, srcs, dsts = dd, append(srcs, dd.View), append(dsts, dm)
	}
	if cm != nil {
		dc, err := safe.NewDeviceVector[float32](res, rows)
		if err != nil {
			return err
		}
		defer dc.Close()
		core, srcs, dsts = dc, append(srcs, dc.View), append(dsts, cm)
	}
	if err := build(op, res, dataset, di, dist, core, alpha, p); err != nil {
		return err
	}
	for i, src := range srcs {
		v, err := src()
		if err != nil {
			return kit.Wrap(op, err)
		}
		if err := safe.Copy(res, &v, dsts[i]); err != nil {
			return kit.Wrap(op, err)
		}
	}
	return kit.Wrap(op, res.Sync())
}

// BuildSlice builds the graph of data (rows × dim float32s, row-major, Go
// memory) with k neighbours per row and returns it in Go memory: row i's
// neighbours are Neighbors[i*k:(i+1)*k], with their Distances. It is Build
// with outputs in Go memory (copied through device buffers on cuVS 26.06).
func BuildSlice(res *safe.Resources, data []float32, rows, dim, k int, params *IndexParams) (*safe.Results, error) {
	const op = "allneighbors.BuildSlice"
	if rows < 1 || dim < 1 || len(data) != rows*dim {
		return nil, kit.Argf(op, "data", "%d values for %d rows of %d", len(data), rows, dim)
	}
	if k < 1 || k > rows {
		return nil, kit.Argf(op, "k", "%d for %d rows", k, rows)
	}
	if err := kit.CheckFiniteSlice(op, "data", data, dim); err != nil {
		return nil, err
	}
	ds, err := dlpack.NewHostMatrix(data, rows, dim)
	if err != nil {
		return nil, kit.Argf(op, "data", "%w", err)
	}
	r := &safe.Results{K: k, Neighbors: make([]int64, rows*k), Distances: make([]float32, rows*k)}
	im, err := dlpack.NewHostMatrix(r.Neighbors, rows, k)
	if err != nil {
		return nil, kit.Argf(op, "k", "%w", err)
	}
	dm, err := dlpack.NewHostMatrix(r.Distances, rows, k)
	if err != nil {
		return nil, kit.Argf(op, "k", "%w", err)
	}
	if err := build(op, res, ds, im, dm, nil, 1, params); err != nil {
		return nil, err
	}
	return r, nil
}
