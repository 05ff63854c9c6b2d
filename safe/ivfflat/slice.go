package ivfflat

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
)

// SearchSlice is the one-call search from Go memory: queries holds n×Dim()
// values of the index's element type, row-major; the result holds each
// query's k nearest rows (int64 ids), nearest first. params nil means
// cuVS's defaults; filter nil searches every row.
//
// A slot the search could not fill (the probed lists hold fewer than k
// allowed rows; in device outputs cuVS repeats a row id there with
// distance +Inf, see Index.Search) comes back, as in every package's
// Results, as safe.SentinelID64 with distance +Inf: test with safe.Valid.
//
// Everything is checked before any device memory is taken: the queries'
// element type, length and values (a NaN or an infinity is refused,
// naming its row), k against the index's rows, params, the filter. The
// device buffers it needs are kept by the index and reused, so a loop of
// searches of one shape allocates device memory only on its first call (a
// few sets, of bounded size; see Index.Search for the zero-allocation path
// with buffers of your own). It waits for the results. On error the result
// is nil.
func SearchSlice[T dlpack.DType](res *safe.Resources, idx *Index, params *SearchParams, queries []T, k int, filter *safe.Filter) (*safe.Results, error) {
	out := new(safe.Results)
	if err := SearchSliceInto(res, idx, params, queries, k, filter, out); err != nil {
		return nil, err
	}
	return out, nil
}

// SearchSliceInto is SearchSlice writing into out, whose slices are reused
// when large enough.
func SearchSliceInto[T dlpack.DType](res *safe.Resources, idx *Index, params *SearchParams, queries []T, k int, filter *safe.Filter, out *safe.Results) error {
	var dt []dlpack.DataType
	if idx != nil {
		dt = []dlpack.DataType{idx.dtype}
	}
	s := core.Slice{
		DTypes: dt, Filter: filter, Kinds: bitset,
		Check: func(op string, _ int64) error { _, err := params.resolve(op); return err },
		Search: func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
			return idx.Search(res, params, q, n, d, filter)
		},
	}
	return core.SearchSliceInto(&kind, res, idx, queries, k, &s, out)
}

// bitset is the filter kinds a search takes.
var bitset = []safe.FilterKind{safe.Bitset}
