/*
 * cuvsdouble: an ABI test double of libcuvs_c, written for the cuvs-go tests.
 *
 * THIS IS NOT cuVS. There is no GPU anywhere in this library:
 *   - "device" memory is host memory: cuvsRMMAlloc is posix_memalign, and a
 *     kDLCUDA / kDLCUDAHost / kDLCUDAManaged tensor is read through its data
 *     pointer as ordinary host memory;
 *   - cuvsMatrixCopy is a (strided) memcpy, streams are dummy handles and
 *     cuvsStreamSync does nothing;
 *   - brute force returns the exact k nearest neighbours; CAGRA is approximate
 *     (a graph walk, see dbl_cagra_graph.c).
 *
 * Internal header shared by the dbl_*.c files; nothing here is exported except
 * the cuVS functions (DBL_API) and the cuvsdouble_* control functions.
 */
#ifndef CUVSDOUBLE_DBL_H
#define CUVSDOUBLE_DBL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>

/*
 * The declarations come from the bindings' own generated header, so the
 * compiler checks every definition below against the signatures the bindings
 * were generated from. CUVSDOUBLE_REAL_HEADERS builds against cuVS's and
 * DLPack's headers instead (a cross-check; needs a cuda_runtime.h stand-in).
 */
#ifdef CUVSDOUBLE_REAL_HEADERS
#include <cuvs/core/c_api.h>
#include <cuvs/distance/distance.h>
#include <cuvs/neighbors/common.h>
#include <cuvs/neighbors/brute_force.h>
#include <cuvs/neighbors/cagra.h>
#include <cuvs/neighbors/ivf_pq.h>
#include <cuvs/neighbors/nn_descent.h>
#include <cuvs/neighbors/all_neighbors.h>
#include <cuvs/neighbors/vamana.h>
#include <cuvs/neighbors/ivf_flat.h>
#include <cuvs/neighbors/ivf_sq.h>
#include <cuvs/neighbors/refine.h>
#include <cuvs/preprocessing/quantize/binary.h>
#include <cuvs/preprocessing/quantize/pq.h>
#include <cuvs/preprocessing/quantize/scalar.h>
#if defined(CUVSGO_RELEASE) && CUVSGO_RELEASE >= 2608
#include <cuvs/core/dataset.h>
#include <cuvs/selection/select_k.h>
#endif
#else
#include "cuvs_decls.h"
#endif

/* The cuVS release this build of the double is (build.go passes
 * -DCUVSGO_RELEASE=2606 or 2608, the mode of cuvs_decls.h that declares that
 * release's functions under their C names with its types, and the version
 * cuvsVersionGet reports). DBL_R2606(x) / DBL_R2608(x) keep x in that
 * release's build only. */
#ifndef CUVSGO_RELEASE
#define CUVSGO_RELEASE 2606
#endif
#define DBL_RELEASE CUVSGO_RELEASE
#if DBL_RELEASE == 2606
#define DBL_R2606(x) x
#define DBL_R2608(x)
#else
#define DBL_R2606(x)
#define DBL_R2608(x) x
#endif
#ifndef DBL_VERSION_MAJOR
#define DBL_VERSION_MAJOR 26
#define DBL_VERSION_MINOR 6
#define DBL_VERSION_PATCH 0
#endif

#define DBL_API __attribute__((visibility("default")))
#define DBL_HIDDEN __attribute__((visibility("hidden")))

/* cudaDataType_t values used by the IVF-PQ defaults (CUDA's library_types.h). */
#define DBL_CUDA_R_32F 0
#define DBL_CUDA_R_16F 2

/* cudaStreamPerThread: the stream a fresh raft::resources reports. */
#define DBL_STREAM_PER_THREAD ((cudaStream_t)(uintptr_t)0x2)

/* Every cuVS function this library defines. The order is the index used by
 * call counters and fault injection; 'E' marks functions returning
 * cuvsError_t (those can be made to fail), 'V' the others. */
#define DBL_FUNCS(X)                                  \
  X(cuvsGetLastErrorText, V)                          \
  X(cuvsSetLastErrorText, V)                          \
  X(cuvsGetLogLevel, V)                               \
  X(cuvsSetLogLevel, V)                               \
  X(cuvsResourcesCreate, E)                           \
  X(cuvsResourcesDestroy, E)                          \
  X(cuvsStreamSet, E)                                 \
  X(cuvsStreamGet, E)                                 \
  X(cuvsStreamSync, E)                                \
  X(cuvsDeviceIdGet, E)                               \
  X(cuvsMultiGpuResourcesCreate, E)                   \
  X(cuvsMultiGpuResourcesCreateWithDeviceIds, E)      \
  X(cuvsMultiGpuResourcesDestroy, E)                  \
  X(cuvsMultiGpuResourcesSetMemoryPool, E)            \
  X(cuvsRMMAlloc, E)                                  \
  X(cuvsRMMFree, E)                                   \
  X(cuvsRMMPoolMemoryResourceEnable, E)               \
  X(cuvsRMMMemoryResourceReset, E)                    \
  X(cuvsRMMHostAlloc, E)                              \
  X(cuvsRMMHostFree, E)                               \
  X(cuvsVersionGet, E)                                \
  X(cuvsMatrixCopy, E)                                \
  X(cuvsMatrixSliceRows, E)                           \
  X(cuvsBruteForceIndexCreate, E)                     \
  X(cuvsBruteForceIndexDestroy, E)                    \
  X(cuvsBruteForceBuild, E)                           \
  X(cuvsBruteForceSearch, E)                          \
  X(cuvsBruteForceSerialize, E)                       \
  X(cuvsBruteForceDeserialize, E)                     \
  X(cuvsCagraIndexParamsCreate, E)                    \
  X(cuvsCagraIndexParamsDestroy, E)                   \
  X(cuvsCagraCompressionParamsCreate, E)              \
  X(cuvsCagraCompressionParamsDestroy, E)             \
  X(cuvsAceParamsCreate, E)                           \
  X(cuvsAceParamsDestroy, E)                          \
  X(cuvsCagraIndexParamsFromHnswParams, E)            \
  X(cuvsCagraExtendParamsCreate, E)                   \
  X(cuvsCagraExtendParamsDestroy, E)                  \
  X(cuvsCagraSearchParamsCreate, E)                   \
  X(cuvsCagraSearchParamsDestroy, E)                  \
  X(cuvsCagraIndexCreate, E)                          \
  X(cuvsCagraIndexDestroy, E)                         \
  X(cuvsCagraIndexGetDims, E)                         \
  X(cuvsCagraIndexGetSize, E)                         \
  X(cuvsCagraIndexGetGraphDegree, E)                  \
  X(cuvsCagraIndexGetDataset, E)                      \
  X(cuvsCagraIndexGetGraph, E)                        \
  X(cuvsCagraBuild, E)                                \
  X(cuvsCagraExtend, E)                               \
  X(cuvsCagraSearch, E)                               \
  DBL_R2606(X(cuvsCagraSerialize, E))                 \
  X(cuvsCagraSerializeToHnswlib, E)                   \
  DBL_R2606(X(cuvsCagraDeserialize, E))               \
  X(cuvsCagraIndexFromArgs, E)                        \
  X(cuvsCagraMerge, E)                                \
  X(cuvsIvfPqIndexParamsCreate, E)                    \
  X(cuvsIvfPqIndexParamsDestroy, E)                   \
  X(cuvsIvfPqSearchParamsCreate, E)                   \
  X(cuvsIvfPqSearchParamsDestroy, E)                  \
  X(cuvsNNDescentIndexParamsCreate, E)                \
  X(cuvsNNDescentIndexParamsDestroy, E)               \
  DBL_FUNCS_GRAPHS(X)                                 \
  DBL_FUNCS_IVF_FLAT_SQ_REFINE(X)                     \
  DBL_FUNCS_IVF_PQ(X)                                 \
  DBL_FUNCS_KMEANS_PCA_DISTANCE(X)                    \
  DBL_FUNCS_QUANTIZE(X)                               \
  DBL_FUNCS_HNSW(X)                                   \
  DBL_FUNCS_TIERED(X)                                 \
  DBL_FUNCS_MG(X)                                     \
  DBL_R2608(DBL_FUNCS_2608(X))                        \
  DBL_R2608(DBL_FUNCS_MG_2608(X))

