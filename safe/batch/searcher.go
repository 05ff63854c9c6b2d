package batch

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Searcher is what a Batcher searches: an index with its search parameters
// and filter fixed. A Batcher calls SearchBatch from one goroutine per slot,
// each slot with its own Resources, so SearchBatch must allow concurrent
// calls on different Resources (every index of the safe layer does).
//
// CAGRA and BruteForce adapt this module's indexes; another index type (an
// IVF-Flat or IVF-PQ index, say) plugs in by implementing these five
// methods, usually in a few lines around its Search.
type Searcher interface {
	// DType is the element type of the queries (and of the index).
	DType() dlpack.DataType
	// Dim is the width of a query.
	Dim() int
	// Rows is the number of rows indexed: a request's k may not exceed it.
	Rows() int
	// NeighborTypes lists the neighbor id types SearchBatch can write
	// (dlpack.Uint32, dlpack.Int64).
	NeighborTypes() []dlpack.DataType
	// SearchBatch searches queries (n × Dim(), device memory) for the k
	// nearest rows, k being the columns of neighbors and distances (n × k,
	// device memory), queued on res's stream: the Batcher synchronizes the
	// stream after copying the results out, so SearchBatch need not wait.
	SearchBatch(res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error
}

// cagraSearcher adapts a CAGRA index.
type cagraSearcher struct {
	idx    *cagra.Index
	params cagra.SearchParams
	filter *safe.Filter
}

// CAGRA adapts a CAGRA index for a Batcher: every batch is searched with
// params (copied) and filter, a bitset for the index's rows or nil. Neighbor
// ids may be uint32 or int64. One filter serves every request: for requests
// with different filters, make one Batcher per filter. The index must
// outlive the Batcher (close the Batcher first).
//
// C calls: cuvsCagraSearch, per batch.
func CAGRA(idx *cagra.Index, params cagra.SearchParams, filter *safe.Filter) (Searcher, error) {
	const op = "batch.CAGRA"
	if idx == nil {
		return nil, kit.Argf(op, "idx", "nil")
	}
	if filter != nil && filter.Kind() != safe.Bitset {
		return nil, kit.Argf(op, "filter", "a %s: CAGRA filters with a bitset only", filter.Kind())
	}
	return &cagraSearcher{idx: idx, params: params, filter: filter}, nil
}

func (s *cagraSearcher) DType() dlpack.DataType { return s.idx.DType() }
func (s *cagraSearcher) Dim() int               { return s.idx.Dim() }
func (s *cagraSearcher) Rows() int              { return s.idx.Rows() }
func (s *cagraSearcher) NeighborTypes() []dlpack.DataType {
	return []dlpack.DataType{dlpack.Uint32, dlpack.Int64}
}
func (s *cagraSearcher) SearchBatch(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
	return s.idx.Search(res, &s.params, q, n, d, s.filter)
}

// bruteForceSearcher adapts a brute-force index.
type bruteForceSearcher struct {
	idx    *bruteforce.Index
	filter *safe.Filter
}

// BruteForce adapts a brute-force index for a Batcher: every batch is
// searched with filter, a bitset for the index's rows or nil. A bitmap,
// whose bits belong to query positions, is refused: a request's position in
// a batch changes from batch to batch. Neighbor ids are int64. The index
// must outlive the Batcher (close the Batcher first).
//
// Brute force is exact: a query's neighbors from a batch are those of a
// search of that query alone (distances may differ in the last bits, as
// the GPU's matrix products depend on the batch's shape).
//
// C calls: cuvsBruteForceSearch, per batch.
func BruteForce(idx *bruteforce.Index, filter *safe.Filter) (Searcher, error) {
	const op = "batch.BruteForce"
	if idx == nil {
		return nil, kit.Argf(op, "idx", "nil")
	}
	if filter != nil && filter.Kind() != safe.Bitset {
		return nil, kit.Argf(op, "filter", "a %s: a batch's rows belong to different requests each time, so only a bitset can be shared", filter.Kind())
	}
	return &bruteForceSearcher{idx: idx, filter: filter}, nil
}

func (s *bruteForceSearcher) DType() dlpack.DataType { return s.idx.DType() }
func (s *bruteForceSearcher) Dim() int               { return s.idx.Dim() }
func (s *bruteForceSearcher) Rows() int              { return s.idx.Rows() }
func (s *bruteForceSearcher) NeighborTypes() []dlpack.DataType {
	return []dlpack.DataType{dlpack.Int64}
}
func (s *bruteForceSearcher) SearchBatch(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
	return s.idx.Search(res, q, n, d, s.filter)
}
