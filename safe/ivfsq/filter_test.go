package ivfsq_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

// filterTests is IVF-SQ's side of the IVF filter tests
// (safetest.IVFFilter, shared with the other IVF package).
var filterTests = &safetest.IVFFilter[*ivfsq.Index, ivfsq.SearchParams, *ivfsq.Prepared]{
	Build: func(res *safe.Resources, dataset dlpack.Tensor, lists uint32) (*ivfsq.Index, error) {
		if lists == 0 {
			return ivfsq.Build(res, dataset, nil)
		}
		p, err := ivfsq.DefaultIndexParams()
		if err != nil {
			return nil, err
		}
		p.NLists = lists
		return ivfsq.Build(res, dataset, &p)
	},
	Params: func(probes uint32, path safe.FilterPath) *ivfsq.SearchParams {
		return &ivfsq.SearchParams{NProbes: probes, FilterPath: path}
	},
	SearchSlice:     ivfsq.SearchSlice[float32],
	SearchSliceInto: ivfsq.SearchSliceInto[float32],
	ExactRecall:     0.95,
	ExactNote:       "; the codes may swap near ties",
	Race:            race.Enabled,
}

// With cuVS's default params, a filtered search's recall@10 (against the
// exact answer among the allowed rows) stays within 0.03 of the unfiltered
// search's at every fraction allowed, from 100% to 3 rows, through Search,
// Prepared and SearchSlice, with no unfilled slot while at least k rows
// are allowed, at N = 20,000 and 8,000 (subtests). cuVS's own filtered
// search (FilterIndex) falls far below it on the same data: the test
// means something.
func TestFilteredRecall(t *testing.T) { filterTests.Recall(t) }

// A filter for another row count, and FilterPath out of range, are
// refused naming the argument, on every path.
func TestFilteredRefused(t *testing.T) { filterTests.Refused(t) }

// A filter whose rows sit together, away from the queries: the raised
// probes reach no allowed row for many queries, and the second pass fills
// them. The same probes without it (FilterIndex) leave slots unfilled.
func TestFilteredSecondPass(t *testing.T) { filterTests.SecondPass(t) }

// The filtered paths allocate nothing on the Go heap per search: the
// raised-probes search with its second pass (Search, Prepared.Run) and
// the every-list one.
func TestFilteredAllocs(t *testing.T) { filterTests.Allocs(t) }
