package batch

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
)

// TestBitmapAssembly: orBits and orOnes write each query's row of bits at
// its offset, aligned to a word or not, as setting the bits one by one
// does, and leave the neighbours' bits alone.
func TestBitmapAssembly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, rows := range []int64{1, 5, 31, 32, 33, 64, 100, 400, 1000} {
		const queries = 7
		words := int((queries*rows + 31) / 32)
		got, want := make([]uint32, words), make([]uint32, words)
		for q := range int64(queries) {
			set := make([]uint32, (rows+31)/32)
			ones := q%3 == 2
			for r := range rows {
				if ones || rng.IntN(2) == 0 {
					set[r/32] |= 1 << (r % 32)
					b := q*rows + r
					want[b/32] |= 1 << (b % 32)
				}
			}
			if ones {
				orOnes(got, q*rows, rows)
			} else {
				orBits(got, q*rows, set, rows)
			}
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%d rows: word %d is %#x, want %#x", rows, i, got[i], want[i])
			}
		}
	}
}

// gateM is a gateF that keeps the brute-force Searcher's bitmap and scan
// classes: its batches of different filters are mixed.
type gateM struct{ *gateF }

func (g *gateM) bitmapRows() int64 { return g.fs.(bitmapper).bitmapRows() }

// scan forwards the Searcher's scan classes: a brute-force request may mix.
func (g *gateM) scan(f *safe.Filter, maxK int) (bool, bool) {
	return g.fs.(scanner).scan(f, maxK)
}

// TestTenantsMixedBatch holds one batch on the GPU while brute-force
// requests of three filters and none queue (one of two rows, one for fewer
// neighbours): the next batch takes them all, in order, as one search with
// a bitmap, and each gets its direct filtered search's results. A request
// cancelled while the batch searches leaves the others' results right, and
// its filter stays unclosable until the search is over.
func TestTenantsMixedBatch(t *testing.T) {
	f := newFixture(t)
	ts := tenants(t, f.res, nRows, 3, 0.5, 11)
	g := &gateM{newGateF(f.s)}
	b, err := New[float32, int64](g, Options{MaxK: maxK, MaxBatch: 32, Slots: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	if b.b.mixedRows != 32 {
		t.Fatalf("mixed batches of %d rows, want MaxBatch 32", b.b.mixedRows)
	}
	ctx := context.Background()
	blocker := start(ctx, b, safetest.Random(700, 1, dim), maxK)
	<-g.filters
	<-g.entered
	type req struct {
		ten, rows, k int
	}
	reqs := []req{{0, 1, maxK}, {1, 1, maxK}, {-1, 1, maxK}, {0, 2, maxK}, {2, 1, 3}}
	var calls []*call
	cctx, cancel := context.WithCancel(ctx)
	total := 0
	for i, r := range reqs {
		var fl *safe.Filter
		if r.ten >= 0 {
			fl = ts[r.ten].f
		}
		c := ctx
		if i == len(reqs)-1 {
			c = cctx
		}
		calls = append(calls, startFiltered(c, b, fl, safetest.Random(uint64(710+i), r.rows, dim), r.k))
		total += r.rows
		waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == i+1 })
	}
	g.release()
	<-blocker.done
	bm := <-g.filters
	if bm == nil || bm.Kind() != safe.Bitmap || bm.Queries() != total {
		t.Fatalf("the second batch's filter: %v, want a bitmap for %d queries", bm, total)
	}
	if n := <-g.entered; n != total {
		t.Fatalf("the mixed batch holds %d rows, want %d", n, total)
	}
	cancel()
	last := calls[len(calls)-1]
	<-last.done
	if !errors.Is(last.err, context.Canceled) {
		t.Fatalf("the cancelled request: %v", last.err)
	}
	if err := ts[2].f.Close(); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("Close of a filter whose cancelled request's batch searches: %v, want dlpack.ErrBorrowed", err)
	}
	g.release()
	for i, c := range calls[:len(calls)-1] {
		<-c.done
		if c.err != nil {
			t.Fatal(c.err)
		}
		var fl *safe.Filter
		if reqs[i].ten >= 0 {
			fl = ts[reqs[i].ten].f
		}
		wn, wd := f.directFiltered(t, c.q, reqs[i].k, fl)
		if !same(c.n, wn, c.d, wd) {
			t.Errorf("request %d (tenant %d): got %v, want %v", i, reqs[i].ten, c.n, wn)
		}
	}
	waitFor(b, func(in *batcher[float32, int64]) bool { return in.running == 0 })
	if st := b.Stats(); st.Batches != 2 || st.Mixed != 1 || st.Filtered != 1 {
		t.Errorf("stats: %d batches, %d mixed, %d filtered: want 2, 1, 1", st.Batches, st.Mixed, st.Filtered)
	}
}

