// Package safetest runs the safe layer's tests against the ABI test double
// (internal/cuvsdouble), never the real libcuvs_c: Main builds the double,
// loads it with safe.Load, and Check fails a test that leaks anything the
// double counts.
package safetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/safe"
)

var ctl *cuvsdouble.Control

// Main is a TestMain: it loads the double and runs the tests.
func Main(m *testing.M) {
	path, cleanup, err := cuvsdouble.BuildFile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := safe.Load(safe.WithLibrary(path)); err != nil {
		fmt.Fprintln(os.Stderr, "loading the test double:", err)
		os.Exit(1)
	}
	if ctl, err = cuvsdouble.Open(path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// Control returns the loaded double's control surface.
func Control() *cuvsdouble.Control { return ctl }

// Check registers a check, at the end of t, that everything created during
// the test was destroyed and no misuse was recorded; it also clears armed
// faults then.
func Check(t *testing.T) {
	t.Helper()
	before := ctl.Counters()
	t.Cleanup(func() {
		ctl.ClearFaults()
		runtime.GC()
		after := ctl.Counters()
		for name, p := range after {
			b := before[name]
			if p.Live() != b.Live() {
				t.Errorf("cuvsdouble: %s: %d live at the start of the test, %d at the end", name, b.Live(), p.Live())
			}
		}
		if v := ctl.TakeViolations(); len(v) > 0 {
			t.Errorf("cuvsdouble: violations: %v", v)
		}
	})
}

// Resources returns new resources closed at the end of t.
func Resources(t *testing.T) *safe.Resources {
	t.Helper()
	r, err := safe.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// Random returns rows×dim uniform float32s from a fixed seed.
func Random(seed uint64, rows, dim int) []float32 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]float32, rows*dim)
	for i := range out {
		out[i] = r.Float32()
	}
	return out
}

// Metric is a distance for ExactKNN.
type Metric func(a, b []float32) float32

// L2 is the squared Euclidean distance.
func L2(a, b []float32) float32 {
	var s float32
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return s
}

// NegInner is minus the inner product (smaller is nearer).
func NegInner(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return -s
}

// ExactKNN returns, for each query, the ids of its k nearest rows among
// those allowed (nil: all), nearest first, ties to the smaller id.
func ExactKNN(data, queries []float32, dim, k int, dist Metric, allowed func(int) bool) [][]int64 {
	rows, nq := len(data)/dim, len(queries)/dim
	out := make([][]int64, nq)
	for q := 0; q < nq; q++ {
		type cand struct {
			id int
			d  float32
		}
		var cs []cand
		for i := 0; i < rows; i++ {
			if allowed != nil && !allowed(i) {
				continue
			}
			cs = append(cs, cand{i, dist(queries[q*dim:(q+1)*dim], data[i*dim:(i+1)*dim])})
		}
		sort.Slice(cs, func(a, b int) bool {
			if cs[a].d != cs[b].d {
				return cs[a].d < cs[b].d
			}
			return cs[a].id < cs[b].id
		})
		for j := 0; j < k && j < len(cs); j++ {
			out[q] = append(out[q], int64(cs[j].id))
		}
	}
	return out
}

// Close closes c at the end of t, failing t on error.
func Close(t *testing.T, c interface{ Close() error }) {
	t.Helper()
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// NearlyEqual compares float32s with a relative tolerance.
func NearlyEqual(a, b float32) bool {
	return math.Abs(float64(a-b)) <= 1e-4*math.Max(1, math.Abs(float64(b)))
}
