// Package hnsw is HNSW (hierarchical navigable small world graphs) as cuVS
// offers it: "build on the GPU, serve on the CPU". An index is made on the
// GPU — from a CAGRA index (FromCagra, FromCagraWithDataset) or from a
// dataset by ACE (Build) — and lives in host memory as an hnswlib index,
// searched on the CPU with int64 ids, as every index package's.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	data, _ := dlpack.NewHostMatrix(rows, n, dim) // rows: n × dim float32 in Go memory
//	ci, _ := cagra.Build(res, data, nil)           // on the GPU
//	idx, _ := hnsw.FromCagra(res, ci, nil)         // copies what it needs: ci may be closed
//	defer idx.Close()
//	out, _ := hnsw.SearchSlice(res, idx, nil, queries, 10, nil) // on the CPU
//	ids, dists := out.Row(0)                                    // int64 ids, nearest first
//
// FromCagra takes the CAGRA graph as the base layer and adds upper layers
// as IndexParams.Hierarchy says (none, built on the CPU, or on the GPU);
// Build runs ACE (a partitioned CAGRA build, optionally through files on
// disk) and converts the same way. SearchSlice (SearchSliceInto) searches
// from and into Go slices, with an optional filter (a *safe.Filter, which
// cuVS's C search lacks); Index.Search takes host tensors; SearchParams.Ef
// is the candidate list size (recall grows with it). One index serves many
// goroutines with one Ef (Index). Extend adds rows (not to a HierarchyNone
// index); Serialize writes hnswlib's format, which hnswlib itself reads;
// Deserialize reads it back given the element type and metric. Distances
// and neighbor ids: see safe.Metric and safe.Sentinel (hnswlib's distances:
// squared L2, and 1 - <q, x> for InnerProduct, the only two metrics with an
// hnswlib space).
//
// # Design
//
// What the C API does not say: cuvsHnswSearch has no filter and no stream
// (it runs on the CPU; SearchSlice's filter is an over-fetch and drop over
// the bitset's host words, repeated for the queries left short). It sets
// hnswlib's ef on the index itself on every call (index::set_ef writes
// ef_), so two searches of one index with different ef race; nothing else
// of a search is shared (hnswlib's searchKnn is const: visited lists from
// a mutex-guarded pool, atomic counters), so searches with the same ef
// overlap and give exactly the rows of serial ones. An index left on disk
// by ACE is loaded by the first search, unlocked. The package lets
// searches of one ef overlap, makes another ef wait for them, and runs
// each search alone until one has loaded the index. hnswlib pops k results
// from a queue that may hold fewer (a debug assert only): k > Rows() is
// refused. cuvsHnswDeserialize reads the element type from the handle, not
// the file (the package sets it), and takes the dimension, which hnswlib
// sizes each vector by: the package reads it from the file's vector size
// (Deserialize says what cannot be checked). cuvsHnswSearch writes uint64
// labels, handed int64 outputs; a base-layer-only file read with a
// hierarchy, Extend of a HierarchyNone index and labels of 2^63 - 1 or
// more are refused. cuvsHnswBuild refuses params without ACE parameters,
// which cuvsHnswIndexParamsCreate leaves nil. On 26.08 cuvsHnswFromCagra
// reads every CAGRA index as a device-padded one (c/src/neighbors/hnsw.cpp),
// as package cagra's are. The same 17 C functions on 26.06 and 26.08, each
// named by the function calling it; params go to C as Go values (with
// C-made ACE parameters for Build); without HNSW in the library every call
// fails with ErrNotBuilt. Device memory: EstimateMemory (Build: ACE, then
// the GPU hierarchy), EstimateFromCagra and EstimateHostMemory; Build and
// a GPU-hierarchy FromCagra are refused before cuVS past what is left.
package hnsw
