/*
 * cuvsdouble single-node multi-GPU indexes (c/src/neighbors/mg_cagra.cpp,
 * mg_ivf_flat.cpp, mg_ivf_pq.cpp and cpp/src/neighbors/mg/snmg.cuh of cuVS
 * v26.06.00 and v26.08.01), on the CPU. The multi-GPU resources hold a list
 * of ranks (cuvsMultiGpuResourcesCreate: every fake device the double
 * reports, cuvsdouble_set_device_count; ...WithDeviceIds: the list given);
 * every rank holds one index of the IVF core (dbl_kmeans.c):
 *   - IVF-Flat and IVF-PQ ranks are IVF indexes with the base params'
 *     n_lists and searched with their n_probes (IVF-PQ's distances are
 *     exact here: no product quantisation); CAGRA ranks are one-list IVF
 *     indexes, so their searches are exact (the real one is a graph walk);
 *   - REPLICATED: every rank is built on the whole dataset; searches are
 *     split in batches over the ranks (LOAD_BALANCER) or go whole to the
 *     next rank (ROUND_ROBIN, which refuses more rows than n_rows_per_batch);
 *   - SHARDED: rank r is built on rows [r*ceil(n/R), ...) and searched for
 *     every query; each rank's top-k ids are offset by the sizes of the ranks
 *     before it and merged (knn_merge_parts), whatever the merge mode;
 *   - every tensor is host memory (kDLCPU, pinned or managed), neighbors
 *     int64, distances float32; extend ids are uint32 (CAGRA) or int64 (IVF);
 *   - the file: NumPy dtype (4 bytes), .npy scalars for mode and rank count,
 *     then each rank's index (the double's own payload; a CAGRA rank after
 *     cuVS's CAGRA header: dtype, version, [kind,] rows, dim, degree,
 *     metric); Deserialize refuses a
 *     rank count other than the resources'; Distribute reads a single-GPU
 *     IVF-Flat or CAGRA file of the double onto every rank (REPLICATED; a
 *     CAGRA file through the double's CAGRA deserializer, on resources of
 *     its own); distributing IVF-PQ files is not modelled (an error says so:
 *     the double's files hold codes, not rows);
 *   - a single-GPU cuvsResources_t given to these functions is a violation
 *     (the real library reinterprets it as device_resources_snmg);
 *   - snmg runs each rank's build and extend inside an OpenMP parallel
 *     loop, so what the single-GPU code throws there ends the process
 *     (std::terminate); the double records a violation and fails instead:
 *     IVF extends without ids on a non-empty rank (ivf_flat::extend's and
 *     ivf_pq::extend's "You must pass data indices when the index is
 *     non-empty."), CAGRA extends on 26.06 and on a device_padded index on
 *     26.08 (iface.hpp's "CAGRA does not implement the extend method"), CAGRA
 *     shards of one row (cg_degrees) or that an ITERATIVE_CAGRA_SEARCH
 *     build refuses;
 *   - CAGRA shards lower their degrees as the single-GPU build does
 *     (cg_degrees: intermediate >= rows -> rows - 1, graph degree >
 *     intermediate -> intermediate); each rank's degree is kept and written
 *     in its file header;
 *   - 26.08's CAGRA layout (mg_cagra.cpp's mg_cagra_dataset_layout):
 *     Build picks device_padded when a row's bytes are a multiple of 16
 *     (matrix_row_width_matches_cagra_required: the row width equals
 *     cagra_required_row_width), device_standard otherwise; Deserialize
 *     and Distribute take the file's serialized dataset kind; UpdateDataset
 *     makes a standard index padded. Extend on a device_standard index does
 *     nothing (iface.hpp has no branch for it) and succeeds.
 */
#include "dbl_ivf.h"

#include <math.h>

enum { MG_CAGRA = 0, MG_FLAT = 1, MG_PQ = 2 };
static const char* const mg_names[] = {"CAGRA", "IVF-Flat", "IVF-PQ"};

#define MG_MAGIC 0x4d554c5449475055ULL /* "MULTIGPU" */

typedef struct {
  uint64_t magic;
  int algo, mode, nranks;
  DLDataType dtype;
  int64_t dim;
  atomic_long rr; /* ROUND_ROBIN's counter */
  int padded;      /* CAGRA on 26.08: device_padded (1) or device_standard (0) layout */
  ivf_impl* rank[DBL_MAX_DEVICES];
  int64_t degree[DBL_MAX_DEVICES]; /* CAGRA: the graph degree each rank was built with */
} mg_impl;

/* The layout all three index handles share. */
typedef struct {
  uintptr_t addr;
  DLDataType dtype;
} mg_handle;

static void mg_free(mg_impl* m)
{
  if (!m) return;
  for (int r = 0; r < m->nranks; r++) ivf_free(m->rank[r]);
  m->magic = 0;
  free(m);
}

static cuvsError_t mg_res(cuvsResources_t res, const char* fn, dbl_res** out)
{
  TRY(dbl_res_acquire(res, out));
  if (!(*out)->multi) {
    dbl_res_release(*out);
    dbl_violation("%s given single-GPU resources (the real library reinterprets the handle as "
                  "device_resources_snmg: undefined behaviour)",
                  fn);
    return RAFT_FAIL("cuvsdouble: %s needs multi-GPU resources", fn);
  }
  return CUVS_SUCCESS;
}

static int mg_dtype_ok(DLDataType dt)
{
  return dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) ||
         dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8);
}

/* ---- params: the base params come from the single-GPU Create functions, as
 * in cuVS ---- */

