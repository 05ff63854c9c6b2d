package bruteforce_test

import (
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// The tests run against the ABI test double, or against the libcuvs_c that
// $CUVS_TEST_LIBRARY names (internal/safetest); what needs the double skips
// there.
func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows, dim, nq, k = 300, 8, 12, 7
)

type fixture struct {
	res       *safe.Resources
	data, qs  []float32
	dataset   *safe.DeviceMatrix[float32]
	queries   *safe.DeviceMatrix[float32]
	neighbors *safe.DeviceMatrix[int64]
	distances *safe.DeviceMatrix[float32]
}

func setup(t *testing.T) *fixture {
	t.Helper()
	safetest.Check(t)
	f := &fixture{res: safetest.Resources(t), data: safetest.Random(1, rows, dim), qs: safetest.Random(2, nq, dim)}
	var err error
	if f.dataset, err = safe.DeviceMatrixFrom(f.res, f.data, rows, dim); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f.dataset)
	if f.queries, err = safe.DeviceMatrixFrom(f.res, f.qs, nq, dim); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f.queries)
	if f.neighbors, err = safe.NewDeviceMatrix[int64](f.res, nq, k); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f.neighbors)
	if f.distances, err = safe.NewDeviceMatrix[float32](f.res, nq, k); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f.distances)
	return f
}

func (f *fixture) build(t *testing.T) *bruteforce.Index {
	t.Helper()
	idx, err := bruteforce.Build(f.res, f.dataset, nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	return idx
}

// check compares the search results with an exact kNN computed in Go.
func (f *fixture) check(t *testing.T, allowed func(int) bool) {
	t.Helper()
	if err := f.res.Sync(); err != nil {
		t.Fatal(err)
	}
	got, _ := f.neighbors.ToHost(f.res)
	dist, _ := f.distances.ToHost(f.res)
	checkExact(t, f.data, f.qs, got, dist, k, allowed)
}

// checkExact compares results (nq × k, row-major) with an exact kNN in Go.
// The data has no ties, but a GPU computes L2 in expanded form
// (|q|² + |x|² - 2q·x): where two rows are that close, either order is
// right, so an id may differ from Go's when both are as far from the query.
func checkExact(t *testing.T, data, qs []float32, got []int64, dist []float32, k int, allowed func(int) bool) {
	t.Helper()
	want := safetest.ExactKNN(data, qs, dim, k, safetest.L2, allowed)
	row := func(i int64) []float32 { return data[int(i)*dim : (int(i)+1)*dim] }
	for q := range want {
		query := qs[q*dim : (q+1)*dim]
		seen := map[int64]bool{}
		for j := 0; j < k; j++ {
			id, w := got[q*k+j], want[q][j]
			if id < 0 || id >= int64(len(data)/dim) || seen[id] || (allowed != nil && !allowed(int(id))) {
				t.Fatalf("query %d: neighbors %v, want %v", q, got[q*k:(q+1)*k], want[q])
			}
			seen[id] = true
			d := safetest.L2(query, row(w))
			if id != w && !safetest.NearlyEqual(safetest.L2(query, row(id)), d) {
				t.Fatalf("query %d: neighbors %v, want %v", q, got[q*k:(q+1)*k], want[q])
			}
			if dist != nil && !safetest.NearlyEqual(dist[q*k+j], d) {
				t.Fatalf("query %d: distance %v, want %v", q, dist[q*k+j], d)
			}
		}
	}
}

func TestBuildSearchExact(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	if idx.Rows() != rows || idx.Dim() != dim || idx.DType() != dlpack.Float32 {
		t.Fatalf("index %d×%d %v", idx.Rows(), idx.Dim(), idx.DType())
	}
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, nil); err != nil {
		t.Fatal(err)
	}
	f.check(t, nil)
}

