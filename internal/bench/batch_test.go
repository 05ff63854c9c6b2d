package bench_test

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// BenchmarkBatcher is the batcher's own cost per request, the double in
// instant mode (its searches return at once, so a "GPU" batch costs only
// the calls around it): one query of dim float32s for k neighbors, through
// safe/batch's SearchInto with the caller's buffers.
//
//   - lone: one goroutine, so every request is a batch of one: the queue,
//     the hand-offs to the slot's goroutine and back, the copies in and
//     out of pinned staging, four C calls (copy, search, copy, copy) and a
//     stream sync. What a lone caller pays over a direct search.
//   - parallel-G: G goroutines at once (b.SetParallelism), so requests
//     share batches: ns/op is the wall time per request with them all in
//     flight, and the batch sizes formed are reported.
//
// cpu-ns/op is the host CPU time (user + system, all threads) per request:
// the cost that bounds a batcher's throughput on a machine with more cores.
//
// The direct row is one cagra.Index.Search + Resources.Sync of one query
// on device tensors, for reference.
func BenchmarkBatcher(b *testing.B) {
	b.Run("cagra/direct", benchDirect)
	b.Run("cagra/lone", func(b *testing.B) { benchBatcher(b, 1) })
	for _, g := range []int{16, 256} {
		b.Run(fmt.Sprintf("cagra/parallel-%d", g), func(b *testing.B) { benchBatcher(b, g) })
	}
	b.Run("bruteforce/lone", benchBatcherBruteForce)
	// With a "GPU" that takes time: every call on a Resources but the
	// (instant) search sleeps 100 µs in the double (three copies and a
	// sync: ~400 µs per batch, about a CAGRA search on an H200), so batches
	// grow as on a GPU and ns/op is the wall time per request at that batch
	// size, bounded by the batcher's host work on this machine's CPUs.
	for _, g := range []int{256, 1024} {
		b.Run(fmt.Sprintf("cagra/slow-gpu-parallel-%d", g), func(b *testing.B) {
			ctl := safetest.Double(b, "call delay")
			b.Cleanup(func() { ctl.SetCallDelay(0) })
			benchBatcherWith(b, g, func() { ctl.SetCallDelay(100 * time.Microsecond) })
		})
	}
}

func cagraIndex(b *testing.B, res *safe.Resources) *cagra.Index {
	ds, err := safe.DeviceMatrixFrom(res, safetest.Random(1, nRows, dim), nRows, dim)
	must(b, err)
	closeAtEnd(b, ds)
	p, err := cagra.DefaultIndexParams()
	must(b, err)
	idx, err := cagra.Build(res, ds, &p)
	must(b, err)
	closeAtEnd(b, idx)
	return idx
}

func benchDirect(b *testing.B) {
	res := resources(b)
	idx := cagraIndex(b, res)
	sp, err := cagra.DefaultSearchParams()
	must(b, err)
	q, err := safe.DeviceMatrixFrom(res, safetest.Random(2, 1, dim), 1, dim)
	must(b, err)
	closeAtEnd(b, q)
	n, err := safe.NewDeviceMatrix[uint32](res, 1, k)
	must(b, err)
	closeAtEnd(b, n)
	d, err := safe.NewDeviceMatrix[float32](res, 1, k)
	must(b, err)
	closeAtEnd(b, d)
	instant(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := idx.Search(res, &sp, q, n, d, nil); err != nil {
			b.Fatal(err)
		}
		if err := res.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchBatcher(b *testing.B, goroutines int) { benchBatcherWith(b, goroutines, func() {}) }

func benchBatcherWith(b *testing.B, goroutines int, setup func()) {
	res := resources(b)
	idx := cagraIndex(b, res)
	sp, err := cagra.DefaultSearchParams()
	must(b, err)
	s, err := batch.CAGRA(idx, &sp, nil)
	must(b, err)
	bt, err := batch.New[float32, uint32](s, batch.Options{MaxK: k})
	must(b, err)
	closeAtEnd(b, bt)
	must(b, bt.WarmUp())
	instant(b)
	setup()
	q := safetest.Random(2, 1, dim)
	b.ReportAllocs()
	before := bt.Stats()
	cpu0 := cpuTime()
	if goroutines == 1 {
		n, d := make([]uint32, k), make([]float32, k)
		for b.Loop() {
			if err := bt.SearchInto(context.Background(), q, n, d); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((goroutines + procs - 1) / procs)
		b.RunParallel(func(pb *testing.PB) {
			n, d := make([]uint32, k), make([]float32, k)
			for pb.Next() {
				if err := bt.SearchInto(context.Background(), q, n, d); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	st := bt.Stats()
	if batches := st.Batches - before.Batches; batches > 0 {
		b.ReportMetric(float64(st.Queries-before.Queries)/float64(batches), "queries/batch")
	}
}

func benchBatcherBruteForce(b *testing.B) {
	res := resources(b)
	ds, err := safe.DeviceMatrixFrom(res, safetest.Random(1, nRows, dim), nRows, dim)
	must(b, err)
	closeAtEnd(b, ds)
	idx, err := bruteforce.Build(res, ds, nil)
	must(b, err)
	closeAtEnd(b, idx)
	s, err := batch.BruteForce(idx, nil)
	must(b, err)
	bt, err := batch.New[float32, int64](s, batch.Options{MaxK: k})
	must(b, err)
	closeAtEnd(b, bt)
	instant(b)
	q := safetest.Random(2, 1, dim)
	n, d := make([]int64, k), make([]float32, k)
	b.ReportAllocs()
	for b.Loop() {
		if err := bt.SearchInto(context.Background(), q, n, d); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the process's user and system CPU time so far: what the host
// spends per request, whatever the wall time (the double's delays sleep).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
