// Package refine re-ranks candidate neighbours exactly: for each query it
// computes the true distance to each of its candidate rows and keeps the k
// nearest, nearest first. It is the usual second stage after an
// approximate search (IVF-PQ, IVF-SQ, CAGRA): ask that search for more
// candidates than you need, then Refine them against the original dataset.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	data, _ := dlpack.NewHostMatrix(rows, n, dim)        // the original rows
//	q, _ := dlpack.NewHostMatrix(queries, nq, dim)
//	cand, _ := dlpack.NewHostMatrix(candidateIDs, nq, c) // int64, from the ANN search
//	nb, _ := dlpack.NewHostMatrix(neighbors, nq, k)      // []int64, written
//	ds, _ := dlpack.NewHostMatrix(distances, nq, k)      // []float32, written
//	err := refine.Refine(res, data, q, cand, nb, ds, safe.L2Expanded)
//
// Refine runs on the GPU when every tensor is in device-compatible memory
// (CUDA, pinned or managed) and on the CPU, inside libcuvs, when every
// tensor is Go or other kDLCPU memory; cuVS refuses a mix. Metrics says
// which metrics each takes. Distances and neighbor ids: see safe.Metric
// (what each metric returns here) and safe.Sentinel (unfilled slots).
//
// C call: cuvsRefine (and cuvsStreamSync for host memory).
package refine

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

var (
	elemTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16, dlpack.Int8, dlpack.Uint8}
	int64s    = []dlpack.DataType{dlpack.Int64}

	// The tensor rules of refine, in one place; where they may live is
	// checked across them (all device-compatible or all host).
	datasetRule    = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	queriesRule    = kit.Rule{Arg: "queries", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	candidatesRule = kit.Rule{Arg: "candidates", Memory: kit.AnyMemory, DTypes: int64s, Rank: 2, RowMajor: true}
	neighborsRule  = kit.Rule{Arg: "neighbors", Memory: kit.AnyMemory, DTypes: int64s, Rank: 2, RowMajor: true}
	distancesRule  = kit.Rule{Arg: "distances", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true}
)

// MaxDeviceK is the largest k the GPU refine takes (its top-k kernels'
// capacity in cuVS v26.06).
const MaxDeviceK = 256

func deviceCompatible(d dlpack.Device) bool {
	return d.Type == dlpack.CUDA || d.Type == dlpack.CUDAHost || d.Type == dlpack.CUDAManaged
}

// Metrics reports the metrics Refine takes in device or host memory:
// device: L2Expanded, L2SqrtExpanded, InnerProduct, CosineExpanded; host:
// L2Expanded and InnerProduct. (cuVS v26.06's host refine computes cosine
// distances only when there are at least as many queries as OpenMP
// threads, and returns 0 for every candidate otherwise: it is refused.)
func Metrics(device bool) []safe.Metric {
	if device {
		return []safe.Metric{safe.L2Expanded, safe.L2SqrtExpanded, safe.InnerProduct, safe.CosineExpanded}
	}
	return []safe.Metric{safe.L2Expanded, safe.InnerProduct}
}