/* Multi-GPU indexes (dbl_mg.c). */
#define DBL_FUNCS_MG(X) \
  X(cuvsMultiGpuCagraIndexParamsCreate, E) \
  X(cuvsMultiGpuCagraIndexParamsDestroy, E) \
  X(cuvsMultiGpuCagraSearchParamsCreate, E) \
  X(cuvsMultiGpuCagraSearchParamsDestroy, E) \
  X(cuvsMultiGpuCagraIndexCreate, E) \
  X(cuvsMultiGpuCagraIndexDestroy, E) \
  X(cuvsMultiGpuCagraBuild, E) \
  X(cuvsMultiGpuCagraSearch, E) \
  X(cuvsMultiGpuCagraExtend, E) \
  X(cuvsMultiGpuCagraSerialize, E) \
  X(cuvsMultiGpuCagraDeserialize, E) \
  X(cuvsMultiGpuCagraDistribute, E) \
  X(cuvsMultiGpuIvfFlatIndexParamsCreate, E) \
  X(cuvsMultiGpuIvfFlatIndexParamsDestroy, E) \
  X(cuvsMultiGpuIvfFlatSearchParamsCreate, E) \
  X(cuvsMultiGpuIvfFlatSearchParamsDestroy, E) \
  X(cuvsMultiGpuIvfFlatIndexCreate, E) \
  X(cuvsMultiGpuIvfFlatIndexDestroy, E) \
  X(cuvsMultiGpuIvfFlatBuild, E) \
  X(cuvsMultiGpuIvfFlatSearch, E) \
  X(cuvsMultiGpuIvfFlatExtend, E) \
  X(cuvsMultiGpuIvfFlatSerialize, E) \
  X(cuvsMultiGpuIvfFlatDeserialize, E) \
  X(cuvsMultiGpuIvfFlatDistribute, E) \
  X(cuvsMultiGpuIvfPqIndexParamsCreate, E) \
  X(cuvsMultiGpuIvfPqIndexParamsDestroy, E) \
  X(cuvsMultiGpuIvfPqSearchParamsCreate, E) \
  X(cuvsMultiGpuIvfPqSearchParamsDestroy, E) \
  X(cuvsMultiGpuIvfPqIndexCreate, E) \
  X(cuvsMultiGpuIvfPqIndexDestroy, E) \
  X(cuvsMultiGpuIvfPqBuild, E) \
  X(cuvsMultiGpuIvfPqSearch, E) \
  X(cuvsMultiGpuIvfPqExtend, E) \
  X(cuvsMultiGpuIvfPqSerialize, E) \
  X(cuvsMultiGpuIvfPqDeserialize, E) \
  X(cuvsMultiGpuIvfPqDistribute, E)

/* Multi-GPU functions 26.08 added (dbl_mg.c). */
#define DBL_FUNCS_MG_2608(X) \
  X(cuvsMultiGpuCagraUpdateDataset, E) \
  X(cuvsMultiGpuKMeansFit, E)

/* Multi-GPU objects (dbl_mg.c): params from the ...ParamsCreate functions,
 * index handles, built indexes. */
#define DBL_KINDS_MG(X)                                 \
  X(K_MG_INDEX_PARAMS, "multi_gpu_index_params")        \
  X(K_MG_SEARCH_PARAMS, "multi_gpu_search_params")      \
  X(K_MG_INDEX, "multi_gpu_index")                      \
  X(K_MG_IMPL, "multi_gpu_index_data")

/* k-means, PCA and pairwise distances (dbl_kmeans_api.c, dbl_pca.c,
 * dbl_distance.c); the _v2 k-means functions are 26.06's only. */
#define DBL_FUNCS_KMEANS_PCA_DISTANCE(X)         \
  X(cuvsPairwiseDistance, E)                     \
  X(cuvsKMeansParamsCreate, E)                   \
  X(cuvsKMeansParamsDestroy, E)                  \
  X(cuvsKMeansFit, E)                            \
  X(cuvsKMeansPredict, E)                        \
  X(cuvsKMeansClusterCost, E)                    \
  DBL_R2606(X(cuvsKMeansParamsCreate_v2, E))     \
  DBL_R2606(X(cuvsKMeansParamsDestroy_v2, E))    \
  DBL_R2606(X(cuvsKMeansFit_v2, E))              \
  DBL_R2606(X(cuvsKMeansPredict_v2, E))          \
  X(cuvsPcaParamsCreate, E)                      \
  X(cuvsPcaParamsDestroy, E)                     \
  X(cuvsPcaFit, E)                               \
  X(cuvsPcaFitTransform, E)                      \
  X(cuvsPcaTransform, E)                         \
  X(cuvsPcaInverseTransform, E)
