/*
 * cuvsdouble refine (c/src/neighbors/refine.cpp of cuVS v26.06.00): exact
 * distances from each query to its candidate rows, the k best kept, nearest
 * first (ties to the smaller id).
 *   - all five tensors in device-compatible memory (CUDA, pinned, managed),
 *     or all on the host (kDLCPU); f32/f16/i8/u8 data, int64 ids;
 *   - device: k at most 256; metrics of the IVF-Flat scan; a candidate id
 *     outside the dataset is read out of bounds by cuVS (a violation here);
 *   - host: L2Expanded, InnerProduct and CosineExpanded; a candidate id
 *     outside the dataset gets the largest float as its distance. (cuVS's
 *     host cosine gives 0 for every candidate when there are fewer queries
 *     than OpenMP threads; the double computes it properly.)
 */
#include "dbl_ivf.h"

#include <float.h>
#include <math.h>

static int rf_dtype_ok(DLDataType dt)
{
  return dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) ||
         dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8);
}

static int rf_device_metric(int m)
{
  return m == L2Expanded || m == L2Unexpanded || m == L2SqrtExpanded || m == L2SqrtUnexpanded ||
         m == InnerProduct || m == CosineExpanded;
}

static cuvsError_t rf_run(DLManagedTensor* dataset_t, DLManagedTensor* queries_t,
                          DLManagedTensor* cand_t, cuvsDistanceType metric,
                          DLManagedTensor* idx_t, DLManagedTensor* dist_t)
{
  TRY(dl_check_ptr(dataset_t, "dataset"));
  TRY(dl_check_ptr(queries_t, "queries"));
  TRY(dl_check_ptr(cand_t, "candidates"));
  TRY(dl_check_ptr(idx_t, "indices"));
  TRY(dl_check_ptr(dist_t, "distances"));
  const DLTensor* ds = &dataset_t->dl_tensor;
  const DLTensor* q = &queries_t->dl_tensor;
  const DLTensor* c = &cand_t->dl_tensor;
  const DLTensor* ix = &idx_t->dl_tensor;
  const DLTensor* di = &dist_t->dl_tensor;
  int on_device = dl_dev_compat(ds);
  if (on_device != dl_dev_compat(q) || on_device != dl_dev_compat(c) ||
      on_device != dl_dev_compat(ix) || on_device != dl_dev_compat(di)) {
    return RAFT_FAIL("Tensors must either all be on device memory, or all on host memory");
  }
  EXPECTS(dl_is_dtype(c->dtype, kDLInt, 64), "candidates should be of type int64_t");
  EXPECTS(dl_is_dtype(ix->dtype, kDLInt, 64), "indices should be of type int64_t");
  EXPECTS(dl_is_dtype(di->dtype, kDLFloat, 32), "distances should be of type float32");
  EXPECTS(q->dtype.code == ds->dtype.code, "type mismatch between dataset and queries");
  if (!rf_dtype_ok(q->dtype)) {
    return RAFT_FAIL("Unsupported queries DLtensor dtype: %d and bits: %d", (int)q->dtype.code,
                     (int)q->dtype.bits);
  }
  int where = on_device ? WANT_DEVICE : WANT_HOST;
  TRY(dl_view(dataset_t, LAYOUT_ROW, q->dtype.code, q->dtype.bits, where, 2));
  TRY(dl_view(queries_t, LAYOUT_ROW, q->dtype.code, q->dtype.bits, where, 2));
  TRY(dl_view(cand_t, LAYOUT_ROW, kDLInt, 64, where, 2));
  TRY(dl_view(idx_t, LAYOUT_ROW, kDLInt, 64, where, 2));
  TRY(dl_view(dist_t, LAYOUT_ROW, kDLFloat, 32, where, 2));
  int64_t nq = q->shape[0], k = di->shape[1], nc = c->shape[1], n = ds->shape[0], dim = ds->shape[1];
  if (on_device) {
    EXPECTS(k <= 256, "k must be less than topk::kMaxCapacity (%d).", 256);
  }
  EXPECTS(ix->shape[0] == nq && di->shape[0] == nq && c->shape[0] == nq,
          "Number of rows in output indices, distances and candidates matrices must be equal"
          " with the number of rows in search matrix. Expected %d, got %d, %d, and %d",
          (int)nq, (int)ix->shape[0], (int)di->shape[0], (int)c->shape[0]);
  EXPECTS(ix->shape[1] == k,
          "Number of columns in output indices and distances matrices must be equal to k");
  EXPECTS(q->shape[1] == dim, "Number of columns must be equal for dataset and queries");
  EXPECTS(nc >= k, "Number of neighbor candidates must not be smaller than k (%d vs %d)", (int)nc,
          (int)k);
  if (on_device) {
    if (!rf_device_metric((int)metric)) {
      return RAFT_FAIL("The chosen distance metric is not supported (%d)", (int)metric);
    }
  } else if (metric != L2Expanded && metric != InnerProduct && metric != CosineExpanded) {
    return dbl_plain_fail("Unsupported metric");
  }
  TRY(dl_strict(ds, "dataset"));
  TRY(dl_strict(q, "queries"));
  TRY(dl_strict(c, "candidates"));
  TRY(dl_strict(ix, "indices"));
  TRY(dl_strict(di, "distances"));
  const int64_t* cand = c->data;
  if (on_device) {
    for (int64_t i = 0; i < nq * nc; i++) {
      if (cand[i] < 0 || cand[i] >= n) {
        dbl_violation("refine on the device: candidate id %lld is not a row of the %lld-row "
                      "dataset (the real library reads out of bounds)",
                      (long long)cand[i], (long long)n);
        return RAFT_FAIL("cuvsdouble: candidate id %lld out of range", (long long)cand[i]);
      }
    }
  }
  float* qrow = calloc((size_t)(dim > 0 ? dim : 1), sizeof(float));
  float* drow = calloc((size_t)(dim > 0 ? dim : 1), sizeof(float));
  float* key = calloc((size_t)(nc > 0 ? nc : 1), sizeof(float));
  float* val = calloc((size_t)(nc > 0 ? nc : 1), sizeof(float));
  int64_t* id = calloc((size_t)(nc > 0 ? nc : 1), sizeof(int64_t));
  if (!qrow || !drow || !key || !val || !id) {
    free(qrow), free(drow), free(key), free(val), free(id);
    return dbl_plain_fail("std::bad_alloc");
  }
  int larger = metric == InnerProduct;
  int64_t* out_ix = ix->data;
  float* out_d = di->data;
  for (int64_t qi = 0; qi < nq; qi++) {
    dl_load_row(q->data, q->dtype, dim, 1, qi, dim, qrow);
    for (int64_t j = 0; j < nc; j++) {
      int64_t r = cand[qi * nc + j];
      id[j] = r;
      if ((uint64_t)r >= (uint64_t)n) {
        key[j] = FLT_MAX;
        val[j] = larger ? -FLT_MAX : FLT_MAX;
        continue;
      }
      dl_load_row(ds->data, ds->dtype, dim, 1, r, dim, drow);
      float v = ivf_distance((int)metric, qrow, drow, dim);
      val[j] = v;
      key[j] = larger ? -v : v;
      if (isnan(key[j])) key[j] = FLT_MAX;
    }
    /* insertion sort by (key, id) */
    for (int64_t a = 1; a < nc; a++) {
      float kk = key[a], vv = val[a];
      int64_t ii = id[a], b = a;
      while (b > 0 && (kk < key[b - 1] || (kk == key[b - 1] && ii < id[b - 1]))) {
        key[b] = key[b - 1];
        val[b] = val[b - 1];
        id[b] = id[b - 1];
        b--;
      }
      key[b] = kk;
      val[b] = vv;
      id[b] = ii;
    }
    for (int64_t j = 0; j < k; j++) {
      out_ix[qi * k + j] = id[j];
      out_d[qi * k + j] = val[j];
    }
  }
  free(qrow), free(drow), free(key), free(val), free(id);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsRefine(cuvsResources_t res, DLManagedTensor* dataset,
                               DLManagedTensor* queries, DLManagedTensor* candidates,
                               cuvsDistanceType metric, DLManagedTensor* indices,
                               DLManagedTensor* distances)
{
  DBL_ENTER(cuvsRefine);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = rf_run(dataset, queries, candidates, metric, indices, distances);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, indices, distances);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
