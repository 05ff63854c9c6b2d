/*
 * cuvsdouble IVF-Flat (c/src/neighbors/ivf_flat.cpp of cuVS v26.06.00), on
 * the CPU with the IVF core of dbl_kmeans.c:
 *   - build takes "device" memory only (from_dlpack of a device_matrix_view),
 *     copies the rows into n_lists lists trained by k-means on a strided
 *     subset (kmeans_trainset_fraction), and keeps no reference;
 *   - search probes the n_probes nearest lists only, so recall falls when
 *     n_probes is small; bitset filter over the index's size; int64
 *     neighbors; empty slots (fewer than k rows in the probed lists, or
 *     let through) repeat the first row stored in the first non-empty
 *     probed list, with distance +Inf, as the real one (dbl_ivf.h);
 *   - extend needs new_indices: cuVS dereferences the tensor pointer, so a
 *     NULL one crashes (recorded here as a violation);
 *   - GetCenters overwrites the caller's DLManagedTensor with a view into the
 *     index (cuVS's to_dlpack): it does not copy into the caller's memory;
 *   - Deserialize sets the dtype's code and bits, never lanes (left 0);
 *   - the serialized file starts as cuVS's (NumPy dtype, then .npy scalars
 *     for version, size, dim, n_lists, metric, adaptive_centers,
 *     conservative_memory_allocation); the rest is the double's own.
 */
#include "dbl_ivf.h"

static int fl_dtype_ok(DLDataType dt)
{
  return dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) ||
         dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8);
}

