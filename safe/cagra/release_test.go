package cagra_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// One Go program, the same calls, on either release: build (a view of
// padded device rows, and a padded copy of 12-byte host rows), extend,
// merge, search, serialize with and without the dataset, deserialize, and
// the stream forms; results checked by recall against an exact kNN, and
// round trips by equality.
func TestReleaseRoundTrip(t *testing.T) {
	f := setup(t)
	t.Logf("cuVS %s", safe.Release())
	idx := build(t, f.res, f.dataset, params(t)) // 32-byte device rows: referenced on both releases
	search(t, f, idx, f.n64, f.data, nil, nil)

	// Extend with host rows: "add these rows" on both releases.
	more := safetest.Random(3, 40, dim)
	if err := idx.Extend(f.res, hostMatrix(t, more, 40, dim), nil); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(f.data), more...)
	if idx.Rows() != rows+40 {
		t.Fatalf("Rows after Extend = %d", idx.Rows())
	}
	search(t, f, idx, f.n64, all, nil, nil)
	// The index's rows are the old and the new ones, in order.
	dv, err := idx.Dataset()
	if err != nil {
		t.Fatal(err)
	}
	if got := toHost[float32](t, f.res, dv); !slices.Equal(got, all) {
		t.Fatalf("dataset after Extend differs from old || new rows")
	}

	// Merge with a second index of other rows.
	extra := safetest.Random(4, rows, dim)
	other := build(t, f.res, hostMatrix(t, extra, rows, dim), params(t))
	merged, err := cagra.Merge(f.res, nil, []*cagra.Index{idx, other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, merged)
	both := append(slices.Clone(all), extra...)
	if merged.Rows() != len(both)/dim {
		t.Fatalf("merged Rows = %d, want %d", merged.Rows(), len(both)/dim)
	}
	search(t, f, merged, f.n64, both, nil, nil)

	// Serialize / Deserialize: the same results from the file's index.
	dir := t.TempDir()
	path := filepath.Join(dir, "full.idx")
	if err := merged.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	back, err := cagra.Deserialize(f.res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	if back.Rows() != merged.Rows() || back.Dim() != dim || back.GraphDegree() != merged.GraphDegree() {
		t.Fatalf("deserialized %d×%d degree %d", back.Rows(), back.Dim(), back.GraphDegree())
	}
	want := searchHost(t, f, merged)
	if got := searchHost(t, f, back); !slices.Equal(got, want) {
		t.Errorf("deserialized index finds %v, the original %v", got, want)
	}
	var buf bytes.Buffer
	if _, err := merged.SerializeTo(f.res, &buf); err != nil {
		t.Fatal(err)
	}
	fromStream, err := cagra.DeserializeFrom(f.res, &buf)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, fromStream)
	if got := searchHost(t, f, fromStream); !slices.Equal(got, want) {
		t.Errorf("index read from a stream finds %v, the original %v", got, want)
	}
	// A file without its dataset: a graph-only index, refused by search.
	lean := filepath.Join(dir, "lean.idx")
	if err := merged.Serialize(f.res, lean, safe.WithoutDataset()); err != nil {
		t.Fatal(err)
	}
	g, err := cagra.Deserialize(f.res, lean)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, g)
	if err := g.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil); !errors.Is(err, cagra.ErrNoDataset) {
		t.Errorf("search of a graph-only index: %v, want ErrNoDataset", err)
	}

	// 12-byte rows (dim 3) from host memory: copied on both releases.
	data3 := safetest.Random(8, 60, 3)
	idx3 := build(t, f.res, hostMatrix(t, data3, 60, 3), params(t))
	q3 := deviceMatrix(t, f.res, safetest.Random(9, nq, 3), nq, 3)
	if err := idx3.Search(f.res, &f.sp, q3, f.n64, f.dist, nil); err != nil {
		t.Fatal(err)
	}
	checkResults(t, f.res, f.n64, f.dist, data3, safetest.Random(9, nq, 3), 3, nil)
	if err := idx3.Extend(f.res, hostMatrix(t, safetest.Random(10, 5, 3), 5, 3), nil); err != nil {
		t.Fatal(err)
	}
	if idx3.Rows() != 65 {
		t.Errorf("Rows after extending dim-3 rows: %d", idx3.Rows())
	}
}

