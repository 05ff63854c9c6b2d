// Package stress runs the safe layer under mixed concurrent load: many
// goroutines searching shared indexes every way the API offers (Search,
// SearchSlice, Prepared runs, batched requests), extending one index,
// serializing and cancelling, then closing batchers in flight; a tiered
// and an HNSW index searched (filtered and not) while extended, then
// closed under their searches and built again. Every result is compared
// with a reference taken before the load, or checked for what any search
// of a changing index must satisfy; it fails on any wrong row, panic,
// hang or leak, and reports the operations done.
//
// `make test` runs it for a few seconds; `make stress STRESS_TIME=10m` for
// longer. On the double (the default) the copies are asynchronous and
// every call sleeps a random time, which widens races; with
// CUVS_TEST_LIBRARY it runs against that library as is.
package stress_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

var duration = flag.Duration("stress.time", 3*time.Second, "how long TestStress puts load on")

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows, dim, k = 2000, 16, 8
	nq           = 256 // queries: the first nq dataset rows
	extendRows   = 16  // rows added by one Extend
)

// ref is the reference answer of each query.
type ref struct {
	ids   [][]int64
	dists [][]float32
}

// check compares one result row with the reference of query q: the same ids
// with the same distances (to float32 rounding; brute force's ties may
// come in another order, so ids are compared as a set there).
func (r *ref) check(q int, ids []int64, dists []float32, ordered bool) error {
	want, wd := r.ids[q], r.dists[q]
	for i := range want {
		if math.Abs(float64(dists[i]-wd[i])) > 1e-4*(1+math.Abs(float64(wd[i]))) {
			return fmt.Errorf("query %d: distances %v, want %v (ids %v, want %v)", q, dists, wd, ids, want)
		}
		if ordered && ids[i] != want[i] {
			return fmt.Errorf("query %d: ids %v, want %v", q, ids, want)
		}
	}
	if !ordered {
		set := map[int64]bool{}
		for _, id := range want {
			set[id] = true
		}
		for _, id := range ids {
			if !set[id] {
				return fmt.Errorf("query %d: ids %v, want %v", q, ids, want)
			}
		}
	}
	return nil
}

