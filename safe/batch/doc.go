// Package batch gathers the searches of many goroutines, each with one or a
// few queries in Go memory, into batches searched at once on the GPU
// (dynamic batching). A GPU search of one query costs nearly as much as one
// of a hundred (CAGRA on an H200: ~330 µs for 1 query, ~380 µs for 100), so
// a service with hundreds of concurrent one-query requests gets far more
// from its GPU by searching them together than by giving each goroutine
// its own safe.Resources, which also stops scaling at thousands of
// goroutines.
//
// A Batcher wraps a Searcher (an index with its search parameters and
// filter fixed: CAGRA and BruteForce adapt this module's indexes; others
// plug in by implementing the interface) and is shared by every goroutine:
//
//	s, _ := batch.CAGRA(idx, &params, nil)
//	b, _ := batch.New[float32, uint32](s, batch.Options{MaxK: 10})
//	defer b.Close()
//	// in any number of goroutines:
//	err := b.SearchInto(ctx, query, neighbors, distances) // or b.Search(ctx, query, k)
//
// # When a batch is searched
//
// Requests join one queue. The queued requests are searched, up to
// MaxBatch rows at a time, as soon as a slot is free and one of these
// holds: no other batch is searching (so a lone caller never waits: its
// batch starts at once and its latency is that of a direct search plus the
// copies and two goroutine hand-offs); MaxBatch rows are waiting; the
// oldest request has waited MaxWait; Close is draining. Otherwise the
// requests wait for one of these, gathering into a larger batch while the
// GPU is busy with others. The rule adapts to the load: under light load
// batches are small and start at once, under heavy load they grow to
// MaxBatch, and MaxWait bounds the wait added for batching when some
// batches are already in flight.
//
// Each of the Options.Slots slots has its own safe.Resources (its own CUDA
// stream), buffers and goroutine, so while one batch searches the next one
// gathers, and several batches may search at once on different streams.
// When every slot is busy, requests queue until one finishes; the slot
// that finishes takes the next batch at once when it is due.
//
// # k
//
// Every batch is searched for Options.MaxK neighbors, and a request for k
// < MaxK gets the first k of its rows' MaxK results (requests are not
// grouped by k). For an exact algorithm (brute force) these are the k
// nearest, as a search for k would give (ties apart). For CAGRA a search
// for MaxK explores at least as much as one for k (its internal top-k list
// is at least MaxK long), so the first k are as good or better, but they
// need not equal a direct search for k. The GPU's cost grows with MaxK:
// set it to the k you serve.
//
// # Filters
//
// A request carries no filter: the Searcher's filter, fixed when it was
// made, applies to every batch, and only a bitset can be shared by
// requests (a brute-force bitmap's bits belong to query positions, which
// change from batch to batch: the adapters refuse it). For requests with
// different filters, make one Batcher per filter, or search directly.
//
// # Cancellation and Close
//
// A request whose context is done returns at once with the context's
// error, whether it still waits in the queue (it is withdrawn) or its
// batch is searching (its rows are searched, and their results dropped):
// its buffers are never written after it returned. Only when its results
// are being copied out at that very moment does it wait for that copy, and
// then it returns them. A search that fails returns its error to every
// request of the batch.
//
// Close refuses new requests (with an error wrapping safe.ErrClosed),
// searches the ones queued, waits for the batches in flight, and frees
// everything. Close the Batcher before the index it searches.
//
// # Memory
//
// A slot's buffers are allocated once: pinned host staging for MaxBatch
// rows of queries and of results (safe.PinnedMatrix) and device buffers of
// the same size (safe.DeviceMatrix). A batch copies its queries from the
// requests into the pinned staging, then to the device, searches, copies
// the results back to pinned memory, and synchronizes the stream once
// (cuvsMatrixCopy, the index's search, cuvsMatrixCopy twice,
// cuvsStreamSync); each waiting caller's rows are then copied into its
// buffers. SearchInto allocates nothing on the Go heap per request (a
// request's own state is pooled; a request cancelled while its batch
// searches is left to the collector instead).
package batch
