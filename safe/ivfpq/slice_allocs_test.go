package ivfpq_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// A loop of one-call searches of one shape into one Results allocates
// nothing on the Go heap (the checks before the device buffers included).
func TestSearchSliceAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	var out safe.Results
	if err := ivfpq.SearchSliceInto(f.res, idx, &f.sp, f.qs, k, &out); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(20, func() {
		if err := ivfpq.SearchSliceInto(f.res, idx, &f.sp, f.qs, k, &out); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("SearchSliceInto: %v allocations per call", a)
	}
}