// TestMixedOnlyWhenMixed: requests of one filter make an ordinary bitset
// batch, and a Searcher made with a filter, or an index too large for a
// slot's bitmap, never mixes.
func TestMixedOnlyWhenMixed(t *testing.T) {
	f := newFixture(t)
	ts := tenants(t, f.res, nRows, 1, 0.5, 12)
	g := &gateM{newGateF(f.s)}
	b, err := New[float32, int64](g, Options{MaxK: maxK, MaxBatch: 32, Slots: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	blocker := start(ctx, b, safetest.Random(800, 1, dim), maxK)
	<-g.filters
	<-g.entered
	var calls []*call
	for i := range 3 {
		calls = append(calls, startFiltered(ctx, b, ts[0].f, safetest.Random(uint64(810+i), 1, dim), maxK))
		waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == i+1 })
	}
	g.release()
	<-blocker.done
	if got := <-g.filters; got != ts[0].f {
		t.Fatalf("one filter's batch searched with %v, want the filter itself", got)
	}
	<-g.entered
	g.release()
	for _, c := range calls {
		<-c.done
		if c.err != nil {
			t.Fatal(c.err)
		}
	}
	if st := b.Stats(); st.Mixed != 0 {
		t.Errorf("%d mixed batches, want 0", st.Mixed)
	}
	own, err := BruteForce(f.idx, ts[0].f)
	if err != nil {
		t.Fatal(err)
	}
	if r := own.(bitmapper).bitmapRows(); r != 0 {
		t.Errorf("a Searcher with its own filter takes bitmaps over %d rows, want none", r)
	}
	if n := mixedMax(maxBitmapBytes*4+1, 256); n != 0 {
		t.Errorf("an index of %d rows: mixed batches of %d rows, want none", maxBitmapBytes*4+1, n)
	}
	if n := mixedMax(100_000, 256); n != 256 {
		t.Errorf("100,000 rows: mixed batches of %d rows, want MaxBatch 256", n)
	}
}

// TestMixedAllocatesNothing: once warm (a slot's bitmap made, each
// filter's words copied to the host once), requests of four filters from
// four goroutines through one slot, searched in mixed batches, allocate
// nothing on the Go heap.
func TestMixedAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled state is reallocated")
	}
	f := newFixture(t)
	ts := tenants(t, f.res, nRows, 4, 0.5, 13)
	b, err := New[float32, int64](f.s, Options{MaxK: maxK, MaxBatch: 8, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	round := func(n int) {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				q := safetest.Random(uint64(900+g), 1, dim)
				nb, d := make([]int64, maxK), make([]float32, maxK)
				for range n {
					if err := b.SearchIntoFiltered(ctx, ts[g].f, q, nb, d); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	round(100)
	before := b.Stats().Mixed
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const each = 300
	round(each)
	runtime.ReadMemStats(&m1)
	mixed := b.Stats().Mixed - before
	if mixed == 0 {
		t.Fatal("no mixed batch: the test shows nothing")
	}
	// The round's goroutines, their buffers and the WaitGroup: a few
	// dozen allocations, against 1,200 requests.
	if a := m1.Mallocs - m0.Mallocs; a > 200 {
		t.Errorf("%d allocations for %d requests (%d mixed batches), want none per request", a, 4*each, mixed)
	}
}
