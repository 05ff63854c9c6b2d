package cagra

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/hostsearch"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// SearchSlice is the one-call search from Go memory: queries holds n×Dim()
// values of the index's element type, row-major; the result holds each
// query's k nearest rows (int64 ids), nearest first. params nil means
// cuVS's defaults; filter nil searches every row.
//
// A slot CAGRA could not fill (it writes SentinelID with distance
// SentinelDistance into device outputs, see Index.Search) comes back, as
// in every package's Results, as safe.SentinelID64 with distance +Inf:
// test with safe.Valid.
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
	const op = "cagra.SearchSlice"
	if idx == nil {
		return kit.Argf(op, "idx", "nil *Index")
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	if err := idx.refuseGraphOnly(op); err != nil {
		return err
	}
	rows := idx.rows.Load()
	spec := hostsearch.Spec{
		Dim: int(idx.dim), Rows: int(rows), DTypes: []dlpack.DataType{idx.dtype},
		Check: func(n, k int) error {
			if err := kit.CheckIndexDevice(res, op, idx.dev); err != nil {
				return err
			}
			p := params
			if p == nil {
				p = &zeroSearchParams
			}
			sp, err := p.withDefaults(op)
			if err != nil {
				return err
			}
			if err := sp.validate(op); err != nil {
				return err
			}
			if err := idx.refuseOnDisk(op); err != nil {
				return err
			}
			if err := kit.CheckFilter(filter, op, rows, int64(n), safe.Bitset); err != nil {
				return err
			}
			if filter == nil {
				return sp.checkFiltered(op, false, int64(k))
			}
			plan := sp.planFilter(filter, rows, idx.dim, idx.degree.Load(), int64(k), int64(n), idx.noExact())
			if plan.exact {
				if why := idx.noExact(); why != "" {
					return kit.Argf(op, "params.FilterPath", "a filter allowing %d of %d rows needs the exact path, but %s", filter.Allowed(), rows, why)
				}
				return nil
			}
			sp.ITopKSize = int(plan.itopk)
			return sp.checkFiltered(op, true, int64(k))
		},
	}
	return hostsearch.Search(op, res, &idx.slices, &spec, queries, k,
		func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
			return idx.Search(res, params, q, n, d, filter)
		}, out)
}