#define MG_PARAMS(Algo, algo_id, Base)                                                             \
  DBL_API cuvsError_t cuvsMultiGpu##Algo##IndexParamsCreate(                                     \
    cuvsMultiGpu##Algo##IndexParams_t* p)                                                          \
  {                                                                                                \
    DBL_ENTER(cuvsMultiGpu##Algo##IndexParamsCreate);                                              \
    if (!p) return RAFT_FAIL("cuvsdouble: NULL out-parameter");                                    \
    cuvs##Base##IndexParams_t base;                                                                \
    TRY(cuvs##Base##IndexParamsCreate(&base));                                                     \
    struct cuvsMultiGpu##Algo##IndexParams* m = calloc(1, sizeof *m);                              \
    if (!m) return dbl_plain_fail("std::bad_alloc");                                               \
    m->base_params = base;                                                                         \
    m->mode = CUVS_NEIGHBORS_MG_SHARDED;                                                           \
    dbl_reg_add(m, K_MG_INDEX_PARAMS, sizeof *m);                                                  \
    *p = m;                                                                                        \
    return dbl_ok();                                                                               \
  }                                                                                                \
  DBL_API cuvsError_t cuvsMultiGpu##Algo##IndexParamsDestroy(cuvsMultiGpu##Algo##IndexParams_t p) \
  {                                                                                                \
    DBL_ENTER(cuvsMultiGpu##Algo##IndexParamsDestroy);                                             \
    if (!p) return dbl_ok();                                                                       \
    if (dbl_reg_remove(p, K_MG_INDEX_PARAMS, NULL, NULL) != 0) {                                   \
      dbl_violation("destroying an invalid or already destroyed multi-GPU %s index params %p",     \
                    mg_names[algo_id], (void*)p);                                                  \
      return RAFT_FAIL("cuvsdouble: invalid params %p", (void*)p);                                 \
    }                                                                                              \
    cuvsError_t st = cuvs##Base##IndexParamsDestroy(p->base_params);                               \
    free(p);                                                                                       \
    return st == CUVS_SUCCESS ? dbl_ok() : st;                                                     \
  }                                                                                                \
  DBL_API cuvsError_t cuvsMultiGpu##Algo##SearchParamsCreate(                                    \
    cuvsMultiGpu##Algo##SearchParams_t* p)                                                         \
  {                                                                                                \
    DBL_ENTER(cuvsMultiGpu##Algo##SearchParamsCreate);                                             \
    if (!p) return RAFT_FAIL("cuvsdouble: NULL out-parameter");                                    \
    cuvs##Base##SearchParams_t base;                                                               \
    TRY(cuvs##Base##SearchParamsCreate(&base));                                                    \
    struct cuvsMultiGpu##Algo##SearchParams* m = calloc(1, sizeof *m);                             \
    if (!m) return dbl_plain_fail("std::bad_alloc");                                               \
    m->base_params = base;                                                                         \
    m->search_mode = CUVS_NEIGHBORS_MG_LOAD_BALANCER;                                              \
    m->merge_mode = CUVS_NEIGHBORS_MG_TREE_MERGE;                                                  \
    m->n_rows_per_batch = 1LL << 20;                                                               \
    dbl_reg_add(m, K_MG_SEARCH_PARAMS, sizeof *m);                                                 \
    *p = m;                                                                                        \
    return dbl_ok();                                                                               \
  }                                                                                                \
  DBL_API cuvsError_t cuvsMultiGpu##Algo##SearchParamsDestroy(                                   \
    cuvsMultiGpu##Algo##SearchParams_t p)                                                          \
  {                                                                                                \
    DBL_ENTER(cuvsMultiGpu##Algo##SearchParamsDestroy);                                            \
    if (!p) return dbl_ok();                                                                       \
    if (dbl_reg_remove(p, K_MG_SEARCH_PARAMS, NULL, NULL) != 0) {                                  \
      dbl_violation("destroying an invalid or already destroyed multi-GPU %s search params %p",    \
                    mg_names[algo_id], (void*)p);                                                  \
      return RAFT_FAIL("cuvsdouble: invalid params %p", (void*)p);                                 \
    }                                                                                              \
    cuvsError_t st = cuvs##Base##SearchParamsDestroy(p->base_params);                              \
    free(p);                                                                                       \
    return st == CUVS_SUCCESS ? dbl_ok() : st;                                                     \
  }                                                                                                \
  DBL_API cuvsError_t cuvsMultiGpu##Algo##IndexCreate(cuvsMultiGpu##Algo##Index_t* index)        \
  {                                                                                                \
    DBL_ENTER(cuvsMultiGpu##Algo##IndexCreate);                                                    \
    if (!index) return RAFT_FAIL("cuvsdouble: NULL out-parameter");                                \
    cuvsMultiGpu##Algo##Index* h = calloc(1, sizeof *h);                                           \
    if (!h) return dbl_plain_fail("std::bad_alloc");                                               \
    dbl_reg_add(h, K_MG_INDEX, sizeof *h);                                                         \
    *index = h;                                                                                    \
    return dbl_ok();                                                                               \
  }                                                                                                \
  DBL_API cuvsError_t cuvsMultiGpu##Algo##IndexDestroy(cuvsMultiGpu##Algo##Index_t index)        \
  {                                                                                                \
    DBL_ENTER(cuvsMultiGpu##Algo##IndexDestroy);                                                   \
    if (!index) return dbl_ok();                                                                   \
    return mg_destroy((mg_handle*)index, algo_id);                                                 \
  }

static cuvsError_t mg_destroy(mg_handle* h, int algo)
{
  if (dbl_reg_remove(h, K_MG_INDEX, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed multi-GPU %s index %p",
                  mg_names[algo], (void*)h);
    return RAFT_FAIL("cuvsdouble: invalid multi-GPU index %p", (void*)h);
  }
  mg_impl* m = (mg_impl*)h->addr;
  if (m && dbl_reg_remove(m, K_MG_IMPL, NULL, NULL) == 0) mg_free(m);
  free(h);
  return dbl_ok();
}

MG_PARAMS(Cagra, MG_CAGRA, Cagra)
MG_PARAMS(IvfFlat, MG_FLAT, IvfFlat)
MG_PARAMS(IvfPq, MG_PQ, IvfPq)

/* ---- the handle, the built index ---- */

static cuvsError_t mg_handle_ok(mg_handle* h, const char* fn)
{
  if (dbl_reg_find(h, NULL) != K_MG_INDEX) {
    dbl_violation("%s: invalid or destroyed multi-GPU index %p (the real library would crash)",
                  fn, (void*)h);
    return RAFT_FAIL("cuvsdouble: invalid multi-GPU index %p", (void*)h);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t mg_impl_of(mg_handle* h, int algo, const char* fn, mg_impl** out)
{
  TRY(mg_handle_ok(h, fn));
  mg_impl* m = (mg_impl*)h->addr;
  if (!m || dbl_reg_find(m, NULL) != K_MG_IMPL) {
    if (algo == MG_CAGRA) return RAFT_FAIL("%s: null index handle", fn);
    dbl_violation("%s on a multi-GPU index that holds none (the real library dereferences addr "
                  "%#lx)",
                  fn, (unsigned long)h->addr);
    return RAFT_FAIL("cuvsdouble: the multi-GPU %s index was not built", mg_names[algo]);
  }
  if (m->algo != algo) {
    dbl_violation("%s given a multi-GPU %s index", fn, mg_names[m->algo]);
    return RAFT_FAIL("cuvsdouble: wrong kind of multi-GPU index");
  }
  *out = m;
  return CUVS_SUCCESS;
}

/* Replaces the handle's index (CAGRA frees the old one, as 26.08's box
 * does; the IVF ones leak it in cuVS: recorded). */
static void mg_install(mg_handle* h, mg_impl* m)
{
  mg_impl* old = (mg_impl*)h->addr;
  if (old && dbl_reg_find(old, NULL) == K_MG_IMPL) {
    if (m->algo != MG_CAGRA) {
      dbl_violation("a new multi-GPU %s index written into a handle that holds one: the real "
                    "library leaks the previous one (the double frees it)",
                    mg_names[m->algo]);
    }
    dbl_reg_remove(old, K_MG_IMPL, NULL, NULL);
    mg_free(old);
  }
  dbl_reg_add(m, K_MG_IMPL, sizeof *m);
  h->addr = (uintptr_t)m;
}

static mg_impl* mg_new(int algo, int mode, int nranks, DLDataType dt, int64_t dim)
{
  mg_impl* m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->magic = MG_MAGIC;
  m->algo = algo;
  m->mode = mode;
  m->nranks = nranks;
  m->dtype = dt;
  m->dim = dim;
  m->padded = 1;
  return m;
}

/* What one rank's build needs from the base params. */
typedef struct {
  int metric;
  float metric_arg;
  uint32_t n_lists, n_iters;
  double frac;
  int add_data;
  cuvsCagraIndexParams_t cagra; /* CAGRA: the base params */
} mg_build_args;

static cuvsError_t mg_build_rank(int algo, const mg_build_args* a, const dbl_matrix* data,
                                 DLDataType dt, ivf_impl** out, int64_t* degree)
{
  int64_t n = data->n;
  if (algo == MG_CAGRA) {
    /* cagra::build on the shard: the degrees lowered on small shards (one
     * row: cg_degrees records the violation) */
    size_t intermediate = 0, deg = 0;
    cuvsError_t st = cg_degrees(a->cagra, n, &intermediate, &deg);
    if (st != CUVS_SUCCESS) {
      if (n >= 2) {
        dbl_violation("a multi-GPU CAGRA shard of %lld rows: cagra::build throws inside snmg's "
                      "OpenMP loop (the real process aborts)",
                      (long long)n);
      }
      return st;
    }
    *degree = (int64_t)deg;
  } else {
    EXPECTS(n > 0, "empty dataset");
    EXPECTS(n >= (int64_t)a->n_lists, "number of rows can't be less than n_lists");
  }
  if (!ivf_metric_ok(a->metric, 0)) {
    return RAFT_FAIL("The chosen distance metric is not supported (%d)", a->metric);
  }
  ivf_impl* impl = ivf_new(0, dt, a->metric, a->metric_arg, data->dim, a->n_lists);
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  double want = a->frac * (double)n;
  if (want < (double)a->n_lists) want = a->n_lists;
  int64_t ratio = want > 0 ? (int64_t)((double)n / want) : 1;
  if (ratio < 1) ratio = 1;
  if (ivf_train(impl, data, n / ratio, a->n_iters) != 0 ||
      (a->add_data && ivf_add(impl, data, NULL) != 0)) {
    ivf_free(impl);
    return dbl_plain_fail("std::bad_alloc");
  }
  *out = impl;
  return CUVS_SUCCESS;
}

static cuvsError_t mg_build(cuvsResources_t res, int algo, int mode, const mg_build_args* a,
                            DLManagedTensor* dataset, mg_handle* index, const char* fn)
{
  dbl_res* r;
  TRY(mg_res(res, fn, &r));
  cuvsError_t st = CUVS_SUCCESS;
  mg_impl* m = NULL;
  do {
    if ((st = mg_handle_ok(index, fn)) != CUVS_SUCCESS) break;
    if ((st = dl_check_ptr(dataset, "dataset")) != CUVS_SUCCESS) break;
    const DLTensor* t = &dataset->dl_tensor;
    if (!dl_host_compat(t)) {
      st = RAFT_FAIL("Multi-GPU %s build requires dataset to have host compatible memory",
                     mg_names[algo]);
      break;
    }
    index->dtype.code = t->dtype.code;
    index->dtype.bits = t->dtype.bits;
    if (!mg_dtype_ok(t->dtype)) {
      st = RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)t->dtype.code,
                     (int)t->dtype.bits);
      break;
    }
    if ((st = dl_view(dataset, LAYOUT_ROW, t->dtype.code, t->dtype.bits, WANT_HOST, 2)) !=
        CUVS_SUCCESS)
      break;
    int64_t n = t->shape[0], dim = t->shape[1];
    m = mg_new(algo, mode, r->n_ranks, t->dtype, dim);
    if (!m) {
      st = dbl_plain_fail("std::bad_alloc");
      break;
    }
    int64_t per = mode == CUVS_NEIGHBORS_MG_SHARDED ? (n + m->nranks - 1) / m->nranks : n;
    size_t es = dl_elem_size(t->dtype);
    for (int k = 0; k < m->nranks && st == CUVS_SUCCESS; k++) {
      int64_t off = mode == CUVS_NEIGHBORS_MG_SHARDED ? k * per : 0;
      int64_t rows = per < n - off ? per : n - off;
      if (rows <= 0) {
        dbl_violation("%s: rank %d of %d gets %lld rows of %lld (snmg hands it a view of that "
                      "extent: undefined behaviour)",
                      fn, k, m->nranks, (long long)rows, (long long)n);
        st = RAFT_FAIL("cuvsdouble: rank %d gets no rows", k);
        break;
      }
      dbl_matrix data = {(const char*)t->data + (size_t)off * (size_t)dim * es, t->dtype, dim, 1,
                         rows, dim};
      st = mg_build_rank(algo, a, &data, t->dtype, &m->rank[k], &m->degree[k]);
    }
#if DBL_RELEASE >= 2608
    /* matrix_row_width_matches_cagra_required on the dense host view: the
     * row width (dim) equals cagra_required_row_width, dim * es rounded up to
     * lcm(16, es) = 16 bytes */
    m->padded = ((size_t)dim * es) % 16 == 0;
#endif
  } while (0);
  if (st != CUVS_SUCCESS) {
    if (m) mg_free(m);
  } else {
    mg_install(index, m);
  }
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsMultiGpuCagraBuild(cuvsResources_t res,
                                           cuvsMultiGpuCagraIndexParams_t params,
                                           DLManagedTensor* dataset_tensor,
                                           cuvsMultiGpuCagraIndex_t index)
{
  DBL_ENTER(cuvsMultiGpuCagraBuild);
  if (!params || !params->base_params) {
    dbl_violation("cuvsMultiGpuCagraBuild with NULL params (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL params");
  }
  mg_build_args a = {(int)params->base_params->metric, 0, 1, 1, 1.0, 1, params->base_params};
  return mg_build(res, MG_CAGRA, params->mode, &a, dataset_tensor, (mg_handle*)index,
                  "cuvsMultiGpuCagraBuild");
}

DBL_API cuvsError_t cuvsMultiGpuIvfFlatBuild(cuvsResources_t res,
                                             cuvsMultiGpuIvfFlatIndexParams_t params,
                                             DLManagedTensor* dataset_tensor,
                                             cuvsMultiGpuIvfFlatIndex_t index)
{
  DBL_ENTER(cuvsMultiGpuIvfFlatBuild);
  if (!params || !params->base_params) {
    dbl_violation("cuvsMultiGpuIvfFlatBuild with NULL params (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL params");
  }
  cuvsIvfFlatIndexParams_t b = params->base_params;
  EXPECTS(b->n_lists > 0, "cuvsdouble: n_lists must be positive");
  mg_build_args a = {(int)b->metric, b->metric_arg, b->n_lists, b->kmeans_n_iters,
                     b->kmeans_trainset_fraction, b->add_data_on_build, NULL};
  return mg_build(res, MG_FLAT, params->mode, &a, dataset_tensor, (mg_handle*)index,
                  "cuvsMultiGpuIvfFlatBuild");
}

DBL_API cuvsError_t cuvsMultiGpuIvfPqBuild(cuvsResources_t res,
                                           cuvsMultiGpuIvfPqIndexParams_t params,
                                           DLManagedTensor* dataset_tensor,
                                           cuvsMultiGpuIvfPqIndex_t index)
{
  DBL_ENTER(cuvsMultiGpuIvfPqBuild);
  if (!params || !params->base_params) {
    dbl_violation("cuvsMultiGpuIvfPqBuild with NULL params (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL params");
  }
  cuvsIvfPqIndexParams_t b = params->base_params;
  EXPECTS(b->n_lists > 0, "cuvsdouble: n_lists must be positive");
  mg_build_args a = {(int)b->metric, b->metric_arg, b->n_lists, b->kmeans_n_iters,
                     b->kmeans_trainset_fraction, b->add_data_on_build, NULL};
  return mg_build(res, MG_PQ, params->mode, &a, dataset_tensor, (mg_handle*)index,
                  "cuvsMultiGpuIvfPqBuild");
}

/* ---- search ---- */

typedef struct {
  float d;
  int64_t id;
} mg_cand;

static int mg_cand_less(const mg_cand* x, const mg_cand* y, int larger)
{
  if (x->d != y->d) return larger ? x->d > y->d : x->d < y->d;
  return x->id < y->id;
}

static cuvsError_t mg_search(cuvsResources_t res, int algo, int search_mode, int64_t per_batch,
                             uint32_t n_probes, mg_handle* index, DLManagedTensor* q_t,
                             DLManagedTensor* nb_t, DLManagedTensor* ds_t, const char* fn)
{
  dbl_res* r;
  TRY(mg_res(res, fn, &r));
  cuvsError_t st = CUVS_SUCCESS;
  int64_t *tmp_nb = NULL;
  float* tmp_d = NULL;
  mg_cand* cand = NULL;
  do {
    if ((st = dl_check_ptr(q_t, "queries")) != CUVS_SUCCESS) break;
    if ((st = dl_check_ptr(nb_t, "neighbors")) != CUVS_SUCCESS) break;
    if ((st = dl_check_ptr(ds_t, "distances")) != CUVS_SUCCESS) break;
    const DLTensor* q = &q_t->dl_tensor;
    const DLTensor* nb = &nb_t->dl_tensor;
    const DLTensor* ds = &ds_t->dl_tensor;
    const char* nm = mg_names[algo];
    if (!dl_host_compat(q)) {
      st = RAFT_FAIL("Multi-GPU %s search requires queries to have host compatible memory", nm);
      break;
    }
    if (!dl_host_compat(nb)) {
      st = RAFT_FAIL("Multi-GPU %s search requires neighbors to have host compatible memory", nm);
      break;
    }
    if (!dl_host_compat(ds)) {
      st = RAFT_FAIL("Multi-GPU %s search requires distances to have host compatible memory", nm);
      break;
    }
    if (!dl_is_dtype(nb->dtype, kDLInt, 64)) {
      st = RAFT_FAIL("neighbors should be of type int64_t");
      break;
    }
    if (!dl_is_dtype(ds->dtype, kDLFloat, 32)) {
      st = RAFT_FAIL("distances should be of type float32");
      break;
    }
    if ((st = mg_handle_ok(index, fn)) != CUVS_SUCCESS) break;
    if (q->dtype.code != index->dtype.code || q->dtype.bits != index->dtype.bits) {
      st = RAFT_FAIL("type mismatch between index and queries");
      break;
    }
    if (!mg_dtype_ok(q->dtype)) {
      st = RAFT_FAIL("Unsupported queries DLtensor dtype: %d and bits: %d", (int)q->dtype.code,
                     (int)q->dtype.bits);
      break;
    }
    mg_impl* m;
    if ((st = mg_impl_of(index, algo, fn, &m)) != CUVS_SUCCESS) break;
    if ((st = dl_view(q_t, LAYOUT_ROW, q->dtype.code, q->dtype.bits, WANT_HOST, 2)) != CUVS_SUCCESS)
      break;
    if ((st = dl_view(nb_t, LAYOUT_ROW, kDLInt, 64, WANT_HOST, 2)) != CUVS_SUCCESS) break;
    if ((st = dl_view(ds_t, LAYOUT_ROW, kDLFloat, 32, WANT_HOST, 2)) != CUVS_SUCCESS) break;
    int64_t nq = q->shape[0], k = nb->shape[1];
    if (nb->shape[0] != nq || ds->shape[0] != nq || ds->shape[1] != k) {
      st = RAFT_FAIL("Number of rows in output neighbors and distances matrices must equal the "
                     "number of queries.");
      break;
    }
    if (q->shape[1] != m->dim) {
      st = RAFT_FAIL("Number of query dimensions should equal number of dimensions in the index.");
      break;
    }
    if (per_batch <= 0) {
      dbl_violation("%s with n_rows_per_batch %lld: the real library divides by it", fn,
                    (long long)per_batch);
      st = RAFT_FAIL("cuvsdouble: n_rows_per_batch must be positive");
      break;
    }
    if (algo != MG_CAGRA && n_probes == 0) {
      st = RAFT_FAIL("n_probes (number of clusters to probe in the search) must be positive.");
      break;
    }
    if (nq == 0 || k == 0) break;
    uint32_t probes = algo == MG_CAGRA ? 1 : n_probes;
    dbl_filter nof = {FILTER_NONE, NULL};
    if (m->mode == CUVS_NEIGHBORS_MG_REPLICATED) {
      if (search_mode == CUVS_NEIGHBORS_MG_ROUND_ROBIN) {
        if (nq > per_batch) {
          st = RAFT_FAIL("In round-robin mode, n_rows must lower or equal to n_rows_per_batch");
          break;
        }
        int rank = (int)(atomic_fetch_add(&m->rr, 1) % m->nranks);
        dbl_matrix qm = {q->data, q->dtype, m->dim, 1, nq, m->dim};
        if (ivf_search(m->rank[rank], &qm, probes, k, &nof, m->rank[rank]->size,
                       (int64_t*)nb->data, (float*)ds->data) != 0)
          st = dbl_plain_fail("std::bad_alloc");
        break;
      }
      /* LOAD_BALANCER: at least one batch per rank, batch b on rank b % R */
      int64_t per_rank = (nq + m->nranks - 1) / m->nranks;
      int64_t bs = per_batch < per_rank ? per_batch : per_rank;
      int64_t nbatch = (nq + bs - 1) / bs;
      if (nbatch <= 1) bs = nq;
      size_t es = dl_elem_size(q->dtype);
      for (int64_t off = 0, b = 0; off < nq && st == CUVS_SUCCESS; off += bs, b++) {
        int64_t rows = bs < nq - off ? bs : nq - off;
        ivf_impl* ri = m->rank[b % m->nranks];
        dbl_matrix qm = {(const char*)q->data + (size_t)off * (size_t)m->dim * es, q->dtype,
                         m->dim, 1, rows, m->dim};
        if (ivf_search(ri, &qm, probes, k, &nof, ri->size, (int64_t*)nb->data + off * k,
                       (float*)ds->data + off * k) != 0)
          st = dbl_plain_fail("std::bad_alloc");
      }
      break;
    }
    /* SHARDED: every rank searches every query; offsets, then the merge */
    size_t nk = (size_t)nq * (size_t)k;
    tmp_nb = malloc(nk * (size_t)m->nranks * sizeof(int64_t));
    tmp_d = malloc(nk * (size_t)m->nranks * sizeof(float));
    cand = malloc((size_t)k * (size_t)m->nranks * sizeof(mg_cand));
    if (!tmp_nb || !tmp_d || !cand) {
      st = dbl_plain_fail("std::bad_alloc");
      break;
    }
    dbl_matrix qm = {q->data, q->dtype, m->dim, 1, nq, m->dim};
    int64_t offset = 0;
    for (int rk = 0; rk < m->nranks && st == CUVS_SUCCESS; rk++) {
      ivf_impl* ri = m->rank[rk];
      if (ivf_search(ri, &qm, probes, k, &nof, ri->size, tmp_nb + nk * rk, tmp_d + nk * rk) != 0) {
        st = dbl_plain_fail("std::bad_alloc");
        break;
      }
      if (m->nranks > 1) {
        for (size_t i = 0; i < nk; i++) tmp_nb[nk * rk + i] += offset;
      }
      offset += ri->size;
    }
    if (st != CUVS_SUCCESS) break;
    int larger = ivf_larger_is_better(m->rank[0]->metric);
    int64_t* onb = (int64_t*)nb->data;
    float* od = (float*)ds->data;
    for (int64_t qi = 0; qi < nq; qi++) {
      int64_t c = 0;
      for (int rk = 0; rk < m->nranks; rk++) {
        for (int64_t j = 0; j < k; j++) {
          size_t at = nk * rk + (size_t)qi * k + j;
          cand[c].d = tmp_d[at];
          cand[c].id = tmp_nb[at];
          c++;
        }
      }
      for (int64_t j = 0; j < k; j++) { /* selection of the k best */
        int64_t best = j;
        for (int64_t i = j + 1; i < c; i++) {
          if (mg_cand_less(&cand[i], &cand[best], larger)) best = i;
        }
        mg_cand tmp = cand[j];
        cand[j] = cand[best];
        cand[best] = tmp;
        onb[qi * k + j] = cand[j].id;
        od[qi * k + j] = cand[j].d;
      }
    }
  } while (0);
  free(tmp_nb);
  free(tmp_d);
  free(cand);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

#define MG_SEARCH_PARAMS_OK(p, fn)                                                   \
  do {                                                                               \
    if (!(p) || !(p)->base_params) {                                                 \
      dbl_violation(fn " with NULL params (the real library would crash)");          \
      return RAFT_FAIL("cuvsdouble: NULL params");                                   \
    }                                                                                \
  } while (0)

DBL_API cuvsError_t cuvsMultiGpuCagraSearch(cuvsResources_t res,
                                            cuvsMultiGpuCagraSearchParams_t params,
                                            cuvsMultiGpuCagraIndex_t index,
                                            DLManagedTensor* queries, DLManagedTensor* neighbors,
                                            DLManagedTensor* distances)
{
  DBL_ENTER(cuvsMultiGpuCagraSearch);
  MG_SEARCH_PARAMS_OK(params, "cuvsMultiGpuCagraSearch");
  return mg_search(res, MG_CAGRA, params->search_mode, params->n_rows_per_batch, 1,
                   (mg_handle*)index, queries, neighbors, distances, "cuvsMultiGpuCagraSearch");
}

DBL_API cuvsError_t cuvsMultiGpuIvfFlatSearch(cuvsResources_t res,
                                              cuvsMultiGpuIvfFlatSearchParams_t params,
                                              cuvsMultiGpuIvfFlatIndex_t index,
                                              DLManagedTensor* queries, DLManagedTensor* neighbors,
                                              DLManagedTensor* distances)
{
  DBL_ENTER(cuvsMultiGpuIvfFlatSearch);
  MG_SEARCH_PARAMS_OK(params, "cuvsMultiGpuIvfFlatSearch");
  return mg_search(res, MG_FLAT, params->search_mode, params->n_rows_per_batch,
                   params->base_params->n_probes, (mg_handle*)index, queries, neighbors,
                   distances, "cuvsMultiGpuIvfFlatSearch");
}

DBL_API cuvsError_t cuvsMultiGpuIvfPqSearch(cuvsResources_t res,
                                            cuvsMultiGpuIvfPqSearchParams_t params,
                                            cuvsMultiGpuIvfPqIndex_t index,
                                            DLManagedTensor* queries, DLManagedTensor* neighbors,
                                            DLManagedTensor* distances)
{
  DBL_ENTER(cuvsMultiGpuIvfPqSearch);
  MG_SEARCH_PARAMS_OK(params, "cuvsMultiGpuIvfPqSearch");
  return mg_search(res, MG_PQ, params->search_mode, params->n_rows_per_batch,
                   params->base_params->n_probes, (mg_handle*)index, queries, neighbors,
                   distances, "cuvsMultiGpuIvfPqSearch");
}

/* ---- extend ---- */

static cuvsError_t mg_extend(cuvsResources_t res, int algo, mg_handle* index,
                             DLManagedTensor* v_t, DLManagedTensor* ix_t, const char* fn)
{
  dbl_res* r;
  TRY(mg_res(res, fn, &r));
  cuvsError_t st = CUVS_SUCCESS;
  int64_t* ids = NULL;
  do {
    if ((st = mg_handle_ok(index, fn)) != CUVS_SUCCESS) break;
    if ((st = dl_check_ptr(v_t, "new_vectors")) != CUVS_SUCCESS) break;
    const DLTensor* v = &v_t->dl_tensor;
    if (!dl_host_compat(v)) {
      st = RAFT_FAIL("Multi-GPU %s extend requires new_vectors to have host compatible memory",
                     mg_names[algo]);
      break;
    }
    if (v->dtype.code != index->dtype.code || v->dtype.bits != index->dtype.bits) {
      st = RAFT_FAIL("type mismatch between index and new_vectors");
      break;
    }
    const DLTensor* ix = NULL;
    if (ix_t) {
      if ((st = dl_check_ptr(ix_t, "new_indices")) != CUVS_SUCCESS) break;
      ix = &ix_t->dl_tensor;
      if (!dl_host_compat(ix)) {
        st = RAFT_FAIL("Multi-GPU %s extend requires new_indices to have host compatible memory",
                       mg_names[algo]);
        break;
      }
      if (algo == MG_CAGRA && !dl_is_dtype(ix->dtype, kDLUInt, 32)) {
        st = RAFT_FAIL("new_indices should be of type uint32_t");
        break;
      }
      if (algo != MG_CAGRA && !dl_is_dtype(ix->dtype, kDLInt, 64)) {
        st = RAFT_FAIL("new_indices should be of type int64_t");
        break;
      }
    }
    mg_impl* m;
    if ((st = mg_impl_of(index, algo, fn, &m)) != CUVS_SUCCESS) break;
    if ((st = dl_view(v_t, LAYOUT_ROW, v->dtype.code, v->dtype.bits, WANT_HOST, 2)) != CUVS_SUCCESS)
      break;
    if (ix && (st = dl_view(ix_t, LAYOUT_ROW, ix->dtype.code, ix->dtype.bits, WANT_HOST, 1)) !=
                CUVS_SUCCESS)
      break;
    if (algo == MG_CAGRA) {
#if DBL_RELEASE >= 2608
      /* iface.hpp's extend has no branch for device_standard_index */
      if (!m->padded) break;
#endif
      dbl_violation("%s: iface.hpp's extend RAFT_FAILs \"CAGRA does not implement the extend "
                    "method\" inside snmg's OpenMP loop (the real process aborts)",
                    fn);
      st = RAFT_FAIL("CAGRA does not implement the extend method");
      break;
    }
    int64_t n = v->shape[0];
    if (v->shape[1] != m->dim) {
      st = RAFT_FAIL("new_vectors should have the same dimension as the index");
      break;
    }
    if (ix && ix->shape[0] != n) {
      /* snmg reads n_rows ids past each shard's offset: out of bounds */
      dbl_violation("%s with %lld new_indices for %lld rows (the real library reads past them)",
                    fn, (long long)ix->shape[0], (long long)n);
      st = RAFT_FAIL("cuvsdouble: new_vectors and new_indices have different number of rows");
      break;
    }
    if (!ix) {
      /* ivf_flat::extend / ivf_pq::extend, run on every rank inside snmg's
       * OpenMP loop */
      for (int k = 0; k < m->nranks && st == CUVS_SUCCESS; k++) {
        if (m->rank[k]->size == 0) continue;
        dbl_violation("%s without new_indices on rank %d of %lld rows: ivf::extend throws \"You "
                      "must pass data indices when the index is non-empty.\" inside snmg's OpenMP "
                      "loop (the real process aborts)",
                      fn, k, (long long)m->rank[k]->size);
        st = RAFT_FAIL("You must pass data indices when the index is non-empty.");
      }
      if (st != CUVS_SUCCESS) break;
    }
    if (ix) {
      ids = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
      if (!ids) {
        st = dbl_plain_fail("std::bad_alloc");
        break;
      }
      for (int64_t i = 0; i < n; i++) {
        ids[i] = algo == MG_CAGRA ? (int64_t)((const uint32_t*)ix->data)[i]
                                  : ((const int64_t*)ix->data)[i];
      }
    }
    int sharded = m->mode == CUVS_NEIGHBORS_MG_SHARDED;
    int64_t per = sharded ? (n + m->nranks - 1) / m->nranks : n;
    size_t es = dl_elem_size(v->dtype);
    for (int k = 0; k < m->nranks && st == CUVS_SUCCESS; k++) {
      int64_t off = sharded ? k * per : 0;
      int64_t rows = per < n - off ? per : n - off;
      if (rows <= 0) {
        dbl_violation("%s: rank %d of %d gets %lld new rows of %lld (snmg hands it a view of that "
                      "extent: undefined behaviour)",
                      fn, k, m->nranks, (long long)rows, (long long)n);
        continue;
      }
      ivf_impl* ri = m->rank[k];
      dbl_matrix data = {(const char*)v->data + (size_t)off * (size_t)m->dim * es, v->dtype, m->dim,
                         1, rows, m->dim};
      pthread_rwlock_wrlock(&ri->lock);
      int64_t* rid = ids ? ids + off : NULL; /* NULL: numbered by position in the rank */
      if (ivf_add(ri, &data, rid) != 0) st = dbl_plain_fail("std::bad_alloc");
      pthread_rwlock_unlock(&ri->lock);
    }
  } while (0);
  free(ids);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsMultiGpuCagraExtend(cuvsResources_t res, cuvsMultiGpuCagraIndex_t index,
                                            DLManagedTensor* new_vectors,
                                            DLManagedTensor* new_indices)
{
  DBL_ENTER(cuvsMultiGpuCagraExtend);
  return mg_extend(res, MG_CAGRA, (mg_handle*)index, new_vectors, new_indices,
                   "cuvsMultiGpuCagraExtend");
}

DBL_API cuvsError_t cuvsMultiGpuIvfFlatExtend(cuvsResources_t res,
                                              cuvsMultiGpuIvfFlatIndex_t index,
                                              DLManagedTensor* new_vectors,
                                              DLManagedTensor* new_indices)
{
  DBL_ENTER(cuvsMultiGpuIvfFlatExtend);
  return mg_extend(res, MG_FLAT, (mg_handle*)index, new_vectors, new_indices,
                   "cuvsMultiGpuIvfFlatExtend");
}

DBL_API cuvsError_t cuvsMultiGpuIvfPqExtend(cuvsResources_t res, cuvsMultiGpuIvfPqIndex_t index,
                                            DLManagedTensor* new_vectors,
                                            DLManagedTensor* new_indices)
{
  DBL_ENTER(cuvsMultiGpuIvfPqExtend);
  return mg_extend(res, MG_PQ, (mg_handle*)index, new_vectors, new_indices,
                   "cuvsMultiGpuIvfPqExtend");
}

/* ---- serialization ---- */

static void mg_descr(DLDataType dt, char out[4])
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

/* Each rank's payload: an .npy <i8 length, then the IVF core's bytes (read
 * back through fmemopen, since ivf_read wants its payload to end the file). */
static int mg_write_rank(FILE* f, const ivf_impl* impl)
{
  char* buf = NULL;
  size_t len = 0;
  FILE* mf = open_memstream(&buf, &len);
  if (!mf) return 0;
  int ok = ivf_write(mf, impl);
  if (fclose(mf) != 0) ok = 0;
  ok = ok && ivf_npy_write(f, "<i8", (uint64_t)len, 8) && fwrite(buf, 1, len, f) == len;
  free(buf);
  return ok;
}

/* The rank's own format, len bytes of f (read whole, then parsed). */
static ivf_impl* mg_read_rank_bytes(FILE* f, uint64_t len)
{
  char* buf = malloc(len);
  if (!buf) return NULL;
  ivf_impl* impl = NULL;
  if (fread(buf, 1, len, f) == len) {
    FILE* mf = fmemopen(buf, len, "rb");
    if (mf) {
      impl = ivf_read(mf, 0);
      fclose(mf);
    }
  }
  free(buf);
  return impl;
}

static ivf_impl* mg_read_rank(FILE* f)
{
  uint64_t len = 0;
  if (!ivf_npy_read(f, 8, &len) || len == 0 || len > (1ULL << 34)) return NULL;
  return mg_read_rank_bytes(f, len);
}

/* A CAGRA rank as cuVS's cagra::serialize (include_dataset) begins one:
 * the 4-byte NumPy dtype, then .npy scalars version (5 on 26.06, 6 on
 * 26.08), [26.08: serialized_dataset_kind,] rows, dim, graph degree and
 * metric; then, where cuVS writes the graph, the dataset and the source
 * indices as .npy items, the double writes one: a '|u1' array holding the
 * IVF core's bytes. A reader that knows cuVS's header (safe/multigpu reads
 * every rank's rows from it, the C API having no getter) walks both formats
 * alike: each rank is its tag, then .npy items up to the next tag. */
#if DBL_RELEASE >= 2608
#define MG_CAGRA_VERSION 6
#else
#define MG_CAGRA_VERSION 5
#endif

static int mg_npy_bytes(FILE* f, uint64_t len)
{
  char hdr[128];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '|u1', 'fortran_order': False, 'shape': (%llu,), }",
                   (unsigned long long)len);
  int total = 6 + 2 + 2 + n + 1;
  int pad = (64 - total % 64) % 64;
  for (int i = 0; i < pad; i++) hdr[n++] = ' ';
  hdr[n++] = '\n';
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff),
                           (unsigned char)(n >> 8)};
  return fwrite(pre, sizeof pre, 1, f) == 1 && fwrite(hdr, (size_t)n, 1, f) == 1;
}

static int mg_write_cagra_rank(FILE* f, const ivf_impl* impl, DLDataType dt, int padded,
                               int64_t degree)
{
  char* buf = NULL;
  size_t len = 0;
  FILE* mf = open_memstream(&buf, &len);
  if (!mf) return 0;
  int ok = ivf_write(mf, impl);
  if (fclose(mf) != 0) ok = 0;
  char d[4];
  mg_descr(dt, d);
  ok = ok && fwrite(d, 4, 1, f) == 1 && ivf_npy_write(f, "<i4", MG_CAGRA_VERSION, 4);
#if DBL_RELEASE >= 2608
  /* serialized_dataset_kind: device_padded 1, device_standard 2 */
  ok = ok && ivf_npy_write(f, "<u4", padded ? 1 : 2, 4);
#endif
  (void)padded;
  ok = ok && ivf_npy_write(f, "<u4", (uint64_t)impl->size, 4) &&
       ivf_npy_write(f, "<u4", (uint64_t)impl->dim, 4) &&
       ivf_npy_write(f, "<u4", (uint64_t)degree, 4) &&
       ivf_npy_write(f, "<i4", (uint64_t)(uint32_t)impl->metric, 4) && mg_npy_bytes(f, len) &&
       fwrite(buf, 1, len, f) == len;
  free(buf);
  return ok;
}

static ivf_impl* mg_read_cagra_rank(FILE* f, DLDataType dt, uint64_t* kind_out,
                                    int64_t* degree_out)
{
  char d[4], want[4];
  mg_descr(dt, want);
  uint64_t ver = 0, kind = 0, size = 0, dim = 0, degree = 0, metric = 0;
  if (fread(d, 4, 1, f) != 1 || memcmp(d, want, 4) != 0) return NULL;
  if (!ivf_npy_read(f, 4, &ver) || ver != MG_CAGRA_VERSION) return NULL;
#if DBL_RELEASE >= 2608
  if (!ivf_npy_read(f, 4, &kind) || kind == 0 || kind > 4) return NULL;
#endif
  if (!ivf_npy_read(f, 4, &size) || !ivf_npy_read(f, 4, &dim) || !ivf_npy_read(f, 4, &degree) ||
      !ivf_npy_read(f, 4, &metric)) {
    return NULL;
  }
  *kind_out = kind;
  *degree_out = (int64_t)degree;
  unsigned char pre[10];
  char hdr[256];
  if (fread(pre, sizeof pre, 1, f) != 1 || pre[0] != 0x93 || memcmp(pre + 1, "NUMPY", 5) != 0) {
    return NULL;
  }
  size_t hlen = (size_t)(pre[8] | (pre[9] << 8));
  if (hlen >= sizeof hdr || fread(hdr, 1, hlen, f) != hlen) return NULL;
  hdr[hlen] = 0;
  unsigned long long len = 0;
  const char* sh = strstr(hdr, "'shape': (");
  if (!strstr(hdr, "'descr': '|u1'") || !sh || sscanf(sh, "'shape': (%llu,)", &len) != 1 ||
      len == 0 || len > (1ULL << 34)) {
    return NULL;
  }
  ivf_impl* impl = mg_read_rank_bytes(f, len);
  if (impl && ((uint64_t)impl->size != size || (uint64_t)impl->dim != dim)) {
    ivf_free(impl);
    impl = NULL;
  }
  return impl;
}

static cuvsError_t mg_serialize(cuvsResources_t res, int algo, mg_handle* index,
                                const char* filename, const char* fn)
{
  dbl_res* r;
  TRY(mg_res(res, fn, &r));
  cuvsError_t st = CUVS_SUCCESS;
  do {
    if ((st = mg_handle_ok(index, fn)) != CUVS_SUCCESS) break;
    if (!mg_dtype_ok(index->dtype)) {
      st = RAFT_FAIL("Unsupported index dtype: %d and bits: %d", (int)index->dtype.code,
                     (int)index->dtype.bits);
      break;
    }
    mg_impl* m;
    if ((st = mg_impl_of(index, algo, fn, &m)) != CUVS_SUCCESS) break;
    if (!filename) {
      dbl_violation("NULL filename (the real library would crash)");
      st = RAFT_FAIL("cuvsdouble: NULL filename");
      break;
    }
    FILE* f = fopen(filename, "wb");
    if (!f) {
      st = RAFT_FAIL("Cannot open file %s", filename);
      break;
    }
    char d[4];
    mg_descr(m->dtype, d);
    int ok = fwrite(d, 4, 1, f) == 1 && ivf_npy_write(f, "<i4", (uint64_t)m->mode, 4) &&
             ivf_npy_write(f, "<i4", (uint64_t)m->nranks, 4);
    for (int k = 0; ok && k < m->nranks; k++) {
      pthread_rwlock_rdlock(&m->rank[k]->lock);
      ok = algo == MG_CAGRA ? mg_write_cagra_rank(f, m->rank[k], m->dtype, m->padded, m->degree[k])
                            : mg_write_rank(f, m->rank[k]);
      pthread_rwlock_unlock(&m->rank[k]->lock);
    }
    if (fclose(f) != 0) ok = 0;
    if (!ok) st = RAFT_FAIL("Error writing output %s", filename);
  } while (0);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* The C functions' prelude: the file's first 4 bytes, NumPy's dtype. */
static cuvsError_t mg_file_dtype(FILE* f, const char* filename, DLDataType* out)
{
  char d[4] = {0};
  if (fread(d, 4, 1, f) != 1) {
#if DBL_RELEASE >= 2608
    return RAFT_FAIL("Invalid or truncated index header in file %s", filename);
#else
    memset(d, 0, 4);
#endif
  }
  if (d[0] != '<' && d[0] != '>' && d[0] != '|' && d[0] != '=') {
    return RAFT_FAIL("Invalid typestr: unrecognized byteorder %c", d[0]);
  }
  int itemsize = atoi(d + 2);
  char kind = d[1];
  if (kind == 'f' && itemsize == 4) {
    *out = (DLDataType){kDLFloat, 32, 1};
  } else if (kind == 'e' && itemsize == 2) {
    *out = (DLDataType){kDLFloat, 16, 1};
  } else if (kind == 'i' && itemsize == 1) {
    *out = (DLDataType){kDLInt, 8, 1};
  } else if (kind == 'u' && itemsize == 1) {
    *out = (DLDataType){kDLUInt, 8, 1};
  } else {
    return RAFT_FAIL("Unsupported index dtype");
  }
  return CUVS_SUCCESS;
}

/* Distribute of a single-GPU CAGRA file of the double: the file is read by
 * the double's CAGRA deserializer on a resources handle of its own, and its
 * dataset copied into every rank (the metric taken as L2Expanded: the C API
 * has no metric getter). */
static cuvsError_t mg_cagra_file(const char* filename, mg_impl* m)
{
  cuvsResources_t tmp = 0;
  cuvsCagraIndex_t ci = NULL;
  DLManagedTensor dv;
  memset(&dv, 0, sizeof dv);
  int64_t n = 0, dim = 0;
#if DBL_RELEASE >= 2608
  cuvsDataset_t ds = NULL;
#endif
  cuvsError_t st = cuvsResourcesCreate(&tmp);
  if (st != CUVS_SUCCESS) return st;
  st = cuvsCagraIndexCreate(&ci);
  if (st == CUVS_SUCCESS) {
#if DBL_RELEASE >= 2608
    st = cuvsCagraDeserializeGraphAndDataset(tmp, filename, ci, &ds);
#else
    st = cuvsCagraDeserialize(tmp, filename, ci);
#endif
  }
  if (st == CUVS_SUCCESS) st = cuvsCagraIndexGetSize(ci, &n);
  if (st == CUVS_SUCCESS) st = cuvsCagraIndexGetDims(ci, &dim);
  if (st == CUVS_SUCCESS) st = cuvsCagraIndexGetDataset(ci, &dv);
  int64_t degree = 0;
  if (st == CUVS_SUCCESS) st = cuvsCagraIndexGetGraphDegree(ci, &degree);
  if (st == CUVS_SUCCESS && (!dv.dl_tensor.data || !dv.dl_tensor.shape || n < 1 || dim < 1)) {
    /* a graph-only file: the double's replicas are built from the rows */
    st = RAFT_FAIL("cuvsdouble: distributing a CAGRA index file without its dataset is not "
                   "modelled");
  }
  if (st == CUVS_SUCCESS) {
    const DLTensor* t = &dv.dl_tensor;
    /* 26.08 describes padded rows as [rows, row width] without strides */
    int64_t rs = t->strides ? t->strides[0] : (t->ndim == 2 ? t->shape[1] : dim);
    dbl_matrix data = {t->data, t->dtype, rs, 1, n, dim};
    m->dtype = (DLDataType){t->dtype.code, t->dtype.bits, 1};
    m->dim = dim;
    for (int k = 0; k < m->nranks && st == CUVS_SUCCESS; k++) {
      ivf_impl* impl = ivf_new(0, m->dtype, 0, 0, dim, 1);
      if (!impl || ivf_train(impl, &data, n, 1) != 0 || ivf_add(impl, &data, NULL) != 0) {
        ivf_free(impl);
        st = dbl_plain_fail("std::bad_alloc");
        break;
      }
      m->rank[k] = impl;
      m->degree[k] = degree;
    }
#if DBL_RELEASE >= 2608
    /* the layout whose deserialize accepts the file's dataset kind */
    m->padded = ds && ds->layout == CUVS_DATASET_LAYOUT_PADDED;
#endif
  }
  /* the failure's text (the CAGRA deserializer's reason, as the real
   * library's exception carries it) outlives the cleanup's calls, which
   * clear it */
  const char* text = st != CUVS_SUCCESS ? cuvsGetLastErrorText() : NULL;
  char* why = text ? strdup(text) : NULL;
  if (dv.deleter) dv.deleter(&dv);
  if (ci) cuvsCagraIndexDestroy(ci);
#if DBL_RELEASE >= 2608
  if (ds) cuvsDatasetDestroy(ds);
#endif
  cuvsResourcesDestroy(tmp);
  if (st != CUVS_SUCCESS) dbl_set_error(why);
  free(why);
  return st;
}

static cuvsError_t mg_load(cuvsResources_t res, int algo, const char* filename, mg_handle* index,
                           int distribute, const char* fn)
{
  dbl_res* r;
  TRY(mg_res(res, fn, &r));
  cuvsError_t st = CUVS_SUCCESS;
  FILE* f = NULL;
  mg_impl* m = NULL;
  do {
    if ((st = mg_handle_ok(index, fn)) != CUVS_SUCCESS) break;
    if (!filename) {
      dbl_violation("NULL filename (the real library would crash)");
      st = RAFT_FAIL("cuvsdouble: NULL filename");
      break;
    }
    f = fopen(filename, "rb");
    if (!f) {
      st = RAFT_FAIL("Cannot open file %s", filename);
      break;
    }
    if (distribute && algo == MG_CAGRA) {
      /* the double's single-GPU CAGRA files do not start with cuVS's NumPy
       * dtype: read through the double's own CAGRA deserializer instead */
      m = mg_new(algo, CUVS_NEIGHBORS_MG_REPLICATED, r->n_ranks, (DLDataType){0, 0, 1}, 0);
      if (!m) {
        st = dbl_plain_fail("std::bad_alloc");
        break;
      }
      st = mg_cagra_file(filename, m);
      if (st == CUVS_SUCCESS) {
        index->dtype.code = m->dtype.code;
        index->dtype.bits = m->dtype.bits;
      }
      break;
    }
    if (distribute && algo != MG_FLAT) {
      /* the double's single-GPU IVF-PQ files do not even start with
       * cuVS's NumPy dtype, and hold codes, not rows */
      st = RAFT_FAIL("cuvsdouble: distributing a single-GPU %s index file is not modelled",
                     mg_names[algo]);
      break;
    }
    DLDataType dt;
    if ((st = mg_file_dtype(f, filename, &dt)) != CUVS_SUCCESS) break;
    index->dtype.code = dt.code;
    index->dtype.bits = dt.bits; /* lanes stay as they were */
    if (distribute) {
      /* a single-GPU IVF-Flat file of the double (dbl_ivf_flat.c): .npy
       * version, size, dim, n_lists, metric and two flags, then the core */
      uint64_t ver = 0, v = 0;
      int ok = ivf_npy_read(f, 4, &ver);
      if (ok && ver != 4) {
        st = RAFT_FAIL("serialization version mismatch, expected %d, got %d ", 4, (int)ver);
        break;
      }
      ok = ok && ivf_npy_read(f, 8, &v) && ivf_npy_read(f, 4, &v) && ivf_npy_read(f, 4, &v) &&
           ivf_npy_read(f, 4, &v) && ivf_npy_read(f, 1, &v) && ivf_npy_read(f, 1, &v);
      long at = ok ? ftell(f) : -1;
      m = mg_new(algo, CUVS_NEIGHBORS_MG_REPLICATED, r->n_ranks, dt, 0);
      if (!m) {
        st = dbl_plain_fail("std::bad_alloc");
        break;
      }
      for (int k = 0; k < m->nranks && st == CUVS_SUCCESS; k++) {
        ivf_impl* impl = at >= 0 && fseek(f, at, SEEK_SET) == 0 ? ivf_read(f, 0) : NULL;
        if (!impl) {
          st = RAFT_FAIL("cuvsdouble: %s is not an IVF-Flat index file written by the test double",
                         filename);
          break;
        }
        impl->dtype = dt;
        m->rank[k] = impl;
        m->dim = impl->dim;
      }
      break;
    }
    uint64_t mode = 0, nranks = 0;
    if (!ivf_npy_read(f, 4, &mode) || !ivf_npy_read(f, 4, &nranks) || mode > 1) {
      st = RAFT_FAIL("cuvsdouble: %s is not a multi-GPU index file written by the test double",
                     filename);
      break;
    }
    if ((int)nranks != r->n_ranks) {
      st = RAFT_FAIL("Serialized index has %d ranks whereas NCCL clique has %d ranks", (int)nranks,
                     r->n_ranks);
      break;
    }
    m = mg_new(algo, (int)mode, (int)nranks, dt, 0);
    if (!m) {
      st = dbl_plain_fail("std::bad_alloc");
      break;
    }
    uint64_t kind0 = 0;
    for (int k = 0; k < m->nranks; k++) {
      uint64_t kind = 0;
      m->rank[k] = algo == MG_CAGRA ? mg_read_cagra_rank(f, dt, &kind, &m->degree[k])
                                    : mg_read_rank(f);
      if (!m->rank[k] || (k > 0 && m->rank[k]->dim != m->rank[0]->dim)) {
        st = RAFT_FAIL("cuvsdouble: %s is not a multi-GPU %s index file written by the test double",
                       filename, mg_names[algo]);
        break;
      }
#if DBL_RELEASE >= 2608
      /* Deserialize tries a device_padded index, then a device_standard
       * one: each wants every rank's serialized dataset kind to be its own */
      if (algo == MG_CAGRA) {
        if (k == 0) kind0 = kind;
        if (kind != kind0 || (kind != 1 && kind != 2)) {
          st = RAFT_FAIL("cagra::deserialize: serialized dataset kind %u does not match requested "
                         "kind %u",
                         (unsigned)kind, kind0 == 1 ? 1u : 2u);
          break;
        }
        m->padded = kind == 1;
      }
#endif
      (void)kind0;
      (void)kind;
      m->rank[k]->dtype = dt;
      m->dim = m->rank[k]->dim;
    }
    if (st == CUVS_SUCCESS && !dbl_at_end(f)) { /* one checksum trailer is read past, as cuVS does */
      st = RAFT_FAIL("cuvsdouble: trailing bytes in %s", filename);
    }
  } while (0);
  if (f) fclose(f);
  if (st != CUVS_SUCCESS) {
    if (m) mg_free(m);
  } else {
    mg_install(index, m);
  }
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

#define MG_FILES(Algo, algo_id)                                                                  \
  DBL_API cuvsError_t cuvsMultiGpu##Algo##Serialize(cuvsResources_t res,                        \
                                                     cuvsMultiGpu##Algo##Index_t index,          \
                                                     const char* filename)                       \
  {                                                                                              \
    DBL_ENTER(cuvsMultiGpu##Algo##Serialize);                                                    \
    return mg_serialize(res, algo_id, (mg_handle*)index, filename,                               \
                        "cuvsMultiGpu" #Algo "Serialize");                                       \
  }                                                                                              \
  DBL_API cuvsError_t cuvsMultiGpu##Algo##Deserialize(cuvsResources_t res, const char* filename, \
                                                       cuvsMultiGpu##Algo##Index_t index)        \
  {                                                                                              \
    DBL_ENTER(cuvsMultiGpu##Algo##Deserialize);                                                  \
    return mg_load(res, algo_id, filename, (mg_handle*)index, 0,                                 \
                   "cuvsMultiGpu" #Algo "Deserialize");                                          \
  }                                                                                              \
  DBL_API cuvsError_t cuvsMultiGpu##Algo##Distribute(cuvsResources_t res, const char* filename,  \
                                                      cuvsMultiGpu##Algo##Index_t index)         \
  {                                                                                              \
    DBL_ENTER(cuvsMultiGpu##Algo##Distribute);                                                   \
    return mg_load(res, algo_id, filename, (mg_handle*)index, 1,                                 \
                   "cuvsMultiGpu" #Algo "Distribute");                                           \
  }

MG_FILES(Cagra, MG_CAGRA)
MG_FILES(IvfFlat, MG_FLAT)
MG_FILES(IvfPq, MG_PQ)

/* ---- 26.08: UpdateDataset ---- */
#if DBL_RELEASE >= 2608
DBL_API cuvsError_t cuvsMultiGpuCagraUpdateDataset(cuvsResources_t res,
                                                   cuvsDataset_t device_padded_dataset,
                                                   cuvsMultiGpuCagraIndex_t index)
{
  DBL_ENTER(cuvsMultiGpuCagraUpdateDataset);
  const char* fn = "cuvsMultiGpuCagraUpdateDataset";
  EXPECTS(index != NULL, "cuvsMultiGpuCagraUpdateDataset: null index handle");
  dbl_res* r;
  TRY(mg_res(res, fn, &r));
  cuvsError_t st = CUVS_SUCCESS;
  do {
    if ((st = mg_handle_ok((mg_handle*)index, fn)) != CUVS_SUCCESS) break;
    if (index->addr == 0) {
      st = RAFT_FAIL("cuvsMultiGpuCagraUpdateDataset: null index storage");
      break;
    }
    if (device_padded_dataset == NULL) {
      st = RAFT_FAIL("cuvsMultiGpuCagraUpdateDataset: null dataset view");
      break;
    }
    dbl_ds* s;
    if ((st = dbl_ds_get(device_padded_dataset, &s)) != CUVS_SUCCESS) break;
    if (device_padded_dataset->addr == 0 || !s) {
      st = RAFT_FAIL("cuvsMultiGpuCagraUpdateDataset: null dataset view storage");
      break;
    }
    if (device_padded_dataset->mem_type != CUVS_DATASET_MEM_TYPE_DEVICE ||
        device_padded_dataset->layout != CUVS_DATASET_LAYOUT_PADDED) {
      st = RAFT_FAIL("cuvsMultiGpuCagraUpdateDataset: dataset view must be device padded");
      break;
    }
    if (index->dtype.code != device_padded_dataset->dtype.code ||
        index->dtype.bits != device_padded_dataset->dtype.bits) {
      st = RAFT_FAIL("cuvsMultiGpuCagraUpdateDataset: dtype mismatch between index and dataset");
      break;
    }
    mg_impl* m;
    if ((st = mg_impl_of((mg_handle*)index, MG_CAGRA, fn, &m)) != CUVS_SUCCESS) break;
    int64_t need = 0;
    for (int k = 0; k < m->nranks; k++) {
      int64_t rows = m->rank[k]->size;
      if (m->mode == CUVS_NEIGHBORS_MG_SHARDED) {
        need += rows;
      } else if (rows > need) {
        need = rows;
      }
    }
    if (s->n < need || s->dim != m->dim) {
      /* cuVS copies each rank's rows from the dataset without checking */
      dbl_violation("%s with a %lld x %lld dataset for an index of %lld rows x %lld: the real "
                    "library reads past it",
                    fn, (long long)s->n, (long long)s->dim, (long long)need, (long long)m->dim);
      st = RAFT_FAIL("cuvsdouble: the dataset does not cover the index's rows");
      break;
    }
    size_t es = dl_elem_size(m->dtype);
    int64_t offset = 0;
    float* row = malloc((size_t)m->dim * sizeof(float));
    if (!row) {
      st = dbl_plain_fail("std::bad_alloc");
      break;
    }
    for (int k = 0; k < m->nranks; k++) {
      ivf_impl* ri = m->rank[k];
      pthread_rwlock_wrlock(&ri->lock);
      for (int64_t at = 0; at < ri->size; at++) {
        dl_load_row(s->data, m->dtype, s->stride, 1, offset + at, m->dim, row);
        memcpy(ri->vecs + (size_t)at * (size_t)m->dim, row, (size_t)m->dim * sizeof(float));
      }
      pthread_rwlock_unlock(&ri->lock);
      if (m->mode == CUVS_NEIGHBORS_MG_SHARDED) offset += ri->size;
    }
    m->padded = 1; /* a device_standard index is attached the padded dataset */
    (void)es;
    free(row);
  } while (0);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- 26.08: multi-GPU k-means (c/src/cluster/mg_kmeans.cpp) ----
 * Lloyd's iterations on the host from the given centroids (init Array) or
 * from evenly spaced rows (the double's stand-in for k-means++ and Random);
 * float32 or float64, optional per-row weights. The inertia is the weighted
 * sum of squared distances to the nearest centroid. */
static cuvsError_t km_host_tensor(DLManagedTensor* t, const char* name)
{
  EXPECTS(t != NULL, "%s must not be NULL", name);
  const DLTensor* d = &t->dl_tensor;
  EXPECTS(d->data != NULL, "%s data must not be NULL", name);
  EXPECTS(d->shape != NULL, "%s shape must not be NULL", name);
  EXPECTS(dl_host_compat(d), "%s must be host accessible", name);
  EXPECTS(d->device.device_type != kDLCUDA, "%s must reside in host memory", name);
  EXPECTS(dl_c_contig(d), "%s must be C-contiguous", name);
  return CUVS_SUCCESS;
}

static double km_get(const void* p, int bits, int64_t i)
{
  return bits == 64 ? ((const double*)p)[i] : (double)((const float*)p)[i];
}

static void km_set(void* p, int bits, int64_t i, double v)
{
  if (bits == 64) {
    ((double*)p)[i] = v;
  } else {
    ((float*)p)[i] = (float)v;
  }
}

DBL_API cuvsError_t cuvsMultiGpuKMeansFit(cuvsResources_t res, cuvsKMeansParams_t params,
                                          DLManagedTensor* X, DLManagedTensor* sample_weight,
                                          DLManagedTensor* centroids, double* inertia, int* n_iter)
{
  DBL_ENTER(cuvsMultiGpuKMeansFit);
  EXPECTS(res != 0, "res must not be NULL");
  EXPECTS(params != NULL, "params must not be NULL");
  EXPECTS(inertia != NULL, "inertia must not be NULL");
  EXPECTS(n_iter != NULL, "n_iter must not be NULL");
  EXPECTS(params->n_clusters > 0, "n_clusters must be positive");
  EXPECTS(!params->hierarchical, "hierarchical kmeans is not supported by SNMG kmeans");
  TRY(km_host_tensor(X, "X"));
  TRY(km_host_tensor(centroids, "centroids"));
  const DLTensor* x = &X->dl_tensor;
  const DLTensor* c = &centroids->dl_tensor;
  EXPECTS(x->ndim == 2, "X must be a 2D tensor");
  EXPECTS(c->ndim == 2, "centroids must be a 2D tensor");
  EXPECTS(x->shape[0] > 0, "X must have at least one row");
  EXPECTS(x->shape[1] > 0, "X must have at least one column");
  EXPECTS(c->shape[0] == params->n_clusters, "centroids row count must equal n_clusters");
  EXPECTS(c->shape[1] == x->shape[1], "centroids column count must equal X column count");
  EXPECTS(x->dtype.code == kDLFloat && (x->dtype.bits == 32 || x->dtype.bits == 64),
          "X must have dtype float32 or float64");
  EXPECTS(x->dtype.lanes == 1, "X must have one DLPack lane");
  EXPECTS(c->dtype.code == x->dtype.code && c->dtype.bits == x->dtype.bits &&
            c->dtype.lanes == x->dtype.lanes,
          "centroids dtype must match X dtype");
  const DLTensor* w = NULL;
  if (sample_weight) {
    TRY(km_host_tensor(sample_weight, "sample_weight"));
    w = &sample_weight->dl_tensor;
    EXPECTS(w->ndim == 1, "sample_weight must be a 1D tensor");
    EXPECTS(w->shape[0] == x->shape[0], "sample_weight length must equal X row count");
    EXPECTS(w->dtype.code == x->dtype.code && w->dtype.bits == x->dtype.bits &&
              w->dtype.lanes == x->dtype.lanes,
            "sample_weight dtype must match X dtype");
  }
  dbl_res* r;
  TRY(mg_res(res, "cuvsMultiGpuKMeansFit", &r));
  int64_t n = x->shape[0], dim = x->shape[1], kc = params->n_clusters;
  int bits = x->dtype.bits;
  cuvsError_t st = CUVS_SUCCESS;
  double* ctr = malloc((size_t)(kc * dim) * sizeof(double));
  double* sum = malloc((size_t)(kc * dim) * sizeof(double));
  double* wsum = malloc((size_t)kc * sizeof(double));
  if (!ctr || !sum || !wsum) {
    st = dbl_plain_fail("std::bad_alloc");
  } else if (kc > n) {
    st = RAFT_FAIL("n_samples (%lld) must be >= n_clusters (%lld)", (long long)n, (long long)kc);
  } else {
    for (int64_t j = 0; j < kc; j++) {
      int64_t row = params->init == Array ? -1 : (j * n) / kc;
      for (int64_t d = 0; d < dim; d++) {
        ctr[j * dim + d] = row < 0 ? km_get(c->data, bits, j * dim + d)
                                   : km_get(x->data, bits, row * dim + d);
      }
    }
    double prev = INFINITY, cur = 0;
    int it = 0;
    int max_iter = params->max_iter > 0 ? params->max_iter : 1;
    for (it = 1; it <= max_iter; it++) {
      memset(sum, 0, (size_t)(kc * dim) * sizeof(double));
      memset(wsum, 0, (size_t)kc * sizeof(double));
      cur = 0;
      for (int64_t i = 0; i < n; i++) {
        double best = INFINITY;
        int64_t bj = 0;
        for (int64_t j = 0; j < kc; j++) {
          double s = 0;
          for (int64_t d = 0; d < dim; d++) {
            double t = km_get(x->data, bits, i * dim + d) - ctr[j * dim + d];
            s += t * t;
          }
          if (s < best) best = s, bj = j;
        }
        double wt = w ? km_get(w->data, bits, i) : 1.0;
        cur += wt * best;
        wsum[bj] += wt;
        for (int64_t d = 0; d < dim; d++) sum[bj * dim + d] += wt * km_get(x->data, bits, i * dim + d);
      }
      for (int64_t j = 0; j < kc; j++) {
        if (wsum[j] <= 0) continue; /* an empty cluster keeps its centroid */
        for (int64_t d = 0; d < dim; d++) ctr[j * dim + d] = sum[j * dim + d] / wsum[j];
      }
      if (fabs(prev - cur) <= params->tol * (cur > 0 ? cur : 1)) break;
      prev = cur;
    }
    if (it > max_iter) it = max_iter;
    /* the inertia of the final centroids */
    cur = 0;
    for (int64_t i = 0; i < n; i++) {
      double best = INFINITY;
      for (int64_t j = 0; j < kc; j++) {
        double s = 0;
        for (int64_t d = 0; d < dim; d++) {
          double t = km_get(x->data, bits, i * dim + d) - ctr[j * dim + d];
          s += t * t;
        }
        if (s < best) best = s;
      }
      cur += (w ? km_get(w->data, bits, i) : 1.0) * best;
    }
    for (int64_t i = 0; i < kc * dim; i++) km_set(c->data, bits, i, ctr[i]);
    *inertia = cur;
    *n_iter = it;
  }
  free(ctr);
  free(sum);
  free(wsum);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
#endif