func TestFilters(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	var allowed []int64
	for i := int64(0); i < rows; i += 3 {
		allowed = append(allowed, i)
	}
	bs, err := safe.NewBitsetFilterAllowing(f.res, rows, allowed)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bs)
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, bs); err != nil {
		t.Fatal(err)
	}
	f.check(t, func(i int) bool { return i%3 == 0 })

	// A bitmap: query q may see rows with i%nq != q.
	words := make([]uint32, kit.Words(nq*rows))
	for q := 0; q < nq; q++ {
		for i := 0; i < rows; i++ {
			if i%nq != q {
				b := q*rows + i
				words[b/32] |= 1 << (b % 32)
			}
		}
	}
	bm, err := safe.NewBitmapFilter(f.res, nq, rows, words)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bm)
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, bm); err != nil {
		t.Fatal(err)
	}
	f.res.Sync()
	got, _ := f.neighbors.ToHost(f.res)
	dist, _ := f.distances.ToHost(f.res)
	for q := 0; q < nq; q++ {
		checkExact(t, f.data, f.qs[q*dim:(q+1)*dim], got[q*k:(q+1)*k], dist[q*k:(q+1)*k], k, func(i int) bool { return i%nq != q })
	}
	// A filter made for another row count is refused before any C call.
	other, err := safe.NewBitsetFilterAllowing(f.res, rows+1, allowed)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, other)
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, other); !errors.Is(err, safe.ErrInvalidArgument) || !strings.Contains(err.Error(), "filter") {
		t.Errorf("mis-sized filter: %v", err)
	}
}

// A filter that lets fewer than k rows through is refused before any C
// call: cuVS would return uninitialised memory for such a search (ids out
// of range, NaN distances, not even the allowed rows). With k rows allowed
// the results are exact.
func TestFilterFewerRowsThanK(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	few := []int64{4, 150, 299}
	bs, err := safe.NewBitsetFilterAllowing(f.res, rows, few)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bs)
	if bs.Allowed() != 3 {
		t.Fatalf("Allowed = %d, want 3", bs.Allowed())
	}
	var ae *safe.ArgError
	err = idx.Search(f.res, f.queries, f.neighbors, f.distances, bs)
	if !errors.As(err, &ae) || ae.Arg != "filter" || !strings.Contains(err.Error(), "bitset lets 3 rows through, fewer than k = 7") {
		t.Fatalf("search for 7 neighbors among 3 rows: %v", err)
	}
	if p, err := idx.Prepare(f.queries, f.neighbors, f.distances, bs); !errors.As(err, &ae) || ae.Arg != "filter" {
		if p != nil {
			p.Close()
		}
		t.Fatalf("Prepare for 7 neighbors among 3 rows: %v", err)
	}
	// The refused Prepare bound nothing: the outputs are free.
	if err := f.neighbors.CopyFromHost(f.res, make([]int64, nq*k)); err != nil {
		t.Fatalf("neighbors after a refused Prepare: %v", err)
	}

	// Exactly k rows allowed: every query gets them, nearest first.
	var seven []int64
	for i := int64(0); i < k; i++ {
		seven = append(seven, 40*i+3)
	}
	bs7, err := safe.NewBitsetFilterAllowing(f.res, rows, seven)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bs7)
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, bs7); err != nil {
		t.Fatal(err)
	}
	f.check(t, func(i int) bool { return i%40 == 3 && i < 40*k })

	// A bitmap: query 5 sees 2 rows, the others all rows; the error names it.
	words := make([]uint32, kit.Words(nq*rows))
	for q := 0; q < nq; q++ {
		for i := 0; i < rows; i++ {
			if q != 5 || i == 10 || i == 20 {
				b := q*rows + i
				words[b/32] |= 1 << (b % 32)
			}
		}
	}
	bm, err := safe.NewBitmapFilter(f.res, nq, rows, words)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bm)
	if bm.Allowed() != 2 || bm.AllowedFor(0) != rows || bm.AllowedFor(5) != 2 {
		t.Fatalf("Allowed = %d, AllowedFor(0) = %d, AllowedFor(5) = %d", bm.Allowed(), bm.AllowedFor(0), bm.AllowedFor(5))
	}
	err = idx.Search(f.res, f.queries, f.neighbors, f.distances, bm)
	if !errors.As(err, &ae) || ae.Arg != "filter" || !strings.Contains(err.Error(), "query 5 see 2 rows, fewer than k = 7") {
		t.Fatalf("bitmap with a query of 2 rows: %v", err)
	}
	if _, err := idx.Prepare(f.queries, f.neighbors, f.distances, bm); !errors.As(err, &ae) || ae.Arg != "filter" {
		t.Fatalf("Prepare, bitmap with a query of 2 rows: %v", err)
	}
}

// cuVS's filtered brute-force search has only the L2, inner-product and
// cosine distances: a filter with another metric is refused in Go.
func TestFilterNeedsMetric(t *testing.T) {
	f := setup(t)
	idx, err := bruteforce.Build(f.res, f.dataset, &bruteforce.BuildParams{Metric: safe.L1})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	if false {
		t.Errorf("Metric = %v", idx.Metric())
	}
	bs, err := safe.NewBitsetFilterAllowing(f.res, rows, []int64{1, 2, 3, 4, 5, 6, 7, 8})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bs)
	var ae *safe.ArgError
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, bs); !errors.As(err, &ae) || ae.Arg != "filter" || !strings.Contains(err.Error(), "L1") {
		t.Errorf("filtered L1 search: %v", err)
	}
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, nil); err != nil {
		t.Errorf("unfiltered L1 search: %v", err)
	}
}

