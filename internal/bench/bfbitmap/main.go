// Command bfbitmap measures, on a real GPU, the two ways a batch of brute-
// force requests with different filters can be searched (issue 43): one
// search of all the queries with a bitmap (cuVS's BITMAP filter: a row of
// bits per query, assembled on the host from each request's bitset and
// uploaded), against grouping (requests of one filter per search, here one
// query per filter), each search on one of -streams Resources at once. It
// prints one line per variant: microseconds per batch of -queries queries
// and queries a second. Then the Batcher itself, -queries goroutines of one
// query each with a filter per goroutine, 16 and 1: batch.BruteForce as it
// is (requests of different filters in one bitmap search) against the same
// Searcher with its bitmap path hidden (grouped by filter).
//
//	bfbitmap -lib libcuvs_c.so -n 100000 -dim 128 -queries 256 -k 10 -allow 0.5 -streams 16 -seconds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

func main() {
	lib := flag.String("lib", "", "libcuvs_c.so")
	n := flag.Int("n", 100000, "rows")
	dim := flag.Int("dim", 128, "dimension")
	nq := flag.Int("queries", 256, "queries per batch, each with its own filter")
	k := flag.Int("k", 10, "neighbours")
	allow := flag.Float64("allow", 0.5, "fraction of the rows each filter lets through")
	streams := flag.Int("streams", 16, "grouped: searches in flight at once, each on its own Resources")
	seconds := flag.Float64("seconds", 3, "seconds per variant")
	flag.Parse()
	if err := run(*lib, *n, *dim, *nq, *k, *allow, *streams, time.Duration(*seconds*float64(time.Second))); err != nil {
		fmt.Fprintln(os.Stderr, "bfbitmap:", err)
		os.Exit(1)
	}
}

