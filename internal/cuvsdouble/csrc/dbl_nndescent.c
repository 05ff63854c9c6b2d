/*
 * cuvsdouble NN-Descent (cuvs/neighbors/nn_descent.h): index handles, build,
 * graph and distances. The params (cuvsNNDescentIndexParamsCreate/Destroy)
 * live in dbl_params.c, shared with CAGRA's graph build.
 *
 * The graph is the exact kNN graph without self edges (knn_search with
 * exclude_self): a recall of 1, which the real GNND approaches but does not
 * promise. The rules are the real C and C++ code's (c/src/neighbors/
 * nn_descent.cpp, cpp/src/neighbors/detail/nn_descent*.{cuh,hpp}, the same
 * in v26.06.00 and v26.08.01), the unkind ones included:
 *   - cuvsNNDescentIndexDestroy frees only an index whose dtype is uint32
 *     (what cuvsNNDescentBuild writes first); the dtype of a fresh handle is
 *     all zero, so destroying one that never went through a build fails and
 *     leaks the handle (the double keeps it registered: the leak shows);
 *   - a caller graph (build's graph argument) is a host uint32 matrix that
 *     the index views, not copies, and it is written with
 *     params.graph_degree columns whatever its own shape (the double refuses
 *     a wrong shape as a violation: the real library writes out of bounds);
 *     with it, return_distances must be false;
 *   - graph_degree above intermediate_graph_degree is lowered to it, and
 *     intermediate_graph_degree at or above the rows to rows - 1;
 *   - the index keeps the graph in host memory and the distances in device
 *     memory; it keeps no reference to the dataset.
 */
#include "dbl.h"

#include <math.h>

#define NND_MAGIC 0x4e4e44494d504cULL

typedef struct {
  uint64_t magic;
  int64_t n, degree;
  uint32_t* graph; /* n x degree: owned, or the caller's (borrowed) */
  int graph_owned;
  float* distances; /* n x degree, owned, or NULL */
  int metric;
  dbl_dev_block dev; /* the distances, in device memory on a GPU (dbl_devmem.c) */
} nnd_impl;

static void nnd_impl_free(nnd_impl* impl)
{
  dbl_dev_give(&impl->dev);
  if (impl->graph_owned) dbl_buf_free(impl->graph, (size_t)(impl->n * impl->degree) * 4);
  if (impl->distances) dbl_buf_free(impl->distances, (size_t)(impl->n * impl->degree) * 4);
  impl->magic = 0;
  free(impl);
}

