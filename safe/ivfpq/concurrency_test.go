package ivfpq_test

import (
	"sync"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/internal/safetest"
)

// Goroutines search one index at once, each with its own resources and
// outputs; every one gets valid results above the recall threshold.
func TestConcurrentSearch(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	const workers = 4
	type out struct {
		nb   []int64
		dist []float32
		err  error
	}
	outs := make([]out, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		res := safetest.Resources(t)
		nb := newDevice[int64](t, res, nq, k)
		dist := newDevice[float32](t, res, nq, k)
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[w]
			for i := 0; i < 3 && o.err == nil; i++ {
				o.err = idx.Search(res, &f.sp, f.queries, nb, dist)
			}
			if o.err == nil {
				o.err = res.Sync()
			}
			if o.err == nil {
				o.nb, o.err = nb.ToHost(res)
			}
			if o.err == nil {
				o.dist, o.err = dist.ToHost(res)
			}
		}()
	}
	wg.Wait()
	for _, o := range outs {
		if o.err != nil {
			t.Fatal(o.err)
		}
		check(t, o.nb, o.dist, f.data, f.qs, inRange(rows), nil, minRecall)
	}
}

// A search in flight: Extend waits for it (it does not fail), then succeeds,
// and the search completes.
func TestExtendWaitsForSearch(t *testing.T) {
	f := setup(t)
	ctl := safetest.Double(t, "a call delay")
	idx := build(t, f.res, f.dataset, params(t))
	sres := safetest.Resources(t)
	t.Cleanup(func() { ctl.SetCallDelay(0) })
	ctl.SetCallDelay(50 * time.Millisecond)
	rows := idx.Rows()
	base := ctl.Calls("cuvsIvfPqSearch")
	done := make(chan error, 1)
	go func() { done <- idx.Search(sres, &f.sp, f.queries, f.nb, f.dist) }()
	for ctl.Calls("cuvsIvfPqSearch") == base {
		time.Sleep(100 * time.Microsecond)
	}
	if err := idx.Extend(f.res, f.queries, nil); err != nil {
		t.Fatalf("Extend during a search: %v", err)
	}
	if serr := <-done; serr != nil {
		t.Fatal(serr)
	}
	if got, want := idx.Rows(), rows+f.queries.Rows(); got != want {
		t.Errorf("rows %d after Extend, want %d", got, want)
	}
}
