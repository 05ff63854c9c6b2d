package bruteforce

import (
	"errors"
	"fmt"
	"math"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/prepared"
)

// Prepared is a search checked and bound once and run many times, as
// cagra.Prepared is: Run is one C call; SetQueries and Results copy through
// the bound tensors, which the Prepared holds exclusively (its filter
// shared) until Close.
type Prepared struct {
	idx *Index
	s   *prepared.Search
}

// Prepare checks a search of queries (n × Dim(), device memory) into
// neighbors (int64, n × k) and distances (float32, n × k), with an optional
// bitset or bitmap filter, exactly as Search would (a filter must let at
// least k rows through for every query), and binds the tensors for repeated
// Runs.
func (idx *Index) Prepare(queries, neighbors, distances dlpack.TensorMut, filter *safe.Filter) (*Prepared, error) {
	if idx == nil {
		return nil, kit.NilIndex("bruteforce.Index.Prepare")
	}
	const op = "bruteforce.Index.Prepare"
	if err := idx.life.Enter(op); err != nil {
		return nil, err
	}
	defer idx.life.Leave()
	s, err := prepared.New(op, "bruteforce.Prepared", &searchRules, queries, neighbors, distances, idx.dtype, idx.dim, idx.rows, filter, safe.Bitset, safe.Bitmap)
	if err != nil {
		return nil, err
	}
	s.IndexDevice = idx.dev
	// prepared.New checked neighbors: a rank-2 view.
	nv, _ := neighbors.ViewMut()
	v, _ := nv.View()
	k := int64(math.MaxInt64) // refused below if neighbors no longer says
	if v.NDim() == 2 {
		k = v.Dim(1)
	}
	if err := idx.checkSearch(op, filter, k); err != nil {
		s.Close()
		return nil, err
	}
	return &Prepared{idx: idx, s: s}, nil
}

// Run searches once, on res's stream: the results are ready once res is
// synchronized (Results does it). It allocates nothing and makes one C call
// (cuvsBruteForceSearch). With HellingerExpanded or KLDivergence it takes
// its turn among the index's searches and waits for the stream (a second
// C call, cuvsStreamSync; see Build); Hellinger's square roots are taken of
// the bound queries themselves, which SetQueries rewrites anyway.
func (p *Prepared) Run(res *safe.Resources) error {
	if p == nil || p.s == nil {
		return errZero("bruteforce.Prepared.Run")
	}
	const op = "bruteforce.Prepared.Run"
	s := p.s
	if !s.Enter() {
		return s.Closed()
	}
	if err := p.idx.life.Enter(op); err != nil {
		s.Leave()
		return err
	}
	if e := p.idx.excl; e != nil {
		// The metric rewrites the dataset (rewrite.go): one search of the
		// index at a time, until its stream is done. The bound queries,
		// held by the Prepared alone, take Hellinger's rewrite themselves.
		e.mu.Lock()
		defer e.mu.Unlock()
	}
	h, err := s.Lock(op, res)
	if err == nil {
		err = generated.CuvsBruteForceSearch(h, p.idx.h, s.Queries, s.Neighbors, s.Distances, s.Filter)
		if p.idx.excl != nil {
			err = errors.Join(err, generated.CuvsStreamSync(h))
		}
		kit.Unlock(res)
		err = kit.Wrap(op, err)
	}
	p.idx.life.Leave()
	s.Leave()
	return err
}

// SetQueries copies src (the prepared queries' shape and element type; host
// or device memory) into the bound queries and waits for the copy.
func (p *Prepared) SetQueries(res *safe.Resources, src dlpack.Tensor) error {
	if p == nil || p.s == nil {
		return errZero("bruteforce.Prepared.SetQueries")
	}
	return p.s.SetQueries(res, src)
}

// Results copies the last results into neighbors and distances (either may
// be nil) and waits for the search and the copies.
func (p *Prepared) Results(res *safe.Resources, neighbors, distances dlpack.TensorMut) error {
	if p == nil || p.s == nil {
		return errZero("bruteforce.Prepared.Results")
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
