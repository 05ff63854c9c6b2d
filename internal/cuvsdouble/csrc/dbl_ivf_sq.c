/*
 * cuvsdouble IVF-SQ (c/src/neighbors/ivf_sq.cpp of cuVS v26.06.00), on the
 * CPU with the IVF core of dbl_kmeans.c:
 *   - float32 and float16 only; build takes host or device memory (copied);
 *   - k-means on at most n_lists * max_train_points_per_cluster rows, then
 *     8-bit codes of each row's residual from its center, per dimension
 *     (the residuals' range widened by 5% each side, 255 steps), so
 *     distances are approximate even when every list is probed;
 *   - the index is one type whatever the data: cuVS records the dtype as
 *     code and bits only (lanes 0) at build, zeroes it at Deserialize, sets
 *     it from the vectors at Extend when it is zero, and never compares it
 *     with the queries' (float32 and float16 queries both work);
 *   - Build and Deserialize replace (free) an index the handle already
 *     holds; the getters, search, serialize and extend of a handle that was
 *     never built dereference NULL in cuVS (violations here);
 *   - extend without new_indices only while the index is empty;
 *   - L2 and cosine searches need center norms, which exist once rows were
 *     added;
 *   - slots a search cannot fill get INT64_MAX with distance +Inf, as the
 *     real one (dbl_ivf.h's ivf_search);
 *   - serialization writes cuVS's prefix (ivf_sq_serialize.cuh, both
 *     releases): the codes' NumPy dtype "|u1" NUL-padded to 4 bytes, then
 *     .npy scalars: version 2, size, dim, n_lists, metric,
 *     conservative_memory_allocation; then a body of the double's own.
 *     Deserialize checks the prefix as cuVS does (the dtype tag, each
 *     .npy header, the version, the metric, n_lists), so a damaged header
 *     is refused as the real library refuses it.
 */
#include "dbl_ivf.h"

