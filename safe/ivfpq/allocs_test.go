package ivfpq_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// An IVF-PQ search through the safe layer allocates nothing on the Go heap
// (instant mode: only the bindings' own work is counted), nor does a
// prepared Run.
func TestSearchAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	ctl := safetest.Double(t, "instant mode")
	res := safetest.Resources(t)
	host, err := dlpack.NewHostMatrix(safetest.Random(1, 512, 128), 512, 128)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := ivfpq.DefaultIndexParams()
	p.NLists, p.KMeansNIters = 8, 5
	idx, err := ivfpq.Build(res, host, &p)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	sp, _ := ivfpq.DefaultSearchParams()
	q, err := safe.DeviceMatrixFrom(res, safetest.Random(2, 10, 128), 10, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	n, err := safe.NewDeviceMatrix[int64](res, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	d, err := safe.NewDeviceMatrix[float32](res, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctl.SetInstant(true)
	defer ctl.SetInstant(false)
	if a := testing.AllocsPerRun(100, func() {
		if err := idx.Search(res, &sp, q, n, d); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Search: %v allocations per call", a)
	}
	ps, err := idx.Prepare(&sp, q, n, d) // holds the tensors: after the searches
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if a := testing.AllocsPerRun(100, func() {
		if err := ps.Run(res); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Prepared.Run: %v allocations per call", a)
	}
}
