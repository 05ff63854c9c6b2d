/*
 * cuvsdouble tiered index (cuvs/neighbors/tiered_index.h): the 8 functions of
 * c/src/neighbors/tiered_index.cpp with its checks, over the state of
 * cpp/src/neighbors/detail/tiered_index.cuh:
 *
 *   - a storage of every row (float32, copied: the index keeps nothing of the
 *     caller's), the first ann_rows of them under an ANN index, the rest a
 *     brute-force tier;
 *   - Build builds the ANN index when rows > min_ann_rows; Extend appends to
 *     the tier and, with create_ann_index_on_extend, rebuilds the ANN index
 *     over every row when the tier's rows exceed min_ann_rows; Merge
 *     concatenates the storages (index 0 first), keeps index 0's ANN index
 *     over its first rows, and rebuilds over all when the tier exceeds
 *     min_ann_rows;
 *   - Search searches the ANN index and the tier for k each and merges
 *     (knn_merge_parts, the tier's ids shifted by ann_rows). The prefilter
 *     goes to both as is: the tier's brute-force search tests its row j
 *     against bit j, not bit ann_rows + j, as cuVS's does.
 *
 * The ANN index: CAGRA is a real graph (dbl_cagra_graph.c) searched by graph
 * walk; IVF-Flat and IVF-PQ are exact over their rows in the double.
 *
 * Device memory (dbl_devmem.c), as detail/tiered_index.cuh takes it in
 * v26.06.00 and v26.08.01:
 *   - the storage (brute_force_storage): n + n/16 rows at build, doubled
 *     (or what the rows need) when an extend outgrows it, the merged rows
 *     exactly at merge; cuVS sizes its device_uvector<T> in bytes where
 *     the constructor takes elements (initial_rows * dim * sizeof(T)
 *     elements of T), so it takes sizeof(T) = 4 times the rows' bytes, and
 *     the norms (L2Expanded, L2SqrtExpanded, CosineExpanded) likewise 16
 *     bytes a row. The grown storage is taken before the old is freed;
 *   - the ANN index: the backend's build over the rows (its phases taken
 *     and given back, computed without data: dbl_cagra_model, 26.06's
 *     padded copy included where CAGRA copies; dbl_ivf_flat_model;
 *     dbl_ivf_pq_model), built before the storage at build, and while the
 *     previous ANN index is still held when an extend or a merge compacts.
 *     A merge that does not compact shares index 0's ANN index (a
 *     shared_ptr in cuVS): nothing is taken for it.
 * The search's temporaries are not taken.
 */
#include "dbl.h"
#include "dbl_cagra_graph.h"

#include <float.h>
#include <math.h>

#define TD_MAGIC 0x5449455244424cULL

DBL_HIDDEN cuvsError_t dbl_check_plain_params(const void* p, int kind);

typedef struct {
  uint64_t magic;
  int algo, metric;
  int64_t min_ann_rows;
  int on_extend;
  /* the backend's build parameters that matter to the double */
  int64_t cg_degree, cg_inter;
  int64_t n_lists;
  int64_t dim, n, cap;
  float* rows;
  int64_t ann_rows;
  uint32_t* graph; /* CAGRA: ann_rows x degree */
  int64_t degree;
  pthread_rwlock_t lock;
  /* the device memory cuVS would hold: the storage of alloc_rows rows, the
   * ANN index; and the backend's parameters, for the ANN builds' model */
  int64_t alloc_rows;
  dbl_dev_block dev_store, dev_ann;
  struct cuvsCagraIndexParams cgp;
  struct cuvsIvfPqParams cgg;
  struct cuvsIvfFlatIndexParams flp;
  struct cuvsIvfPqIndexParams pqp;
} td_impl;

/* ---- params ---- */

