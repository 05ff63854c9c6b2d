package bruteforce_test

import (
	"math"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// Refusals come before any device memory is taken, name the argument the
// caller passed (k, not a neighbors tensor it never saw), and give a nil
// result: among them a float64 query slice for a float32 index, which used
// to panic in the buffer pool.
func TestSearchSliceRefusedBeforeAllocation(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	other, err := safe.NewBitsetFilterAllowing(f.res, rows+1, []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, other)
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
	nan := append([]float32(nil), f.qs[:3*dim]...)
	nan[dim+1] = float32(math.NaN())
	for _, c := range []struct {
		name, arg, why string
		queries        []float32
		k              int
		filter         *safe.Filter
	}{
		{"k = 0", "k", "", f.qs, 0, nil},
		{"k above the rows", "k", "exceeds", f.qs, rows + 1, nil},
		{"k = 1<<24", "k", "exceeds", f.qs, 1 << 24, nil},
		{"k = 1<<40", "k", "exceeds", f.qs, 1 << 40, nil},
		{"NaN query", "queries", "row 1 holds NaN", nan, k, nil},
		{"a filter for other rows", "filter", "rows", f.qs, k, other},
		{"a filter allowing fewer rows than k", "filter", "fewer than k", f.qs, k, few},
		{"a bitmap for other queries", "filter", "queries", f.qs, k, bitmap},
	} {
		safetest.Refused(t, c.name, c.arg, c.why, func() error {
			r, err := bruteforce.SearchSlice(f.res, idx, c.queries, c.k, c.filter)
			if r != nil {
				t.Errorf("%s: a result with error %v", c.name, err)
			}
			return err
		})
	}
	safetest.Refused(t, "float64 queries", "queries", "float64", func() error {
		_, err := bruteforce.SearchSlice(f.res, idx, make([]float64, dim), 1, nil)
		return err
	})
	// After all that, a good search works and finds every slot filled.
	got, err := bruteforce.SearchSlice(f.res, idx, f.qs, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range got.Neighbors {
		if !safe.Valid(id) || math.IsInf(float64(got.Distances[i]), 0) {
			t.Fatalf("slot %d unfilled: %d %g", i, id, got.Distances[i])
		}
	}
}

// Build from Go memory refuses NaN and infinite values, naming the
// argument and the first bad row (once the package builds from host
// memory).
func TestHostInputsNonFinite(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(3, 50, dim)
	data[17*dim+3] = float32(math.Inf(-1))
	m, err := dlpack.NewHostMatrix(data, 50, dim)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := bruteforce.Build(res, m, nil)
	if idx != nil {
		idx.Close()
	}
	if !safetest.IsArg(err, "dataset") || !strings.Contains(err.Error(), "row 17 holds -Inf") {
		t.Errorf("Build -Inf: %v", err)
	}
}
