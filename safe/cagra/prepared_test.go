package cagra_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// A prepared search gives the same results as Search, batch after batch.
func TestPrepared(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	q := newDevice[float32](t, f.res, nq, dim)
	ps, err := idx.Prepare(&f.sp, q, f.n64, f.dist, nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ps)
	ids := make([]int64, nq*k)
	dists := make([]float32, nq*k)
	idsT, _ := dlpack.NewHostMatrix(ids, nq, k)
	distsT, _ := dlpack.NewHostMatrix(dists, nq, k)
	for batch := uint64(0); batch < 3; batch++ {
		qs := safetest.Random(100+batch, nq, dim)
		host, _ := dlpack.NewHostMatrix(qs, nq, dim)
		if err := ps.SetQueries(f.res, host); err != nil {
			t.Fatal(err)
		}
		if err := ps.Run(f.res); err != nil {
			t.Fatal(err)
		}
		if err := ps.Results(f.res, idsT, distsT); err != nil {
			t.Fatal(err)
		}
		recallAtLeast(t, ids, safetest.ExactKNN(f.data, qs, dim, k, safetest.L2, nil), minRecall)
	}
	// The bound buffers are the Prepared's: their owners refuse others.
	if err := f.n64.Close(); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("closing bound neighbors: %v", err)
	}
	if _, err := q.ToHost(f.res); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("reading bound queries: %v", err)
	}
	if err := idx.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("searching into bound outputs: %v", err)
	}
	if err := ps.SetQueries(f.res, q); err == nil {
		t.Error("copying the bound queries onto themselves accepted")
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ps.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := ps.Run(f.res); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if _, err := q.ToHost(f.res); err != nil {
		t.Errorf("queries after Close: %v", err)
	}
}

func TestPreparedFilterAndExtend(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, hostMatrix(t, f.data, rows, dim), params(t))
	var allowed []int64
	for i := int64(0); i < rows; i += 4 {
		allowed = append(allowed, i)
	}
	bs, err := safe.NewBitsetFilterAllowing(f.res, rows, allowed)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bs)
	q := newDevice[float32](t, f.res, nq, dim)
	if err := q.CopyFromHost(f.res, f.qs); err != nil {
		t.Fatal(err)
	}
	ps, err := idx.Prepare(&f.sp, q, f.n32, f.dist, bs)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ps)
	if err := ps.Run(f.res); err != nil {
		t.Fatal(err)
	}
	ids := make([]uint32, nq*k)
	idsT, _ := dlpack.NewHostMatrix(ids, nq, k)
	if err := ps.Results(f.res, idsT, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if id%4 != 0 && cagra.Valid(id) {
			t.Fatalf("filtered row %d returned", id)
		}
	}
	recallAtLeast(t, ids, safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, func(i int) bool { return i%4 == 0 }), minRecall)
	// After Extend the filter is too short for the index: Run refuses.
	more := safetest.Random(9, 10, dim)
	if err := idx.Extend(f.res, hostMatrix(t, more, 10, dim), &cagra.ExtendParams{}); err != nil {
		t.Fatal(err)
	}
	if err := ps.Run(f.res); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("Run with a filter for the old row count: %v", err)
	}
}

func TestPreparedValidation(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	q := newDevice[float32](t, f.res, nq, dim)
	n32 := newDevice[int32](t, f.res, nq, k)
	bigK := newDevice[uint32](t, f.res, nq, rows+1)
	bigD := newDevice[float32](t, f.res, nq, rows+1)
	hostQ := hostMatrix(t, f.qs, nq, dim)
	for _, c := range []struct {
		arg string
		err error
	}{
		{"queries", errOf(idx.Prepare(&f.sp, hostQ, f.n32, f.dist, nil))},
		{"neighbors", errOf(idx.Prepare(&f.sp, q, n32, f.dist, nil))},
		{"neighbors", errOf(idx.Prepare(&f.sp, q, bigK, bigD, nil))},
	} {
		if !isArg(c.err, c.arg) {
			t.Errorf("want an error about %s, got %v", c.arg, c.err)
		}
	}
	ps, err := idx.Prepare(&f.sp, q, f.n32, f.dist, nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ps)
	wrong := make([]float32, nq*(dim+1))
	wrongT, _ := dlpack.NewHostMatrix(wrong, nq, dim+1)
	if err := ps.SetQueries(f.res, wrongT); !isArg(err, "src") {
		t.Errorf("queries of the wrong shape: %v", err)
	}
	ids64 := make([]int64, nq*k)
	ids64T, _ := dlpack.NewHostMatrix(ids64, nq, k)
	if err := ps.Results(f.res, ids64T, nil); !isArg(err, "neighbors") {
		t.Errorf("results of the wrong dtype: %v", err)
	}
	// A failure of the C search comes back as the library's error.
	safetest.Double(t, "fault injection").FailNext("cuvsCagraSearch", "injected")
	if err := ps.Run(f.res); !isCuvs(err, "cuvsCagraSearch", "injected") {
		t.Errorf("injected failure: %v", err)
	}
	// Closing the index first: Run then reports it closed.
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ps.Run(f.res); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Run on a closed index: %v", err)
	}
}

func TestPreparedRunAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	q := newDevice[float32](t, f.res, nq, dim)
	ps, err := idx.Prepare(&f.sp, q, f.n32, f.dist, nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ps)
	if n := testing.AllocsPerRun(50, func() {
		if err := ps.Run(f.res); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per Run", n)
	}
}

// A Prepared dropped without Close ends its borrows when collected.
func TestPreparedCleanup(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	q := newDevice[float32](t, f.res, nq, dim)
	func() {
		if _, err := idx.Prepare(&f.sp, q, f.n32, f.dist, nil); err != nil {
			t.Fatal(err)
		}
	}()
	for i := 0; i < 20; i++ {
		runtime.GC()
		if !q.Owner().Busy() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the queries are still borrowed by a Prepared nobody holds")
}

// An index dropped without Close is destroyed when collected, and its
// borrow on the dataset ends.
func TestDroppedIndexReleasesDataset(t *testing.T) {
	f := setup(t)
	func() {
		if _, err := cagra.Build(f.res, f.dataset, ptr(params(t))); err != nil {
			t.Fatal(err)
		}
	}()
	if !f.dataset.Owner().Busy() {
		// The build keeps a reference (device memory, 32-byte rows);
		// without that borrow this test would prove nothing.
		t.Fatal("dataset not borrowed right after the build")
	}
	for i := 0; i < 50 && f.dataset.Owner().Busy(); i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if f.dataset.Owner().Busy() {
		t.Fatal("the dataset is still borrowed by an index nobody holds")
	}
}