static cuvsError_t fl_handle(cuvsIvfFlatIndex_t index)
{
  if (dbl_reg_find(index, NULL) != K_IVF_FLAT_INDEX) {
    dbl_violation("invalid or destroyed cuvsIvfFlatIndex_t %p (the real library would crash)",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsIvfFlatIndex_t %p", (void*)index);
  }
  return CUVS_SUCCESS;
}

/* The index's dtype dispatch, as every C function makes it, then the impl. */
static cuvsError_t fl_impl_of(cuvsIvfFlatIndex_t index, ivf_impl** out)
{
  TRY(fl_handle(index));
  if (!fl_dtype_ok(index->dtype)) {
    return RAFT_FAIL("Unsupported index dtype: %d and bits: %d", (int)index->dtype.code,
                     (int)index->dtype.bits);
  }
  ivf_impl* impl = (ivf_impl*)index->addr;
  if (dbl_reg_find(impl, NULL) != K_IVF_FLAT_IMPL) {
    dbl_violation("IVF-Flat index %p holds no built index (the real library would dereference "
                  "addr %#lx)",
                  (void*)index, (unsigned long)index->addr);
    return RAFT_FAIL("cuvsdouble: the IVF-Flat index was not built");
  }
  *out = impl;
  return CUVS_SUCCESS;
}

static void fl_install(cuvsIvfFlatIndex_t index, ivf_impl* impl)
{
  if (index->addr != 0 && dbl_reg_find((void*)index->addr, NULL) == K_IVF_FLAT_IMPL) {
    dbl_violation("writing a new index into a cuvsIvfFlatIndex_t that already holds one: the "
                  "real library leaks the previous one (so does the double)");
  }
  dbl_reg_add(impl, K_IVF_FLAT_IMPL, sizeof *impl);
  index->addr = (uintptr_t)impl;
}

/* ---- params ---- */

DBL_API cuvsError_t cuvsIvfFlatIndexParamsCreate(cuvsIvfFlatIndexParams_t* params)
{
  DBL_ENTER(cuvsIvfFlatIndexParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsIvfFlatIndexParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->metric = L2Expanded;
  p->metric_arg = 2.0f;
  p->add_data_on_build = true;
  p->n_lists = 1024;
  p->kmeans_n_iters = 20;
  p->kmeans_trainset_fraction = 0.5;
  p->adaptive_centers = false;
  p->conservative_memory_allocation = false;
  dbl_reg_add(p, K_IVF_FLAT_INDEX_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfFlatIndexParamsDestroy(cuvsIvfFlatIndexParams_t params)
{
  DBL_ENTER(cuvsIvfFlatIndexParamsDestroy);
  return ivf_plain_destroy(params, K_IVF_FLAT_INDEX_PARAMS, "cuvsIvfFlatIndexParams");
}

DBL_API cuvsError_t cuvsIvfFlatSearchParamsCreate(cuvsIvfFlatSearchParams_t* params)
{
  DBL_ENTER(cuvsIvfFlatSearchParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsIvfFlatSearchParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->n_probes = 20;
  dbl_reg_add(p, K_IVF_FLAT_SEARCH_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfFlatSearchParamsDestroy(cuvsIvfFlatSearchParams_t params)
{
  DBL_ENTER(cuvsIvfFlatSearchParamsDestroy);
  return ivf_plain_destroy(params, K_IVF_FLAT_SEARCH_PARAMS, "cuvsIvfFlatSearchParams");
}

/* ---- handle ---- */

DBL_API cuvsError_t cuvsIvfFlatIndexCreate(cuvsIvfFlatIndex_t* index)
{
  DBL_ENTER(cuvsIvfFlatIndexCreate);
  if (!index) {
    dbl_violation("NULL cuvsIvfFlatIndex_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  cuvsIvfFlatIndex* h = calloc(1, sizeof *h);
  if (!h) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(h, K_IVF_FLAT_INDEX, sizeof *h);
  *index = h;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfFlatIndexDestroy(cuvsIvfFlatIndex_t index)
{
  DBL_ENTER(cuvsIvfFlatIndexDestroy);
  if (dbl_reg_remove(index, K_IVF_FLAT_INDEX, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsIvfFlatIndex_t %p", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsIvfFlatIndex_t %p", (void*)index);
  }
  ivf_impl* impl = (ivf_impl*)index->addr;
  if (impl) {
    if (dbl_reg_remove(impl, K_IVF_FLAT_IMPL, NULL, NULL) == 0) {
      if (pthread_rwlock_trywrlock(&impl->lock) != 0) {
        dbl_violation("IVF-Flat index destroyed while another thread uses it");
        pthread_rwlock_wrlock(&impl->lock);
      }
      pthread_rwlock_unlock(&impl->lock);
      ivf_free(impl);
    } else {
      dbl_violation("cuvsIvfFlatIndexDestroy: addr %p is not a live index", (void*)impl);
    }
  }
  free(index);
  return dbl_ok();
}

/* ---- getters ---- */

static cuvsError_t fl_get(cuvsIvfFlatIndex_t index, int64_t* out, int which)
{
  ivf_impl* impl;
  TRY(fl_impl_of(index, &impl));
  if (!out) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  pthread_rwlock_rdlock(&impl->lock);
  *out = which == 0 ? (int64_t)impl->n_lists : impl->dim;
  pthread_rwlock_unlock(&impl->lock);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfFlatIndexGetNLists(cuvsIvfFlatIndex_t index, int64_t* n_lists)
{
  DBL_ENTER(cuvsIvfFlatIndexGetNLists);
  return fl_get(index, n_lists, 0);
}

DBL_API cuvsError_t cuvsIvfFlatIndexGetDim(cuvsIvfFlatIndex_t index, int64_t* dim)
{
  DBL_ENTER(cuvsIvfFlatIndexGetDim);
  return fl_get(index, dim, 1);
}

DBL_API cuvsError_t cuvsIvfFlatIndexGetCenters(cuvsIvfFlatIndex_t index, DLManagedTensor* centers)
{
  DBL_ENTER(cuvsIvfFlatIndexGetCenters);
  ivf_impl* impl;
  TRY(fl_impl_of(index, &impl));
  TRY(ivf_centers_view(impl, centers));
  return dbl_ok();
}

/* ---- device memory (the model of dbl_devmem.c) ----
 *
 * What cuVS's IVF-Flat allocates, from cpp/src/neighbors/ivf_flat_index.cpp
 * (centers n_lists x dim float32; center norms for the L2 and cosine
 * metrics; list sizes; data and index pointers), ivf_list.cuh (a list of n
 * rows has capacity n rounded up to align_max 1024 (32 with
 * conservative_memory_allocation), or below it a power of two of at least
 * 32: dim elements and an int64 id per row) and ivf_flat_build.cuh (the
 * training set of the element type while k-means runs; a uint32 label per
 * row and the old list sizes while the lists are filled). Every allocation
 * is rounded up to 256 bytes. */

static uint64_t r256(uint64_t n) { return (n + 255) / 256 * 256; }

static uint64_t fl_list_cap(int64_t n, int cma)
{
  int64_t amax = cma ? 32 : 1024;
  if (n >= amax) return (uint64_t)((n + amax - 1) / amax * amax);
  int64_t c = 1;
  while (c < (n > 32 ? n : 32)) c <<= 1;
  return (uint64_t)(c < amax ? c : amax);
}

static uint64_t fl_fixed_bytes(const ivf_impl* impl)
{
  uint64_t nl = impl->n_lists, dim = (uint64_t)impl->dim;
  uint64_t b = r256(nl * dim * 4) + r256(nl * 4) + 2 * r256(nl * 8);
  int m = impl->metric;
  if (m == L2Expanded || m == L2SqrtExpanded || m == L2Unexpanded || m == L2SqrtUnexpanded ||
      m == CosineExpanded) {
    b += r256(nl * 4);
  }
  return b;
}

/* The lists at the capacities of their current sizes; 0 before any row. */
static uint64_t fl_lists_bytes(const ivf_impl* impl, int64_t esz)
{
  if (impl->size == 0) return 0;
  int64_t* count = calloc(impl->n_lists, sizeof(int64_t));
  if (!count) return 0;
  for (int64_t i = 0; i < impl->size; i++) count[impl->labels[i]]++;
  uint64_t b = 0;
  for (uint32_t l = 0; l < impl->n_lists; l++) {
    uint64_t cap = count[l] ? fl_list_cap(count[l], impl->cma) : 0;
    b += r256(cap * (uint64_t)impl->dim * (uint64_t)esz) + r256(cap * 8);
  }
  free(count);
  return b;
}

/* dbl_tiered.c: an IVF-Flat build's device memory over n rows without
 * data, its lists balanced (the size of the average list each): the
 * centers and their companions, then the training set, or the lists with
 * the extend's labels, whichever is larger. */
cuvsError_t dbl_ivf_flat_model(const struct cuvsIvfFlatIndexParams* p, int64_t n, int64_t dim,
                               int64_t esz, uint64_t* peak, uint64_t* index)
{
  EXPECTS(p->n_lists > 0 && (int64_t)p->n_lists <= n, "number of rows can't be less than n_lists");
  ivf_impl probe;
  memset(&probe, 0, sizeof probe);
  probe.n_lists = p->n_lists;
  probe.dim = dim;
  probe.metric = (int)p->metric;
  uint64_t fixed = fl_fixed_bytes(&probe);
  double want = p->kmeans_trainset_fraction * (double)n;
  if (want < (double)p->n_lists) want = p->n_lists;
  int64_t ratio = want > 0 ? (int64_t)((double)n / want) : 1;
  if (ratio < 1) ratio = 1;
  uint64_t train = r256((uint64_t)((n / ratio) * dim * esz));
  uint64_t lists = 0, extend = 0;
  if (p->add_data_on_build) {
    int64_t avg = (n + p->n_lists - 1) / p->n_lists;
    uint64_t cap = (uint64_t)fl_list_cap(avg, p->conservative_memory_allocation);
    lists = p->n_lists * (r256(cap * (uint64_t)dim * (uint64_t)esz) + r256(cap * 8));
    extend = r256((uint64_t)n * 4) + r256((uint64_t)p->n_lists * 4);
  }
  *index = fixed + lists;
  *peak = fixed + (train > lists + extend ? train : lists + extend);
  return CUVS_SUCCESS;
}

/* An extend's device memory, once the rows were added (rows [before,
 * size)): cuVS's C extend replaces the index by an extended clone
 * (ivf_flat_build.cuh: the extend of an index pointer assigns it
 * extend(handle, *index, ...)): the clone's fixed part, a uint32 label a new
 * row, the old list sizes, and each list that outgrows its capacity
 * allocated anew while the original still holds the old one; then the
 * original is freed and the index holds the lists at their new
 * capacities. Taken and given back before the lists are swapped; on
 * failure nothing changed (the caller drops the rows). */
static cuvsError_t fl_dev_extend(ivf_impl* impl, int64_t before, int64_t esz)
{
  int64_t* count = calloc(impl->n_lists, 2 * sizeof(int64_t));
  if (!count) return dbl_plain_fail("std::bad_alloc");
  for (int64_t i = 0; i < impl->size; i++) count[2 * impl->labels[i] + (i < before ? 0 : 1)]++;
  uint64_t grown = 0;
  for (uint32_t l = 0; l < impl->n_lists; l++) {
    int64_t old = count[2 * l], now = old + count[2 * l + 1];
    uint64_t cap = old ? fl_list_cap(old, impl->cma) : 0;
    if ((uint64_t)now > cap) {
      uint64_t c = fl_list_cap(now, impl->cma);
      grown += r256(c * (uint64_t)impl->dim * (uint64_t)esz) + r256(c * 8);
    }
  }
  free(count);
  dbl_dev_block b;
  TRY(dbl_dev_take(fl_fixed_bytes(impl) + grown + r256((uint64_t)(impl->size - before) * 4) +
                     r256((uint64_t)impl->n_lists * 4),
                   &b));
  dbl_dev_give(&b);
  dbl_dev_give(&impl->dev_lists);
  return dbl_dev_take(fl_lists_bytes(impl, esz), &impl->dev_lists);
}

/* ---- build ---- */

static cuvsError_t fl_build(cuvsIvfFlatIndexParams_t params, DLManagedTensor* dataset,
                            cuvsIvfFlatIndex_t index)
{
  TRY(fl_handle(index));
  TRY(dl_check_ptr(dataset, "dataset"));
  TRY(ivf_check_plain(params, K_IVF_FLAT_INDEX_PARAMS, "cuvsIvfFlatIndexParams"));
  const DLTensor* t = &dataset->dl_tensor;
  index->dtype = t->dtype; /* before any check, as cuVS */
  if (!fl_dtype_ok(t->dtype)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)t->dtype.code,
                     (int)t->dtype.bits);
  }
  if (t->ndim < 2) {
    dbl_violation("IVF-Flat build reads dataset.shape[1] of a rank-%d tensor", t->ndim);
    return RAFT_FAIL("cuvsdouble: the dataset must be a matrix");
  }
  TRY(dl_view(dataset, LAYOUT_ROW, t->dtype.code, t->dtype.bits, WANT_DEVICE, 2));
  TRY(dl_strict(t, "dataset"));
  int64_t n = t->shape[0], dim = t->shape[1];
  EXPECTS(n > 0 && dim > 0, "empty dataset");
  EXPECTS(n >= (int64_t)params->n_lists, "number of rows can't be less than n_lists");
  EXPECTS(params->metric != CosineExpanded || dim > 1, "Cosine metric requires more than one dim");
  if (params->n_lists == 0) {
    /* what cuVS does with n_lists 0 is not known: the double refuses */
    return RAFT_FAIL("cuvsdouble: n_lists must be positive");
  }
  if (!ivf_metric_ok((int)params->metric, 0)) {
    /* cuVS's scan refuses other metrics at search ("The chosen distance
     * metric is not supported"); what its k-means does with them at build
     * is not known: the double refuses at build */
    return RAFT_FAIL("The chosen distance metric is not supported (%d)", (int)params->metric);
  }
  ivf_impl* impl = ivf_new(0, t->dtype, (int)params->metric, params->metric_arg, dim, params->n_lists);
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  impl->adaptive_centers = params->adaptive_centers;
  impl->cma = params->conservative_memory_allocation;
  dbl_matrix data = {t->data, t->dtype, dim, 1, n, dim};
  double frac = params->kmeans_trainset_fraction;
  double want = frac * (double)n;
  if (want < (double)params->n_lists) want = params->n_lists;
  int64_t ratio = want > 0 ? (int64_t)((double)n / want) : 1;
  if (ratio < 1) ratio = 1;
  int64_t esz = t->dtype.bits / 8;
  int64_t n_train = n / ratio;
  dbl_dev_block train = {0}, labels = {0};
  cuvsError_t st = dbl_dev_take(fl_fixed_bytes(impl), &impl->dev_fixed);
  if (st == CUVS_SUCCESS) st = dbl_dev_take(r256((uint64_t)(n_train * dim * esz)), &train);
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
    st = dbl_dev_take(r256((uint64_t)n * 4) + r256((uint64_t)params->n_lists * 4), &labels);
    if (st == CUVS_SUCCESS) st = dbl_dev_take(fl_lists_bytes(impl, esz), &impl->dev_lists);
    dbl_dev_give(&labels);
    if (st != CUVS_SUCCESS) {
      ivf_free(impl);
      return st;
    }
  }
  fl_install(index, impl);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsIvfFlatBuild(cuvsResources_t res, cuvsIvfFlatIndexParams_t params,
                                     DLManagedTensor* dataset, cuvsIvfFlatIndex_t index)
{
  DBL_ENTER(cuvsIvfFlatBuild);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = fl_build(params, dataset, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- search ---- */

static cuvsError_t fl_search(cuvsIvfFlatSearchParams_t params, cuvsIvfFlatIndex_t index,
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
  TRY(fl_handle(index));
  EXPECTS(q->dtype.code == index->dtype.code, "type mismatch between index and queries");
  if (!fl_dtype_ok(q->dtype)) {
    return RAFT_FAIL("Unsupported queries DLtensor dtype: %d and bits: %d", (int)q->dtype.code,
                     (int)q->dtype.bits);
  }
  TRY(ivf_check_plain(params, K_IVF_FLAT_SEARCH_PARAMS, "cuvsIvfFlatSearchParams"));
  ivf_impl* impl;
  TRY(fl_impl_of(index, &impl));
  if (q->dtype.bits != impl->dtype.bits) {
    dbl_violation("%d-bit queries searched in a %d-bit IVF-Flat index (the real library "
                  "reinterprets the index: undefined behaviour)",
                  (int)q->dtype.bits, (int)impl->dtype.bits);
    return RAFT_FAIL("cuvsdouble: queries and index differ in dtype bits");
  }
  TRY(dl_view(queries_t, LAYOUT_ROW, q->dtype.code, q->dtype.bits, WANT_DEVICE, 2));
  TRY(dl_view(neighbors_t, LAYOUT_ROW, kDLInt, 64, WANT_DEVICE, 2));
  TRY(dl_view(distances_t, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  dbl_filter f = {FILTER_NONE, NULL};
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
  TRY(dl_strict(q, "queries"));
  TRY(dl_strict(nb, "neighbors"));
  TRY(dl_strict(ds, "distances"));
  pthread_rwlock_rdlock(&impl->lock);
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

DBL_API cuvsError_t cuvsIvfFlatSearch(cuvsResources_t res, cuvsIvfFlatSearchParams_t params,
                                      cuvsIvfFlatIndex_t index, DLManagedTensor* queries,
                                      DLManagedTensor* neighbors, DLManagedTensor* distances,
                                      cuvsFilter filter)
{
  if (DBL_INSTANT()) return CUVS_SUCCESS;
  DBL_ENTER(cuvsIvfFlatSearch);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = fl_search(params, index, queries, neighbors, distances, filter);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, neighbors, distances);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- extend ---- */

static cuvsError_t fl_extend(DLManagedTensor* vectors, DLManagedTensor* indices,
                             cuvsIvfFlatIndex_t index)
{
  TRY(fl_handle(index));
  ivf_impl* impl;
  TRY(fl_impl_of(index, &impl));
  TRY(dl_check_ptr(vectors, "new_vectors"));
  TRY(dl_view(vectors, LAYOUT_ROW, index->dtype.code, index->dtype.bits, WANT_DEVICE, 2));
  if (!indices) {
    dbl_violation("cuvsIvfFlatExtend with NULL new_indices: the real library dereferences it "
                  "(crash)");
    return RAFT_FAIL("cuvsdouble: NULL new_indices (the real library crashes)");
  }
  TRY(dl_check_ptr(indices, "new_indices"));
  TRY(dl_view(indices, LAYOUT_ROW, kDLInt, 64, WANT_DEVICE, 1));
  const DLTensor* v = &vectors->dl_tensor;
  const DLTensor* ix = &indices->dl_tensor;
  /* RAFT's ASSERT */
  EXPECTS(v->shape[1] == impl->dim, "new_vectors should have the same dimension as the index");
  EXPECTS(v->shape[0] == ix->shape[0], "new_vectors and new_indices have different number of rows");
  TRY(dl_strict(v, "new_vectors"));
  TRY(dl_strict(ix, "new_indices"));
  pthread_rwlock_wrlock(&impl->lock);
  int64_t before = impl->size;
  dbl_matrix data = {v->data, v->dtype, impl->dim, 1, v->shape[0], impl->dim};
  cuvsError_t st = CUVS_SUCCESS;
  if (ivf_add(impl, &data, (const int64_t*)ix->data) != 0) {
    st = dbl_plain_fail("std::bad_alloc");
  } else if ((st = fl_dev_extend(impl, before, impl->dtype.bits / 8)) != CUVS_SUCCESS) {
    impl->size = before; /* the allocation failed: the rows were not added */
  } else if (impl->adaptive_centers && impl->size > before) {
    /* running mean of each list's members */
    int64_t dim = impl->dim;
    for (uint32_t c = 0; c < impl->n_lists; c++) {
      int64_t old = 0, add = 0;
      for (int64_t at = 0; at < impl->size; at++) {
        if (impl->labels[at] != c) continue;
        if (at < before) {
          old++;
        } else {
          add++;
        }
      }
      if (add == 0) continue;
      float* ctr = impl->centers + (size_t)c * dim;
      for (int64_t j = 0; j < dim; j++) {
        double s = (double)ctr[j] * (double)old;
        for (int64_t at = before; at < impl->size; at++) {
          if (impl->labels[at] == c) s += impl->vecs[at * dim + j];
        }
        ctr[j] = (float)(s / (double)(old + add));
      }
    }
  }
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

DBL_API cuvsError_t cuvsIvfFlatExtend(cuvsResources_t res, DLManagedTensor* new_vectors,
                                      DLManagedTensor* new_indices, cuvsIvfFlatIndex_t index)
{
  DBL_ENTER(cuvsIvfFlatExtend);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = fl_extend(new_vectors, new_indices, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- serialization ---- */

static void fl_descr(DLDataType dt, char out[4])
{
  memset(out, 0, 4);
  if (dt.code == kDLFloat && dt.bits == 16) {
    memcpy(out, "<e2", 3);
  } else if (dt.code == kDLFloat) {
    memcpy(out, "<f4", 3);
  } else if (dt.code == kDLInt) {
    memcpy(out, "|i1", 3);
  } else {
    memcpy(out, "|u1", 3);
  }
}

static cuvsError_t fl_serialize(const char* filename, cuvsIvfFlatIndex_t index)
{
  ivf_impl* impl;
  TRY(fl_impl_of(index, &impl));
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  FILE* f = fopen(filename, "wb");
  if (!f) return RAFT_FAIL("Cannot open file %s", filename);
  pthread_rwlock_rdlock(&impl->lock);
  char d[4];
  fl_descr(impl->dtype, d);
  int ok = fwrite(d, 4, 1, f) == 1 && ivf_npy_write(f, "<i4", 4, 4) &&
           ivf_npy_write(f, "<i8", (uint64_t)impl->size, 8) &&
           ivf_npy_write(f, "<u4", (uint64_t)impl->dim, 4) &&
           ivf_npy_write(f, "<u4", impl->n_lists, 4) &&
           ivf_npy_write(f, "<i4", (uint64_t)(uint32_t)impl->metric, 4) &&
           ivf_npy_write(f, "|b1", (uint64_t)impl->adaptive_centers, 1) &&
           ivf_npy_write(f, "|b1", (uint64_t)impl->cma, 1) && ivf_write(f, impl);
  pthread_rwlock_unlock(&impl->lock);
  if (fclose(f) != 0) ok = 0;
  if (!ok) return RAFT_FAIL("Error writing output %s", filename);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsIvfFlatSerialize(cuvsResources_t res, const char* filename,
                                         cuvsIvfFlatIndex_t index)
{
  DBL_ENTER(cuvsIvfFlatSerialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = fl_serialize(filename, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static cuvsError_t fl_deserialize(const char* filename, cuvsIvfFlatIndex_t index)
{
  TRY(fl_handle(index));
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  FILE* f = fopen(filename, "rb");
  if (!f) return RAFT_FAIL("Cannot open file %s", filename);
  char d[4] = {0};
  if (fread(d, 4, 1, f) != 1) memset(d, 0, 4);
  /* raft's parse_descr */
  if (d[0] != '<' && d[0] != '>' && d[0] != '|' && d[0] != '=') {
    fclose(f);
    return RAFT_FAIL("Invalid typestr: unrecognized byteorder %c", d[0]);
  }
  int itemsize = atoi(d + 2);
  char kind = d[1];
  index->dtype.bits = (uint8_t)(itemsize * 8);
  int code;
  if (kind == 'f' && itemsize == 4) {
    code = kDLFloat;
  } else if (kind == 'e' && itemsize == 2) {
    code = kDLFloat;
  } else if (kind == 'i' && itemsize == 1) {
    code = kDLInt;
  } else if (kind == 'u' && itemsize == 1) {
    code = kDLUInt;
  } else {
    fclose(f);
    return RAFT_FAIL("Unsupported dtype in file %s itemsize %i kind %i", filename, itemsize, kind);
  }
  uint64_t ver = 0, v = 0;
  int ok = ivf_npy_read(f, 4, &ver);
  if (ok && ver != 4) {
    fclose(f);
    return RAFT_FAIL("serialization version mismatch, expected %d, got %d ", 4, (int)ver);
  }
  ok = ok && ivf_npy_read(f, 8, &v) && ivf_npy_read(f, 4, &v) && ivf_npy_read(f, 4, &v) &&
       ivf_npy_read(f, 4, &v) && ivf_npy_read(f, 1, &v) && ivf_npy_read(f, 1, &v);
  ivf_impl* impl = ok ? ivf_read(f, 0) : NULL;
  fclose(f);
  if (!impl) {
    return RAFT_FAIL("cuvsdouble: %s is not an IVF-Flat index file written by the test double",
                     filename);
  }
  impl->dtype = (DLDataType){(uint8_t)code, (uint8_t)(itemsize * 8), 1};
  /* ivf_flat_serialize.cuh deserialize: the index's fixed part, and each
   * list allocated at the capacity of its size (ivf_list.cuh
   * deserialize_list) */
  cuvsError_t st = dbl_dev_take(fl_fixed_bytes(impl), &impl->dev_fixed);
  if (st == CUVS_SUCCESS) st = dbl_dev_take(fl_lists_bytes(impl, itemsize), &impl->dev_lists);
  if (st != CUVS_SUCCESS) {
    ivf_free(impl);
    return st;
  }
  fl_install(index, impl);
  index->dtype.code = (uint8_t)code; /* lanes stay as they were: 0 after IndexCreate */
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsIvfFlatDeserialize(cuvsResources_t res, const char* filename,
                                           cuvsIvfFlatIndex_t index)
{
  DBL_ENTER(cuvsIvfFlatDeserialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = fl_deserialize(filename, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