// searchHost searches f's queries and returns the neighbors in host memory.
func searchHost(t *testing.T, f *fixture, idx *cagra.Index) []int64 {
	t.Helper()
	if err := idx.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.res.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := f.n64.ToHost(f.res)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// wantNotInRelease checks a refusal on 26.06 of what only 26.08 has.
func wantNotInRelease(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, safe.ErrNotInRelease) || !strings.Contains(err.Error(), "26.08") {
		t.Errorf("%s on %s: %v, want ErrNotInRelease naming 26.08", what, safe.Release(), err)
	}
}

// What only cuVS 26.08 has: reachable there, refused on 26.06 before any
// other work (even with nil arguments).
func TestOnly2608(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	if !on2608() {
		_, err := cagra.IndexParamsFromDataset(rows, dim, degree, safe.L2Expanded, 1)
		wantNotInRelease(t, "IndexParamsFromDataset", err)
		wantNotInRelease(t, "UpdateDataset", idx.UpdateDataset(f.res, f.dataset))
		wantNotInRelease(t, "UpdateDataset of nil", (*cagra.Index)(nil).UpdateDataset(nil, nil))
		wantNotInRelease(t, "SearchMultiPartition", cagra.SearchMultiPartition(f.res, nil, []*cagra.Index{idx}, f.queries, f.n32, f.n64, f.dist, nil))
		return
	}

	t.Run("IndexParamsFromDataset", func(t *testing.T) {
		p, err := cagra.IndexParamsFromDataset(rows, dim, degree, safe.L2Expanded, 1)
		if err != nil {
			t.Fatal(err)
		}
		if p.GraphDegree != degree || p.Metric != safe.L2Expanded || p.IntermediateGraphDegree < p.GraphDegree {
			t.Errorf("IndexParamsFromDataset = %+v", p)
		}
		x, err := cagra.Build(f.res, f.dataset, &p)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, x)
		search(t, f, x, f.n64, f.data, nil, nil)
		if _, err := cagra.IndexParamsFromDataset(0, dim, degree, safe.L2Expanded, 1); !isArg(err, "rows/dim/graphDegree") {
			t.Errorf("zero rows: %v", err)
		}
	})

	t.Run("UpdateDataset", func(t *testing.T) {
		// A graph-only file becomes searchable with its rows attached.
		path := filepath.Join(t.TempDir(), "lean.idx")
		if err := idx.Serialize(f.res, path, safe.WithoutDataset()); err != nil {
			t.Fatal(err)
		}
		g, err := cagra.Deserialize(f.res, path)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, g)
		if err := g.UpdateDataset(f.res, hostMatrix(t, f.data[:dim*(rows-1)], rows-1, dim)); !isArg(err, "dataset") {
			t.Errorf("one row short: %v", err)
		}
		if err := g.UpdateDataset(f.res, hostMatrix(t, f.data, rows, dim)); err != nil {
			t.Fatal(err)
		}
		if g.Dim() != dim {
			t.Errorf("Dim after UpdateDataset = %d", g.Dim())
		}
		search(t, f, g, f.n64, f.data, nil, nil)
		// A view of padded device rows: borrowed until the index is closed.
		if err := g.UpdateDataset(f.res, f.dataset); err != nil {
			t.Fatal(err)
		}
		search(t, f, g, f.n32, f.data, nil, nil)
	})

	t.Run("SearchMultiPartition", func(t *testing.T) {
		half := rows / 2
		a := build(t, f.res, hostMatrix(t, f.data[:half*dim], half, dim), params(t))
		b := build(t, f.res, hostMatrix(t, f.data[half*dim:], half, dim), params(t))
		pids := newDevice[uint32](t, f.res, nq, k)
		// Partition b allows its even rows only; a is unfiltered.
		var allowedB []int64
		for i := 0; i < half; i += 2 {
			allowedB = append(allowedB, int64(i))
		}
		fb, err := safe.NewBitsetFilterAllowing(f.res, half, allowedB)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, fb)
		if err := cagra.SearchMultiPartition(f.res, &f.sp, []*cagra.Index{a, b}, f.queries, pids, f.n64, f.dist, []*safe.Filter{nil, fb}); err != nil {
			t.Fatal(err)
		}
		if err := f.res.Sync(); err != nil {
			t.Fatal(err)
		}
		p, _ := pids.ToHost(f.res)
		nb, _ := f.n64.ToHost(f.res)
		global := make([]int64, len(nb))
		for i := range nb {
			if p[i] > 1 || nb[i] >= int64(half) {
				t.Fatalf("slot %d: partition %d row %d", i, p[i], nb[i])
			}
			global[i] = int64(p[i])*int64(half) + nb[i]
			if p[i] == 1 && nb[i]%2 != 0 {
				t.Fatalf("slot %d: row %d of partition 1, which its filter refuses", i, nb[i])
			}
		}
		allowed := func(r int) bool { return r < half || (r-half)%2 == 0 }
		recallAtLeast(t, global, safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, allowed), minRecall)

		if err := cagra.SearchMultiPartition(f.res, &f.sp, []*cagra.Index{a, b}, f.queries, pids, f.n64, f.dist, []*safe.Filter{nil}); !isArg(err, "filters") {
			t.Errorf("one filter for two partitions: %v", err)
		}
		if err := cagra.SearchMultiPartition(f.res, &f.sp, nil, f.queries, pids, f.n64, f.dist, nil); !isArg(err, "partitions") {
			t.Errorf("no partitions: %v", err)
		}
		short := newDevice[uint32](t, f.res, nq, k-1)
		if err := cagra.SearchMultiPartition(f.res, &f.sp, []*cagra.Index{a, b}, f.queries, short, f.n64, f.dist, nil); !isArg(err, "partitionIDs") {
			t.Errorf("partitionIDs of another shape: %v", err)
		}
	})

	t.Run("Compression", func(t *testing.T) {
		comp, err := cagra.DefaultCompressionParams()
		if err != nil {
			t.Fatal(err)
		}
		p := params(t)
		p.Compression = &comp
		_, err = cagra.Build(f.res, f.dataset, &p)
		wantCompressionRefused(t, err)
		_, err = cagra.Merge(f.res, &p, []*cagra.Index{idx, idx}, nil)
		wantCompressionRefused(t, err)
	})
}