func TestSerializeDeserialize(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	path := filepath.Join(t.TempDir(), "bf.idx")
	if err := idx.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	back, err := bruteforce.Deserialize(f.res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	if back.Rows() != rows || back.Dim() != dim || back.DType() != dlpack.Float32 {
		t.Fatalf("deserialized %d×%d %v %v", back.Rows(), back.Dim(), back.DType(), back.Metric())
	}
	if err := back.Search(f.res, f.queries, f.neighbors, f.distances, nil); err != nil {
		t.Fatal(err)
	}
	f.check(t, nil)
	if _, err := bruteforce.Deserialize(f.res, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestIndexBorrowsDataset(t *testing.T) {
	f := setup(t)
	idx, err := bruteforce.Build(f.res, f.dataset, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = f.dataset.Close()
	if !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), "bruteforce.Index") {
		t.Fatalf("closing a dataset an index uses: %v", err)
	}
	if err := f.dataset.CopyFromHost(f.res, f.data); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Fatalf("writing a dataset an index uses: %v", err)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, nil); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("search after Close: %v", err)
	}
	if err := f.dataset.CopyFromHost(f.res, f.data); err != nil {
		t.Errorf("writing the dataset after the index closed: %v", err)
	}
}

func TestValidation(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	host := dlpack.NewHostVector(f.qs)
	hostQ, _ := dlpack.NewHostMatrix(f.qs, nq, dim)
	n32, _ := safe.NewDeviceMatrix[int32](f.res, nq, k)
	safetest.Close(t, n32)
	wrongK, _ := safe.NewDeviceMatrix[float32](f.res, nq, k+1)
	safetest.Close(t, wrongK)
	bigK, _ := safe.NewDeviceMatrix[int64](f.res, nq, rows+1)
	safetest.Close(t, bigK)
	bigD, _ := safe.NewDeviceMatrix[float32](f.res, nq, rows+1)
	safetest.Close(t, bigD)
	narrow, _ := safe.NewDeviceMatrix[float32](f.res, nq, dim-1)
	safetest.Close(t, narrow)
	f64, _ := safe.NewDeviceMatrix[float64](f.res, rows, dim)
	safetest.Close(t, f64)
	for _, c := range []struct {
		arg string
		err error
	}{
		{"queries", idx.Search(f.res, hostQ, f.neighbors, f.distances, nil)},
		{"queries", idx.Search(f.res, host, f.neighbors, f.distances, nil)},
		{"queries", idx.Search(f.res, narrow, f.neighbors, f.distances, nil)},
		{"neighbors", idx.Search(f.res, f.queries, n32, f.distances, nil)},
		{"distances", idx.Search(f.res, f.queries, f.neighbors, wrongK, nil)},
		{"neighbors", idx.Search(f.res, f.queries, bigK, bigD, nil)},
		{"queries/neighbors/distances", idx.Search(f.res, nil, f.neighbors, f.distances, nil)},
		{"dataset", func() error { _, err := bruteforce.Build(f.res, f64, nil); return err }()},
		{"params.Metric", func() error {
			_, err := bruteforce.Build(f.res, f.dataset, &bruteforce.BuildParams{Metric: 99})
			return err
		}()},
	} {
		var ae *safe.ArgError
		if !errors.As(c.err, &ae) || ae.Arg != c.arg {
			t.Errorf("want an error about %s, got %v", c.arg, c.err)
		}
	}
	// Outputs that overlap are refused.
	if err := idx.Search(f.res, f.queries, f.distances, f.distances, nil); err == nil {
		t.Error("aliased outputs accepted")
	}
}

