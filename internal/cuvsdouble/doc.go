// Package cuvsdouble is test support only: an ABI test double of libcuvs_c
// (cuVS v26.06.00 or v26.08.01), a small C library of this project's own that
// tests compile with gcc and load in place of the real one.
//
// It is never a default and never loaded unless a test asks for it: nothing
// outside tests imports this package, and the bindings only load it from the
// path a test hands them.
//
// # What the double is
//
// The C sources (embedded from csrc/) define the functions of cuVS's core C
// API, brute force, CAGRA, IVF-Flat, IVF-PQ, IVF-SQ and refine (indexes
// built with a small deterministic k-means, searches that probe only
// n_probes lists, PQ and SQ codes that lose precision), and the NN-Descent
// parameter struct CAGRA's graph build refers to, with the exact signatures of the bindings'
// generated declarations header (generated/cuvs_decls.h), so the same Go code
// that drives libcuvs_c drives the double. Its semantics are honest but run on
// the CPU:
//
//   - there is no GPU: "device" memory is host memory. cuvsRMMAlloc is
//     posix_memalign (filled with 0xCD), a kDLCUDA, kDLCUDAHost or
//     kDLCUDAManaged tensor is read through its data pointer as host memory,
//     cuvsMatrixCopy is a strided memcpy;
//   - but device memory is counted as a GPU's is (csrc/dbl_devmem.c): each
//     fake device has a size (141 GiB, CUVSDOUBLE_DEVICE_BYTES,
//     Control.SetDeviceBytes), cudaMemGetInfo reports its free memory,
//     cuvsRMMPoolMemoryResourceEnable makes RMM's pool (initial and maximum
//     sizes a percent of the free memory, refusing past the maximum with
//     "Maximum pool size exceeded"), and cuvsRMMAlloc, cudaMalloc and the
//     device storage of the indexes the double builds (what cuVS would
//     allocate for them: the IVF lists at capacity, CAGRA's build phases
//     and graph, brute force's norms, NN-Descent's working set, 26.08's
//     padded datasets) are taken from it, refused with RMM's
//     rmm::out_of_memory text when they do not fit. Control.DeviceMemory
//     reports what the memory resource handed out and its peak;
//   - work is asynchronous where the GPU's is (csrc/dbl_stream.c): what a
//     function writes into device or pinned memory the double allocated
//     (search outputs, cuvsMatrixCopy between such buffers) is queued on the
//     resources' stream and appears only when that stream is synchronized
//     (cuvsStreamSync, cudaStreamSynchronize, the next call on the stream,
//     a copy to pageable memory); until then the destination reads 0xFF
//     bytes (NaN, -1). A fresh resources' stream is cudaStreamPerThread, as
//     RAFT's: a different queue per OS thread, so work queued from one thread
//     and synchronized from another is not waited for, as on a GPU. The
//     double exports cudaStreamCreateWithFlags / cudaStreamDestroy /
//     cudaStreamSynchronize / cudaDeviceSynchronize (streams are counted:
//     one not destroyed is a leak) and cudaEventCreateWithFlags /
//     cudaEventRecord / cudaEventSynchronize / cudaEventDestroy (events are
//     counted too; synchronizing one flushes the stream it was recorded on,
//     and Control.EventWaits counts the waits on blocking-sync events).
//     Freeing memory first completes all queued work;
//   - brute force returns the exact k nearest neighbours (ties to the
//     smaller row id, distances accumulated in float32 in dimension order),
//     so results can be checked against a kNN computed in Go;
//   - CAGRA is approximate, as the real one: its graph is a pruned,
//     perturbed kNN graph with reverse edges (not the kNN graph), its search
//     a greedy walk over that graph from pseudo-random starting rows driven
//     by itopk_size, search_width, min/max_iterations, num_random_samplings
//     and rand_xor_mask; its recall at the sizes unit tests use lies in the
//     ranges measured on the real library. A bitset filter is applied as
//     cuVS applies it (filtered rows are walked through but not returned),
//     so a selective filter leaves slots empty; empty slots hold id
//     0x7FFFFFFF in uint32 and int64 neighbors alike, distance FLT_MAX
//     (-FLT_MAX for inner product). Results are deterministic;
//   - the unkind parts of the real C API are kept: cuvsCagraDeserialize and
//     cuvsBruteForceDeserialize leave the index dtype's lanes as they were
//     (0 after Create), compression refuses data its VQ/PQ training cannot
//     use, and an ACE build in disk mode gives an index that refuses search,
//     serialization and extend;
//   - the checks cuVS makes on tensors and parameters come back with cuVS's
//     words, in RAFT's multi-line format ("RAFT failure at file=... line=...:
//     <reason>" followed by "Obtained N stack frames" and frames), through the
//     same thread-local last-error text;
//   - parameter structs are created with cuVS's default values, and
//     cuvsCagraIndexParamsDestroy frees graph_build_params by build_algo as
//     cuVS does.
//
// # One build per release
//
// Each build of the double is one cuVS release's libcuvs_c (Release option,
// CUVSDOUBLE_RELEASE, cuvsdouble-build -release): compiled against
// generated/cuvs_decls.h in that release's mode (-DCUVSGO_RELEASE=2606 or
// 2608), it exports that release's functions only (26.08's has no
// cuvsCagraSerialize/Deserialize; 26.06's none of the Dataset API), with its
// struct layouts (26.08's cuvsCagraIndexParams is 48 bytes, without
// compression) and cuvsVersionGet reporting 26.6.0 or 26.8.1. Build and
// BuildFile build 26.06 unless told otherwise; cuvsdouble-build the newest.
// Neither build has k-means, multi-GPU CAGRA or the other APIs the bindings
// declare but the safe layer does not use.
//
// The 26.08 build follows c/src of v26.08.01 (csrc/dbl_2608.c,
// csrc/dbl_cagra_2608.inc): the Dataset API (cuvsDatasetMakePadded copies
// into rows padded to 16 bytes and refuses a source that needs no copy,
// MakePaddedView and MakeStandardView reference the caller's rows, the
// padded view only when they are already padded); every CAGRA index
// references the rows of the dataset it was built, extended, merged or
// updated with, never copies them (an owning dataset destroyed, or the
// memory under a view freed, while an index references it is a violation,
// as cuvsRMMFree of memory an index references); search, extend and
// multi-partition search refuse all but device-padded indexes;
// cuvsCagraExtend takes old and new rows in one device-padded dataset
// (rows [0, new_start_row) not the index's own are a violation: cuVS does
// not check them); files are of the double's own format, versioned 6 as
// cuVS 26.08's, and a 26.06 file is refused with cuVS's version mismatch;
// cuvsSelectK returns the k smallest unsorted (in input order).
//
// # What it adds for tests
//
// A Control, loaded from the same library file, reaches functions that are
// clearly not part of cuVS (prefix cuvsdouble_): failure injection for any
// call by name, a settable version, counters of every create/destroy and
// alloc/free, call counts, and "violations": misuses that would be undefined
// behaviour, a crash or a leak in the real library (a cuvsResources_t used by
// two threads at once, memory freed while an index still references it, a
// bitset shorter than the index, the cuvsCagraIndexParamsDestroy trap, a
// cuvsRMMHostFree on a thread that never allocated, ...). The double does not
// crash on those: it records them and, where the call cannot go on, fails it.
// AssertBalanced fails a test on any unbalanced counter or any violation.
//
// For benchmarks of the bindings' own cost, instant mode (SetInstant) makes
// the search functions return success at once and CAGRA's build install a
// hollow index without reading the dataset.
//
// # The H200 delay model
//
// With CUVS_DOUBLE_MODEL=h200 in the environment (or Control.SetModel),
// every cuvsCagraSearch sleeps what a CAGRA search of its batch takes on an
// H200 with the searches then in flight (Control.ModelDelay), on the kernel
// cuVS would run (MULTI_CTA, or AUTO below 264 queries: multi-CTA; else
// single-CTA; Control.ModelSearches counts them). Both fits are to p50
// latencies measured there (N = 100k, D = 128, degree 32, itopk 64, search
// + sync). Single-CTA (v26.06.00, batch 1 to 1024, 1 to 16 callers; within
// about 7%): a lone search takes 341 µs plus 0.25 µs a query; concurrent
// batches share a GPU that does about 1.25 million queries a second (1.98
// million for batches of 1024), and each other caller adds 1.9 µs.
// Multi-CTA (v26.08.01, 1 to 64 callers; within about 12%): a lone search
// takes 213 µs plus 0.24 µs a query; concurrent batches share about 1.15
// million queries a second up to batches of 256, 1.85 million at 512 and
// 2.45 million at 1024; and the library runs at most ~38k multi-CTA
// searches a second (27 µs each, serialized), so 32 one-query searches at
// once take ~830 µs each. With CUVS_DOUBLE_INSTANT=1 too, searches then
// return without computing anything (instant mode): examples/serving
// against the double then shows the batcher's policy at the H200's costs,
// without the double's CPU work. The numbers mean nothing else.
//
// Build options leave chosen cuVS functions out of the library (Omit), to test
// the missing-symbol path.
package cuvsdouble
