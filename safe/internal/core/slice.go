package core

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/hostsearch"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Slice is what a package's one-call search adds to the core's checks.
type Slice struct {
	DTypes []dlpack.DataType              // the query element types the index takes now
	Check  func(op string, k int64) error // the package's own checks (params, the filter against k); nil: none
	Filter *safe.Filter                   // the search's filter, nil for none
	Kinds  []safe.FilterKind              // the filter kinds the search takes
	Search hostsearch.Searcher            // the package's device search (its Index.Search)

	// Checks, if set, replaces the filter check and Check, for a package
	// whose checks take another order or the queries' count (CAGRA's:
	// its params before the filter, its filter plan per n queries); rows
	// is the index's, as the core read it.
	Checks func(op string, rows, n, k int64) error
}

// SearchSliceInto is every package's SearchSliceInto (hostsearch.Search
// over the index's Slices): a nil or zero index, then the queries, k,
// the resources' device, the params and the filter are checked before
// any device memory is taken.
func SearchSliceInto[Q dlpack.DType, T any, H ~uintptr](k *Kind[T, H], res *safe.Resources, t *T, queries []Q, kk int, s *Slice, out *safe.Results) error {
	op := k.Op.SearchSlice
	if t == nil {
		return kit.Argf(op, "idx", "nil *Index")
	}
	c := k.Core(t)
	if err := c.Life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	rows := c.Rows.Load()
	spec := hostsearch.Spec{
		Dim: int(c.Dim), Rows: int(rows), DTypes: s.DTypes,
		Check: func(n, kk int) error {
			if err := kit.CheckIndexDevice(res, op, c.Dev); err != nil {
				return err
			}
			if s.Checks != nil {
				return s.Checks(op, rows, int64(n), int64(kk))
			}
			if err := kit.CheckFilter(s.Filter, op, rows, int64(n), s.Kinds...); err != nil {
				return err
			}
			if s.Check != nil {
				return s.Check(op, int64(kk))
			}
			return nil
		},
	}
	return hostsearch.Search(op, res, &c.Slices, &spec, queries, kk, s.Search, out)
}
