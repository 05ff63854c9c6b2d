package hostsearch

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
)

func TestMain(m *testing.M) { safetest.Main(m) }

var f32 = []dlpack.DataType{dlpack.Float32}

// noop is a search that writes nothing (the buffers keep what they hold).
func noop(*safe.Resources, dlpack.Tensor, dlpack.TensorMut, dlpack.TensorMut) error { return nil }

// Every refusal names the argument at fault and comes before any device
// allocation: a bad element type, length, k (too large for the index, or
// for memory), the algorithm's own checks, a NaN.
func TestRefusedBeforeAllocation(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	var p Pool
	defer p.Close()
	spec := Spec{Dim: 4, Rows: 100, DTypes: f32}
	q := make([]float32, 8)
	var out safe.Results
	safetest.Refused(t, "float64 queries", "queries", "float64", func() error {
		return Search("test", res, &p, &spec, make([]float64, 8), 2, noop, &out)
	})
	safetest.Refused(t, "float16 queries", "queries", "float16", func() error {
		return Search("test", res, &p, &spec, make([]float16.Float16, 8), 2, noop, &out)
	})
	safetest.Refused(t, "no queries", "queries", "", func() error { return Search("test", res, &p, &spec, q[:0], 2, noop, &out) })
	safetest.Refused(t, "a short row", "queries", "", func() error { return Search("test", res, &p, &spec, q[:7], 2, noop, &out) })
	for _, k := range []int{0, -1, 101, 1 << 24, 1 << 40} {
		safetest.Refused(t, "k", "k", "", func() error { return Search("test", res, &p, &spec, q, k, noop, &out) })
	}
	safetest.Refused(t, "nil out", "out", "", func() error { return Search("test", res, &p, &spec, q, 2, noop, nil) })
	checked := spec
	checked.Check = func(n, k int) error {
		if n != 2 || k != 3 {
			t.Errorf("Check(%d, %d), want (2, 3)", n, k)
		}
		return &safe.ArgError{Op: "test", Arg: "filter", Reason: "no"}
	}
	safetest.Refused(t, "the algorithm's check", "filter", "", func() error { return Search("test", res, &p, &checked, q, 3, noop, &out) })
	bad := slices.Clone(q)
	bad[6] = float32(math.NaN())
	safetest.Refused(t, "NaN", "queries", "row 1 holds NaN", func() error { return Search("test", res, &p, &spec, bad, 2, noop, &out) })
	bad[6] = float32(math.Inf(-1))
	safetest.Refused(t, "-Inf", "queries", "row 1 holds -Inf", func() error { return Search("test", res, &p, &spec, bad, 2, noop, &out) })
	h := make([]float16.Float16, 8)
	h[5] = float16.Inf(1)
	spec16 := Spec{Dim: 4, Rows: 100, DTypes: []dlpack.DataType{dlpack.Float16}}
	safetest.Refused(t, "float16 +Inf", "queries", "row 1 holds +Inf", func() error { return Search("test", res, &p, &spec16, h, 2, noop, &out) })
	if n, b := p.Idle(); n != 0 || b != 0 {
		t.Errorf("the pool keeps %d sets (%d bytes) after refusals only", n, b)
	}
}

