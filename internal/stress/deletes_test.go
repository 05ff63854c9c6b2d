package stress_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

var deletesTime = flag.Duration("stress.deletes", 1500*time.Millisecond, "how long TestTieredDeletes puts load on (make test-slow: minutes)")

// TestTieredDeletes deletes rows of a tiered index (CAGRA over the built
// rows, a fresh tier, the ANN rebuild once the tier passes MinANNRows)
// while it is searched every way (Search, SearchSlice, a filter over
// ids), extended, compacted and serialized. A search must never return a
// row whose Delete returned before the search began, must fill k (the
// live rows far outnumber k), and a filtered one only allowed ids; an
// index read back from a stream never returns a row deleted before the
// stream was written. make test runs it briefly; make test-slow for
// minutes (-stress.deletes).
func TestTieredDeletes(t *testing.T) {
	safetest.Check(t)
	if ctl := safetest.Control(); ctl != nil {
		ctl.SetCallJitter(30 * time.Microsecond)
		defer ctl.SetCallJitter(0)
	}
	const built, most, kk = 1200, 2600, 8
	data := safetest.Random(61, most, dim)
	res := safetest.Resources(t)
	tp := must(tiered.DefaultIndexParams())
	tp.MinANNRows, tp.CreateANNIndexOnExtend = 1000, true
	tp.CAGRA = tiered.CAGRAParams{GraphDegree: 16, IntermediateGraphDegree: 32}
	ds := must(safe.DeviceMatrixFrom(res, data[:built*dim], built, dim))
	idx := must(tiered.Build(res, ds, &tp))
	_ = ds.Close()
	safetest.Close(t, idx)
	sp := &tiered.SearchParams{CAGRA: tiered.CAGRASearchParams{ITopKSize: 64}}

	// deletedAt[id]: the sequence number of the Delete that deleted it
	// (0: live); seq: Deletes returned.
	var seq atomic.Int64
	deletedAt := make([]atomic.Int64, most)
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		failures atomic.Int64
		ops      sync.Map
	)
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	count := func(name string) {
		c, _ := ops.LoadOrStore(name, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
	}
	// check checks one query's result: ids of a search that began after
	// seq reached before, of an index of at most rows ids.
	check := func(what string, ids []int64, d []float32, before int64, rows int, even bool) {
		for j, id := range ids {
			switch {
			case id == safe.SentinelID64:
				fail("%s: slot %d unfilled (ids %v)", what, j, ids)
			case id < 0 || id >= int64(rows):
				fail("%s: id %d of %d rows", what, id, rows)
			case even && id%2 != 0:
				fail("%s: id %d not allowed", what, id)
			case deletedAt[id].Load() != 0 && deletedAt[id].Load() <= before:
				fail("%s: id %d deleted (Delete %d) before the search (after Delete %d) returned", what, id, deletedAt[id].Load(), before)
			case math.IsNaN(float64(d[j])) || (j > 0 && d[j] < d[j-1]) || slices.Contains(ids[:j], id):
				fail("%s: ids %v distances %v", what, ids, d)
			default:
				continue
			}
			return
		}
	}
	worker := func(seed uint64, body func(*rand.Rand, *safe.Resources)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := safe.NewResources()
			if err != nil {
				fail("NewResources: %v", err)
				return
			}
			defer r.Close()
			rng := rand.New(rand.NewPCG(seed, 3))
			for !stop.Load() {
				body(rng, r)
			}
		}()
	}

	// Delete: 1 to 8 random ids a call, up to 40% of the rows
	var dead atomic.Int64
	worker(1, func(rng *rand.Rand, _ *safe.Resources) {
		rows := idx.Rows()
		if dead.Load() > int64(rows)*4/10 {
			time.Sleep(time.Millisecond)
			return
		}
		ids := make([]int64, 1+rng.IntN(8))
		for i := range ids {
			ids[i] = int64(rng.IntN(rows))
		}
		n, err := idx.Delete(ids)
		if err != nil {
			fail("Delete: %v", err)
			return
		}
		s := seq.Load() + 1
		for _, id := range ids {
			if deletedAt[id].CompareAndSwap(0, s) {
				dead.Add(1)
			}
		}
		seq.Store(s)
		count("delete")
		if n > 0 {
			count("deleted rows")
		}
	})
	// Extend 16 rows at a time up to most rows (the ANN rebuild, which
	// compacts, once the fresh tier passes 1000 rows), and Compact
	worker(2, func(rng *rand.Rand, r *safe.Resources) {
		rows := idx.Rows()
		if rows+16 > most || rng.IntN(8) == 0 {
			if err := idx.Compact(r); err != nil {
				fail("Compact: %v", err)
			}
			count("compact")
			time.Sleep(20 * time.Millisecond)
			return
		}
		m, err := safe.DeviceMatrixFrom(r, data[rows*dim:(rows+16)*dim], 16, dim)
		if err != nil {
			fail("extend rows: %v", err)
			return
		}
		defer m.Close()
		ann := idx.ANNRows()
		if err := idx.Extend(r, m); err != nil {
			fail("Extend: %v", err)
			return
		}
		count("extend")
		if idx.ANNRows() > ann+16 {
			count("rebuild")
		}
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
	})
	// Searches: device buffers, Go memory, a filter over ids
	for w := range 3 {
		worker(uint64(10+w), func(rng *rand.Rand, r *safe.Resources) {
			n := 1 + rng.IntN(8)
			q0 := rng.IntN(built - n)
			qs := data[q0*dim : (q0+n)*dim]
			before := seq.Load()
			var ids []int64
			var d []float32
			var err error
			even := false
			switch w {
			case 0:
				var qm *safe.DeviceMatrix[float32]
				if qm, err = safe.DeviceMatrixFrom(r, qs, n, dim); err != nil {
					fail("queries: %v", err)
					return
				}
				defer qm.Close()
				nb := must(safe.NewDeviceMatrix[int64](r, n, kk))
				defer nb.Close()
				dd := must(safe.NewDeviceMatrix[float32](r, n, kk))
				defer dd.Close()
				if err = idx.Search(r, sp, qm, nb, dd, nil); err == nil {
					ids = must(nb.ToHost(r))
					d = must(dd.ToHost(r))
				}
			case 1, 2:
				var f *safe.Filter
				if w == 2 {
					even = true
					rows := idx.Rows()
					if f, err = safe.NewBitsetFilter(r, rows, evenIDs(rows)); err != nil {
						fail("filter: %v", err)
						return
					}
					defer f.Close()
				}
				var out *safe.Results
				if out, err = tiered.SearchSlice(r, idx, sp, qs, kk, f); err == nil {
					ids, d = out.Neighbors, out.Distances
				}
			}
			var ae *safe.ArgError
			switch {
			case err == nil:
			case even && errors.As(err, &ae) && ae.Arg == "filter":
				count("filter stale") // extended between Rows and the search
				return
			default:
				fail("search %d: %v", w, err)
				return
			}
			rows := idx.Rows()
			for i := range n {
				check(fmt.Sprintf("search %d, query %d", w, q0+i), ids[i*kk:(i+1)*kk], d[i*kk:(i+1)*kk], before, rows, even)
			}
			count(fmt.Sprintf("search %d", w))
		})
	}
	// SerializeTo beside the load; the copy read back never returns a row
	// deleted before the stream was written
	worker(20, func(rng *rand.Rand, r *safe.Resources) {
		before := seq.Load()
		var buf bytes.Buffer
		if _, err := idx.SerializeTo(r, &buf); err != nil {
			fail("SerializeTo: %v", err)
			return
		}
		back, err := tiered.DeserializeFrom(r, &buf)
		if err != nil {
			fail("DeserializeFrom: %v", err)
			return
		}
		defer back.Close()
		q0 := rng.IntN(built - 16)
		out, err := tiered.SearchSlice(r, back, sp, data[q0*dim:(q0+16)*dim], kk, nil)
		if err != nil {
			fail("search the copy: %v", err)
			return
		}
		for i := range 16 {
			check(fmt.Sprintf("read back, query %d", q0+i), out.Neighbors[i*kk:(i+1)*kk], out.Distances[i*kk:(i+1)*kk], before, back.Rows(), false)
		}
		count("round trip")
		time.Sleep(50 * time.Millisecond)
	})

	time.Sleep(*deletesTime)
	// Every operation must have completed at least once: on a real GPU the
	// first calls of each kind load their kernels (an H200 completed one
	// Extend and no Compact in 1.5 s), so the load runs on, up to a minute,
	// until each has.
	names := []string{"delete", "extend", "compact", "search 0", "search 1", "search 2", "round trip"}
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		all := true
		for _, name := range names {
			if c, ok := ops.Load(name); !ok || c.(*atomic.Int64).Load() == 0 {
				all = false
			}
		}
		if all {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	var report []string
	ops.Range(func(k, v any) bool {
		report = append(report, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	slices.Sort(report)
	t.Logf("tiered deletes in %v: %v", *deletesTime, report)
	for _, name := range names {
		if c, ok := ops.Load(name); !ok || c.(*atomic.Int64).Load() == 0 {
			t.Errorf("no %q operation completed", name)
		}
	}
	// the counts, and no deleted row left after a last Compact
	if want := idx.Rows() - int(dead.Load()); idx.Live() != want {
		t.Errorf("live %d, want %d (%d rows, %d deleted)", idx.Live(), want, idx.Rows(), dead.Load())
	}
	must(0, idx.Compact(res))
	if idx.Stored() != idx.Live() {
		t.Errorf("after Compact: stored %d, live %d", idx.Stored(), idx.Live())
	}
	var gone []float32
	var goneIDs []int64
	for id := range idx.Rows() {
		if deletedAt[id].Load() != 0 && len(goneIDs) < 64 {
			gone = append(gone, data[id*dim:(id+1)*dim]...)
			goneIDs = append(goneIDs, int64(id))
		}
	}
	if len(goneIDs) > 0 {
		out := must(tiered.SearchSlice(res, idx, sp, gone, kk, nil))
		for _, id := range out.Neighbors {
			if slices.Contains(goneIDs, id) {
				t.Errorf("deleted id %d returned after the load", id)
			}
		}
	}
}
