package batch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

func cagraDefaults(t *testing.T) *cagra.SearchParams {
	t.Helper()
	sp, err := cagra.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	sp.ITopKSize = 64
	return &sp
}

// TestCAGRA searches a CAGRA index through a Batcher from many goroutines,
// one dataset row per request, with uint32 and int64 ids and with a bitset
// filter, and checks what holds on any GPU: ids in range and allowed,
// distances ascending, each row finds itself first, recall@k against an
// exact kNN. (CAGRA is approximate: results are not compared one by one.)
func TestCAGRA(t *testing.T) {
	safetest.Check(t)
	const rows, d, k = 1000, 16, 8
	res := safetest.Resources(t)
	data := safetest.Random(11, rows, d)
	idx := buildCAGRA(t, res, data, rows, d, 32)
	var even []int64
	for i := int64(0); i < rows; i += 2 {
		even = append(even, i)
	}
	filter, err := safe.NewBitsetFilterAllowing(res, rows, even)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, filter)

	auto := cagraDefaults(t)
	auto.Algo = cagra.AutoAlgo
	for _, c := range []struct {
		name   string
		params *cagra.SearchParams
		filter *safe.Filter
	}{
		{"int64", cagraDefaults(t), nil}, {"uint32", cagraDefaults(t), nil}, {"uint32 filtered", cagraDefaults(t), filter},
		// The kernel picked by load (multi-CTA at this light load).
		{"int64 auto", auto, nil}, {"uint32 auto filtered", auto, filter}, {"int64 nil params", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := CAGRA(idx, c.params, c.filter)
			if err != nil {
				t.Fatal(err)
			}
			allowed := func(i int) bool { return c.filter == nil || i%2 == 0 }
			var got [][]int64
			var dists [][]float32
			if strings.HasPrefix(c.name, "int64") {
				got, dists = cagraRequests[int64](t, s, data, d, k, allowed)
			} else {
				got, dists = cagraRequests[uint32](t, s, data, d, k, allowed)
			}
			var queries []int
			for i := 0; i < 200; i++ {
				if allowed(i) {
					queries = append(queries, i)
				}
			}
			var qs []float32
			for _, i := range queries {
				qs = append(qs, data[i*d:(i+1)*d]...)
			}
			exact := safetest.ExactKNN(data, qs, d, k, safetest.L2, func(i int) bool { return allowed(i) })
			hits := 0
			for j, i := range queries {
				ids := got[i]
				if ids[0] != int64(i) {
					t.Errorf("row %d: nearest %d, want itself", i, ids[0])
				}
				for x, id := range ids {
					if id < 0 || id >= rows || !allowed(int(id)) {
						t.Fatalf("row %d: id %d out of range or filtered out", i, id)
					}
					if x > 0 && dists[i][x] < dists[i][x-1] {
						t.Errorf("row %d: distances not ascending: %v", i, dists[i])
					}
					if slices.Contains(exact[j], id) {
						hits++
					}
				}
			}
			if r := float64(hits) / float64(len(queries)*k); r < 0.95 {
				t.Errorf("recall@%d %.3f, want at least 0.95", k, r)
			}
		})
	}
}

