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
	vector []float32            // dim values
	reply  chan<- servingAnswer // buffered: a worker never blocks on it
}

// servingAnswer is the k nearest rows, or why there are none. Every request
// gets exactly one answer, error or not: a requester never waits forever.
type servingAnswer struct {
	ids []uint32
	err error
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
	idx, err := cagra.Build(res, dataset, &ip)
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
			servingWorker(idx, &sp, dim, k, requests)
		}()
	}
	// ... hand requests to the workers, e.g. from HTTP handlers:
	reply := make(chan servingAnswer, 1)
	requests <- servingRequest{vector: make([]float32, dim), reply: reply}
	if a := <-reply; a.err != nil {
		log.Print(a.err) // e.g. answer HTTP 503 on errors.Is(a.err, safe.ErrOutOfMemory)
	}
	close(requests)
	wg.Wait()
}

// servingWorker is one worker: everything it needs per search is allocated
// once. It answers every request it takes, with an error when it cannot
// search: when its setup fails it keeps answering with that error (another
// worker may be healthy; a real service would also report it), and a failed
// search fails that request alone.
func servingWorker(idx *cagra.Index, sp *cagra.SearchParams, dim, k int, requests <-chan servingRequest) {
	w, err := newServingBuffers(dim, k)
	if err != nil {
		for r := range requests {
			r.reply <- servingAnswer{err: err}
		}
		return
	}
	defer w.close()
	for r := range requests {
		ids, err := w.search(idx, sp, r.vector)
		r.reply <- servingAnswer{ids: ids, err: err}
	}
}

// servingBuffers are a worker's own stream and device buffers.
type servingBuffers struct {
	res                *safe.Resources
	queries, distances *safe.DeviceMatrix[float32]
	neighbors          *safe.DeviceMatrix[uint32]
	k                  int
}

func newServingBuffers(dim, k int) (w *servingBuffers, err error) {
	w = &servingBuffers{k: k}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	if w.res, err = safe.NewResources(); err != nil { // this goroutine's own stream
		return nil, err
	}
	if w.queries, err = safe.NewDeviceMatrix[float32](w.res, 1, dim); err != nil {
		return nil, err
	}
	if w.neighbors, err = safe.NewDeviceMatrix[uint32](w.res, 1, k); err != nil {
		return nil, err
	}
	if w.distances, err = safe.NewDeviceMatrix[float32](w.res, 1, k); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *servingBuffers) search(idx *cagra.Index, sp *cagra.SearchParams, vector []float32) ([]uint32, error) {
	if err := w.queries.CopyFromHost(w.res, vector); err != nil {
		return nil, err
	}
	if err := idx.Search(w.res, sp, w.queries, w.neighbors, w.distances, nil); err != nil {
		return nil, err
	}
	ids := make([]uint32, w.k) // or reuse a buffer the reply's reader gives back
	// The copy runs on res's stream after the search, and waits for both.
	if err := w.neighbors.CopyToHost(w.res, ids); err != nil {
		return nil, err
	}
	return ids, nil
}

// close frees what newServingBuffers made, also when it stopped halfway.
func (w *servingBuffers) close() {
	if w.queries != nil {
		w.queries.Close()
	}
	if w.neighbors != nil {
		w.neighbors.Close()
	}
	if w.distances != nil {
		w.distances.Close()
	}
	if w.res != nil {
		w.res.Close()
	}
}