/* Functions 26.08 added (dbl_2608.c, dbl_cagra_2608.inc). */
#define DBL_FUNCS_2608(X)                         \
  X(cuvsResourcesCreateWithMemoryTracking, E)     \
  X(cuvsResourcesSetWorkspacePool, E)             \
  X(cuvsRMMAsyncMemoryResourceEnable, E)          \
  X(cuvsDatasetCreate, E)                         \
  X(cuvsDatasetMakePadded, E)                     \
  X(cuvsDatasetMakePaddedView, E)                 \
  X(cuvsDatasetMakeStandardView, E)               \
  X(cuvsDatasetDestroy, E)                        \
  X(cuvsDatasetGetMemType, E)                     \
  X(cuvsDatasetGetLayout, E)                      \
  X(cuvsDatasetGetIsOwning, E)                    \
  X(cuvsDatasetGetDtype, E)                       \
  X(cuvsCagraIndexParamsFromDataset, E)           \
  X(cuvsCagraUpdateDataset, E)                    \
  X(cuvsCagraSearchMultiPartition, E)             \
  X(cuvsCagraSerializeGraph, E)                   \
  X(cuvsCagraSerializeGraphAndDataset, E)         \
  X(cuvsCagraDeserializeGraph, E)                 \
  X(cuvsCagraDeserializeGraphAndDataset, E)       \
  X(cuvsSelectK, E)

/* IVF-Flat, IVF-SQ and refine (dbl_ivf_flat.c, dbl_ivf_sq.c, dbl_refine.c). */
#define DBL_FUNCS_IVF_FLAT_SQ_REFINE(X) \
  X(cuvsIvfFlatIndexParamsCreate, E)    \
  X(cuvsIvfFlatIndexParamsDestroy, E)   \
  X(cuvsIvfFlatSearchParamsCreate, E)   \
  X(cuvsIvfFlatSearchParamsDestroy, E)  \
  X(cuvsIvfFlatIndexCreate, E)          \
  X(cuvsIvfFlatIndexDestroy, E)         \
  X(cuvsIvfFlatIndexGetNLists, E)       \
  X(cuvsIvfFlatIndexGetDim, E)          \
  X(cuvsIvfFlatIndexGetCenters, E)      \
  X(cuvsIvfFlatBuild, E)                \
  X(cuvsIvfFlatSearch, E)               \
  X(cuvsIvfFlatSerialize, E)            \
  X(cuvsIvfFlatDeserialize, E)          \
  X(cuvsIvfFlatExtend, E)               \
  X(cuvsIvfSqIndexParamsCreate, E)      \
  X(cuvsIvfSqIndexParamsDestroy, E)     \
  X(cuvsIvfSqSearchParamsCreate, E)     \
  X(cuvsIvfSqSearchParamsDestroy, E)    \
  X(cuvsIvfSqIndexCreate, E)            \
  X(cuvsIvfSqIndexDestroy, E)           \
  X(cuvsIvfSqIndexGetNLists, E)         \
  X(cuvsIvfSqIndexGetDim, E)            \
  X(cuvsIvfSqIndexGetSize, E)           \
  X(cuvsIvfSqIndexGetCenters, E)        \
  X(cuvsIvfSqBuild, E)                  \
  X(cuvsIvfSqSearch, E)                 \
  X(cuvsIvfSqSerialize, E)              \
  X(cuvsIvfSqDeserialize, E)            \
  X(cuvsIvfSqExtend, E)                 \
  X(cuvsRefine, E)

/* HNSW (dbl_hnsw.c). */
#define DBL_FUNCS_HNSW(X)                \
  X(cuvsHnswAceParamsCreate, E)          \
  X(cuvsHnswAceParamsDestroy, E)         \
  X(cuvsHnswIndexParamsCreate, E)        \
  X(cuvsHnswIndexParamsDestroy, E)       \
  X(cuvsHnswIndexCreate, E)              \
  X(cuvsHnswIndexDestroy, E)             \
  X(cuvsHnswExtendParamsCreate, E)       \
  X(cuvsHnswExtendParamsDestroy, E)      \
  X(cuvsHnswFromCagra, E)                \
  X(cuvsHnswFromCagraWithDataset, E)     \
  X(cuvsHnswBuild, E)                    \
  X(cuvsHnswExtend, E)                   \
  X(cuvsHnswSearchParamsCreate, E)       \
  X(cuvsHnswSearchParamsDestroy, E)      \
  X(cuvsHnswSearch, E)                   \
  X(cuvsHnswSerialize, E)                \
  X(cuvsHnswDeserialize, E)

/* HNSW objects (dbl_hnsw.c): params, handles, built indexes. */
#define DBL_KINDS_HNSW(X)                              \
  X(K_HNSW_ACE_PARAMS, "hnsw_ace_params")              \
  X(K_HNSW_INDEX_PARAMS, "hnsw_index_params")          \
  X(K_HNSW_EXTEND_PARAMS, "hnsw_extend_params")        \
  X(K_HNSW_SEARCH_PARAMS, "hnsw_search_params")        \
  X(K_HNSW_INDEX, "hnsw_index")                        \
  X(K_HNSW_IMPL, "hnsw_index_data")

/* The tiered index (dbl_tiered.c). */
#define DBL_FUNCS_TIERED(X)              \
  X(cuvsTieredIndexCreate, E)            \
  X(cuvsTieredIndexDestroy, E)           \
  X(cuvsTieredIndexParamsCreate, E)      \
  X(cuvsTieredIndexParamsDestroy, E)     \
  X(cuvsTieredIndexBuild, E)             \
  X(cuvsTieredIndexSearch, E)            \
  X(cuvsTieredIndexExtend, E)            \
  X(cuvsTieredIndexMerge, E)

