/*
 * cuvsdouble all-neighbors (cuvs/neighbors/all_neighbors.h): the kNN graph of
 * a dataset against itself, optionally with mutual-reachability distances.
 *
 * Every algorithm gives the exact graph (a recall of 1; the real IVF-PQ and
 * NN-Descent builders and the batched build approach it). What the graph
 * holds follows the real code (c/src/neighbors/all_neighbors.cpp,
 * cpp/src/neighbors/all_neighbors/all_neighbors.cuh):
 *   - brute force and IVF-PQ: the k nearest rows, the row itself among them
 *     (first, at distance 0, unless other rows tie with it);
 *   - NN-Descent: no self edges, then, except for InnerProduct, every row
 *     shifted right by one with the row itself in column 0 at distance 0;
 *   - core_distances: core[i] is row i's distance to its k-th neighbour
 *     (column k-1), then the graph is rebuilt under the mutual-reachability
 *     distance max(core[i], core[j], alpha * d(i, j)) (NN-Descent's shifted,
 *     column 0 then holding core[i]).
 * The checks and their order are each release's: 26.06 checks the dataset's
 * dtype first and wants device outputs; 26.08 checks the outputs' dtypes and
 * memory space first and takes host outputs with a host dataset.
 * cuvsAllNeighborsIndexParamsDestroy also destroys the IVF-PQ and NN-Descent
 * params the struct points to (through cuvsIvfPqIndexParamsDestroy and
 * cuvsNNDescentIndexParamsDestroy, as the real one does).
 */
#include "dbl.h"

#include <float.h>
#include <math.h>

DBL_HIDDEN cuvsError_t dbl_check_plain_params(const void* p, int kind);

