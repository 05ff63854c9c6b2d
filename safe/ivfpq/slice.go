package ivfpq

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/hostsearch"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// SearchSlice is the one-call search from Go memory: queries holds n×Dim()
// values of the index's element type (any of float32, float16, int8 and
// uint8 after Deserialize, which does not record it), row-major; the
// result holds each query's k nearest rows (int64 ids), nearest first.
// params nil means cuVS's defaults (this C API takes no filter).
//
// A slot the search could not fill (the probed lists hold fewer than k
// rows; in device outputs cuVS writes math.MaxInt64 there with distance
// +Inf, see Index.Search) comes back, as in every package's Results, as
// safe.SentinelID64 with distance +Inf: test with safe.Valid.
//
// Everything is checked before any device memory is taken: the queries'
// element type, length and values (a NaN or an infinity is refused,
// naming its row), k against the index's rows, params. The device buffers
// it needs are kept by the index and reused, so a loop of searches of one
// shape allocates device memory only on its first call (a few sets, of
// bounded size; see Index.Search for the zero-allocation path with buffers
// of your own). It waits for the results. On error the result is nil.
func SearchSlice[T dlpack.DType](res *safe.Resources, idx *Index, params *SearchParams, queries []T, k int) (*safe.Results, error) {
	out := new(safe.Results)
	if err := SearchSliceInto(res, idx, params, queries, k, out); err != nil {
		return nil, err
	}
	return out, nil
}

// SearchSliceInto is SearchSlice writing into out, whose slices are reused
// when large enough.
func SearchSliceInto[T dlpack.DType](res *safe.Resources, idx *Index, params *SearchParams, queries []T, k int, out *safe.Results) error {
	dtypes := elemTypes
	if dt := idx.elemType(); dt != (dlpack.DataType{}) {
		dtypes = []dlpack.DataType{dt}
	}
	s := core.Slice{
		DTypes: dtypes,
		Check:  func(op string, _ int64) error { _, err := idx.checkSearch(op, params); return err },
		Search: func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
			return idx.Search(res, params, q, n, d)
		},
	}
	return core.SearchSliceInto(&kind, res, idx, queries, k, &s, out)
}

// SearchSliceFiltered is SearchSliceInto for a filtered search made by
// Index.NewFiltered: queries (at most its maxQueries rows) from Go memory,
// its k neighbours each into out (unfilled slots: safe.SentinelID64 and
// +Inf). The device buffers for the queries and results come from the
// index's pool, so a loop of one shape allocates nothing after its first
// call.
func SearchSliceFiltered[T dlpack.DType](res *safe.Resources, f *Filtered, queries []T, out *safe.Results) error {
	const op = "ivfpq.SearchSliceFiltered"
	if f == nil || f.idx == nil {
		return kit.Argf(op, "f", "a Filtered not made by Index.NewFiltered")
	}
	idx := f.idx
	dtypes := elemTypes
	if dt := idx.elemType(); dt != (dlpack.DataType{}) {
		dtypes = []dlpack.DataType{dt}
	}
	spec := hostsearch.Spec{
		Dim: int(idx.c.Dim), Rows: int(idx.c.Rows.Load()), DTypes: dtypes,
		Check: func(n, k int) error {
			if int64(n) > f.maxN {
				return kit.Argf(op, "queries", "%d queries, the Filtered was made for at most %d", n, f.maxN)
			}
			return kit.CheckIndexDevice(res, op, idx.c.Dev)
		},
	}
	return hostsearch.Search(op, res, &idx.c.Slices, &spec, queries, int(f.k),
		func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
			return f.Search(res, q, n, d)
		}, out)
}
