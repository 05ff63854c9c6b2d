// Package ivfpq is IVF-PQ: inverted lists of product-quantized vectors, the
// cuVS index for large datasets in little memory. Search is approximate
// twice over: it looks only into the lists nearest the query, and compares
// the query with compressed vectors.
//
// Distances and neighbor ids: see package safe's doc, sections Distances
// and Neighbor ids (what each metric returns here, and unfilled slots).
//
// # Building
//
// Build trains the coarse clusters (k-means, NLists lists) and the PQ
// codebooks (2^PQBits centres per sub-space, PQDim sub-spaces) on a dataset
// (float32, float16, int8 or uint8, row-major, host or device memory) and,
// by default, compresses its rows into the index with ids 0..n-1. Start
// from DefaultIndexParams, which reads cuVS's defaults from the library;
// Build checks every field in Go first (PQBits 4..8, PQDim × PQBits a
// multiple of 8, NLists no more than the rows, ...). Extend adds rows, with
// ids of your own or numbered on from Rows(). BuildPrecomputed makes an
// index from a model trained elsewhere (centres, codebooks, rotation);
// Deserialize reads one written by Serialize.
//
// # Searching
//
// Search takes queries, neighbors (int64) and distances (float32) in device
// memory, k being the number of columns of neighbors, and probes
// SearchParams.NProbes lists per query; more probes, better recall. The
// distances are approximate (computed from the codes); refine the
// candidates against the original vectors for exact ones. cuVS's IVF-PQ C
// API takes no filter. Any number of goroutines may search one index at
// once, each with its own safe.Resources; Prepare binds a search once for a
// loop of Runs, as in package cagra. Transform encodes vectors as the index
// would (list labels and packed codes).
//
// # Filtered search
//
// cuVS's IVF-PQ C API takes no filter (v26.06 and v26.08.01; cuVS PR
// #1478 would add one). Index.NewFiltered makes one anyway, prepared once
// with its buffers for a filter, an optional dataset and up to a number
// of queries: it fetches 2k/f candidates per query (f: the fraction
// allowed) probing more lists as the fraction falls, drops the disallowed
// candidates on the host (from pinned copies of the candidates' ids: the C
// API has no device function for it), refines the survivors against the
// dataset when given (cuvsRefine), searches exactly (brute force with the
// filter over the dataset) when the filter is selective, and searches
// again the queries left short. Filtered.Search (device memory) and
// SearchSliceFiltered (Go memory) run it; both allocate nothing per
// search. Without a dataset a very selective filter may leave slots
// unfilled (on the test double with 20 of 20,000 rows allowed: recall@10
// 0.10): give the dataset.
//
// # Lifetimes
//
// Build and Extend copy their inputs. BuildPrecomputed keeps references to
// its four tensors: the index borrows them until Close. The getters
// Centers, CentersPadded, PQCenters, CentersRot, RotationMatrix, ListSizes
// and ListIndices return views into the index's own memory: they expire
// when the index is closed or extended (dlpack.ErrExpired), and the index
// refuses to close or extend while one is in use.
//
// # Element types
//
// cuVS records the element type in Build and the first Extend only: after
// BuildPrecomputed or Deserialize, DType is the zero DataType and any of
// the four types is accepted (the codes do not depend on it).
//
// # The C API
//
// Each function names the cuVS functions it calls. The index parameters
// are made by cuvsIvfPqIndexParamsCreate and freed with its Destroy; the
// search parameters, a plain struct that cuVS copies, are a Go value.
package ivfpq
