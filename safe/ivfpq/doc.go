// Package ivfpq is IVF-PQ: inverted lists of product-quantized vectors, the
// cuVS index for large datasets in little memory. Search is approximate
// twice over: it looks only into the lists nearest the query, and compares
// the query with compressed vectors.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	data, _ := dlpack.NewHostMatrix(rows, n, dim) // rows: n × dim float32 in Go memory
//	idx, _ := ivfpq.Build(res, data, nil)          // cuVS's defaults (NLists ≤ n)
//	defer idx.Close()
//	p := ivfpq.SearchParams{NProbes: 32}
//	out, _ := ivfpq.SearchSlice(res, idx, &p, queries, 10) // Go memory in and out
//	ids, dists := out.Row(0) // int64 ids, nearest first; approximate distances
//
// Build trains the coarse clusters (k-means, NLists lists) and the PQ
// codebooks (2^PQBits centres per sub-space, PQDim sub-spaces) and, by
// default, compresses the rows into the index; start from
// DefaultIndexParams. Extend adds rows, BuildPrecomputed makes an index
// from a model trained elsewhere (borrowing its four tensors until Close).
// Index.Search (device tensors), SearchSlice (Go slices) and Prepare probe
// SearchParams.NProbes lists per query: more probes, better recall. The
// distances come from the codes: refine the candidates (package refine)
// for exact ones. The C API takes no filter: Index.NewFiltered makes a
// filtered search anyway. CentersPadded, PQCenters, CentersRot,
// RotationMatrix, ListSizes and ListIndices return views into the index's
// memory that expire when it is closed or extended (dlpack.ErrExpired); the
// index refuses to close or extend while one is in use. Distances and
// neighbor ids: see safe.Metric and safe.Sentinel.
//
// # Design
//
// cuVS's IVF-PQ C API takes no filter (v26.06 and v26.08.01; cuVS PR #1478
// would add one). A Filtered, prepared once with its buffers for a filter,
// an optional dataset and up to a number of queries, fetches 2k/f
// candidates per query (f: the fraction allowed) probing more lists as the
// fraction falls, drops the disallowed candidates on the host (from pinned
// copies of the candidates' ids: the C API has no device function for
// it), refines the survivors against the dataset when given (cuvsRefine),
// searches exactly (brute force with the filter over the dataset) when the
// filter is selective, and searches again the queries left short; it
// allocates nothing per search. Without a dataset a very selective filter
// may leave slots unfilled: give the dataset (BENCHMARKS.md has the
// double's recall). cuVS records the element type in Build and the first
// Extend only: after BuildPrecomputed or Deserialize, DType is the zero
// DataType and any of the four types is accepted (the codes do not depend
// on it). Each function names the cuVS functions it calls. The index
// parameters are made by cuvsIvfPqIndexParamsCreate and freed with its
// Destroy; the search parameters, a plain struct that cuVS copies, are a
// Go value.
package ivfpq
