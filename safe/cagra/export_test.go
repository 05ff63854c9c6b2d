package cagra

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
)

// SetPlanITopK makes the policy's graph path search with top-k itopk (0:
// the policy's own), so that tests can make queries come back short.
func SetPlanITopK(itopk int) { testPlanITopK = int64(itopk) }

// SetPostK makes the post-filter path fetch k' candidates (0: the
// policy's 2k/f), so that tests can make queries come back short.
func SetPostK(k int) { testPostK = int64(k) }

// PlanOf returns the policy's plan for a search of n queries for k
// neighbors of idx with sp and filter: exact, the top-k, and the
// post-filter path's candidates (0: cuVS's filtered walk).
func PlanOf(idx *Index, sp SearchParams, filter *safe.Filter, k, n int) (exact bool, itopk, post int, err error) {
	if sp, err = sp.withDefaults("PlanOf"); err != nil {
		return false, 0, 0, err
	}
	p := sp.planFilter(filter, idx.c.Rows.Load(), idx.c.Dim, idx.degree.Load(), int64(k), int64(n), idx.noExact())
	return p.exact, int(p.itopk), int(p.post), nil
}

// FilterITopK is the policy's raised top-k for a graph search of k
// neighbors at itopk with the fraction f of the rows allowed.
func FilterITopK(itopk, k int, f float64) int { return int(filterITopK(int64(itopk), int64(k), f)) }

// SerializeCuVS writes idx (with its dataset) to path exactly as cuVS's
// serializer does, without the bindings' checksum: the tests read what
// cuVS itself wrote.
func SerializeCuVS(idx *Index, res *safe.Resources, path string) error {
	return idx.serialize(kind.Op.Serialize, res, path, true)
}

// MergeEstimate is Merge's estimate of total rows of dim columns of dt,
// kept of them (filtered: by a bitset), with p: its peak and the merged
// index; ok false when Merge does not check it.
func MergeEstimate(p *IndexParams, total, kept, dim int, dt dlpack.DataType, filtered bool) (e safe.MemoryEstimate, ok bool, err error) {
	return mergeEstimate(p, int64(total), int64(kept), int64(dim), dt, filtered)
}
