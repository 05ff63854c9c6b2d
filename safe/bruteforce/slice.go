package bruteforce

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/hostsearch"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
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
	const op = "bruteforce.SearchSlice"
	if idx == nil {
		return kit.Argf(op, "idx", "nil *Index")
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	spec := hostsearch.Spec{
		Dim: int(idx.dim), Rows: int(idx.rows), DTypes: []dlpack.DataType{idx.dtype},
		Check: func(n, k int) error {
			if err := kit.CheckIndexDevice(res, op, idx.dev); err != nil {
				return err
			}
			if err := kit.CheckFilter(filter, op, idx.rows, int64(n), safe.Bitset, safe.Bitmap); err != nil {
				return err
			}
			return idx.checkSearch(op, filter, int64(k))
		},
	}
	return hostsearch.Search(op, res, &idx.slices, &spec, queries, k,
		func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
			return idx.Search(res, q, n, d, filter)
		}, out)
}
