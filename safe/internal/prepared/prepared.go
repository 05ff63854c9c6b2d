// Package prepared is the part of a prepared k-NN search that every
// algorithm shares: its tensors checked and bound once (to a dlpack.Call
// kept open for the search's life), the copies in and out through them,
// and the in-flight count that Close waits for. Each algorithm package
// wraps a Search with its own parameters and C call.
package prepared

import (
	"fmt"
	"runtime"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/handle"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Search holds a prepared search's bound tensors.
type Search struct {
	Queries, Neighbors, Distances *generated.DLManagedTensor // C memory, bound for the Search's life
	Filter                        generated.CuvsFilter
	Filtered                      bool
	Rows                          int64         // the index's rows when prepared, for the filter
	IndexDevice                   dlpack.Device // where the index keeps its memory (the zero Device: not known)

	name   string
	device dlpack.Device // of the bound tensors
	call   dlpack.Call
	qShape [2]int64
	qDType dlpack.DataType
	nShape [2]int64
	nDType dlpack.DataType
	state  handle.State
	clean  runtime.Cleanup
}

// New (for the operation op, e.g. "cagra.Index.Prepare") checks the tensors of a search of an index holding rows vectors of
// dim elements of type dtype against rules, as SearchRules.Bind does, and
// binds them for the Search's life: the queries writable too, since the
// Search, not its caller, writes them (SetQueries). filter, if not nil,
// must be one of kinds.
// name prefixes the Search's own operations (e.g. "cagra.Prepared").
func New(op, name string, rules *kit.SearchRules, queries, neighbors, distances dlpack.TensorMut, dtype dlpack.DataType, dim, rows int64, filter *safe.Filter, kinds ...safe.FilterKind) (*Search, error) {
	if queries == nil || neighbors == nil || distances == nil {
		return nil, kit.Argf(op, "queries/neighbors/distances", "nil tensor")
	}
	qm, err := queries.ViewMut()
	if err != nil {
		return nil, kit.Argf(op, rules.Queries.Arg, "%w", err)
	}
	nm, err := neighbors.ViewMut()
	if err != nil {
		return nil, kit.Argf(op, rules.Neighbors.Arg, "%w", err)
	}
	dm, err := distances.ViewMut()
	if err != nil {
		return nil, kit.Argf(op, rules.Distances.Arg, "%w", err)
	}
	qv, _ := qm.View()
	if _, err := rules.Check(op, &qv, &nm, &dm, dtype, dim, rows); err != nil {
		return nil, err
	}
	s := &Search{
		name: name, Rows: rows, Filtered: filter != nil, device: qm.Device(),
		qShape: [2]int64{qm.Dim(0), qm.Dim(1)}, qDType: qm.DType(),
		nShape: [2]int64{nm.Dim(0), nm.Dim(1)}, nDType: nm.DType(),
	}
	s.call = dlpack.Begin(op)
	if s.Queries, err = s.call.Out(&qm); err != nil {
		s.call.End()
		return nil, kit.Argf(op, rules.Queries.Arg, "%w", err)
	}
	if s.Neighbors, err = s.call.Out(&nm); err != nil {
		s.call.End()
		return nil, kit.Argf(op, rules.Neighbors.Arg, "%w", err)
	}
	if s.Distances, err = s.call.Out(&dm); err != nil {
		s.call.End()
		return nil, kit.Argf(op, rules.Distances.Arg, "%w", err)
	}
	if s.Filter, err = kit.BindFilter(filter, op, s.call, rows, qm.Dim(0), kinds...); err != nil {
		s.call.End()
		return nil, err
	}
	// A Search dropped without Close still ends its borrows.
	s.clean = runtime.AddCleanup(s, dlpack.Call.End, s.call)
	return s, nil
}

// Lock refuses resources of another CUDA device than the bound tensors'
// (kit.CheckDevice) or the index's (IndexDevice) and takes res for a run's C call (kit.Lock); kit.Unlock
// gives it back.
func (s *Search) Lock(op string, res *safe.Resources) (generated.CuvsResources_t, error) {
	if err := kit.CheckDevice(res, op, "res", s.device); err != nil {
		return 0, err
	}
	if err := kit.CheckIndexDevice(res, op, s.IndexDevice); err != nil {
		return 0, err
	}
	return kit.Lock(res, op)
}

// N returns the number of queries bound.
func (s *Search) N() int64 { return s.qShape[0] }

// K returns the number of neighbours per query bound.
func (s *Search) K() int64 { return s.nShape[1] }

// Enter starts a run; it fails once Close has begun. Leave ends it.
func (s *Search) Enter() bool { return s.state.Enter() }

// Leave ends what Enter began.
func (s *Search) Leave() { s.state.Leave() }

// Closed is the error of a run on a closed Search.
func (s *Search) Closed() error { return fmt.Errorf("%s: %w", s.name, safe.ErrClosed) }

// SetQueries copies src into the bound queries and waits for the copy.
func (s *Search) SetQueries(res *safe.Resources, src dlpack.Tensor) error {
	op := s.name + ".SetQueries"
	if src == nil {
		return kit.Argf(op, "src", "nil")
	}
	sv, err := src.View()
	if err != nil {
		return kit.Argf(op, "src", "%w", err)
	}
	if err := checkShape(op, "src", sv.DType(), sv.NDim(), sv.Dim, s.qDType, s.qShape); err != nil {
		return err
	}
	if sv.Dim(1) > 1 && sv.Stride(1) != 1 {
		return kit.Argf(op, "src", "strides %v: rows must be contiguous", sv.Strides())
	}
	return s.copy(op, res, func(c dlpack.Call) (src, dst *generated.DLManagedTensor, err error) {
		src, err = c.In(&sv)
		return src, s.Queries, err
	})
}

// Results copies the last results into neighbors and distances (either may
// be nil) and waits for the search and the copies.
func (s *Search) Results(res *safe.Resources, neighbors, distances dlpack.TensorMut) error {
	op := s.name + ".Results"
	for i, t := range []dlpack.TensorMut{neighbors, distances} {
		if t == nil {
			continue
		}
		arg, from, dt := "neighbors", s.Neighbors, s.nDType
		if i == 1 {
			arg, from, dt = "distances", s.Distances, dlpack.Float32
		}
		m, err := t.ViewMut()
		if err != nil {
			return kit.Argf(op, arg, "%w", err)
		}
		if err := checkShape(op, arg, m.DType(), m.NDim(), m.Dim, dt, s.nShape); err != nil {
			return err
		}
		if m.Dim(1) > 1 && m.Stride(1) != 1 {
			return kit.Argf(op, arg, "strides %v: rows must be contiguous", m.Strides())
		}
		if err := s.copy(op, res, func(c dlpack.Call) (src, dst *generated.DLManagedTensor, err error) {
			dst, err = c.Out(&m)
			return from, dst, err
		}); err != nil {
			return err
		}
	}
	return nil
}

func checkShape(op, arg string, dt dlpack.DataType, ndim int, dim func(int) int64, want dlpack.DataType, shape [2]int64) error {
	if dt != want || ndim != 2 || dim(0) != shape[0] || dim(1) != shape[1] {
		return kit.Argf(op, arg, "want %s [%d %d]", want, shape[0], shape[1])
	}
	return nil
}

func (s *Search) copy(op string, res *safe.Resources, bind func(dlpack.Call) (src, dst *generated.DLManagedTensor, err error)) error {
	if !s.state.Enter() {
		return s.Closed()
	}
	defer s.state.Leave()
	c := dlpack.Begin(op)
	defer c.End()
	from, to, err := bind(c)
	if err != nil {
		return kit.Argf(op, "tensor", "%w", err)
	}
	return kit.CopyBound(op, res, from, to)
}

// Close ends the borrows, waiting for a run or copy in flight. Closing
// twice is harmless.
func (s *Search) Close() error {
	if s.state.Close() {
		s.clean.Stop()
		s.call.End()
	}
	return nil
}