// The pool keeps buffers by element type and shape: one index searched
// with float16 and float32 queries of one shape in turn (IVF-SQ takes
// both) reuses each type's own, and never hands one type's to the other.
func TestPoolKeyedByDType(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	var p Pool
	defer p.Close()
	spec := Spec{Dim: 4, Rows: 100, DTypes: []dlpack.DataType{dlpack.Float32, dlpack.Float16}}
	var out safe.Results
	for range 3 {
		if err := Search("test", res, &p, &spec, make([]float16.Float16, 8), 2, noop, &out); err != nil {
			t.Fatal(err)
		}
		if err := Search("test", res, &p, &spec, make([]float32, 8), 2, noop, &out); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := p.Idle(); n != 2 {
		t.Errorf("%d idle sets, want 2 (one per element type)", n)
	}
	if _, acquired, ok := safetest.DeviceMemory(); ok {
		before := acquired
		if err := Search("test", res, &p, &spec, make([]float32, 8), 2, noop, &out); err != nil {
			t.Fatal(err)
		}
		if _, after, _ := safetest.DeviceMemory(); after != before {
			t.Errorf("a repeated search allocated %d times", after-before)
		}
	}
}

// What the pool keeps is bounded in sets and in bytes: a search larger
// than MaxFreeBytes frees its buffers when done, and many shapes leave at
// most MaxFree sets; Close frees them all.
func TestPoolBounded(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	var p Pool
	live0, _, counted := safetest.DeviceMemory()
	const dim = 4
	k := 4096
	rows := MaxFreeBytes/(12*k) + 1 // rows×k×12 bytes of results alone exceed the bound
	spec := Spec{Dim: dim, Rows: 1 << 20, DTypes: f32}
	var out safe.Results
	if err := Search("test", res, &p, &spec, make([]float32, rows*dim), k, noop, &out); err != nil {
		t.Fatal(err)
	}
	if n, b := p.Idle(); n != 0 || b != 0 {
		t.Errorf("after a %d×%d search the pool keeps %d sets, %d bytes", rows, k, n, b)
	}
	if live, _, _ := safetest.DeviceMemory(); counted && live != live0 {
		t.Errorf("%d device allocations held after a search too large to keep", live-live0)
	}
	for r := 1; r <= 2*MaxFree; r++ {
		if err := Search("test", res, &p, &spec, make([]float32, r*dim), 3, noop, &out); err != nil {
			t.Fatal(err)
		}
	}
	big := MaxFreeBytes / 2 / (12 * 64) // two of these fill the bound
	for range 3 {
		for _, r := range []int{big, big + 1, big + 2} {
			if err := Search("test", res, &p, &spec, make([]float32, r*dim), 64, noop, &out); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, b := p.Idle(); n > MaxFree || b > MaxFreeBytes {
		t.Errorf("the pool keeps %d sets, %d bytes: more than %d sets or %d bytes", n, b, MaxFree, MaxFreeBytes)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if live, _, _ := safetest.DeviceMemory(); counted && live != live0 {
		t.Errorf("%d device allocations held after Close", live-live0)
	}
	if err := Search("test", res, &p, &spec, make([]float32, dim), 1, noop, &out); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.Idle(); n != 0 {
		t.Errorf("a closed pool keeps %d sets", n)
	}
}

// Results come back with every unfilled slot (distance ±Inf, or an
// algorithm's sentinel) as safe.SentinelID64 with distance +Inf; filled
// slots are untouched.
func TestUnfilledNormalized(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	var p Pool
	defer p.Close()
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		name     string
		ids      []int64
		dists    []float32
		wantIDs  []int64
		wantDist []float32
	}{
		{"IVF-Flat repeats a row", []int64{0, 59, 0, 0}, []float32{1, 2, inf, inf},
			[]int64{0, 59, safe.SentinelID64, safe.SentinelID64}, []float32{1, 2, inf, inf}},
		{"IVF-SQ", []int64{3, math.MaxInt64, 4, math.MaxInt64}, []float32{1, inf, 2, inf},
			[]int64{3, safe.SentinelID64, 4, safe.SentinelID64}, []float32{1, inf, 2, inf}},
		{"inner product", []int64{3, 7, 4, 0}, []float32{9, float32(math.Inf(-1)), 2, 1},
			[]int64{3, safe.SentinelID64, 4, 0}, []float32{9, inf, 2, 1}},
		{"CAGRA", []int64{3, 0x7FFFFFFF, 4, 0x7FFFFFFF}, []float32{1, math.MaxFloat32, 2, math.MaxFloat32},
			[]int64{3, safe.SentinelID64, 4, safe.SentinelID64}, []float32{1, inf, 2, inf}},
	} {
		write := func(res *safe.Resources, _ dlpack.Tensor, n, d dlpack.TensorMut) error {
			if err := n.(*safe.DeviceMatrix[int64]).CopyFromHost(res, c.ids); err != nil {
				return err
			}
			return d.(*safe.DeviceMatrix[float32]).CopyFromHost(res, c.dists)
		}
		spec := Spec{Dim: 1, Rows: 100, DTypes: f32}
		var out safe.Results
		if err := Search("test", res, &p, &spec, []float32{1, 2}, 2, write, &out); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out.Neighbors, c.wantIDs) || !slices.Equal(out.Distances, c.wantDist) {
			t.Errorf("%s: %v %v, want %v %v", c.name, out.Neighbors, out.Distances, c.wantIDs, c.wantDist)
		}
		for i, id := range out.Neighbors {
			if safe.Valid(id) == math.IsInf(float64(out.Distances[i]), 1) {
				t.Errorf("%s: slot %d: Valid(%d) with distance %g", c.name, i, id, out.Distances[i])
			}
		}
	}
	var ae *safe.ArgError
	if err := Search("test", res, &p, &Spec{Dim: 1, Rows: 1, DTypes: f32}, []float32{1}, 2, noop, &safe.Results{}); !errors.As(err, &ae) {
		t.Errorf("k above rows: %v", err)
	}
}
