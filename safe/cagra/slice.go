package cagra

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
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
	var dt []dlpack.DataType
	if idx != nil {
		if idx.c.Life.Built(kind.Op.SearchSlice) == nil { // the core refuses a nil or zero index first
			if err := idx.refuseGraphOnly(kind.Op.SearchSlice); err != nil {
				return err
			}
		}
		dt = []dlpack.DataType{idx.dtype}
	}
	s := core.Slice{
		DTypes: dt,
		Checks: func(op string, rows, n, k int64) error {
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
			if err := kit.CheckFilter(filter, op, rows, n, bitset...); err != nil {
				return err
			}
			if filter == nil {
				return sp.checkFiltered(op, false, k)
			}
			plan := sp.planFilter(filter, rows, idx.c.Dim, idx.degree.Load(), k, n, idx.noExact())
			if plan.exact {
				if why := idx.noExact(); why != "" {
					return kit.Argf(op, "params.FilterPath", "a filter allowing %d of %d rows needs the exact path, but %s", filter.Allowed(), rows, why)
				}
				return nil
			}
			sp.ITopKSize = int(plan.itopk)
			return sp.checkFiltered(op, true, k)
		},
		Search: func(res *safe.Resources, q dlpack.Tensor, n, d dlpack.TensorMut) error {
			return idx.Search(res, params, q, n, d, filter)
		},
	}
	return core.SearchSliceInto(&kind, res, idx, queries, k, &s, out)
}

// bitset is the filter kinds a search takes.
var bitset = []safe.FilterKind{safe.Bitset}