// Each C call failing comes back as the right error and leaks nothing.
func TestFaults(t *testing.T) {
	f := setup(t)
	ctl := safetest.Double(t, "its control surface")
	path := filepath.Join(t.TempDir(), "bf.idx")
	for _, fn := range []string{"cuvsBruteForceIndexCreate", "cuvsBruteForceBuild"} {
		ctl.FailNext(fn, "injected")
		if _, err := bruteforce.Build(f.res, f.dataset, nil); !isCuvs(err, fn) {
			t.Errorf("%s: %v", fn, err)
		}
	}
	idx := f.build(t)
	ctl.FailNext("cuvsBruteForceSearch", "injected")
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, nil); !isCuvs(err, "cuvsBruteForceSearch") {
		t.Errorf("search: %v", err)
	}
	ctl.FailNext("cuvsBruteForceSerialize", "injected")
	if err := idx.Serialize(f.res, path); !isCuvs(err, "cuvsBruteForceSerialize") {
		t.Errorf("serialize: %v", err)
	}
	if err := idx.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"cuvsBruteForceIndexCreate", "cuvsBruteForceDeserialize"} {
		ctl.FailNext(fn, "injected")
		if _, err := bruteforce.Deserialize(f.res, path); !isCuvs(err, fn) {
			t.Errorf("%s: %v", fn, err)
		}
	}
	// The index and dataset are intact after all that.
	if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, nil); err != nil {
		t.Fatal(err)
	}
	f.check(t, nil)
}

func isCuvs(err error, fn string) bool {
	var e *safe.Error
	return errors.As(err, &e) && e.Func == fn && e.Reason == "injected"
}

// Many goroutines search one index, each with its own Resources and
// outputs; Close waits for them.
func TestConcurrentSearch(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := safe.NewResources()
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Close()
			n, _ := safe.NewDeviceMatrix[int64](res, nq, k)
			d, _ := safe.NewDeviceMatrix[float32](res, nq, k)
			defer n.Close()
			defer d.Close()
			for i := 0; i < 20; i++ {
				if err := idx.Search(res, f.queries, n, d, nil); err != nil {
					t.Error(err)
					return
				}
			}
			res.Sync()
			got, _ := n.ToHost(res)
			want := safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, nil)
			if got[0] != want[0][0] {
				t.Errorf("got %v, want %v", got[:k], want[0])
			}
		}()
	}
	wg.Wait()
}

// A float16 index survives serialization: its file starts "<e2" (RAFT's
// NumPy name for half), and it comes back float16 with its metric, giving
// the same results. The points are small integers, exact in float16.
func TestSerializeFloat16(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	half := func(v ...float32) []float16.Float16 {
		out := make([]float16.Float16, len(v))
		for i, x := range v {
			out[i] = float16.Fromfloat32(x)
		}
		return out
	}
	points, err := safe.DeviceMatrixFrom(res, half(0, 0, 1, 0, 0, 2, 5, 5, 7, 5, 5, 8), 6, 2)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, points)
	queries, err := safe.DeviceMatrixFrom(res, half(1, 1, 6, 6), 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, queries)
	idx, err := bruteforce.Build(res, points, &bruteforce.BuildParams{Metric: safe.InnerProduct})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	path := filepath.Join(t.TempDir(), "half.idx")
	if err := idx.Serialize(res, path); err != nil {
		t.Fatal(err)
	}
	back, err := bruteforce.Deserialize(res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	if back.DType() != dlpack.Float16 || back.Rows() != 6 || back.Dim() != 2 {
		t.Fatalf("deserialized %d×%d %v %v", back.Rows(), back.Dim(), back.DType(), back.Metric())
	}
	var results [2][]int64
	for i, x := range []*bruteforce.Index{idx, back} {
		n, err := safe.NewDeviceMatrix[int64](res, 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, n)
		d, err := safe.NewDeviceMatrix[float32](res, 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, d)
		if err := x.Search(res, queries, n, d, nil); err != nil {
			t.Fatal(err)
		}
		if results[i], err = n.ToHost(res); err != nil {
			t.Fatal(err)
		}
	}
	// Inner products: (1,1)·rows = 0 1 2 10 12 13; (6,6)·rows = 0 6 12 60 72 78.
	if want := []int64{5, 4, 3, 5, 4, 3}; !slices.Equal(results[0], want) || !slices.Equal(results[1], want) {
		t.Errorf("built %v, deserialized %v, want %v", results[0], results[1], want)
	}
}

// An index dropped without Close is destroyed when collected, and its
// borrow on the dataset ends.
func TestDroppedIndexReleasesDataset(t *testing.T) {
	f := setup(t)
	func() {
		if _, err := bruteforce.Build(f.res, f.dataset, nil); err != nil {
			t.Fatal(err)
		}
	}()
	for i := 0; i < 50 && f.dataset.Owner().Busy(); i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if f.dataset.Owner().Busy() {
		t.Fatal("the dataset is still borrowed by an index nobody holds")
	}
}
