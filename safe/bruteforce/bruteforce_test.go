package bruteforce_test

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// The tests run against the ABI test double, never a real libcuvs_c.
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
	idx, err := bruteforce.Build(f.res, f.dataset, bruteforce.DefaultBuildParams())
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
	want := safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, allowed)
	for q := 0; q < nq; q++ {
		for j := 0; j < k; j++ {
			if got[q*k+j] != want[q][j] {
				t.Fatalf("query %d: neighbors %v, want %v", q, got[q*k:(q+1)*k], want[q])
			}
			id := want[q][j]
			d := safetest.L2(f.qs[q*dim:(q+1)*dim], f.data[int(id)*dim:(int(id)+1)*dim])
			if !safetest.NearlyEqual(dist[q*k+j], d) {
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
	words := make([]uint32, safe.Words(nq*rows))
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
	for q := 0; q < nq; q++ {
		want := safetest.ExactKNN(f.data, f.qs[q*dim:(q+1)*dim], dim, k, safetest.L2, func(i int) bool { return i%nq != q })[0]
		for j := 0; j < k; j++ {
			if got[q*k+j] != want[j] {
				t.Fatalf("bitmap query %d: %v, want %v", q, got[q*k:(q+1)*k], want)
			}
		}
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
		t.Fatalf("deserialized %d×%d %v", back.Rows(), back.Dim(), back.DType())
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
	idx, err := bruteforce.Build(f.res, f.dataset, bruteforce.DefaultBuildParams())
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
		{"dataset", func() error { _, err := bruteforce.Build(f.res, f64, bruteforce.DefaultBuildParams()); return err }()},
		{"dataset", func() error { _, err := bruteforce.Build(f.res, hostQ, bruteforce.DefaultBuildParams()); return err }()},
		{"params.Metric", func() error {
			_, err := bruteforce.Build(f.res, f.dataset, bruteforce.BuildParams{Metric: 99})
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
		if _, err := bruteforce.Build(f.res, f.dataset, bruteforce.DefaultBuildParams()); !isCuvs(err, fn) {
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

// An index dropped without Close is destroyed when collected, and its
// borrow on the dataset ends.
func TestDroppedIndexReleasesDataset(t *testing.T) {
	f := setup(t)
	func() {
		if _, err := bruteforce.Build(f.res, f.dataset, bruteforce.DefaultBuildParams()); err != nil {
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
