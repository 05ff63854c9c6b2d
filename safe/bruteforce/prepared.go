package bruteforce

import (
	"errors"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
)

// Prepared is a search checked and bound once and run many times, as
// cagra.Prepared is: Run is one C call; SetQueries and Results copy through
// the bound tensors, which the Prepared holds exclusively (its filter
// shared) until Close.
type Prepared struct {
	p   core.Prepared[generated.CuvsBruteForceIndex_t]
	idx *Index
}

func (p *Prepared) core() *core.Prepared[generated.CuvsBruteForceIndex_t] {
	if p == nil {
		return nil
	}
	return &p.p
}

// Prepare checks a search of queries (n × Dim(), device memory) into
// neighbors (int64, n × k) and distances (float32, n × k), with an optional
// bitset or bitmap filter, exactly as Search would (a filter must let at
// least k rows through for every query), and binds the tensors for repeated
// Runs.
func (idx *Index) Prepare(queries, neighbors, distances dlpack.TensorMut, filter *safe.Filter) (*Prepared, error) {
	var dt dlpack.DataType
	if idx != nil {
		dt = idx.dtype
	}
	p, err := kind.Prepare(idx, &searchRules, queries, neighbors, distances, dt, filter, filterKinds, nil)
	if err != nil {
		return nil, err
	}
	if err := idx.checkSearch(kind.Op.Prepare, filter, p.S.K()); err != nil {
		p.Close()
		return nil, err
	}
	return &Prepared{p: p, idx: idx}, nil
}

// Run searches once, on res's stream: the results are ready once res is
// synchronized (Results does it). It allocates nothing and makes one C call
// (cuvsBruteForceSearch). With HellingerExpanded or KLDivergence it takes
// its turn among the index's searches and waits for the stream (a second
// C call, cuvsStreamSync; see Build); Hellinger's square roots are taken of
// the bound queries themselves, which SetQueries rewrites anyway.
func (p *Prepared) Run(res *safe.Resources) error {
	const op = "bruteforce.Prepared.Run"
	if p != nil && p.idx != nil && p.idx.excl != nil {
		// The metric rewrites the dataset (rewrite.go): one search of the
		// index at a time, until its stream is done, taken before res as
		// Search takes it. The bound queries, held by the Prepared alone,
		// take Hellinger's rewrite themselves.
		p.idx.excl.mu.Lock()
		defer p.idx.excl.mu.Unlock()
	}
	h, err := p.core().Enter(op, res)
	if err != nil {
		return err
	}
	s := p.p.S
	err = generated.CuvsBruteForceSearch(h, p.idx.c.H, s.Queries, s.Neighbors, s.Distances, s.Filter)
	if p.idx.excl != nil {
		err = errors.Join(err, generated.CuvsStreamSync(h))
	}
	err = p.p.Unlock(op, res, err)
	p.p.Leave()
	return err
}

// SetQueries copies src (the prepared queries' shape and element type; host
// or device memory) into the bound queries and waits for the copy.
func (p *Prepared) SetQueries(res *safe.Resources, src dlpack.Tensor) error {
	return p.core().SetQueries(kind.Op.Prepared, res, src)
}

// Results copies the last results into neighbors and distances (either may
// be nil) and waits for the search and the copies.
func (p *Prepared) Results(res *safe.Resources, neighbors, distances dlpack.TensorMut) error {
	return p.core().Results(kind.Op.Prepared, res, neighbors, distances)
}

// Close ends the Prepared's borrows, waiting for a Run or copy in flight.
// Closing twice is harmless.
func (p *Prepared) Close() error { return p.core().Close() }
