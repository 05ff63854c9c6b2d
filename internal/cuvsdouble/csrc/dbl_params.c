/*
 * cuvsdouble parameter structs: CAGRA (index, compression, ACE, extend,
 * search), IVF-PQ (index, search) and NN-Descent (index). Create fills in
 * the values cuVS v26.06.00 uses (its C sources and the C++ defaults they
 * copy); CAGRA index-params Destroy frees graph_build_params by build_algo
 * exactly as cuVS does, and records a violation wherever cuVS's behaviour
 * would be undefined or leak.
 */
#include "dbl.h"

#include <math.h>

static const char* kind_name(int kind)
{
  switch (kind) {
    case K_CAGRA_IVFPQ_PARAMS: return "cuvsIvfPqParams (from cuvsCagraIndexParamsCreate)";
    case K_ACE_PARAMS: return "cuvsAceParams";
    case K_IVFPQ_INDEX_PARAMS: return "cuvsIvfPqIndexParams";
    case K_IVFPQ_SEARCH_PARAMS: return "cuvsIvfPqSearchParams";
    case K_NND_INDEX_PARAMS: return "cuvsNNDescentIndexParams";
    case K_CAGRA_COMPRESSION_PARAMS: return "cuvsCagraCompressionParams";
    case K_CAGRA_INDEX_PARAMS: return "cuvsCagraIndexParams";
    case K_CAGRA_SEARCH_PARAMS: return "cuvsCagraSearchParams";
    case K_CAGRA_EXTEND_PARAMS: return "cuvsCagraExtendParams";
    default: return "object";
  }
}

static cuvsError_t out_null(void)
{
  dbl_violation("NULL out-parameter (the real library would crash)");
  return RAFT_FAIL("cuvsdouble: NULL out-parameter");
}

/* Destroy of a plain params struct: `delete params` in cuVS (NULL is fine). */
/* Plain params structs destroyed lately, held in quarantine: passing one
 * again is a use after free, which dbl_check_plain_params reports. Their
 * memory is freed only when they leave the quarantine, so that no other
 * allocation (the caller's own params memory, say) can get one of these
 * addresses while it is listed: a match is always a destroyed struct. */
#define RECENT_DESTROYED 256
static void* g_destroyed[RECENT_DESTROYED];
static unsigned g_destroyed_next;
static pthread_mutex_t g_destroyed_mu = PTHREAD_MUTEX_INITIALIZER;

static void quarantine(void* p)
{
  pthread_mutex_lock(&g_destroyed_mu);
  unsigned i = g_destroyed_next++ % RECENT_DESTROYED;
  void* out = g_destroyed[i];
  g_destroyed[i] = p;
  pthread_mutex_unlock(&g_destroyed_mu);
  free(out);
}

static int recently_destroyed(const void* p)
{
  int found = 0;
  pthread_mutex_lock(&g_destroyed_mu);
  for (unsigned i = 0; i < RECENT_DESTROYED && !found; i++) found = g_destroyed[i] == p;
  pthread_mutex_unlock(&g_destroyed_mu);
  return found;
}

/* Search and extend params are plain structs that cuVS only reads during
 * the call: the real library accepts one the caller made (a Go value, say)
 * as well as one from its Create function. NULL, another kind of object, or
 * a struct destroyed lately are refused. */
