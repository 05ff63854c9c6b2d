// Package ivfsq is IVF-SQ: approximate nearest-neighbour search on the GPU
// over an inverted file of scalar-quantised rows. Build clusters the rows
// by k-means into IndexParams.NLists lists and stores each row as its
// residual from its list's center, 8 bits per dimension (a per-dimension
// range learnt from a sample); a search compares each query with the codes
// in its SearchParams.NProbes nearest lists. A quarter of IVF-Flat's memory
// for float32 data, at the price of approximate distances even when every
// list is probed.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	data, _ := dlpack.NewHostMatrix(rows, n, dim) // rows: n × dim float32 in Go memory
//	idx, _ := ivfsq.Build(res, data, nil)          // cuVS's defaults
//	defer idx.Close()
//	out, _ := ivfsq.SearchSlice(res, idx, nil, queries, 10, nil) // Go memory in and out
//	ids, dists := out.Row(0)                                     // int64 ids, nearest first
//
// Build takes float32 or float16 rows in host or device memory and copies
// what it needs: the index borrows nothing. Start from DefaultIndexParams,
// which reads cuVS's defaults from the library. Extend adds rows (host or
// device; ids, if given, in the same kind of memory) with ids of your own
// or, by default, Rows(), Rows()+1, ... Search takes float32 or float16
// queries (whatever the index was built from: the index holds codes) in
// device memory, SearchSlice Go slices, Prepare a serving loop's buffers
// once; a bitset filter for Rows() rows is handled as in package ivfflat
// (SearchParams.FilterPath). Searches run in parallel, each goroutine with
// its own safe.Resources; Extend alone; Close waits. Distances and neighbor
// ids: see safe.Metric and safe.Sentinel.
//
// # Design
//
// What the C API does not say: the index's dtype is code and bits only
// (lanes 0, read as 1) after Build, all zero after Deserialize, and set by
// the next Extend; cuVS never compares it with the queries' (DType reports
// it as it is). cuvsIvfSqIndexGetCenters overwrites the tensor it is given
// with a view into the index: Centers copies from that view into your
// tensor. cuVS numbers rows itself only when extending an empty index.
//
// C calls: cuvsIvfSqIndexParamsCreate/Destroy (DefaultIndexParams),
// cuvsIvfSqSearchParamsCreate/Destroy (DefaultSearchParams),
// cuvsIvfSqIndexCreate/Destroy (Build, Deserialize, Close), cuvsIvfSqBuild
// (Build), cuvsIvfSqSearch (Search, Prepared.Run), cuvsIvfSqExtend
// (Extend), cuvsIvfSqSerialize (Serialize), cuvsIvfSqDeserialize
// (Deserialize), cuvsIvfSqIndexGetSize/GetNLists/GetDim (read after every
// change: Size, NLists, Dim), cuvsIvfSqIndexGetCenters (Centers). The
// index and search parameters are handed to C as Go values.
package ivfsq
