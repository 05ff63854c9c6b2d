/*
 * cuvsdouble CAGRA, on the CPU:
 *   - build keeps the dataset as cuVS does: a "device" dataset whose rows are
 *     a multiple of 16 bytes is referenced (borrowed), anything else is copied
 *     into rows padded to 16 bytes; the graph is built as cuVS's is
 *     (approximate kNN graph, detour pruning, reverse edges: dbl_cagra_graph.c),
 *     the same way whatever build_algo says;
 *   - search is a graph walk (dbl_cagra_graph.c): approximate, with cuVS's
 *     filter handling and sentinels; uint32 or int64 neighbors;
 *   - an ACE build in disk mode keeps only the shapes and refuses search,
 *     serialize and extend with cuVS's words;
 *   - compression is accepted (L2Expanded only, as in cuVS) when the data's
 *     shape suits VQ/PQ training (else cuVS's refusals), but the double keeps
 *     an exact copy; GetDataset then returns an empty view, as cuVS;
 *   - extend appends rows (the index then owns a copy) and rebuilds the graph
 *     (cuVS inserts the new rows into the existing graph instead);
 *     merge concatenates datasets (bitset-filtered) and builds a new graph;
 *   - serialization uses a format of the double's own.
 */
#include "dbl.h"
#include "dbl_cagra_graph.h"

#include <float.h>
#include <math.h>
#include <errno.h>
#include <sys/stat.h>

#define CG_MAGIC 0x4341475241494458ULL

DBL_HIDDEN cuvsError_t dbl_check_params(const void* p, int kind);
DBL_HIDDEN cuvsError_t dbl_check_plain_params(const void* p, int kind);
DBL_HIDDEN cuvsError_t dbl_check_graph_build_params(cuvsCagraIndexParams_t p);

typedef struct {
  uint64_t magic;
  DLDataType dtype;
  int metric;
  int64_t n, dim, degree;
  const void* data; /* rows of `stride` elements */
  int64_t stride;
  void* data_owned;
  size_t data_bytes;
  int has_dataset; /* 0 after deserializing a file written without it */
  int compressed;  /* built with compression: GetDataset shows an empty view */
  uint32_t pq_bits, pq_len; /* compressed: the VPQ codebook's (0: not known, deserialized) */
  int hollow;      /* built in instant mode: shape only, no dataset or graph */
  int on_disk;     /* an ACE build in disk mode: shape only, data in build_dir */
  char disk_dir[256]; /* on_disk: the build_dir cuVS wrote the graph to (the double keeps the
                       * rows and graph in memory for hnsw::from_cagra, shown nowhere else) */
  int ds_kind;     /* 26.08: the kind of dataset the index references (CG_DS_*) */
  const uint32_t* graph;
  uint32_t* graph_owned;
  size_t graph_bytes;
  uint64_t data_borrow, graph_borrow; /* registry ids of borrowed allocations */
  dbl_dev_block dev; /* a build's: the graph and the rows it copied (cg_dev_build) */
  dbl_dev_block dev_rows; /* 26.08's merge: the merged dataset's rows, handed to the dataset */
  pthread_rwlock_t lock;
} cg_impl;

/* 26.08's index kinds, by the dataset view an index holds (c/src/neighbors/
 * cagra.cpp sg_cagra_c_api_index_box::dataset_layout). A 26.06 index is
 * always CG_DS_DEVICE_PADDED. */
enum { CG_DS_DEVICE_PADDED = 0, CG_DS_DEVICE_STANDARD, CG_DS_HOST_PADDED, CG_DS_HOST_STANDARD };

/* 26.06's index params carry compression; 26.08's have none. */
#if DBL_RELEASE == 2606
#define CG_COMPRESSION(p) ((p)->compression)
#else
#define CG_COMPRESSION(p) ((cuvsCagraCompressionParams_t)NULL)
static void cg_destroy_installed(cuvsCagraIndex_t index); /* dbl_cagra_2608.inc */
#endif

static int cg_dtype_ok(DLDataType dt)
{
  return dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) ||
         dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8);
}

