package safe

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
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
	N, K                          int64 // queries and neighbors per query
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
		return Argf(op, r.Queries.Arg, "%v", err)
	}
	nm, err := neighbors.ViewMut()
	if err != nil {
		return Argf(op, r.Neighbors.Arg, "%v", err)
	}
	dm, err := distances.ViewMut()
	if err != nil {
		return Argf(op, r.Distances.Arg, "%v", err)
	}
	if err := r.Queries.Check(op, &qv); err != nil {
		return err
	}
	if qv.DType() != dtype {
		return Argf(op, r.Queries.Arg, "dtype %s, the index holds %s", qv.DType(), dtype)
	}
	if err := r.Neighbors.CheckMut(op, &nm); err != nil {
		return err
	}
	if err := r.Distances.CheckMut(op, &dm); err != nil {
		return err
	}
	if t.K, err = SearchShapesMut(op, &qv, &nm, &dm, dim, rows); err != nil {
		return err
	}
	t.N = qv.Dim(0)
	if t.Queries, err = c.In(&qv); err != nil {
		return Argf(op, r.Queries.Arg, "%v", err)
	}
	if t.Neighbors, err = c.Out(&nm); err != nil {
		return Argf(op, r.Neighbors.Arg, "%v", err)
	}
	if t.Distances, err = c.Out(&dm); err != nil {
		return Argf(op, r.Distances.Arg, "%v", err)
	}
	return nil
}