DBL_API cuvsError_t cuvsAllNeighborsIndexParamsCreate(cuvsAllNeighborsIndexParams_t* params)
{
  DBL_ENTER(cuvsAllNeighborsIndexParamsCreate);
  if (!params) {
    dbl_violation("NULL cuvsAllNeighborsIndexParams_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsAllNeighborsIndexParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->algo = CUVS_ALL_NEIGHBORS_ALGO_BRUTE_FORCE;
  p->overlap_factor = 1;
  p->n_clusters = 1;
  p->metric = L2Expanded;
  p->ivf_pq_params = NULL;
  p->nn_descent_params = NULL;
  dbl_reg_add(p, K_ALLN_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsAllNeighborsIndexParamsDestroy(cuvsAllNeighborsIndexParams_t params)
{
  DBL_ENTER(cuvsAllNeighborsIndexParamsDestroy);
  if (params == NULL) return dbl_ok();
  int actual = dbl_reg_find(params, NULL);
  if (actual != K_ALLN_PARAMS) {
    dbl_violation("destroying an invalid or already destroyed cuvsAllNeighborsIndexParams_t %p",
                  (void*)params);
    return RAFT_FAIL("cuvsdouble: invalid cuvsAllNeighborsIndexParams_t %p", (void*)params);
  }
  /* the real Destroy ignores what these return */
  if (params->ivf_pq_params) (void)cuvsIvfPqIndexParamsDestroy(params->ivf_pq_params);
  if (params->nn_descent_params) (void)cuvsNNDescentIndexParamsDestroy(params->nn_descent_params);
  dbl_reg_remove(params, K_ALLN_PARAMS, NULL, NULL);
  free(params);
  return dbl_ok();
}

enum { ALGO_BF, ALGO_IVFPQ, ALGO_NND };

static int in_set(int m, const int* set, int n)
{
  for (int i = 0; i < n; i++)
    if (set[i] == m) return 1;
  return 0;
}

/* convert_params: the algorithm, and the metric the local builder uses. */
static cuvsError_t alln_algo(const struct cuvsAllNeighborsIndexParams* p, int64_t n, int* algo,
                             int* algo_metric)
{
  *algo_metric = (int)p->metric;
  switch (p->algo) {
    case CUVS_ALL_NEIGHBORS_ALGO_BRUTE_FORCE: *algo = ALGO_BF; break;
    case CUVS_ALL_NEIGHBORS_ALGO_NN_DESCENT:
      *algo = ALGO_NND;
      if (p->nn_descent_params) {
        TRY(dbl_check_plain_params(p->nn_descent_params, K_NND_INDEX_PARAMS));
        *algo_metric = (int)p->nn_descent_params->metric; /* convert_nn_descent_params */
      }
      break;
    case CUVS_ALL_NEIGHBORS_ALGO_IVF_PQ:
      *algo = ALGO_IVFPQ;
      if (p->ivf_pq_params) {
        TRY(dbl_check_plain_params(p->ivf_pq_params, K_IVFPQ_INDEX_PARAMS));
        *algo_metric = (int)p->ivf_pq_params->metric;
        (void)n;
      }
      break;
    default: return RAFT_FAIL("Unsupported all-neighbors algo");
  }
  return CUVS_SUCCESS;
}

/* check_params_validity: shapes, then the metric for the algorithm. */
static cuvsError_t alln_validity(const struct cuvsAllNeighborsIndexParams* p, int algo,
                                 const DLTensor* ds, const DLTensor* ind, const DLTensor* dist,
                                 const DLTensor* core)
{
  EXPECTS(ds->shape[0] == ind->shape[0],
          "number of rows in dataset should be the same as number of rows in indices matrix");
  if (dist) {
    EXPECTS(ind->shape[0] == dist->shape[0] && ind->shape[1] == dist->shape[1],
            "indices matrix and distances matrix has to be the same shape.");
  }
  if (core) {
    EXPECTS(dist, "distances matrix should be allocated to get mutual reachability distance.");
    EXPECTS(core->shape[0] == ds->shape[0],
            "core_distances size must equal the number of rows in dataset.");
  }
  static const int mrd[] = {L2Expanded, L2SqrtExpanded, CosineExpanded};
  static const int bf[] = {L2Expanded,     L2SqrtExpanded, CosineExpanded,      L1,
                           L2Unexpanded,   L2SqrtUnexpanded, InnerProduct,      Linf,
                           Canberra,       LpUnexpanded,   CorrelationExpanded, JensenShannon};
  static const int nnd[] = {L2Expanded, L2SqrtExpanded, CosineExpanded, InnerProduct};
  int m = (int)p->metric;
  if (algo == ALGO_BF) {
    if (core) {
      EXPECTS(in_set(m, mrd, 3),
              "Distance metric for all-neighbors build with brute force for computing mutual "
              "reachability distance should be L2Expanded, L2SqrtExpanded, or CosineExpanded.");
    } else {
      EXPECTS(in_set(m, bf, 12),
              "Distance metric for all-neighbors build with brute force should be L2Expanded, "
              "L2SqrtExpanded, CosineExpanded, L1, L2Unexpanded, L2SqrtUnexpanded, InnerProduct, "
              "Linf, Canberra, LpUnexpanded, CorrelationExpanded, or JensenShannon.");
    }
  } else if (algo == ALGO_NND) {
    if (core) {
      EXPECTS(in_set(m, mrd, 3),
              "Distance metric for all-neighbors build with NN Descent for computing mutual "
              "reachability distance should be L2Expanded, L2SqrtExpanded, or CosineExpanded.");
    } else {
      EXPECTS(in_set(m, nnd, 4),
              "Distance metric for all-neighbors build with NN Descent should be L2Expanded, "
              "L2SqrtExpanded, CosineExpanded, or InnerProduct.");
    }
  } else {
    EXPECTS(m == L2Expanded, "Distance metric for all-neighbors build with IVFPQ should be L2Expanded");
    EXPECTS(!core, "mutual reachability distance cannot be calculated using IVFPQ");
  }
  return CUVS_SUCCESS;
}

/* The k best rows for row i by key (smaller is better; ties by smaller id),
 * skipping row i when skip_self. */
static void select_k(const float* key, int64_t n, int64_t i, int skip_self, int64_t k,
                     int64_t* ids, float* keys)
{
  int64_t found = 0;
  for (int64_t j = 0; j < n; j++) {
    if (skip_self && j == i) continue;
    float v = key[j];
    if (found == k && !(v < keys[k - 1])) continue;
    int64_t pos = found < k ? found : k - 1;
    while (pos > 0 && v < keys[pos - 1]) {
      keys[pos] = keys[pos - 1];
      ids[pos] = ids[pos - 1];
      pos--;
    }
    keys[pos] = v;
    ids[pos] = j;
    if (found < k) found++;
  }
  for (int64_t j = found; j < k; j++) ids[j] = -1, keys[j] = FLT_MAX;
}

/* One pass: indices/distances (row strides k) for every row, core applied
 * when given. Returns 0, or -1 on allocation failure. */
static int alln_pass(const dbl_matrix* m, int metric, float metric_arg, int algo, int64_t k,
                     const float* core, float alpha, int64_t* ind, float* dist)
{
  int64_t n = m->n, dim = m->dim;
  float* all = malloc((size_t)(dim > 0 ? dim : 1) * sizeof(float) * (size_t)(n > 0 ? n : 1));
  float* key = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  float* val = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  float* keys = malloc((size_t)(k > 0 ? k : 1) * sizeof(float));
  int64_t* ids = malloc((size_t)(k > 0 ? k : 1) * sizeof(int64_t));
  if (!all || !key || !val || !keys || !ids) {
    free(all), free(key), free(val), free(keys), free(ids);
    return -1;
  }
  for (int64_t i = 0; i < n; i++) dl_load_row(m->base, m->dtype, m->rs, m->cs, i, dim, all + i * dim);
  int larger = knn_larger_is_better(metric);
  int shift = algo == ALGO_NND && metric != InnerProduct;
  int skip_self = algo == ALGO_NND;
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < n; j++) {
      float v = knn_distance(metric, metric_arg, all + i * dim, all + j * dim, dim);
      if (core) {
        float a = alpha * v;
        v = core[i] > core[j] ? core[i] : core[j];
        if (a > v) v = a;
      }
      val[j] = v;
      key[j] = larger ? -v : v;
      if (isnan(key[j])) key[j] = FLT_MAX;
    }
    int64_t kk = shift ? k - 1 : k;
    int64_t* row = ind + i * k;
    float* drow = dist + i * k;
    int64_t off = shift ? 1 : 0;
    if (kk > 0) select_k(key, n, i, skip_self, kk, ids, keys);
    for (int64_t j = 0; j < kk; j++) {
      row[off + j] = ids[j];
      drow[off + j] = ids[j] >= 0 ? val[ids[j]] : knn_worst(metric);
    }
    if (shift) {
      row[0] = i;
      drow[0] = core ? core[i] : 0.0f;
    }
  }
  free(all), free(key), free(val), free(keys), free(ids);
  return 0;
}

static cuvsError_t alln_run(dbl_res* r, const struct cuvsAllNeighborsIndexParams* p,
                            DLManagedTensor* dataset, DLManagedTensor* indices,
                            DLManagedTensor* distances, DLManagedTensor* core_distances,
                            float alpha, int host_dataset, int host_output)
{
  const DLTensor* ds = &dataset->dl_tensor;
  int out_where = host_output ? WANT_HOST : WANT_DEVICE;
  TRY(dl_view(dataset, LAYOUT_ROW, kDLFloat, 32, host_dataset ? WANT_HOST : WANT_DEVICE, 2));
  int algo, algo_metric;
  TRY(alln_algo(p, ds->shape[0], &algo, &algo_metric));
  TRY(dl_view(indices, LAYOUT_ROW, kDLInt, 64, out_where, 2));
  if (distances) TRY(dl_view(distances, LAYOUT_ROW, kDLFloat, 32, out_where, 2));
  if (core_distances) TRY(dl_view(core_distances, LAYOUT_ROW, kDLFloat, 32, out_where, 1));
  TRY(dl_strict(ds, "dataset"));
  TRY(dl_strict(&indices->dl_tensor, "indices"));
  if (distances) TRY(dl_strict(&distances->dl_tensor, "distances"));
  if (core_distances) TRY(dl_strict(&core_distances->dl_tensor, "core_distances"));
  TRY(alln_validity(p, algo, ds, &indices->dl_tensor, distances ? &distances->dl_tensor : NULL,
                    core_distances ? &core_distances->dl_tensor : NULL));
  if (p->n_clusters > 1) {
    EXPECTS(host_dataset,
            "Batched all-neighbors build is not supported with data on device. Put data on host "
            "for batch build.");
    EXPECTS(p->n_clusters > p->overlap_factor,
            "overlap_factor should be smaller than n_clusters. We recommend starting from "
            "overlap_factor=2 and gradually increase it for better knn graph recall.");
  }
  int64_t n = ds->shape[0], k = indices->dl_tensor.shape[1];
  if (algo == ALGO_IVFPQ && p->ivf_pq_params) {
    int64_t lists = (int64_t)p->ivf_pq_params->n_lists;
    EXPECTS(lists > 0 && lists <= n, "number of rows (%lld) must be at least n_lists (%lld)",
            (long long)n, (long long)lists);
  }
  if (algo != ALGO_NND ? k > n : k > n - 1 || k < 1) {
    dbl_violation("cuvsAllNeighborsBuild: k = %lld for %lld rows (%s): the real library's "
                  "builders are not defined there",
                  (long long)k, (long long)n, algo == ALGO_NND ? "NN-Descent" : "brute force/IVF-PQ");
    return RAFT_FAIL("cuvsdouble: k = %lld for %lld rows", (long long)k, (long long)n);
  }
  dbl_matrix m = {ds->data, ds->dtype, ds->shape[1], 1, n, ds->shape[1]};
  size_t cells = (size_t)(n * k);
  int64_t* ind = indices->dl_tensor.data;
  float* dist = distances ? (float*)distances->dl_tensor.data : malloc((cells ? cells : 1) * 4);
  if (!dist) return dbl_plain_fail("std::bad_alloc");
  /* the metric is the params', the local builder's (NN-Descent's own params
   * may name another: cuVS then builds with that one) */
  int rc = alln_pass(&m, algo_metric, 2.0f, algo, k, NULL, 1.0f, ind, dist);
  if (rc == 0 && core_distances) {
    float* core = core_distances->dl_tensor.data;
    for (int64_t i = 0; i < n; i++) core[i] = dist[i * k + k - 1];
    float* c = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!c) {
      rc = -1;
    } else {
      memcpy(c, core, (size_t)n * sizeof(float));
      rc = alln_pass(&m, algo_metric, 2.0f, algo, k, c, alpha, ind, dist);
      free(c);
    }
  }
  if (!distances) free(dist);
  if (rc != 0) return dbl_plain_fail("std::bad_alloc");
  dbl_async_outputs(r, indices, distances);
  if (core_distances) dbl_async_output(r->stream, &core_distances->dl_tensor);
  return CUVS_SUCCESS;
}

static cuvsError_t alln_build(dbl_res* r, cuvsAllNeighborsIndexParams_t params,
                              DLManagedTensor* dataset, DLManagedTensor* indices,
                              DLManagedTensor* distances, DLManagedTensor* core_distances,
                              float alpha)
{
  TRY(dl_check_ptr(dataset, "dataset"));
  if (!params) {
    dbl_violation("NULL cuvsAllNeighborsIndexParams_t (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL params");
  }
  TRY(dbl_check_plain_params(params, K_ALLN_PARAMS));
  const DLTensor* ds = &dataset->dl_tensor;
#if DBL_RELEASE >= 2608
  TRY(dl_check_ptr(indices, "indices"));
  EXPECTS(dl_is_dtype(indices->dl_tensor.dtype, kDLInt, 64), "indices must be int64 output tensor");
  if (distances) {
    TRY(dl_check_ptr(distances, "distances"));
    EXPECTS(dl_is_dtype(distances->dl_tensor.dtype, kDLFloat, 32),
            "distances must be float32 output tensor");
  }
  if (core_distances) {
    TRY(dl_check_ptr(core_distances, "core_distances"));
    EXPECTS(dl_is_dtype(core_distances->dl_tensor.dtype, kDLFloat, 32),
            "core_distances must be float32 output tensor");
  }
  if (core_distances && !distances) {
    return RAFT_FAIL("distances tensor must be provided when core_distances tensor is provided");
  }
  int host_out = dl_host_compat(&indices->dl_tensor);
  EXPECTS(host_out || dl_dev_compat(&indices->dl_tensor),
          "indices tensor must be host- or device-compatible");
  if (distances) {
    EXPECTS(dl_host_compat(&distances->dl_tensor) == host_out,
            "%s tensor must be in the same memory space (host or device) as indices", "distances");
  }
  if (core_distances) {
    EXPECTS(dl_host_compat(&core_distances->dl_tensor) == host_out,
            "%s tensor must be in the same memory space (host or device) as indices",
            "core_distances");
  }
  if (!dl_is_dtype(ds->dtype, kDLFloat, 32)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)ds->dtype.code,
                     (int)ds->dtype.bits);
  }
  if (dl_host_compat(ds)) {
    return alln_run(r, params, dataset, indices, distances, core_distances, alpha, 1, host_out);
  } else if (dl_dev_compat(ds)) {
    EXPECTS(!host_out,
            "A device-resident dataset requires device-resident outputs; put the dataset on host "
            "to produce host-resident outputs.");
    return alln_run(r, params, dataset, indices, distances, core_distances, alpha, 0, 0);
  }
  return RAFT_FAIL("Dataset tensor must be either host-compatible or device-compatible");
