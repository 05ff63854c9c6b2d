package cagra_test

import (
	"log"
	"sync"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// servingRequest is one query of a service and where its answer goes.
type servingRequest struct {
	vector []float32       // dim values
	reply  chan<- []uint32 // the k nearest rows
}

// Example_serving is the online-serving pattern: one index, built (or
// deserialized) once and then only read, searched by many goroutines at
// once, each with its own Resources (its own CUDA stream) and its own
// device buffers allocated once, so that a search allocates nothing on the
// Go heap and the index holds no lock across the C call. Only Extend and
// Close need the index alone: Extend refuses while searches are in flight,
// Close waits for them.
//
// Load's memory pool, on by default, is what lets concurrent searches
// scale: without it every search allocates device memory with blocking
// calls (on an H200, ~2.9k searches/s however many goroutines). The pool
// reserves 10% of the device's memory at once, grows to 60%, and applies to
// the whole process (see safe.Load).
//
// examples/serving measures this pattern against the same workload in C.
func Example_serving() {
	const dim, k, workers = 128, 10, 32
	if err := safe.Load(); err != nil { // with the memory pool
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	vectors := make([]float32, 100_000*dim) // your data, row-major
	dataset, err := dlpack.NewHostMatrix(vectors, 100_000, dim)
	if err != nil {
		log.Fatal(err)
	}
	ip, err := cagra.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	idx, err := cagra.Build(res, dataset, ip)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close() // after the workers: it would wait for their searches

	sp, err := cagra.DefaultSearchParams()
	if err != nil {
		log.Fatal(err)
	}
	// The first search of a process links cuVS's kernels (seconds): pay it
	// before taking traffic, with the batch size, k and neighbor type served.
	if err := idx.WarmUp(res, &sp, 1, k, dlpack.Uint32); err != nil {
		log.Fatal(err)
	}

	requests := make(chan servingRequest)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := servingWorker(idx, &sp, dim, k, requests); err != nil {
				log.Print(err)
			}
		}()
	}
	// ... hand requests to the workers, e.g. from HTTP handlers:
	reply := make(chan []uint32, 1)
	requests <- servingRequest{vector: make([]float32, dim), reply: reply}
	<-reply
	close(requests)
	wg.Wait()
}

// servingWorker is one worker: everything it needs per search is allocated once.
func servingWorker(idx *cagra.Index, sp *cagra.SearchParams, dim, k int, requests <-chan servingRequest) error {
	res, err := safe.NewResources() // this goroutine's own stream
	if err != nil {
		return err
	}
	defer res.Close()
	queries, err := safe.NewDeviceMatrix[float32](res, 1, dim)
	if err != nil {
		return err
	}
	defer queries.Close()
	neighbors, err := safe.NewDeviceMatrix[uint32](res, 1, k)
	if err != nil {
		return err
	}
	defer neighbors.Close()
	distances, err := safe.NewDeviceMatrix[float32](res, 1, k)
	if err != nil {
		return err
	}
	defer distances.Close()

	for r := range requests {
		if err := queries.CopyFromHost(res, r.vector); err != nil {
			return err
		}
		if err := idx.Search(res, sp, queries, neighbors, distances, nil); err != nil {
			return err
		}
		ids := make([]uint32, k) // or reuse a buffer the reply's reader gives back
		// The copy runs on res's stream after the search, and waits for both.
		if err := neighbors.CopyToHost(res, ids); err != nil {
			return err
		}
		r.reply <- ids
	}
	return nil
}
