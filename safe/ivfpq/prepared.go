package ivfpq

import (
	"fmt"
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/prepared"
)

// Prepared is a search checked and bound once and run many times, as in
// package cagra: Prepare validates its tensors and parameters and binds the
// tensors for the Prepared's whole life, so that Run is one C call plus two
// atomic counters and the resources' lock.
//
// While it lives, a Prepared holds its three tensors exclusively: their
// owners refuse to be freed, written or read by anyone else. Write the next
// batch of queries with SetQueries and read the results with Results. Close
// ends the borrows. A Prepared is used by one goroutine at a time.
type Prepared struct {
	idx    *Index
	params *generated.CuvsIvfPqSearchParams // Go memory without pointers, copied by C
	s      *prepared.Search
}

// Prepare checks a search of queries (n × Dim(), device memory) into
// neighbors (int64, n × k) and distances (float32, n × k) with params,
// exactly as Search would, and binds the tensors for repeated Runs. k may
// not exceed the index's size when prepared.
// Nil params means cuVS's defaults (DefaultSearchParams).
func (idx *Index) Prepare(params *SearchParams, queries, neighbors, distances dlpack.TensorMut) (*Prepared, error) {
	if idx == nil {
		return nil, kit.NilIndex("ivfpq.Index.Prepare")
	}
	const op = "ivfpq.Index.Prepare"
	if err := idx.life.Enter(op); err != nil {
		return nil, err
	}
	defer idx.life.Leave()
	sp, err := idx.checkSearch(op, params)
	if err != nil {
		return nil, err
	}
	dt := idx.DType()
	if dt == (dlpack.DataType{}) && queries != nil {
		if qm, err := queries.ViewMut(); err == nil {
			dt = qm.DType()
		}
	}
	s, err := prepared.New(op, "ivfpq.Prepared", &searchRules, queries, neighbors, distances, dt, idx.dim, idx.rows.Load(), nil)
	if err != nil {
		return nil, err
	}
	s.IndexDevice = idx.dev
	cp := sp.cValue()
	return &Prepared{idx: idx, params: &cp, s: s}, nil
}

// Run searches once, on res's stream: the results are ready once res is
// synchronized (Results does it). It allocates nothing and makes one C call
// (cuvsIvfPqSearch).
func (p *Prepared) Run(res *safe.Resources) error {
	if p == nil || p.s == nil {
		return errZero("ivfpq.Prepared.Run")
	}
	const op = "ivfpq.Prepared.Run"
	s := p.s
	if !s.Enter() {
		return s.Closed()
	}
	if err := p.idx.life.Enter(op); err != nil {
		s.Leave()
		return err
	}
	h, err := s.Lock(op, res)
	if err == nil {
		err = generated.CuvsIvfPqSearch(h, kit.Params[generated.CuvsIvfPqSearchParams_t](res, p.params), p.idx.h, s.Queries, s.Neighbors, s.Distances)
		kit.Unlock(res)
		err = kit.Wrap(op, err)
	}
	p.idx.life.Leave()
	s.Leave()
	return err
}

// SetQueries copies src (the prepared queries' shape and element type; host
// or device memory) into the bound queries and waits for the copy
// (cuvsMatrixCopy, cuvsStreamSync).
func (p *Prepared) SetQueries(res *safe.Resources, src dlpack.Tensor) error {
	if p == nil || p.s == nil {
		return errZero("ivfpq.Prepared.SetQueries")
	}
	return p.s.SetQueries(res, src)
}

// Results copies the last results into neighbors and distances (either may
// be nil; the prepared shapes and element types; host or device memory) and
// waits for the search and the copies.
func (p *Prepared) Results(res *safe.Resources, neighbors, distances dlpack.TensorMut) error {
	if p == nil || p.s == nil {
		return errZero("ivfpq.Prepared.Results")
	}
	return p.s.Results(res, neighbors, distances)
}

// Close ends the Prepared's borrows, waiting for a Run or copy in flight.
// Closing twice is harmless.
func (p *Prepared) Close() error {
	if p == nil || p.s == nil {
		return nil
	}
	return p.s.Close()
}

// errZero is the error of a method of a Prepared not made by Prepare.
func errZero(op string) error {
	return fmt.Errorf("%s: %w: the zero value, never built (a Prepared not made by Index.Prepare)", op, safe.ErrClosed)
}
