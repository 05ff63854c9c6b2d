// Package tiered is cuVS's tiered index: a growable index made of an ANN
// index (CAGRA, IVF-Flat or IVF-PQ) over the rows it was built from and a
// brute-force tier for the rows added since, searched together on the GPU.
//
// # Building, growing, searching
//
// Build copies float32 rows (device memory) into the index's storage and,
// over more than IndexParams.MinANNRows rows, builds the backend's ANN
// index; Extend appends to the brute-force tier (and, with
// CreateANNIndexOnExtend, rebuilds the ANN index once the tier holds more
// than MinANNRows rows); Merge concatenates indexes into a new one, folding
// the tier into a new ANN index when it is large enough. Search searches
// both tiers and merges by distance; a bitset prefilter is accepted while
// one tier is empty. NewSearcher adapts an index to package batch.
//
// The backend's parameters are typed (CAGRAParams, IVFFlatParams,
// IVFPQParams; CAGRASearchParams, IVFSearchParams): the C API's void*
// search parameters and backend pointers never reach the caller.
//
// # What the C API does not say
//
//   - Only float32 (Build refuses other dtypes; 26.06's Destroy frees only
//     float32 indexes).
//   - The backend's metric wins over the tiered one when backend
//     parameters are given (convert_c_index_params reads the tiered metric
//     first, then the backend's): the package sets both to Metric.
//   - The prefilter goes as is to the ANN search and to the brute-force
//     tier's, which numbers its rows from 0: the tier's row j is tested
//     against bit j, not bit ANNRows()+j (cpp/src/neighbors/detail/
//     tiered_index.cuh). The package refuses a filter while both tiers
//     hold rows.
//   - Each tier is searched for k; k larger than a non-empty tier's rows is
//     refused (what cuVS's searches do then is not documented: a guess on
//     the safe side).
//   - Merge of a single index returns that index's state, shared with it
//     (not a copy): the package asks for at least two.
//   - An IVF backend builds k-means over the rows: at least NLists of them
//     (refused here before the C call).
//   - cuVS 26.08 boxes the index with its CAGRA dataset layout and checks
//     algorithm and layout on every call; 26.06 casts by the handle's algo.
//
// # The C API
//
// cuvsTieredIndexParamsCreate/Destroy (DefaultIndexParams, Build, Merge;
// _v2608 on 26.08, whose struct holds 26.08's CAGRA params),
// cuvsTieredIndexCreate/Destroy (Build, Merge, Close), cuvsTieredIndexBuild
// (Build), cuvsTieredIndexExtend (Extend), cuvsTieredIndexMerge (Merge),
// cuvsTieredIndexSearch (Search, Searcher.SearchBatch), with the backends'
// cuvsCagraIndexParamsCreate/Destroy, cuvsIvfFlatIndexParamsCreate/Destroy,
// cuvsIvfPqIndexParamsCreate/Destroy and ...SearchParamsCreate/Destroy
// (their defaults). All 8 functions on both releases.
package tiered