DBL_HIDDEN cuvsError_t dbl_check_plain_params(const void* p, int kind)
{
  if (p == NULL) {
    dbl_violation("NULL %s (the real library would crash)", kind_name(kind));
    return RAFT_FAIL("cuvsdouble: NULL %s", kind_name(kind));
  }
  int k = dbl_reg_find(p, NULL);
  if (k == kind) return CUVS_SUCCESS;
  if (k >= 0) {
    dbl_violation("a %s passed where a %s is expected", kind_name(k), kind_name(kind));
    return RAFT_FAIL("cuvsdouble: invalid %s %p", kind_name(kind), p);
  }
  if (recently_destroyed(p)) {
    dbl_violation("%s %p used after cuvs...Destroy freed it", kind_name(kind), p);
    return RAFT_FAIL("cuvsdouble: destroyed %s %p", kind_name(kind), p);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t plain_destroy(void* p, int kind)
{
  if (p == NULL) return dbl_ok();
  int actual = -1;
  int rc = dbl_reg_remove(p, kind, NULL, &actual);
  if (rc != 0) {
    if (rc == -2) {
      dbl_violation("destroying a %s as a %s (undefined behaviour in the real library)",
                    kind_name(actual), kind_name(kind));
    } else {
      dbl_violation("destroying an invalid or already destroyed %s %p", kind_name(kind), p);
    }
    return RAFT_FAIL("cuvsdouble: invalid %s %p", kind_name(kind), p);
  }
  quarantine(p);
  return dbl_ok();
}

/* Validates a params pointer handed to a build/search/extend call. */
DBL_HIDDEN cuvsError_t dbl_check_params(const void* p, int kind)
{
  int k = dbl_reg_find(p, NULL);
  if (k != kind) {
    if (k >= 0) {
      dbl_violation("a %s passed where a %s is expected", kind_name(k), kind_name(kind));
    } else {
      dbl_violation("invalid or destroyed %s %p (the real library would crash)", kind_name(kind),
                    p);
    }
    return RAFT_FAIL("cuvsdouble: invalid %s %p", kind_name(kind), p);
  }
  return CUVS_SUCCESS;
}

/* ---- CAGRA index params ---- */

DBL_API cuvsError_t cuvsCagraIndexParamsCreate(cuvsCagraIndexParams_t* params)
{
  DBL_ENTER(cuvsCagraIndexParamsCreate);
  if (!params) return out_null();
  struct cuvsCagraIndexParams* p = calloc(1, sizeof *p);
  struct cuvsIvfPqParams* g = calloc(1, sizeof *g);
  if (!p || !g) {
    free(p), free(g);
    return dbl_plain_fail("std::bad_alloc");
  }
  p->metric = L2Expanded;
  p->intermediate_graph_degree = 128;
  p->graph_degree = 64;
  p->build_algo = IVF_PQ;
  p->nn_descent_niter = 20;
  DBL_R2606(p->compression = NULL;) /* 26.08's params have no compression member */
  g->ivf_pq_build_params = NULL;
  g->ivf_pq_search_params = NULL;
  g->refinement_rate = 1;
  p->graph_build_params = g;
  dbl_reg_add(p, K_CAGRA_INDEX_PARAMS, sizeof *p);
  dbl_reg_add(g, K_CAGRA_IVFPQ_PARAMS, sizeof *g);
  *params = p;
  return dbl_ok();
}

static void free_build_dir(const char* dir)
{
  if (!dir) return;
  if (dbl_reg_remove((void*)dir, K_ACE_BUILD_DIR, NULL, NULL) != 0) {
    /* not ours: cuVS free()s it all the same, so it must be malloc'd */
  }
  free((void*)dir);
}

/* Frees an object cuVS's Destroy would delete as `as_kind`, recording a
 * violation when it is really something else. */
static void free_graph_build_params(void* g, int as_kind)
{
  dbl_entry e;
  int kind = dbl_reg_find(g, &e);
  if (kind < 0) {
    dbl_violation("cuvsCagraIndexParamsDestroy deletes graph_build_params %p as a %s, but the "
                  "library did not allocate it (undefined behaviour in the real library; the "
                  "double leaves it alone)",
                  g, kind_name(as_kind));
    return;
  }
  if (kind != as_kind) {
    if (as_kind == K_ACE_PARAMS && kind == K_CAGRA_IVFPQ_PARAMS) {
      dbl_violation("cuvsCagraIndexParamsDestroy with build_algo ACE while graph_build_params "
                    "still holds the cuvsIvfPqParams made by cuvsCagraIndexParamsCreate: the "
                    "real library reads it as cuvsAceParams and free()s a pointer field of it as "
                    "build_dir (undefined behaviour)");
    } else {
      dbl_violation("cuvsCagraIndexParamsDestroy deletes a %s as a %s (undefined behaviour in the "
                    "real library)",
                    kind_name(kind), kind_name(as_kind));
    }
  }
  /* free it as what it really is, so counters stay meaningful */
  if (kind == K_ACE_PARAMS) free_build_dir(((struct cuvsAceParams*)g)->build_dir);
  dbl_reg_remove(g, kind, NULL, NULL);
  free(g);
}

DBL_API cuvsError_t cuvsCagraIndexParamsDestroy(cuvsCagraIndexParams_t params)
{
  DBL_ENTER(cuvsCagraIndexParamsDestroy);
  if (dbl_reg_find(params, NULL) != K_CAGRA_INDEX_PARAMS) {
    dbl_violation("destroying an invalid or already destroyed cuvsCagraIndexParams_t %p (the real "
                  "library would crash)",
                  (void*)params);
    return RAFT_FAIL("cuvsdouble: invalid cuvsCagraIndexParams_t %p", (void*)params);
  }
  void* g = params->graph_build_params;
  if (g != NULL) {
    switch (params->build_algo) {
      case IVF_PQ: free_graph_build_params(g, K_CAGRA_IVFPQ_PARAMS); break;
      case ACE: free_graph_build_params(g, K_ACE_PARAMS); break;
      default: {
        /* AUTO_SELECT, NN_DESCENT, ITERATIVE_CAGRA_SEARCH (or an unknown
         * value): cuVS frees nothing. */
        int kind = dbl_reg_find(g, NULL);
        if (kind == K_CAGRA_IVFPQ_PARAMS || kind == K_ACE_PARAMS) {
          dbl_violation("cuvsCagraIndexParamsDestroy with build_algo %d leaks graph_build_params "
                        "(a %s): cuVS frees it only for IVF_PQ and ACE",
                        (int)params->build_algo, kind_name(kind));
        }
        break;
      }
    }
  }
  dbl_reg_remove(params, K_CAGRA_INDEX_PARAMS, NULL, NULL);
  free(params);
  return dbl_ok();
}

/* ---- compression, ACE, extend, search ---- */

DBL_API cuvsError_t cuvsCagraCompressionParamsCreate(cuvsCagraCompressionParams_t* params)
{
  DBL_ENTER(cuvsCagraCompressionParamsCreate);
  if (!params) return out_null();
  struct cuvsCagraCompressionParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->pq_bits = 8;
  p->pq_dim = 0;
  p->vq_n_centers = 0;
  p->kmeans_n_iters = 25;
  p->vq_kmeans_trainset_fraction = 0;
  p->pq_kmeans_trainset_fraction = 0;
  dbl_reg_add(p, K_CAGRA_COMPRESSION_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsCagraCompressionParamsDestroy(cuvsCagraCompressionParams_t params)
{
  DBL_ENTER(cuvsCagraCompressionParamsDestroy);
  return plain_destroy(params, K_CAGRA_COMPRESSION_PARAMS);
}

DBL_API cuvsError_t cuvsAceParamsCreate(cuvsAceParams_t* params)
{
  DBL_ENTER(cuvsAceParamsCreate);
  if (!params) return out_null();
  struct cuvsAceParams* p = calloc(1, sizeof *p);
  char* dir = strdup("/tmp/ace_build");
  if (!p || !dir) {
    free(p), free(dir);
    return dbl_plain_fail("std::bad_alloc");
  }
  p->npartitions = 0;
  p->ef_construction = 120;
  p->build_dir = dir;
  p->use_disk = false;
  p->max_host_memory_gb = 0;
  p->max_gpu_memory_gb = 0;
  dbl_reg_add(dir, K_ACE_BUILD_DIR, strlen(dir) + 1);
  dbl_reg_add(p, K_ACE_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsAceParamsDestroy(cuvsAceParams_t params)
{
  DBL_ENTER(cuvsAceParamsDestroy);
  if (params == NULL) return dbl_ok();
  int actual = -1;
  int rc = dbl_reg_remove(params, K_ACE_PARAMS, NULL, &actual);
  if (rc != 0) {
    if (rc == -2) {
      dbl_violation("cuvsAceParamsDestroy of a %s (undefined behaviour in the real library)",
                    kind_name(actual));
    } else {
      dbl_violation("destroying an invalid or already destroyed cuvsAceParams_t %p",
                    (void*)params);
    }
    return RAFT_FAIL("cuvsdouble: invalid cuvsAceParams_t %p", (void*)params);
  }
  free_build_dir(params->build_dir);
  free(params);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsCagraExtendParamsCreate(cuvsCagraExtendParams_t* params)
{
  DBL_ENTER(cuvsCagraExtendParamsCreate);
  if (!params) return out_null();
  struct cuvsCagraExtendParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->max_chunk_size = 0;
  dbl_reg_add(p, K_CAGRA_EXTEND_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsCagraExtendParamsDestroy(cuvsCagraExtendParams_t params)
{
  DBL_ENTER(cuvsCagraExtendParamsDestroy);
  return plain_destroy(params, K_CAGRA_EXTEND_PARAMS);
}

DBL_API cuvsError_t cuvsCagraSearchParamsCreate(cuvsCagraSearchParams_t* params)
{
  DBL_ENTER(cuvsCagraSearchParamsCreate);
  if (!params) return out_null();
  struct cuvsCagraSearchParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  /* fields cuVS leaves out of its designated initializer are zero:
   * max_queries, max_iterations, algo (SINGLE_CTA), team_size, min_iterations,
   * thread_block_size, hashmap_mode (HASH), hashmap_min_bitlen */
  p->itopk_size = 64;
  p->search_width = 1;
  p->hashmap_max_fill_rate = 0.5f;
  p->num_random_samplings = 1;
  p->rand_xor_mask = 0x128394;
  p->persistent = false;
  p->persistent_lifetime = 2;
  p->persistent_device_usage = 1.0f;
  dbl_reg_add(p, K_CAGRA_SEARCH_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsCagraSearchParamsDestroy(cuvsCagraSearchParams_t params)
{
  DBL_ENTER(cuvsCagraSearchParamsDestroy);
  return plain_destroy(params, K_CAGRA_SEARCH_PARAMS);
}

/* ---- IVF-PQ and NN-Descent params (CAGRA's graph-build settings) ---- */

DBL_API cuvsError_t cuvsIvfPqIndexParamsCreate(cuvsIvfPqIndexParams_t* params)
{
  DBL_ENTER(cuvsIvfPqIndexParamsCreate);
  if (!params) return out_null();
  struct cuvsIvfPqIndexParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->metric = L2Expanded;
  p->metric_arg = 2.0f;
  p->add_data_on_build = true;
  p->n_lists = 1024;
  p->kmeans_n_iters = 20;
  p->kmeans_trainset_fraction = 0.5;
  p->pq_bits = 8;
  p->pq_dim = 0;
  p->codebook_kind = CUVS_IVF_PQ_CODEBOOK_GEN_PER_SUBSPACE;
  p->force_random_rotation = false;
  p->conservative_memory_allocation = false;
  p->max_train_points_per_pq_code = 256;
  p->codes_layout = CUVS_IVF_PQ_LIST_LAYOUT_INTERLEAVED;
  dbl_reg_add(p, K_IVFPQ_INDEX_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfPqIndexParamsDestroy(cuvsIvfPqIndexParams_t params)
{
  DBL_ENTER(cuvsIvfPqIndexParamsDestroy);
  return plain_destroy(params, K_IVFPQ_INDEX_PARAMS);
}

DBL_API cuvsError_t cuvsIvfPqSearchParamsCreate(cuvsIvfPqSearchParams_t* params)
{
  DBL_ENTER(cuvsIvfPqSearchParamsCreate);
  if (!params) return out_null();
  struct cuvsIvfPqSearchParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->n_probes = 20;
  p->lut_dtype = DBL_CUDA_R_32F;
  p->internal_distance_dtype = DBL_CUDA_R_32F;
  p->coarse_search_dtype = DBL_CUDA_R_32F;
  p->max_internal_batch_size = 4096;
  p->preferred_shmem_carveout = 1.0;
  dbl_reg_add(p, K_IVFPQ_SEARCH_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfPqSearchParamsDestroy(cuvsIvfPqSearchParams_t params)
{
  DBL_ENTER(cuvsIvfPqSearchParamsDestroy);
  return plain_destroy(params, K_IVFPQ_SEARCH_PARAMS);
}

DBL_API cuvsError_t cuvsNNDescentIndexParamsCreate(cuvsNNDescentIndexParams_t* params)
{
  DBL_ENTER(cuvsNNDescentIndexParamsCreate);
  if (!params) return out_null();
  struct cuvsNNDescentIndexParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->metric = L2Expanded;
  p->metric_arg = 2.0f;
  p->graph_degree = 64;
  p->intermediate_graph_degree = 96; /* 1.5 * graph_degree */
  p->max_iterations = 20;
  p->termination_threshold = 0.0001f;
  p->return_distances = true;
  p->dist_comp_dtype = NND_DIST_COMP_AUTO;
  dbl_reg_add(p, K_NND_INDEX_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsNNDescentIndexParamsDestroy(cuvsNNDescentIndexParams_t params)
{
  DBL_ENTER(cuvsNNDescentIndexParamsDestroy);
  return plain_destroy(params, K_NND_INDEX_PARAMS);
}

/* ---- graph_build_params as a build reads it ---- */

static cuvsError_t check_optional(const void* p, int kind, const char* field)
{
  if (!p) return CUVS_SUCCESS;
  int k = dbl_reg_find(p, NULL);
  if (k >= 0 && k != kind) {
    dbl_violation("%s points to a %s, not a %s", field, kind_name(k), kind_name(kind));
    return RAFT_FAIL("cuvsdouble: %s has the wrong type", field);
  }
  /* k < 0: memory of the caller's own, which cuVS reads as is */
  return CUVS_SUCCESS;
}

/* What _set_graph_build_params reads, checked: the object graph_build_params
 * points to must be of the type build_algo implies. */
DBL_HIDDEN cuvsError_t dbl_check_graph_build_params(cuvsCagraIndexParams_t p)
{
  void* g = p->graph_build_params;
  if (!g) return CUVS_SUCCESS;
  int k = dbl_reg_find(g, NULL);
  switch (p->build_algo) {
    case IVF_PQ: {
      if (k >= 0 && k != K_CAGRA_IVFPQ_PARAMS) {
        dbl_violation("build_algo IVF_PQ but graph_build_params is a %s (the real library reads it "
                      "as cuvsIvfPqParams)",
                      kind_name(k));
        return RAFT_FAIL("cuvsdouble: graph_build_params does not match build_algo IVF_PQ");
      }
      struct cuvsIvfPqParams* ip = g;
      TRY(check_optional(ip->ivf_pq_build_params, K_IVFPQ_INDEX_PARAMS, "ivf_pq_build_params"));
      TRY(check_optional(ip->ivf_pq_search_params, K_IVFPQ_SEARCH_PARAMS, "ivf_pq_search_params"));
      return CUVS_SUCCESS;
    }
    case ACE: {
      if (k >= 0 && k != K_ACE_PARAMS) {
        dbl_violation("build_algo ACE but graph_build_params is a %s (the real library reads it as "
                      "cuvsAceParams: undefined behaviour)",
                      kind_name(k));
        return RAFT_FAIL("cuvsdouble: graph_build_params does not match build_algo ACE");
      }
      struct cuvsAceParams* ap = g;
      if (!ap->build_dir) {
        dbl_violation("cuvsAceParams.build_dir is NULL (the real library builds a std::string "
                      "from it: crash)");
        return RAFT_FAIL("cuvsdouble: cuvsAceParams.build_dir is NULL");
      }
      return CUVS_SUCCESS;
    }
    default: return CUVS_SUCCESS; /* not read */
  }
}

/* ---- from HNSW parameters ---- */

static uint32_t round_up_u32(uint32_t x, uint32_t m) { return ((x + m - 1) / m) * m; }

/* cagra::index_params::graph_build_heuristic and what
 * _populate_cagra_index_params_from_cpp copies back into the C struct: the
 * degrees given, NN-Descent below 10^6 rows (graph_build_params left as it
 * is), IVF-PQ settings written through graph_build_params from 10^6 rows.
 * c_metric is what the C struct's metric gets (from_hnsw_params leaves the
 * C++ default, L2Expanded; from_dataset sets the metric given). */
static cuvsError_t params_heuristic(const char* fn, cuvsCagraIndexParams_t params, int64_t n_rows,
                                    int64_t dim, size_t intermediate, size_t graph_degree,
                                    cuvsDistanceType c_metric, cuvsDistanceType metric,
                                    int64_t build_quality)
{
  if (n_rows < (int64_t)1e6) {
    /* NN-Descent; graph_build_params is left as it is */
    params->metric = c_metric;
    params->intermediate_graph_degree = intermediate;
    params->graph_degree = graph_degree;
    params->build_algo = NN_DESCENT;
    params->nn_descent_niter = (size_t)(5 + build_quality);
    return dbl_ok();
  }
  /* IVF-PQ: cuVS writes through graph_build_params and the two pointers in it */
  struct cuvsIvfPqParams* ip = params->graph_build_params;
  int k = dbl_reg_find(ip, NULL);
  if (!ip || (k >= 0 && k != K_CAGRA_IVFPQ_PARAMS) || !ip->ivf_pq_build_params ||
      !ip->ivf_pq_search_params) {
    dbl_violation("%s for %lld rows writes IVF-PQ settings "
                  "through graph_build_params->ivf_pq_build_params/ivf_pq_search_params, which "
                  "must be set (the real library dereferences them: crash)",
                  fn, (long long)n_rows);
    return RAFT_FAIL("cuvsdouble: graph_build_params has no IVF-PQ build/search params to fill");
  }
  TRY(check_optional(ip->ivf_pq_build_params, K_IVFPQ_INDEX_PARAMS, "ivf_pq_build_params"));
  TRY(check_optional(ip->ivf_pq_search_params, K_IVFPQ_SEARCH_PARAMS, "ivf_pq_search_params"));
  struct cuvsIvfPqIndexParams* bp = ip->ivf_pq_build_params;
  struct cuvsIvfPqSearchParams* sp = ip->ivf_pq_search_params;
  uint32_t n_lists = (uint32_t)(n_rows / 2000);
  if (n_lists < 1) n_lists = 1;
  uint32_t pq_dim, pq_bits;
  if (dim <= 32) {
    pq_dim = 16;
    pq_bits = 8;
  } else {
    pq_bits = 4;
    if (dim <= 64) {
      pq_dim = 32;
    } else if (dim <= 128) {
      pq_dim = 64;
    } else if (dim <= 192) {
      pq_dim = 96;
    } else {
      pq_dim = round_up_u32((uint32_t)(dim / 2), 128);
    }
  }
  double min_frac = 32.0 * n_lists / (double)n_rows;
  if (min_frac > 1.0) min_frac = 1.0;
  double frac = 1.0 / sqrt((double)n_rows * 1e-5);
  if (frac < min_frac) frac = min_frac;
  if (frac > 1.0) frac = 1.0;
  params->metric = c_metric;
  params->intermediate_graph_degree = intermediate;
  params->graph_degree = graph_degree;
  params->build_algo = IVF_PQ;
  bp->metric = metric;
  bp->metric_arg = 2.0f;
  bp->add_data_on_build = true;
  bp->n_lists = n_lists;
  bp->kmeans_n_iters = 10;
  bp->kmeans_trainset_fraction = frac;
  bp->pq_bits = pq_bits;
  bp->pq_dim = pq_dim;
  bp->codebook_kind = CUVS_IVF_PQ_CODEBOOK_GEN_PER_SUBSPACE;
  bp->force_random_rotation = false;
  bp->conservative_memory_allocation = false;
  bp->max_train_points_per_pq_code = 256;
  sp->n_probes = (uint32_t)round(2 + sqrt((double)n_lists) / 20 + (double)build_quality);
  sp->lut_dtype = DBL_CUDA_R_16F;
  sp->internal_distance_dtype = DBL_CUDA_R_16F;
  sp->preferred_shmem_carveout = 1.0;
  ip->refinement_rate = 1;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsCagraIndexParamsFromHnswParams(cuvsCagraIndexParams_t params,
                                                       int64_t n_rows, int64_t dim, int M,
                                                       int ef_construction,
                                                       enum cuvsCagraHnswHeuristicType heuristic,
                                                       cuvsDistanceType metric)
{
  DBL_ENTER(cuvsCagraIndexParamsFromHnswParams);
  TRY(dbl_check_params(params, K_CAGRA_INDEX_PARAMS));
  size_t graph_degree, intermediate;
  if (heuristic == CUVS_CAGRA_HEURISTIC_SAME_GRAPH_FOOTPRINT) {
    graph_degree = (size_t)(M * 2);
    intermediate = (size_t)(M * 3);
  } else {
    graph_degree = (size_t)(2 + M * 2 / 3);
    intermediate = (size_t)(M + M * ef_construction / 256);
  }
  /* cuVS copies the C++ default metric into the C struct, not `metric` */
  return params_heuristic("cuvsCagraIndexParamsFromHnswParams", params, n_rows, dim, intermediate,
                          graph_degree, L2Expanded, metric, ef_construction / 16);
}

#if DBL_RELEASE >= 2608
/* 26.08: cagra::index_params::from_dataset: the graph degree given, the
 * intermediate degree 3/2 of it, the metric given, and graph_build_heuristic
 * with build_quality. */
DBL_API cuvsError_t cuvsCagraIndexParamsFromDataset(cuvsCagraIndexParams_t params, int64_t n_rows,
                                                    int64_t dim, size_t graph_degree,
                                                    cuvsDistanceType metric, size_t build_quality)
{
  DBL_ENTER(cuvsCagraIndexParamsFromDataset);
  TRY(dbl_check_params(params, K_CAGRA_INDEX_PARAMS));
  return params_heuristic("cuvsCagraIndexParamsFromDataset", params, n_rows, dim,
                          graph_degree * 3 / 2, graph_degree, metric, metric,
                          (int64_t)build_quality);
}
#endif