static cuvsError_t cg_handle(cuvsCagraIndex_t index)
{
  if (dbl_reg_find(index, NULL) != K_CAGRA_INDEX) {
    dbl_violation("invalid or destroyed cuvsCagraIndex_t %p (the real library would crash)",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsCagraIndex_t %p", (void*)index);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t cg_impl_of(cuvsCagraIndex_t index, cg_impl** out)
{
  TRY(cg_handle(index));
  cg_impl* impl = (cg_impl*)index->addr;
  if (dbl_reg_find(impl, NULL) != K_CAGRA_IMPL) {
    dbl_violation("CAGRA index %p holds no built index (addr %#lx; the real library would "
                  "dereference it)",
                  (void*)index, (unsigned long)index->addr);
    return RAFT_FAIL("cuvsdouble: the CAGRA index was not built");
  }
  *out = impl;
  return CUVS_SUCCESS;
}

/* cg_impl_of for the operations that need the index's data: a hollow index
 * (built in instant mode) has none. */
static cuvsError_t cg_impl_data(cuvsCagraIndex_t index, cg_impl** out)
{
  TRY(cg_impl_of(index, out));
  if ((*out)->hollow) {
    return RAFT_FAIL("cuvsdouble: the CAGRA index was built in instant mode and holds no data");
  }
  return CUVS_SUCCESS;
}

static cg_impl* cg_new(void)
{
  cg_impl* impl = calloc(1, sizeof(cg_impl));
  if (!impl) return NULL;
  impl->magic = CG_MAGIC;
  pthread_rwlock_init(&impl->lock, NULL);
  return impl;
}

/* Releases what the impl holds (dataset, graph, borrows), not the impl. */
static void cg_release_storage(cg_impl* impl)
{
  dbl_reg_borrow(impl->data_borrow, -1);
  dbl_reg_borrow(impl->graph_borrow, -1);
  impl->data_borrow = impl->graph_borrow = 0;
  dbl_buf_free(impl->data_owned, impl->data_bytes);
  dbl_buf_free(impl->graph_owned, impl->graph_bytes);
  impl->data_owned = NULL;
  impl->graph_owned = NULL;
  impl->data = NULL;
  impl->graph = NULL;
}

static void cg_free(cg_impl* impl)
{
  dbl_dev_give(&impl->dev);
  dbl_dev_give(&impl->dev_rows);
  cg_release_storage(impl);
  pthread_rwlock_destroy(&impl->lock);
  impl->magic = 0;
  free(impl);
}

static void cg_install(cuvsCagraIndex_t index, cg_impl* impl)
{
  if (index->addr != 0) {
    dbl_violation("writing a new index into a cuvsCagraIndex_t that already holds one: the real "
                  "library leaks the previous one (so does the double)");
  }
  dbl_reg_add(impl, K_CAGRA_IMPL, sizeof(cg_impl));
  index->addr = (uintptr_t)impl;
}

static int64_t padded_stride(int64_t dim, size_t es)
{
  int64_t bytes = ((dim * (int64_t)es + 15) / 16) * 16;
  return es ? bytes / (int64_t)es : dim;
}

/* Copies n rows (src row stride src_rs elements) into owned, padded rows. */
static int cg_take_copy(cg_impl* impl, const void* src, int64_t n, int64_t src_rs)
{
  size_t es = dl_elem_size(impl->dtype);
  int64_t stride = padded_stride(impl->dim, es);
  size_t bytes = (size_t)(n * stride) * es;
  char* dst = dbl_buf_alloc(bytes);
  if (!dst) return -1;
  memset(dst, 0, bytes);
  for (int64_t i = 0; i < n; i++) {
    memcpy(dst + (size_t)(i * stride) * es, (const char*)src + (size_t)(i * src_rs) * es,
           (size_t)impl->dim * es);
  }
  impl->data = dst;
  impl->data_owned = dst;
  impl->data_bytes = bytes;
  impl->stride = stride;
  impl->n = n;
  impl->has_dataset = 1;
  return 0;
}

/* Keeps the dataset as cuVS does for a device dataset: a reference when each
 * row is a multiple of 16 bytes, a padded copy otherwise. */
static int cg_take_dataset(cg_impl* impl, const DLTensor* t, int device, int allow_borrow)
{
  size_t es = dl_elem_size(t->dtype);
  int64_t n = t->shape[0];
  if (device && allow_borrow && ((size_t)impl->dim * es) % 16 == 0) {
    impl->data = t->data;
    impl->stride = impl->dim;
    impl->n = n;
    impl->has_dataset = 1;
    dbl_entry e;
    size_t bytes = (size_t)(n * impl->dim) * es;
    if (bytes > 0 && dbl_reg_containing(t->data, bytes, &e)) {
      impl->data_borrow = e.id;
      dbl_reg_borrow(e.id, +1);
    }
    return 0;
  }
  return cg_take_copy(impl, t->data, n, impl->dim);
}

/* Builds the graph (dbl_cagra_graph.c): approximate, as cuVS's. An
 * ITERATIVE_CAGRA_SEARCH build keeps GraphDegree unadjusted and may build
 * `degree` = rows edges a row (cg_degrees): cuVS's prune then keeps every
 * row, the row itself last (kern_fused_prune gives the self edge the lowest
 * priority); so does the double. */
static int cg_build_graph(cg_impl* impl, int64_t intermediate, int64_t degree)
{
  size_t bytes = (size_t)(impl->n * degree) * sizeof(uint32_t);
  uint32_t* g = dbl_buf_alloc(bytes);
  if (!g) return -1;
  int64_t built = degree < impl->n ? degree : impl->n - 1;
  if (intermediate > impl->n - 1) intermediate = impl->n - 1;
  if (intermediate < built) intermediate = built;
  dbl_matrix m = {impl->data, impl->dtype, impl->stride, 1, impl->n, impl->dim};
  if (cg_graph_build(&m, impl->metric, intermediate, built, g) != 0) {
    dbl_buf_free(g, bytes);
    return -1;
  }
  if (built < degree) {
    for (int64_t i = impl->n - 1; i >= 0; i--) {
      memmove(g + i * degree, g + i * built, (size_t)built * sizeof(uint32_t));
      for (int64_t j = built; j < degree; j++) g[i * degree + j] = (uint32_t)i;
    }
  }
  impl->graph = g;
  impl->graph_owned = g;
  impl->graph_bytes = bytes;
  impl->degree = degree;
  return 0;
}

static cuvsError_t cg_check_alive(cg_impl* impl)
{
  if (impl->data_borrow && !dbl_reg_id_live(impl->data_borrow)) {
    dbl_violation("CAGRA index used after the memory holding its dataset was freed");
    return RAFT_FAIL("cuvsdouble: the index's dataset memory was freed");
  }
  if (impl->graph_borrow && !dbl_reg_id_live(impl->graph_borrow)) {
    dbl_violation("CAGRA index used after the memory holding its graph was freed");
    return RAFT_FAIL("cuvsdouble: the index's graph memory was freed");
  }
  return CUVS_SUCCESS;
}

static cuvsError_t cg_metric_ok(int metric, DLDataType dt)
{
  EXPECTS(metric != BitwiseHamming || dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8),
          "BitwiseHamming distance is only supported for int8_t and uint8_t data types. Current "
          "data type is not supported.");
  if (metric != L2Expanded && metric != InnerProduct && metric != CosineExpanded &&
      metric != BitwiseHamming) {
    return RAFT_FAIL("cuvsdouble: CAGRA does not support metric %d (cuVS supports L2Expanded, "
                     "InnerProduct, CosineExpanded and BitwiseHamming)",
                     metric);
  }
  return CUVS_SUCCESS;
}

static void clamp_degrees(size_t* intermediate, size_t* graph_degree, int64_t n)
{
  if (*intermediate >= (size_t)n) *intermediate = (size_t)(n - 1);
  if (*intermediate < *graph_degree) *graph_degree = *intermediate;
}

/* The degrees a CAGRA build over n rows uses (cagra_build.cuh), or the
 * error it fails with. check_graph_degree lowers the intermediate degree to
 * n-1 when it is not below n, then the graph degree to the intermediate
 * one. ITERATIVE_CAGRA_SEARCH (iterative_build_graph) reads both from the
 * params unadjusted: its first round searches a graph of the first
 * initial_graph_size rows (n halved, rounding up, until at most
 * graph_degree * 64) and prunes the results to small_graph_degree =
 * max(graph_degree / 2, min(graph_degree, 24)) distinct neighbours, its
 * last rounds search all n rows and prune to graph_degree; a round whose
 * graph has fewer rows than the edges it keeps leaves a row short, and
 * prune_graph_gpu fails. Its last round then prunes intermediate + 1
 * results to graph_degree (optimize's column check). One row: cuVS lowers
 * both degrees to 0, and its prune kernel loops over knn_graph_degree - 1
 * = 2^32 - 1 entries of an empty array. */
cuvsError_t cg_degrees(cuvsCagraIndexParams_t params, int64_t n, size_t* intermediate,
                       size_t* degree)
{
  *intermediate = params->intermediate_graph_degree;
  *degree = params->graph_degree;
  if (n < 2) {
    dbl_violation("a CAGRA build over %lld row(s): cuVS lowers the graph degree to 0 and its "
                  "prune kernel then reads past an empty array",
                  (long long)n);
    return RAFT_FAIL("cuvsdouble: a CAGRA build needs at least two rows");
  }
  if ((int)params->build_algo != ITERATIVE_CAGRA_SEARCH) {
    clamp_degrees(intermediate, degree, n);
    return CUVS_SUCCESS;
  }
  uint64_t gd = *degree, initial = ((uint64_t)n + 1) / 2;
  while (initial > gd * 64) initial = (initial + 1) / 2;
  uint64_t small = gd / 2 > (gd < 24 ? gd : 24) ? gd / 2 : (gd < 24 ? gd : 24);
  EXPECTS(!((initial < (uint64_t)n && initial < small) || (uint64_t)n < gd),
          "Could not generate an intermediate CAGRA graph because the initial kNN graph contains "
          "too many invalid or duplicated neighbor nodes. This error can occur, for example, if "
          "too many overflows occur during the norm computation between the dataset vectors.");
  EXPECTS(gd <= *intermediate + 1, "output graph cannot have more columns than input graph");
  return CUVS_SUCCESS;
}

/* ---- index handle ---- */

DBL_API cuvsError_t cuvsCagraIndexCreate(cuvsCagraIndex_t* index)
{
  DBL_ENTER(cuvsCagraIndexCreate);
  if (!index) {
    dbl_violation("NULL cuvsCagraIndex_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  cuvsCagraIndex* h = calloc(1, sizeof(cuvsCagraIndex));
  if (!h) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(h, K_CAGRA_INDEX, sizeof *h);
  dbl_res_owner_reset(h);
  *index = h;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsCagraIndexDestroy(cuvsCagraIndex_t index)
{
  DBL_ENTER(cuvsCagraIndexDestroy);
  if (dbl_reg_remove(index, K_CAGRA_INDEX, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsCagraIndex_t %p", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsCagraIndex_t %p", (void*)index);
  }
  dbl_res_owner_destroy(index, "cuvsCagraIndexDestroy");
  cg_impl* impl = (cg_impl*)index->addr;
  if (impl) {
    if (dbl_reg_remove(impl, K_CAGRA_IMPL, NULL, NULL) == 0) {
      if (pthread_rwlock_trywrlock(&impl->lock) != 0) {
        dbl_violation("CAGRA index destroyed while another thread uses it");
        pthread_rwlock_wrlock(&impl->lock);
      }
      pthread_rwlock_unlock(&impl->lock);
      cg_free(impl);
    } else {
      dbl_violation("cuvsCagraIndexDestroy: addr %p is not a live index", (void*)impl);
    }
  }
  free(index);
  return dbl_ok();
}

/* ---- getters ---- */

static cuvsError_t cg_get(cuvsCagraIndex_t index, int64_t* out, int which)
{
  cg_impl* impl;
  TRY(cg_impl_of(index, &impl));
  if (!out) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  pthread_rwlock_rdlock(&impl->lock);
  *out = which == 0 ? impl->dim : which == 1 ? impl->n : impl->degree;
  pthread_rwlock_unlock(&impl->lock);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsCagraIndexGetDims(cuvsCagraIndex_t index, int64_t* dim)
{
  DBL_ENTER(cuvsCagraIndexGetDims);
  return cg_get(index, dim, 0);
}

DBL_API cuvsError_t cuvsCagraIndexGetSize(cuvsCagraIndex_t index, int64_t* size)
{
  DBL_ENTER(cuvsCagraIndexGetSize);
  return cg_get(index, size, 1);
}

DBL_API cuvsError_t cuvsCagraIndexGetGraphDegree(cuvsCagraIndex_t index, int64_t* graph_degree)
{
  DBL_ENTER(cuvsCagraIndexGetGraphDegree);
  return cg_get(index, graph_degree, 2);
}

static cuvsError_t cg_view(cuvsCagraIndex_t index, DLManagedTensor* out, int graph)
{
  TRY(cg_handle(index));
  if (!cg_dtype_ok(index->dtype)) {
    return RAFT_FAIL("Unsupported index dtype: %d and bits: %d", (int)index->dtype.code,
                     (int)index->dtype.bits);
  }
  cg_impl* impl;
  TRY(cg_impl_data(index, &impl));
  if (!out) {
    dbl_violation("NULL DLManagedTensor* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL DLManagedTensor*");
  }
  DLTensor* t = &out->dl_tensor;
  if ((t->shape && dbl_reg_find(t->shape, NULL) == K_META) ||
      (t->strides && dbl_reg_find(t->strides, NULL) == K_META)) {
    dbl_violation("a view is written over a tensor whose previous library-made shape/strides "
                  "were never released (call its deleter first): they leak");
  }
  pthread_rwlock_rdlock(&impl->lock);
  /* a 26.08 host index's views are host memory (to_dlpack of host views) */
  t->device.device_type = impl->ds_kind >= CG_DS_HOST_PADDED && !graph ? kDLCPU : kDLCUDA;
  t->device.device_id = 0;
  t->ndim = 2;
  t->shape = dbl_meta_alloc(2);
  if (graph) {
    t->dtype = (DLDataType){kDLUInt, 32, 1};
    t->data = (void*)impl->graph;
    t->shape[0] = impl->on_disk ? 0 : impl->n; /* disk mode: no graph in memory */
    t->shape[1] = impl->on_disk ? 0 : impl->degree;
    t->strides = NULL;
  } else {
    int visible = impl->has_dataset && !impl->compressed;
    t->dtype = impl->dtype;
    t->data = visible ? (void*)impl->data : NULL;
    t->shape[0] = visible ? impl->n : 0;
#if DBL_RELEASE >= 2608
    /* 26.08: to_dlpack of the dataset view's storage, a row_major matrix of
     * [rows, row width] (dense_row_major_dataset_view_storage::view(),
     * cpp/include/cuvs/neighbors/common.hpp): the padding columns are in
     * the shape, the logical dim nowhere, and strides stay NULL. A disk-mode
     * index's view is [0, dim] (index::update_dataset(fd) in
     * cpp/include/cuvs/neighbors/cagra.hpp), a graph-only one's [0, dim]. */
    t->shape[1] = visible ? impl->stride : impl->dim;
    t->strides = NULL;
#else
    t->shape[1] = impl->on_disk ? 0 : impl->dim; /* disk mode: an empty dataset of dim 0 */
    t->strides = dbl_meta_alloc(2);
    t->strides[0] = visible ? impl->stride : t->shape[1];
    t->strides[1] = 1;
#endif
  }
  out->deleter = dbl_meta_deleter;
  pthread_rwlock_unlock(&impl->lock);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsCagraIndexGetDataset(cuvsCagraIndex_t index, DLManagedTensor* dataset)
{
  DBL_ENTER(cuvsCagraIndexGetDataset);
  return cg_view(index, dataset, 0);
}

DBL_API cuvsError_t cuvsCagraIndexGetGraph(cuvsCagraIndex_t index, DLManagedTensor* graph)
{
  DBL_ENTER(cuvsCagraIndexGetGraph);
  return cg_view(index, graph, 1);
}

/* ---- compression (VQ + PQ) and ACE disk mode: cuVS's refusals ---- */

/* The checks cuVS's VPQ training makes (cpp/src/preprocessing/quantize/
 * detail/pq.cuh vpq_build, cpp/src/neighbors/detail/vpq_dataset.cuh
 * fill_missing_params_heuristics / train_vq / train_pq, kmeans_balanced.cuh
 * fit), in their order. cuVS trains on the data after the graph is built;
 * the double checks the shapes only. */
static cuvsError_t cg_check_compression(cuvsCagraCompressionParams_t cp, int algo, int64_t n,
                                        int64_t dim)
{
  double rows = (double)n;
  uint32_t pq_bits = cp->pq_bits;
  uint32_t vq = cp->vq_n_centers;
  /* round_up_safe<uint32_t>(sqrt(n), 8): the square root truncated, rounded up to 8 */
  if (vq == 0) vq = (uint32_t)((((uint64_t)sqrt(rows)) + 7) / 8 * 8);
  double vq_frac = cp->vq_kmeans_trainset_fraction;
  if (vq_frac == 0) vq_frac = fmin(1.0, 100.0 * vq / rows);
  double pq_frac = cp->pq_kmeans_trainset_fraction;
  if (pq_bits >= 32) {
    return RAFT_FAIL("Invalid pq_bits (%u), the value must be within [4, 16]", pq_bits);
  }
  if (pq_frac == 0) pq_frac = fmin(1.0, 1000.0 * (double)(1u << pq_bits) / rows);
  uint64_t pq_centers = (uint64_t)1 << pq_bits;
  uint32_t per_code = (uint32_t)(rows * pq_frac / (double)pq_centers);
  if (per_code > 256) per_code = 256;
  int64_t pq_train = (int64_t)per_code * (int64_t)pq_centers;
  if (pq_train > n) pq_train = n;
  int pq_fails = pq_train < (int64_t)pq_centers;
  if (algo == IVF_PQ && pq_fails) {
    /* Seen on the real library (v26.06.00, H200): the IVF_PQ graph build of
     * 200 x 8 rows with compression failed at a kernel launch before the
     * compression could refuse the data. The cause is not known; the double
     * reproduces the observed case (IVF_PQ graph build, compression whose PQ
     * training would fail) and no other. */
    return dbl_plain_fail("CUDA error encountered at: file=cpp/src/detail/jit_lto/"
                          "AlgorithmLauncher.cpp line=47: call='cudaLaunchKernelExC(&config, "
                          "kernel, kernel_args)', Reason=cudaErrorInvalidValue: invalid argument");
  }
  /* train_vq: subsample, then balanced k-means over the sample */
  int64_t vq_train = (int64_t)(rows * vq_frac);
  int64_t vq_cap = (int64_t)1024 * (int64_t)vq;
  if (vq_train > vq_cap) vq_train = vq_cap;
  EXPECTS(vq_train <= n, "The number of samples must be smaller than the number of input rows in "
                         "the current implementation.");
  if (vq_train <= 0) {
    dbl_violation("compression with a VQ training set of 0 rows (vq_kmeans_trainset_fraction %g "
                  "of %lld rows): the real library divides by zero",
                  vq_frac, (long long)n);
    return RAFT_FAIL("cuvsdouble: the VQ training set is empty");
  }
  EXPECTS(vq > 0 && (int64_t)vq <= vq_train,
          "The number of centroids must be strictly positive and cannot exceed the number of "
          "points in the training dataset.");
  /* train_pq */
  EXPECTS(!pq_fails, "The number of training samples must be greater than or equal to the number "
                     "of PQ centers");
  if (pq_bits > 16) {
    return RAFT_FAIL("Invalid pq_bits (%u), the value must be within [4, 16]", pq_bits);
  }
  (void)dim;
  return CUVS_SUCCESS;
}

/* Whether an ACE build goes to disk (cagra_build.cuh ace_check_use_disk_mode):
 * use_disk, or the memory model exceeding 80% of max_host_memory_gb /
 * max_gpu_memory_gb when those are set. Without limits the double assumes the
 * machine has room (cuVS asks the system). In disk mode build_dir is checked
 * and created as cuVS does. */
static cuvsError_t cg_ace_disk_mode(cuvsCagraIndexParams_t params, const DLTensor* t,
                                    size_t intermediate, size_t degree, int* disk)
{
  *disk = 0;
  struct cuvsAceParams* a = params->graph_build_params;
  if (!a) return CUVS_SUCCESS; /* cuVS's defaults: in memory */
  size_t n = (size_t)t->shape[0], dim = (size_t)t->shape[1], es = dl_elem_size(t->dtype);
  size_t parts = a->npartitions ? a->npartitions : 2;
  if (parts > n / 1000) parts = n / 1000 < 2 ? 2 : n / 1000;
  size_t sub_dataset = (size_t)(3.0 * 2 * (double)(n / parts) * (double)dim * (double)es);
  size_t sub_graph = (size_t)(3.0 * 2 * (double)(n / parts) * (double)(intermediate + degree) * 4);
  size_t total = 2 * n * 4 + 2 * n * 4 + sub_dataset + sub_graph + n * degree * 4;
  int host_limited = a->max_host_memory_gb > 0 &&
                     (size_t)(0.8 * (double)(size_t)(a->max_host_memory_gb * (double)(1ULL << 30))) <
                       total;
  size_t gpu_need = sub_graph > sub_dataset ? sub_graph : sub_dataset;
  int gpu_limited = a->max_gpu_memory_gb > 0 &&
                    (size_t)(0.8 * (double)(size_t)(a->max_gpu_memory_gb * (double)(1ULL << 30))) <
                      gpu_need;
  if (!(a->use_disk || host_limited || gpu_limited)) return CUVS_SUCCESS;
  const char* dir = a->build_dir ? a->build_dir : "";
  if (dir[0] == 0 || strlen(dir) > 255 || strstr(dir, "//") != NULL) dir = "/tmp/ace_build";
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    return RAFT_FAIL("Failed to create ACE build directory: %s", dir);
  }
  *disk = 1;
  return CUVS_SUCCESS;
}

/* ---- build ---- */

/* 26.08: the rows of a cuvsDataset, which the index built on it references
 * (cuVS never copies them into the index): data with a row stride of stride
 * elements, the registry id of the allocation holding them (0: none known)
 * and the index kind that dataset makes. */
typedef struct {
  const void* data;
  int64_t stride;
  uint64_t borrow;
  int kind;
} cg_ref;

static void cg_take_ref(cg_impl* impl, const cg_ref* ref, int64_t n)
{
  impl->data = ref->data;
  impl->stride = ref->stride;
  impl->n = n;
  impl->has_dataset = 1;
  impl->ds_kind = ref->kind;
  impl->data_borrow = ref->borrow;
  if (ref->borrow) dbl_reg_borrow(ref->borrow, +1);
}

/* ---- device memory (the model of dbl_devmem.c) ----
 *
 * What cuVS's CAGRA build allocates, phase by phase (cpp/src/neighbors/
 * detail/cagra/cagra_build.cuh, build; the double builds its graph its own
 * way, so it takes each phase's size from the formulas):
 *   - the kNN graph (kept in host memory). IVF-PQ: an IVF-PQ index with
 *     graph_build_params::ivf_pq_params (cpp/include/cuvs/neighbors/
 *     ivf_pq.hpp; the fields c/src/neighbors/cagra.cpp copies from the
 *     caller's), its build's peak (dbl_ivf_pq_model), then the index with
 *     build_knn_graph's batches of at most 128 Ki rows (distances and
 *     neighbours for gpu_top_k and top_k, the rows of a host dataset) and
 *     the IVF-PQ search's workspace for such a batch (ivf_pq_search.cuh:
 *     coarse search in fp16, the fine batch's 32 * n_probes + 12 * k *
 *     n_probes bytes a query). NN-Descent: GNND's device working set
 *     (cpp/src/neighbors/nn_descent.cu, build_mem_usage);
 *   - the pruning (graph_core.cuh, optimize): the kNN graph on the device
 *     with an output batch of at most 256 Ki rows, then the reverse graph,
 *     its counts and the merge's two batches;
 *   - the index: the graph on the device, and the rows copied (padded to
 *     16 bytes) when not referenced.
 * Every allocation is rounded up to 256 bytes. */

static uint64_t c256(uint64_t n) { return (n + 255) / 256 * 256; }

/* add_nodes.cuh (add_graph_nodes, add_node_core; 26.06 and 26.08): the
 * device memory of inserting m rows into an index of n0 rows of degree deg,
 * in chunks of chunk rows (0: one chunk), or of the new graph [n0 + m,
 * deg] copied to the device while the old one is held, whichever is
 * larger. The insertion: the graph of the rows before the last chunk on
 * the device, every row's in-edge count, and per batch of new rows (a
 * chunk at most) their 2 x deg neighbours' ids and distances, the rows,
 * and a CAGRA search's candidates at itopk max(4 x deg, 256). */
static uint64_t cg_dev_insert(int64_t n0, int64_t m, int64_t dim, size_t es, int64_t deg,
                              int64_t chunk)
{
  if (chunk <= 0 || chunk > m) chunk = m;
  int64_t last = m > 0 ? m - chunk * ((m - 1) / chunk) : 0;
  uint64_t B = (uint64_t)chunk, D = (uint64_t)deg, N = (uint64_t)(n0 + m);
  uint64_t itopk = 4 * D > 256 ? 4 * D : 256;
  uint64_t insert = c256((N - (uint64_t)last) * D * 4) + c256(N * 4) + 2 * c256(B * 2 * D * 4) +
                    c256(B * (uint64_t)dim * es) + c256(B * itopk * 8);
  uint64_t graph = c256(N * D * 4);
  return insert > graph ? insert : graph;
}

static cuvsError_t cg_dev_knn(cuvsCagraIndexParams_t params, int algo, int64_t n, int64_t dim,
                              int64_t esz, int host, int64_t ideg, uint64_t* out)
{
  uint64_t N = (uint64_t)n, D = (uint64_t)dim;
  if (algo != IVF_PQ) { /* NN-Descent, and AUTO_SELECT, which picks it when it fits */
    *out = c256(N * D * 2) + c256(N * 4) + 2 * c256(N * 32 * 4) + c256(N * 4) + c256(2 * N * 8);
    return CUVS_SUCCESS;
  }
  struct cuvsIvfPqIndexParams bp = {0};
  bp.metric = params->metric;
  bp.add_data_on_build = true;
  bp.max_train_points_per_pq_code = 256;
  bp.codes_layout = CUVS_IVF_PQ_LIST_LAYOUT_INTERLEAVED;
  bp.codebook_kind = CUVS_IVF_PQ_CODEBOOK_GEN_PER_SUBSPACE;
  if (dim <= 32) {
    bp.pq_dim = 16, bp.pq_bits = 8;
  } else {
    bp.pq_bits = 4;
    bp.pq_dim = dim <= 64 ? 32 : dim <= 128 ? 64 : dim <= 192 ? 96 : (uint32_t)((dim / 2 + 127) / 128 * 128);
  }
  bp.n_lists = n / 2000 > 1 ? (uint32_t)(n / 2000) : 1;
  bp.kmeans_n_iters = 10;
  double min_frac = 32.0 * bp.n_lists / (double)n;
  if (min_frac > 1) min_frac = 1;
  double frac = 1.0 / sqrt((double)n * 1e-5);
  bp.kmeans_trainset_fraction = frac < min_frac ? min_frac : frac > 1 ? 1 : frac;
  double rate = 1;
  uint32_t probes = 0;
  struct cuvsIvfPqParams* gp = params->graph_build_params;
  if (gp) {
    if (gp->ivf_pq_build_params) {
      struct cuvsIvfPqIndexParams* b = gp->ivf_pq_build_params;
      bp.add_data_on_build = b->add_data_on_build;
      bp.n_lists = b->n_lists;
      bp.kmeans_n_iters = b->kmeans_n_iters;
      bp.kmeans_trainset_fraction = b->kmeans_trainset_fraction;
      bp.pq_bits = b->pq_bits;
      bp.pq_dim = b->pq_dim;
      bp.codebook_kind = b->codebook_kind;
      bp.force_random_rotation = b->force_random_rotation;
      bp.conservative_memory_allocation = b->conservative_memory_allocation;
      bp.max_train_points_per_pq_code = b->max_train_points_per_pq_code;
    }
    if (gp->ivf_pq_search_params) probes = gp->ivf_pq_search_params->n_probes;
    if (gp->refinement_rate > 1) rate = gp->refinement_rate;
  }
  if ((int64_t)bp.n_lists > n) bp.n_lists = (uint32_t)n;
  if (probes == 0) probes = (uint32_t)llround(sqrt((double)bp.n_lists) / 20 + 4);
  uint64_t peak, index;
  uint32_t geo[3];
  TRY(dbl_ivf_pq_model(&bp, n, (uint32_t)dim, esz, host, &peak, &index, geo));
  uint64_t top_k = (uint64_t)ideg + 1, gpu_top_k = (uint64_t)((double)ideg * rate);
  if (gpu_top_k < top_k) gpu_top_k = top_k;
  if (gpu_top_k > N) gpu_top_k = N;
  uint64_t maxq = N < 128 * 1024 ? N : 128 * 1024;
  uint64_t buffers = c256(maxq * gpu_top_k * 4) + c256(maxq * gpu_top_k * 8) +
                     c256(maxq * top_k * 4) + c256(maxq * top_k * 8);
  if (host) buffers += c256(maxq * D * (uint64_t)esz);
  uint64_t nl = geo[0], dim_ext = geo[1], rot_dim = geo[2];
  uint64_t pr = probes < nl ? probes : nl;
  uint64_t outer = dim_ext * 2 + rot_dim * 4 + pr * 4 + (nl + pr) * 2;
  uint64_t bo = maxq, cap = ((uint64_t)1 << 30) / outer;
  if (bo > cap) bo = cap;
  if (bo < 1) bo = 1;
  uint64_t search = bo * outer + bo * (32 * pr + 12 * gpu_top_k * pr);
  uint64_t phase2 = index + buffers + search;
  *out = peak > phase2 ? peak : phase2;
  return CUVS_SUCCESS;
}

/* Takes a build's phases from the device model (each given back but the
 * last: the graph, and copy_bytes of rows the index copied). */
static cuvsError_t cg_dev_build(cg_impl* impl, cuvsCagraIndexParams_t params, int algo, int host,
                                int64_t ideg, int64_t deg, uint64_t copy_bytes)
{
  uint64_t N = (uint64_t)impl->n, knn;
  int64_t esz = (int64_t)dl_elem_size(impl->dtype);
  if (ideg > impl->n - 1) ideg = impl->n - 1;
  TRY(cg_dev_knn(params, algo, impl->n, impl->dim, esz, host, ideg, &knn));
  uint64_t batch = N < 256 * 1024 ? N : 256 * 1024;
  uint64_t prune = c256(N * (uint64_t)ideg * 4) + c256(batch * (uint64_t)deg * 4);
  uint64_t merge = c256(N * (uint64_t)deg * 4) + c256(N * 4) + c256(2 * batch * (uint64_t)deg * 4);
  dbl_dev_block b;
  TRY(dbl_dev_take(knn, &b));
  dbl_dev_give(&b);
  TRY(dbl_dev_take(prune > merge ? prune : merge, &b));
  dbl_dev_give(&b);
  return dbl_dev_take(c256(N * (uint64_t)deg * 4) + c256(copy_bytes), &impl->dev);
}

/* dbl_tiered.c: a CAGRA build's device memory over n float32 rows on the
 * device, without data: the phases of cg_dev_build (the kNN graph, the
 * pruning, the graph), the rows copied padded (copy_bytes) kept with the
 * graph. */
cuvsError_t dbl_cagra_model(cuvsCagraIndexParams_t params, int64_t n, int64_t dim,
                            uint64_t copy_bytes, uint64_t* peak, uint64_t* index)
{
  int algo = (int)params->build_algo;
  if (algo < AUTO_SELECT || algo > ACE) algo = AUTO_SELECT;
  int64_t ideg = (int64_t)params->intermediate_graph_degree, deg = (int64_t)params->graph_degree;
  if (ideg >= n) ideg = n - 1;
  if (deg > ideg) deg = ideg;
  uint64_t N = (uint64_t)n, knn;
  TRY(cg_dev_knn(params, algo, n, dim, 4, 0, ideg, &knn));
  uint64_t batch = N < 256 * 1024 ? N : 256 * 1024;
  uint64_t prune = c256(N * (uint64_t)ideg * 4) + c256(batch * (uint64_t)deg * 4);
  uint64_t merge = c256(N * (uint64_t)deg * 4) + c256(N * 4) + c256(2 * batch * (uint64_t)deg * 4);
  *index = c256(N * (uint64_t)deg * 4) + c256(copy_bytes);
  uint64_t p = knn > prune ? knn : prune;
  if (merge > p) p = merge;
  *peak = p > *index ? p : *index;
  return CUVS_SUCCESS;
}

/* ref == NULL: 26.06's build from a tensor (checked here, referenced or
 * copied); else 26.08's from a dataset (dataset describes its rows, already
 * checked when the dataset was made). */
static cuvsError_t cg_build(cuvsCagraIndexParams_t params, DLManagedTensor* dataset,
                            cuvsCagraIndex_t index, const cg_ref* ref)
{
  TRY(dbl_check_params(params, K_CAGRA_INDEX_PARAMS));
  TRY(cg_handle(index));
  TRY(dl_check_ptr(dataset, "dataset"));
  const DLTensor* t = &dataset->dl_tensor;
  index->dtype = t->dtype;
  if (!cg_dtype_ok(t->dtype)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)t->dtype.code,
                     (int)t->dtype.bits);
  }
  TRY(dbl_check_graph_build_params(params));
  if (CG_COMPRESSION(params)) {
    int k = dbl_reg_find(CG_COMPRESSION(params), NULL);
    if (k >= 0 && k != K_CAGRA_COMPRESSION_PARAMS) {
      dbl_violation("compression points to something that is not a cuvsCagraCompressionParams");
      return RAFT_FAIL("cuvsdouble: compression has the wrong type");
    }
  }
  int device = dl_dev_compat(t);
  if (!device && !dl_host_compat(t)) {
    dbl_violation("cuvsCagraBuild with device type %d: the real library returns an index object "
                  "that was never built",
                  (int)t->device.device_type);
    return RAFT_FAIL("cuvsdouble: dataset device type %d is neither device nor host compatible",
                     (int)t->device.device_type);
  }
  if (!ref) {
    TRY(dl_view(dataset, LAYOUT_ROW, t->dtype.code, t->dtype.bits,
                device ? WANT_DEVICE : WANT_HOST, 2));
    TRY(dl_strict(t, "dataset"));
  }
  int algo = (int)params->build_algo;
  if (algo < AUTO_SELECT || algo > ACE) algo = AUTO_SELECT;
  int64_t n = t->shape[0], dim = t->shape[1];
  if (algo == ACE) {
    EXPECTS(t->device.device_type != kDLCUDA && t->device.device_type != kDLCUDAManaged,
            "ACE: Dataset must be on host for ACE build");
    EXPECTS(n > 0, "ACE: Dataset must not be empty");
    EXPECTS(dim > 0, "ACE: Dataset dimension must be greater than 0");
    EXPECTS(params->intermediate_graph_degree > 0,
            "ACE: Intermediate graph degree must be greater than 0");
    EXPECTS(params->graph_degree > 0, "ACE: Graph degree must be greater than 0");
  } else {
    /* AUTO_SELECT picks NN-Descent when the device has room, as here */
    int eff = algo == AUTO_SELECT ? NN_DESCENT : algo;
    int metric = (int)params->metric;
    EXPECTS(metric != BitwiseHamming || eff == ITERATIVE_CAGRA_SEARCH || eff == NN_DESCENT,
            "IVF_PQ for CAGRA graph build does not support BitwiseHamming as a metric. Please use "
            "nn-descent or the iterative CAGRA search build.");
    EXPECTS(metric != CosineExpanded || eff == IVF_PQ || eff == NN_DESCENT,
            "CosineExpanded distance is not supported for iterative CAGRA graph build.");
  }
  TRY(cg_metric_ok((int)params->metric, t->dtype));
  if (CG_COMPRESSION(params)) {
    EXPECTS(params->metric == L2Expanded,
            "VPQ compression is only supported with L2Expanded distance mertric");
  }
  EXPECTS(n > 0, "cuvsdouble: cannot build a CAGRA index from an empty dataset");
  size_t intermediate, degree;
  TRY(cg_degrees(params, n, &intermediate, &degree));
  if (algo == ACE) {
    int disk = 0;
    TRY(cg_ace_disk_mode(params, t, intermediate, degree, &disk));
    if (disk) {
      /* cuVS writes the reordered dataset, the graph and the mapping to
       * build_dir and returns an index holding only their shapes (the double
       * writes no files) */
      cg_impl* impl = cg_new();
      if (!impl) return dbl_plain_fail("std::bad_alloc");
      impl->dtype = t->dtype;
      impl->metric = (int)params->metric;
      impl->n = n;
      impl->dim = dim;
      impl->degree = (int64_t)degree;
      impl->stride = dim;
      impl->on_disk = 1;
      if (ref) impl->ds_kind = ref->kind;
      const char* dir = params->graph_build_params && ((struct cuvsAceParams*)params->graph_build_params)->build_dir
                          ? ((struct cuvsAceParams*)params->graph_build_params)->build_dir
                          : "";
      if (dir[0] == 0 || strlen(dir) > 255 || strstr(dir, "//") != NULL) dir = "/tmp/ace_build";
      snprintf(impl->disk_dir, sizeof impl->disk_dir, "%s", dir);
      /* what the files hold, kept for hnsw::from_cagra (has_dataset stays 0) */
      if (cg_take_copy(impl, ref ? ref->data : t->data, n, ref ? ref->stride : dim) != 0 ||
          cg_build_graph(impl, (int64_t)intermediate, (int64_t)degree) != 0) {
        cg_free(impl);
        return dbl_plain_fail("std::bad_alloc");
      }
      impl->has_dataset = 0;
      cg_install(index, impl);
      return CUVS_SUCCESS;
    }
  }
  if (CG_COMPRESSION(params)) TRY(cg_check_compression(CG_COMPRESSION(params), algo, n, dim));

  cg_impl* impl = cg_new();
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  impl->dtype = t->dtype;
  impl->metric = (int)params->metric;
  impl->dim = dim;
  impl->compressed = CG_COMPRESSION(params) != NULL;
  if (impl->compressed) {
    /* vpq_dataset.cuh fill_missing_params_heuristics: pq_dim 0 is
     * ceil(dim / 4), pq_bits 0 is 8; the PQ codebook's row length (pq_len)
     * is ceil(dim / pq_dim) */
    const struct cuvsCagraCompressionParams* cp = CG_COMPRESSION(params);
    uint32_t pq_dim = cp->pq_dim ? cp->pq_dim : (uint32_t)((dim + 3) / 4);
    impl->pq_bits = cp->pq_bits ? cp->pq_bits : 8;
    impl->pq_len = (uint32_t)((dim + pq_dim - 1) / pq_dim);
  }
  if (ref) cg_take_ref(impl, ref, n);
  if ((!ref && cg_take_dataset(impl, t, device, !impl->compressed) != 0) ||
      cg_build_graph(impl, (int64_t)intermediate, (int64_t)degree) != 0) {
    cg_free(impl);
    return dbl_plain_fail("std::bad_alloc");
  }
  if (!impl->compressed && (algo == IVF_PQ || algo == NN_DESCENT || algo == AUTO_SELECT)) {
    cuvsError_t st = cg_dev_build(impl, params, algo, !device, (int64_t)intermediate,
                                  (int64_t)degree, impl->data_owned ? impl->data_bytes : 0);
    if (st != CUVS_SUCCESS) {
      cg_free(impl);
      return st;
    }
  }
  cg_install(index, impl);
  return CUVS_SUCCESS;
}

/* Instant mode: a hollow index with the dataset's shape and dtype and the
 * (clamped) graph degree, made without reading the data. */
static cuvsError_t cg_build_instant(cuvsCagraIndexParams_t params, DLManagedTensor* dataset,
                                    cuvsCagraIndex_t index)
{
  TRY(dbl_check_params(params, K_CAGRA_INDEX_PARAMS));
  TRY(cg_handle(index));
  TRY(dl_check_ptr(dataset, "dataset"));
  const DLTensor* t = &dataset->dl_tensor;
  EXPECTS(t->ndim == 2 && t->shape != NULL, "cuvsdouble: the dataset must be a matrix");
  int64_t n = t->shape[0];
  EXPECTS(n > 0, "cuvsdouble: cannot build a CAGRA index from an empty dataset");
  size_t intermediate, degree;
  TRY(cg_degrees(params, n, &intermediate, &degree));
  cg_impl* impl = cg_new();
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  index->dtype = t->dtype;
  impl->dtype = t->dtype;
  impl->metric = (int)params->metric;
  impl->n = n;
  impl->dim = t->shape[1];
  impl->degree = (int64_t)degree;
  impl->hollow = 1;
  cg_install(index, impl);
  return CUVS_SUCCESS;
}

#if DBL_RELEASE == 2606
DBL_API cuvsError_t cuvsCagraBuild(cuvsResources_t res, cuvsCagraIndexParams_t params,
                                   DLManagedTensor* dataset, cuvsCagraIndex_t index)
{
  DBL_ENTER(cuvsCagraBuild);
  if (DBL_INSTANT()) {
    cuvsError_t st = cg_build_instant(params, dataset, index);
    return st == CUVS_SUCCESS ? dbl_ok() : st;
  }
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_used_by(r, index);
  cuvsError_t st = cg_build(params, dataset, index, NULL);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
#endif

/* ---- search ---- */

static size_t round_up32(size_t x) { return (x + 31) / 32 * 32; }

/* also the tiered index's ANN search (cagra::search, which cuVS's tiered
 * search calls with its k) */
cuvsError_t cg_check_search_params(cuvsCagraSearchParams_t p, int64_t k, int filtered)
{
  int algo = (int)p->algo;
  if (algo != SINGLE_CTA && algo != MULTI_CTA && algo != MULTI_KERNEL && algo != AUTO) {
    return RAFT_THROW("[CAGRA Error] An invalid kernel mode has been given: %d", algo);
  }
  if (algo == AUTO) algo = (p->persistent || p->itopk_size <= 512) ? SINGLE_CTA : MULTI_CTA;
  char err[1024] = "";
  size_t n = 0;
  if (p->itopk_size > 1024 && algo == SINGLE_CTA) {
    n += (size_t)snprintf(err + n, sizeof err - n,
                          "- `internal_topk` (%zu) must be smaller or equal to 1024",
                          p->itopk_size);
  }
  if (p->thread_block_size != 0 && p->thread_block_size != 64 && p->thread_block_size != 128 &&
      p->thread_block_size != 256 && p->thread_block_size != 512 && p->thread_block_size != 1024) {
    n += (size_t)snprintf(err + n, sizeof err - n,
                          "`thread_block_size` must be 0, 64, 128, 256 or 512. %zu has been given.",
                          p->thread_block_size);
  }
  if (p->hashmap_min_bitlen > 20) {
    n += (size_t)snprintf(err + n, sizeof err - n,
                          "`hashmap_min_bitlen` must be equal to or smaller than 20. %zu has been "
                          "given.",
                          p->hashmap_min_bitlen);
  }
  if ((double)p->hashmap_max_fill_rate < 0.1 || (double)p->hashmap_max_fill_rate >= 0.9) {
    n += (size_t)snprintf(err + n, sizeof err - n,
                          "`hashmap_max_fill_rate` must be equal to or greater than 0.1 and "
                          "smaller than 0.9. %f has been given.",
                          (double)p->hashmap_max_fill_rate);
  }
  if (filtered && p->hashmap_mode == SMALL) {
    n += (size_t)snprintf(err + n, sizeof err - n, "`SMALL` hash is not available when filtering");
  }
  if (algo == MULTI_CTA && p->hashmap_mode == SMALL) {
    n += (size_t)snprintf(err + n, sizeof err - n,
                          "`small_hash` is not available when 'search_mode' is \"multi-cta\"");
  }
  if (n > 0) return RAFT_THROW("[CAGRA Error] %s", err);
  size_t itopk = round_up32(p->itopk_size);
  if (algo == MULTI_CTA) {
    size_t ncta = (itopk + 31) / 32;
    if (p->search_width > ncta) ncta = p->search_width;
    EXPECTS(ncta * 32 >= (size_t)k,
            "`num_cta_per_query` (%u) * 32 must be equal to or greater than `topk` (%u) when "
            "'search_mode' is \"multi-cta\". (`num_cta_per_query`=max(`search_width`, "
            "ceildiv(`itopk_size`, 32)))",
            (unsigned)ncta, (unsigned)k);
  } else {
    EXPECTS((size_t)k <= itopk, "topk = %u must be smaller than itopk_size = %lu", (unsigned)k,
            (unsigned long)itopk);
  }
  return CUVS_SUCCESS;
}

/* The search plan cuVS makes (search_plan.cuh adjust_search_params): the
 * iteration limits, the internal top-k rounded up to 32, and the kernel.
 * AUTO: cuVS picks multi-CTA for batches smaller than twice the GPU's SM
 * count; the double runs the single-CTA walk for AUTO whatever the batch
 * (its recall at the sizes unit tests use matches the measured one) and the
 * multi-CTA emulation only when MULTI_CTA is asked for. */
static void cg_plan(cuvsCagraSearchParams_t p, int64_t nq, int64_t k, int64_t n, int64_t degree,
                    const dbl_filter* f, cg_search_cfg* c)
{
  int multi = (int)p->algo == MULTI_CTA && !p->persistent;
  size_t itopk = p->itopk_size, width = p->search_width ? p->search_width : 1;
  size_t max_iter = p->max_iterations, min_iter = p->min_iterations;
  size_t computed = max_iter;
  if (max_iter == 0) {
    computed = multi ? 32 : itopk / width;
    int64_t reach = 1;
    while (reach < n) {
      reach *= degree / 2 > 2 ? degree / 2 : 2;
      computed++;
    }
  }
  if (max_iter < min_iter) computed = min_iter;
  if (max_iter < computed) max_iter = computed;
  if (multi && f->kind == FILTER_BITSET && n > 0) {
    int64_t set = 0;
    for (int64_t i = 0; i < n; i++) set += (f->words[i >> 5] >> (i & 31)) & 1u;
    double rate = (double)(n - set) / (double)n;
    if (rate > 0.999) rate = 0.999;
    if (rate > 0.0 && rate < 1.0) {
      size_t adj = (size_t)((float)k / (1.0 - rate) + (float)(itopk - (size_t)k) / sqrt(1.0 - rate));
      adj = round_up32(adj);
      if (itopk < adj) itopk = adj;
    }
  }
  itopk = round_up32(itopk);
  c->itopk = (int64_t)itopk;
  c->width = (int64_t)width;
  c->min_iter = (int64_t)min_iter;
  c->max_iter = (int64_t)max_iter;
  c->samplings = p->num_random_samplings;
  c->xor_mask = p->rand_xor_mask;
  c->multi_cta = multi;
  size_t ncta = (itopk + 31) / 32;
  if (width > ncta) ncta = width;
  c->n_cta = (int64_t)ncta;
  (void)nq;
}

static cuvsError_t cg_search(cuvsCagraSearchParams_t params, cuvsCagraIndex_t index,
                             DLManagedTensor* queries_t, DLManagedTensor* neighbors_t,
                             DLManagedTensor* distances_t, cuvsFilter filter)
{
  TRY(dl_check_ptr(queries_t, "queries"));
  TRY(dl_check_ptr(neighbors_t, "neighbors"));
  TRY(dl_check_ptr(distances_t, "distances"));
  const DLTensor* q = &queries_t->dl_tensor;
  const DLTensor* nb = &neighbors_t->dl_tensor;
  const DLTensor* ds = &distances_t->dl_tensor;
  EXPECTS(dl_dev_compat(q), "queries should have device compatible memory");
  EXPECTS(dl_dev_compat(nb), "neighbors should have device compatible memory");
  EXPECTS(dl_dev_compat(ds), "distances should have device compatible memory");
  EXPECTS(dl_is_dtype(ds->dtype, kDLFloat, 32), "distances should be of type float32");
  TRY(cg_handle(index));
  EXPECTS(q->dtype.code == index->dtype.code, "type mismatch between index and queries");
  if (!cg_dtype_ok(q->dtype)) {
    return RAFT_FAIL("Unsupported queries DLtensor dtype: %d and bits: %d", (int)q->dtype.code,
                     (int)q->dtype.bits);
  }
  int nb32 = dl_is_dtype(nb->dtype, kDLUInt, 32);
  EXPECTS(nb32 || dl_is_dtype(nb->dtype, kDLInt, 64),
          "neighbors should be of type uint32_t or int64_t");
  TRY(dbl_check_plain_params(params, K_CAGRA_SEARCH_PARAMS));
  cg_impl* impl;
  TRY(cg_impl_data(index, &impl));
#if DBL_RELEASE >= 2608
  EXPECTS(impl->ds_kind == CG_DS_DEVICE_PADDED,
          "cuvsCagraSearch: index must be device-padded. For standard indices, call "
          "cuvsCagraUpdateDataset first.");
#endif
  if (q->dtype.bits != impl->dtype.bits) {
    dbl_violation("queries are %d-bit but the CAGRA index is %d-bit (the real library "
                  "reinterprets the index: undefined behaviour)",
                  (int)q->dtype.bits, (int)impl->dtype.bits);
    return RAFT_FAIL("cuvsdouble: queries and index differ in dtype bits");
  }
  TRY(dl_view(queries_t, LAYOUT_ROW, q->dtype.code, q->dtype.bits, WANT_DEVICE, 2));
  TRY(dl_view(neighbors_t, LAYOUT_ROW, nb->dtype.code, nb->dtype.bits, WANT_DEVICE, 2));
  TRY(dl_view(distances_t, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  if (filter.type != NO_FILTER && filter.type != BITSET) {
    return RAFT_FAIL("Unsupported filter type: BITMAP");
  }
  int64_t nq = q->shape[0], k = nb->shape[1];
  EXPECTS(nq == nb->shape[0] && nq == ds->shape[0],
          "Number of rows in output neighbors and distances matrices must equal the number of "
          "queries.");
  EXPECTS(nb->shape[1] == ds->shape[1],
          "Number of columns in output neighbors and distances matrices must equal k");
  TRY(dl_strict(q, "queries"));
  TRY(dl_strict(nb, "neighbors"));
  TRY(dl_strict(ds, "distances"));
  pthread_rwlock_rdlock(&impl->lock);
  cuvsError_t st = CUVS_SUCCESS;
  if (q->shape[1] != impl->dim) {
    st = RAFT_FAIL("Number of query dimensions should equal number of dimensions in the index.");
  }
  if (st == CUVS_SUCCESS && impl->on_disk) {
    st = RAFT_FAIL("Cannot search a CAGRA index that is stored on disk. Use "
                   "cuvs::neighbors::hnsw::from_cagra() to convert the index and "
                   "cuvs::neighbors::hnsw::deserialize() to load it into memory before searching.");
  }
  if (st == CUVS_SUCCESS && !impl->has_dataset) {
#if DBL_RELEASE >= 2608
    st = RAFT_FAIL("Attempted to search without a dataset. Please call "
                   "index.update_device_dataset_same_layout(...) first.");
#else
    st = RAFT_FAIL(
      "Attempted to search without a dataset. Please call index.update_dataset(...) first.");
#endif
  }
  if (st == CUVS_SUCCESS) st = cg_check_search_params(params, k, filter.type == BITSET);
  if (st == CUVS_SUCCESS && impl->compressed && impl->pq_bits != 0 &&
      (impl->pq_bits != 8 || (impl->pq_len != 2 && impl->pq_len != 4) ||
       impl->metric != L2Expanded)) {
    /* cuVS compiles VPQ search descriptors for pq_bits 8, pq_len 2 and 4,
     * L2Expanded only (cpp/src/neighbors/detail/cagra/
     * compute_distance_vpq_matrix.json; vpq_descriptor_spec::priority is -1
     * for any other codebook): dataset_descriptor_init finds none. Every
     * cuVS build, not a trim of one. */
    st = RAFT_FAIL("No dataset descriptor instance compiled for this parameter combination.");
  }
  dbl_filter f;
  if (st == CUVS_SUCCESS) st = dbl_filter_view(filter, impl->n, nq, &f);
  if (st == CUVS_SUCCESS) st = cg_check_alive(impl);
  if (st == CUVS_SUCCESS) {
    dbl_matrix data = {impl->data, impl->dtype, impl->stride, 1, impl->n, impl->dim};
    dbl_matrix qm = {q->data, q->dtype, q->shape[1], 1, nq, impl->dim};
    cg_search_cfg cfg;
    cg_plan(params, nq, k, impl->n, impl->degree, &f, &cfg);
    if (cg_graph_search(&data, impl->graph, impl->degree, impl->metric, &f, &qm, k, &cfg,
                        nb32 ? (uint32_t*)nb->data : NULL, nb32 ? NULL : (int64_t*)nb->data,
                        (float*)ds->data) != 0) {
      st = dbl_plain_fail("std::bad_alloc");
    }
  }
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

/* dbl_model_multi reports whether cuVS searches a batch of b with p on the
 * multi-CTA kernel: asked for, or AUTO (search_plan.cuh) with an internal
 * top-k over 512 or fewer queries (max_queries, else the batch) than twice
 * the H200's 132 multiprocessors. The persistent kernel is single-CTA. */
static int dbl_model_multi(cuvsCagraSearchParams_t p, int64_t b)
{
  if (!p || p->persistent) return 0;
  if ((int)p->algo == MULTI_CTA) return 1;
  if ((int)p->algo != AUTO) return 0;
  int64_t q = p->max_queries ? (int64_t)p->max_queries : b;
  return !(p->itopk_size <= 512 && q >= 2 * 132);
}

DBL_API cuvsError_t cuvsCagraSearch(cuvsResources_t res, cuvsCagraSearchParams_t params,
                                    cuvsCagraIndex_t index, DLManagedTensor* queries,
                                    DLManagedTensor* neighbors, DLManagedTensor* distances,
                                    cuvsFilter filter)
{
  if (queries) {
    int64_t b = queries->dl_tensor.ndim > 0 ? queries->dl_tensor.shape[0] : 1;
    dbl_model_begin(b, dbl_model_multi(params, b));
  }
  if (DBL_INSTANT()) return CUVS_SUCCESS;
  DBL_ENTER(cuvsCagraSearch);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = cg_search(params, index, queries, neighbors, distances, filter);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, neighbors, distances);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- extend ---- */

#if DBL_RELEASE == 2606
static cuvsError_t cg_extend(cuvsCagraExtendParams_t params, DLManagedTensor* add,
                             cuvsCagraIndex_t index)
{
  TRY(dbl_check_plain_params(params, K_CAGRA_EXTEND_PARAMS));
  TRY(dl_check_ptr(add, "additional_dataset"));
  TRY(cg_handle(index));
  const DLTensor* t = &add->dl_tensor;
  if (!cg_dtype_ok(t->dtype)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)t->dtype.code,
                     (int)t->dtype.bits);
  }
  cg_impl* impl;
  TRY(cg_impl_data(index, &impl));
  if (t->dtype.code != impl->dtype.code || t->dtype.bits != impl->dtype.bits) {
    dbl_violation("cuvsCagraExtend with %d/%d-bit data on a %d/%d-bit index (the real library "
                  "reinterprets the index: undefined behaviour)",
                  (int)t->dtype.code, (int)t->dtype.bits, (int)impl->dtype.code,
                  (int)impl->dtype.bits);
    return RAFT_FAIL("cuvsdouble: additional_dataset and index differ in dtype");
  }
  int device = dl_dev_compat(t);
  if (!device && !dl_host_compat(t)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)t->dtype.code,
                     (int)t->dtype.bits);
  }
  TRY(dl_view(add, LAYOUT_ROW, t->dtype.code, t->dtype.bits, device ? WANT_DEVICE : WANT_HOST, 2));
  TRY(dl_strict(t, "additional_dataset"));
  if (pthread_rwlock_trywrlock(&impl->lock) != 0) {
    dbl_violation("cuvsCagraExtend while another thread uses the index");
    pthread_rwlock_wrlock(&impl->lock);
  }
  cuvsError_t st = CUVS_SUCCESS;
  if (impl->on_disk) {
    st = RAFT_FAIL("Cannot extend a disk-backed CAGRA index. Convert it with "
                   "cuvs::neighbors::hnsw::from_cagra() and load it into memory via "
                   "cuvs::neighbors::hnsw::deserialize() before calling extend().");
  } else if (!impl->has_dataset) {
    st = RAFT_FAIL(
      "cagra::extend only supports an index to which the dataset is attached. Please check if the "
      "index was built with index_param.attach_dataset_on_build = true, or if a dataset was "
      "attached after the build.");
  } else if (impl->compressed) {
    st = RAFT_FAIL("cagra::extend only supports an uncompressed dataset index");
  } else if (t->shape[1] != impl->dim) {
    st = RAFT_FAIL("cuvsdouble: additional_dataset has %lld columns, the index %lld",
                   (long long)t->shape[1], (long long)impl->dim);
  }
  if (st == CUVS_SUCCESS) st = cg_check_alive(impl);
  uint64_t new_dev = 0;
  if (st == CUVS_SUCCESS && t->shape[0] > 0) {
    /* add_nodes.cuh extend_core: the rows the index owns freed, all rows
     * padded on the device (the index owns them after), then the new
     * graph (cg_dev_insert) */
    int64_t n0 = impl->n, m = t->shape[0];
    size_t es = dl_elem_size(impl->dtype);
    uint64_t rows = c256((uint64_t)(n0 + m) * (uint64_t)padded_stride(impl->dim, es) * es);
    uint64_t old = impl->data_owned ? c256(impl->data_bytes) : 0;
    uint64_t grow = cg_dev_insert(n0, m, impl->dim, es, impl->degree, params->max_chunk_size);
    dbl_dev_block b;
    st = dbl_dev_take(rows > old ? rows - old + grow : grow, &b);
    dbl_dev_give(&b);
    new_dev = c256((uint64_t)(n0 + m) * (uint64_t)impl->degree * 4) + rows;
  }
  if (st == CUVS_SUCCESS && t->shape[0] > 0) {
    int64_t n0 = impl->n, m = t->shape[0];
    size_t es = dl_elem_size(impl->dtype);
    cg_impl tmp = *impl; /* build the new storage aside, swap on success */
    tmp.data_owned = NULL;
    tmp.graph_owned = NULL;
    tmp.data_borrow = tmp.graph_borrow = 0;
    tmp.dim = impl->dim;
    int64_t stride = padded_stride(impl->dim, es);
    size_t bytes = (size_t)((n0 + m) * stride) * es;
    char* dst = dbl_buf_alloc(bytes);
    if (!dst) {
      st = dbl_plain_fail("std::bad_alloc");
    } else {
      memset(dst, 0, bytes);
      for (int64_t i = 0; i < n0; i++) {
        memcpy(dst + (size_t)(i * stride) * es,
               (const char*)impl->data + (size_t)(i * impl->stride) * es, (size_t)impl->dim * es);
      }
      for (int64_t i = 0; i < m; i++) {
        memcpy(dst + (size_t)((n0 + i) * stride) * es,
               (const char*)t->data + (size_t)(i * impl->dim) * es, (size_t)impl->dim * es);
      }
      tmp.data = dst;
      tmp.data_owned = dst;
      tmp.data_bytes = bytes;
      tmp.stride = stride;
      tmp.n = n0 + m;
      /* cuVS inserts the new rows into the existing graph (add_nodes.cuh);
       * the double rebuilds the whole graph, intermediate degree 2 x degree */
      int64_t degree = impl->degree;
      if (degree > tmp.n - 1) degree = tmp.n - 1;
      int64_t intermediate = 2 * degree;
      if (intermediate > tmp.n - 1) intermediate = tmp.n - 1;
      if (cg_build_graph(&tmp, intermediate, degree) != 0) {
        dbl_buf_free(dst, bytes);
        st = dbl_plain_fail("std::bad_alloc");
      } else {
        cg_release_storage(impl);
        impl->data = tmp.data;
        impl->data_owned = tmp.data_owned;
        impl->data_bytes = tmp.data_bytes;
        impl->stride = tmp.stride;
        impl->n = tmp.n;
        impl->graph = tmp.graph;
        impl->graph_owned = tmp.graph_owned;
        impl->graph_bytes = tmp.graph_bytes;
        impl->degree = tmp.degree;
        dbl_dev_give(&impl->dev);
        st = dbl_dev_take(new_dev, &impl->dev);
      }
    }
  }
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

DBL_API cuvsError_t cuvsCagraExtend(cuvsResources_t res, cuvsCagraExtendParams_t params,
                                    DLManagedTensor* additional_dataset, cuvsCagraIndex_t index)
{
  DBL_ENTER(cuvsCagraExtend);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_used_by(r, index);
  cuvsError_t st = cg_extend(params, additional_dataset, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
#endif

/* ---- serialization: a format of the double's own ---- */

static const char CG_FILE_MAGIC[8] = {'C', 'V', 'D', 'B', 'L', 'C', 'G', '1'};

typedef struct {
  char magic[8];
  uint8_t code, bits;
  uint16_t lanes;
  int32_t metric;
  int64_t n, dim, degree;
  uint8_t has_dataset, compressed, pad[6];
} cg_file_header;

static cuvsError_t cg_serialize(const char* filename, cuvsCagraIndex_t index, int include_dataset,
                                int hnsw)
{
  TRY(cg_handle(index));
  if (!cg_dtype_ok(index->dtype)) {
    return RAFT_FAIL("Unsupported index dtype: %d and bits: %d", (int)index->dtype.code,
                     (int)index->dtype.bits);
  }
  cg_impl* impl;
  TRY(cg_impl_data(index, &impl));
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  pthread_rwlock_rdlock(&impl->lock);
  cuvsError_t st = cg_check_alive(impl);
  if (st == CUVS_SUCCESS && !hnsw && impl->on_disk) {
    st = RAFT_FAIL("Cannot serialize a disk-backed CAGRA index. Convert it with "
                   "cuvs::neighbors::hnsw::from_cagra() and load it into memory via "
                   "cuvs::neighbors::hnsw::deserialize() before serialization.");
  }
  if (st == CUVS_SUCCESS && hnsw && (!impl->has_dataset || impl->compressed)) {
    st = RAFT_FAIL("Invalid CAGRA dataset of size 0 during serialization, shape 0x%lld",
                   (long long)(impl->on_disk ? 0 : impl->dim));
  }
  FILE* f = st == CUVS_SUCCESS ? fopen(filename, "wb") : NULL;
  if (st == CUVS_SUCCESS && !f) st = RAFT_FAIL("Cannot open file %s", filename);
  if (f) {
    int ok = 1;
    size_t es = dl_elem_size(impl->dtype);
    if (!hnsw) {
      cg_file_header h;
      memset(&h, 0, sizeof h);
      memcpy(h.magic, CG_FILE_MAGIC, 8);
      h.code = impl->dtype.code;
      h.bits = impl->dtype.bits;
      h.lanes = 1;
      h.metric = impl->metric;
      h.n = impl->n;
      h.dim = impl->dim;
      h.degree = impl->degree;
      h.has_dataset = (uint8_t)(include_dataset && impl->has_dataset);
      h.compressed = (uint8_t)impl->compressed;
      ok = fwrite(&h, sizeof h, 1, f) == 1;
      for (int64_t i = 0; ok && h.has_dataset && i < impl->n; i++) {
        ok = fwrite((const char*)impl->data + (size_t)(i * impl->stride) * es, es,
                    (size_t)impl->dim, f) == (size_t)impl->dim;
      }
      if (ok && impl->n * impl->degree > 0) {
        ok = fwrite(impl->graph, sizeof(uint32_t), (size_t)(impl->n * impl->degree), f) ==
             (size_t)(impl->n * impl->degree);
      }
    } else {
      /* hnswlib's layout with every node on the base layer: header, then per
       * node [link count, degree ids, vector, label], then per node 0 upper
       * links. */
      uint64_t n = (uint64_t)impl->n, deg = (uint64_t)impl->degree;
      uint64_t links = sizeof(uint32_t) + deg * sizeof(uint32_t);
      uint64_t per = links + (uint64_t)impl->dim * es + sizeof(uint64_t);
      uint64_t offset_level0 = 0, max_elements = n, count = n, label_offset = links + impl->dim * es,
               offset_data = links, maxM = deg / 2, maxM0 = deg, M = deg / 2, ef = 500;
      int32_t max_level = 1, enterpoint = (int32_t)(n / 2);
      double mult = M > 1 ? 1.0 / log((double)M) : 1.0;
      ok = fwrite(&offset_level0, 8, 1, f) == 1 && fwrite(&max_elements, 8, 1, f) == 1 &&
           fwrite(&count, 8, 1, f) == 1 && fwrite(&per, 8, 1, f) == 1 &&
           fwrite(&label_offset, 8, 1, f) == 1 && fwrite(&offset_data, 8, 1, f) == 1 &&
           fwrite(&max_level, 4, 1, f) == 1 && fwrite(&enterpoint, 4, 1, f) == 1 &&
           fwrite(&maxM, 8, 1, f) == 1 && fwrite(&maxM0, 8, 1, f) == 1 &&
           fwrite(&M, 8, 1, f) == 1 && fwrite(&mult, 8, 1, f) == 1 && fwrite(&ef, 8, 1, f) == 1;
      for (uint64_t i = 0; ok && i < n; i++) {
        uint32_t cnt = (uint32_t)deg;
        uint64_t label = i;
        ok = fwrite(&cnt, 4, 1, f) == 1 &&
             (deg == 0 || fwrite(impl->graph + i * deg, 4, deg, f) == deg) &&
             fwrite((const char*)impl->data + (size_t)((int64_t)i * impl->stride) * es, es,
                    (size_t)impl->dim, f) == (size_t)impl->dim &&
             fwrite(&label, 8, 1, f) == 1;
      }
      for (uint64_t i = 0; ok && i < n; i++) {
        uint32_t zero = 0;
        ok = fwrite(&zero, 4, 1, f) == 1;
      }
    }
    if (fclose(f) != 0) ok = 0;
    if (!ok) st = RAFT_FAIL("cuvsdouble: failed writing %s", filename);
  }
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

#if DBL_RELEASE == 2606
DBL_API cuvsError_t cuvsCagraSerialize(cuvsResources_t res, const char* filename,
                                       cuvsCagraIndex_t index, bool include_dataset)
{
  DBL_ENTER(cuvsCagraSerialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = cg_serialize(filename, index, include_dataset, 0);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
#endif

DBL_API cuvsError_t cuvsCagraSerializeToHnswlib(cuvsResources_t res, const char* filename,
                                                cuvsCagraIndex_t index)
{
  DBL_ENTER(cuvsCagraSerializeToHnswlib);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = cg_serialize(filename, index, 1, 1);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}


/* cuvs::util::is_valid_distance_type, which cuVS's deserializers apply to
 * the metric they read */
static int file_metric_ok(int m) { return (m >= 0 && m <= 20) || m == 100 || m == 101; }

/* The double's own formats end where the index does: bytes after it are
 * refused (cuVS reads no further; the safe layer refuses them before C in
 * cuVS's formats, whose items it can walk). */
static int file_at_end(FILE* f) { return dbl_at_end(f); }

static cuvsError_t cg_deserialize(const char* filename, cuvsCagraIndex_t index)
{
  TRY(cg_handle(index));
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  FILE* f = fopen(filename, "rb");
  if (!f) return RAFT_FAIL("Cannot open file %s", filename);
  cg_file_header h;
  size_t got_header = fread(&h, 1, sizeof h, f);
  if (got_header >= 8 && memcmp(h.magic, "CVDBLCG6", 8) == 0) {
    /* a file of the 26.08 double (cuVS's serialization version 6) */
    fclose(f);
    return RAFT_FAIL("serialization version mismatch, expected %d, got %d ", 5, 6);
  }
  if (got_header != sizeof h || memcmp(h.magic, CG_FILE_MAGIC, 8) != 0) {
    fclose(f);
    return RAFT_FAIL("cuvsdouble: %s is not a CAGRA index file written by the test double",
                     filename);
  }
  DLDataType dt = {h.code, h.bits, 1};
  /* cuVS sets bits, then code once the index is read; lanes never (0 from
   * cuvsCagraIndexCreate) */
  index->dtype.bits = dt.bits;
  if (!cg_dtype_ok(dt) || h.n < 0 || h.dim < 0 || h.degree < 0) {
    fclose(f);
    return RAFT_FAIL("Unsupported dtype in file %s", filename);
  }
  if (!file_metric_ok(h.metric)) {
    fclose(f);
    return RAFT_FAIL("cagra::deserialize: invalid metric value %d", (int)h.metric);
  }
  if (h.degree > (1 << 16)) {
    fclose(f);
    return RAFT_FAIL("cagra::deserialize: graph_degree=%u exceeds maximum %u", (unsigned)h.degree,
                     1u << 16);
  }
  static const uint8_t zero_pad[6] = {0};
  if (h.has_dataset > 1 || h.compressed > 1 || h.n > ((int64_t)1 << 40) || h.dim > (1 << 24) ||
      h.lanes != 1 || memcmp(h.pad, zero_pad, sizeof zero_pad) != 0) {
    fclose(f);
    return RAFT_FAIL("cuvsdouble: %s is not a CAGRA index file written by the test double",
                     filename);
  }
  if (!dbl_file_holds(f, h.has_dataset ? (uint64_t)h.n : 0, (uint64_t)h.dim, dl_elem_size(dt),
                      (uint64_t)h.n, (uint64_t)h.degree, sizeof(uint32_t))) {
    fclose(f);
    return RAFT_FAIL("cuvsdouble: %s is truncated", filename);
  }
  cg_impl* impl = cg_new();
  if (!impl) {
    fclose(f);
    return dbl_plain_fail("std::bad_alloc");
  }
  impl->dtype = dt;
  impl->metric = h.metric;
  impl->n = h.n;
  impl->dim = h.dim;
  impl->degree = h.degree;
  impl->compressed = h.compressed;
  size_t es = dl_elem_size(dt);
  int ok = 1;
  if (h.has_dataset) {
    impl->stride = padded_stride(h.dim, es);
    impl->data_bytes = (size_t)(h.n * impl->stride) * es;
    impl->data_owned = dbl_buf_alloc(impl->data_bytes);
    ok = impl->data_owned != NULL;
    if (ok) {
      memset(impl->data_owned, 0, impl->data_bytes);
      impl->data = impl->data_owned;
      impl->has_dataset = 1;
    }
    for (int64_t i = 0; ok && i < h.n; i++) {
      ok = fread((char*)impl->data_owned + (size_t)(i * impl->stride) * es, es, (size_t)h.dim, f) ==
           (size_t)h.dim;
    }
  } else {
    /* cuVS reads the dimension from the file but keeps the empty dataset
     * index(res, metric) made (empty_dataset(0)), and index::dim() is the
     * dataset's: a graph-only index reports dimension 0 */
    impl->dim = 0;
    impl->stride = 0;
  }
  if (ok) {
    impl->graph_bytes = (size_t)(h.n * h.degree) * sizeof(uint32_t);
    impl->graph_owned = dbl_buf_alloc(impl->graph_bytes);
    ok = impl->graph_owned != NULL;
    if (ok && impl->graph_bytes) {
      ok = fread(impl->graph_owned, impl->graph_bytes, 1, f) == 1;
    }
    impl->graph = impl->graph_owned;
  }
  int trailing = ok && !file_at_end(f);
  fclose(f);
  if (!ok) {
    cg_free(impl);
    return RAFT_FAIL("cuvsdouble: %s is truncated", filename);
  }
  if (trailing) {
    cg_free(impl);
    return RAFT_FAIL("cuvsdouble: %s has bytes after the index", filename);
  }
  /* cagra_serialize.cuh deserialize: the graph and the rows, padded, on
   * the device */
  cuvsError_t st = dbl_dev_take(c256((uint64_t)h.n * (uint64_t)h.degree * 4) +
                                  (impl->has_dataset ? c256(impl->data_bytes) : 0),
                                &impl->dev);
  if (st != CUVS_SUCCESS) {
    cg_free(impl);
    return st;
  }
  cg_install(index, impl);
  index->dtype.code = dt.code;
  return CUVS_SUCCESS;
}

#if DBL_RELEASE == 2606
DBL_API cuvsError_t cuvsCagraDeserialize(cuvsResources_t res, const char* filename,
                                         cuvsCagraIndex_t index)
{
  DBL_ENTER(cuvsCagraDeserialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_used_by(r, index);
  cuvsError_t st = cg_deserialize(filename, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
#endif

/* ---- index from a graph and a dataset ---- */

static cuvsError_t cg_from_args(cuvsDistanceType metric, DLManagedTensor* graph_t,
                                DLManagedTensor* dataset_t, cuvsCagraIndex_t index)
{
  TRY(cg_handle(index));
  TRY(dl_check_ptr(dataset_t, "dataset"));
  TRY(dl_check_ptr(graph_t, "graph"));
  const DLTensor* t = &dataset_t->dl_tensor;
  const DLTensor* g = &graph_t->dl_tensor;
#if DBL_RELEASE >= 2608
  cg_destroy_installed(index); /* 26.08 destroys the index the handle held */
#endif
  index->dtype = t->dtype;
  if (!cg_dtype_ok(t->dtype)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)t->dtype.code,
                     (int)t->dtype.bits);
  }
  int device = dl_dev_compat(t);
#if DBL_RELEASE >= 2608
  EXPECTS(device || !dl_host_compat(t),
          "cuvsCagraIndexFromArgs: host dataset is unsupported; use cuvsCagraBuild for host "
          "datasets, then attach a matching device dataset view via cuvsCagraUpdateDataset with a "
          "device padded dataset view.");
#endif
  if (!device && !dl_host_compat(t)) {
    dbl_violation("cuvsCagraIndexFromArgs with dataset device type %d: the real library stores a "
                  "null index and reports success",
                  (int)t->device.device_type);
    return RAFT_FAIL("cuvsdouble: dataset device type %d is neither device nor host compatible",
                     (int)t->device.device_type);
  }
  int gdevice = dl_dev_compat(g);
  TRY(dl_view(dataset_t, LAYOUT_ROW, t->dtype.code, t->dtype.bits, device ? WANT_DEVICE : WANT_HOST,
              2));
  TRY(dl_view(graph_t, LAYOUT_ROW, kDLUInt, 32, gdevice ? WANT_DEVICE : WANT_HOST, 2));
  EXPECTS(t->shape[0] == g->shape[0], "Dataset and knn_graph must have equal number of rows");
  TRY(dl_strict(t, "dataset"));
  TRY(dl_strict(g, "graph"));
  TRY(cg_metric_ok((int)metric, t->dtype));
  int64_t n = t->shape[0], deg = g->shape[1];
  const uint32_t* gv = g->data;
  for (int64_t i = 0; i < n * deg; i++) {
    if (gv[i] >= (uint64_t)n) {
      dbl_violation("the graph holds id %u at position %lld but the dataset has %lld rows (the "
                    "real library would read out of bounds when searching)",
                    gv[i], (long long)i, (long long)n);
      break;
    }
  }
  cg_impl* impl = cg_new();
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  impl->dtype = t->dtype;
  impl->metric = (int)metric;
  impl->dim = t->shape[1];
  impl->degree = deg;
#if DBL_RELEASE >= 2608
  /* 26.08 references the rows either way: a device-padded index when each
   * row is a multiple of 16 bytes, a device-standard one (unsearchable until
   * cuvsCagraUpdateDataset) otherwise */
  if (((size_t)impl->dim * dl_elem_size(t->dtype)) % 16 != 0) {
    dbl_entry e;
    size_t bytes = (size_t)(n * impl->dim) * dl_elem_size(t->dtype);
    cg_ref ref = {t->data, impl->dim, 0, CG_DS_DEVICE_STANDARD};
    if (bytes > 0 && dbl_reg_containing(t->data, bytes, &e)) ref.borrow = e.id;
    cg_take_ref(impl, &ref, n);
  } else
#endif
  if (cg_take_dataset(impl, t, device, 1) != 0) {
    cg_free(impl);
    return dbl_plain_fail("std::bad_alloc");
  }
  size_t gbytes = (size_t)(n * deg) * sizeof(uint32_t);
  if (gdevice) { /* a device graph is referenced, as in cuVS */
    impl->graph = gv;
    dbl_entry e;
    if (gbytes > 0 && dbl_reg_containing(gv, gbytes, &e)) {
      impl->graph_borrow = e.id;
      dbl_reg_borrow(e.id, +1);
    }
  } else {
    impl->graph_owned = dbl_buf_alloc(gbytes);
    if (!impl->graph_owned) {
      cg_free(impl);
      return dbl_plain_fail("std::bad_alloc");
    }
    if (gbytes) memcpy(impl->graph_owned, gv, gbytes);
    impl->graph_bytes = gbytes;
    impl->graph = impl->graph_owned;
  }
  cg_install(index, impl);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsCagraIndexFromArgs(cuvsResources_t res, cuvsDistanceType metric,
                                           DLManagedTensor* graph, DLManagedTensor* dataset,
                                           cuvsCagraIndex_t index)
{
  DBL_ENTER(cuvsCagraIndexFromArgs);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_used_by(r, index);
  cuvsError_t st = cg_from_args(metric, graph, dataset, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- merge ---- */

/* cagra_merge.cuh (26.06 and 26.08) and, on 26.08, c/src/neighbors/cagra.cpp:
 * the device memory of merging total rows into out (its kept rows, of
 * degree deg), filtered or not. 26.06: the rows gathered in a device
 * matrix [total, dim] (with a filter, the kept rows' indices and a matrix
 * of them), held through cagra::build over the kept rows, which copies them
 * padded when a row is not a multiple of 16 bytes; the index owns its rows
 * after. 26.08: the merged dataset [kept, padded] (dev_rows, handed to the
 * dataset by cg_merge_2608), with a filter a padded staging copy of every
 * row and the kept rows' indices, then the graph build over the padded
 * rows. The build's phases as cg_dev_build's; an iterative build's are not
 * modelled. */
static cuvsError_t cg_dev_build(cg_impl* impl, cuvsCagraIndexParams_t params, int algo, int host,
                                int64_t ideg, int64_t deg, uint64_t copy_bytes);
static cuvsError_t cg_dev_merge(cg_impl* out, cuvsCagraIndexParams_t params, int64_t total,
                                int filtered, int64_t ideg, int64_t deg)
{
  size_t es = dl_elem_size(out->dtype);
  uint64_t kept = (uint64_t)out->n, dim = (uint64_t)out->dim;
  uint64_t padded = c256(kept * (uint64_t)out->stride * es);
  int algo = (int)params->build_algo;
  if (algo < AUTO_SELECT || algo > ACE) algo = AUTO_SELECT;
  int modelled = algo == IVF_PQ || algo == NN_DESCENT || algo == AUTO_SELECT;
  dbl_dev_block gather = {0};
#if DBL_RELEASE >= 2608
  TRY(dbl_dev_take(padded, &out->dev_rows));
  uint64_t staging = filtered ? c256((uint64_t)total * (uint64_t)out->stride * es) + c256(kept * 8) : 0;
  TRY(dbl_dev_take(staging, &gather));
  cuvsError_t st = modelled ? cg_dev_build(out, params, algo, 0, ideg, deg, 0)
                            : dbl_dev_take(c256(kept * (uint64_t)deg * 4), &out->dev);
  dbl_dev_give(&gather);
  return st;
#else
  uint64_t rows = c256((uint64_t)total * dim * es);
  if (filtered) rows += c256(kept * 8) + c256(kept * dim * es);
  TRY(dbl_dev_take(rows, &gather));
  int aligned = (dim * es) % 16 == 0;
  cuvsError_t st = modelled ? cg_dev_build(out, params, algo, 0, ideg, deg, aligned ? 0 : padded)
                            : CUVS_SUCCESS;
  dbl_dev_give(&gather);
  if (st == CUVS_SUCCESS) { /* the index owns its rows: the merge's matrix, or the build's copy */
    dbl_dev_give(&out->dev);
    st = dbl_dev_take(c256(kept * (uint64_t)deg * 4) + padded, &out->dev);
  }
  return st;
#endif
}

static cuvsError_t cg_merge(cuvsCagraIndexParams_t params, cuvsCagraIndex_t* indices,
                            size_t num_indices, cuvsFilter filter, cuvsCagraIndex_t output)
{
  EXPECTS(indices != NULL && num_indices > 0, "indices array cannot be null or empty");
  EXPECTS(params != NULL, "params cannot be null");
  TRY(dbl_check_params(params, K_CAGRA_INDEX_PARAMS));
  for (size_t i = 0; i < num_indices; i++) TRY(cg_handle(indices[i]));
  DLDataType dt = indices[0]->dtype;
  for (size_t i = 1; i < num_indices; i++) {
    EXPECTS(indices[i]->dtype.code == dt.code && indices[i]->dtype.bits == dt.bits,
            "All input indices must have the same data type");
    EXPECTS(indices[i]->addr != 0, "All input indices must be built (non-empty)");
  }
  EXPECTS(output != NULL, "Output index pointer must not be null");
  TRY(cg_handle(output));
  output->dtype = dt;
  if (!cg_dtype_ok(dt)) {
    return RAFT_FAIL("Unsupported index data type: code=%d, bits=%d", (int)dt.code, (int)dt.bits);
  }
  TRY(dbl_check_graph_build_params(params));
  if (filter.type != NO_FILTER && filter.type != BITSET) {
    return RAFT_FAIL("Unsupported filter type: BITMAP");
  }
  cg_impl** impls = calloc(num_indices, sizeof(cg_impl*));
  if (!impls) return dbl_plain_fail("std::bad_alloc");
  cuvsError_t st = CUVS_SUCCESS;
  size_t locked = 0;
  int64_t total = 0, dim = -1;
  for (size_t i = 0; i < num_indices && st == CUVS_SUCCESS; i++) {
    st = cg_impl_data(indices[i], &impls[i]);
    if (st != CUVS_SUCCESS) break;
    if (impls[i]->dtype.code != dt.code || impls[i]->dtype.bits != dt.bits) {
      st = RAFT_FAIL("All input indices must have the same data type");
      break;
    }
    pthread_rwlock_rdlock(&impls[i]->lock);
    locked = i + 1;
    if (!impls[i]->has_dataset) {
      st = RAFT_FAIL(
        "cagra::merge only supports an index to which the dataset is attached. Please check if "
        "the index was built with index_param.attach_dataset_on_build = true, or if a dataset was "
        "attached after the build.");
    } else if (impls[i]->compressed) {
      st = RAFT_FAIL("cagra::merge only supports an uncompressed dataset index");
    } else if (dim >= 0 && impls[i]->dim != dim) {
      st = RAFT_FAIL("Dimension of datasets in indices must be equal.");
    } else {
      dim = impls[i]->dim;
      total += impls[i]->n;
      st = cg_check_alive(impls[i]);
    }
  }
  dbl_filter f = {FILTER_NONE, NULL};
  if (st == CUVS_SUCCESS) st = dbl_filter_view(filter, total, 1, &f);
  if (st == CUVS_SUCCESS) st = cg_metric_ok((int)params->metric, dt);
  cg_impl* out = NULL;
  if (st == CUVS_SUCCESS) {
    size_t es = dl_elem_size(dt);
    int64_t kept = 0;
    for (int64_t i = 0; i < total; i++) {
      if (f.kind == FILTER_NONE || ((f.words[i >> 5] >> (i & 31)) & 1u)) kept++;
    }
    if (kept == 0) {
      st = RAFT_FAIL("cuvsdouble: the merged index would be empty");
    } else {
      out = cg_new();
      int64_t stride = padded_stride(dim, es);
      size_t bytes = (size_t)(kept * stride) * es;
      char* dst = out ? dbl_buf_alloc(bytes) : NULL;
      if (!dst) {
        st = dbl_plain_fail("std::bad_alloc");
      } else {
        memset(dst, 0, bytes);
        int64_t row = 0, gid = 0;
        for (size_t i = 0; i < num_indices; i++) {
          for (int64_t r = 0; r < impls[i]->n; r++, gid++) {
            if (f.kind != FILTER_NONE && !((f.words[gid >> 5] >> (gid & 31)) & 1u)) continue;
            memcpy(dst + (size_t)(row * stride) * es,
                   (const char*)impls[i]->data + (size_t)(r * impls[i]->stride) * es,
                   (size_t)dim * es);
            row++;
          }
        }
        out->dtype = dt;
        out->metric = (int)params->metric;
        out->dim = dim;
        out->n = kept;
        out->stride = stride;
        out->data = dst;
        out->data_owned = dst;
        out->data_bytes = bytes;
        out->has_dataset = 1;
        size_t intermediate, degree;
        st = cg_degrees(params, kept, &intermediate, &degree);
        if (st == CUVS_SUCCESS && cg_build_graph(out, (int64_t)intermediate, (int64_t)degree) != 0) {
          st = dbl_plain_fail("std::bad_alloc");
        }
        if (st == CUVS_SUCCESS) {
          st = cg_dev_merge(out, params, total, f.kind != FILTER_NONE, (int64_t)intermediate,
                            (int64_t)degree);
        }
      }
    }
  }
  for (size_t i = 0; i < locked; i++) pthread_rwlock_unlock(&impls[i]->lock);
  free(impls);
  if (st != CUVS_SUCCESS) {
    if (out) cg_free(out);
    return st;
  }
  cg_install(output, out);
  return CUVS_SUCCESS;
}

#if DBL_RELEASE == 2606
DBL_API cuvsError_t cuvsCagraMerge(cuvsResources_t res, cuvsCagraIndexParams_t params,
                                   cuvsCagraIndex_t* indices, size_t num_indices, cuvsFilter filter,
                                   cuvsCagraIndex_t output_index)
{
  DBL_ENTER(cuvsCagraMerge);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_used_by(r, output_index);
  cuvsError_t st = cg_merge(params, indices, num_indices, filter, output_index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
#endif

#if DBL_RELEASE >= 2608
#include "dbl_cagra_2608.inc" /* 26.08's CAGRA entry points, on the helpers above */
#endif

/* ---- for dbl_hnsw.c: what hnsw::from_cagra reads of a built index ---- */

DBL_HIDDEN cuvsError_t dbl_cagra_peek(cuvsCagraIndex_t index, dbl_cagra_peek_t* out)
{
  cg_impl* impl;
  TRY(cg_impl_data(index, &impl));
  pthread_rwlock_rdlock(&impl->lock);
  cuvsError_t st = cg_check_alive(impl);
  if (st != CUVS_SUCCESS) {
    pthread_rwlock_unlock(&impl->lock);
    return st;
  }
  out->impl = impl;
  out->dtype = impl->dtype;
  out->metric = impl->metric;
  out->n = impl->n;
  out->dim = impl->dim;
  out->degree = impl->degree;
  out->data = (impl->has_dataset || impl->on_disk) && !impl->compressed ? impl->data : NULL;
  out->stride = impl->stride;
  out->graph = impl->graph;
  out->on_disk = impl->on_disk;
  out->device_padded = impl->ds_kind == CG_DS_DEVICE_PADDED;
  out->disk_dir = impl->disk_dir;
  return CUVS_SUCCESS;
}

DBL_HIDDEN void dbl_cagra_peek_end(dbl_cagra_peek_t* p)
{
  if (p->impl) pthread_rwlock_unlock(&((cg_impl*)p->impl)->lock);
  p->impl = NULL;
}