// must is for the setup: it panics on an error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestStress(t *testing.T) {
	safetest.Check(t)
	if ctl := safetest.Control(); ctl != nil {
		ctl.SetCallJitter(30 * time.Microsecond)
		defer ctl.SetCallJitter(0)
	}
	data := safetest.Random(7, rows, dim)
	res := safetest.Resources(t)
	ds := must(safe.DeviceMatrixFrom(res, data, rows, dim))
	safetest.Close(t, ds)
	bf := must(bruteforce.Build(res, ds, nil))
	safetest.Close(t, bf)
	ip := must(cagra.DefaultIndexParams())
	ip.GraphDegree, ip.IntermediateGraphDegree = 32, 64
	cg := must(cagra.Build(res, ds, &ip))
	safetest.Close(t, cg)
	grow := must(cagra.Build(res, ds, &ip)) // extended while searched
	safetest.Close(t, grow)
	sp := must(cagra.DefaultSearchParams())
	sp.ITopKSize = 64

	// References: each query searched alone, before any load.
	var bfRef, cgRef ref
	for q := range nq {
		r := must(bruteforce.SearchSlice(res, bf, data[q*dim:(q+1)*dim], k, nil))
		ids, d := r.Row(0)
		bfRef.ids, bfRef.dists = append(bfRef.ids, ids), append(bfRef.dists, d)
		r = must(cagra.SearchSlice(res, cg, &sp, data[q*dim:(q+1)*dim], k, nil))
		ids, d = r.Row(0)
		cgRef.ids, cgRef.dists = append(cgRef.ids, ids), append(cgRef.dists, d)
	}
	cgBatch := must(batch.CAGRA(cg, &sp, nil))
	cgB := must(batch.New[float32, int64](cgBatch, batch.Options{MaxK: k, MaxBatch: 32, Slots: 3}))
	bfBatch := must(batch.BruteForce(bf, nil))
	bfB := must(batch.New[float32, int64](bfBatch, batch.Options{MaxK: k, MaxBatch: 32, Slots: 2}))

	var (
		ops      sync.Map // name → *atomic.Int64
		failures atomic.Int64
		stop     atomic.Bool
		last     atomic.Int64 // unix nanos of the last completed operation
	)
	start := time.Now()
	var first sync.Map // name → time of the first completion since start
	count := func(name string) {
		c, loaded := ops.LoadOrStore(name, new(atomic.Int64))
		if !loaded {
			first.LoadOrStore(name, time.Since(start))
		}
		c.(*atomic.Int64).Add(1)
		last.Store(time.Now().UnixNano())
	}
	var lat sync.Map // name → *latency
	timed := func(name string, since time.Time) {
		l, _ := lat.LoadOrStore(name, new(latency))
		l.(*latency).add(time.Since(since))
	}
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 20 {
			t.Errorf(format, args...)
		}
	}
	last.Store(time.Now().UnixNano())
	watchdog := time.NewTicker(time.Second)
	defer watchdog.Stop()
	go func() {
		for range watchdog.C {
			if time.Since(time.Unix(0, last.Load())) > 60*time.Second {
				_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
				panic("stress: no operation completed for 60 s (a hang)")
			}
		}
	}()

	var wg sync.WaitGroup
	worker := func(seed uint64, body func(rng *rand.Rand, res *safe.Resources)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wres, err := safe.NewResources()
			if err != nil {
				fail("NewResources: %v", err)
				return
			}
			defer wres.Close()
			rng := rand.New(rand.NewPCG(seed, 1))
			for !stop.Load() {
				body(rng, wres)
			}
		}()
	}
	batchRows := func(rng *rand.Rand) (q0, n int) {
		n = 1 + rng.IntN(16)
		return rng.IntN(nq - n + 1), n
	}

	// Search with device buffers, then one copy out.
	for w := range 3 {
		worker(uint64(100+w), func(rng *rand.Rand, wres *safe.Resources) {
			q0, n := batchRows(rng)
			qs, err := safe.DeviceMatrixFrom(wres, data[q0*dim:(q0+n)*dim], n, dim)
			if err != nil {
				fail("queries: %v", err)
				return
			}
			defer qs.Close()
			nb, _ := safe.NewDeviceMatrix[int64](wres, n, k)
			dd, _ := safe.NewDeviceMatrix[float32](wres, n, k)
			defer nb.Close()
			defer dd.Close()
			exact := rng.IntN(2) == 0
			t0 := time.Now()
			if exact {
				err = bf.Search(wres, qs, nb, dd, nil)
			} else {
				err = cg.Search(wres, &sp, qs, nb, dd, nil)
			}
			if err != nil {
				fail("Search: %v", err)
				return
			}
			ids, err1 := nb.ToHost(wres)
			ds, err2 := dd.ToHost(wres)
			if err := errors.Join(err1, err2); err != nil {
				fail("ToHost: %v", err)
				return
			}
			if !exact {
				timed("cagra Search+ToHost", t0)
			}
			r := &cgRef
			if exact {
				r = &bfRef
			}
			for i := range n {
				if err := r.check(q0+i, ids[i*k:(i+1)*k], ds[i*k:(i+1)*k], !exact); err != nil {
					fail("Search (exact %v, rows %d of %d): %v", exact, i, n, err)
				}
			}
			count("search")
		})
	}
	// SearchSlice.
	for w := range 2 {
		worker(uint64(200+w), func(rng *rand.Rand, wres *safe.Resources) {
			q0, n := batchRows(rng)
			exact := rng.IntN(2) == 0
			var r *safe.Results
			var err error
			if exact {
				r, err = bruteforce.SearchSlice(wres, bf, data[q0*dim:(q0+n)*dim], k, nil)
			} else {
				r, err = cagra.SearchSlice(wres, cg, &sp, data[q0*dim:(q0+n)*dim], k, nil)
			}
			if err != nil {
				fail("SearchSlice: %v", err)
				return
			}
			rf := &cgRef
			if exact {
				rf = &bfRef
			}
			for i := range n {
				ids, d := r.Row(i)
				if err := rf.check(q0+i, ids, d, !exact); err != nil {
					fail("SearchSlice (exact %v): %v", exact, err)
				}
			}
			count("slice")
		})
	}
	// Prepared CAGRA runs, fresh queries each time.
	worker(300, func(rng *rand.Rand, wres *safe.Resources) {
		const n = 8
		qs, _ := safe.NewDeviceMatrix[float32](wres, n, dim)
		nb, _ := safe.NewDeviceMatrix[int64](wres, n, k)
		dd, _ := safe.NewDeviceMatrix[float32](wres, n, k)
		defer qs.Close()
		defer nb.Close()
		defer dd.Close()
		p, err := cg.Prepare(&sp, qs, nb, dd, nil)
		if err != nil {
			fail("Prepare: %v", err)
			return
		}
		defer p.Close()
		ids, dists := make([]int64, n*k), make([]float32, n*k)
		hq := must(safe.NewDeviceMatrix[int64](wres, n, k)) // Results' target: device, then ToHost
		defer hq.Close()
		hd := must(safe.NewDeviceMatrix[float32](wres, n, k))
		defer hd.Close()
		for range 10 {
			q0 := rng.IntN(nq - n + 1)
			src, err := safe.DeviceMatrixFrom(wres, data[q0*dim:(q0+n)*dim], n, dim)
			if err != nil {
				fail("queries: %v", err)
				return
			}
			err = errors.Join(p.SetQueries(wres, src), p.Run(wres), p.Results(wres, hq, hd), src.Close())
			if err == nil {
				err = errors.Join(hq.CopyToHost(wres, ids), hd.CopyToHost(wres, dists))
			}
			if err != nil {
				fail("Prepared: %v", err)
				return
			}
			for i := range n {
				if err := cgRef.check(q0+i, ids[i*k:(i+1)*k], dists[i*k:(i+1)*k], true); err != nil {
					fail("Prepared: %v", err)
				}
			}
			count("prepared")
		}
	})
	// Batched requests, some cancelled.
	var closing atomic.Bool
	for w := range 8 {
		worker(uint64(400+w), func(rng *rand.Rand, _ *safe.Resources) {
			q := rng.IntN(nq)
			b, r, ordered := cgB, &cgRef, true
			if rng.IntN(2) == 0 {
				b, r, ordered = bfB, &bfRef, false
			}
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if rng.IntN(4) == 0 {
				ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(300))*time.Microsecond)
			}
			got, err := b.Search(ctx, data[q*dim:(q+1)*dim], k)
			cancel()
			switch {
			case err == nil:
				if err := r.check(q, got.Neighbors, got.Distances, ordered); err != nil {
					fail("batch: %v", err)
				}
				count("batch")
			case errors.Is(err, context.DeadlineExceeded):
				count("batch cancelled")
			case errors.Is(err, safe.ErrClosed) && closing.Load():
				count("batch closed")
				time.Sleep(100 * time.Microsecond)
			default:
				fail("batch: %v", err)
			}
		})
	}
	// Extend one index while others search it: no search fails, every
	// Extend succeeds, ids stay below the row count.
	worker(500, func(rng *rand.Rand, wres *safe.Resources) {
		if grow.Rows()+extendRows > 6*rows {
			time.Sleep(time.Millisecond)
			return
		}
		add := safetest.Random(rng.Uint64(), extendRows, dim)
		m, err := safe.DeviceMatrixFrom(wres, add, extendRows, dim)
		if err != nil {
			fail("extend rows: %v", err)
			return
		}
		defer m.Close()
		if err := grow.Extend(wres, m, nil); err != nil {
			fail("Extend: %v", err)
			return
		}
		count("extend")
	})
	for w := range 2 {
		worker(uint64(600+w), func(rng *rand.Rand, wres *safe.Resources) {
			q0, n := batchRows(rng)
			before := grow.Rows()
			r, err := cagra.SearchSlice(wres, grow, &sp, data[q0*dim:(q0+n)*dim], k, nil)
			if err != nil {
				fail("search while extending: %v", err)
				return
			}
			after := grow.Rows()
			for i := range n {
				ids, d := r.Row(i)
				for j, id := range ids {
					if id < 0 || id >= int64(after) || (j > 0 && d[j] < d[j-1]) || math.IsNaN(float64(d[j])) {
						fail("search while extending (%d → %d rows): row %d: %v %v", before, after, i, ids, d)
						break
					}
				}
			}
			count("search while extending")
		})
	}
	// Serialize while searched; now and then read it back and search it.
	worker(700, func(rng *rand.Rand, wres *safe.Resources) {
		var buf bytes.Buffer
		if _, err := cg.SerializeTo(wres, &buf); err != nil {
			fail("SerializeTo: %v", err)
			return
		}
		count("serialize")
		if rng.IntN(4) != 0 {
			return
		}
		back, err := cagra.DeserializeFrom(wres, &buf)
		if err != nil {
			fail("DeserializeFrom: %v", err)
			return
		}
		defer back.Close()
		q := rng.IntN(nq)
		r, err := cagra.SearchSlice(wres, back, &sp, data[q*dim:(q+1)*dim], k, nil)
		if err != nil {
			fail("search after DeserializeFrom: %v", err)
			return
		}
		ids, d := r.Row(0)
		if err := cgRef.check(q, ids, d, true); err != nil {
			fail("deserialized: %v", err)
		}
		count("round trip")
	})

	mutating(t, worker, count, timed, fail, data)

	time.Sleep(*duration)
	// Close the batchers with requests in flight, then stop everything.
	closing.Store(true)
	if err := errors.Join(cgB.Close(), bfB.Close()); err != nil {
		t.Error(err)
	}
	stop.Store(true)
	wg.Wait()
	var report []string
	total := int64(0)
	ops.Range(func(k, v any) bool {
		n := v.(*atomic.Int64).Load()
		total += n
		report = append(report, fmt.Sprintf("%s %d", k, n))
		return true
	})
	t.Logf("stress: %d operations in %v (%v), %d wrong", total, *duration, report, failures.Load())
	var lats []string
	lat.Range(func(k, v any) bool {
		lats = append(lats, fmt.Sprintf("%s %s", k, v.(*latency)))
		return true
	})
	sort.Strings(lats)
	t.Logf("stress latencies (calls, mean, max): %s", strings.Join(lats, "; "))
	var firsts []string
	first.Range(func(k, v any) bool {
		firsts = append(firsts, fmt.Sprintf("%s %v", k, v.(time.Duration).Round(time.Millisecond)))
		return true
	})
	sort.Strings(firsts)
	t.Logf("stress first completions: %s", strings.Join(firsts, "; "))
	if failures.Load() > 0 {
		t.Errorf("%d operations failed or gave wrong rows", failures.Load())
	}
	done := func(name string) int64 {
		if c, ok := ops.Load(name); ok {
			return c.(*atomic.Int64).Load()
		}
		return 0
	}
	for _, name := range []string{"search", "slice", "prepared", "batch", "extend", "search while extending", "serialize",
		"tiered extend", "tiered search", "tiered filtered", "hnsw extend", "hnsw search", "hnsw filtered"} {
		if done(name) == 0 {
			t.Errorf("no %q operation completed", name)
		}
	}
	// A rebuild is due once an index has grown from mutBuilt to mutCap
	// rows: required only where that many extends completed (a short run
	// on a real GPU completed 27 tiered extends in 3 s, of the 50 due).
	due := int64((mutCap - mutBuilt + extendRows - 1) / extendRows)
	for _, kind := range []string{"tiered", "hnsw"} {
		if done(kind+" extend") > due && done(kind+" rebuilt") == 0 {
			t.Errorf("%d %s extends and no %q operation completed", done(kind+" extend"), kind, kind+" rebuilt")
		}
	}
}

