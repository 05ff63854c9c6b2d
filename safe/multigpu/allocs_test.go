package multigpu_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// Search allocates nothing on the Go heap (its params structs are the
// library's, made per call).
func TestSearchAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	safetest.Check(t)
	res := mres(t, 2)
	data, qs := safetest.Random(50, rows, dim), safetest.Random(51, nq, dim)
	ip, sp := allProbes(4)
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	q := host(t, qs, nq)
	nm, _ := dlpack.NewHostMatrix(make([]int64, nq*k), nq, k)
	dm, _ := dlpack.NewHostMatrix(make([]float32, nq*k), nq, k)
	p := &multigpu.IVFFlatSearchParams{Base: sp}
	if err := idx.Search(res, p, q, nm, dm); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(50, func() {
		if err := idx.Search(res, p, q, nm, dm); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("Search allocates %v times", n)
	}
}
