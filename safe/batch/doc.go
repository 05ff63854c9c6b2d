// Package batch gathers the searches of many goroutines, each with one or a
// few queries in Go memory, into batches searched at once on the GPU
// (dynamic batching): a GPU search of one query costs nearly what one of a
// hundred does, so one shared Batcher serves hundreds of concurrent
// one-query requests far better than a safe.Resources per goroutine.
//
// A Batcher wraps a Searcher (an index with its search parameters fixed:
// CAGRA, BruteForce, IVFFlat, IVFSQ, IVFPQ and IVFPQFiltered adapt this
// module's indexes) and is shared by every goroutine:
//
//	s, _ := batch.CAGRA(idx, nil, nil) // cuVS's defaults, the kernel picked by load
//	b, _ := batch.New[float32, uint32](s, batch.Options{MaxK: 10})
//	defer b.Close()
//	// in any number of goroutines:
//	err := b.SearchInto(ctx, query, neighbors, distances) // or b.Search(ctx, query, k)
//	err = b.SearchIntoFiltered(ctx, tenantFilter, query, neighbors, distances)
//
// A request searches alone, on its caller's goroutine, when the Batcher is
// idle; under load, requests queue and each free slot takes the oldest of
// them as its next batch, so batches grow by themselves (Batcher has the
// rule). A request may ask for any k up to Options.MaxK and carry its own
// filter (SearchFiltered); its context withdraws it at any time (Batcher).
// Stats says where the time went; distances and ids are the index's
// (safe.Metric, safe.Sentinel).
//
// # Design
//
// No timer: a batch that starts now costs little more than one that
// waits to grow, so requests never wait for a fuller batch unless
// Options.MaxWait asks them to. Under heavy load fewer, larger batches
// search at once, callers are woken by fan-out, and CAGRA's two kernels are
// picked by load. safe/batch/DESIGN.md has the reasoning and BENCHMARKS.md
// the measurements (1.25M queries a second at 1,024 callers on an H200).
package batch
