// Package ivfflat is IVF-Flat: approximate nearest-neighbour search on the
// GPU over an inverted file. Build clusters the rows by k-means into
// IndexParams.NLists lists and copies each row, uncompressed, into the list
// of its nearest center; a search compares each query with the rows of its
// SearchParams.NProbes nearest lists only. NProbes = NLists is exact; fewer
// probes are faster and miss neighbours that sit in other lists.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	data, _ := dlpack.NewHostMatrix(rows, n, dim) // rows: n × dim float32 in Go memory
//	idx, _ := ivfflat.Build(res, data, nil)        // cuVS's defaults (NLists ≤ n)
//	defer idx.Close()
//	p := ivfflat.SearchParams{NProbes: 32}
//	out, _ := ivfflat.SearchSlice(res, idx, &p, queries, 10, nil) // Go memory in and out
//	ids, dists := out.Row(0)                                      // int64 ids, nearest first
//
// Build takes float32, float16, int8 or uint8 rows and copies them: the
// index borrows nothing. Start from DefaultIndexParams, which reads cuVS's
// defaults from the library. Extend adds rows with ids of your own or, by
// default, Rows(), Rows()+1, ... Index.Search takes device tensors,
// SearchSlice Go slices, Prepare a serving loop's buffers once. A search
// may take a bitset filter for Rows() rows: with the zero
// SearchParams.FilterPath (safe.FilterAuto) a filtered search raises the
// probes with the fraction of rows the filter allows and searches again
// the queries that came back short (SearchParams.FilterPath has the
// numbers). Any number of goroutines may search one index at once (Index).
// Distances and neighbor ids: see safe.Metric (what each metric returns
// here) and safe.Sentinel (unfilled slots).
//
// # Design
//
// What the C API does not say: it has no size getter, so Rows is counted
// by Build and Extend, and read from the file's header by Deserialize.
// cuvsIvfFlatExtend dereferences its ids argument even though the C++
// accepts none: Extend always passes ids, making Rows()..Rows()+n-1 when
// given none. cuvsIvfFlatIndexGetCenters overwrites the tensor it is given
// with a view into the index instead of copying into it: Centers copies
// from that view into your tensor. cuvsIvfFlatDeserialize sets the index
// dtype's code and bits but not its lanes (left 0): the package reads
// lanes 0 as 1. cuVS's build reads device memory only (the C code converts
// a tensor to a device view whatever the header says): Build copies a Go
// dataset to the device first.
//
// C calls: cuvsIvfFlatIndexParamsCreate/Destroy (DefaultIndexParams),
// cuvsIvfFlatSearchParamsCreate/Destroy (DefaultSearchParams),
// cuvsIvfFlatIndexCreate/Destroy (Build, Deserialize, Close),
// cuvsIvfFlatBuild (Build), cuvsIvfFlatSearch (Search, Prepared.Run),
// cuvsIvfFlatExtend (Extend), cuvsIvfFlatSerialize (Serialize),
// cuvsIvfFlatDeserialize (Deserialize), cuvsIvfFlatIndexGetNLists and
// cuvsIvfFlatIndexGetDim (read once, NLists and Dim),
// cuvsIvfFlatIndexGetCenters (Centers). The index and search parameters
// are handed to C as Go values: plain structs that cuVS only reads during
// the call.
package ivfflat
