package main

import (
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// TestSearchAllocatesNothing holds the serving hot path to zero Go heap
// allocations per search: cagra.Index.Search with safe.DeviceMatrix tensors,
// the worker's search (a view of the next query batch, Search, Sync) and
// the latency bookkeeping.
func TestSearchAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled call state is reallocated")
	}
	safetest.Check(t)
	c := tiny()
	res := safetest.Resources(t)
	idx, _, err := build[float32](res, c)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	sp, err := searchParams(c)
	if err != nil {
		t.Fatal(err)
	}

	q, err := safe.DeviceMatrixFrom(res, randomMatrix(7, 2, c.dim), 2, c.dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, q)
	n, err := safe.NewDeviceMatrix[uint32](res, 2, c.k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, n)
	n64, err := safe.NewDeviceMatrix[int64](res, 2, c.k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, n64)
	d, err := safe.NewDeviceMatrix[float32](res, 2, c.k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, d)
	search := func() {
		if err := idx.Search(res, &sp, q, n, d, nil); err != nil {
			t.Fatal(err)
		}
	}
	search64 := func() {
		if err := idx.Search(res, &sp, q, n64, d, nil); err != nil {
			t.Fatal(err)
		}
	}
	sync := func() {
		if err := res.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	search() // the first call fills the pools
	for name, f := range map[string]func(){"Search (uint32 neighbors)": search, "Search (int64 neighbors)": search64, "Resources.Sync": sync} {
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, a)
		}
	}

	w, err := newWorker[float32](c, 0)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, closer(w.close))
	var h histogram
	t0 := time.Now()
	loop := func() {
		if err := w.search(idx, &sp); err != nil {
			t.Fatal(err)
		}
		h.record(time.Since(t0))
	}
	loop()
	if a := testing.AllocsPerRun(200, loop); a != 0 {
		t.Errorf("the serving loop's iteration: %v allocations, want 0", a)
	}
}

// TestBatchSearchAllocatesNothing holds -mode batch's hot path to zero Go
// heap allocations per request: a SearchInto of a query in Go memory into
// Go buffers through the shared Batcher.
func TestBatchSearchAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled request state is reallocated")
	}
	safetest.Check(t)
	c := tiny()
	c.batched, c.maxBatch, c.maxWait, c.slots = true, 16, time.Millisecond, 2
	res := safetest.Resources(t)
	idx, _, err := build[float32](res, c)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	// SingleCTA: one kernel; AutoAlgo: the Batcher picks it by load (the
	// light-load kernel at this load).
	for _, algo := range []cagra.SearchAlgo{cagra.SingleCTA, cagra.AutoAlgo} {
		c.algo = algo
		sp, err := searchParams(c)
		if err != nil {
			t.Fatal(err)
		}
		b, err := newBatcher[float32](idx, &sp, c)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, b)
		w := &batchWorker[float32]{b: b, size: 1, nb: 3, dim: c.dim, queries: randomMatrix(3, 3, c.dim),
			neighbors: make([]uint32, c.k), distances: make([]float32, c.k)}
		loop := func() {
			if err := w.search(); err != nil {
				t.Fatal(err)
			}
		}
		loop()
		if a := testing.AllocsPerRun(200, loop); a != 0 {
			t.Errorf("-mode batch's iteration, %v: %v allocations, want 0", algo, a)
		}
		if st := b.Stats(); (st.Light == st.Batches) != (algo == cagra.AutoAlgo) {
			t.Errorf("%v: %d of %d batches on the light-load kernel", algo, st.Light, st.Batches)
		}
	}
}

type closer func() error

func (c closer) Close() error { return c() }

// TestIntegerHotPathsAllocateNothing: -dtype int8 and uint8 keep both hot
// paths (the per-call worker's search and -mode batch's SearchInto) at
// zero Go heap allocations.
func TestIntegerHotPathsAllocateNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled state is reallocated")
	}
	safetest.Check(t)
	t.Run("int8", func(t *testing.T) { hotPathAllocs[int8](t) })
	t.Run("uint8", func(t *testing.T) { hotPathAllocs[uint8](t) })
}

func hotPathAllocs[T elem](t *testing.T) {
	c := tiny()
	c.batched, c.maxBatch, c.slots = true, 16, 2
	res := safetest.Resources(t)
	idx, _, err := build[T](res, c)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	sp, err := searchParams(c)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWorker[T](c, 0)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, closer(w.close))
	direct := func() {
		if err := w.search(idx, &sp); err != nil {
			t.Fatal(err)
		}
	}
	b, err := newBatcher[T](idx, &sp, c)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, b)
	bw := &batchWorker[T]{b: b, size: 1, nb: 3, dim: c.dim, queries: quantize[T](randomMatrix(3, 3, c.dim)),
		neighbors: make([]uint32, c.k), distances: make([]float32, c.k)}
	batched := func() {
		if err := bw.search(); err != nil {
			t.Fatal(err)
		}
	}
	for name, f := range map[string]func(){"per-call search": direct, "-mode batch's SearchInto": batched} {
		f()
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, a)
		}
	}
}
