package ivfpq

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
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
	p      core.Prepared[generated.CuvsIvfPqIndex_t]
	idx    *Index
	params generated.CuvsIvfPqSearchParams // Go memory without pointers, copied by C
}

func (p *Prepared) core() *core.Prepared[generated.CuvsIvfPqIndex_t] {
	if p == nil {
		return nil
	}
	return &p.p
}

// Prepare checks a search of queries (n × Dim(), device memory) into
// neighbors (int64, n × k) and distances (float32, n × k) with params,
// exactly as Search would, and binds the tensors for repeated Runs. k may
// not exceed the index's size when prepared.
// Nil params means cuVS's defaults (DefaultSearchParams).
func (idx *Index) Prepare(params *SearchParams, queries, neighbors, distances dlpack.TensorMut) (*Prepared, error) {
	if idx == nil {
		return nil, kit.NilIndex(kind.Op.Prepare)
	}
	op := kind.Op.Prepare
	dt := idx.elemType() // the index's, or while unknown the queries' own (whose rule still limits it)
	if dt == (dlpack.DataType{}) && queries != nil {
		if qm, err := queries.ViewMut(); err == nil {
			dt = qm.DType()
		}
	}
	var sp SearchParams
	p, err := kind.Prepare(idx, &searchRules, queries, neighbors, distances, dt, nil, nil, func(*core.Index[generated.CuvsIvfPqIndex_t]) error {
		var err error
		if sp, err = idx.checkSearch(op, params); err != nil {
			return err
		}
		if now := idx.elemType(); now != (dlpack.DataType{}) && dt != (dlpack.DataType{}) && now != dt {
			// dt, the queries' own, was read before the use began, and an
			// Extend set the index's since: refused as prepared.New would
			return kit.Argf(op, searchRules.Queries.Arg, "dtype %s, the index holds %s", dt, now)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Prepared{p: p, idx: idx, params: sp.cValue()}, nil
}

// Run searches once, on res's stream: the results are ready once res is
// synchronized (Results does it). It allocates nothing and makes one C call
// (cuvsIvfPqSearch).
func (p *Prepared) Run(res *safe.Resources) error {
	const op = "ivfpq.Prepared.Run"
	h, err := p.core().Enter(op, res)
	if err != nil {
		return err
	}
	s := p.p.S
	err = generated.CuvsIvfPqSearch(h, kit.Params[generated.CuvsIvfPqSearchParams_t](res, &p.params), p.idx.c.H, s.Queries, s.Neighbors, s.Distances)
	err = p.p.Unlock(op, res, err)
	p.p.Leave()
	return err
}

// SetQueries copies src (the prepared queries' shape and element type; host
// or device memory) into the bound queries and waits for the copy
// (cuvsMatrixCopy, cuvsStreamSync).
func (p *Prepared) SetQueries(res *safe.Resources, src dlpack.Tensor) error {
	return p.core().SetQueries(kind.Op.Prepared, res, src)
}

// Results copies the last results into neighbors and distances (either may
// be nil; the prepared shapes and element types; host or device memory) and
// waits for the search and the copies.
func (p *Prepared) Results(res *safe.Resources, neighbors, distances dlpack.TensorMut) error {
	return p.core().Results(kind.Op.Prepared, res, neighbors, distances)
}

// Close ends the Prepared's borrows, waiting for a Run or copy in flight.
// Closing twice is harmless.
func (p *Prepared) Close() error { return p.core().Close() }
