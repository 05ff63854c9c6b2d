package kit

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
)

// SearchRules is an algorithm's table for a k-nearest-neighbour search:
// the rule of each tensor. Bind applies it; every algorithm package keeps
// one and shares this code.
type SearchRules struct {
	Queries, Neighbors, Distances Rule
}

// SearchTensors are a search's tensors bound to one call.
type SearchTensors struct {
	Queries, Neighbors, Distances *generated.DLManagedTensor
	N, K                          int64         // queries and neighbors per query
	Device                        dlpack.Device // where the queries are (the others are on the same CUDA device)
}

// Bind validates a search of an index holding rows vectors of dim elements
// of type dtype — each tensor against its rule, queries' dtype and width
// against the index, the shapes against each other, 0 < k <= rows — and
// binds the tensors to c. Every refusal is an *ArgError naming the tensor.
// The result is written to t, which saves copying it on a hot path.
func (r *SearchRules) Bind(op string, c dlpack.Call, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, dtype dlpack.DataType, dim, rows int64, t *SearchTensors) error {
	if queries == nil || neighbors == nil || distances == nil {
		return Argf(op, "queries/neighbors/distances", "nil tensor")
	}
	qv, err := queries.View()
	if err != nil {
		return Argf(op, r.Queries.Arg, "%w", err)
	}
	nm, err := neighbors.ViewMut()
	if err != nil {
		return Argf(op, r.Neighbors.Arg, "%w", err)
	}
	dm, err := distances.ViewMut()
	if err != nil {
		return Argf(op, r.Distances.Arg, "%w", err)
	}
	if err := r.check(op, &qv, &nm, &dm, dtype, dim, rows, &t.K); err != nil {
		return err
	}
	t.N = qv.Dim(0)
	t.Device = qv.Device()
	if t.Queries, err = c.In(&qv); err != nil {
		return Argf(op, r.Queries.Arg, "%w", err)
	}
	if t.Neighbors, err = c.Out(&nm); err != nil {
		return Argf(op, r.Neighbors.Arg, "%w", err)
	}
	if t.Distances, err = c.Out(&dm); err != nil {
		return Argf(op, r.Distances.Arg, "%w", err)
	}
	return nil
}

// BindOn is Bind for a search made on res: it also refuses tensors in the
// memory of another CUDA device than res's (CheckDevice).
func (r *SearchRules) BindOn(op string, res *safe.Resources, c dlpack.Call, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, dtype dlpack.DataType, dim, rows int64, t *SearchTensors) error {
	if err := r.Bind(op, c, queries, neighbors, distances, dtype, dim, rows, t); err != nil {
		return err
	}
	return CheckDevice(res, op, r.Queries.Arg, t.Device)
}

// CheckOn is Check for a search made on res: it also refuses tensors in the
// memory of another CUDA device than res's (CheckDevice).
func (r *SearchRules) CheckOn(op string, res *safe.Resources, queries *dlpack.View, neighbors, distances *dlpack.ViewMut, dtype dlpack.DataType, dim, rows int64) (k int64, err error) {
	if k, err = r.Check(op, queries, neighbors, distances, dtype, dim, rows); err != nil {
		return 0, err
	}
	return k, CheckDevice(res, op, r.Queries.Arg, queries.Device())
}

// Check is what Bind checks before binding, for views already in hand:
// each tensor against its rule, queries' dtype and width against the index,
// the shapes against each other, 0 < k <= rows. It returns k.
func (r *SearchRules) Check(op string, queries *dlpack.View, neighbors, distances *dlpack.ViewMut, dtype dlpack.DataType, dim, rows int64) (k int64, err error) {
	err = r.check(op, queries, neighbors, distances, dtype, dim, rows, &k)
	return k, err
}

func (r *SearchRules) check(op string, queries *dlpack.View, neighbors, distances *dlpack.ViewMut, dtype dlpack.DataType, dim, rows int64, k *int64) error {
	if err := r.Queries.Check(op, queries); err != nil {
		return err
	}
	if queries.DType() != dtype {
		return Argf(op, r.Queries.Arg, "dtype %s, the index holds %s", queries.DType(), dtype)
	}
	if err := r.Neighbors.CheckMut(op, neighbors); err != nil {
		return err
	}
	if err := r.Distances.CheckMut(op, distances); err != nil {
		return err
	}
	if err := sameCUDADevice(op, r.Neighbors.Arg, queries.Device(), neighbors.Device()); err != nil {
		return err
	}
	if err := sameCUDADevice(op, r.Distances.Arg, queries.Device(), distances.Device()); err != nil {
		return err
	}
	var err error
	*k, err = searchShapes(op, queries.Dim(0), queries.Dim(1), neighbors.Dim(0), neighbors.Dim(1), distances.Dim(0), distances.Dim(1), dim, rows)
	return err
}

// sameCUDADevice refuses arg's memory on device b when the queries are on
// another CUDA device a: one call runs on one device.
func sameCUDADevice(op, arg string, a, b dlpack.Device) error {
	if a.Type == dlpack.CUDA && b.Type == dlpack.CUDA && a.ID != b.ID {
		return Argf(op, arg, "memory of CUDA device %d, the queries are on device %d", b.ID, a.ID)
	}
	return nil
}
