package ivfflat_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// A loop of one-call searches of one shape into one Results allocates
// nothing on the Go heap (the checks before the device buffers included).
func TestSearchSliceAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	safetest.Check(t)
	f := newFixture(t, rows, nq, k)
	idx := f.build(t, params(t))
	var out safe.Results
	must(t, ivfflat.SearchSliceInto(f.res, idx, nil, f.qs, k, nil, &out))
	if a := testing.AllocsPerRun(20, func() {
		if err := ivfflat.SearchSliceInto(f.res, idx, nil, f.qs, k, nil, &out); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("SearchSliceInto: %v allocations per call", a)
	}
}