// cagraRequests searches rows [0, 200) of data, those allowed, one request
// each from 20 goroutines, and returns each row's ids and distances.
func cagraRequests[N Neighbor](t *testing.T, s Searcher, data []float32, d, k int, allowed func(int) bool) ([][]int64, [][]float32) {
	t.Helper()
	b, err := New[float32, N](s, Options{MaxK: k, MaxBatch: 32, Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := b.WarmUp(); err != nil {
		t.Fatal(err)
	}
	ids, dists := make([][]int64, 200), make([][]float32, 200)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < 200; i += 20 {
				if !allowed(i) {
					continue
				}
				res, err := b.Search(context.Background(), data[i*d:(i+1)*d], k)
				if err != nil {
					errs <- fmt.Errorf("row %d: %w", i, err)
					return
				}
				ids[i], dists[i] = res.Row(0)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids, dists
}

// TestCAGRAKernels: with AutoAlgo (or nil params) the CAGRA Searcher has a
// light-load kernel, multi-CTA, used up to cagraLightUpTo requests with at
// most cagraLightStreams batches in flight; a kernel chosen, or params
// only one kernel takes, keep cuVS's choice. On the double, its H200 model
// counts the kernel each C search would run.
func TestCAGRAKernels(t *testing.T) {
	safetest.Check(t)
	const rows, d, k = 300, 8, 4
	res := safetest.Resources(t)
	data := safetest.Random(12, rows, d)
	idx := buildCAGRA(t, res, data, rows, d, 16)

	with := func(f func(*cagra.SearchParams)) *cagra.SearchParams {
		sp := cagraDefaults(t)
		sp.Algo = cagra.AutoAlgo
		f(sp)
		return sp
	}
	for _, c := range []struct {
		name   string
		params *cagra.SearchParams
		two    bool
	}{
		{"nil", nil, true},
		{"AutoAlgo", with(func(*cagra.SearchParams) {}), true},
		{"SingleCTA", with(func(s *cagra.SearchParams) { s.Algo = cagra.SingleCTA }), false},
		{"MultiCTA", with(func(s *cagra.SearchParams) { s.Algo = cagra.MultiCTA }), false},
		{"AutoAlgo HashSmall", with(func(s *cagra.SearchParams) { s.HashmapMode = cagra.HashSmall }), false},
		{"AutoAlgo ITopKSize 640", with(func(s *cagra.SearchParams) { s.ITopKSize = 640 }), false},
	} {
		s, err := CAGRA(idx, c.params, nil)
		if err != nil {
			t.Fatal(err)
		}
		tk, two := s.(twoKernels)
		if two != c.two {
			t.Errorf("%s: two kernels %v, want %v", c.name, two, c.two)
			continue
		}
		if two {
			if upTo, streams := tk.lightLoad(); upTo != cagraLightUpTo || streams != cagraLightStreams {
				t.Errorf("%s: light load up to %d with %d in flight", c.name, upTo, streams)
			}
		}
	}

	// The Batcher's policy: light up to the Searcher's load, with its cap.
	s, err := CAGRA(idx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New[float32, uint32](s, Options{MaxK: k, MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	in := b.b
	sl := in.slots[0]
	for _, c := range []struct{ load, cap int }{{1, cagraLightStreams}, {cagraLightUpTo, cagraLightStreams}, {cagraLightUpTo + 1, 9}, {1024, 6}} {
		in.mu.Lock()
		in.peak, in.flight = 0, c.load
		cp := in.streamCap()
		in.take(sl, time.Now()) // nothing pending: sets the slot's kernel only
		light := sl.light
		in.peak, in.flight = 0, 0
		in.mu.Unlock()
		if cp != c.cap || light != (c.load <= cagraLightUpTo) {
			t.Errorf("load %d: cap %d (want %d), light kernel %v", c.load, cp, c.cap, light)
		}
	}

	// One caller at a time: every batch light. On the double, its model
	// counts what C ran: multi-CTA for these, single-CTA for SingleCTA.
	ctl := safetest.Control()
	if ctl != nil {
		ctl.SetModel(true)
		defer ctl.SetModel(false)
	}
	count := func() (int64, int64) {
		if ctl == nil {
			return 0, 0
		}
		return ctl.ModelSearches()
	}
	s0, m0 := count()
	for i := range 5 {
		res, err := b.Search(context.Background(), data[i*d:(i+1)*d], k)
		if err != nil {
			t.Fatal(err)
		}
		if res.Neighbors[0] != int64(i) {
			t.Errorf("row %d: nearest %d, want itself", i, res.Neighbors[0])
		}
	}
	s1, m1 := count()
	if st := b.Stats(); st.Batches != 5 || st.Light != 5 {
		t.Errorf("one caller: %d batches, %d light, want 5 and 5", st.Batches, st.Light)
	}
	single, err := CAGRA(idx, cagraDefaults(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := New[float32, uint32](single, Options{MaxK: k, MaxBatch: 16, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, bs)
	for i := range 5 {
		if _, err := bs.Search(context.Background(), data[i*d:(i+1)*d], k); err != nil {
			t.Fatal(err)
		}
	}
	s2, m2 := count()
	if st := bs.Stats(); st.Light != 0 {
		t.Errorf("SingleCTA: %d light batches", st.Light)
	}
	if ctl != nil && (m1-m0 != 5 || s1 != s0 || s2-s1 != 5 || m2 != m1) {
		t.Errorf("C searches: auto %d single-CTA %d multi-CTA; SingleCTA %d and %d; want 0 5 5 0", s1-s0, m1-m0, s2-s1, m2-m1)
	}
}

// buildCAGRA builds a CAGRA index of graph degree degree (intermediate
// twice that) over data (rows × d, copied to the device), both closed when
// the test ends.
func buildCAGRA(t *testing.T, res *safe.Resources, data []float32, rows, d, degree int) *cagra.Index {
	t.Helper()
	ds, err := safe.DeviceMatrixFrom(res, data, rows, d)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = degree, 2*degree
	idx, err := cagra.Build(res, ds, &p)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	return idx
}

// TestCAGRAFilteredAsAlone: a batch of 24 one-query requests with one
// filter (50% allowed, a degree-32 graph of 128 dimensions, where cagra's
// policy searches one query exactly and 24 on the graph) gives each request
// what a direct filtered search of its query alone gives: the adapter
// plans the batch as one query (cagra.SearchParams.FilterPlanQueries).
func TestCAGRAFilteredAsAlone(t *testing.T) {
	safetest.Check(t)
	const rows, d, k, nq = 2000, 128, 10, 24
	res := safetest.Resources(t)
	idx := buildCAGRA(t, res, safetest.Random(41, rows, d), rows, d, 32)
	var half []int64
	for i := int64(1); i < rows; i += 2 {
		half = append(half, i)
	}
	filter, err := safe.NewBitsetFilterAllowing(res, rows, half)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, filter)
	sp := cagraDefaults(t)
	s, err := CAGRA(idx, sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := newGateF(s)
	b, err := New[float32, int64](g, Options{MaxK: k, MaxBatch: 32, Slots: 1, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closeBatcher(t, b)
	ctx := context.Background()
	type req struct {
		q    []float32
		n    []int64
		d    []float32
		err  error
		done chan struct{}
	}
	run := func(q []float32, f *safe.Filter) *req {
		r := &req{q: q, n: make([]int64, k), d: make([]float32, k), done: make(chan struct{})}
		go func() {
			defer close(r.done)
			r.err = b.SearchIntoFiltered(ctx, f, q, r.n, r.d)
		}()
		return r
	}
	blocker := run(safetest.Random(42, 1, d), nil)
	<-g.filters
	<-g.entered
	var reqs []*req
	for i := range nq {
		reqs = append(reqs, run(safetest.Random(uint64(100+i), 1, d), filter))
		waitFor(b, func(in *batcher[float32, int64]) bool { return len(in.pending) == i+1 })
	}
	g.release()
	<-blocker.done
	if got := <-g.filters; got != filter {
		t.Fatal("the second batch is not the filtered one")
	}
	if n := <-g.entered; n != nq {
		t.Fatalf("the filtered batch holds %d requests, want %d", n, nq)
	}
	g.release()
	alone := cagraAlone(t, res, idx, sp, d, k)
	for i, r := range reqs {
		<-r.done
		if r.err != nil {
			t.Fatal(r.err)
		}
		if want := alone(r.q, filter); !slices.Equal(r.n, want) {
			t.Errorf("request %d batched: %v; its query alone: %v", i, r.n, want)
		}
	}
}
