/*
 * cuvsdouble HNSW (cuvs/neighbors/hnsw.h): the 17 functions of c/src/neighbors/
 * hnsw.cpp with its rules, over an hnswlib-like index of the double's own:
 *
 *   - FromCagra takes the CAGRA graph as the base layer (degree links per row,
 *     maxM0 = 2 * ((degree + 1) / 2)); hierarchy NONE searches the base layer
 *     only, from the best of 32 evenly spaced seeds (cuVS's hnswlib patch,
 *     base_layer_only), CPU and GPU add upper layers by hnswlib's insertion
 *     (random levels, mult = 1 / ln M) over the rows given a level > 0;
 *   - Search is hnswlib's searchKnn: greedy descent through the upper layers,
 *     then a best-first search of the base layer with max(ef, k) candidates,
 *     so recall grows with ef as the real one does; searches of one index
 *     run concurrently (hnswlib's searchKnn is const), each on its caller's
 *     thread (num_threads is checked, not used), and two that overlap with
 *     different ef are a violation (set_ef writes the index's one ef_);
 *   - Extend is hnswlib's addPoint (every layer, ef_construction candidates,
 *     M links, reverse links pruned to maxM / maxM0);
 *   - Serialize writes hnswlib's saveIndex layout (header, level-0 block of
 *     [count, maxM0 ids, vector, label] per element, then per element its
 *     upper link lists), the format cuvsCagraSerializeToHnswlib writes;
 *     Deserialize reads it, as hnswlib's loadIndex, with the dim, metric and
 *     dtype the caller gives (the file holds none of them).
 *
 * Distances are hnswlib's: squared L2, and 1 - <q, x> for InnerProduct.
 * Build (ACE) builds a CAGRA-like graph of degree 2M (dbl_cagra_graph.c) and
 * converts it as FromCagra does; with use_disk it also writes
 * build_dir/hnsw_index.bin, as cuVS's disk path leaves it. That path (and
 * FromCagra of a CAGRA index ACE left on disk) refuses the CPU hierarchy
 * with the release's message (HN_DISK_CPU).
 *
 * Device memory (dbl_devmem.c; the index itself is host memory): Build
 * takes ACE's phases and the GPU hierarchy's kNN graph, FromCagra the
 * hierarchy's, from formulas (HN_DEV below), as cuVS would allocate them.
 */
#include "dbl.h"

/* A CAGRA graph on disk is streamed into hnsw_index.bin by a path that
 * refuses the CPU hierarchy (cpp/src/neighbors/detail/hnsw.hpp:
 * serialize_to_hnswlib_from_disk in 26.06, serialize_to_hnswlib_batched in
 * 26.08). */
#if DBL_RELEASE >= 2608
#define HN_DISK_CPU "Disk serialization not supported for CPU hierarchy."
#else
#define HN_DISK_CPU "Disk2disk serialization not supported for CPU hierarchy."
#endif
#include "dbl_cagra_graph.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>

#define HN_MAGIC 0x484e53574442ULL

DBL_HIDDEN cuvsError_t dbl_check_plain_params(const void* p, int kind);

typedef struct {
  uint64_t magic;
  DLDataType dtype;
  int metric;
  int hierarchy;
  int base_only; /* hnswlib's base_layer_only (hierarchy NONE) */
  int64_t dim;
  size_t es;
  int64_t n;
  int64_t maxM, maxM0, M, ef_construction;
  double mult;
  int32_t maxlevel, enterpoint;
  int64_t ef; /* hnswlib's ef_, written by every search (set_ef) */
  /* Searches in flight (ef_mu): cuvsHnswSearch runs concurrently with
   * itself (searchKnn is const: its scratch comes from a mutex-guarded pool
   * and its counters are atomic); only the write of ef_ is shared, so two
   * overlapping searches with different ef race. */
  pthread_mutex_t ef_mu;
  int64_t searching;
  char* raw;      /* n * dim elements of dtype */
  float* vec;     /* the same as floats */
  uint32_t* l0;   /* n * (maxM0 + 1): count, then ids */
  int32_t* levels;
  uint32_t** upper; /* per element: levels[i] blocks of (maxM + 1) */
  uint64_t* labels;
  uint64_t rng;
  pthread_rwlock_t lock;
} hn_impl;

/* ---- params ---- */