#else
  if (!dl_is_dtype(ds->dtype, kDLFloat, 32)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)ds->dtype.code,
                     (int)ds->dtype.bits);
  }
  int host_ds = dl_host_compat(ds);
  if (!host_ds && !dl_dev_compat(ds)) {
    return RAFT_FAIL("Dataset tensor must be either host-compatible or device-compatible");
  }
  TRY(dl_check_ptr(indices, "indices"));
  EXPECTS(dl_is_dtype(indices->dl_tensor.dtype, kDLInt, 64), "indices must be int64 output tensor");
  EXPECTS(dl_dev_compat(&indices->dl_tensor), "indices tensor must be device-compatible");
  if (distances) {
    TRY(dl_check_ptr(distances, "distances"));
    EXPECTS(dl_is_dtype(distances->dl_tensor.dtype, kDLFloat, 32),
            "distances must be float32 output tensor");
    EXPECTS(dl_dev_compat(&distances->dl_tensor), "distances tensor must be device-compatible");
  }
  if (core_distances) {
    TRY(dl_check_ptr(core_distances, "core_distances"));
    EXPECTS(dl_is_dtype(core_distances->dl_tensor.dtype, kDLFloat, 32),
            "core_distances must be float32 output tensor");
    EXPECTS(dl_dev_compat(&core_distances->dl_tensor),
            "core_distances tensor must be device-compatible");
  }
  if (core_distances && !distances) {
    return RAFT_FAIL("distances tensor must be provided when core_distances tensor is provided");
  }
  return alln_run(r, params, dataset, indices, distances, core_distances, alpha, host_ds, 0);
#endif
}

DBL_API cuvsError_t cuvsAllNeighborsBuild(cuvsResources_t res, cuvsAllNeighborsIndexParams_t params,
                                          DLManagedTensor* dataset, DLManagedTensor* indices,
                                          DLManagedTensor* distances,
                                          DLManagedTensor* core_distances, float alpha)
{
  DBL_ENTER(cuvsAllNeighborsBuild);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = alln_build(r, params, dataset, indices, distances, core_distances, alpha);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
