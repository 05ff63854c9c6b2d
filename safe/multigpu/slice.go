package multigpu

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// searchK runs search into fresh Go memory for the queries' rows and k.
func searchK(queries dlpack.Tensor, k int, search func(n, d dlpack.TensorMut) error) (*safe.Results, error) {
	const op = "multigpu.SearchK"
	if queries == nil {
		return nil, kit.Argf(op, "queries", "nil")
	}
	v, err := queries.View()
	if err != nil {
		return nil, kit.Argf(op, "queries", "%w", err)
	}
	if v.NDim() != 2 {
		return nil, kit.Argf(op, "queries", "rank %d, want 2", v.NDim())
	}
	if k < 1 {
		return nil, kit.Argf(op, "k", "%d, want at least 1", k)
	}
	n := int(v.Dim(0))
	out := &safe.Results{K: k, Neighbors: make([]int64, n*k), Distances: make([]float32, n*k)}
	nm, err := dlpack.NewHostMatrix(out.Neighbors, n, k)
	if err != nil {
		return nil, kit.Argf(op, "queries", "%w", err)
	}
	dm, err := dlpack.NewHostMatrix(out.Distances, n, k)
	if err != nil {
		return nil, kit.Argf(op, "queries", "%w", err)
	}
	if err := search(nm, dm); err != nil {
		return nil, err
	}
	return out, nil
}