// Rows of the tiered and HNSW indexes below: built over the first
// mutBuilt dataset rows, extended extendRows at a time up to mutCap, then
// closed under their searches and built again.
const (
	mutBuilt = 600
	mutCap   = 1400
)

// evenIDs is a bitset letting the even ids of n rows through.
func evenIDs(n int) []uint32 {
	w := make([]uint32, (n+31)/32)
	for i := 0; i < n; i += 2 {
		w[i/32] |= 1 << (i % 32)
	}
	return w
}

// checkRows checks what any search of an index of rows before..after
// (between the search's start and end) must return: ids in range (even
// ones with the even-ids filter), distances ascending and not NaN. unset
// is the id of an unfilled slot.
func checkRows(ids []int64, d []float32, after int, even bool, unset int64) error {
	for j, id := range ids {
		if id == unset {
			continue
		}
		if id < 0 || id >= int64(after) || (even && id%2 != 0) || math.IsNaN(float64(d[j])) || (j > 0 && ids[j-1] != unset && d[j] < d[j-1]) {
			return fmt.Errorf("ids %v distances %v (%d rows, even only %v)", ids, d, after, even)
		}
	}
	return nil
}

// mutating adds the tiered and HNSW load: per index, one worker extends it
// (rows from data, so ids are dataset rows), closes it once it holds
// mutCap rows and builds it again, while two search it, one of them with
// an even-ids filter (a safe.Filter rebuilt as the row count changes for
// tiered; SearchFiltered's host bitset for HNSW). A search may find the
// index closed (counted, retried with the next one); a tiered filter is
// refused while both tiers hold rows, or when made for another row count
// (cuVS would test the fresh rows against the wrong bits): counted too.
// latency sums one kind of call's durations.
type latency struct {
	mu       sync.Mutex
	n        int64
	sum, max time.Duration
}