DBL_API cuvsError_t cuvsNNDescentIndexCreate(cuvsNNDescentIndex_t* index)
{
  DBL_ENTER(cuvsNNDescentIndexCreate);
  if (!index) {
    dbl_violation("NULL cuvsNNDescentIndex_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  cuvsNNDescentIndex* h = calloc(1, sizeof *h);
  if (!h) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(h, K_NND_INDEX, sizeof *h);
  *index = h;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsNNDescentIndexDestroy(cuvsNNDescentIndex_t index)
{
  DBL_ENTER(cuvsNNDescentIndexDestroy);
  if (dbl_reg_find(index, NULL) != K_NND_INDEX) {
    dbl_violation("destroying an invalid or already destroyed cuvsNNDescentIndex_t %p",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsNNDescentIndex_t %p", (void*)index);
  }
  if (!dl_is_dtype(index->dtype, kDLUInt, 32)) {
    /* the real code fails before `delete index_c_ptr`: the handle leaks */
    return RAFT_FAIL("Unsupported nn-descent index dtype: %d and bits: %d", (int)index->dtype.code,
                     (int)index->dtype.bits);
  }
  nnd_impl* impl = (nnd_impl*)index->addr;
  if (impl) {
    if (dbl_reg_remove(impl, K_NND_IMPL, NULL, NULL) == 0) {
      nnd_impl_free(impl);
    } else {
      dbl_violation("cuvsNNDescentIndexDestroy: addr %p is not a live index", (void*)impl);
    }
  }
  dbl_reg_remove(index, K_NND_INDEX, NULL, NULL);
  free(index);
  return dbl_ok();
}

static int nnd_metric_allowed(int m)
{
  return m == L2Expanded || m == L2SqrtExpanded || m == CosineExpanded || m == InnerProduct ||
         m == BitwiseHamming || m == L1;
}

static cuvsError_t nnd_build(cuvsNNDescentIndexParams_t params, DLManagedTensor* dataset,
                             DLManagedTensor* graph, cuvsNNDescentIndex_t index)
{
  if (dbl_reg_find(index, NULL) != K_NND_INDEX) {
    dbl_violation("cuvsNNDescentBuild: invalid cuvsNNDescentIndex_t %p (the real library would "
                  "crash)",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsNNDescentIndex_t %p", (void*)index);
  }
  index->dtype.code = kDLUInt;
  index->dtype.bits = 32;
  TRY(dl_check_ptr(dataset, "dataset"));
  const DLTensor* t = &dataset->dl_tensor;
  DLDataType dt = t->dtype;
  if (!(dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) ||
        dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8))) {
    return RAFT_FAIL("Unsupported nn-descent dataset dtype: %d and bits: %d", (int)dt.code,
                     (int)dt.bits);
  }
  if (!params) {
    dbl_violation("NULL cuvsNNDescentIndexParams_t (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL params");
  }
  /* the params are read by value: a struct of the caller's is fine */
  struct cuvsNNDescentIndexParams p = *params;
  if (graph) {
    TRY(dl_check_ptr(graph, "graph"));
    TRY(dl_view(graph, LAYOUT_ROW, kDLUInt, 32, WANT_HOST, 2));
  }
  if (dl_dev_compat(t)) {
    TRY(dl_view(dataset, LAYOUT_ROW, dt.code, dt.bits, WANT_DEVICE, 2));
  } else if (dl_host_compat(t)) {
    TRY(dl_view(dataset, LAYOUT_ROW, dt.code, dt.bits, WANT_HOST, 2));
  } else {
    return RAFT_FAIL("dataset must be accessible on host or device memory");
  }
  TRY(dl_strict(t, "dataset"));
  int64_t n = t->shape[0], dim = t->shape[1];
  size_t degree = p.graph_degree, inter = p.intermediate_graph_degree;
  if (!graph && inter < degree) degree = inter; /* detail::build's warning */
  /* get_build_config */
  EXPECTS(n < 2147483647 - 1, "The dataset size for GNND should be less than %d", 2147483647 - 1);
  EXPECTS(nnd_metric_allowed((int)p.metric),
          "The metric for NN Descent should be L2Expanded, L2SqrtExpanded, CosineExpanded, "
          "InnerProduct, BitwiseHamming or L1");
  size_t cfg_inter = inter, cfg_degree = p.graph_degree;
  if (cfg_inter >= (size_t)n) cfg_inter = (size_t)n - 1;
  if (cfg_inter < cfg_degree) cfg_degree = cfg_inter;
  if (cfg_degree != degree || (int64_t)degree > n - 1 || degree == 0) {
    /* the real build writes rows of cfg_degree into a graph of degree
     * columns (and a graph of more columns than n - 1 is never filled) */
    dbl_violation("cuvsNNDescentBuild: graph_degree %zu, intermediate_graph_degree %zu for %lld "
                  "rows: the real library fills a graph of %zu columns with rows of %zu",
                  (size_t)p.graph_degree, inter, (long long)n, degree, cfg_degree);
    return RAFT_FAIL("cuvsdouble: nn-descent graph_degree %zu does not fit %lld rows "
                     "(intermediate_graph_degree %zu)",
                     (size_t)p.graph_degree, (long long)n, inter);
  }
  int complete = (size_t)(n - 1) == degree && !p.return_distances;
  if (graph && !complete && p.return_distances) {
    return RAFT_FAIL("Distance view not allocated. Using return_distances set to true requires "
                     "distance view to be allocated.");
  }
  if (!complete && p.metric == BitwiseHamming &&
      !(dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8))) {
    return RAFT_FAIL(
      "Data type needs to be int8 or uint8 for NN Descent to run with BitwiseHamming distance.");
  }
  if (graph) {
    const DLTensor* g = &graph->dl_tensor;
    if (g->shape[0] != n || (size_t)g->shape[1] != degree) {
      dbl_violation("cuvsNNDescentBuild: the graph is %lld x %lld, the build writes %lld x %zu "
                    "into it (out of bounds in the real library)",
                    (long long)g->shape[0], (long long)g->shape[1], (long long)n, degree);
      return RAFT_FAIL("cuvsdouble: graph shape %lld x %lld, want %lld x %zu",
                       (long long)g->shape[0], (long long)g->shape[1], (long long)n, degree);
    }
    TRY(dl_strict(g, "graph"));
  }
  nnd_impl* impl = calloc(1, sizeof *impl);
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  impl->magic = NND_MAGIC;
  impl->n = n;
  impl->degree = (int64_t)degree;
  impl->metric = (int)p.metric;
  size_t cells = (size_t)n * degree;
  if (graph) {
    impl->graph = (uint32_t*)graph->dl_tensor.data;
  } else {
    impl->graph = dbl_buf_alloc(cells * 4);
    impl->graph_owned = 1;
  }
  if (p.return_distances && !graph) impl->distances = dbl_buf_alloc(cells * 4);
  if ((cells && !impl->graph) || (p.return_distances && !graph && cells && !impl->distances)) {
    nnd_impl_free(impl);
    return dbl_plain_fail("std::bad_alloc");
  }
  /* the device memory cuVS takes (dbl_devmem.c): GNND's working set while it
   * runs (cpp/src/neighbors/nn_descent.cu, build_mem_usage: an fp16 copy of
   * the rows, norms, 32-wide id and distance lists, locks and list sizes;
   * none for a complete graph, output without NN-Descent), and the
   * distances, which the index keeps on the device. Rounded up to 256. */
  {
    uint64_t N = (uint64_t)n, D = (uint64_t)dim;
#define R256(x) (((uint64_t)(x) + 255) / 256 * 256)
    uint64_t gnnd = complete ? 0
                             : R256(N * D * 2) + R256(N * 4) + 2 * R256(N * 32 * 4) + R256(N * 4) +
                                 R256(2 * N * 8);
    uint64_t dist = impl->distances ? R256((uint64_t)cells * 4) : 0;
#undef R256
    dbl_dev_block work;
    cuvsError_t st = dbl_dev_take(gnnd, &work);
    if (st == CUVS_SUCCESS) st = dbl_dev_take(dist, &impl->dev);
    dbl_dev_give(&work);
    if (st != CUVS_SUCCESS) {
      nnd_impl_free(impl);
      return st;
    }
  }
  if (complete) {
    for (int64_t i = 0; i < n; i++)
      for (size_t j = 0; j < degree; j++) impl->graph[i * degree + j] = (uint32_t)((i + j + 1) % n);
  } else {
    dbl_matrix m = {t->data, dt, dim, 1, n, dim};
    /* the real GNND reports cosine as 1 - cos and inner products as they
     * are (it negates them internally and reverts) */
    float* d = impl->distances;
    if (!d) d = malloc((cells ? cells : 1) * sizeof(float));
    int rc = d ? knn_search(&m, &m, (int)p.metric, p.metric_arg, (int64_t)degree, NULL, 1, NULL,
                            impl->graph, (int64_t)degree, d, (int64_t)degree)
               : -1;
    if (d != impl->distances) free(d);
    if (rc != 0) {
      nnd_impl_free(impl);
      return dbl_plain_fail("std::bad_alloc");
    }
  }
  if (index->addr != 0) {
    dbl_violation("cuvsNNDescentBuild into a cuvsNNDescentIndex_t that holds an index: the real "
                  "library leaks the previous one (so does the double)");
  }
  dbl_reg_add(impl, K_NND_IMPL, sizeof *impl);
  index->addr = (uintptr_t)impl;
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsNNDescentBuild(cuvsResources_t res, cuvsNNDescentIndexParams_t params,
                                       DLManagedTensor* dataset, DLManagedTensor* graph,
                                       cuvsNNDescentIndex_t index)
{
  DBL_ENTER(cuvsNNDescentBuild);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = nnd_build(params, dataset, graph, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static cuvsError_t nnd_impl_of(cuvsNNDescentIndex_t index, nnd_impl** out)
{
  if (dbl_reg_find(index, NULL) != K_NND_INDEX) {
    dbl_violation("invalid cuvsNNDescentIndex_t %p (the real library would crash)", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsNNDescentIndex_t %p", (void*)index);
  }
  if (!dl_is_dtype(index->dtype, kDLUInt, 32)) {
    return RAFT_FAIL("Unsupported nn-descent index dtype: %d and bits: %d", (int)index->dtype.code,
                     (int)index->dtype.bits);
  }
  nnd_impl* impl = (nnd_impl*)index->addr;
  if (dbl_reg_find(impl, NULL) != K_NND_IMPL) {
    dbl_violation("nn-descent index %p holds no built index (the real library would dereference "
                  "addr %#lx)",
                  (void*)index, (unsigned long)index->addr);
    return RAFT_FAIL("cuvsdouble: the nn-descent index was not built");
  }
  *out = impl;
  return CUVS_SUCCESS;
}

/* GetGraph / GetDistances: dst (device or host, as the tensor says) gets a
 * copy of src, n x degree 4-byte cells, on r's stream. */
static cuvsError_t nnd_copy_out(dbl_res* r, DLManagedTensor* dst, int code, const void* src,
                                nnd_impl* impl, const char* what)
{
  TRY(dl_check_ptr(dst, what));
  const DLTensor* t = &dst->dl_tensor;
  int where = dl_dev_compat(t) ? WANT_DEVICE : WANT_HOST;
  TRY(dl_view(dst, LAYOUT_ROW, code, 32, where, 2));
  EXPECTS(t->shape[0] == impl->n, "Output %s has incorrect number of rows", what);
  EXPECTS(t->shape[1] == impl->degree, "Output %s has incorrect number of cols", what);
  TRY(dl_strict(t, what));
  size_t bytes = (size_t)(impl->n * impl->degree) * 4;
  if (bytes) memcpy(t->data, src, bytes);
  dbl_async_output(r->stream, t);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsNNDescentIndexGetGraph(cuvsResources_t res, cuvsNNDescentIndex_t index,
                                               DLManagedTensor* graph)
{
  DBL_ENTER(cuvsNNDescentIndexGetGraph);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  nnd_impl* impl;
  cuvsError_t st = nnd_impl_of(index, &impl);
  if (st == CUVS_SUCCESS) st = nnd_copy_out(r, graph, kDLUInt, impl->graph, impl, "graph");
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsNNDescentIndexGetDistances(cuvsResources_t res, cuvsNNDescentIndex_t index,
                                                   DLManagedTensor* distances)
{
  DBL_ENTER(cuvsNNDescentIndexGetDistances);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  nnd_impl* impl;
  cuvsError_t st = nnd_impl_of(index, &impl);
  if (st == CUVS_SUCCESS && !impl->distances) {
    st = RAFT_FAIL("nn-descent index doesn't contain distances - set return_distances when "
                   "building");
  }
  if (st == CUVS_SUCCESS) {
    st = nnd_copy_out(r, distances, kDLFloat, impl->distances, impl, "distances");
  }
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
