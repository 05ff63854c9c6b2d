package cagra

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/hostsearch"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// SearchSlice is the one-call search from Go memory: queries holds n×Dim()
// values of the index's element type, row-major; the result holds each
// query's k nearest rows (int64 ids; a slot CAGRA could not fill holds
// SentinelID), nearest first. params nil means cuVS's defaults; filter
// nil searches every row.
//
// The device buffers it needs are kept by the index and reused, so a loop
// of searches of one shape allocates device memory only on its first call
// (up to a few concurrent callers; see Index.Search for the zero-allocation
// path with buffers of your own). It waits for the results.
func SearchSlice[T dlpack.DType](res *safe.Resources, idx *Index, params *SearchParams, queries []T, k int, filter *safe.Filter) (*safe.Results, error) {
	out := new(safe.Results)
	return out, SearchSliceInto(res, idx, params, queries, k, filter, out)
}

// SearchSliceInto is SearchSlice writing into out, whose slices are reused
// when large enough.
func SearchSliceInto[T dlpack.DType](res *safe.Resources, idx *Index, params *SearchParams, queries []T, k int, filter *safe.Filter, out *safe.Results) error {
	const op = "cagra.SearchSlice"
	if idx == nil {
		return kit.Argf(op, "idx", "nil *Index")
	}
	if err := idx.refuseGraphOnly(op); err != nil {
		return err
	}
	return hostsearch.Search(op, res, &idx.slices, int(idx.Dim()), queries, k,
		func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
			return idx.Search(res, params, q, n, d, filter)
		}, out)
}