DBL_API cuvsError_t cuvsHnswAceParamsCreate(cuvsHnswAceParams_t* params)
{
  DBL_ENTER(cuvsHnswAceParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsHnswAceParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->npartitions = 0;
  p->build_dir = "/tmp/hnsw_ace_build";
  p->use_disk = false;
  p->max_host_memory_gb = 0;
  p->max_gpu_memory_gb = 0;
  dbl_reg_add(p, K_HNSW_ACE_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

static cuvsError_t hn_plain_destroy(void* p, int kind, const char* name)
{
  if (p == NULL) return dbl_ok();
  int actual = -1;
  if (dbl_reg_remove(p, kind, NULL, &actual) != 0) {
    dbl_violation("destroying an invalid or already destroyed %s %p", name, p);
    return RAFT_FAIL("cuvsdouble: invalid %s %p", name, p);
  }
  free(p);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsHnswAceParamsDestroy(cuvsHnswAceParams_t params)
{
  DBL_ENTER(cuvsHnswAceParamsDestroy);
  return hn_plain_destroy(params, K_HNSW_ACE_PARAMS, "cuvsHnswAceParams");
}

DBL_API cuvsError_t cuvsHnswIndexParamsCreate(cuvsHnswIndexParams_t* params)
{
  DBL_ENTER(cuvsHnswIndexParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsHnswIndexParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->hierarchy = GPU;
  p->ef_construction = 200;
  p->num_threads = 0;
  p->M = 32;
  p->metric = L2Expanded;
  p->ace_params = NULL;
  dbl_reg_add(p, K_HNSW_INDEX_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsHnswIndexParamsDestroy(cuvsHnswIndexParams_t params)
{
  DBL_ENTER(cuvsHnswIndexParamsDestroy);
  return hn_plain_destroy(params, K_HNSW_INDEX_PARAMS, "cuvsHnswIndexParams");
}

DBL_API cuvsError_t cuvsHnswExtendParamsCreate(cuvsHnswExtendParams_t* params)
{
  DBL_ENTER(cuvsHnswExtendParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsHnswExtendParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->num_threads = 0;
  dbl_reg_add(p, K_HNSW_EXTEND_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsHnswExtendParamsDestroy(cuvsHnswExtendParams_t params)
{
  DBL_ENTER(cuvsHnswExtendParamsDestroy);
  return hn_plain_destroy(params, K_HNSW_EXTEND_PARAMS, "cuvsHnswExtendParams");
}

DBL_API cuvsError_t cuvsHnswSearchParamsCreate(cuvsHnswSearchParams_t* params)
{
  DBL_ENTER(cuvsHnswSearchParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsHnswSearchParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->ef = 200;
  p->num_threads = 0;
  dbl_reg_add(p, K_HNSW_SEARCH_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsHnswSearchParamsDestroy(cuvsHnswSearchParams_t params)
{
  DBL_ENTER(cuvsHnswSearchParamsDestroy);
  return hn_plain_destroy(params, K_HNSW_SEARCH_PARAMS, "cuvsHnswSearchParams");
}

/* ---- the index ---- */

static void hn_free(hn_impl* h)
{
  if (!h) return;
  if (h->upper) {
    for (int64_t i = 0; i < h->n; i++) free(h->upper[i]);
  }
  free(h->upper);
  free(h->raw);
  free(h->vec);
  free(h->l0);
  free(h->levels);
  free(h->labels);
  pthread_rwlock_destroy(&h->lock);
  pthread_mutex_destroy(&h->ef_mu);
  h->magic = 0;
  free(h);
}

static int hn_dtype_ok(DLDataType dt)
{
  return dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) ||
         dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8);
}

/* index_impl's constructor: the metric picks hnswlib's space. */
static cuvsError_t hn_new(DLDataType dt, int64_t dim, int metric, int hierarchy, int64_t M,
                          int64_t ef_construction, hn_impl** out)
{
  EXPECTS(metric == L2Expanded || metric == InnerProduct, "Unsupported metric type was used");
  hn_impl* h = calloc(1, sizeof *h);
  if (!h) return dbl_plain_fail("std::bad_alloc");
  h->magic = HN_MAGIC;
  h->dtype = dt;
  h->dtype.lanes = 1;
  h->metric = metric;
  h->hierarchy = hierarchy;
  h->dim = dim;
  h->es = dl_elem_size(dt);
  if (M < 2) M = 2;
  h->M = M;
  h->maxM = M;
  h->maxM0 = 2 * M;
  h->ef_construction = ef_construction > (int64_t)M ? ef_construction : M;
  h->mult = 1.0 / log((double)M);
  h->ef = 10;
  h->rng = 100; /* hnswlib's default random_seed */
  h->maxlevel = -1;
  h->enterpoint = -1;
  pthread_rwlock_init(&h->lock, NULL);
  pthread_mutex_init(&h->ef_mu, NULL);
  *out = h;
  return CUVS_SUCCESS;
}

/* Room for n elements (hnswlib's resizeIndex). Returns 0 or -1. */
static int hn_reserve(hn_impl* h, int64_t n)
{
  if (n <= 0) return 0;
  char* raw = realloc(h->raw, (size_t)n * (size_t)h->dim * h->es + 1);
  if (!raw) return -1;
  h->raw = raw;
  float* vec = realloc(h->vec, (size_t)(n * h->dim) * sizeof(float) + 1);
  if (!vec) return -1;
  h->vec = vec;
  uint32_t* l0 = realloc(h->l0, (size_t)(n * (h->maxM0 + 1)) * sizeof(uint32_t));
  if (!l0) return -1;
  h->l0 = l0;
  int32_t* lv = realloc(h->levels, (size_t)n * sizeof(int32_t));
  if (!lv) return -1;
  h->levels = lv;
  uint32_t** up = realloc(h->upper, (size_t)n * sizeof(uint32_t*));
  if (!up) return -1;
  h->upper = up;
  uint64_t* lb = realloc(h->labels, (size_t)n * sizeof(uint64_t));
  if (!lb) return -1;
  h->labels = lb;
  return 0;
}

static float hn_dist(const hn_impl* h, const float* q, int64_t id)
{
  const float* x = h->vec + id * h->dim;
  float s = 0;
  if (h->metric == InnerProduct) {
    for (int64_t j = 0; j < h->dim; j++) s += q[j] * x[j];
    return 1.0f - s;
  }
  for (int64_t j = 0; j < h->dim; j++) {
    float d = q[j] - x[j];
    s += d * d;
  }
  return s;
}

static uint32_t* hn_links(const hn_impl* h, int64_t id, int level)
{
  if (level == 0) return h->l0 + id * (h->maxM0 + 1);
  return h->upper[id] + (size_t)(level - 1) * (size_t)(h->maxM + 1);
}

/* A link list's count: hnswlib reads the low 16 bits of its first word
 * (getListCount), whatever the upper ones hold. */
static inline uint32_t hn_count(const uint32_t* ll) { return ll[0] & 0xffffu; }

/* ---- heaps of (dist, id) ---- */

typedef struct {
  float d;
  uint32_t id;
} hn_pair;

typedef struct {
  hn_pair* a;
  int64_t n, cap;
  int max; /* 1: max-heap, 0: min-heap */
} hn_heap;

static int hn_less(const hn_heap* hp, hn_pair x, hn_pair y)
{
  return hp->max ? x.d > y.d : x.d < y.d;
}

static int hn_push(hn_heap* hp, float d, uint32_t id)
{
  if (hp->n == hp->cap) {
    int64_t c = hp->cap ? hp->cap * 2 : 64;
    hn_pair* a = realloc(hp->a, (size_t)c * sizeof *a);
    if (!a) return -1;
    hp->a = a;
    hp->cap = c;
  }
  int64_t i = hp->n++;
  hp->a[i] = (hn_pair){d, id};
  while (i > 0) {
    int64_t p = (i - 1) / 2;
    if (!hn_less(hp, hp->a[i], hp->a[p])) break;
    hn_pair t = hp->a[i];
    hp->a[i] = hp->a[p];
    hp->a[p] = t;
    i = p;
  }
  return 0;
}

static hn_pair hn_pop(hn_heap* hp)
{
  hn_pair top = hp->a[0];
  hp->a[0] = hp->a[--hp->n];
  int64_t i = 0;
  for (;;) {
    int64_t l = 2 * i + 1, r = l + 1, b = i;
    if (l < hp->n && hn_less(hp, hp->a[l], hp->a[b])) b = l;
    if (r < hp->n && hn_less(hp, hp->a[r], hp->a[b])) b = r;
    if (b == i) break;
    hn_pair t = hp->a[i];
    hp->a[i] = hp->a[b];
    hp->a[b] = t;
    i = b;
  }
  return top;
}

/* hnswlib's searchBaseLayer(ST) at one level: best-first from ep with ef
 * candidates. top (a max-heap) receives up to ef results. Returns 0 or -1.
 * visited has h->n bytes, zeroed by the caller. */
static int hn_search_layer(const hn_impl* h, const float* q, uint32_t ep, int level, int64_t ef,
                           uint8_t* visited, hn_heap* top)
{
  hn_heap cand = {NULL, 0, 0, 0};
  float d = hn_dist(h, q, ep);
  visited[ep] = 1;
  if (hn_push(top, d, ep) != 0 || hn_push(&cand, d, ep) != 0) goto fail;
  while (cand.n > 0) {
    hn_pair c = cand.a[0];
    if (c.d > top->a[0].d && top->n >= ef) break;
    hn_pop(&cand);
    if (level > 0 && h->levels[c.id] < level) continue;
    const uint32_t* ll = hn_links(h, c.id, level);
    for (uint32_t j = 0; j < hn_count(ll); j++) {
      uint32_t nb = ll[1 + j];
      if (nb >= (uint32_t)h->n || visited[nb]) continue;
      visited[nb] = 1;
      float dn = hn_dist(h, q, nb);
      if (top->n < ef || dn < top->a[0].d) {
        if (hn_push(&cand, dn, nb) != 0 || hn_push(top, dn, nb) != 0) goto fail;
        if (top->n > ef) hn_pop(top);
      }
    }
  }
  free(cand.a);
  return 0;
fail:
  free(cand.a);
  return -1;
}

/* Greedy descent from the enterpoint to level `to` (exclusive of the levels
 * below it). A level above an element's own would be a link list hnswlib
 * never allocated: the real library dereferences it. */
static cuvsError_t hn_descend(const hn_impl* h, const float* q, int to, uint32_t* cur)
{
  uint32_t c = (uint32_t)h->enterpoint;
  float cd = hn_dist(h, q, c);
  for (int level = h->maxlevel; level > to; level--) {
    int changed = 1;
    while (changed) {
      changed = 0;
      if (h->levels[c] < level) {
        dbl_violation("HNSW: element %u has no link list at level %d (a base-layer-only index "
                      "searched or extended with a hierarchy: the real library dereferences a "
                      "null link list)",
                      c, level);
        return RAFT_FAIL("cuvsdouble: HNSW element %u has no level %d", c, level);
      }
      const uint32_t* ll = hn_links(h, c, level);
      for (uint32_t j = 0; j < hn_count(ll); j++) {
        uint32_t nb = ll[1 + j];
        if (nb >= (uint32_t)h->n) continue;
        float d = hn_dist(h, q, nb);
        if (d < cd) {
          cd = d;
          c = nb;
          changed = 1;
        }
      }
    }
  }
  *cur = c;
  return CUVS_SUCCESS;
}

/* hnswlib's getNeighborsByHeuristic2: keeps at most m of the candidates
 * (sorted nearest first), each closer to the element than to any kept one. */
static int64_t hn_heuristic(const hn_impl* h, hn_pair* c, int64_t nc, int64_t m, uint32_t* out)
{
  int64_t kept = 0;
  for (int64_t i = 0; i < nc && kept < m; i++) {
    int good = 1;
    for (int64_t j = 0; j < kept && good; j++) {
      if (hn_dist(h, h->vec + (int64_t)c[i].id * h->dim, out[j]) < c[i].d) good = 0;
    }
    if (good) out[kept++] = c[i].id;
  }
  return kept;
}

static int hn_pair_cmp(const void* a, const void* b)
{
  float x = ((const hn_pair*)a)->d, y = ((const hn_pair*)b)->d;
  return x < y ? -1 : x > y;
}

/* Adds nb to id's links at level, pruning by the heuristic when full. */
static int hn_add_link(hn_impl* h, uint32_t id, uint32_t nb, int level)
{
  uint32_t* ll = hn_links(h, id, level);
  int64_t cap = level == 0 ? h->maxM0 : h->maxM;
  for (uint32_t j = 0; j < hn_count(ll); j++) {
    if (ll[1 + j] == nb) return 0;
  }
  if (hn_count(ll) < cap) {
    ll[0] = hn_count(ll);
    ll[1 + ll[0]++] = nb;
    return 0;
  }
  hn_pair* c = malloc((size_t)(cap + 1) * sizeof *c);
  if (!c) return -1;
  const float* x = h->vec + (int64_t)id * h->dim;
  for (int64_t j = 0; j < cap; j++) c[j] = (hn_pair){hn_dist(h, x, ll[1 + j]), ll[1 + j]};
  c[cap] = (hn_pair){hn_dist(h, x, nb), nb};
  qsort(c, (size_t)(cap + 1), sizeof *c, hn_pair_cmp);
  ll[0] = (uint32_t)hn_heuristic(h, c, cap + 1, cap, ll + 1);
  free(c);
  return 0;
}

static int hn_random_level(hn_impl* h)
{
  h->rng = h->rng * 6364136223846793005ULL + 1442695040888963407ULL;
  double u = ((double)(h->rng >> 11) + 1.0) / 9007199254740993.0;
  int l = (int)(-log(u) * h->mult);
  return l > 16 ? 16 : l;
}

/* Gives element id `level` upper link lists (empty). */
static int hn_alloc_upper(hn_impl* h, int64_t id, int level)
{
  h->levels[id] = level;
  h->upper[id] = NULL;
  if (level > 0) {
    h->upper[id] = calloc((size_t)level * (size_t)(h->maxM + 1), sizeof(uint32_t));
    if (!h->upper[id]) return -1;
  }
  return 0;
}

/* hnswlib's addPoint for element id (its data, label and level already set),
 * linked at the levels from min(level, maxlevel) down to `lowest`. */
static cuvsError_t hn_insert(hn_impl* h, uint32_t id, int lowest)
{
  int level = h->levels[id];
  if (h->enterpoint < 0) {
    h->enterpoint = (int32_t)id;
    h->maxlevel = level;
    return CUVS_SUCCESS;
  }
  const float* q = h->vec + (int64_t)id * h->dim;
  uint32_t cur = (uint32_t)h->enterpoint;
  int top_level = level < h->maxlevel ? level : h->maxlevel;
  if (level < h->maxlevel) TRY(hn_descend(h, q, level, &cur));
  uint8_t* visited = malloc((size_t)h->n);
  if (!visited) return dbl_plain_fail("std::bad_alloc");
  uint32_t* sel = malloc((size_t)(h->maxM0 + 1) * sizeof(uint32_t));
  hn_heap top = {NULL, 0, 0, 1};
  int fail = sel == NULL;
  for (int lc = top_level; lc >= lowest && !fail; lc--) {
    memset(visited, 0, (size_t)h->n);
    visited[id] = 1;
    top.n = 0;
    if (h->levels[cur] < lc) continue;
    if (hn_search_layer(h, q, cur, lc, h->ef_construction, visited, &top) != 0) {
      fail = 1;
      break;
    }
    int64_t nc = top.n;
    hn_pair* c = malloc((size_t)(nc + 1) * sizeof *c);
    if (!c) {
      fail = 1;
      break;
    }
    for (int64_t i = nc - 1; i >= 0; i--) c[i] = hn_pop(&top);
    int64_t m = hn_heuristic(h, c, nc, h->M, sel);
    if (nc > 0) cur = c[0].id;
    free(c);
    uint32_t* ll = hn_links(h, id, lc);
    ll[0] = (uint32_t)m;
    memcpy(ll + 1, sel, (size_t)m * sizeof(uint32_t));
    for (int64_t i = 0; i < m && !fail; i++) fail = hn_add_link(h, sel[i], id, lc) != 0;
  }
  free(top.a);
  free(sel);
  free(visited);
  if (fail) return dbl_plain_fail("std::bad_alloc");
  if (level > h->maxlevel) {
    h->maxlevel = level;
    h->enterpoint = (int32_t)id;
  }
  return CUVS_SUCCESS;
}

/* Appends n rows (row stride rs elements) as elements h->n.., labels from
 * label0, with empty links and no level. */
static int hn_append(hn_impl* h, const void* src, int64_t n, int64_t rs, uint64_t label0)
{
  if (hn_reserve(h, h->n + n) != 0) return -1;
  for (int64_t i = 0; i < n; i++) {
    int64_t id = h->n + i;
    memcpy(h->raw + (size_t)(id * h->dim) * h->es, (const char*)src + (size_t)(i * rs) * h->es,
           (size_t)h->dim * h->es);
    dl_load_row(src, h->dtype, rs, 1, i, h->dim, h->vec + id * h->dim);
    h->l0[id * (h->maxM0 + 1)] = 0;
    h->labels[id] = label0 + (uint64_t)i;
    h->levels[id] = 0;
    h->upper[id] = NULL;
  }
  h->n += n;
  return 0;
}

/* The base layer from a CAGRA graph, then the hierarchy per h->hierarchy. */
static cuvsError_t hn_from_graph(hn_impl* h, const uint32_t* graph, int64_t degree)
{
  for (int64_t i = 0; i < h->n; i++) {
    uint32_t* ll = hn_links(h, i, 0);
    int64_t m = degree < h->maxM0 ? degree : h->maxM0;
    ll[0] = (uint32_t)m;
    for (int64_t j = 0; j < m; j++) ll[1 + j] = graph[i * degree + j];
  }
  if (h->hierarchy == NONE) {
    /* what serialize_to_hnswlib writes and hnsw::deserialize reads back */
    h->base_only = 1;
    h->maxlevel = 1;
    h->enterpoint = (int32_t)(h->n / 2);
    return CUVS_SUCCESS;
  }
  for (int64_t i = 0; i < h->n; i++) {
    if (hn_alloc_upper(h, i, hn_random_level(h)) != 0) return dbl_plain_fail("std::bad_alloc");
  }
  /* the upper layers, inserted from the highest level down (level-0 rows
   * keep the CAGRA links only: base_layer_init = false) */
  h->enterpoint = -1;
  h->maxlevel = 0;
  for (int lv = 16; lv >= 1; lv--) {
    for (int64_t i = 0; i < h->n; i++) {
      if (h->levels[i] != lv) continue;
      TRY(hn_insert(h, (uint32_t)i, 1));
    }
  }
  if (h->enterpoint < 0) {
    h->enterpoint = 0;
    h->maxlevel = 0;
  }
  return CUVS_SUCCESS;
}

static cuvsError_t hn_handle(cuvsHnswIndex_t index)
{
  if (dbl_reg_find(index, NULL) != K_HNSW_INDEX) {
    dbl_violation("invalid or destroyed cuvsHnswIndex_t %p (the real library would crash)",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsHnswIndex_t %p", (void*)index);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t hn_impl_of(cuvsHnswIndex_t index, hn_impl** out)
{
  TRY(hn_handle(index));
  hn_impl* h = (hn_impl*)index->addr;
  if (dbl_reg_find(h, NULL) != K_HNSW_IMPL) {
    dbl_violation("HNSW index %p holds no built index (addr %#lx; the real library would "
                  "dereference it)",
                  (void*)index, (unsigned long)index->addr);
    return RAFT_FAIL("cuvsdouble: the HNSW index was not built");
  }
  *out = h;
  return CUVS_SUCCESS;
}

static void hn_install(cuvsHnswIndex_t index, hn_impl* h)
{
  if (index->addr != 0) {
    dbl_violation("writing a new index into a cuvsHnswIndex_t that already holds one: the real "
                  "library leaks the previous one (so does the double)");
  }
  dbl_reg_add(h, K_HNSW_IMPL, sizeof *h);
  index->addr = (uintptr_t)h;
}

DBL_API cuvsError_t cuvsHnswIndexCreate(cuvsHnswIndex_t* index)
{
  DBL_ENTER(cuvsHnswIndexCreate);
  if (!index) {
    dbl_violation("NULL cuvsHnswIndex_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  cuvsHnswIndex* h = calloc(1, sizeof *h);
  if (!h) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(h, K_HNSW_INDEX, sizeof *h);
  *index = h;
  return dbl_ok();
}

/* cuvsHnswIndexDestroy deletes the index by the handle's dtype: float32,
 * float16, any kDLInt, any kDLUInt; another dtype leaks it. */
DBL_API cuvsError_t cuvsHnswIndexDestroy(cuvsHnswIndex_t index)
{
  DBL_ENTER(cuvsHnswIndexDestroy);
  if (dbl_reg_remove(index, K_HNSW_INDEX, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsHnswIndex_t %p", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsHnswIndex_t %p", (void*)index);
  }
  hn_impl* h = (hn_impl*)index->addr;
  if (h) {
    DLDataType dt = index->dtype;
    int known = dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) ||
                dt.code == kDLInt || dt.code == kDLUInt;
    if (!known) {
      dbl_violation("cuvsHnswIndexDestroy: handle dtype code %d bits %d: the real library leaks "
                    "the index",
                    (int)dt.code, (int)dt.bits);
    }
    if (dbl_reg_remove(h, K_HNSW_IMPL, NULL, NULL) == 0) {
      if (pthread_rwlock_trywrlock(&h->lock) != 0) {
        dbl_violation("HNSW index destroyed while another thread uses it");
        pthread_rwlock_wrlock(&h->lock);
      }
      pthread_rwlock_unlock(&h->lock);
      hn_free(h);
    } else {
      dbl_violation("cuvsHnswIndexDestroy: addr %p is not a live index", (void*)h);
    }
  }
  free(index);
  return dbl_ok();
}

static cuvsError_t hn_write(const hn_impl* h, const char* filename);

/* ---- device memory (HN_DEV) ----
 *
 * What cuVS takes from the device for an HNSW index, phase by phase (the
 * double builds its graphs its own way, so each phase's size comes from
 * the formulas, every allocation rounded up to 256 bytes):
 *   - HierarchyGPU (cpp/src/neighbors/detail/hnsw.hpp, from_cagra<GPU> and
 *     serialize_to_hnswlib_batched, v26.06.00 and v26.08.01): the rows of
 *     level 1 and up (those the double drew) get a kNN graph of
 *     min(M, rows - 1) neighbours from all_neighbors_graph: NN-Descent
 *     under 10^7 entries (GNND's working set, cpp/src/neighbors/
 *     nn_descent.cu build_mem_usage; none for a complete graph, which
 *     v26.08.01's nn_descent writes without it), else CAGRA's IVF-PQ kNN
 *     graph (dbl_cagra_model of an IVF-PQ CAGRA build: float32 rows
 *     assumed). The higher levels are smaller;
 *   - Build: CAGRA's ACE (cpp/src/neighbors/detail/cagra/cagra_build.cuh,
 *     build_ace): the partition labelling (a float32 sample of max(1%, 100
 *     per partition) of the rows, the centroids, 32 Ki-row chunks of rows
 *     and of distances), then one partition's CAGRA build at the average
 *     partition size min(n, 2 * ceil(n / partitions)) (partitions:
 *     npartitions, 0 meaning 2, at most n / 1000, at least 2) with
 *     build_ace's parameters (26.08: degree d, intermediate 1.5 d, the rows
 *     copied padded to the device first; 26.06: from_hnsw_params with
 *     M = d / 2, host rows; NN-Descent under 10^6 rows, else IVF-PQ with
 *     n_probes 2 + sqrt(n_lists) / 20 + ef_construction / 16), then, in
 *     memory, the graph on the device held through the conversion's
 *     hierarchy (26.06's copy of the rows beside it, which cuVS skips when
 *     it does not fit, is not taken). */

static uint64_t hn_c256(uint64_t n) { return (n + 255) / 256 * 256; }

/* Takes bytes from the device model and gives them back at once. */
static cuvsError_t hn_dev_phase(uint64_t bytes)
{
  dbl_dev_block b;
  TRY(dbl_dev_take(bytes, &b));
  dbl_dev_give(&b);
  return CUVS_SUCCESS;
}

/* The GPU hierarchy's kNN graph over h's rows of level >= 1. */
static cuvsError_t hn_dev_hierarchy(const hn_impl* h)
{
  if (h->hierarchy != GPU || h->base_only) return CUVS_SUCCESS;
  uint64_t n = 0;
  for (int64_t i = 0; i < h->n; i++) n += h->levels[i] >= 1;
  if (n <= 1) return CUVS_SUCCESS;
  uint64_t ns = n > (uint64_t)h->M ? (uint64_t)h->M : n - 1;
  if (ns == n - 1) return CUVS_SUCCESS; /* complete: no GNND */
  uint64_t D = (uint64_t)h->dim;
  if (n * ns < 10000000ull) {
    return hn_dev_phase(hn_c256(n * D * 2) + hn_c256(n * 4) + 2 * hn_c256(n * 32 * 4) +
                        hn_c256(n * 4) + hn_c256(2 * n * 8));
  }
  struct cuvsCagraIndexParams p = {0};
  p.metric = h->metric;
  p.build_algo = IVF_PQ;
  p.graph_degree = ns;
  p.intermediate_graph_degree = ns;
  uint64_t peak = 0, index = 0;
  TRY(dbl_cagra_model(&p, (int64_t)n, h->dim, 0, &peak, &index));
  return hn_dev_phase(peak);
}

/* ACE's partition phases for an HNSW build of n × dim rows of es bytes
 * into a graph of degree d (Build's doc above). */
static cuvsError_t hn_dev_ace(int64_t n, int64_t dim, size_t es, int64_t d, int metric,
                              int64_t ef, uint64_t npartitions)
{
  uint64_t N = (uint64_t)n, D = (uint64_t)dim;
  uint64_t np = npartitions ? npartitions : 2;
  if (np > N / 1000) np = N / 1000 > 2 ? N / 1000 : 2;
  uint64_t samples = (uint64_t)((double)N * 0.01);
  if (samples < 100 * np) samples = 100 * np;
  if (samples > N) samples = N;
  const uint64_t chunk = 32 * 1024;
  TRY(hn_dev_phase(hn_c256(samples * D * 4) + hn_c256(np * D * 4) + hn_c256(chunk * D * 4) +
                   hn_c256(chunk * np * 4)));
  uint64_t sub = 2 * ((N + np - 1) / np);
  if (sub > N) sub = N;
  struct cuvsCagraIndexParams p = {0};
  struct cuvsIvfPqSearchParams sp = {0};
  struct cuvsIvfPqParams g = {0};
  p.metric = metric;
#if DBL_RELEASE >= 2608
  p.graph_degree = (size_t)d;
  p.intermediate_graph_degree = (size_t)(d * 3 / 2);
#else
  int64_t m = d / 2 > 1 ? d / 2 : 1;
  p.graph_degree = (size_t)(2 * m);
  p.intermediate_graph_degree = (size_t)(3 * m);
#endif
  p.build_algo = NN_DESCENT;
  if (sub >= 1000000) {
    double nl = sub / 2000 > 1 ? (double)(sub / 2000) : 1;
    sp.n_probes = (uint32_t)llround(2 + sqrt(nl) / 20 + (double)(ef / 16));
    g.ivf_pq_search_params = &sp;
    g.refinement_rate = 1;
    p.build_algo = IVF_PQ;
    p.graph_build_params = &g;
  }
  uint64_t peak = 0, index = 0;
  TRY(dbl_cagra_model(&p, (int64_t)sub, dim, 0, &peak, &index));
#if DBL_RELEASE >= 2608
  peak += hn_c256(sub * ((D * es + 15) / 16 * 16)); /* make_device_padded_dataset */
#endif
  (void)es;
  return hn_dev_phase(peak);
}

/* ---- from CAGRA ---- */

static cuvsError_t hn_check_params(cuvsHnswIndexParams_t p)
{
  return dbl_check_plain_params(p, K_HNSW_INDEX_PARAMS);
}

static cuvsError_t hn_from_cagra(cuvsHnswIndexParams_t params, cuvsCagraIndex_t cagra,
                                 cuvsHnswIndex_t out, DLManagedTensor* dataset)
{
  TRY(hn_check_params(params));
  TRY(hn_handle(out));
  if (dbl_reg_find(cagra, NULL) < 0) {
    dbl_violation("invalid cuvsCagraIndex_t %p (the real library would crash)", (void*)cagra);
    return RAFT_FAIL("cuvsdouble: invalid cuvsCagraIndex_t %p", (void*)cagra);
  }
  out->dtype = cagra->dtype;
  DLDataType dt = cagra->dtype;
  if (!(dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) || dt.code == kDLUInt ||
        dt.code == kDLInt)) {
    return RAFT_FAIL("Unsupported dtype: %d", (int)dt.code);
  }
  DLDataType edt = dt;
  if (dt.code == kDLUInt || dt.code == kDLInt) edt.bits = 8;
  edt.lanes = 1;
  const DLTensor* t = NULL;
  if (dataset) {
    TRY(dl_check_ptr(dataset, "dataset"));
    TRY(dl_view(dataset, LAYOUT_ROW, edt.code, edt.bits, WANT_HOST, 2));
    t = &dataset->dl_tensor;
  }
  dbl_cagra_peek_t c = {0};
  TRY(dbl_cagra_peek(cagra, &c));
  cuvsError_t st = CUVS_SUCCESS;
  hn_impl* h = NULL;
#if DBL_RELEASE >= 2608
  if (!c.device_padded && !c.on_disk) {
    /* 26.08's _from_cagra casts every index to device_padded_index<T> */
    dbl_violation("cuvsHnswFromCagra of a CAGRA index whose dataset is not a device-padded view: "
                  "cuVS 26.08 reads it as a device_padded_index (undefined behaviour)");
    st = RAFT_FAIL("cuvsdouble: the CAGRA index is not device-padded");
    goto out;
  }
#endif

  int hierarchy = (int)params->hierarchy;
  if (hierarchy != NONE && hierarchy != CPU && hierarchy != GPU) {
    st = RAFT_FAIL("Unsupported hierarchy type");
    goto out;
  }
  const void* rows = c.data;
  int64_t rs = c.stride, n = c.n, dim = c.dim;
  if (t) {
    rows = t->data;
    rs = t->shape[1];
    dim = t->shape[1];
    if (t->shape[0] != c.n) {
      /* serialize_to_hnswlib / the GPU path read graph row i with dataset row i */
      st = RAFT_FAIL("Dataset rows (%lld) must match the CAGRA graph rows (%lld)",
                     (long long)t->shape[0], (long long)c.n);
      goto out;
    }
  } else if (!rows) {
    st = RAFT_FAIL("Invalid CAGRA dataset of size 0 during serialization, shape 0x%lld",
                   (long long)c.dim);
    goto out;
  }
  if (c.on_disk && hierarchy == CPU) {
    st = RAFT_FAIL(HN_DISK_CPU);
    goto out;
  }
  int64_t M = (c.degree + 1) / 2;
  st = hn_new(edt, dim, c.metric, hierarchy, M, params->ef_construction, &h);
  if (st != CUVS_SUCCESS) goto out;
  if (hn_append(h, rows, n, rs, 0) != 0) {
    st = dbl_plain_fail("std::bad_alloc");
    goto out;
  }
  st = hn_from_graph(h, c.graph, c.degree);
  if (st == CUVS_SUCCESS) st = hn_dev_hierarchy(h);
  if (st == CUVS_SUCCESS && c.on_disk) {
    /* cuVS converts the files into hnsw_index.bin next to the graph file and
     * returns an index loaded from it at its first use */
    char path[512];
    snprintf(path, sizeof path, "%s/hnsw_index.bin", c.disk_dir);
    st = hn_write(h, path);
  }
out:
  dbl_cagra_peek_end(&c);
  if (st != CUVS_SUCCESS) {
    hn_free(h);
    return st;
  }
  hn_install(out, h);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsHnswFromCagra(cuvsResources_t res, cuvsHnswIndexParams_t params,
                                      cuvsCagraIndex_t cagra_index, cuvsHnswIndex_t hnsw_index)
{
  DBL_ENTER(cuvsHnswFromCagra);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = hn_from_cagra(params, cagra_index, hnsw_index, NULL);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsHnswFromCagraWithDataset(cuvsResources_t res,
                                                 cuvsHnswIndexParams_t params,
                                                 cuvsCagraIndex_t cagra_index,
                                                 cuvsHnswIndex_t hnsw_index,
                                                 DLManagedTensor* dataset_tensor)
{
  DBL_ENTER(cuvsHnswFromCagraWithDataset);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = CUVS_SUCCESS;
  if (!dataset_tensor) {
    dbl_violation("NULL dataset tensor (the real library would crash)");
    st = RAFT_FAIL("cuvsdouble: NULL dataset tensor");
  } else {
    st = hn_from_cagra(params, cagra_index, hnsw_index, dataset_tensor);
  }
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- serialize / deserialize (hnswlib's saveIndex / loadIndex) ---- */

static cuvsError_t hn_write(const hn_impl* h, const char* filename)
{
  FILE* f = fopen(filename, "wb");
  if (!f) return RAFT_FAIL("Cannot open file %s", filename);
  uint64_t links0 = sizeof(uint32_t) + (uint64_t)h->maxM0 * sizeof(uint32_t);
  uint64_t data_size = (uint64_t)h->dim * h->es;
  uint64_t per = links0 + data_size + sizeof(uint64_t);
  uint64_t offset_level0 = 0, max_elements = (uint64_t)h->n, count = (uint64_t)h->n;
  uint64_t label_offset = links0 + data_size, offset_data = links0;
  uint64_t maxM = (uint64_t)h->maxM, maxM0 = (uint64_t)h->maxM0, M = (uint64_t)h->M;
  uint64_t ef = (uint64_t)h->ef_construction;
  int32_t maxlevel = h->maxlevel, ep = h->enterpoint;
  double mult = h->mult;
  int ok = fwrite(&offset_level0, 8, 1, f) == 1 && fwrite(&max_elements, 8, 1, f) == 1 &&
           fwrite(&count, 8, 1, f) == 1 && fwrite(&per, 8, 1, f) == 1 &&
           fwrite(&label_offset, 8, 1, f) == 1 && fwrite(&offset_data, 8, 1, f) == 1 &&
           fwrite(&maxlevel, 4, 1, f) == 1 && fwrite(&ep, 4, 1, f) == 1 &&
           fwrite(&maxM, 8, 1, f) == 1 && fwrite(&maxM0, 8, 1, f) == 1 &&
           fwrite(&M, 8, 1, f) == 1 && fwrite(&mult, 8, 1, f) == 1 && fwrite(&ef, 8, 1, f) == 1;
  for (int64_t i = 0; ok && i < h->n; i++) {
    ok = fwrite(hn_links(h, i, 0), sizeof(uint32_t), (size_t)(h->maxM0 + 1), f) ==
           (size_t)(h->maxM0 + 1) &&
         fwrite(h->raw + (size_t)(i * h->dim) * h->es, 1, (size_t)data_size, f) == data_size &&
         fwrite(&h->labels[i], 8, 1, f) == 1;
  }
  uint32_t block = (uint32_t)((h->maxM + 1) * sizeof(uint32_t));
  for (int64_t i = 0; ok && i < h->n; i++) {
    uint32_t size = block * (uint32_t)h->levels[i];
    ok = fwrite(&size, 4, 1, f) == 1;
    if (ok && size) ok = fwrite(h->upper[i], 1, size, f) == size;
  }
  if (fclose(f) != 0) ok = 0;
  if (!ok) return RAFT_FAIL("cuvsdouble: failed writing %s", filename);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsHnswSerialize(cuvsResources_t res, const char* filename,
                                      cuvsHnswIndex_t index)
{
  DBL_ENTER(cuvsHnswSerialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = hn_handle(index);
  hn_impl* h = NULL;
  if (st == CUVS_SUCCESS && !hn_dtype_ok(index->dtype) && index->dtype.code != kDLInt &&
      index->dtype.code != kDLUInt) {
    st = RAFT_FAIL("Unsupported index dtype: %d and bits: %d", (int)index->dtype.code,
                   (int)index->dtype.bits);
  }
  if (st == CUVS_SUCCESS) st = hn_impl_of(index, &h);
  if (st == CUVS_SUCCESS && !filename) {
    dbl_violation("NULL filename (the real library would crash)");
    st = RAFT_FAIL("cuvsdouble: NULL filename");
  }
  if (st == CUVS_SUCCESS) {
    pthread_rwlock_rdlock(&h->lock);
    st = hn_write(h, filename);
    pthread_rwlock_unlock(&h->lock);
  }
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static int rd(FILE* f, void* p, size_t n) { return fread(p, 1, n, f) == n; }

/* hnswlib's loadIndex: the header, then the elements; a file whose size does
 * not fit the header is "Index seems to be corrupted or unsupported". The
 * vector width comes from dim and the dtype, not from the file. */
static cuvsError_t hn_read(const char* filename, DLDataType dt, int64_t dim, int metric,
                           int hierarchy, hn_impl** out)
{
  FILE* f = fopen(filename, "rb");
  if (!f) return dbl_plain_fail("Cannot open file");
  uint64_t offset_level0, max_elements, count, per, label_offset, offset_data, maxM, maxM0, M, ef;
  int32_t maxlevel, ep;
  double mult;
  cuvsError_t st = CUVS_SUCCESS;
  hn_impl* h = NULL;
  if (!(rd(f, &offset_level0, 8) && rd(f, &max_elements, 8) && rd(f, &count, 8) &&
        rd(f, &per, 8) && rd(f, &label_offset, 8) && rd(f, &offset_data, 8) &&
        rd(f, &maxlevel, 4) && rd(f, &ep, 4) && rd(f, &maxM, 8) && rd(f, &maxM0, 8) &&
        rd(f, &M, 8) && rd(f, &mult, 8) && rd(f, &ef, 8))) {
    fclose(f);
    return dbl_plain_fail("Index seems to be corrupted or unsupported");
  }
  size_t es = dl_elem_size(dt);
  uint64_t data_size = (uint64_t)dim * es;
  uint64_t links0 = 4 + maxM0 * 4;
  if (count > max_elements || count > (1ULL << 32) || maxM0 > 4096 || maxM > 4096 ||
      per != links0 + data_size + 8 || offset_data != links0 || label_offset != links0 + data_size ||
      (count > 0 && (ep < 0 || (uint64_t)ep >= count)) || maxlevel < 0 || maxlevel > 64) {
    /* hnswlib reads past or beside its elements here (a wrong dim, another
     * dtype): undefined behaviour in the real library */
    dbl_violation("HNSW file %s does not match dim %lld of %d-bit elements (hnswlib would read "
                  "outside its elements)",
                  filename, (long long)dim, (int)dt.bits);
    fclose(f);
    return dbl_plain_fail("Index seems to be corrupted or unsupported");
  }
  st = hn_new(dt, dim, metric, hierarchy, (int64_t)M, (int64_t)ef, &h);
  if (st != CUVS_SUCCESS) {
    fclose(f);
    return st;
  }
  h->maxM = (int64_t)maxM;
  h->maxM0 = (int64_t)maxM0;
  h->M = (int64_t)M;
  h->mult = mult;
  if (hn_reserve(h, (int64_t)count) != 0) {
    st = dbl_plain_fail("std::bad_alloc");
    goto fail;
  }
  for (uint64_t i = 0; i < count; i++) {
    h->levels[i] = 0;
    h->upper[i] = NULL;
  }
  h->n = (int64_t)count;
  for (uint64_t i = 0; i < count; i++) {
    if (!rd(f, hn_links(h, (int64_t)i, 0), (size_t)links0) ||
        !rd(f, h->raw + (size_t)i * (size_t)data_size, (size_t)data_size) ||
        !rd(f, &h->labels[i], 8)) {
      st = dbl_plain_fail("Index seems to be corrupted or unsupported");
      goto fail;
    }
    if (hn_count(hn_links(h, (int64_t)i, 0)) > maxM0) {
      st = dbl_plain_fail("Index seems to be corrupted or unsupported");
      goto fail;
    }
    dl_load_row(h->raw, dt, dim, 1, (int64_t)i, dim, h->vec + (int64_t)i * dim);
  }
  uint32_t block = (uint32_t)((maxM + 1) * 4);
  for (uint64_t i = 0; i < count; i++) {
    uint32_t size;
    if (!rd(f, &size, 4) || size % block != 0) {
      st = dbl_plain_fail("Index seems to be corrupted or unsupported");
      goto fail;
    }
    int level = (int)(size / block);
    if (hn_alloc_upper(h, (int64_t)i, level) != 0) {
      st = dbl_plain_fail("std::bad_alloc");
      goto fail;
    }
    if (size && !rd(f, h->upper[i], size)) {
      st = dbl_plain_fail("Index seems to be corrupted or unsupported");
      goto fail;
    }
  }
  if (fgetc(f) != EOF) {
    st = dbl_plain_fail("Index seems to be corrupted or unsupported");
    goto fail;
  }
  fclose(f);
  h->maxlevel = maxlevel;
  h->enterpoint = count ? ep : -1;
  h->base_only = hierarchy == NONE;
  *out = h;
  return CUVS_SUCCESS;
fail:
  fclose(f);
  hn_free(h);
  return st;
}

DBL_API cuvsError_t cuvsHnswDeserialize(cuvsResources_t res, cuvsHnswIndexParams_t params,
                                        const char* filename, int dim, cuvsDistanceType metric,
                                        cuvsHnswIndex_t index)
{
  DBL_ENTER(cuvsHnswDeserialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = hn_check_params(params);
  if (st == CUVS_SUCCESS) st = hn_handle(index);
  if (st == CUVS_SUCCESS && !filename) {
    dbl_violation("NULL filename (the real library would crash)");
    st = RAFT_FAIL("cuvsdouble: NULL filename");
  }
  DLDataType dt = st == CUVS_SUCCESS ? index->dtype : (DLDataType){0, 0, 0};
  if (st == CUVS_SUCCESS && !hn_dtype_ok(dt)) {
    st = RAFT_FAIL("Unsupported dtype in file %s", filename);
  }
  hn_impl* h = NULL;
  if (st == CUVS_SUCCESS) {
    if (dim <= 0) {
      dbl_violation("cuvsHnswDeserialize: dim %d (hnswlib sizes its vectors by it)", dim);
      st = dbl_plain_fail("Index seems to be corrupted or unsupported");
    } else {
      st = hn_read(filename, dt, dim, (int)metric, (int)params->hierarchy, &h);
    }
  }
  if (st == CUVS_SUCCESS) hn_install(index, h);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- build (ACE) ---- */

static cuvsError_t hn_build(cuvsHnswIndexParams_t params, DLManagedTensor* dataset,
                            cuvsHnswIndex_t index)
{
  TRY(hn_check_params(params));
  TRY(hn_handle(index));
  TRY(dl_check_ptr(dataset, "dataset"));
  const DLTensor* t = &dataset->dl_tensor;
  index->dtype = t->dtype;
  if (!hn_dtype_ok(t->dtype)) {
    return RAFT_FAIL("Unsupported dtype: code=%d, bits=%d", (int)t->dtype.code,
                     (int)t->dtype.bits);
  }
  EXPECTS(params->ace_params != NULL, "ACE parameters must be set for hnsw::build");
  TRY(dbl_check_plain_params(params->ace_params, K_HNSW_ACE_PARAMS));
  TRY(dl_view(dataset, LAYOUT_ROW, t->dtype.code, t->dtype.bits, WANT_HOST, 2));
  int64_t n = t->shape[0], dim = t->shape[1];
  EXPECTS(n > 0 && dim > 0, "cuvsdouble: cannot build an HNSW index from an empty dataset");
  int metric = (int)params->metric;
  /* CAGRA's metrics first (the build), then hnswlib's space (from_cagra) */
  if (metric != L2Expanded && metric != InnerProduct && metric != CosineExpanded) {
    return RAFT_FAIL("cuvsdouble: CAGRA does not support metric %d (cuVS supports L2Expanded, "
                     "InnerProduct, CosineExpanded and BitwiseHamming)",
                     metric);
  }
  EXPECTS(metric == L2Expanded || metric == InnerProduct, "Unsupported metric type was used");
  int hierarchy = (int)params->hierarchy;
  EXPECTS(hierarchy == NONE || hierarchy == CPU || hierarchy == GPU, "Unsupported hierarchy type");
  int64_t M = (int64_t)params->M;
  EXPECTS(M >= 1, "cuvsdouble: graph degree 2*M = 0");
  int64_t degree = 2 * M;
  if (degree > n - 1) degree = n - 1 > 0 ? n - 1 : 1;
  int64_t intermediate = 3 * M;
  if (intermediate > n - 1) intermediate = n - 1 > 0 ? n - 1 : 1;
  if (intermediate < degree) intermediate = degree;
  const struct cuvsHnswAceParams* a = params->ace_params;
  /* the ACE build runs first (its files land in build_dir), then from_cagra
   * of the on-disk CAGRA index refuses the CPU hierarchy */
  EXPECTS(!(a->use_disk && hierarchy == CPU), HN_DISK_CPU);
  TRY(hn_dev_ace(n, dim, dl_elem_size(t->dtype), degree, metric, params->ef_construction,
                 a->npartitions));
  size_t gbytes = (size_t)(n * degree) * sizeof(uint32_t);
  uint32_t* g = calloc(gbytes ? gbytes : 1, 1);
  if (!g) return dbl_plain_fail("std::bad_alloc");
  if (n > 1) {
    dbl_matrix m = {t->data, t->dtype, dim, 1, n, dim};
    if (cg_graph_build(&m, metric, intermediate, degree, g) != 0) {
      free(g);
      return dbl_plain_fail("std::bad_alloc");
    }
  }
  hn_impl* h = NULL;
  cuvsError_t st = hn_new(t->dtype, dim, metric, hierarchy, (degree + 1) / 2,
                          params->ef_construction, &h);
  if (st == CUVS_SUCCESS && hn_append(h, t->data, n, dim, 0) != 0) {
    st = dbl_plain_fail("std::bad_alloc");
  }
  /* in memory, ACE's graph stays on the device through the conversion */
  dbl_dev_block dg = {0};
  if (st == CUVS_SUCCESS && !a->use_disk) st = dbl_dev_take(gbytes, &dg);
  if (st == CUVS_SUCCESS) st = hn_from_graph(h, g, n > 1 ? degree : 0);
  if (st == CUVS_SUCCESS) st = hn_dev_hierarchy(h);
  dbl_dev_give(&dg);
  free(g);
  if (st == CUVS_SUCCESS && a->use_disk) {
    /* cuVS leaves the converted index in build_dir/hnsw_index.bin */
    const char* dir = a->build_dir ? a->build_dir : "/tmp/hnsw_ace_build";
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
      st = RAFT_FAIL("Failed to create ACE build directory: %s", dir);
    } else {
      char path[4096];
      snprintf(path, sizeof path, "%s/hnsw_index.bin", dir);
      st = hn_write(h, path);
    }
  }
  if (st != CUVS_SUCCESS) {
    hn_free(h);
    return st;
  }
  hn_install(index, h);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsHnswBuild(cuvsResources_t res, cuvsHnswIndexParams_t params,
                                  DLManagedTensor* dataset, cuvsHnswIndex_t index)
{
  DBL_ENTER(cuvsHnswBuild);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = hn_build(params, dataset, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- extend ---- */

static cuvsError_t hn_extend(cuvsHnswExtendParams_t params, DLManagedTensor* add,
                             cuvsHnswIndex_t index)
{
  TRY(hn_handle(index));
  DLDataType dt = index->dtype;
  if (!(dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) || dt.code == kDLUInt ||
        dt.code == kDLInt)) {
    return RAFT_FAIL("Unsupported dtype: %d", (int)dt.code);
  }
  TRY(dbl_check_plain_params(params, K_HNSW_EXTEND_PARAMS));
  hn_impl* h;
  TRY(hn_impl_of(index, &h));
  TRY(dl_check_ptr(add, "additional_dataset"));
  TRY(dl_view(add, LAYOUT_ROW, h->dtype.code, h->dtype.bits, WANT_HOST, 2));
  const DLTensor* t = &add->dl_tensor;
  if (t->shape[1] != h->dim) {
    /* hnswlib copies data_size bytes per row from the tensor: reading past
     * its rows when they are narrower */
    dbl_violation("cuvsHnswExtend: rows of %lld elements for an index of dim %lld (hnswlib reads "
                  "dim elements per row)",
                  (long long)t->shape[1], (long long)h->dim);
    return RAFT_FAIL("cuvsdouble: additional_dataset has %lld columns, the index %lld",
                     (long long)t->shape[1], (long long)h->dim);
  }
  int64_t n = t->shape[0];
  if (n == 0) return CUVS_SUCCESS;
  if (pthread_rwlock_trywrlock(&h->lock) != 0) {
    dbl_violation("HNSW index extended while another thread uses it (hnswlib's addPoint races "
                  "with searchKnn)");
    pthread_rwlock_wrlock(&h->lock);
  }
  int64_t first = h->n;
  cuvsError_t st = CUVS_SUCCESS;
  if (hn_append(h, t->data, n, h->dim, (uint64_t)first) != 0) st = dbl_plain_fail("std::bad_alloc");
  for (int64_t i = first; st == CUVS_SUCCESS && i < first + n; i++) {
    int level = hn_random_level(h);
    if (hn_alloc_upper(h, i, level) != 0) {
      st = dbl_plain_fail("std::bad_alloc");
      break;
    }
    st = hn_insert(h, (uint32_t)i, 0);
  }
  pthread_rwlock_unlock(&h->lock);
  return st;
}

DBL_API cuvsError_t cuvsHnswExtend(cuvsResources_t res, cuvsHnswExtendParams_t params,
                                   DLManagedTensor* additional_dataset, cuvsHnswIndex_t index)
{
  DBL_ENTER(cuvsHnswExtend);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = hn_extend(params, additional_dataset, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- search ---- */

static cuvsError_t hn_search(cuvsHnswSearchParams_t params, cuvsHnswIndex_t index,
                             DLManagedTensor* queries, DLManagedTensor* neighbors,
                             DLManagedTensor* distances)
{
  TRY(dl_check_ptr(queries, "queries"));
  TRY(dl_check_ptr(neighbors, "neighbors"));
  TRY(dl_check_ptr(distances, "distances"));
  const DLTensor* q = &queries->dl_tensor;
  const DLTensor* nb = &neighbors->dl_tensor;
  const DLTensor* ds = &distances->dl_tensor;
  EXPECTS(dl_host_compat(q), "queries should have host compatible memory");
  EXPECTS(dl_host_compat(nb), "neighbors should have host compatible memory");
  EXPECTS(dl_host_compat(ds), "distances should have host compatible memory");
  EXPECTS(nb->dtype.code == kDLUInt && nb->dtype.bits == 64, "neighbors should be of type uint64_t");
  EXPECTS(ds->dtype.code == kDLFloat && ds->dtype.bits == 32, "distances should be of type float32");
  TRY(hn_handle(index));
  EXPECTS(q->dtype.code == index->dtype.code, "type mismatch between index and queries");
  DLDataType dt = index->dtype;
  if (!(dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) || dt.code == kDLUInt ||
        dt.code == kDLInt)) {
    return RAFT_FAIL("Unsupported index dtype: %d and bits: %d", (int)q->dtype.code,
                     (int)q->dtype.bits);
  }
  hn_impl* h;
  TRY(hn_impl_of(index, &h));
  TRY(dl_view(queries, LAYOUT_ROW, h->dtype.code, h->dtype.bits, WANT_HOST, 2));
  TRY(dl_view(neighbors, LAYOUT_ROW, kDLUInt, 64, WANT_HOST, 2));
  TRY(dl_view(distances, LAYOUT_ROW, kDLFloat, 32, WANT_HOST, 2));
  EXPECTS(q->shape[0] == nb->shape[0] && q->shape[0] == ds->shape[0],
          "Number of rows in output neighbors and distances matrices must equal the number of "
          "queries.");
  EXPECTS(nb->shape[1] == ds->shape[1],
          "Number of columns in output neighbors and distances matrices must equal k");
  EXPECTS(q->shape[1] == h->dim,
          "Number of query dimensions should equal number of dimensions in the index.");
  int64_t nq = q->shape[0], k = nb->shape[1];
  int32_t ef = params->ef;
  int32_t threads = params->num_threads;
  if (threads < 0) {
    dbl_violation("cuvsHnswSearch: num_threads %d (OpenMP's num_threads clause needs a positive "
                  "value)",
                  threads);
    return RAFT_FAIL("cuvsdouble: num_threads %d", threads);
  }
  pthread_rwlock_rdlock(&h->lock);
  /* set_ef: a shared write, as hnswlib's ef_. Searches with the same ef
   * write the same value (harmless); one with another ef changes the
   * candidate count of the searches in flight: a data race in the real
   * library. */
  pthread_mutex_lock(&h->ef_mu);
  if (h->searching > 0 && h->ef != ef) {
    dbl_violation("cuvsHnswSearch with ef %d while a search with ef %lld runs on the same index "
                  "(hnswlib's ef_ is per index: the real library races)",
                  (int)ef, (long long)h->ef);
  }
  h->ef = ef;
  h->searching++;
  pthread_mutex_unlock(&h->ef_mu);
  cuvsError_t st = CUVS_SUCCESS;
  uint8_t* visited = malloc((size_t)h->n + 1);
  float* qf = malloc((size_t)h->dim * sizeof(float) + 1);
  hn_heap top = {NULL, 0, 0, 1};
  uint64_t* nbo = nb->data;
  float* dso = ds->data;
  if (!visited || !qf) st = dbl_plain_fail("std::bad_alloc");
  int64_t e = ef > k ? ef : k;
  for (int64_t i = 0; st == CUVS_SUCCESS && i < nq; i++) {
    dl_load_row(q->data, q->dtype, h->dim, 1, i, h->dim, qf);
    top.n = 0;
    if (h->n > 0) {
      uint32_t cur = (uint32_t)h->enterpoint;
      if (h->base_only) {
        float cd = hn_dist(h, qf, cur);
        for (int s = 0; s < 32; s++) {
          uint32_t obj = (uint32_t)((int64_t)s * (h->n / 32));
          float d = hn_dist(h, qf, obj);
          if (d < cd) {
            cd = d;
            cur = obj;
          }
        }
      } else {
        st = hn_descend(h, qf, 0, &cur);
        if (st != CUVS_SUCCESS) break;
      }
      memset(visited, 0, (size_t)h->n);
      if (hn_search_layer(h, qf, cur, 0, e, visited, &top) != 0) {
        st = dbl_plain_fail("std::bad_alloc");
        break;
      }
    }
    while (top.n > k) hn_pop(&top);
    if (top.n < k) {
      /* get_search_knn_results pops k results from a queue holding fewer:
       * undefined behaviour in the real library */
      dbl_violation("cuvsHnswSearch: %lld results for k = %lld (the real library pops an "
                    "empty queue)",
                    (long long)top.n, (long long)k);
    }
    int64_t m = top.n;
    for (int64_t j = m - 1; j >= 0; j--) {
      hn_pair p = hn_pop(&top);
      nbo[i * k + j] = h->labels[p.id];
      dso[i * k + j] = p.d;
    }
    for (int64_t j = m; j < k; j++) {
      nbo[i * k + j] = UINT64_MAX;
      dso[i * k + j] = INFINITY;
    }
  }
  free(top.a);
  free(visited);
  free(qf);
  pthread_mutex_lock(&h->ef_mu);
  h->searching--;
  pthread_mutex_unlock(&h->ef_mu);
  pthread_rwlock_unlock(&h->lock);
  return st;
}

DBL_API cuvsError_t cuvsHnswSearch(cuvsResources_t res, cuvsHnswSearchParams_t params,
                                   cuvsHnswIndex_t index, DLManagedTensor* queries,
                                   DLManagedTensor* neighbors, DLManagedTensor* distances)
{
  DBL_ENTER(cuvsHnswSearch);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = dbl_check_plain_params(params, K_HNSW_SEARCH_PARAMS);
  if (st == CUVS_SUCCESS) st = hn_search(params, index, queries, neighbors, distances);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