// Refine re-ranks candidates (n × c int64 row ids of dataset) for queries
// (n × dim) against dataset (rows × dim; float32, float16, int8 or uint8,
// the same for both), writing the k nearest of each row's candidates into
// neighbors (n × k int64) and their distances into distances (n × k
// float32), nearest first, k being the columns of neighbors (1 <= k <= c;
// on the device k <= MaxDeviceK). L2Expanded distances are squared.
//
// Every candidate must be a row of dataset when the tensors are in device
// memory: cuVS reads the rows they name without a check, so an id past the
// end (such as the math.MaxInt64 an IVF search leaves in slots it could not
// fill) reads out of bounds. The package cannot check device memory
// cheaply and does not. On the host an id outside the dataset gets the
// largest float32 as its distance.
//
// Device results are ready once res's stream is synchronized; host results
// when Refine returns.
func Refine(res *safe.Resources, dataset, queries, candidates dlpack.Tensor, neighbors, distances dlpack.TensorMut, metric safe.Metric) error {
	const op = "refine.Refine"
	if dataset == nil || queries == nil || candidates == nil || neighbors == nil || distances == nil {
		return kit.Argf(op, "dataset/queries/candidates/neighbors/distances", "nil tensor")
	}
	dv, err := dataset.View()
	if err != nil {
		return kit.Argf(op, "dataset", "%w", err)
	}
	qv, err := queries.View()
	if err != nil {
		return kit.Argf(op, "queries", "%w", err)
	}
	cv, err := candidates.View()
	if err != nil {
		return kit.Argf(op, "candidates", "%w", err)
	}
	nm, err := neighbors.ViewMut()
	if err != nil {
		return kit.Argf(op, "neighbors", "%w", err)
	}
	dm, err := distances.ViewMut()
	if err != nil {
		return kit.Argf(op, "distances", "%w", err)
	}
	for _, c := range []struct {
		r *kit.Rule
		v *dlpack.View
	}{{&datasetRule, &dv}, {&queriesRule, &qv}, {&candidatesRule, &cv}} {
		if err := c.r.Check(op, c.v); err != nil {
			return err
		}
	}
	if err := neighborsRule.CheckMut(op, &nm); err != nil {
		return err
	}
	if err := distancesRule.CheckMut(op, &dm); err != nil {
		return err
	}
	onDevice := deviceCompatible(dv.Device())
	for _, o := range []struct {
		arg string
		dev dlpack.Device
	}{{"queries", qv.Device()}, {"candidates", cv.Device()}, {"neighbors", nm.Device()}, {"distances", dm.Device()}} {
		if deviceCompatible(o.dev) != onDevice {
			return kit.Argf(op, o.arg, "%s memory, the dataset is in %s memory: all must be device-compatible or all host", o.dev, dv.Device())
		}
	}
	if qv.DType() != dv.DType() {
		return kit.Argf(op, "queries", "dtype %s, the dataset is %s", qv.DType(), dv.DType())
	}
	if qv.Dim(1) != dv.Dim(1) {
		return kit.Argf(op, "queries", "%d columns, the dataset has %d", qv.Dim(1), dv.Dim(1))
	}
	n, c, k := qv.Dim(0), cv.Dim(1), nm.Dim(1)
	if cv.Dim(0) != n {
		return kit.Argf(op, "candidates", "%d rows for %d queries", cv.Dim(0), n)
	}
	if nm.Dim(0) != n || dm.Dim(0) != n {
		return kit.Argf(op, "neighbors/distances", "%d and %d rows for %d queries", nm.Dim(0), dm.Dim(0), n)
	}
	if dm.Dim(1) != k {
		return kit.Argf(op, "distances", "%d columns, neighbors has %d (k)", dm.Dim(1), k)
	}
	if k < 1 || k > c {
		return kit.Argf(op, "neighbors", "k = %d, want 1 to the %d candidates", k, c)
	}
	if onDevice && k > MaxDeviceK {
		return kit.Argf(op, "neighbors", "k = %d, the GPU refine takes at most %d", k, MaxDeviceK)
	}
	ok := false
	for _, m := range Metrics(onDevice) {
		ok = ok || m == metric
	}
	if !ok {
		where := "host"
		if onDevice {
			where = "device"
		}
		return kit.Argf(op, "metric", "%s is not supported in %s memory (%v)", metric, where, Metrics(onDevice))
	}
	call := dlpack.Begin(op)
	defer call.End()
	ts := make([]*generated.DLManagedTensor, 0, 5)
	for i, v := range []*dlpack.View{&dv, &qv, &cv} {
		t, err := call.In(v)
		if err != nil {
			return kit.Argf(op, [...]string{"dataset", "queries", "candidates"}[i], "%w", err)
		}
		ts = append(ts, t)
	}
	nt, err := call.Out(&nm)
	if err != nil {
		return kit.Argf(op, "neighbors", "%w", err)
	}
	dt, err := call.Out(&dm)
	if err != nil {
		return kit.Argf(op, "distances", "%w", err)
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(res)
	if err := generated.CuvsRefine(h, ts[0], ts[1], ts[2], kit.CMetric(metric), nt, dt); err != nil {
		return kit.Wrap(op, err)
	}
	if !onDevice {
		// Go memory is pinned only for the call.
		return kit.Wrap(op, generated.CuvsStreamSync(h))
	}
	return nil
}
