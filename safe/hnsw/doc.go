// Package hnsw is HNSW (hierarchical navigable small world graphs) as cuVS
// offers it: "build on the GPU, serve on the CPU". An index is made on the
// GPU — from a CAGRA index (FromCagra, FromCagraWithDataset) or from a
// dataset by ACE (Build) — and lives in host memory as an hnswlib index,
// searched on the CPU with int64 ids, as every index package's: a service
// calling cagra.SearchSlice switches to the CPU copy by calling
// hnsw.SearchSlice.
//
// Distances and neighbor ids: see package safe's doc, sections Distances
// and Neighbor ids (what each metric returns here, and unfilled slots).
//
// # Making and searching
//
// FromCagra takes the CAGRA graph as the base layer and, per
// IndexParams.Hierarchy, adds no upper layers (HierarchyNone: searches
// start from the nearest of 32 evenly spaced rows), or builds them on the
// CPU or the GPU. Build runs ACE (a partitioned CAGRA build, optionally
// through files on disk) and converts the same way. Both copy what they
// need: the HNSW index references nothing afterwards.
//
// SearchSlice (SearchSliceInto) searches from and into Go slices, into a
// *safe.Results; Search takes queries, neighbors (int64, or cuVS's uint64)
// and distances (float32) tensors, all in host memory (CPU, pinned or
// managed); SearchParams.Ef is the candidate
// list size (recall grows with it) and SearchParams.NumThreads the CPU
// threads. Queries holding a NaN or an infinity are refused, as by every
// search of host data. Extend adds rows (not to a HierarchyNone index). Serialize writes
// hnswlib's format, which hnswlib itself reads; Deserialize reads it back
// given the element type and metric (the file gives the dimension).
//
// SearchSlice adds what the C API lacks, a filter (a *safe.Filter
// bitset, as in every package): an over-fetch and drop over the bitset's
// host words, repeated with a larger over-fetch for the queries that kept
// fewer than k rows.
//
// # Serving
//
// One index serves many goroutines at once: searches with the same
// SearchParams.Ef overlap (each goroutine with its own Resources; for
// one-query searches NumThreads 1, as cuVS starts an OpenMP team of
// NumThreads per call, all cores for 0). A search with another Ef waits
// for the searches in flight, then runs with the searches of its Ef: keep
// one Ef per index while serving. Copies of the index (DeserializeFrom)
// buy nothing more and cost the memory again.
//
// # What the C API does not say
//
//   - Search has no filter (cuvsHnswSearch takes none), and no stream:
//     it runs on the CPU and its results are there when it returns.
//   - cuvsHnswSearch sets hnswlib's ef on the index itself on every call
//     (index::set_ef writes ef_), so two searches of one index with
//     different ef race; nothing else of a search is shared (hnswlib's
//     searchKnn is const: visited lists from a mutex-guarded pool, atomic
//     counters), so searches with the same ef can overlap, and give
//     exactly the rows of serial ones (the search is deterministic). An
//     index left on disk by ACE is loaded by the first search, unlocked.
//     The package lets searches of one ef overlap, makes another ef wait
//     for them, and runs each search alone until one has loaded the index.
//   - k must not exceed the rows: hnswlib pops k results from a queue that
//     holds fewer (a debug assert only). The package refuses it.
//   - Distances are hnswlib's: squared L2, and 1 - <q, x> for
//     InnerProduct. Only L2Expanded and InnerProduct have an hnswlib space
//     ("Unsupported metric type was used" otherwise).
//   - FromCagra ignores IndexParams.M and Metric (the CAGRA index's graph
//     and metric are used); Deserialize reads Hierarchy only.
//   - cuvsHnswDeserialize reads the element type from the handle, not the
//     file (the package sets it), and takes the dimension, which hnswlib
//     sizes each vector by (reading beside its elements when it is
//     wrong): the file has no dtype or metric, only the byte size of a
//     vector, from which the package reads the dimension for the dtype
//     given (so a float32 file of dimension d read as 8-bit elements loads
//     with dimension 4d: Dim() tells; float16/float32 readings must be
//     finite). cuvsHnswSearch writes uint64 ids, hnswlib's labels; the
//     package hands int64 outputs to it as uint64 and refuses a file
//     with a label of 2^63 - 1 or more. A
//     missing file is fs.ErrNotExist, with its path, before any C call. A
//     base-layer-only file (HierarchyNone, cagra SerializeToHnswlib) read
//     with a hierarchy would be searched through upper layers it does not
//     have: refused.
//   - Extending a HierarchyNone index descends from the entry point through
//     upper layers that do not exist; cuVS documents Extend for the CPU
//     hierarchy: refused.
//   - cuvsHnswBuild refuses params without ACE parameters, which
//     cuvsHnswIndexParamsCreate leaves nil: a nil IndexParams.ACE means
//     DefaultACEParams here.
//   - On cuVS 26.08 cuvsHnswFromCagra reads every CAGRA index as a
//     device-padded one (c/src/neighbors/hnsw.cpp); the indexes package
//     cagra makes are (on 26.08 it binds their rows as a padded dataset).
//
// # The C API
//
// cuvsHnswIndexParamsCreate/Destroy (DefaultIndexParams),
// cuvsHnswAceParamsCreate/Destroy (DefaultACEParams, Build),
// cuvsHnswSearchParamsCreate/Destroy (DefaultSearchParams),
// cuvsHnswExtendParamsCreate/Destroy (DefaultExtendParams),
// cuvsHnswIndexCreate/Destroy (every constructor, Close), cuvsHnswBuild
// (Build), cuvsHnswFromCagra (FromCagra), cuvsHnswFromCagraWithDataset
// (FromCagraWithDataset), cuvsHnswExtend (Extend), cuvsHnswSearch (Search,
// SearchSlice, SearchSliceInto), cuvsHnswSerialize (Serialize, SerializeTo),
// cuvsHnswDeserialize (Deserialize, DeserializeFrom). The same 17
// functions on cuVS 26.06 and 26.08. The search and extend parameters are
// handed to C as Go values, the index parameters too (with C-made ACE
// parameters for Build). A libcuvs_c built without HNSW lacks them all:
// every call then fails with ErrNotBuilt (and safe.ErrMissingSymbol).
package hnsw
