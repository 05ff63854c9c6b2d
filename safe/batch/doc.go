// Package batch gathers the searches of many goroutines, each with one or a
// few queries in Go memory, into batches searched at once on the GPU
// (dynamic batching). A GPU search of one query costs nearly as much as one
// of a hundred (CAGRA on an H200: ~330 µs for 1 query, ~380 µs for 100), so
// a service with hundreds of concurrent one-query requests gets far more
// from its GPU by searching them together than by giving each goroutine
// its own safe.Resources, which also stops scaling at thousands of
// goroutines.
//
// A Batcher wraps a Searcher (an index with its search parameters fixed:
// CAGRA, BruteForce, IVFFlat, IVFSQ and IVFPQ adapt this module's indexes;
// others plug in by implementing the interface) and is shared by every
// goroutine:
//
//	s, _ := batch.CAGRA(idx, nil, nil) // cuVS's defaults, the kernel picked by load
//	b, _ := batch.New[float32, uint32](s, batch.Options{MaxK: 10})
//	defer b.Close()
//	// in any number of goroutines:
//	err := b.SearchInto(ctx, query, neighbors, distances) // or b.Search(ctx, query, k)
//	err = b.SearchIntoFiltered(ctx, tenantFilter, query, neighbors, distances)
//
// # When a batch is searched
//
// Requests join one queue. A request that finds the queue empty and a slot
// free is searched at once on its caller's own goroutine, as a direct
// search (no hand-off to another goroutine, in or out). Otherwise,
// whenever a slot is free and requests wait, the slot's goroutine takes
// the oldest of them, up to MaxBatch rows, and searches them at once:
// there is no timer. While every slot is busy, requests queue, and the
// next slot to finish takes them as its next batch. So at light load
// (fewer concurrent callers than Slots) every request is searched alone,
// at a direct search's latency plus a copy; under heavy load batches grow
// by themselves, up to MaxBatch. Options.MaxWait, when set, makes a
// request wait up to that long for a fuller batch while other batches
// search (the rule of earlier releases); the default, 0, never waits.
//
// Why: on an H200 (CAGRA, N = 100k, D = 128, degree 32, itopk 64, libcuvs
// v26.06.00) a search of b queries with c searches in flight took (p50, µs)
//
//	batch   1 caller  4 callers  16 callers
//	    1        341        351         370
//	   16        370        372         417
//	   64        380        411         829
//	  256        409        821        3285
//	 1024        592       2069        8274
//
// so a batch that starts now costs almost nothing more than one that waits
// to grow, concurrent searches on separate streams overlap until the GPU
// saturates near 1.25 million queries a second, and a request that waits
// for a timer only adds its wait. Before this rule, the Batcher (4 slots,
// 100 µs MaxWait) reached half the per-call throughput at 32 callers (42.9k
// against 83.2k queries a second). The default of 32 slots keeps up to 32
// callers on the per-call path. Beyond 32 requests in the system (n, held
// at its recent peak) fewer batches search at once, 32·sqrt(32/n) (11 at
// 256, 6 at 1024), and a slot that could start one waits, without a timer,
// until a share of the load (n divided by that cap) is queued, or until
// nothing else searches: batches grow instead of streams, and the first
// caller back from a delivery does not take a slot for a batch of one. On
// internal/cuvsdouble's H200 model (CUVS_DOUBLE_MODEL=h200, on the GPU
// machine's 16 CPU cores) that came within 1% of per-call throughput and
// p99 latency (1.02-1.04x) up to 32 callers and reached 0.47-0.48 and
// 0.90 million queries a second at 256 and 1024 callers, p99 0.8 and 1.5
// ms (BENCHMARKS.md).
// Stats accounts for a request's time: its queue wait, its batch's
// hand-off, staging, search and delivery.
//
// # Many callers at once
//
// At a thousand callers the host side, not the GPU, set the pace: a batch
// of 256 woke its callers one by one (~0.6 µs each on the H200 machine's 16
// cores), and the callers, back at once with their next request, each took
// the Batcher's lock in turn. So a caller that finds the lock taken leaves
// its request in a lock-free intake that the lock's holder drains when it
// lets go, and the callers of a batch of more than 8 requests are woken by
// fan-out: the slot's goroutine copies every caller's rows out of the
// staging (the slot is then free for its next batch) and wakes the first 8
// callers, and each of them wakes 4 more. On the
// real library (H200, CAGRA as above, one query per caller, both releases)
// that took 1,024 callers from 940k to 1.25M queries a second (p99 2.6 to
// 1.0 ms) and 256 callers from 507k to 521-541k (BENCHMARKS.md has the
// table, per-call searching beside it). Stats.Times.Deliver is the slot's part:
// the copies and the first wake-ups.
//
// # CAGRA's two kernels
//
// The numbers above are CAGRA's single-CTA kernel, cuVS's C default. Its
// multi-CTA kernel answers a lone query in ~205 µs instead of ~345, but
// cuVS runs at most ~38k multi-CTA searches a second however many
// goroutines call it (32 one-query searches at once took 830 µs each), and
// its concurrent batches of up to 256 share the GPU at ~1.15M queries a
// second against single-CTA's ~1.25M (cagra.SearchAlgo has the curve). So
// a CAGRA Searcher made with AutoAlgo, or with nil params, lets the Batcher
// pick the kernel by its load: multi-CTA while up to 384 requests are
// queued or searching, with at most 8 batches in flight (the cap above
// then yields to 8), and single-CTA beyond, under the cap above. On the
// real library (H200, both releases, two runs each) that served 1 to 256
// callers at 1.24-6.97x single-CTA per-call searching (1 caller 1.64x)
// and 0.96-1.02x per-call multi-CTA searching at 1 and 8 callers, and
// 256 callers at 573-605k queries a second where the single-CTA Batcher
// did 521-541k; 1,024 callers stay at ~1.23M (BENCHMARKS.md). 6 or 12
// batches in flight did worse than 8. A kernel set in the params
// (SingleCTA, MultiCTA) is used for every batch. Stats.Light counts the
// multi-CTA batches.
//
// Distances and neighbor ids are those of the index behind the Searcher:
// see package safe's doc, sections Distances and Neighbor ids.
//
// Each of the Options.Slots slots has its own safe.Resources (its own CUDA
// stream), buffers and goroutine, so several batches search at once on
// different streams.
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
// Each request may carry its own filter (SearchFiltered,
// SearchIntoFiltered: a bitset over the index's rows, nil for none), so
// that one Batcher serves many tenants, access lists or predicates. The
// Searcher must take filters per request: CAGRA, BruteForce, IVFFlat and
// IVFSQ made with a nil filter do (FilterSearcher), and IVFPQFiltered of
// ivfpq.Filtered made without one; one made with a filter applies it to
// every batch and refuses requests' filters; IVFPQ takes none. Only
// a bitset can be shared by a batch's requests (a bitmap's bits belong to
// query positions, which change from batch to batch).
//
// CAGRA and the IVF indexes search a batch with one filter, so requests
// with the same filter (the same *safe.Filter) share batches and requests
// with different filters never do; batches of different filters search
// side by side on the slots. Brute force takes a bitmap (a row of bits per
// query), so its batches take the oldest queued requests whatever their
// filters, and a batch of several filters is one search with a bitmap
// assembled from the requests' bitsets (Stats.Mixed counts them; a slot's
// bitmap is at most 32 MiB, which bounds such a batch to 2^28/Rows() query
// rows). Otherwise a batch is led by the oldest queued request and takes the
// queued requests of its filter, oldest first, up to MaxBatch rows, the
// others keeping their place: a request waits, in batches taken before
// its own, at most for one batch of each other filter queued ahead of it
// (while no filter has more than MaxBatch rows ahead of it), however
// skewed the traffic. Stats.MaxPassed reports the most batches that
// passed one request. Each batch follows its index's filtered-search rules
// (CAGRA's and the IVF packages' FilterPath, brute force's refusal of a
// filter that cannot fill k: a brute-force request's filter must let
// MaxK rows through).
//
// A filter cannot be closed while a request with it waits or searches
// (its Close returns an error matching dlpack.ErrBorrowed); a request
// with a closed filter is refused with safe.ErrClosed. A filtered request
// allocates nothing, as an unfiltered one.
//
// # Cancellation and Close
//
// A request searched on its own goroutine (the lone request of an idle
// Batcher, above) is a direct search: its context is looked at before,
// and the search, once started, runs to its end (one search's time), as a
// direct call's does. Any other request whose context is done returns at
// once with the context's error, whether it still waits in the queue (it is withdrawn) or its
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
// rows of queries and of results (safe.PinnedMatrix), and with
// Options.DeviceBuffers (or a Searcher that needs them: IVF-PQ) device
// buffers of the same size (safe.DeviceMatrix). A batch copies its queries
// from the requests into the pinned staging and searches it there (cuVS
// takes pinned memory as device memory; with device buffers: cuvsMatrixCopy
// to the device, the search, cuvsMatrixCopy of the results back), then
// waits for the stream once: spinning (safe.Resources.Sync, the default) or
// asleep (Options.Wait WaitSleep: safe.Resources.SyncBlocking, which frees
// the core and answers later; BENCHMARKS.md has both on an H200). Each
// waiting caller's rows are then copied into its
// buffers. SearchInto allocates nothing on the Go heap per request (a
// request's own state is pooled; a request cancelled while its batch
// searches is left to the collector instead).
package batch
