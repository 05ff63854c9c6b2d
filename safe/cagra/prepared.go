package cagra

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Prepared is a search checked and bound once and run many times: the
// serving loop's hot path. Prepare validates its tensors and parameters and
// binds the tensors for the Prepared's whole life, so that Run is one C call
// plus two atomic counters and the resources' lock; Index.Search redoes all
// of that on every call.
//
// While it lives, a Prepared holds its three tensors exclusively (and its
// filter shared): their owners refuse to be freed, written or read by
// anyone else. Write the next batch of queries with SetQueries and read the
// results with Results, which copy through the bound tensors. Close ends the
// borrows (a Prepared dropped without Close ends them when collected). A
// Prepared is used by one goroutine at a time; give each serving goroutine
// its own, with its own Resources and buffers.
type Prepared struct {
	p      core.Prepared[generated.CuvsCagraIndex_t]
	idx    *Index
	params *generated.CuvsCagraSearchParams // Go memory without pointers, read by C

	plan    filterPlan // how the filtered search runs (SearchParams.FilterPath)
	allowed int64      // rows the filter allows
	n, k    int64
}

func (p *Prepared) core() *core.Prepared[generated.CuvsCagraIndex_t] {
	if p == nil {
		return nil
	}
	return &p.p
}

// Prepare checks a search of queries (n × Dim(), device memory) into
// neighbors (uint32 or int64, n × k) and distances (float32, n × k) with
// params and an optional bitset filter, exactly as Search would, and binds
// the tensors for repeated Runs. A filter selective enough for the exact
// The path of a filtered search (SearchParams.FilterPath) is decided here:
// exact Runs are brute-force searches, which may synchronize the stream;
// graph Runs with rows rejected read their results back to find short
// queries (one cuvsMatrixCopy and a stream sync more). No Run allocates on
// the Go heap.
// Nil params means cuVS's defaults (DefaultSearchParams).
func (idx *Index) Prepare(params *SearchParams, queries, neighbors, distances dlpack.TensorMut, filter *safe.Filter) (*Prepared, error) {
	op := kind.Op.Prepare
	var dt dlpack.DataType
	if idx != nil {
		dt = idx.dtype
	}
	var (
		sp     SearchParams
		dim, d int64
	)
	pc, err := kind.Prepare(idx, &searchRules, queries, neighbors, distances, dt, filter, bitset, func(c *core.Index[generated.CuvsCagraIndex_t]) error {
		if params == nil {
			params = &zeroSearchParams // its zeros are cuVS's defaults
		}
		var err error
		if sp, err = params.withDefaults(op); err != nil {
			return err
		}
		if err := sp.validate(op); err != nil {
			return err
		}
		if err := idx.refuseOnDisk(op); err != nil {
			return err
		}
		if err := idx.refuseGraphOnly(op); err != nil {
			return err
		}
		dim, d = c.Dim, idx.degree.Load() // read in the use, as the rows are
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := pc.S
	rows := s.Rows
	p := &Prepared{p: pc, idx: idx, n: s.N(), k: s.K()}
	p.plan = filterPlan{itopk: int64(sp.ITopKSize)}
	if filter != nil {
		p.allowed = int64(filter.Allowed())
		p.plan = sp.planFilter(filter, rows, dim, d, p.k, p.n, idx.noExact())
	}
	if p.plan.exact {
		if why := idx.noExact(); why != "" {
			s.Close()
			return nil, kit.Argf(op, "params.FilterPath", "a filter allowing %d of %d rows needs the exact path, but %s; set FilterPath to safe.FilterIndex to search the graph anyway", p.allowed, rows, why)
		}
	} else {
		sp.ITopKSize = int(p.plan.itopk)
		if err := sp.checkFiltered(op, filter != nil, p.k); err != nil {
			s.Close()
			return nil, err
		}
	}
	cp := sp.cValue()
	p.params = &cp
	return p, nil
}

// Run searches once, on res's stream: the results are ready once res is
// synchronized (Results does it). It allocates nothing and makes one C call
// (cuvsCagraSearch), except on the exact path (see Prepare).
func (p *Prepared) Run(res *safe.Resources) error {
	// Not core.Prepared.Enter: a filtered Prepared refuses a changed index
	// with its own words, and the exact path and the second pass lock res
	// themselves.
	if p == nil || p.p.S == nil {
		return core.NeverPrepared("cagra.Prepared.Run")
	}
	const op = "cagra.Prepared.Run"
	s, c := p.p.S, p.p.Index
	if !s.Enter() {
		return s.Closed()
	}
	if err := c.Life.Enter(op); err != nil {
		s.Leave()
		return err
	}
	if s.Filtered && c.Rows.Load() != s.Rows {
		p.p.Leave()
		return kit.Argf(op, "filter", "made for %d rows, the index has %d since Extend: prepare again", s.Rows, c.Rows.Load())
	}
	if p.plan.exact || p.plan.second {
		t := kit.SearchTensors{Queries: s.Queries, Neighbors: s.Neighbors, Distances: s.Distances, N: p.n, K: p.k}
		var err error
		if p.plan.exact {
			err = p.idx.searchExact(op, res, &t, s.Filter, p.allowed)
		} else if err = kit.CheckIndexDevice(res, op, c.Dev); err == nil {
			err = p.idx.searchGraph(op, res, p.params, &t, s.Filter, p.plan, p.allowed)
		}
		p.p.Leave()
		return err
	}
	h, err := s.Lock(op, res)
	if err == nil {
		err = generated.CuvsCagraSearch(h, kit.Params[generated.CuvsCagraSearchParams_t](res, p.params), c.H, s.Queries, s.Neighbors, s.Distances, s.Filter)
		err = p.p.Unlock(op, res, err)
	}
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
