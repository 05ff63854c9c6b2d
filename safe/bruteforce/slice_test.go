package bruteforce_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// TestSearchSlice: the one-call search from Go memory returns the exact
// k nearest rows of each query, per query, and reuses its results' memory.
func TestSearchSlice(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	got, err := bruteforce.SearchSlice(f.res, idx, f.qs, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != nq || got.K != k {
		t.Fatalf("%d queries of %d results, want %d of %d", got.Len(), got.K, nq, k)
	}
	want := safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, nil)
	for q := range nq {
		ids, dist := got.Row(q)
		for j := range k {
			if ids[j] != want[q][j] {
				t.Fatalf("query %d: %v, want %v", q, ids, want[q])
			}
			d := safetest.L2(f.qs[q*dim:(q+1)*dim], f.data[ids[j]*dim:(ids[j]+1)*dim])
			if !safetest.NearlyEqual(dist[j], d) {
				t.Errorf("query %d, neighbour %d: distance %v, want %v", q, j, dist[j], d)
			}
		}
	}
	// Into a Results of its own: one query, the slices reused.
	first := &got.Neighbors[0]
	if err := bruteforce.SearchSliceInto(f.res, idx, f.qs[:dim], k, nil, got); err != nil {
		t.Fatal(err)
	}
	if got.Len() != 1 || &got.Neighbors[0] != first {
		t.Errorf("SearchSliceInto: %d rows, reused %v", got.Len(), &got.Neighbors[0] == first)
	}
	if ids, _ := got.Row(0); ids[0] != want[0][0] {
		t.Errorf("one query: %v, want %v", ids, want[0])
	}
}

// TestSearchSliceReusesDeviceMemory: a loop of one-call searches of one
// shape allocates device memory on its first call only.
func TestSearchSliceReusesDeviceMemory(t *testing.T) {
	ctl := safetest.Double(t, "counting cuvsRMMAlloc calls")
	f := setup(t)
	idx := f.build(t)
	var out safe.Results
	for i := range 3 {
		before := ctl.Calls("cuvsRMMAlloc")
		if err := bruteforce.SearchSliceInto(f.res, idx, f.qs, k, nil, &out); err != nil {
			t.Fatal(err)
		}
		if n := ctl.Calls("cuvsRMMAlloc") - before; i > 0 && n != 0 {
			t.Errorf("search %d allocated device memory %d times", i, n)
		}
	}
}

// TestSearchSliceRefusals: bad queries, k and a closed index are refused
// with the error kinds a caller tests for.
func TestSearchSliceRefusals(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	for name, call := range map[string]func() error{
		"queries not a multiple of dim": func() error { _, err := bruteforce.SearchSlice(f.res, idx, f.qs[:dim+1], k, nil); return err },
		"no queries":                    func() error { _, err := bruteforce.SearchSlice(f.res, idx, []float32{}, k, nil); return err },
		"k zero":                        func() error { _, err := bruteforce.SearchSlice(f.res, idx, f.qs, 0, nil); return err },
		"k above rows":                  func() error { _, err := bruteforce.SearchSlice(f.res, idx, f.qs, rows+1, nil); return err },
		"wrong element type":            func() error { _, err := bruteforce.SearchSlice(f.res, idx, make([]int8, dim), k, nil); return err },
		"nil index":                     func() error { _, err := bruteforce.SearchSlice[float32](f.res, nil, f.qs, k, nil); return err },
		"nil results":                   func() error { return bruteforce.SearchSliceInto(f.res, idx, f.qs, k, nil, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, safe.ErrInvalidArgument) {
				t.Errorf("got %v, want an ErrInvalidArgument", err)
			}
		})
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := bruteforce.SearchSlice(f.res, idx, f.qs, k, nil); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}
