package selectk_test

import (
	"errors"
	"slices"
	"sort"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/selectk"
)

func TestMain(m *testing.M) { safetest.Main(m) }

func needs2608(t *testing.T) {
	t.Helper()
	if safe.Release() < "26.08" {
		t.Skipf("cuvsSelectK is in cuVS 26.08 and later; the library is %s", safe.Release())
	}
}

// On a release without cuvsSelectK every call says so, before any work.
func TestNotInRelease(t *testing.T) {
	safetest.Check(t)
	if safe.Release() >= "26.08" {
		t.Skipf("the library is %s, which has cuvsSelectK", safe.Release())
	}
	res := safetest.Resources(t)
	_, _, err := selectk.SelectSortedSlice(res, []float32{3, 1, 2}, 2)
	if !errors.Is(err, safe.ErrNotInRelease) {
		t.Fatalf("SelectSortedSlice on %s: %v", safe.Release(), err)
	}
	if err := selectk.SelectUnsorted(res, nil, nil, nil); !errors.Is(err, safe.ErrNotInRelease) {
		t.Fatalf("SelectUnsorted on %s: %v", safe.Release(), err)
	}
}

// The k smallest of a row, with their positions, as sorting in Go gives:
// SelectSortedSlice in that order.
func TestSelectSortedSlice(t *testing.T) {
	needs2608(t)
	safetest.Check(t)
	res := safetest.Resources(t)
	vals := safetest.Random(3, 1, 1000)
	for _, k := range []int{1, 7, 1000} {
		got, idx, err := selectk.SelectSortedSlice(res, vals, k)
		if err != nil {
			t.Fatal(err)
		}
		order := make([]int, len(vals))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return vals[order[a]] < vals[order[b]] })
		for i := range k {
			if idx[i] != int64(order[i]) || got[i] != vals[order[i]] {
				t.Fatalf("k %d, rank %d: %v at %d, want %v at %d", k, i, got[i], idx[i], vals[order[i]], order[i])
			}
		}
	}
}

// SelectUnsorted writes the k smallest with their positions, each value
// at its position, in any order (the set is that of the k smallest; the
// order is cuVS's, not asserted); SelectSortedSlice gives the same set
// sorted by value, then by position.
func TestOrder(t *testing.T) {
	needs2608(t)
	safetest.Check(t)
	res := safetest.Resources(t)
	// distinct values, so that the k smallest are one set
	const n = 500
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32((i*197)%n) - 250
	}
	in, err := safe.DeviceMatrixFrom(res, vals, 1, n)
	if err != nil {
		t.Fatal(err)
	}
	defer safetest.Close(t, in)
	for _, k := range []int{1, 16, 100, n} {
		dv, _ := safe.NewDeviceMatrix[float32](res, 1, k)
		dx, _ := safe.NewDeviceMatrix[int64](res, 1, k)
		if err := selectk.SelectUnsorted(res, in, dv, dx); err != nil {
			t.Fatal(err)
		}
		uv, err := dv.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		ux, err := dx.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, dv)
		safetest.Close(t, dx)
		sv, sx, err := selectk.SelectSortedSlice(res, vals, k)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int64]bool{}
		for i := range k {
			if ux[i] < 0 || ux[i] >= n || vals[ux[i]] != uv[i] || seen[ux[i]] {
				t.Fatalf("k %d: unsorted result %d is %v at %d", k, i, uv[i], ux[i])
			}
			seen[ux[i]] = true
			if uv[i] >= float32(k)-250 {
				t.Fatalf("k %d: unsorted result %v is not among the %d smallest", k, uv[i], k)
			}
			if i > 0 && !(sv[i-1] < sv[i]) {
				t.Fatalf("k %d: sorted results %d, %d are %v, %v", k, i-1, i, sv[i-1], sv[i])
			}
			if sv[i] != float32(i)-250 || vals[sx[i]] != sv[i] {
				t.Fatalf("k %d: sorted result %d is %v at %d, want %v", k, i, sv[i], sx[i], float32(i)-250)
			}
		}
		if !seen[sx[0]] || !seen[sx[k-1]] {
			t.Errorf("k %d: the sorted ends %d, %d are not in the unsorted set", k, sx[0], sx[k-1])
		}
	}
}

// Bad input is refused naming the argument, with no C call.
func TestRefusals(t *testing.T) {
	needs2608(t)
	safetest.Check(t)
	res := safetest.Resources(t)
	arg := func(err error) string {
		var ae *safe.ArgError
		if errors.As(err, &ae) {
			return ae.Arg
		}
		return "(" + err.Error() + ")"
	}
	if _, _, err := selectk.SelectSortedSlice(res, []float32{1, 2}, 3); arg(err) != "k" {
		t.Errorf("k > n: %v", err)
	}
	if _, _, err := selectk.SelectSortedSlice(res, nil, 1); arg(err) != "values" {
		t.Errorf("empty: %v", err)
	}
	nan := []float32{1, 2, 3}
	nan[1] = float32(0) / float32(len(nan)-3) // NaN without a constant expression
	if _, _, err := selectk.SelectSortedSlice(res, nan, 1); arg(err) != "values" {
		t.Errorf("NaN: %v", err)
	}
	in, _ := safe.DeviceMatrixFrom(res, []float32{1, 2, 3, 4}, 2, 2)
	defer safetest.Close(t, in)
	v, _ := safe.NewDeviceMatrix[float32](res, 1, 1)
	defer safetest.Close(t, v)
	x, _ := safe.NewDeviceMatrix[int64](res, 1, 2)
	defer safetest.Close(t, x)
	if err := selectk.SelectUnsorted(res, in, v, x); arg(err) != "in" {
		t.Errorf("two rows: %v", err)
	}
	one, _ := safe.DeviceMatrixFrom(res, []float32{1, 2, 3, 4}, 1, 4)
	defer safetest.Close(t, one)
	if err := selectk.SelectUnsorted(res, one, v, x); arg(err) != "indices" {
		t.Errorf("indices of another k: %v", err)
	}
	if !slices.Contains(safe.Releases(), "26.06") {
		t.Errorf("Releases() = %v", safe.Releases())
	}
}

// Select allocates nothing on the Go heap per call.
func TestSelectAllocs(t *testing.T) {
	needs2608(t)
	safetest.Check(t)
	res := safetest.Resources(t)
	in, _ := safe.DeviceMatrixFrom(res, []float32{4, 1, 3, 2}, 1, 4)
	defer safetest.Close(t, in)
	v, _ := safe.NewDeviceMatrix[float32](res, 1, 2)
	defer safetest.Close(t, v)
	x, _ := safe.NewDeviceMatrix[int64](res, 1, 2)
	defer safetest.Close(t, x)
	if n := testing.AllocsPerRun(50, func() { _ = selectk.SelectUnsorted(res, in, v, x) }); n != 0 {
		t.Errorf("%v allocations per Select", n)
	}
}