/* Tiered-index objects (dbl_tiered.c). */
#define DBL_KINDS_TIERED(X)                              \
  X(K_TIERED_INDEX_PARAMS, "tiered_index_params")        \
  X(K_TIERED_INDEX, "tiered_index")                      \
  X(K_TIERED_IMPL, "tiered_index_data")

/* IVF-PQ indexes (dbl_ivf_pq.c). */
#define DBL_FUNCS_IVF_PQ(X)                     \
  X(cuvsIvfPqIndexCreate, E)                    \
  X(cuvsIvfPqIndexDestroy, E)                   \
  X(cuvsIvfPqIndexGetNLists, E)                 \
  X(cuvsIvfPqIndexGetDim, E)                    \
  X(cuvsIvfPqIndexGetSize, E)                   \
  X(cuvsIvfPqIndexGetPqDim, E)                  \
  X(cuvsIvfPqIndexGetPqBits, E)                 \
  X(cuvsIvfPqIndexGetPqLen, E)                  \
  X(cuvsIvfPqIndexGetCenters, E)                \
  X(cuvsIvfPqIndexGetCentersPadded, E)          \
  X(cuvsIvfPqIndexGetPqCenters, E)              \
  X(cuvsIvfPqIndexGetCentersRot, E)             \
  X(cuvsIvfPqIndexGetRotationMatrix, E)         \
  X(cuvsIvfPqIndexGetListSizes, E)              \
  X(cuvsIvfPqIndexUnpackContiguousListData, E)  \
  X(cuvsIvfPqIndexGetListIndices, E)            \
  X(cuvsIvfPqBuild, E)                          \
  X(cuvsIvfPqBuildPrecomputed, E)               \
  X(cuvsIvfPqSearch, E)                         \
  X(cuvsIvfPqSerialize, E)                      \
  X(cuvsIvfPqDeserialize, E)                    \
  X(cuvsIvfPqExtend, E)                         \
  X(cuvsIvfPqTransform, E)

/* Quantizers: scalar, binary, product (dbl_quantize.c). */
#define DBL_FUNCS_QUANTIZE(X)                      \
  X(cuvsScalarQuantizerParamsCreate, E)            \
  X(cuvsScalarQuantizerParamsDestroy, E)           \
  X(cuvsScalarQuantizerCreate, E)                  \
  X(cuvsScalarQuantizerDestroy, E)                 \
  X(cuvsScalarQuantizerTrain, E)                   \
  X(cuvsScalarQuantizerTransform, E)               \
  X(cuvsScalarQuantizerInverseTransform, E)        \
  X(cuvsBinaryQuantizerParamsCreate, E)            \
  X(cuvsBinaryQuantizerParamsDestroy, E)           \
  X(cuvsBinaryQuantizerCreate, E)                  \
  X(cuvsBinaryQuantizerDestroy, E)                 \
  X(cuvsBinaryQuantizerTrain, E)                   \
  X(cuvsBinaryQuantizerTransform, E)               \
  X(cuvsBinaryQuantizerTransformWithParams, E)     \
  X(cuvsProductQuantizerParamsCreate, E)           \
  X(cuvsProductQuantizerParamsDestroy, E)          \
  X(cuvsProductQuantizerCreate, E)                 \
  X(cuvsProductQuantizerDestroy, E)                \
  X(cuvsProductQuantizerBuild, E)                  \
  X(cuvsProductQuantizerTransform, E)              \
  X(cuvsProductQuantizerInverseTransform, E)       \
  X(cuvsProductQuantizerGetPqBits, E)              \
  X(cuvsProductQuantizerGetPqDim, E)               \
  X(cuvsProductQuantizerGetPqCodebook, E)          \
  X(cuvsProductQuantizerGetVqCodebook, E)          \
  X(cuvsProductQuantizerGetEncodedDim, E)          \
  X(cuvsProductQuantizerGetUseVq, E)
/* NN-Descent, all-neighbors and Vamana (dbl_nndescent.c, dbl_allneighbors.c,
 * dbl_vamana.c). */
#define DBL_FUNCS_GRAPHS(X)                 \
  X(cuvsNNDescentIndexCreate, E)            \
  X(cuvsNNDescentIndexDestroy, E)           \
  X(cuvsNNDescentBuild, E)                  \
  X(cuvsNNDescentIndexGetGraph, E)          \
  X(cuvsNNDescentIndexGetDistances, E)      \
  X(cuvsAllNeighborsIndexParamsCreate, E)   \
  X(cuvsAllNeighborsIndexParamsDestroy, E)  \
  X(cuvsAllNeighborsBuild, E)               \
  X(cuvsVamanaIndexParamsCreate, E)         \
  X(cuvsVamanaIndexParamsDestroy, E)        \
  X(cuvsVamanaIndexCreate, E)               \
  X(cuvsVamanaIndexDestroy, E)              \
  X(cuvsVamanaIndexGetDims, E)              \
  X(cuvsVamanaBuild, E)                     \
  X(cuvsVamanaSerialize, E)

enum {
#define DBL_X(name, kind) F_##name,
  DBL_FUNCS(DBL_X)
#undef DBL_X
    F_COUNT
};

/* Object kinds: each has an acquired/released counter pair; most are also
 * tracked one by one in the registry (live pointers, sizes, borrows). */
