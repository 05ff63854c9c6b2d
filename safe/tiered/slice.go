package tiered

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/hostsearch"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// SearchSlice is the one-call search from Go memory: queries holds
// n×Dim() float32 values, row-major; the result holds each query's k
// nearest live rows (k up to Rows(); a deleted row is never returned),
// nearest first. params nil means cuVS's
// defaults; filter nil searches every row. An unfilled slot holds
// safe.SentinelID64 with distance +Inf (test with safe.Valid).
//
// Everything is checked before any device memory is taken: the queries'
// length and values (a NaN or an infinity is refused, naming its row), k
// against the index's rows, the filter. The device buffers are kept by
// the index and reused. It waits for the results.
func SearchSlice(res *safe.Resources, idx *Index, params *SearchParams, queries []float32, k int, filter *safe.Filter) (*safe.Results, error) {
	out := new(safe.Results)
	if err := SearchSliceInto(res, idx, params, queries, k, filter, out); err != nil {
		return nil, err
	}
	return out, nil
}

// SearchSliceInto is SearchSlice writing into out, whose slices are reused
// when large enough.
func SearchSliceInto(res *safe.Resources, idx *Index, params *SearchParams, queries []float32, k int, filter *safe.Filter, out *safe.Results) error {
	const op = "tiered.SearchSlice"
	if idx == nil {
		return kit.Argf(op, "idx", "nil *Index")
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	rows := idx.rows.Load()
	spec := hostsearch.Spec{
		Dim: int(idx.dim), Rows: int(rows), DTypes: f32,
		Check: func(n, k int) error {
			if err := kit.CheckIndexDevice(res, op, idx.dev); err != nil {
				return err
			}
			return kit.CheckFilter(filter, op, rows, int64(n), safe.Bitset)
		},
	}
	return hostsearch.Search(op, res, &idx.slices, &spec, queries, k,
		func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
			return idx.Search(res, params, q, n, d, filter)
		}, out)
}