DBL_API cuvsError_t cuvsTieredIndexParamsCreate(cuvsTieredIndexParams_t* params)
{
  DBL_ENTER(cuvsTieredIndexParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsTieredIndexParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->metric = L2Expanded;
  p->algo = CUVS_TIERED_INDEX_ALGO_CAGRA;
  p->min_ann_rows = 100000;
  p->create_ann_index_on_extend = false;
  dbl_reg_add(p, K_TIERED_INDEX_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsTieredIndexParamsDestroy(cuvsTieredIndexParams_t params)
{
  DBL_ENTER(cuvsTieredIndexParamsDestroy);
  if (params == NULL) return dbl_ok();
  if (dbl_reg_remove(params, K_TIERED_INDEX_PARAMS, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsTieredIndexParams %p",
                  (void*)params);
    return RAFT_FAIL("cuvsdouble: invalid cuvsTieredIndexParams %p", (void*)params);
  }
  free(params);
  return dbl_ok();
}

/* ---- handle ---- */

static void td_free(td_impl* t)
{
  if (!t) return;
  dbl_dev_give(&t->dev_store);
  dbl_dev_give(&t->dev_ann);
  free(t->rows);
  free(t->graph);
  pthread_rwlock_destroy(&t->lock);
  t->magic = 0;
  free(t);
}

DBL_API cuvsError_t cuvsTieredIndexCreate(cuvsTieredIndex_t* index)
{
  DBL_ENTER(cuvsTieredIndexCreate);
  if (!index) {
    dbl_violation("NULL cuvsTieredIndex_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  cuvsTieredIndex* h = calloc(1, sizeof *h);
  if (!h) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(h, K_TIERED_INDEX, sizeof *h);
  *index = h;
  return dbl_ok();
}

static cuvsError_t td_handle(cuvsTieredIndex_t index)
{
  if (dbl_reg_find(index, NULL) != K_TIERED_INDEX) {
    dbl_violation("invalid or destroyed cuvsTieredIndex_t %p (the real library would crash)",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsTieredIndex_t %p", (void*)index);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t td_impl_of(cuvsTieredIndex_t index, const char* fn, td_impl** out)
{
  TRY(td_handle(index));
  td_impl* t = (td_impl*)index->addr;
#if DBL_RELEASE >= 2608
  if (t == NULL) return RAFT_FAIL("%s: null index handle", fn);
#endif
  if (dbl_reg_find(t, NULL) != K_TIERED_IMPL) {
    dbl_violation("tiered index %p holds no built index (the real library would dereference "
                  "addr %#lx)",
                  (void*)index, (unsigned long)index->addr);
    return RAFT_FAIL("cuvsdouble: the tiered index was not built");
  }
#if DBL_RELEASE >= 2608
  if (t->algo != (int)index->algo) return RAFT_FAIL("%s: index algorithm mismatch", fn);
#else
  if (t->algo != (int)index->algo) {
    dbl_violation("tiered index handle's algo %d differs from the index's %d (the real library "
                  "casts it to the wrong type)",
                  (int)index->algo, t->algo);
    return RAFT_FAIL("cuvsdouble: tiered index algo mismatch");
  }
#endif
  (void)fn;
  *out = t;
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsTieredIndexDestroy(cuvsTieredIndex_t index)
{
  DBL_ENTER(cuvsTieredIndexDestroy);
  if (dbl_reg_remove(index, K_TIERED_INDEX, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsTieredIndex_t %p", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsTieredIndex_t %p", (void*)index);
  }
  td_impl* t = (td_impl*)index->addr;
  if (t) {
#if DBL_RELEASE < 2608
    /* 26.06 deletes by dtype (float32 only) and algo */
    if (!dl_is_dtype(index->dtype, kDLFloat, 32)) {
      dbl_violation("cuvsTieredIndexDestroy: dtype code %d bits %d: the real library leaks the "
                    "index",
                    (int)index->dtype.code, (int)index->dtype.bits);
    }
#endif
    if (dbl_reg_remove(t, K_TIERED_IMPL, NULL, NULL) == 0) {
      if (pthread_rwlock_trywrlock(&t->lock) != 0) {
        dbl_violation("tiered index destroyed while another thread uses it");
        pthread_rwlock_wrlock(&t->lock);
      }
      pthread_rwlock_unlock(&t->lock);
      td_free(t);
    }
  }
  free(index);
  return dbl_ok();
}

/* ---- device memory ---- */

/* The storage's bytes for rows rows: sizeof(float) times the rows' (and
 * the norms') bytes, as brute_force_storage's device_uvector<T>(rows * dim
 * * sizeof(T)) takes them. */
static uint64_t td_store_bytes(const td_impl* t, int64_t rows)
{
  uint64_t b = (uint64_t)rows * (uint64_t)t->dim * 4 * 4;
  b = (b + 255) / 256 * 256;
  if (t->metric == L2Expanded || t->metric == L2SqrtExpanded || t->metric == CosineExpanded) {
    b += ((uint64_t)rows * 4 * 4 + 255) / 256 * 256;
  }
  return b;
}

/* Makes the storage hold rows rows: a new block taken, then the old one
 * given back. */
static cuvsError_t td_dev_store(td_impl* t, int64_t rows)
{
  dbl_dev_block b;
  TRY(dbl_dev_take(td_store_bytes(t, rows), &b));
  dbl_dev_give(&t->dev_store);
  t->dev_store = b;
  t->alloc_rows = rows;
  return CUVS_SUCCESS;
}

/* The backend's build over n rows: its peak taken and given back, then its
 * index taken (the previous ANN index held meanwhile) and the previous one
 * given back. */
static cuvsError_t td_dev_ann(td_impl* t, int64_t n)
{
  uint64_t peak = 0, index = 0;
  switch (t->algo) {
    case CUVS_TIERED_INDEX_ALGO_CAGRA: {
      uint64_t copy = 0;
#if DBL_RELEASE < 2608
      /* 26.06 builds CAGRA from the storage's view: rows whose width is no
       * multiple of 16 bytes are copied, padded */
      if ((t->dim * 4) % 16 != 0) copy = (uint64_t)n * (uint64_t)((t->dim * 4 + 15) / 16 * 16);
#endif
      struct cuvsCagraIndexParams p = t->cgp;
      struct cuvsIvfPqParams g = t->cgg;
      p.graph_build_params = &g;
      TRY(dbl_cagra_model(&p, n, t->dim, copy, &peak, &index));
      break;
    }
    case CUVS_TIERED_INDEX_ALGO_IVF_FLAT:
      TRY(dbl_ivf_flat_model(&t->flp, n, t->dim, 4, &peak, &index));
      break;
    default: {
      uint32_t geo[3];
      TRY(dbl_ivf_pq_model(&t->pqp, n, (uint32_t)t->dim, 4, 0, &peak, &index, geo));
    }
  }
  dbl_dev_block b;
  TRY(dbl_dev_take(peak, &b));
  dbl_dev_give(&b);
  TRY(dbl_dev_take(index, &b));
  dbl_dev_give(&t->dev_ann);
  t->dev_ann = b;
  return CUVS_SUCCESS;
}

/* ---- the ANN index ---- */

static cuvsError_t td_build_ann(td_impl* t)
{
  free(t->graph);
  t->graph = NULL;
  t->degree = 0;
  int64_t n = t->n;
  if (t->algo == CUVS_TIERED_INDEX_ALGO_CAGRA) {
    int64_t degree = t->cg_degree, inter = t->cg_inter;
    if (inter > n - 1) inter = n - 1;
    if (degree > inter) degree = inter;
    if (degree < 1) degree = 1;
    if (inter < degree) inter = degree;
    uint32_t* g = malloc((size_t)(n * degree) * sizeof(uint32_t) + 1);
    if (!g) return dbl_plain_fail("std::bad_alloc");
    DLDataType f32 = {kDLFloat, 32, 1};
    dbl_matrix m = {t->rows, f32, t->dim, 1, n, t->dim};
    if (n > 1 && cg_graph_build(&m, t->metric, inter, degree, g) != 0) {
      free(g);
      return dbl_plain_fail("std::bad_alloc");
    }
    if (n <= 1) memset(g, 0, (size_t)(n * degree) * sizeof(uint32_t));
    t->graph = g;
    t->degree = degree;
  } else {
    /* IVF: k-means needs at least n_lists rows */
    EXPECTS(t->n_lists <= n, "cuvsdouble: n_lists (%lld) must not exceed the rows (%lld)",
            (long long)t->n_lists, (long long)n);
  }
  t->ann_rows = n;
  return CUVS_SUCCESS;
}

static int td_reserve(td_impl* t, int64_t n)
{
  if (n <= t->cap) return 0;
  int64_t c = t->cap * 2 > n ? t->cap * 2 : n;
  float* r = realloc(t->rows, (size_t)(c * t->dim) * sizeof(float) + 1);
  if (!r) return -1;
  t->rows = r;
  t->cap = c;
  return 0;
}

/* convert_c_index_params: the tiered fields, then the backend's (whose
 * metric, when its params are given, is the one cuVS keeps). */
static cuvsError_t td_params(cuvsTieredIndexParams_t p, td_impl* t)
{
  t->algo = (int)p->algo;
  t->metric = (int)p->metric;
  t->min_ann_rows = p->min_ann_rows;
  t->on_extend = p->create_ann_index_on_extend;
  t->cg_degree = 64;
  t->cg_inter = 128;
  t->n_lists = 1024;
  /* the backends' defaults (cuvs...IndexParamsCreate), for the device model */
  t->cgp.metric = L2Expanded;
  t->cgp.intermediate_graph_degree = 128;
  t->cgp.graph_degree = 64;
  t->cgp.build_algo = IVF_PQ;
  t->cgg.refinement_rate = 1;
  t->flp.metric = L2Expanded;
  t->flp.n_lists = 1024;
  t->flp.kmeans_n_iters = 20;
  t->flp.kmeans_trainset_fraction = 0.5;
  t->flp.add_data_on_build = true;
  t->pqp.metric = L2Expanded;
  t->pqp.n_lists = 1024;
  t->pqp.kmeans_n_iters = 20;
  t->pqp.kmeans_trainset_fraction = 0.5;
  t->pqp.pq_bits = 8;
  t->pqp.add_data_on_build = true;
  t->pqp.max_train_points_per_pq_code = 256;
  switch (t->algo) {
    case CUVS_TIERED_INDEX_ALGO_CAGRA:
      if (p->cagra_params) {
        TRY(dbl_check_plain_params(p->cagra_params, K_CAGRA_INDEX_PARAMS));
        t->metric = (int)p->cagra_params->metric;
        t->cg_degree = (int64_t)p->cagra_params->graph_degree;
        t->cg_inter = (int64_t)p->cagra_params->intermediate_graph_degree;
        t->cgp = *p->cagra_params;
        if (p->cagra_params->graph_build_params && p->cagra_params->build_algo == IVF_PQ) {
          t->cgg = *(struct cuvsIvfPqParams*)p->cagra_params->graph_build_params;
        }
        t->cgg.ivf_pq_build_params = NULL; /* not kept past the call */
        t->cgg.ivf_pq_search_params = NULL;
      }
      if (t->metric != L2Expanded && t->metric != InnerProduct && t->metric != CosineExpanded) {
        return RAFT_FAIL("cuvsdouble: CAGRA does not support metric %d", t->metric);
      }
      break;
    case CUVS_TIERED_INDEX_ALGO_IVF_FLAT:
      if (p->ivf_flat_params) {
        TRY(dbl_check_plain_params(p->ivf_flat_params, K_IVF_FLAT_INDEX_PARAMS));
        t->metric = (int)p->ivf_flat_params->metric;
        t->n_lists = p->ivf_flat_params->n_lists;
        t->flp = *p->ivf_flat_params;
      }
      break;
    case CUVS_TIERED_INDEX_ALGO_IVF_PQ:
      if (p->ivf_pq_params) {
        TRY(dbl_check_plain_params(p->ivf_pq_params, K_IVFPQ_INDEX_PARAMS));
        t->metric = (int)p->ivf_pq_params->metric;
        t->n_lists = p->ivf_pq_params->n_lists;
        t->pqp = *p->ivf_pq_params;
      }
      break;
    default: return RAFT_FAIL("unsupported tiered index algorithm");
  }
  if (!knn_metric_supported(t->metric)) {
    return RAFT_FAIL("cuvsdouble: metric %d is not supported by brute force", t->metric);
  }
  return CUVS_SUCCESS;
}

static td_impl* td_new(int64_t dim)
{
  td_impl* t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->magic = TD_MAGIC;
  t->dim = dim;
  pthread_rwlock_init(&t->lock, NULL);
  return t;
}

/* Copies n float rows (device memory, row stride dim) into the storage. */
static int td_append(td_impl* t, const float* src, int64_t n)
{
  if (td_reserve(t, t->n + n) != 0) return -1;
  memcpy(t->rows + t->n * t->dim, src, (size_t)(n * t->dim) * sizeof(float));
  t->n += n;
  return 0;
}

/* ---- build ---- */

static cuvsError_t td_build(cuvsTieredIndexParams_t params, DLManagedTensor* dataset,
                            cuvsTieredIndex_t index)
{
  TRY(td_handle(index));
  TRY(dbl_check_plain_params(params, K_TIERED_INDEX_PARAMS));
  TRY(dl_check_ptr(dataset, "dataset"));
  const DLTensor* d = &dataset->dl_tensor;
  index->dtype = d->dtype;
  index->algo = params->algo;
  if (!dl_is_dtype(d->dtype, kDLFloat, 32)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)d->dtype.code,
                     (int)d->dtype.bits);
  }
  TRY(dl_view(dataset, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_strict(d, "dataset"));
  int64_t n = d->shape[0], dim = d->shape[1];
  td_impl* t = td_new(dim);
  if (!t) return dbl_plain_fail("std::bad_alloc");
  cuvsError_t st = td_params(params, t);
  if (st == CUVS_SUCCESS && td_append(t, d->data, n) != 0) st = dbl_plain_fail("std::bad_alloc");
  if (st == CUVS_SUCCESS && n > t->min_ann_rows) st = td_build_ann(t);
  /* the ANN index first, then the storage of n + n/16 rows */
  if (st == CUVS_SUCCESS && n > t->min_ann_rows) st = td_dev_ann(t, n);
  if (st == CUVS_SUCCESS) st = td_dev_store(t, n + n / 16);
  if (st != CUVS_SUCCESS) {
    td_free(t);
    return st;
  }
  if (index->addr != 0) {
    dbl_violation("building into a cuvsTieredIndex_t that already holds an index: the real "
                  "library leaks it");
  }
  dbl_reg_add(t, K_TIERED_IMPL, sizeof *t);
  index->addr = (uintptr_t)t;
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsTieredIndexBuild(cuvsResources_t res, cuvsTieredIndexParams_t params,
                                         DLManagedTensor* dataset, cuvsTieredIndex_t index)
{
  DBL_ENTER(cuvsTieredIndexBuild);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = td_build(params, dataset, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- extend ---- */

static cuvsError_t td_extend(DLManagedTensor* v, cuvsTieredIndex_t index)
{
#if DBL_RELEASE >= 2608
  EXPECTS(v != NULL, "cuvsTieredIndexExtend: null tensor handle");
  EXPECTS(dl_dev_compat(&v->dl_tensor),
          "cuvsTieredIndexExtend: tensor should have device compatible memory");
#endif
  TRY(td_handle(index));
  if (index->algo < 0 || index->algo > 2) return RAFT_FAIL("unsupported tiered index algorithm");
  td_impl* t;
  TRY(td_impl_of(index, "cuvsTieredIndexExtend", &t));
  TRY(dl_check_ptr(v, "new_vectors"));
  TRY(dl_view(v, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_strict(&v->dl_tensor, "new_vectors"));
  EXPECTS(v->dl_tensor.shape[1] == t->dim, "Incorrect dimensionality of new vectors");
  if (pthread_rwlock_trywrlock(&t->lock) != 0) {
    dbl_violation("tiered index extended while another thread uses it");
    pthread_rwlock_wrlock(&t->lock);
  }
  cuvsError_t st = CUVS_SUCCESS;
  int64_t m = v->dl_tensor.shape[0];
  if (t->alloc_rows - t->n < m) {
    /* grown by doubling, or to what the rows need */
    int64_t to = t->n + m > 2 * t->alloc_rows ? t->n + m : 2 * t->alloc_rows;
    st = td_dev_store(t, to);
  }
  if (st == CUVS_SUCCESS && td_append(t, v->dl_tensor.data, m) != 0) {
    st = dbl_plain_fail("std::bad_alloc");
  }
  if (st == CUVS_SUCCESS && t->on_extend && t->n - t->ann_rows > t->min_ann_rows) {
    st = td_dev_ann(t, t->n);
    if (st == CUVS_SUCCESS) st = td_build_ann(t);
  }
  pthread_rwlock_unlock(&t->lock);
  return st;
}

DBL_API cuvsError_t cuvsTieredIndexExtend(cuvsResources_t res, DLManagedTensor* new_vectors,
                                          cuvsTieredIndex_t index)
{
  DBL_ENTER(cuvsTieredIndexExtend);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = td_extend(new_vectors, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- merge ---- */

static cuvsError_t td_merge(cuvsTieredIndexParams_t params, cuvsTieredIndex_t* indices, size_t num,
                            cuvsTieredIndex_t out)
{
  EXPECTS(num >= 1, "must have at least one index to merge");
  if (!indices) {
    dbl_violation("NULL indices (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL indices");
  }
  TRY(dbl_check_plain_params(params, K_TIERED_INDEX_PARAMS));
  TRY(td_handle(out));
  td_impl** in = calloc(num, sizeof *in);
  if (!in) return dbl_plain_fail("std::bad_alloc");
  cuvsError_t st = CUVS_SUCCESS;
  int64_t total = 0;
  for (size_t i = 0; i < num && st == CUVS_SUCCESS; i++) {
    st = td_handle(indices[i]);
    if (st != CUVS_SUCCESS) break;
    if (indices[i]->dtype.code != indices[0]->dtype.code ||
        indices[i]->dtype.bits != indices[0]->dtype.bits) {
      st = RAFT_FAIL("indices must all have the same dtype");
      break;
    }
    if (indices[i]->algo != indices[0]->algo) {
      st = RAFT_FAIL("indices must all have the same index algorithm");
      break;
    }
    st = td_impl_of(indices[i], "_merge", &in[i]);
    if (st != CUVS_SUCCESS) break;
    if (in[i]->dim != in[0]->dim) {
      st = RAFT_FAIL("indices must all have the same dimensionality");
      break;
    }
    total += in[i]->n;
  }
  td_impl* t = NULL;
  if (st == CUVS_SUCCESS) {
    t = td_new(in[0]->dim);
    if (!t) st = dbl_plain_fail("std::bad_alloc");
  }
  if (st == CUVS_SUCCESS) {
    /* the merged state is index 0's with the parameters given for its build */
    st = td_params(params, t);
    t->algo = in[0]->algo;
  }
  if (st == CUVS_SUCCESS) st = td_dev_store(t, total); /* the merged rows exactly */
  for (size_t i = 0; st == CUVS_SUCCESS && i < num; i++) {
    pthread_rwlock_rdlock(&in[i]->lock);
    if (td_append(t, in[i]->rows, in[i]->n) != 0) st = dbl_plain_fail("std::bad_alloc");
    pthread_rwlock_unlock(&in[i]->lock);
  }
  if (st == CUVS_SUCCESS) {
    /* index 0's ANN index over its own first rows, unless the tier grew past
     * min_ann_rows */
    pthread_rwlock_rdlock(&in[0]->lock);
    t->ann_rows = in[0]->ann_rows;
    if (in[0]->graph && t->ann_rows > 0) {
      t->degree = in[0]->degree;
      t->graph = malloc((size_t)(t->ann_rows * t->degree) * sizeof(uint32_t) + 1);
      if (!t->graph) st = dbl_plain_fail("std::bad_alloc");
      else memcpy(t->graph, in[0]->graph, (size_t)(t->ann_rows * t->degree) * sizeof(uint32_t));
    }
    pthread_rwlock_unlock(&in[0]->lock);
    if (st == CUVS_SUCCESS && t->n - t->ann_rows > t->min_ann_rows) {
      st = td_dev_ann(t, t->n);
      if (st == CUVS_SUCCESS) st = td_build_ann(t);
    }
  }
  if (st == CUVS_SUCCESS) {
    if (out->addr != 0) {
      dbl_violation("merging into a cuvsTieredIndex_t that already holds an index: the real "
                    "library leaks it");
    }
    dbl_reg_add(t, K_TIERED_IMPL, sizeof *t);
    out->addr = (uintptr_t)t;
    out->dtype = indices[0]->dtype;
    out->algo = indices[0]->algo;
  } else {
    td_free(t);
  }
  free(in);
  return st;
}

DBL_API cuvsError_t cuvsTieredIndexMerge(cuvsResources_t res, cuvsTieredIndexParams_t params,
                                         cuvsTieredIndex_t* indices, size_t num_indices,
                                         cuvsTieredIndex_t output_index)
{
  DBL_ENTER(cuvsTieredIndexMerge);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = td_merge(params, indices, num_indices, output_index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- search ---- */

static cuvsError_t td_search(void* sp, cuvsTieredIndex_t index, DLManagedTensor* queries,
                             DLManagedTensor* neighbors, DLManagedTensor* distances,
                             cuvsFilter filter)
{
  TRY(dl_check_ptr(queries, "queries"));
  TRY(dl_check_ptr(neighbors, "neighbors"));
  TRY(dl_check_ptr(distances, "distances"));
  const DLTensor* q = &queries->dl_tensor;
  const DLTensor* nb = &neighbors->dl_tensor;
  const DLTensor* ds = &distances->dl_tensor;
  EXPECTS(dl_dev_compat(q), "queries should have device compatible memory");
  EXPECTS(dl_dev_compat(nb), "neighbors should have device compatible memory");
  EXPECTS(dl_dev_compat(ds), "distances should have device compatible memory");
  EXPECTS(nb->dtype.code == kDLInt && nb->dtype.bits == 64, "neighbors should be of type int64_t");
  EXPECTS(ds->dtype.code == kDLFloat && ds->dtype.bits == 32, "distances should be of type float32");
  TRY(td_handle(index));
  EXPECTS(q->dtype.code == index->dtype.code, "type mismatch between index and queries");
  if (index->algo < 0 || index->algo > 2) return RAFT_FAIL("unsupported tiered index algorithm");
  td_impl* t;
  TRY(td_impl_of(index, "_search", &t));
  TRY(dl_view(queries, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_view(neighbors, LAYOUT_ROW, kDLInt, 64, WANT_DEVICE, 2));
  TRY(dl_view(distances, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_strict(q, "queries"));
  TRY(dl_strict(nb, "neighbors"));
  TRY(dl_strict(ds, "distances"));
  if (filter.type == BITMAP) return RAFT_FAIL("Unsupported filter type: BITMAP");
  int64_t nq = q->shape[0], k = nb->shape[1];
  EXPECTS(nb->shape[0] == nq && ds->shape[0] == nq && ds->shape[1] == k,
          "cuvsdouble: neighbors and distances must be n_queries x k");
  EXPECTS(q->shape[1] == t->dim, "cuvsdouble: queries have %lld columns, the index %lld",
          (long long)q->shape[1], (long long)t->dim);
  pthread_rwlock_rdlock(&t->lock);
  if (t->ann_rows > 0 && t->algo == CUVS_TIERED_INDEX_ALGO_CAGRA && sp) {
    /* the ANN tier's cagra::search gets the caller's k: it refuses one
     * past itopk_size (single-CTA) as a CAGRA search does */
    cuvsError_t ck = cg_check_search_params((cuvsCagraSearchParams_t)sp, k, filter.addr != 0);
    if (ck != CUVS_SUCCESS) {
      pthread_rwlock_unlock(&t->lock);
      return ck;
    }
  }
  dbl_filter f;
  cuvsError_t st = dbl_filter_view(filter, t->n, nq, &f);
  if (st != CUVS_SUCCESS) {
    pthread_rwlock_unlock(&t->lock);
    return st;
  }
  int64_t ann = t->ann_rows, bf = t->n - t->ann_rows;
  int larger = knn_larger_is_better(t->metric);
  size_t cells = (size_t)(nq * k);
  int64_t* n2 = malloc(2 * cells * sizeof(int64_t) + 1);
  float* d2 = malloc(2 * cells * sizeof(float) + 1);
  if (!n2 || !d2) {
    free(n2), free(d2);
    pthread_rwlock_unlock(&t->lock);
    return dbl_plain_fail("std::bad_alloc");
  }
  DLDataType f32 = {kDLFloat, 32, 1};
  dbl_matrix qm = {q->data, f32, t->dim, 1, nq, t->dim};
  int rc = 0;
  for (size_t i = 0; i < 2 * cells; i++) {
    n2[i] = -1;
    d2[i] = knn_worst(t->metric);
  }
  if (ann > 0) {
    dbl_matrix am = {t->rows, f32, t->dim, 1, ann, t->dim};
    if (t->algo == CUVS_TIERED_INDEX_ALGO_CAGRA) {
      struct cuvsCagraSearchParams* cs = sp;
      cg_search_cfg cfg;
      memset(&cfg, 0, sizeof cfg);
      int64_t itopk = cs ? (int64_t)cs->itopk_size : 64;
      if (itopk < k) itopk = k; /* multi-CTA: its CTAs' 32 each cover k (checked above) */
      cfg.itopk = (itopk + 31) / 32 * 32;
      cfg.width = cs && cs->search_width ? (int64_t)cs->search_width : 1;
      cfg.min_iter = cs ? (int64_t)cs->min_iterations : 0;
      cfg.max_iter = cs && cs->max_iterations ? (int64_t)cs->max_iterations : cfg.itopk / cfg.width + 10;
      cfg.samplings = cs ? cs->num_random_samplings : 1;
      cfg.xor_mask = cs ? cs->rand_xor_mask : 0x128394;
      cfg.n_cta = 1;
      float* dd = malloc(cells * sizeof(float) + 1);
      if (!dd) rc = -1;
      if (rc == 0) rc = cg_graph_search(&am, t->graph, t->degree, t->metric, &f, &qm, k, &cfg, NULL, n2, dd);
      for (size_t i = 0; rc == 0 && i < cells; i++) {
        if (n2[i] < 0 || n2[i] == (int64_t)CG_SENTINEL_ID) {
          n2[i] = -1;
          d2[i] = knn_worst(t->metric);
        } else {
          d2[i] = dd[i];
        }
      }
      free(dd);
    } else {
      rc = knn_search(&am, &qm, t->metric, 2.0f, k, &f, 0, n2, NULL, k, d2, k);
      /* cuVS's IVF-PQ scores cosine as -cos (dbl_ivf_pq.c), and its tiered
       * search hands that on for the ANN tier: 1 - cos here, less 1. */
      for (size_t i = 0; rc == 0 && t->algo == CUVS_TIERED_INDEX_ALGO_IVF_PQ && t->metric == CosineExpanded && i < cells; i++) {
        if (n2[i] >= 0 && isfinite(d2[i])) d2[i] -= 1.0f;
      }
    }
  }
  if (rc == 0 && bf > 0) {
    dbl_matrix bm = {t->rows + ann * t->dim, f32, t->dim, 1, bf, t->dim};
    /* the prefilter as is: the tier's row j against bit j */
    rc = knn_search(&bm, &qm, t->metric, 2.0f, k, &f, 0, n2 + cells, NULL, k, d2 + cells, k);
    for (size_t i = cells; rc == 0 && i < 2 * cells; i++) {
      if (n2[i] >= 0) n2[i] += ann;
    }
  }
  int64_t* on = nb->data;
  float* od = ds->data;
  for (int64_t qi = 0; rc == 0 && qi < nq; qi++) {
    int64_t a = 0, b = 0;
    const int64_t* an = n2 + qi * k;
    const float* ad = d2 + qi * k;
    const int64_t* bn = n2 + cells + qi * k;
    const float* bd = d2 + cells + qi * k;
    for (int64_t j = 0; j < k; j++) {
      int take_a;
      if (a >= k) take_a = 0;
      else if (b >= k) take_a = 1;
      else take_a = larger ? ad[a] >= bd[b] : ad[a] <= bd[b];
      if (take_a) {
        on[qi * k + j] = an[a];
        od[qi * k + j] = ad[a];
        a++;
      } else {
        on[qi * k + j] = bn[b];
        od[qi * k + j] = bd[b];
        b++;
      }
    }
  }
  free(n2);
  free(d2);
  pthread_rwlock_unlock(&t->lock);
  if (rc != 0) return dbl_plain_fail("std::bad_alloc");
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsTieredIndexSearch(cuvsResources_t res, void* search_params,
                                          cuvsTieredIndex_t index, DLManagedTensor* queries,
                                          DLManagedTensor* neighbors, DLManagedTensor* distances,
                                          cuvsFilter prefilter)
{
  DBL_ENTER(cuvsTieredIndexSearch);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = td_search(search_params, index, queries, neighbors, distances, prefilter);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, neighbors, distances);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