#define DBL_KINDS(X)                                        \
  X(K_RES, "resources")                                     \
  X(K_STREAM, "cuda_stream")                                \
  X(K_EVENT, "cuda_event")                                  \
  X(K_MGRES, "multi_gpu_resources")                         \
  X(K_CAGRA_INDEX_PARAMS, "cagra_index_params")             \
  X(K_CAGRA_IVFPQ_PARAMS, "cagra_ivf_pq_params")            \
  X(K_CAGRA_COMPRESSION_PARAMS, "cagra_compression_params") \
  X(K_ACE_PARAMS, "ace_params")                             \
  X(K_ACE_BUILD_DIR, "ace_build_dir")                       \
  X(K_CAGRA_EXTEND_PARAMS, "cagra_extend_params")           \
  X(K_CAGRA_SEARCH_PARAMS, "cagra_search_params")           \
  X(K_IVFPQ_INDEX_PARAMS, "ivf_pq_index_params")            \
  X(K_IVFPQ_SEARCH_PARAMS, "ivf_pq_search_params")          \
  X(K_NND_INDEX_PARAMS, "nn_descent_index_params")          \
  X(K_BF_INDEX, "brute_force_index")                        \
  X(K_BF_IMPL, "brute_force_index_data")                    \
  X(K_CAGRA_INDEX, "cagra_index")                           \
  X(K_CAGRA_IMPL, "cagra_index_data")                       \
  X(K_IVFPQ_INDEX, "ivf_pq_index")                          \
  X(K_IVFPQ_IMPL, "ivf_pq_index_data")                      \
  X(K_RMM, "rmm")                                           \
  X(K_HOST, "host")                                         \
  X(K_META, "tensor_metadata")                              \
  X(K_BUFFER, "buffer")                                     \
  X(K_RMM_BYTES, "rmm_bytes")                               \
  X(K_HOST_BYTES, "host_bytes")                             \
  X(K_BUFFER_BYTES, "buffer_bytes")                         \
  DBL_KINDS_IVF_FLAT_SQ(X)                                  \
  DBL_KINDS_KMEANS_PCA(X)                                   \
  DBL_KINDS_QUANTIZE(X)                                     \
  DBL_KINDS_GRAPHS(X)                                       \
  DBL_KINDS_HNSW(X)                                         \
  DBL_KINDS_TIERED(X)                                       \
  DBL_KINDS_MG(X)                                           \
  DBL_R2608(DBL_KINDS_2608(X))

/* k-means and PCA params (dbl_kmeans_api.c, dbl_pca.c). */
#define DBL_KINDS_KMEANS_PCA(X)                 \
  X(K_KMEANS_PARAMS, "kmeans_params")           \
  X(K_KMEANS_PARAMS_V2, "kmeans_params_v2")     \
  X(K_PCA_PARAMS, "pca_params")
/* 26.08's objects: cuvsDataset handles (cuvsDatasetCreate, MakePadded,
 * MakePaddedView, MakeStandardView, DeserializeGraphAndDataset, Merge) and
 * the padded copies an owning dataset holds ("device" memory of the
 * library's, which an index built on it references), with their bytes. */
#define DBL_KINDS_2608(X)                   \
  X(K_DATASET, "dataset")                   \
  X(K_DATASET_STORAGE, "dataset_storage")   \
  X(K_DATASET_BYTES, "dataset_bytes")

/* IVF-Flat and IVF-SQ objects: params from ...Create, handles from
 * ...IndexCreate, built indexes (dbl_ivf_flat.c, dbl_ivf_sq.c). */
#define DBL_KINDS_IVF_FLAT_SQ(X)                          \
  X(K_IVF_FLAT_INDEX_PARAMS, "ivf_flat_index_params")     \
  X(K_IVF_FLAT_SEARCH_PARAMS, "ivf_flat_search_params")   \
  X(K_IVF_FLAT_INDEX, "ivf_flat_index")                   \
  X(K_IVF_FLAT_IMPL, "ivf_flat_index_data")               \
  X(K_IVF_SQ_INDEX_PARAMS, "ivf_sq_index_params")         \
  X(K_IVF_SQ_SEARCH_PARAMS, "ivf_sq_search_params")       \
  X(K_IVF_SQ_INDEX, "ivf_sq_index")                       \
  X(K_IVF_SQ_IMPL, "ivf_sq_index_data")

/* Quantizer params and handles (dbl_quantize.c); the trained binary and
 * product quantizers a handle points to are leaked by cuVS and counted by
 * none of these. */
#define DBL_KINDS_QUANTIZE(X)                                   \
  X(K_SCALAR_QUANTIZER_PARAMS, "scalar_quantizer_params")       \
  X(K_SCALAR_QUANTIZER, "scalar_quantizer")                     \
  X(K_BINARY_QUANTIZER_PARAMS, "binary_quantizer_params")       \
  X(K_BINARY_QUANTIZER, "binary_quantizer")                     \
  X(K_PQ_QUANTIZER_PARAMS, "product_quantizer_params")          \
  X(K_PQ_QUANTIZER, "product_quantizer")
/* NN-Descent, all-neighbors and Vamana objects. */
#define DBL_KINDS_GRAPHS(X)                             \
  X(K_NND_INDEX, "nn_descent_index")                    \
  X(K_NND_IMPL, "nn_descent_index_data")                \
  X(K_ALLN_PARAMS, "all_neighbors_params")              \
  X(K_VAMANA_PARAMS, "vamana_index_params")             \
  X(K_VAMANA_INDEX, "vamana_index")                     \
  X(K_VAMANA_IMPL, "vamana_index_data")

enum {
#define DBL_X(id, name) id,
  DBL_KINDS(DBL_X)
#undef DBL_X
    K_COUNT
};

/* ---- counters, registry, violations (dbl_core.c) ---- */

DBL_HIDDEN void dbl_count(int kind, int released, int64_t n);

/* ---- device memory model (dbl_devmem.c) ---- */

/* Bytes taken from a device's memory resource (rounded up to 256), and
 * where they came from. */
typedef struct {
  uint64_t bytes;
  uint64_t gen; /* the pool's generation, for pooled blocks */
  int pooled;
  int device;
} dbl_dev_block;

/* Takes bytes from the current device's memory resource as RMM would: the
 * pool when one is on (refused past its maximum), else the device (refused
 * past its size), with rmm::out_of_memory's text. *out is zeroed on
 * failure and for 0 bytes. */
DBL_HIDDEN cuvsError_t dbl_dev_take(size_t bytes, dbl_dev_block* out);
/* Gives a block back (zeroing it); a zero block does nothing. */
DBL_HIDDEN void dbl_dev_give(dbl_dev_block* b);
/* cuvsRMMPoolMemoryResourceEnable / Reset / AsyncMemoryResourceEnable on
 * the current device, and cuvsdouble_reset. */
DBL_HIDDEN cuvsError_t dbl_dev_pool_enable(int initial_percent, int max_percent);
DBL_HIDDEN void dbl_dev_pool_reset(void);
DBL_HIDDEN void dbl_dev_reset(void);
/* dbl_ivf_pq.c: an IVF-PQ build's device memory computed without data. */
struct cuvsIvfPqIndexParams;
DBL_HIDDEN cuvsError_t dbl_ivf_pq_model(const struct cuvsIvfPqIndexParams* p, int64_t n,
                                        uint32_t dim, int64_t esz, int host, uint64_t* peak,
                                        uint64_t* index, uint32_t geo[3]);

