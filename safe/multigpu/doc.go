// Package multigpu is cuVS's single-node multi-GPU search: CAGRA, IVF-Flat
// and IVF-PQ indexes laid over the GPUs of one machine (an NCCL clique),
// and, on cuVS 26.08, multi-GPU k-means. Every function takes a
// *Resources, the multi-GPU handle, which is not a safe.Resources: the two
// cannot be mixed up.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := multigpu.NewResources() // every visible GPU (WithDevices: some)
//	defer res.Close()
//	data, _ := dlpack.NewHostMatrix(rows, n, dim) // host memory, as the C API wants
//	idx, _ := multigpu.BuildIVFFlat(res, data, nil) // sharded, cuVS's IVF-Flat defaults
//	defer idx.Close()
//	q, _ := dlpack.NewHostMatrix(queries, nq, dim)
//	out, _ := idx.SearchK(res, nil, q, 10) // int64 dataset row ids, nearest first
//
// An index is Sharded or Replicated (Mode). Build, Extend and Search take
// host memory (CPU, pinned or managed) and copy it to the devices; a search
// returns once its results are written to your host buffers. The base
// algorithm's parameters are those of packages cagra, ivfflat and ivfpq,
// checked and converted by them exactly as for a single-GPU build; argument
// errors about them name params.Base.<field>. A Batcher (package
// safe/batch) can sit in front of an index (the Searcher methods): many
// small requests become the big host batches the multi-GPU search wants.
// Distances and neighbor ids: see safe.Metric (what each metric returns
// here) and safe.Sentinel (unfilled slots).
//
// # Design
//
// cuVS does each device's work inside an OpenMP loop, where an error is
// not returned: it aborts the process (std::terminate, seen on the real
// 26.08.01). So what Go can know is checked first: IVF's Extend without ids
// gets Go's ids (cuVS refuses nil ids on a non-empty index, in that loop),
// CAGRA's Extend is refused (cuVS's multi-GPU CAGRA does not implement
// extend), and cuVS's split (⌈n/R⌉ rows a device, the last what is left:
// none, or in cuVS a negative count) is checked against IVF's n_lists and
// CAGRA's graph degree, which apply per device. There is no filter in the
// multi-GPU search, and no getter of any kind: Go counts Rows, Dim and the
// shards through Build and Extend; after Deserialize and Distribute, an IVF
// index's Rows is -1 and Dim 0, a CAGRA index's are read from the file's
// CAGRA headers (the mode and device count from the file's header).
// Neighbors are int64 for every algorithm, CAGRA included, and IVF's Extend
// ids are int64. Sharded ids are positions in the concatenation of the
// shards (cuVS adds to each device's ids the sizes of the devices before
// it): a sharded index refuses ids of your own, which would come back
// shifted. Each function names its C calls (cuvsMultiGpu*IndexParams,
// *SearchParams, *Index Create/Destroy, *Build, *Search, *Extend,
// *Serialize, *Deserialize, *Distribute for Cagra, IvfFlat and IvfPq; on
// 26.08 cuvsMultiGpuCagraUpdateDataset and cuvsMultiGpuKMeansFit): the
// search and IVF index parameters are written into the structs the Create
// functions make; CAGRA's index parameters are package cagra's, swapped in
// for the call.
package multigpu
