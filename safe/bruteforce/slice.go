package bruteforce

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
)

// SearchSlice is the one-call search from Go memory: queries holds n×Dim()
// values of the index's element type, row-major; the result holds each
// query's k nearest rows, nearest first (exact). filter nil searches every
// row. Brute force fills every slot (a filter letting fewer than k rows
// through is refused); a distance that overflows to +Inf would read as
// unfilled: safe.SentinelID64 with distance +Inf, as in every package.
//
// Everything is checked before any device memory is taken: the queries'
// element type, length and values (a NaN or an infinity is refused,
// naming its row), k against the index's rows, the filter. The device
// buffers it needs are kept by the index and reused, so a loop of searches
// of one shape allocates device memory only on its first call (a few sets,
// of bounded size; see Index.Search for the zero-allocation path with
// buffers of your own). It waits for the results. On error the result is
// nil.
func SearchSlice[T dlpack.DType](res *safe.Resources, idx *Index, queries []T, k int, filter *safe.Filter) (*safe.Results, error) {
	out := new(safe.Results)
	if err := SearchSliceInto(res, idx, queries, k, filter, out); err != nil {
		return nil, err
	}
	return out, nil
}

// SearchSliceInto is SearchSlice writing into out, whose slices are reused
// when large enough.
func SearchSliceInto[T dlpack.DType](res *safe.Resources, idx *Index, queries []T, k int, filter *safe.Filter, out *safe.Results) error {
	var dt []dlpack.DataType
	if idx != nil {
		dt = []dlpack.DataType{idx.dtype}
	}
	s := core.Slice{
		DTypes: dt, Filter: filter, Kinds: filterKinds,
		Check: func(op string, k int64) error { return idx.checkSearch(op, filter, k) },
		Search: func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
			return idx.Search(res, q, n, d, filter)
		},
	}
	return core.SearchSliceInto(&kind, res, idx, queries, k, &s, out)
}

// filterKinds is the filter kinds a search takes.
var filterKinds = []safe.FilterKind{safe.Bitset, safe.Bitmap}
