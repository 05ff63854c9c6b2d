// Package cagra is CAGRA: graph-based approximate nearest-neighbour search
// on the GPU, the fastest cuVS index for small batches.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	data, _ := dlpack.NewHostMatrix(rows, n, dim) // rows: n × dim float32 in Go memory
//	idx, _ := cagra.Build(res, data, nil)          // cuVS's default parameters
//	defer idx.Close()
//	out, _ := cagra.SearchSlice(res, idx, nil, queries, 10, nil) // Go memory in and out
//	ids, dists := out.Row(0)                                      // int64 ids, nearest first
//
// Build takes float32, float16, int8 or uint8 rows in host or device
// memory (IndexParams: DefaultIndexParams, FromHNSWParams); Index.Search
// takes device tensors, SearchSlice Go slices, Prepare a serving loop's
// buffers once. A search may take a bitset filter (safe.Filter): this
// package adds a policy to cuVS's filtered graph search, whose recall falls
// with the allowed fraction (SearchParams.FilterPath). Any number of
// goroutines may search one index at once. Index says how an index borrows
// its dataset, searches, filters and lives; for distances and neighbor ids
// see safe.Metric and safe.Sentinel.
//
// # Design
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
// Each function names the cuVS functions it calls. The params objects
// handed to cuVS are made by the library's own Create function and freed
// with the matching Destroy, except the search and extend parameters,
// plain structs that cuVS only reads during the call, which are Go values. cuvsCagraIndexParamsDestroy frees
// graph_build_params according to the build_algo it finds, which is
// undefined behaviour when build_algo no longer matches what Create
// allocated; the package always hands it back what Create made, so that
// trap cannot be reached from Go.
package cagra
