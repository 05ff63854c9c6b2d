package safe

import "fmt"

// FilterPath chooses how an index search with a Filter runs, where the
// index package offers more than one way: the FilterPath field of
// cagra.SearchParams, ivfflat.SearchParams, ivfsq.SearchParams and
// ivfpq.SearchParams (whose filtered search is ivfpq.Index.NewFiltered).
// An unfiltered search ignores it. What each path does in an algorithm,
// and what it was measured to cost, is in that SearchParams.FilterPath's
// documentation.
type FilterPath int

// The filter paths.
const (
	// FilterAuto (the zero value, the default) lets the package's policy
	// choose, per search, how to keep the filtered search's recall near the
	// unfiltered one's: more probed lists (IVF), a raised internal top-k
	// (CAGRA), exact search for selective filters, and a second pass for
	// the queries that came back short.
	FilterAuto FilterPath = iota
	// FilterIndex is the index's own filtered search with the caller's
	// parameters as they are: the lists NProbes probes for IVF, the graph
	// for CAGRA (cuVS's own behaviour; recall falls as the filter gets
	// selective).
	FilterIndex
	// FilterExact searches every allowed row exactly (IVF-Flat and IVF-SQ:
	// every list probed; CAGRA and IVF-PQ: brute force over the dataset).
	FilterExact
)

// String names the path: "auto", "index" or "exact".
func (p FilterPath) String() string {
	switch p {
	case FilterAuto:
		return "auto"
	case FilterIndex:
		return "index"
	case FilterExact:
		return "exact"
	}
	return fmt.Sprintf("FilterPath(%d)", int(p))
}