func (l *latency) add(d time.Duration) {
	l.mu.Lock()
	l.n, l.sum, l.max = l.n+1, l.sum+d, max(l.max, d)
	l.mu.Unlock()
}

func (l *latency) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d %v %v", l.n, (l.sum / time.Duration(l.n)).Round(time.Microsecond), l.max.Round(time.Microsecond))
}

func mutating(t *testing.T, worker func(uint64, func(*rand.Rand, *safe.Resources)), count func(string), timed func(string, time.Time), fail func(string, ...any), data []float32) {
	// tiered: CAGRA backend, every row in the brute-force tier until the
	// tier exceeds MinANNRows (1000), then rebuilt over all of them.
	tp := must(tiered.DefaultIndexParams())
	tp.MinANNRows, tp.CreateANNIndexOnExtend = 1000, true
	tp.CAGRA = tiered.CAGRAParams{GraphDegree: 16, IntermediateGraphDegree: 32}
	buildTiered := func(res *safe.Resources) (*tiered.Index, error) {
		ds, err := safe.DeviceMatrixFrom(res, data[:mutBuilt*dim], mutBuilt, dim)
		if err != nil {
			return nil, err
		}
		defer ds.Close()
		return tiered.Build(res, ds, &tp)
	}
	var tg atomic.Pointer[tiered.Index]
	tg.Store(must(buildTiered(safetest.Resources(t))))
	t.Cleanup(func() { _ = tg.Load().Close() })
	worker(800, func(rng *rand.Rand, wres *safe.Resources) {
		idx := tg.Load()
		n := idx.Rows()
		if n+extendRows > mutCap {
			next, err := buildTiered(wres)
			if err != nil {
				fail("tiered.Build: %v", err)
				return
			}
			tg.Store(next)
			if err := idx.Close(); err != nil { // under the searches
				fail("tiered Close: %v", err)
			}
			count("tiered rebuilt")
			return
		}
		m, err := safe.DeviceMatrixFrom(wres, data[n*dim:(n+extendRows)*dim], extendRows, dim)
		if err != nil {
			fail("tiered extend rows: %v", err)
			return
		}
		defer m.Close()
		t0 := time.Now()
		err = idx.Extend(wres, m)
		timed("tiered Extend", t0)
		if err != nil && !(errors.Is(err, safe.ErrClosed) && tg.Load() != idx) {
			fail("tiered Extend: %v", err)
			return
		}
		count("tiered extend")
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
	})
	for w := range 2 {
		filtered := w == 1
		var f *safe.Filter // this worker's, for f.Rows() rows; closed after the workers
		t.Cleanup(func() { _ = f.Close() })
		worker(uint64(810+w), func(rng *rand.Rand, wres *safe.Resources) {
			idx := tg.Load()
			rows := idx.Rows()
			if filtered && (f == nil || f.Rows() != rows) {
				_ = f.Close()
				var err error
				if f, err = safe.NewBitsetFilter(wres, rows, evenIDs(rows)); err != nil {
					fail("filter: %v", err)
					return
				}
			}
			var ff *safe.Filter
			if filtered {
				ff = f
			}
			q0 := rng.IntN(mutBuilt - 8)
			n := 1 + rng.IntN(8)
			qs, err := safe.DeviceMatrixFrom(wres, data[q0*dim:(q0+n)*dim], n, dim)
			if err != nil {
				fail("queries: %v", err)
				return
			}
			defer qs.Close()
			nb := must(safe.NewDeviceMatrix[int64](wres, n, k))
			defer nb.Close()
			dd := must(safe.NewDeviceMatrix[float32](wres, n, k))
			defer dd.Close()
			t0 := time.Now()
			err = idx.Search(wres, nil, qs, nb, dd, ff)
			timed("tiered Search", t0)
			var ae *safe.ArgError
			switch {
			case err == nil:
			case errors.Is(err, safe.ErrClosed):
				count("tiered closed")
				return
			case filtered && errors.As(err, &ae) && ae.Arg == "filter":
				count("tiered filter refused")
				return
			default:
				fail("tiered Search: %v", err)
				return
			}
			ids, err1 := nb.ToHost(wres)
			ds, err2 := dd.ToHost(wres)
			if err := errors.Join(err1, err2); err != nil {
				fail("tiered ToHost: %v", err)
				return
			}
			if !filtered {
				timed("tiered Search+ToHost", t0)
			}
			after := idx.Rows()
			if after == 0 { // closed since the search (a closed index's getters are 0)
				after = mutCap
			}
			for i := range n {
				if err := checkRows(ids[i*k:(i+1)*k], ds[i*k:(i+1)*k], after, filtered, safe.SentinelID64); err != nil {
					fail("tiered Search (filtered %v), query %d: %v", filtered, q0+i, err)
				}
			}
			if filtered {
				count("tiered filtered")
			} else {
				count("tiered search")
			}
		})
	}

	// HNSW: host memory, the CPU hierarchy (Extend needs it).
	hp := must(hnsw.DefaultIndexParams())
	hp.Hierarchy, hp.M, hp.EfConstruction = hnsw.HierarchyCPU, 8, 64
	buildHNSW := func(res *safe.Resources) (*hnsw.Index, error) {
		hm, err := dlpack.NewHostMatrix(data[:mutBuilt*dim], mutBuilt, dim)
		if err != nil {
			return nil, err
		}
		return hnsw.Build(res, hm, &hp)
	}
	var hg atomic.Pointer[hnsw.Index]
	hg.Store(must(buildHNSW(safetest.Resources(t))))
	t.Cleanup(func() { _ = hg.Load().Close() })
	worker(900, func(rng *rand.Rand, wres *safe.Resources) {
		idx := hg.Load()
		n := idx.Rows()
		if n+extendRows > mutCap {
			next, err := buildHNSW(wres)
			if err != nil {
				fail("hnsw.Build: %v", err)
				return
			}
			hg.Store(next)
			if err := idx.Close(); err != nil {
				fail("hnsw Close: %v", err)
			}
			count("hnsw rebuilt")
			return
		}
		add := append([]float32(nil), data[n*dim:(n+extendRows)*dim]...)
		hm := must(dlpack.NewHostMatrix(add, extendRows, dim))
		t0 := time.Now()
		err := idx.Extend(wres, hm, nil)
		timed("hnsw Extend", t0)
		if err != nil && !(errors.Is(err, safe.ErrClosed) && hg.Load() != idx) {
			fail("hnsw Extend: %v", err)
			return
		}
		count("hnsw extend")
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
	})
	for w := range 2 {
		filtered := w == 1
		worker(uint64(910+w), func(rng *rand.Rand, wres *safe.Resources) {
			idx := hg.Load()
			q0 := rng.IntN(mutBuilt - 8)
			n := 1 + rng.IntN(8)
			qs := append([]float32(nil), data[q0*dim:(q0+n)*dim]...)
			nb := make([]uint64, n*k)
			ds := make([]float32, n*k)
			var err error
			if filtered {
				rows := idx.Rows()
				var f *safe.Filter
				if f, err = safe.NewBitsetFilter(wres, rows, evenIDs(rows)); err == nil {
					var r *safe.Results
					if r, err = hnsw.SearchSlice(wres, idx, &hnsw.SearchParams{Ef: 64}, qs, k, f); err == nil {
						for i, id := range r.Neighbors { // the unfiltered branch's uint64 ids
							nb[i] = uint64(id)
							if id == safe.SentinelID64 {
								nb[i] = safe.SentinelID64U
							}
						}
						copy(ds, r.Distances)
					}
					_ = f.Close()
				}
			} else {
				qm := must(dlpack.NewHostMatrix(qs, n, dim))
				nm := must(dlpack.NewHostMatrix(nb, n, k))
				dm := must(dlpack.NewHostMatrix(ds, n, k))
				t0 := time.Now()
				err = idx.Search(wres, &hnsw.SearchParams{Ef: 64}, qm, nm, dm)
				timed("hnsw Search", t0)
			}
			var ae *safe.ArgError
			switch {
			case err == nil:
			case errors.Is(err, safe.ErrClosed):
				count("hnsw closed")
				return
			case filtered && errors.As(err, &ae) && (ae.Arg == "allowed" || ae.Arg == "filter"):
				count("hnsw filter stale") // extended between Rows and the search
				return
			default:
				fail("hnsw Search (filtered %v): %v", filtered, err)
				return
			}
			after := idx.Rows()
			if after == 0 { // closed since the search (a closed index's getters are 0)
				after = mutCap
			}
			ids := make([]int64, len(nb))
			for i, id := range nb {
				ids[i] = int64(id)
				if id == safe.SentinelID64U {
					ids[i] = -2
				}
			}
			for i := range n {
				row := ids[i*k : (i+1)*k]
				if err := checkRows(row, ds[i*k:(i+1)*k], after, filtered, -2); err != nil {
					fail("hnsw Search (filtered %v), query %d: %v", filtered, q0+i, err)
				}
				if !filtered && row[0] != int64(q0+i) && ds[i*k] > 1e-4 {
					count("hnsw self missed") // approximate: reported, not a failure
				}
			}
			if filtered {
				count("hnsw filtered")
			} else {
				count("hnsw search")
			}
		})
	}
}
