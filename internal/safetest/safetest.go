// Package safetest runs the safe layer's tests against a libcuvs_c: by
// default the ABI test double (internal/cuvsdouble), built for the test run
// as the cuVS release CUVSDOUBLE_RELEASE names (26.06 unless set; e.g.
// CUVSDOUBLE_RELEASE=26.08 go test ./safe/cagra runs against the 26.08
// double with its controls);
// with CUVS_TEST_LIBRARY=/path/to/libcuvs_c.so, that library instead
// (conformance mode: a real libcuvs_c on a GPU machine, or the double loaded
// as if it were one).
//
// In conformance mode the double's control surface is out of reach: Double
// skips a test that needs it (fault injection, call counting, the double's
// own counters, forced versions, delays, instant mode) with a reason naming
// it, and Check still checks what any library allows: every handle the
// bindings made during the test (indexes, resources, device and pinned
// memory, borrows) released at its end.
package safetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
)

// LibraryEnv names the variable that points the tests at a libcuvs_c.
const LibraryEnv = "CUVS_TEST_LIBRARY"

var (
	ctl     *cuvsdouble.Control // nil in conformance mode
	libPath string
)

// Main is a TestMain: it loads the library under test (the double, or
// $CUVS_TEST_LIBRARY) and runs the tests.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if path := os.Getenv(LibraryEnv); path != "" {
		libPath = path
		if err := safe.Load(safe.WithLibrary(path)); err != nil {
			fmt.Fprintf(os.Stderr, "safetest: %s=%s: %v\n", LibraryEnv, path, err)
			return 1
		}
		return m.Run()
	}
	path, cleanup, err := cuvsdouble.BuildFile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	libPath = path
	if err := safe.Load(safe.WithLibrary(path)); err != nil {
		fmt.Fprintln(os.Stderr, "loading the test double:", err)
		return 1
	}
	if ctl, err = cuvsdouble.Open(path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// Conformance reports whether the tests run against $CUVS_TEST_LIBRARY
// rather than the double they built.
func Conformance() bool { return ctl == nil }

// LibraryPath returns the path of the library under test.
func LibraryPath() string { return libPath }

// Control returns the double's control surface, or nil in conformance mode:
// for checks a test makes only where it can (Double skips instead).
func Control() *cuvsdouble.Control { return ctl }

// Double returns the double's control surface, or skips t when the tests
// run against $CUVS_TEST_LIBRARY: what needs it (fault injection, call
// counts, the double's counters, versions, delays, instant mode) cannot be
// done to an arbitrary libcuvs_c. why says what the test needs it for.
func Double(t testing.TB, why string) *cuvsdouble.Control {
	t.Helper()
	if ctl == nil {
		t.Skipf("needs the ABI test double (internal/cuvsdouble) for %s; %s=%s is another library", why, LibraryEnv, libPath)
	}
	return ctl
}

// Check registers a check, at the end of t, that everything created during
// the test was released: the bindings' own handles (any library), and, on
// the double, everything it counts and any misuse it recorded; it also
// clears armed faults then.
func Check(t *testing.T) {
	t.Helper()
	handles := live.Snapshot()
	var before cuvsdouble.Counters
	if ctl != nil {
		before = ctl.Counters()
	}
	t.Cleanup(func() {
		runtime.GC()
		if d := live.Diff(handles, live.Snapshot()); len(d) > 0 {
			// A cleanup may still be running: collect once more.
			runtime.GC()
			if d = live.Diff(handles, live.Snapshot()); len(d) > 0 {
				t.Errorf("handles not released: %s", strings.Join(d, ", "))
			}
		}
		if ctl == nil {
			return
		}
		ctl.ClearFaults()
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