static cuvsError_t sq_handle(cuvsIvfSqIndex_t index)
{
  if (dbl_reg_find(index, NULL) != K_IVF_SQ_INDEX) {
    dbl_violation("invalid or destroyed cuvsIvfSqIndex_t %p (the real library would crash)",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsIvfSqIndex_t %p", (void*)index);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t sq_impl_of(cuvsIvfSqIndex_t index, ivf_impl** out)
{
  TRY(sq_handle(index));
  ivf_impl* impl = (ivf_impl*)index->addr;
  if (dbl_reg_find(impl, NULL) != K_IVF_SQ_IMPL) {
    dbl_violation("IVF-SQ index %p holds no built index (the real library dereferences NULL)",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: the IVF-SQ index was not built");
  }
  *out = impl;
  return CUVS_SUCCESS;
}

/* _reset_index: frees what the handle holds and zeroes its dtype. */
static void sq_reset(cuvsIvfSqIndex_t index)
{
  ivf_impl* impl = (ivf_impl*)index->addr;
  index->addr = 0;
  index->dtype = (DLDataType){0, 0, 0};
  if (!impl) return;
  if (dbl_reg_remove(impl, K_IVF_SQ_IMPL, NULL, NULL) == 0) {
    if (pthread_rwlock_trywrlock(&impl->lock) != 0) {
      dbl_violation("IVF-SQ index freed while another thread uses it");
      pthread_rwlock_wrlock(&impl->lock);
    }
    pthread_rwlock_unlock(&impl->lock);
    ivf_free(impl);
  } else {
    dbl_violation("IVF-SQ handle: addr %p is not a live index", (void*)impl);
  }
}

/* ---- params ---- */

DBL_API cuvsError_t cuvsIvfSqIndexParamsCreate(cuvsIvfSqIndexParams_t* params)
{
  DBL_ENTER(cuvsIvfSqIndexParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsIvfSqIndexParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->metric = L2Expanded;
  p->metric_arg = 2.0f;
  p->add_data_on_build = true;
  p->n_lists = 1024;
  p->kmeans_n_iters = 20;
  p->max_train_points_per_cluster = 256;
  p->conservative_memory_allocation = false;
  dbl_reg_add(p, K_IVF_SQ_INDEX_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfSqIndexParamsDestroy(cuvsIvfSqIndexParams_t params)
{
  DBL_ENTER(cuvsIvfSqIndexParamsDestroy);
  return ivf_plain_destroy(params, K_IVF_SQ_INDEX_PARAMS, "cuvsIvfSqIndexParams");
}

DBL_API cuvsError_t cuvsIvfSqSearchParamsCreate(cuvsIvfSqSearchParams_t* params)
{
  DBL_ENTER(cuvsIvfSqSearchParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsIvfSqSearchParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->n_probes = 20;
  dbl_reg_add(p, K_IVF_SQ_SEARCH_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfSqSearchParamsDestroy(cuvsIvfSqSearchParams_t params)
{
  DBL_ENTER(cuvsIvfSqSearchParamsDestroy);
  return ivf_plain_destroy(params, K_IVF_SQ_SEARCH_PARAMS, "cuvsIvfSqSearchParams");
}

/* ---- handle ---- */

DBL_API cuvsError_t cuvsIvfSqIndexCreate(cuvsIvfSqIndex_t* index)
{
  DBL_ENTER(cuvsIvfSqIndexCreate);
  if (!index) {
    dbl_violation("NULL cuvsIvfSqIndex_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  cuvsIvfSqIndex* h = calloc(1, sizeof *h);
  if (!h) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(h, K_IVF_SQ_INDEX, sizeof *h);
  *index = h;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfSqIndexDestroy(cuvsIvfSqIndex_t index)
{
  DBL_ENTER(cuvsIvfSqIndexDestroy);
  if (index == NULL) return RAFT_FAIL("index cannot be null");
  if (dbl_reg_remove(index, K_IVF_SQ_INDEX, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsIvfSqIndex_t %p", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsIvfSqIndex_t %p", (void*)index);
  }
  sq_reset(index);
  free(index);
  return dbl_ok();
}

/* ---- getters ---- */

static cuvsError_t sq_get(cuvsIvfSqIndex_t index, int64_t* out, int which)
{
  ivf_impl* impl;
  TRY(sq_impl_of(index, &impl));
  if (!out) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  pthread_rwlock_rdlock(&impl->lock);
  *out = which == 0 ? (int64_t)impl->n_lists : which == 1 ? impl->dim : impl->size;
  pthread_rwlock_unlock(&impl->lock);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfSqIndexGetNLists(cuvsIvfSqIndex_t index, int64_t* n_lists)
{
  DBL_ENTER(cuvsIvfSqIndexGetNLists);
  return sq_get(index, n_lists, 0);
}

DBL_API cuvsError_t cuvsIvfSqIndexGetDim(cuvsIvfSqIndex_t index, int64_t* dim)
{
  DBL_ENTER(cuvsIvfSqIndexGetDim);
  return sq_get(index, dim, 1);
}

DBL_API cuvsError_t cuvsIvfSqIndexGetSize(cuvsIvfSqIndex_t index, int64_t* size)
{
  DBL_ENTER(cuvsIvfSqIndexGetSize);
  return sq_get(index, size, 2);
}

DBL_API cuvsError_t cuvsIvfSqIndexGetCenters(cuvsIvfSqIndex_t index, DLManagedTensor* centers)
{
  DBL_ENTER(cuvsIvfSqIndexGetCenters);
  ivf_impl* impl;
  TRY(sq_impl_of(index, &impl));
  TRY(ivf_centers_view(impl, centers));
  return dbl_ok();
}

/* ---- build ---- */

static int sq_dtype_ok(DLDataType dt)
{
  return dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16);
}

/* ---- device memory (the model of dbl_devmem.c) ----
 *
 * What cuVS's IVF-SQ allocates, from cpp/src/neighbors/ivf_sq_index.cpp
 * (centers [n_lists, dim] float32, vmin and delta [dim], list sizes and
 * pointers, center norms for the L2 and cosine metrics once rows are
 * added), ivf_sq.hpp / ivf_list.cuh (lists: one uint8 a dimension and an
 * int64 id a row, at capacity) and ivf_sq_build.cuh (training: the rows of
 * the element type, their labels and vmax; extend: a label a row, the old
 * list sizes, batches of at most 65536 host rows). Rounded up to 256. */

static uint64_t q256(uint64_t n) { return (n + 255) / 256 * 256; }

static uint64_t sq_list_cap(int64_t n, int cma)
{
  int64_t amax = cma ? 32 : 1024;
  if (n >= amax) return (uint64_t)((n + amax - 1) / amax * amax);
  int64_t c = 1;
  while (c < (n > 32 ? n : 32)) c <<= 1;
  return (uint64_t)(c < amax ? c : amax);
}

static uint64_t sq_lists_bytes(const ivf_impl* impl)
{
  if (impl->size == 0) return 0;
  int64_t* count = calloc(impl->n_lists, sizeof(int64_t));
  if (!count) return 0;
  for (int64_t i = 0; i < impl->size; i++) count[impl->labels[i]]++;
  uint64_t b = 0;
  for (uint32_t l = 0; l < impl->n_lists; l++) {
    uint64_t cap = count[l] ? sq_list_cap(count[l], impl->cma) : 0;
    b += q256(cap * (uint64_t)impl->dim) + q256(cap * 8);
  }
  free(count);
  int m = impl->metric;
  if (m == L2Expanded || m == L2SqrtExpanded || m == L2Unexpanded || m == L2SqrtUnexpanded ||
      m == CosineExpanded) {
    b += q256((uint64_t)impl->n_lists * 4);
  }
  return b;
}

static uint64_t sq_fixed_bytes(const ivf_impl* impl)
{
  uint64_t nl = impl->n_lists, D = (uint64_t)impl->dim;
  return q256(nl * 4) + q256(nl * D * 4) + 2 * q256(D * 4) + 2 * q256(nl * 8);
}

/* An extend's device memory, once the rows were added (rows [before,
 * size)): cuVS extends in place (ivf_sq_build.cuh extend_inplace): a
 * uint32 label a new row, the old list sizes, a batch of host rows, and
 * each list that outgrows its capacity allocated anew and filled before
 * the old one is freed (the lists' growth plus the largest old list
 * replaced), the center norms on the first rows. On failure nothing
 * changed (the caller drops the rows). */
static cuvsError_t sq_dev_extend(ivf_impl* impl, int64_t before, uint64_t batch_bytes)
{
  int64_t* count = calloc(impl->n_lists, 2 * sizeof(int64_t));
  if (!count) return dbl_plain_fail("std::bad_alloc");
  for (int64_t i = 0; i < impl->size; i++) count[2 * impl->labels[i] + (i < before ? 0 : 1)]++;
  uint64_t largest = 0;
  for (uint32_t l = 0; l < impl->n_lists; l++) {
    int64_t old = count[2 * l], now = old + count[2 * l + 1];
    uint64_t cap = old ? sq_list_cap(old, impl->cma) : 0;
    uint64_t bytes = q256(cap * (uint64_t)impl->dim) + q256(cap * 8);
    if ((uint64_t)now > cap && bytes > largest) largest = bytes;
  }
  free(count);
  int64_t size = impl->size;
  impl->size = before;
  uint64_t old_bytes = sq_lists_bytes(impl);
  impl->size = size;
  uint64_t new_bytes = sq_lists_bytes(impl);
  uint64_t grown = new_bytes > old_bytes ? new_bytes - old_bytes + largest : 0;
  dbl_dev_block b;
  TRY(dbl_dev_take(q256((uint64_t)(size - before) * 4) + q256((uint64_t)impl->n_lists * 4) +
                     batch_bytes + grown,
                   &b));
  dbl_dev_give(&b);
  dbl_dev_give(&impl->dev_lists);
  return dbl_dev_take(new_bytes, &impl->dev_lists);
}

static cuvsError_t sq_build(cuvsIvfSqIndexParams_t params, DLManagedTensor* dataset,
                            cuvsIvfSqIndex_t index)
{
  TRY(sq_handle(index));
  TRY(dl_check_ptr(dataset, "dataset"));
  TRY(ivf_check_plain(params, K_IVF_SQ_INDEX_PARAMS, "cuvsIvfSqIndexParams"));
  const DLTensor* t = &dataset->dl_tensor;
  if (!sq_dtype_ok(t->dtype)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)t->dtype.code,
                     (int)t->dtype.bits);
  }
  sq_reset(index);
  index->dtype.code = t->dtype.code;
  index->dtype.bits = t->dtype.bits; /* lanes stay 0 */
  int where = dl_dev_compat(t) ? WANT_DEVICE : WANT_HOST;
  TRY(dl_view(dataset, LAYOUT_ROW, kDLFloat, t->dtype.bits, where, 2));
  TRY(dl_strict(t, "dataset"));
  int64_t n = t->shape[0], dim = t->shape[1];
  EXPECTS(n > 0 && dim > 0, "empty dataset");
  EXPECTS(n >= (int64_t)params->n_lists, "number of rows can't be less than n_lists");
  EXPECTS(params->max_train_points_per_cluster > 0, "max_train_points_per_cluster must be > 0");
  EXPECTS(params->metric != CosineExpanded || dim > 1, "Cosine metric requires more than one dim");
  if (params->n_lists == 0) return RAFT_FAIL("cuvsdouble: n_lists must be positive");
  if (!ivf_metric_ok((int)params->metric, 1)) {
    /* cuVS refuses other metrics at search; at build: not known */
    return RAFT_FAIL("Unsupported metric type for IVF-SQ search.");
  }
  ivf_impl* impl = ivf_new(1, t->dtype, (int)params->metric, params->metric_arg, dim, params->n_lists);
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  impl->cma = params->conservative_memory_allocation;
  dbl_matrix data = {t->data, t->dtype, dim, 1, n, dim};
  int64_t n_train = (int64_t)params->n_lists * (int64_t)params->max_train_points_per_cluster;
  if (n_train > n) n_train = n;
  uint64_t nl = params->n_lists, D = (uint64_t)dim, esz = (uint64_t)t->dtype.bits / 8;
  dbl_dev_block train = {0}, scratch = {0};
  cuvsError_t st = dbl_dev_take(sq_fixed_bytes(impl), &impl->dev_fixed);
  if (st == CUVS_SUCCESS) {
    st = dbl_dev_take(q256((uint64_t)n_train * D * esz) + q256((uint64_t)n_train * 4) + q256(D * 4),
                      &train);
  }
  if (st != CUVS_SUCCESS) {
    ivf_free(impl);
    return st;
  }
  int rc = ivf_train(impl, &data, n_train, params->kmeans_n_iters);
  dbl_dev_give(&train);
  if (rc == 0 && params->add_data_on_build) rc = ivf_add(impl, &data, NULL);
  if (rc != 0) {
    ivf_free(impl);
    return dbl_plain_fail("std::bad_alloc");
  }
  if (params->add_data_on_build) {
    uint64_t batch = where == WANT_HOST ? q256((uint64_t)(n < 65536 ? n : 65536) * D * esz) : 0;
    st = dbl_dev_take(q256((uint64_t)n * 4) + q256(nl * 4) + batch, &scratch);
    if (st == CUVS_SUCCESS) st = dbl_dev_take(sq_lists_bytes(impl), &impl->dev_lists);
    dbl_dev_give(&scratch);
    if (st != CUVS_SUCCESS) {
      ivf_free(impl);
      return st;
    }
  }
  dbl_reg_add(impl, K_IVF_SQ_IMPL, sizeof *impl);
  index->addr = (uintptr_t)impl;
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsIvfSqBuild(cuvsResources_t res, cuvsIvfSqIndexParams_t params,
                                   DLManagedTensor* dataset, cuvsIvfSqIndex_t index)
{
  DBL_ENTER(cuvsIvfSqBuild);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = sq_build(params, dataset, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- search ---- */

static cuvsError_t sq_search(cuvsIvfSqSearchParams_t params, cuvsIvfSqIndex_t index,
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
  EXPECTS(dl_is_dtype(nb->dtype, kDLInt, 64), "neighbors should be of type int64_t");
  EXPECTS(dl_is_dtype(ds->dtype, kDLFloat, 32), "distances should be of type float32");
  TRY(sq_handle(index));
  if (!sq_dtype_ok(q->dtype)) {
    return RAFT_FAIL("Unsupported queries DLtensor dtype: %d and bits: %d", (int)q->dtype.code,
                     (int)q->dtype.bits);
  }
  TRY(ivf_check_plain(params, K_IVF_SQ_SEARCH_PARAMS, "cuvsIvfSqSearchParams"));
  ivf_impl* impl;
  TRY(sq_impl_of(index, &impl));
  TRY(dl_view(queries_t, LAYOUT_ROW, kDLFloat, q->dtype.bits, WANT_DEVICE, 2));
  TRY(dl_view(neighbors_t, LAYOUT_ROW, kDLInt, 64, WANT_DEVICE, 2));
  TRY(dl_view(distances_t, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  if (filter.type == BITSET) {
    DLManagedTensor* mt = (DLManagedTensor*)filter.addr;
    TRY(dl_check_ptr(mt, "filter"));
    TRY(dl_view(mt, LAYOUT_ROW, kDLUInt, 32, WANT_DEVICE, 1));
  } else if (filter.type != NO_FILTER) {
    return RAFT_FAIL("Unsupported filter type: BITMAP");
  }
  int64_t nq = q->shape[0], k = nb->shape[1];
  EXPECTS(nb->shape[0] == nq && ds->shape[0] == nq,
          "Number of rows in output neighbors and distances matrices must equal the number of "
          "queries.");
  EXPECTS(ds->shape[1] == k,
          "Number of columns in output neighbors and distances matrices must be equal");
  EXPECTS(q->shape[1] == impl->dim,
          "Number of query dimensions should equal number of dimensions in the index.");
  EXPECTS(params->n_probes > 0,
          "n_probes (number of clusters to probe in the search) must be positive.");
  EXPECTS(impl->metric == InnerProduct || impl->has_norms,
          "Center norms are required for search with L2 or Cosine metric. "
          "Rebuild the index with add_data_on_build=true or call extend() first.");
  TRY(dl_strict(q, "queries"));
  TRY(dl_strict(nb, "neighbors"));
  TRY(dl_strict(ds, "distances"));
  pthread_rwlock_rdlock(&impl->lock);
  dbl_filter f;
  cuvsError_t st = dbl_filter_view(filter, impl->size, nq, &f);
  if (st == CUVS_SUCCESS && k > 0) {
    dbl_matrix qm = {q->data, q->dtype, impl->dim, 1, nq, impl->dim};
    if (ivf_search(impl, &qm, params->n_probes, k, &f, impl->size, (int64_t*)nb->data,
                   (float*)ds->data) != 0) {
      st = dbl_plain_fail("std::bad_alloc");
    }
  }
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

DBL_API cuvsError_t cuvsIvfSqSearch(cuvsResources_t res, cuvsIvfSqSearchParams_t params,
                                    cuvsIvfSqIndex_t index, DLManagedTensor* queries,
                                    DLManagedTensor* neighbors, DLManagedTensor* distances,
                                    cuvsFilter filter)
{
  if (DBL_INSTANT()) return CUVS_SUCCESS;
  DBL_ENTER(cuvsIvfSqSearch);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = sq_search(params, index, queries, neighbors, distances, filter);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, neighbors, distances);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- extend ---- */

static cuvsError_t sq_extend(DLManagedTensor* vectors, DLManagedTensor* indices,
                             cuvsIvfSqIndex_t index)
{
  TRY(sq_handle(index));
  TRY(dl_check_ptr(vectors, "new_vectors"));
  const DLTensor* v = &vectors->dl_tensor;
  if (index->dtype.code == 0 && index->dtype.bits == 0) {
    index->dtype.code = v->dtype.code;
    index->dtype.bits = v->dtype.bits;
  }
  if (!sq_dtype_ok(v->dtype)) {
    return RAFT_FAIL("Unsupported vectors DLtensor dtype: %d and bits: %d", (int)v->dtype.code,
                     (int)v->dtype.bits);
  }
  ivf_impl* impl;
  TRY(sq_impl_of(index, &impl));
  int on_device = dl_dev_compat(v);
  if (indices) {
    TRY(dl_check_ptr(indices, "new_indices"));
    if (on_device != dl_dev_compat(&indices->dl_tensor)) {
      return RAFT_FAIL("extend inputs must both either be on device memory or host memory");
    }
  }
  int where = on_device ? WANT_DEVICE : WANT_HOST;
  TRY(dl_view(vectors, LAYOUT_ROW, kDLFloat, v->dtype.bits, where, 2));
  if (indices) TRY(dl_view(indices, LAYOUT_ROW, kDLInt, 64, where, 1));
  EXPECTS(v->shape[1] == impl->dim, "new_vectors should have the same dimension as the index");
  if (indices) {
    EXPECTS(indices->dl_tensor.shape[0] == v->shape[0],
            "new_vectors and new_indices have different number of rows");
  }
  EXPECTS(indices != NULL || impl->size == 0,
          "You must pass data indices when the index is non-empty.");
  TRY(dl_strict(v, "new_vectors"));
  if (indices) TRY(dl_strict(&indices->dl_tensor, "new_indices"));
  pthread_rwlock_wrlock(&impl->lock);
  dbl_matrix data = {v->data, v->dtype, impl->dim, 1, v->shape[0], impl->dim};
  cuvsError_t st = CUVS_SUCCESS;
  int64_t before = impl->size;
  int had_norms = impl->has_norms;
  if (ivf_add(impl, &data, indices ? (const int64_t*)indices->dl_tensor.data : NULL) != 0) {
    st = dbl_plain_fail("std::bad_alloc");
  } else {
    int64_t n = v->shape[0], b = n < 65536 ? n : 65536;
    uint64_t batch = where == WANT_HOST ? q256((uint64_t)b * (uint64_t)impl->dim * (v->dtype.bits / 8)) : 0;
    st = sq_dev_extend(impl, before, batch);
    if (st != CUVS_SUCCESS) { /* the allocation failed: the rows were not added */
      impl->size = before;
      impl->has_norms = had_norms;
    }
  }
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

DBL_API cuvsError_t cuvsIvfSqExtend(cuvsResources_t res, DLManagedTensor* new_vectors,
                                    DLManagedTensor* new_indices, cuvsIvfSqIndex_t index)
{
  DBL_ENTER(cuvsIvfSqExtend);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = sq_extend(new_vectors, new_indices, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- serialization ---- */

/* cuVS's IVF-SQ files begin with the codes' dtype (uint8_t) and version 2 */
static const char SQ_TAG[4] = {'|', 'u', '1', 0};
enum { SQ_VERSION = 2 };

static cuvsError_t sq_serialize(const char* filename, cuvsIvfSqIndex_t index)
{
  ivf_impl* impl;
  TRY(sq_impl_of(index, &impl));
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  FILE* f = fopen(filename, "wb");
  if (!f) return RAFT_FAIL("Cannot open file %s", filename);
  pthread_rwlock_rdlock(&impl->lock);
  int ok = fwrite(SQ_TAG, 4, 1, f) == 1 && ivf_npy_write(f, "<i4", SQ_VERSION, 4) &&
           ivf_npy_write(f, "<i8", (uint64_t)impl->size, 8) &&
           ivf_npy_write(f, "<u4", (uint64_t)impl->dim, 4) &&
           ivf_npy_write(f, "<u4", impl->n_lists, 4) &&
           ivf_npy_write(f, "<i4", (uint64_t)(uint32_t)impl->metric, 4) &&
           ivf_npy_write(f, "|b1", (uint64_t)impl->cma, 1) && ivf_write(f, impl);
  pthread_rwlock_unlock(&impl->lock);
  if (fclose(f) != 0) ok = 0;
  if (!ok) return RAFT_FAIL("Error writing output %s", filename);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsIvfSqSerialize(cuvsResources_t res, const char* filename,
                                       cuvsIvfSqIndex_t index)
{
  DBL_ENTER(cuvsIvfSqSerialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = sq_serialize(filename, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static cuvsError_t sq_deserialize(const char* filename, cuvsIvfSqIndex_t index)
{
  TRY(sq_handle(index));
  sq_reset(index);
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  FILE* f = fopen(filename, "rb");
  if (!f) return RAFT_FAIL("Cannot open file %s", filename);
  char d[4];
  if (fread(d, 4, 1, f) != 1) {
    fclose(f);
    return RAFT_FAIL("ivf_sq::deserialize: failed to read dtype prefix");
  }
  if (memcmp(d, SQ_TAG, 4) != 0) {
    fclose(f);
    return RAFT_FAIL("ivf_sq::deserialize: serialized dtype prefix does not match requested type");
  }
  /* raft parses each scalar's .npy header and refuses a damaged one
   * ("Missing 'descr' key.", ...); ivf_npy_read checks the magic only
   * (the safe layer's npy.Walk checks the headers before any C call) */
  uint64_t ver = 0, size = 0, dim = 0, n_lists = 0, metric = 0, cma = 0;
  if (!ivf_npy_read(f, 4, &ver)) {
    fclose(f);
    return RAFT_FAIL("cuvsdouble: %s: invalid NumPy header", filename);
  }
  if (ver != SQ_VERSION) {
    fclose(f);
    return RAFT_FAIL("serialization version mismatch, expected %d, got %d ", SQ_VERSION, (int)ver);
  }
  if (!ivf_npy_read(f, 8, &size) || !ivf_npy_read(f, 4, &dim) || !ivf_npy_read(f, 4, &n_lists) ||
      !ivf_npy_read(f, 4, &metric) || !ivf_npy_read(f, 1, &cma)) {
    fclose(f);
    return RAFT_FAIL("cuvsdouble: %s: invalid NumPy header", filename);
  }
  int32_t m = (int32_t)(uint32_t)metric;
  if (!((m >= 0 && m <= 20) || m == 100 || m == 101)) {
    fclose(f);
    return RAFT_FAIL("ivf_sq::deserialize: invalid metric value %d", (int)m);
  }
  ivf_impl* impl = ivf_read(f, 1);
  fclose(f);
  /* the prefix repeats the body's header: they must agree */
  if (impl && (impl->size != (int64_t)size || impl->dim != (int64_t)dim ||
               impl->n_lists != (uint32_t)n_lists || impl->metric != m ||
               impl->cma != (int)cma)) {
    ivf_free(impl);
    impl = NULL;
  }
  if (!impl) {
    /* what cuVS says of a file that is not an IVF-SQ index is not known */
    return RAFT_FAIL("cuvsdouble: %s is not an IVF-SQ index file written by the test double",
                     filename);
  }
  /* ivf_sq_serialize.cuh deserialize: the fixed part, each list at the
   * capacity of its size (ivf_list.cuh deserialize_list), the norms */
  cuvsError_t st = dbl_dev_take(sq_fixed_bytes(impl), &impl->dev_fixed);
  if (st == CUVS_SUCCESS) st = dbl_dev_take(sq_lists_bytes(impl), &impl->dev_lists);
  if (st != CUVS_SUCCESS) {
    ivf_free(impl);
    return st;
  }
  dbl_reg_add(impl, K_IVF_SQ_IMPL, sizeof *impl);
  index->addr = (uintptr_t)impl; /* the dtype stays zero, as cuVS leaves it */
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsIvfSqDeserialize(cuvsResources_t res, const char* filename,
                                         cuvsIvfSqIndex_t index)
{
  DBL_ENTER(cuvsIvfSqDeserialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = sq_deserialize(filename, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
