package tiered

import (
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// cSearch are the backends' C search parameters: cuVS's defaults (read
// once from each backend's ...SearchParamsCreate), then the caller's
// non-zero fields.
type cSearch struct {
	cagra generated.CuvsCagraSearchParams
	flat  generated.CuvsIvfFlatSearchParams
	pq    generated.CuvsIvfPqSearchParams
}

func readSearchDefaults() (cSearch, error) {
	const op = "tiered.Index.Search"
	var d cSearch
	var cg generated.CuvsCagraSearchParams_t
	if err := generated.CuvsCagraSearchParamsCreate(&cg); err != nil {
		return d, kit.Wrap(op, err)
	}
	d.cagra = *cg.Ref()
	if err := generated.CuvsCagraSearchParamsDestroy(cg); err != nil {
		return d, kit.Wrap(op, err)
	}
	var fl generated.CuvsIvfFlatSearchParams_t
	if err := generated.CuvsIvfFlatSearchParamsCreate(&fl); err != nil {
		return d, kit.Wrap(op, err)
	}
	d.flat = *fl.Ref()
	if err := generated.CuvsIvfFlatSearchParamsDestroy(fl); err != nil {
		return d, kit.Wrap(op, err)
	}
	var pq generated.CuvsIvfPqSearchParams_t
	if err := generated.CuvsIvfPqSearchParamsCreate(&pq); err != nil {
		return d, kit.Wrap(op, err)
	}
	d.pq = *pq.Ref()
	return d, kit.Wrap(op, generated.CuvsIvfPqSearchParamsDestroy(pq))
}

var searchDefaults = kit.Defaults[cSearch]{Read: readSearchDefaults}

// searchParams returns the backend's C search parameters for p and their
// size.
func (idx *Index) searchParams(p *SearchParams) (cSearch, uintptr, error) {
	d, err := searchDefaults.Get()
	if err != nil {
		return cSearch{}, 0, err
	}
	s := *d
	if p != nil {
		if p.CAGRA.ITopKSize != 0 {
			s.cagra.ItopkSize = p.CAGRA.ITopKSize
		}
		if p.CAGRA.SearchWidth != 0 {
			s.cagra.SearchWidth = p.CAGRA.SearchWidth
		}
		if p.CAGRA.MaxIterations != 0 {
			s.cagra.MaxIterations = p.CAGRA.MaxIterations
		}
		if p.IVFFlat.NProbes != 0 {
			s.flat.NProbes = p.IVFFlat.NProbes
		}
		if p.IVFPQ.NProbes != 0 {
			s.pq.NProbes = p.IVFPQ.NProbes
		}
	}
	switch idx.p.Backend {
	case IVFFlat:
		return s, unsafe.Sizeof(s.flat), nil
	case IVFPQ:
		return s, unsafe.Sizeof(s.pq), nil
	}
	return s, unsafe.Sizeof(s.cagra), nil
}

// Searcher adapts the index to package batch (batch.Searcher): the
// Batcher's searches use params (nil: cuVS's defaults) and no filter.
type Searcher struct {
	idx    *Index
	params *SearchParams
}

var _ batch.Searcher = (*Searcher)(nil)

// NewSearcher returns idx's batch adapter.
func NewSearcher(idx *Index, params *SearchParams) *Searcher {
	return &Searcher{idx: idx, params: params}
}

// DType is float32.
func (s *Searcher) DType() dlpack.DataType {
	if s == nil {
		return dlpack.DataType{}
	}
	return s.idx.DType()
}

// Dim is the index's dimension.
func (s *Searcher) Dim() int {
	if s == nil {
		return 0
	}
	return s.idx.Dim()
}

// Rows is the largest k a search takes: the index's Rows() (the ids
// given; slots past the live rows hold the sentinel).
func (s *Searcher) Rows() int {
	if s == nil || s.idx == nil {
		return 0
	}
	return s.idx.Rows()
}

// NeighborTypes is int64.
func (s *Searcher) NeighborTypes() []dlpack.DataType { return []dlpack.DataType{dlpack.Int64} }

// SearchBatch is Index.Search without a filter.
func (s *Searcher) SearchBatch(res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error {
	if s == nil {
		return kit.NilIndex("tiered.Searcher.SearchBatch")
	}
	if s.idx == nil { // the zero Searcher: NewSearcher makes them
		return kit.NeverBuilt("tiered.Searcher.SearchBatch")
	}
	return s.idx.Search(res, s.params, queries, neighbors, distances, nil)
}
