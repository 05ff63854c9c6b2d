// Package multigpu is cuVS's single-node multi-GPU search: CAGRA, IVF-Flat
// and IVF-PQ indexes laid over the GPUs of one machine (an NCCL clique),
// and, on cuVS 26.08, multi-GPU k-means. Every function takes a
// *Resources, the multi-GPU handle, which is not a safe.Resources: the two
// cannot be mixed up.
//
// Distances and neighbor ids: see package safe's doc, sections Distances
// and Neighbor ids (what each metric returns here, and unfilled slots).
//
// # Layouts and searches
//
// An index is Sharded (the default: device r holds rows [r·⌈n/R⌉,
// (r+1)·⌈n/R⌉) of the dataset, and every query is searched on every
// device, the per-device top-k merged on the root rank, by TreeMerge or
// MergeOnRootRank) or Replicated (every device holds the whole index; a
// search's queries are split in batches over the devices, LoadBalancer, or
// go whole to the next device, RoundRobin). Sharded results over exact
// backends (IVF-Flat with every list probed) are the exact kNN of the whole
// dataset; the ids are dataset rows.
//
// Build, Extend and Search take host memory (CPU, pinned or managed) and
// copy it to the devices; a search returns once its results are written
// to your host buffers. The base algorithm's parameters are those of
// packages cagra, ivfflat and ivfpq, checked and converted by them exactly
// as for a single-GPU build; argument errors about them name
// params.Base.<field>. A Batcher (package safe/batch) can sit in front of
// an index (the Searcher methods): many small requests become the big host
// batches the multi-GPU search wants.
//
// # What the C API does not say
//
//   - cuVS does each device's work inside an OpenMP loop, where an error
//     is not returned: it aborts the process (std::terminate, seen on the
//     real 26.08.01). So what Go can know is checked first. IVF's Extend
//     without ids gets Go's ids (cuVS refuses nil ids on a non-empty
//     index, in that loop), and CAGRA's Extend is refused: cuVS's
//     multi-GPU CAGRA does not implement extend.
//   - One GPU is enough: resources on one device lay an index over it
//     (sharded is then one shard), with every operation of two.
//   - There is no filter in the multi-GPU search, and no getter of any
//     kind: Go counts Rows, Dim and the shards through Build and Extend;
//     after Deserialize and Distribute, an IVF index's Rows is -1 and Dim
//     0, a CAGRA index's are read from the file's CAGRA headers (the mode
//     and device count from the file's header).
//   - Neighbors are int64 for every algorithm, CAGRA included; IVF's
//     Extend ids are int64.
//   - Sharded ids are positions in the concatenation of the shards: cuVS
//     adds to each device's ids the sizes of the devices before it. After
//     an Extend (split over the devices as Build splits) a row's id is not
//     its insertion order (see Shards), and ids of your own would come back
//     shifted: a sharded index refuses them.
//   - cuVS gives each device ⌈n/R⌉ rows and the last what is left: a
//     device can get none (or, in cuVS, a negative count), and IVF's
//     n_lists and CAGRA's graph degree apply per device. Both are checked
//     here before any C call.
//   - A sharded CAGRA search cannot fill more slots than a device has rows,
//     and cuVS adds the device's offset to the slots it leaves: k may not
//     exceed the smallest shard. (IVF's unfilled slots carry +Inf and come
//     back as safe.SentinelID64.)
//   - RoundRobin refuses a search of more rows than RowsPerBatch, and cuVS
//     divides by RowsPerBatch: 0 here means its default, 2^20.
//   - Deserialize needs resources of the file's device count; Distribute
//     reads a single-GPU index file and always gives a Replicated index.
//   - 26.08's UpdateDataset copies the dataset to every device without
//     checking its rows against the graph's: it must have Rows() rows.
//   - cuvsMultiGpuKMeansFit splits the host rows over the devices itself;
//     it refuses the hierarchical (balanced) mode, which is not offered.
//   - A library built without multi-GPU support (CUVS_BUILD_MG_ALGOS off)
//     lacks every function below: each call returns an error wrapping
//     generated.ErrMissingSymbol.
//
// # The C API
//
// cuvsMultiGpuResourcesCreate, cuvsMultiGpuResourcesCreateWithDeviceIds
// (NewResources, WithDevices), cuvsMultiGpuResourcesSetMemoryPool
// (WithMemoryPool), cuvsMultiGpuResourcesDestroy (Resources.Close).
// For each of Cagra, IvfFlat and IvfPq (CagraIndex, IVFFlatIndex,
// IVFPQIndex): cuvsMultiGpu*IndexParamsCreate/Destroy (Build*,
// DefaultDistribution), cuvsMultiGpu*SearchParamsCreate/Destroy (Search,
// DefaultDistribution), cuvsMultiGpu*IndexCreate/Destroy (Build*,
// Deserialize*, Distribute*, Close), cuvsMultiGpu*Build (Build*),
// cuvsMultiGpu*Search (Search, SearchK, Searcher), cuvsMultiGpu*Extend
// (Extend), cuvsMultiGpu*Serialize (Serialize, SerializeTo),
// cuvsMultiGpu*Deserialize (Deserialize*, Deserialize*From),
// cuvsMultiGpu*Distribute (Distribute*, Distribute*From). cuVS 26.08:
// cuvsMultiGpuCagraUpdateDataset (CagraIndex.UpdateDataset, with
// cuvsDatasetMakePadded and cuvsDatasetDestroy), cuvsMultiGpuKMeansFit
// (KMeansFit; cuvsKMeansParamsCreate/Destroy for DefaultKMeansParams).
// The search and IVF index parameters are written into the structs the
// Create functions make; CAGRA's index parameters are package cagra's,
// swapped in for the call.
package multigpu
