package bruteforce_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// Brute force's own filter refusals, beside the suite's
// (TestIndex/SearchSliceRefusedBeforeAllocation): a filter allowing fewer
// rows than k, and a bitmap for other queries, are refused before any
// device memory is taken, naming the filter, with a nil result.
func TestSearchSliceRefusedFilters(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	few, err := safe.NewBitsetFilterAllowing(f.res, rows, []int64{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, few)
	bitmap, err := safe.NewBitmapFilter(f.res, nq+1, rows, make([]uint32, ((nq+1)*rows+31)/32))
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bitmap)
	for _, c := range []struct {
		name, why string
		filter    *safe.Filter
	}{
		{"a filter allowing fewer rows than k", "fewer than k", few},
		{"a bitmap for other queries", "queries", bitmap},
	} {
		safetest.Refused(t, c.name, "filter", c.why, func() error {
			r, err := bruteforce.SearchSlice(f.res, idx, f.qs, k, c.filter)
			if r != nil {
				t.Errorf("%s: a result with error %v", c.name, err)
			}
			return err
		})
	}
}
