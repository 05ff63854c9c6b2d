// Package tiered is a growable index for a service that inserts while it
// serves: an ANN index (CAGRA, IVF-Flat or IVF-PQ) over the rows it was
// built from and a fresh tier, searched by brute force on the GPU, over
// the rows added since, searched together for any k up to Rows(), with or
// without a bitset filter, rows deleted by id (Delete), and persisted with
// SerializeTo/DeserializeFrom.
//
// Distances and neighbor ids: see package safe's doc, sections Distances
// and Neighbor ids (what each metric returns here, and unfilled slots).
//
// # What is cuVS's tiered index, what is composed
//
// The ANN tier is a cuVS tiered index (cuvsTieredIndexBuild) holding
// exactly the ANN rows and never extended: cuVS searches such an index
// with its ANN index alone and hands it the filter by id, which is right
// (cpp/src/neighbors/detail/tiered_index.cuh, index_state::search, the
// bfknn_rows() == 0 branch). The fresh tier is the package's own: a
// device matrix of the rows added since (grown by doubling, as cuVS grows
// its storage) with a brute-force index over them (package bruteforce).
// cuVS's search of both tiers is not used: it searches each tier for k
// (so k could not exceed the fresh rows), and it passes one bitset to
// both, the fresh row j tested against bit j instead of ANNRows()+j.
//
// Search, when one tier holds every row and there is no filter, is one C
// call. Otherwise it searches the ANN tier for min(k, ANNRows()) and the
// fresh tier for min(k, its rows allowed) into one pooled device buffer,
// reads it back with one copy and one wait, and merges the lists by
// distance on the host, the fresh ids shifted by ANNRows() (both
// releases: 26.08's cuvsSelectK selects from one row, smallest first,
// returning positions, so a batch would take a C call per query and the
// ids a gather; cuVS's own device merge, knn_merge_parts, is reached only
// through its tiered search, which needs the fresh rows in the C index).
// A filter is split
// once per filter and index state into the ANN rows' bits and the fresh
// rows' bits shifted down (two small bitsets, kept until the next Extend);
// the ANN tier then follows the ExactBelow policy (exact brute force over
// the ANN rows for a selective filter, raised effort otherwise).
//
// # Ids and deletions
//
// A row's id is the number of rows added before it (Build's rows are 0
// to n-1, an Extend's the next ones; Merge shifts index i's ids by the
// Rows() of the indexes before it) and never changes: no id is given
// twice. Delete marks rows deleted; searches never return them. Their
// storage is freed by a compaction (Compact, the ANN rebuild of an
// Extend, Merge, DeserializeFrom), which moves rows but keeps their ids:
// the index then maps storage positions to ids (results, filters and
// Delete all speak ids). Rows() counts the ids given (a filter's size),
// Live() the rows not deleted, Stored() the rows held. cuVS's tiered
// index has no delete (both releases: create, build, extend, merge,
// search): the deletions are the package's, a bitset by position combined
// with the caller's filter into each tier's prefilter.
//
// # Building, growing, merging, persisting
//
// Build copies float32 rows (Go, host or device memory; host values must
// be finite) into the index's device storage and builds the ANN index
// over more than IndexParams.MinANNRows rows (otherwise every row is
// fresh). Extend appends to the fresh tier (Go, host or device memory);
// with CreateANNIndexOnExtend, once the tier holds more than MinANNRows
// rows, the ANN index is rebuilt over every row. Merge concatenates
// indexes and builds as Build does (an ANN index over every row above
// MinANNRows). SerializeTo/Serialize write the parameters, the tier split,
// the live rows and their ids (format version 2; version 1 files are
// read); DeserializeFrom/Deserialize rebuild the ANN index over the same
// ANN rows (cuVS has no serializer for a tiered index), so ids and the
// fresh tier's results are exact after a round trip and the ANN tier's
// approximate as any build is. NewSearcher adapts an index to
// package batch (its Rows() is the index's).
//
// Memory: the ANN rows are held twice on the device (the package's copy,
// which cuVS's CAGRA index may reference and which serialization, merges,
// rebuilds and the exact filter path read, and cuVS's tiered storage), the
// fresh rows once (plus their norms), the brute force over the ANN rows
// (norms) only once a selective filter needed it; deleted rows until a
// compaction; per composed search in flight (up to 32 kept idle) 12 bytes
// per candidate on the device and in pinned host memory. On the host: a bit per stored row once a row is deleted,
// 8 bytes per stored row once a compaction has moved rows (the id map).
//
// # Unfilled slots
//
// Every path that merges (both tiers, a filter, deletions, k past a
// tier's rows) and
// every result in Go memory (SearchSlice, the batcher) holds
// safe.SentinelID64 with distance +Inf in a slot it cannot fill: a filter
// allowing fewer than k rows, say. The one-call paths write what their
// backend writes (see Search).
//
// # What the C API does not say
//
//   - Only float32 (Build refuses other dtypes; 26.06's Destroy frees only
//     float32 indexes).
//   - The backend's metric wins over the tiered one when backend
//     parameters are given (convert_c_index_params reads the tiered metric
//     first, then the backend's): the package sets both to Metric.
//   - cuVS 26.08's CAGRA build inside a tiered index may keep a view of the
//     dataset it was given (build_upstream_ann with the caller's view, in
//     tiered_index.cuh): the package always builds from its own copy.
//   - An IVF backend builds k-means over the rows: at least NLists of them
//     (refused here before the C call).
//   - cuVS 26.08 boxes the index with its CAGRA dataset layout and checks
//     algorithm and layout on every call; 26.06 casts by the handle's algo.
//
// # The C API
//
// cuvsTieredIndexParamsCreate/Destroy (DefaultIndexParams, Build;
// _v2608 on 26.08, whose struct holds 26.08's CAGRA params),
// cuvsTieredIndexCreate/Destroy, cuvsTieredIndexBuild and
// cuvsTieredIndexSearch (the ANN tier), with the backends'
// cuvs...IndexParamsCreate/Destroy and ...SearchParamsCreate/Destroy
// (their defaults); cuvsBruteForceBuild/Search (the fresh tier, the exact
// filter path), cuvsMatrixCopy, cuvsRMMAlloc/Free. cuvsTieredIndexExtend
// and cuvsTieredIndexMerge are not called: the fresh tier is the
// package's, and a merge or rebuild builds a new ANN tier.
package tiered