// On 26.08 an index references the rows of the dataset it was last bound
// to: Build's view of padded device rows borrows them; Extend rebinds the
// index to its own concatenated copy, and UpdateDataset to its argument, so
// the earlier rows are free to go.
func TestDatasetRebinding2608(t *testing.T) {
	if !on2608() {
		t.Skip("cuVS 26.08's Dataset API: on 26.06 the borrow lasts until Close (TestBuildBorrowsDataset)")
	}
	f := setup(t)
	m := deviceMatrix(t, f.res, f.data, rows, dim)
	idx := build(t, f.res, m, params(t))
	if err := m.Close(); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Fatalf("closing rows the index views: %v", err)
	}
	more := safetest.Random(3, 10, dim)
	if err := idx.Extend(f.res, hostMatrix(t, more, 10, dim), nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("closing the rows an extended index no longer references: %v", err)
	}
	all := append(slices.Clone(f.data), more...)
	search(t, f, idx, f.n64, all, nil, nil)

	m2 := deviceMatrix(t, f.res, all, rows+10, dim)
	if err := idx.UpdateDataset(f.res, m2); err != nil {
		t.Fatal(err)
	}
	if err := m2.Close(); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Fatalf("closing rows attached with UpdateDataset: %v", err)
	}
	search(t, f, idx, f.n64, all, nil, nil)
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m2.Close(); err != nil {
		t.Fatalf("closing after the index closed: %v", err)
	}
}

// A multi-partition search allocates nothing on the Go heap.
func TestSearchMultiPartitionAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	if !on2608() {
		t.Skip("cuVS 26.08 only")
	}
	f := setup(t)
	a := build(t, f.res, f.dataset, params(t))
	b := build(t, f.res, f.dataset, params(t))
	pids := newDevice[uint32](t, f.res, nq, k)
	parts := []*cagra.Index{a, b}
	fb, err := safe.NewBitsetFilterAllowing(f.res, rows, []int64{1, 2, 3, 50, 60, 70, 80})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, fb)
	filters := []*safe.Filter{nil, fb}
	run := func() {
		if err := cagra.SearchMultiPartition(f.res, &f.sp, parts, f.queries, pids, f.n64, f.dist, filters); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Errorf("SearchMultiPartition: %v allocations per call", n)
	}
}