/* dbl_cagra.c, dbl_ivf_flat.c: a CAGRA and an IVF-Flat build's device
 * memory computed without data (for the tiered index's ANN tier). */
struct cuvsCagraIndexParams;
struct cuvsIvfFlatIndexParams;
DBL_HIDDEN cuvsError_t dbl_cagra_model(struct cuvsCagraIndexParams* params, int64_t n,
                                       int64_t dim, uint64_t copy_bytes, uint64_t* peak,
                                       uint64_t* index);
DBL_HIDDEN cuvsError_t dbl_ivf_flat_model(const struct cuvsIvfFlatIndexParams* p, int64_t n,
                                          int64_t dim, int64_t esz, uint64_t* peak,
                                          uint64_t* index);

typedef struct {
  void* p;
  int kind;
  size_t size;
  uint64_t id;      /* unique, never reused */
  uint64_t mr_gen;  /* memory-resource generation at allocation (RMM only) */
  int64_t borrows;  /* live indexes referencing this allocation */
  int device;       /* the calling thread's current device at allocation (RMM only) */
  dbl_dev_block blk; /* what cuvsRMMAlloc took from the device's memory resource */
} dbl_entry;

/* Adds p (counted as acquired). Returns its id. */
DBL_HIDDEN uint64_t dbl_reg_add(void* p, int kind, size_t size);
/* Copies p's entry to *out; returns its kind or -1 when p is not live. */
DBL_HIDDEN int dbl_reg_find(const void* p, dbl_entry* out);
/* Removes p if it is live with that kind (counted as released); returns 0,
 * or -1 (not live) / -2 (live with another kind, *actual_kind set). */
DBL_HIDDEN int dbl_reg_remove(void* p, int kind, dbl_entry* out, int* actual_kind);
/* Finds the live RMM or host allocation containing [p, p+n). */
DBL_HIDDEN int dbl_reg_containing(const void* p, size_t n, dbl_entry* out);
/* Changes the borrow count of the allocation with that id, if still live. */
DBL_HIDDEN void dbl_reg_borrow(uint64_t id, int delta);
/* Whether the allocation with that id is still live. */
DBL_HIDDEN int dbl_reg_id_live(uint64_t id);

/* Records a misuse that would be undefined behaviour, a crash or a leak in
 * the real library. Tests assert there are none. */
