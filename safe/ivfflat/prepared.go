package ivfflat

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/ivffilter"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Prepared is a search checked and bound once and run many times, as
// cagra.Prepared is: Run is one C call; SetQueries and Results copy through
// the bound tensors, which the Prepared holds exclusively (its filter
// shared) until Close. A Prepared is used by one goroutine at a time.
type Prepared struct {
	p   *core.IVFPrepared[generated.CuvsIvfFlatIndex_t]
	idx *Index
}

func (p *Prepared) core() *core.IVFPrepared[generated.CuvsIvfFlatIndex_t] {
	if p == nil {
		return nil
	}
	return p.p
}

// Prepare checks a search of queries (n × Dim(), device memory) into
// neighbors (int64, n × k) and distances (float32, n × k) with params and
// an optional bitset filter, exactly as Search would, and binds the tensors
// for repeated Runs.
// Nil params means cuVS's defaults (DefaultSearchParams).
func (idx *Index) Prepare(params *SearchParams, queries, neighbors, distances dlpack.TensorMut, filter *safe.Filter) (*Prepared, error) {
	if idx == nil {
		return nil, kit.NilIndex(kind.Op.Prepare)
	}
	s := core.IVFSearch{DType: idx.dtype, Filter: filter}
	p, err := core.PrepareIVF(&kind, idx, &idx.ivf, &searchRules, queries, neighbors, distances, &s, func(*core.Index[generated.CuvsIvfFlatIndex_t]) error {
		sp, err := params.resolve(kind.Op.Prepare)
		s.Path, s.Probes = ivffilter.Path(sp.FilterPath), sp.NProbes
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Prepared{p: p, idx: idx}, nil
}

// Run searches once, on res's stream: the results are ready once res is
// synchronized (Results does it). It allocates nothing and makes one C call
// (cuvsIvfFlatSearch), or, when its filter takes safe.FilterAuto's second look (see
// Index.Search), a copy of the distances, a sync and a C call per run of
// short queries.
func (p *Prepared) Run(res *safe.Resources) error {
	if p == nil {
		return core.NeverPrepared("ivfflat.Prepared.Run")
	}
	return p.p.Run("ivfflat.Prepared.Run", res, p.idx.search)
}

// SetQueries copies src (the prepared queries' shape and element type;
// host or device memory) into the bound queries and waits for the copy
// (cuvsMatrixCopy, cuvsStreamSync).
func (p *Prepared) SetQueries(res *safe.Resources, src dlpack.Tensor) error {
	return p.core().SetQueries(kind.Op.Prepared, res, src)
}

// Results copies the last results into neighbors and distances (either may
// be nil; the prepared shapes and element types; host or device memory)
// and waits for the search and the copies.
func (p *Prepared) Results(res *safe.Resources, neighbors, distances dlpack.TensorMut) error {
	return p.core().Results(kind.Op.Prepared, res, neighbors, distances)
}

// Close ends the Prepared's borrows, waiting for a Run or copy in flight.
// Closing twice is harmless.
func (p *Prepared) Close() error { return p.core().Close() }
