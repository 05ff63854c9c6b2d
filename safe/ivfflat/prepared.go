package ivfflat

import (
	"fmt"
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/ivffilter"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/prepared"
)

// Prepared is a search checked and bound once and run many times, as
// cagra.Prepared is: Run is one C call; SetQueries and Results copy through
// the bound tensors, which the Prepared holds exclusively (its filter
// shared) until Close. A Prepared is used by one goroutine at a time.
type Prepared struct {
	idx    *Index
	params *generated.CuvsIvfFlatSearchParams // Go memory without pointers, read by C
	all    *generated.CuvsIvfFlatSearchParams // every list: the second pass
	s      *prepared.Search
	plan   ivffilter.Plan
	host   *ivffilter.Host // the second pass's copy of the distances (plan.Repair)
	ft     ivffilter.Tensors
}

// Prepare checks a search of queries (n × Dim(), device memory) into
// neighbors (int64, n × k) and distances (float32, n × k) with params and
// an optional bitset filter, exactly as Search would, and binds the tensors
// for repeated Runs.
// Nil params means cuVS's defaults (DefaultSearchParams).
func (idx *Index) Prepare(params *SearchParams, queries, neighbors, distances dlpack.TensorMut, filter *safe.Filter) (*Prepared, error) {
	if idx == nil {
		return nil, kit.NilIndex("ivfflat.Index.Prepare")
	}
	const op = "ivfflat.Index.Prepare"
	if err := idx.life.Enter(op); err != nil {
		return nil, err
	}
	defer idx.life.Leave()
	sp, err := params.resolve(op)
	if err != nil {
		return nil, err
	}
	s, err := prepared.New(op, "ivfflat.Prepared", &searchRules, queries, neighbors, distances, idx.dtype, idx.dim, idx.rows.Load(), filter, safe.Bitset)
	if err != nil {
		return nil, err
	}
	s.IndexDevice = idx.dev
	p := &Prepared{idx: idx, s: s, plan: idx.plan(&sp, filter, s.Rows, s.K())}
	p.params = &generated.CuvsIvfFlatSearchParams{NProbes: p.plan.Probes}
	p.all = &generated.CuvsIvfFlatSearchParams{NProbes: idx.allLists()}
	p.ft = ivffilter.Tensors{Q: s.Queries, N: s.Neighbors, D: s.Distances, Rows: s.N(), K: s.K(), QRowSize: rowBytes(s.Queries)}
	if p.plan.Repair {
		if p.host, err = ivffilter.NewHost(p.ft.Rows, p.ft.K); err != nil {
			s.Close()
			return nil, err
		}
	}
	return p, nil
}

// Run searches once, on res's stream: the results are ready once res is
// synchronized (Results does it). It allocates nothing and makes one C call
// (cuvsIvfFlatSearch), or, when its filter takes FilterAuto's second look (see
// Index.Search), a copy of the distances, a sync and a C call per run of
// short queries.
func (p *Prepared) Run(res *safe.Resources) error {
	if p == nil || p.s == nil {
		return errZero("ivfflat.Prepared.Run")
	}
	const op = "ivfflat.Prepared.Run"
	s := p.s
	if !s.Enter() {
		return s.Closed()
	}
	if err := p.idx.life.Enter(op); err != nil {
		s.Leave()
		return err
	}
	if rows := p.idx.rows.Load(); rows != s.Rows && (s.Filtered || rows < s.Rows) {
		p.idx.life.Leave()
		s.Leave()
		return kit.Argf(op, "index", "prepared for %d rows, the index has %d since Extend: prepare again", s.Rows, rows)
	}
	h, err := s.Lock(op, res)
	if err == nil {
		err = generated.CuvsIvfFlatSearch(h, kit.Params[generated.CuvsIvfFlatSearchParams_t](res, p.params), p.idx.h, s.Queries, s.Neighbors, s.Distances, s.Filter)
		kit.Unlock(res)
		err = kit.Wrap(op, err)
		if err == nil && p.plan.Repair {
			err = ivffilter.Repair(op, res, p.host, p.plan, p.all.NProbes, &p.ft, p.again)
		}
	}
	p.idx.life.Leave()
	s.Leave()
	return err
}

// SetQueries copies src (the prepared queries' shape and element type;
// host or device memory) into the bound queries and waits for the copy
// (cuvsMatrixCopy, cuvsStreamSync).
func (p *Prepared) SetQueries(res *safe.Resources, src dlpack.Tensor) error {
	if p == nil || p.s == nil {
		return errZero("ivfflat.Prepared.SetQueries")
	}
	return p.s.SetQueries(res, src)
}

// Results copies the last results into neighbors and distances (either may
// be nil; the prepared shapes and element types; host or device memory)
// and waits for the search and the copies.
func (p *Prepared) Results(res *safe.Resources, neighbors, distances dlpack.TensorMut) error {
	if p == nil || p.s == nil {
		return errZero("ivfflat.Prepared.Results")
	}
	return p.s.Results(res, neighbors, distances)
}

// Close ends the Prepared's borrows, waiting for a Run or copy in flight.
// Closing twice is harmless.
func (p *Prepared) Close() error {
	if p == nil || p.s == nil {
		return nil
	}
	err := p.s.Close()
	if p.host != nil {
		if e := p.host.Close(); err == nil {
			err = e
		}
		p.host = nil
	}
	return err
}

// again is the second pass's C call, on the bound tensors narrowed to the
// short queries.
func (p *Prepared) again(res *safe.Resources, h generated.CuvsResources_t, _ uint32, q, n, d *generated.DLManagedTensor) error {
	return generated.CuvsIvfFlatSearch(h, kit.Params[generated.CuvsIvfFlatSearchParams_t](res, p.all), p.idx.h, q, n, d, p.s.Filter)
}

// errZero is the error of a method of a Prepared not made by Prepare.
func errZero(op string) error {
	return fmt.Errorf("%s: %w: the zero value, never built (a Prepared not made by Index.Prepare)", op, safe.ErrClosed)
}