DBL_HIDDEN void dbl_violation(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* The degrees (intermediate, graph) a single-GPU CAGRA build over n rows
 * uses, lowered as cagra_build.cuh's check_graph_degree does, or the error
 * it fails with (one row: a recorded violation); dbl_cagra.c. */
DBL_HIDDEN cuvsError_t cg_degrees(cuvsCagraIndexParams_t params, int64_t n, size_t* intermediate,
                                  size_t* degree);

/* Counted internal storage. */
DBL_HIDDEN void* dbl_buf_alloc(size_t bytes);
/* The double's file readers check the sizes a header claims against what
 * the file holds before allocating (the safe layer's npy.Walk makes that
 * check of cuVS's own formats before any C call): dbl_file_holds reports
 * whether a*b*c + d*e*f bytes (saturating products) remain after f's
 * position; it is true where the size cannot be read. */
DBL_HIDDEN int dbl_file_holds(FILE* f, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e,
                              uint64_t g);
/* Whether f is at the end of its index: at end-of-file, or followed by
 * exactly the bindings' checksum trailer recording f's position as its data
 * length (safe/internal/integrity: 4 bytes per chunk, a 32-byte footer
 * starting "\x89cuvsgo\n"; its sums are the safe layer's to check). cuVS's
 * readers stop at their last field and never look further
 * (brute_force_serialize.cu, cagra_serialize.cuh, ivf_flat_serialize.cuh,
 * ivf_pq_serialize.cuh, ivf_sq_serialize.cuh, 26.06 and 26.08); the
 * double's formats end where the index does and the double refuses other
 * bytes after them itself, standing in for the safe layer's npy.Walk,
 * which refuses them in cuVS's formats up to the trailer's data length. */
DBL_HIDDEN int dbl_at_end(FILE* f);
DBL_HIDDEN void dbl_buf_free(void* p, size_t bytes);
/* Tensor metadata handed to callers with a deleter (shape/strides arrays). */
DBL_HIDDEN int64_t* dbl_meta_alloc(int n);
DBL_HIDDEN void dbl_meta_deleter(DLManagedTensor* t);

/* ---- errors ---- */

DBL_HIDDEN void dbl_set_error(const char* text);
DBL_HIDDEN cuvsError_t dbl_ok(void);
/* "RAFT failure at file=F line=L: <msg>" plus a stack-trace block, as
 * RAFT_EXPECTS / RAFT_FAIL produce. */
DBL_HIDDEN cuvsError_t dbl_raft_fail(const char* file, int line, const char* fmt, ...)
  __attribute__((format(printf, 3, 4)));
/* "exception occurred! file=F line=L: <msg>" plus stack trace, as raft's THROW. */
DBL_HIDDEN cuvsError_t dbl_throw_fail(const char* file, int line, const char* fmt, ...)
  __attribute__((format(printf, 3, 4)));
/* A plain std::exception text (std::invalid_argument and friends). */
DBL_HIDDEN cuvsError_t dbl_plain_fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#define RAFT_FAIL(...) dbl_raft_fail(__FILE_NAME__, __LINE__, __VA_ARGS__)
#define RAFT_THROW(...) dbl_throw_fail(__FILE_NAME__, __LINE__, __VA_ARGS__)
#define EXPECTS(cond, ...)                           \
  do {                                               \
    if (!(cond)) { return RAFT_FAIL(__VA_ARGS__); }  \
  } while (0)
#define TRY(expr)                                    \
  do {                                               \
    cuvsError_t dbl_st_ = (expr);                    \
    if (dbl_st_ != CUVS_SUCCESS) { return dbl_st_; } \
  } while (0)

/* Entry of every exported cuVS function: counts the call and applies an armed
 * fault. Returns 1 when the call must fail now (error text already set). */
DBL_HIDDEN int dbl_enter(int fn);
#define DBL_ENTER(name)                                 \
  do {                                                  \
    if (dbl_enter(F_##name)) { return CUVS_ERROR; }     \
  } while (0)

/* ---- streams (dbl_stream.c): asynchronous writes to device/pinned memory ---- */

/* Runs the work queued on stream s (cudaStreamPerThread: the calling
 * thread's), or on every stream. */
DBL_HIDDEN void dbl_stream_flush(cudaStream_t s);
DBL_HIDDEN void dbl_stream_flush_all(void);
/* Makes what a function just wrote into t (device or pinned memory of the
 * double's) visible only once stream s is flushed; t reads 0xFF bytes until
 * then. Pageable memory is left as written. */
DBL_HIDDEN void dbl_async_output(cudaStream_t s, const DLTensor* t);
/* Queues a row copy on s when both sides are device or pinned memory of the
 * double's (dst poisoned until then) and returns 1; returns 0 when the
 * caller must copy now (pageable memory on a side). */
DBL_HIDDEN int dbl_async_copy(cudaStream_t s, char* dst, const char* src, int64_t rows,
                              size_t row_bytes, size_t dst_stride, size_t src_stride);

/* The H200 delay model (CUVS_DOUBLE_MODEL=h200): sleeps what a CAGRA search
 * of batch rows takes on an H200 with the searches now in flight, on the
 * multi-CTA kernel when multi is set, else the single-CTA one. No-op when
 * the model is off. */
DBL_HIDDEN void dbl_model_begin(int64_t batch, int multi);

/* ---- resources (dbl_core.c) ---- */

typedef struct dbl_res {
  uint64_t magic;
  int multi;
  int device_id;
  cudaStream_t stream;
  atomic_int busy;
  uint64_t reg_id; /* the registry's id of this handle (dbl_reg_id_live) */
  /* multi-GPU resources (dbl_mg.c): the ranks' devices */
  int n_ranks;
  int rank_device[64];
} dbl_res;

/* dbl_async_restore queues on s the copy of bytes bytes of src (owned:
 * freed once copied) over dst, which keeps its contents until then; 0 when
 * dst is not memory the double allocated as device or pinned (the caller
 * then copies now). */
DBL_HIDDEN int dbl_async_restore(cudaStream_t s, void* dst, void* src, size_t bytes);

/* dbl_async_output of a and b (NULL ones skipped) on r's stream. */
DBL_HIDDEN void dbl_async_outputs(dbl_res* r, DLManagedTensor* a, DLManagedTensor* b);

/* Validates res and marks it in use by this thread (detects two threads using
 * one cuvsResources_t at once). Pair with dbl_res_release. */
DBL_HIDDEN cuvsError_t dbl_res_acquire(cuvsResources_t res, dbl_res** out);
DBL_HIDDEN void dbl_res_release(dbl_res* r);

DBL_HIDDEN extern atomic_int dbl_strict_device;

/* Fake CUDA devices (dbl_core.c). The double exports cudaGetDeviceCount,
 * cudaSetDevice and cudaGetDevice; each thread has a current device (0 on a
 * new thread, as in CUDA). With more than one device (cuvsdouble_set_device_count),
 * resources belong to the device current when they were created, and every
 * call on them made with another device current fails (see dbl_res_acquire). */
#define DBL_MAX_DEVICES 64
DBL_HIDDEN int dbl_current_device(void);
DBL_HIDDEN int dbl_device_count(void);

/* Instant mode (cuvsdouble_set_instant), for benchmarks of the bindings: the
 * search functions return CUVS_SUCCESS at once, validating, reading, counting
 * and writing nothing (the last-error text is left as it was), and
 * cuvsCagraBuild installs a hollow index (shape, dtype and degree only, no
 * dataset or graph: getters and Destroy work, anything else on it fails)
 * without reading the dataset's data. */
DBL_HIDDEN extern atomic_int dbl_instant;
#define DBL_INSTANT() atomic_load_explicit(&dbl_instant, memory_order_relaxed)

/* ---- tensors (dbl_tensor.c) ---- */

enum { WANT_DEVICE = 1, WANT_HOST = 2 };
enum { LAYOUT_ROW = 0, LAYOUT_COL = 1 };

DBL_HIDDEN int dl_dev_compat(const DLTensor* t);
DBL_HIDDEN int dl_host_compat(const DLTensor* t);
DBL_HIDDEN int dl_c_contig(const DLTensor* t);
DBL_HIDDEN int dl_f_contig(const DLTensor* t);
DBL_HIDDEN size_t dl_elem_size(DLDataType dt);
DBL_HIDDEN int64_t dl_numel(const DLTensor* t);
/* NULL checks and the byte_offset note; what names the argument. */
DBL_HIDDEN cuvsError_t dl_check_ptr(const DLManagedTensor* mt, const char* what);
/* The checks cuVS's from_dlpack<mdspan> makes, in its order and words. */
/* The unfused nearest-centroid path of cuVS's k-means on the device the
 * double imitates (SM 9.x; dbl_kmeans_api.c says where it comes from):
 * dbl_unfused_tf32 tells whether a problem of rows x centers float32 takes
 * it, dbl_tf32_l2 is its squared distance (TF32 product, float norms,
 * clamped at 0), dbl_tf32 a float rounded to TF32. */
DBL_HIDDEN float dbl_tf32(float v);
DBL_HIDDEN int dbl_unfused_tf32(int64_t rows, int64_t centers);
DBL_HIDDEN float dbl_tf32_l2(const float* x, const float* c, int64_t d);
DBL_HIDDEN cuvsError_t dl_view(const DLManagedTensor* mt, int layout, int code, int bits, int where,
                               int ndim);
/* Under strict device mode, kDLCUDA/kDLCUDAManaged data must lie inside a live
 * cuvsRMMAlloc allocation and kDLCUDAHost data inside a cuvsRMMHostAlloc one. */
DBL_HIDDEN cuvsError_t dl_strict(const DLTensor* t, const char* what);
/* knn_search's and dbl_pd_one's metrics for inputs already rewritten in
 * place as cuVS's Hellinger (square roots of both) and KL divergence
 * (logarithms of y) do (dbl_rewrite.c). */
enum { KNN_HELLINGER_REWRITTEN = 1000, KNN_KL_REWRITTEN = 1001 };

/* dbl_rewrite.c: cuVS's in-place rewrites. dbl_rewrite applies op to x (nx
 * elements of dt) and y (ny; y may be NULL), each element once; then
 * dbl_rewrite_undo queues the undoing op on s (at once for memory not the
 * GPU's). */
enum { DBL_RW_SQRT = 1, DBL_RW_SQUARE, DBL_RW_LOG, DBL_RW_EXP };
DBL_HIDDEN void dbl_rewrite(void* x, int64_t nx, void* y, int64_t ny, DLDataType dt, int op);
DBL_HIDDEN void dbl_rewrite_undo(cudaStream_t s, void* x, int64_t nx, void* y, int64_t ny, DLDataType dt, int op);

DBL_HIDDEN float dl_half_to_float(uint16_t h);
DBL_HIDDEN uint16_t dl_float_to_half(float f);
/* Loads row i (dim elements, element strides rs/cs) as floats. */
DBL_HIDDEN void dl_load_row(const void* base, DLDataType dt, int64_t rs, int64_t cs, int64_t i,
                            int64_t dim, float* out);
DBL_HIDDEN int dl_is_dtype(DLDataType dt, int code, int bits);

/* ---- exact kNN (dbl_knn.c) ---- */

typedef struct {
  const void* base;
  DLDataType dtype;
  int64_t rs, cs; /* element strides */
  int64_t n, dim;
} dbl_matrix;

enum { FILTER_NONE = 0, FILTER_BITSET = 1, FILTER_BITMAP = 2 };

typedef struct {
  int kind;
  const uint32_t* words;
} dbl_filter;

/* Validates a cuvsFilter (bitset over n_rows, or bitmap over n_queries x n_rows). */
DBL_HIDDEN cuvsError_t dbl_filter_view(cuvsFilter f, int64_t n_rows, int64_t n_queries,
                                       dbl_filter* out);

DBL_HIDDEN int knn_metric_supported(int metric);
/* Whether cuVS's dense pairwise distance (and so brute force) has the metric. */
DBL_HIDDEN int dbl_pd_metric_ok(int metric);
DBL_HIDDEN int knn_larger_is_better(int metric);
DBL_HIDDEN float knn_worst(int metric);
/* Exact kNN of q queries against data. Neighbors are written as int64
 * (nb64) or uint32 (nb32); missing entries get -1 / UINT32_MAX and the
 * metric's worst distance. exclude_self drops row i for query i (graph build).
 * The output strides are in elements. Returns 0, or -1 on allocation failure. */
DBL_HIDDEN int knn_search(const dbl_matrix* data, const dbl_matrix* queries, int metric,
                          float metric_arg, int64_t k, const dbl_filter* filter, int exclude_self,
                          int64_t* nb64, uint32_t* nb32, int64_t nb_rs, float* dist,
                          int64_t dist_rs);

/* ---- 26.08's Dataset API (dbl_2608.c) ---- */
#if DBL_RELEASE >= 2608
/* What a cuvsDataset's addr points to in the double, for views and owners
 * alike: n rows of dim elements, each row `stride` elements apart. An owning
 * dataset holds its rows in storage of its own (K_DATASET_STORAGE, zeroed
 * padding), which an index built on it references; a view references the
 * caller's tensor memory. */
typedef struct {
  uint64_t magic;
  const void* data;
  int64_t n, dim, stride;
  void* owned;
  size_t owned_bytes;
  uint64_t storage_id; /* registry id of owned (0 for a view) */
  dbl_dev_block dev;   /* owned rows in device memory: taken from the device model */
} dbl_ds;

/* The dbl_ds of a live cuvsDataset_t handle made by the library; a handle
 * that is not one is a violation (the real library dereferences it) and
 * fails. *out is NULL for an empty handle (cuvsDatasetCreate's). */
DBL_HIDDEN cuvsError_t dbl_ds_get(cuvsDataset_t d, dbl_ds** out);
/* An owning dbl_ds of n x dim in rows of stride elements, zero-filled
 * (NULL on allocation failure). */
DBL_HIDDEN dbl_ds* dbl_ds_new_owned(int64_t n, int64_t dim, int64_t stride, size_t es);
/* Fills a handle (new when *h is NULL) with s. Returns 0, or -1. */
DBL_HIDDEN int dbl_ds_fill(cuvsDataset_t* h, dbl_ds* s, DLDataType dt, int mem_type, int layout,
                           int owning);
/* Frees an unattached dbl_ds. */
DBL_HIDDEN void dbl_ds_free(dbl_ds* s);
/* The registry id of the live allocation holding s's rows (its storage, or
 * cuvsRMMAlloc/cuvsRMMHostAlloc memory it views), 0 when none is known. */
DBL_HIDDEN uint64_t dbl_ds_borrow_id(const dbl_ds* s, size_t es);
/* cagra's required row width: dim rounded up to 16 bytes, in elements. */
DBL_HIDDEN int64_t dbl_cagra_row_width(int64_t dim, size_t es);
#endif

/* ---- NN-Descent, all-neighbors, Vamana (dbl_nndescent.c, dbl_allneighbors.c,
 * dbl_vamana.c) ---- */
DBL_HIDDEN cuvsError_t dbl_check_params(const void* p, int kind);
/* One row's distance to another under metric (the kNN's own). */
DBL_HIDDEN float knn_distance(int metric, float metric_arg, const float* a, const float* b,
                              int64_t dim);
/* ---- HNSW (dbl_hnsw.c): what hnsw::from_cagra reads of a CAGRA index ---- */
typedef struct {
  void* impl; /* read-locked until dbl_cagra_peek_end */
  DLDataType dtype;
  int metric;
  int64_t n, dim, degree, stride;
  const void* data; /* NULL when the index holds no dataset */
  const uint32_t* graph;
  int on_disk;
  const char* disk_dir; /* on_disk: where cuVS wrote the graph (hnsw_index.bin goes there) */
  int device_padded; /* 26.08: the index holds a device-padded dataset view (26.06: always) */
} dbl_cagra_peek_t;
/* Reads a built CAGRA index's rows and graph (dbl_cagra.c), holding its
 * read lock until dbl_cagra_peek_end; fails as cuVS's getters do for an
 * unbuilt or hollow index. */
DBL_HIDDEN cuvsError_t dbl_cagra_peek(cuvsCagraIndex_t index, dbl_cagra_peek_t* out);
DBL_HIDDEN void dbl_cagra_peek_end(dbl_cagra_peek_t* p);

#endif
