// Package cagra is CAGRA: graph-based approximate nearest-neighbour search
// on the GPU, the fastest cuVS index for small batches.
//
// Distances and neighbor ids: see package safe's doc, sections Distances
// and Neighbor ids (what each metric returns here, and unfilled slots).
//
// # Building
//
// Build makes an index from a dataset (float32, float16, int8 or uint8,
// row-major, in host or device memory) with IndexParams: start from
// DefaultIndexParams, which reads cuVS's defaults from the library, and
// choose the graph build (IVF-PQ, NN-Descent, iterative search, ACE for
// datasets larger than device memory) and optional VQ/PQ compression.
// FromHNSWParams derives the parameters from HNSW's M and ef_construction.
// IndexFromArgs makes an index from a graph you already have, Merge one
// index from several, Deserialize one from a file written by Serialize.
//
// # Searching
//
// Search takes queries, neighbors (uint32 or int64) and distances (float32)
// in device memory, k being the number of columns of neighbors, and
// optionally a bitset filter (safe.NewBitsetFilterAllowing) for the index's
// row count. Results are ready once the Resources' stream is synchronized.
// Any number of goroutines may search one index at once, each with its own
// safe.Resources and output buffers: Search takes no lock across the C call
// and allocates nothing on the Go heap. Extend needs the index alone: it
// waits its turn under search traffic, and searches wait for it (at most
// one Extend's time) instead of failing. Close waits for the searches in flight; later calls fail
// with safe.ErrClosed.
//
// # Filtered search
//
// cuVS's graph search under a bitset filter walks through the rows the
// filter rejects and returns only allowed ones, so its recall falls with
// the allowed fraction (on the real library, 20,000 × 64: 0.985 with every
// row allowed, 0.709 at 10%, 0.250 at 2%, degree 64, itopk 64; slots it
// cannot fill hold SentinelID). This package adds a policy
// (SearchParams.FilterPath, safe.FilterAuto by default): exact brute force
// (cuvsBruteForceSearch over the index's own dataset) or graph search with
// the internal top-k raised for the allowed fraction (from 45% to 75%
// allowed, an unfiltered graph search for 2k/f candidates filtered on the
// host: see PostFilterFrom), chosen by a cost model fitted to the real
// library's timings, and an exact second pass for the queries that came
// back short. On the test double fitted to the real
// library its recall stays within 0.03 of the unfiltered search from 100%
// down to a single allowed row, and no slot is left unfilled while at
// least k rows are allowed. safe.FilterIndex (the graph search) and
// safe.FilterExact force either path.
//
// For a serving loop that searches batch after batch into the same
// buffers, Prepare checks and binds the tensors once and Prepared.Run is
// then a single C call (about 1.3 times a bare cgo call; Search, which
// redoes the checks and binding each time, about 4 times); SetQueries and
// Results move the data in and out. WarmUp runs one search before serving:
// the first search of a process links cuVS's kernels (seconds).
//
// # Lifetimes
//
// cuVS copies a host dataset, but keeps a reference to a device dataset
// whose rows are a multiple of 16 bytes (float32 rows of 4, 8, 12, ...
// values; on 26.08 C-contiguous rows in device or managed memory), unless
// it compresses it: the index then borrows the dataset
// until Close, and its owner (a safe.DeviceMatrix, say) refuses to be freed
// or written meanwhile, with an error that names the index. IndexFromArgs
// borrows a device graph, and the dataset under the same rule. The views
// Dataset and Graph look into the index's own memory: they expire when the
// index is closed or extended, and the index refuses to close while one is
// in use.
//
// # Two cuVS releases
//
// The package is one API on cuVS 26.06 and 26.08 and chooses the C calls
// of the loaded library's release (safe.Release). On 26.08 Build, Extend
// and Merge go through cuVS's Dataset API (an index references a
// cuvsDataset_t the Index keeps and destroys after itself: see Build for
// which datasets are viewed and which copied, Extend for the device copy
// each extend costs), Serialize and Deserialize map to
// cuvsCagraSerializeGraph[AndDataset] and their Deserialize pairs, and
// CompressionParams are refused (26.08 takes none). Index files are not
// read across releases (see Serialize). UpdateDataset,
// IndexParamsFromDataset and SearchMultiPartition exist in 26.08 only and
// return an error wrapping safe.ErrNotInRelease on 26.06.
//
// # The C API
//
// Each function names the cuVS functions it calls. The params objects
// handed to cuVS are made by the library's own Create function and freed
// with the matching Destroy, except the search and extend parameters,
// plain structs that cuVS only reads during the call, which are Go values. cuvsCagraIndexParamsDestroy frees
// graph_build_params according to the build_algo it finds, which is
// undefined behaviour when build_algo no longer matches what Create
// allocated; the package always hands it back what Create made, so that
// trap cannot be reached from Go.
package cagra