func run(lib string, n, dim, nq, k int, allow float64, streams int, dur time.Duration) error {
	var opts []safe.Option
	if lib != "" {
		opts = append(opts, safe.WithLibrary(lib))
	}
	if err := safe.Load(opts...); err != nil {
		return err
	}
	v, _ := safe.LibraryVersion()
	res, err := safe.NewResources()
	if err != nil {
		return err
	}
	defer res.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]float32, n*dim)
	for i := range data {
		data[i] = rng.Float32()
	}
	ds, err := safe.DeviceMatrixFrom(res, data, n, dim)
	if err != nil {
		return err
	}
	defer ds.Close()
	idx, err := bruteforce.Build(res, ds, nil)
	if err != nil {
		return err
	}
	defer idx.Close()
	words := (n + 31) / 32
	sets := make([][]uint32, nq) // each query's bitset
	filters := make([]*safe.Filter, nq)
	for q := range sets {
		sets[q] = make([]uint32, words)
		for r := range n {
			if rng.Float64() < allow {
				sets[q][r/32] |= 1 << (r % 32)
			}
		}
		if filters[q], err = safe.NewBitsetFilter(res, n, sets[q]); err != nil {
			return err
		}
		defer filters[q].Close()
	}
	queries := data[:nq*dim]
	fmt.Printf("# bfbitmap: cuVS %s; brute force %d x %d float32, %d queries per batch, each its own filter letting %.0f%% through, k %d\n", v, n, dim, nq, 100*allow, k)

	// bitmap: assemble the bitmap on the host, upload it, one search.
	qd, err := safe.DeviceMatrixFrom(res, queries, nq, dim)
	if err != nil {
		return err
	}
	defer qd.Close()
	nb, err := safe.NewDeviceMatrix[int64](res, nq, k)
	if err != nil {
		return err
	}
	defer nb.Close()
	dd, err := safe.NewDeviceMatrix[float32](res, nq, k)
	if err != nil {
		return err
	}
	defer dd.Close()
	bitmap := make([]uint32, (nq*n+31)/32)
	assemble := func() {
		clear(bitmap)
		for q, set := range sets { // bit q*n+r
			for r := range n {
				if set[r/32]>>(r%32)&1 != 0 {
					b := q*n + r
					bitmap[b/32] |= 1 << (b % 32)
				}
			}
		}
	}
	// byWords is assemble by whole words when n is a multiple of 32 (each
	// request's bitset is then a row of the bitmap as it is), else by bits.
	byWords := func() {
		if n%32 != 0 {
			assemble()
			return
		}
		for q, set := range sets {
			copy(bitmap[q*words:(q+1)*words], set)
		}
	}
	bitmapWords := func() error {
		byWords()
		f, err := safe.NewBitmapFilter(res, nq, n, bitmap)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := idx.Search(res, qd, nb, dd, f); err != nil {
			return err
		}
		return res.Sync()
	}
	bitmapBatch := func() error {
		assemble()
		f, err := safe.NewBitmapFilter(res, nq, n, bitmap)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := idx.Search(res, qd, nb, dd, f); err != nil {
			return err
		}
		return res.Sync()
	}
	// bitmap, search only: the bitmap made once.
	assemble()
	fixed, err := safe.NewBitmapFilter(res, nq, n, bitmap)
	if err != nil {
		return err
	}
	defer fixed.Close()
	bitmapSearch := func() error {
		if err := idx.Search(res, qd, nb, dd, fixed); err != nil {
			return err
		}
		return res.Sync()
	}
	// grouped: one search per query and filter, on streams Resources.
	type lane struct {
		res *safe.Resources
		nb  *safe.DeviceMatrix[int64]
		dd  *safe.DeviceMatrix[float32]
		qs  []int
	}
	lanes := make([]*lane, streams)
	for i := range lanes {
		l := &lane{}
		if l.res, err = safe.NewResources(); err != nil {
			return err
		}
		defer l.res.Close()
		if l.nb, err = safe.NewDeviceMatrix[int64](l.res, 1, k); err != nil {
			return err
		}
		defer l.nb.Close()
		if l.dd, err = safe.NewDeviceMatrix[float32](l.res, 1, k); err != nil {
			return err
		}
		defer l.dd.Close()
		lanes[i] = l
	}
	qrows := make([]*safe.DeviceMatrix[float32], nq)
	for q := range qrows {
		if qrows[q], err = safe.DeviceMatrixFrom(res, queries[q*dim:(q+1)*dim], 1, dim); err != nil {
			return err
		}
		defer qrows[q].Close()
		lanes[q%streams].qs = append(lanes[q%streams].qs, q)
	}
	grouped := func() error {
		var wg sync.WaitGroup
		errs := make([]error, len(lanes))
		for i, l := range lanes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, q := range l.qs {
					if err := idx.Search(l.res, qrows[q], l.nb, l.dd, filters[q]); err != nil {
						errs[i] = err
						return
					}
					if err := l.res.Sync(); err != nil {
						errs[i] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		for _, e := range errs {
			if e != nil {
				return e
			}
		}
		return nil
	}
	for _, v := range []struct {
		name string
		f    func() error
	}{{"bitmap (host assembly + upload + search)", bitmapBatch}, {"bitmap (assembled by words + upload + search)", bitmapWords}, {"bitmap (search only)", bitmapSearch}, {fmt.Sprintf("grouped (%d one-query searches on %d streams)", nq, streams), grouped}} {
		if err := v.f(); err != nil { // warm-up
			return fmt.Errorf("%s: %w", v.name, err)
		}
		start := time.Now()
		batches := 0
		for time.Since(start) < dur {
			if err := v.f(); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			batches++
		}
		el := time.Since(start)
		per := el / time.Duration(batches)
		fmt.Printf("%-55s %10.1f us per batch %12.0f queries/s\n", v.name, float64(per)/1e3, float64(batches*nq)/el.Seconds())
	}
	return viaBatcher(idx, filters, queries, nq, dim, k, dur)
}

// grouped hides the Batcher's bitmap path (mixed batches) from it: its
// batches are grouped by filter, as CAGRA's and the IVF indexes' are.
type grouped struct{ batch.FilterSearcher }

// viaBatcher measures the Batcher itself: nq goroutines, one query each,
// goroutine g searching with filter g mod tenants, through one
// batch.BruteForce Searcher that mixes filters in a bitmap search and one
// that groups them, for a filter per goroutine, 16 and 1.
func viaBatcher(idx *bruteforce.Index, filters []*safe.Filter, queries []float32, nq, dim, k int, dur time.Duration) error {
	s, err := batch.BruteForce(idx, nil)
	if err != nil {
		return err
	}
	for _, tenants := range []int{nq, 16, 1} {
		tenants = min(tenants, nq)
		for _, v := range []struct {
			name string
			s    batch.Searcher
		}{{"mixed (bitmap)", s}, {"grouped", grouped{s.(batch.FilterSearcher)}}} {
			b, err := batch.New[float32, int64](v.s, batch.Options{MaxK: k, MaxBatch: nq})
			if err != nil {
				return err
			}
			var stop atomic.Bool
			var done atomic.Int64
			var wg sync.WaitGroup
			errs := make([]error, nq)
			start := time.Now()
			for g := range nq {
				wg.Add(1)
				go func() {
					defer wg.Done()
					q, n, d := queries[g*dim:(g+1)*dim], make([]int64, k), make([]float32, k)
					for !stop.Load() {
						if err := b.SearchIntoFiltered(context.Background(), filters[g%tenants], q, n, d); err != nil {
							errs[g] = err
							return
						}
						done.Add(1)
					}
				}()
			}
			time.Sleep(dur)
			stop.Store(true)
			wg.Wait()
			el := time.Since(start)
			st := b.Stats()
			if err := errors.Join(append(errs, b.Close())...); err != nil {
				return fmt.Errorf("batcher %s, %d filters: %w", v.name, tenants, err)
			}
			fmt.Printf("batcher %-15s %4d goroutines, %3d filters %12.0f queries/s  mean batch %6.1f  mixed %d of %d batches\n", v.name, nq, tenants, float64(done.Load())/el.Seconds(), st.Mean(), st.Mixed, st.Batches)
		}
	}
	return nil
}
