/*
 * cuvsdouble Vamana (cuvs/neighbors/vamana.h): params, index handles, build
 * and serialization (there is no search in the C API).
 *
 * Build is the Vamana algorithm itself, one insertion at a time rather than
 * cuVS's GPU batches: each row, in a random order, is found by a greedy
 * search from the medoid (a random row, as in cuVS) with a candidate list of
 * visited_size, its neighbours are chosen from the visited rows by
 * RobustPrune with alpha (a candidate is dropped when alpha times its
 * distance to a chosen neighbour is at most its distance to the row), and
 * each chosen neighbour gets the reverse edge, pruned again when it
 * overflows graph_degree. Unfilled slots hold UINT32_MAX
 * (raft::upper_bound), filled ones first. Distances are squared L2.
 *
 * The rules are the real code's (c/src/neighbors/vamana.cpp,
 * cpp/src/neighbors/detail/vamana/vamana_{build,serialize}.cuh,
 * cpp/include/cuvs/neighbors/vamana.hpp; the same checks in v26.06.00 and
 * v26.08.01):
 *   - metric L2Expanded only; graph_degree 32, 64, 128 or 256;
 *     visited_size > graph_degree; vamana_iters >= 1;
 *   - int(max_fraction * rows) < 1, batch_base < 1 (a batch of 0 rows) or
 *     reverse_batchsize 0 make the real build loop forever: the double
 *     records a violation and fails instead;
 *   - the index keeps a view of a device dataset whose rows are a multiple
 *     of 16 bytes (a borrow), and a padded device copy of any other;
 *   - cuvsVamanaBuild writes the dataset's dtype into the handle before
 *     anything else; a dataset neither host- nor device-compatible gives an
 *     empty index and success; a refused one leaks the empty index the real
 *     code made first (so does the double: K_VAMANA_IMPL stays live);
 *   - cuvsVamanaIndexGetDims writes nothing, and succeeds, for a dtype other
 *     than float32, int8 and uint8; cuvsVamanaIndexDestroy leaks (silently)
 *     the index of such a dtype;
 *   - cuvsVamanaSerialize writes MSFT DiskANN's in-memory index format to
 *     filename (a 24-byte header: u64 file size, u32 largest degree, u32
 *     medoid, u64 frozen points = 0; then per row u32 degree and that many
 *     u32 ids) and, with include_dataset, filename + ".data" (i32 rows, i32
 *     dim, the rows); a failure to write the .data file is swallowed.
 */
#include "dbl.h"

#include <errno.h>
#include <float.h>
#include <math.h>

#define VAM_MAGIC 0x56414d414e41ULL

typedef struct {
  uint64_t magic;
  int64_t n, dim, degree;
  DLDataType dtype;
  const void* data; /* n x dim rows: the caller's (borrowed) or owned */
  void* owned;
  size_t owned_bytes;
  uint64_t borrow_id;
  uint32_t* graph; /* n x degree */
  uint32_t medoid;
} vam_impl;

DBL_API cuvsError_t cuvsVamanaIndexParamsCreate(cuvsVamanaIndexParams_t* params)
{
  DBL_ENTER(cuvsVamanaIndexParamsCreate);
  if (!params) {
    dbl_violation("NULL cuvsVamanaIndexParams_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsVamanaIndexParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->metric = L2Expanded;
  p->graph_degree = 32;
  p->visited_size = 64;
  p->vamana_iters = 1;
  p->alpha = 1.2f;
  p->max_fraction = 0.06f;
  p->batch_base = 2.0f;
  p->queue_size = 127;
  p->reverse_batchsize = 1000000;
  dbl_reg_add(p, K_VAMANA_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsVamanaIndexParamsDestroy(cuvsVamanaIndexParams_t params)
{
  DBL_ENTER(cuvsVamanaIndexParamsDestroy);
  if (!params) return dbl_ok();
  if (dbl_reg_remove(params, K_VAMANA_PARAMS, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsVamanaIndexParams_t %p",
                  (void*)params);
    return RAFT_FAIL("cuvsdouble: invalid cuvsVamanaIndexParams_t %p", (void*)params);
  }
  free(params);
  return dbl_ok();
}

static int vam_dtype_ok(DLDataType dt)
{
  return dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8);
}

static void vam_impl_free(vam_impl* impl)
{
  dbl_reg_borrow(impl->borrow_id, -1);
  if (impl->owned) dbl_buf_free(impl->owned, impl->owned_bytes);
  if (impl->graph) dbl_buf_free(impl->graph, (size_t)(impl->n * impl->degree) * 4);
  impl->magic = 0;
  free(impl);
}

static vam_impl* vam_impl_new(void)
{
  vam_impl* impl = calloc(1, sizeof *impl);
  if (impl) impl->magic = VAM_MAGIC;
  return impl;
}

DBL_API cuvsError_t cuvsVamanaIndexCreate(cuvsVamanaIndex_t* index)
{
  DBL_ENTER(cuvsVamanaIndexCreate);
  if (!index) {
    dbl_violation("NULL cuvsVamanaIndex_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  cuvsVamanaIndex* h = calloc(1, sizeof *h);
  if (!h) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(h, K_VAMANA_INDEX, sizeof *h);
  *index = h;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsVamanaIndexDestroy(cuvsVamanaIndex_t index)
{
  DBL_ENTER(cuvsVamanaIndexDestroy);
  if (dbl_reg_remove(index, K_VAMANA_INDEX, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsVamanaIndex_t %p", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsVamanaIndex_t %p", (void*)index);
  }
  vam_impl* impl = (vam_impl*)index->addr;
  if (impl) {
    if (!vam_dtype_ok(index->dtype)) {
      dbl_violation("cuvsVamanaIndexDestroy: dtype code %d bits %d: the real library leaks the "
                    "index (so does the double)",
                    (int)index->dtype.code, (int)index->dtype.bits);
    } else if (dbl_reg_remove(impl, K_VAMANA_IMPL, NULL, NULL) == 0) {
      vam_impl_free(impl);
    } else {
      dbl_violation("cuvsVamanaIndexDestroy: addr %p is not a live index", (void*)impl);
    }
  }
  free(index);
  return dbl_ok();
}

static cuvsError_t vam_impl_of(cuvsVamanaIndex_t index, vam_impl** out)
{
  if (dbl_reg_find(index, NULL) != K_VAMANA_INDEX) {
    dbl_violation("invalid cuvsVamanaIndex_t %p (the real library would crash)", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsVamanaIndex_t %p", (void*)index);
  }
  vam_impl* impl = (vam_impl*)index->addr;
  if (dbl_reg_find(impl, NULL) != K_VAMANA_IMPL) {
    dbl_violation("vamana index %p holds no built index (the real library would dereference addr "
                  "%#lx)",
                  (void*)index, (unsigned long)index->addr);
    return RAFT_FAIL("cuvsdouble: the vamana index was not built");
  }
  *out = impl;
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsVamanaIndexGetDims(cuvsVamanaIndex_t index, int* dim)
{
  DBL_ENTER(cuvsVamanaIndexGetDims);
  if (dbl_reg_find(index, NULL) != K_VAMANA_INDEX) {
    dbl_violation("invalid cuvsVamanaIndex_t %p (the real library would crash)", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsVamanaIndex_t %p", (void*)index);
  }
  if (!vam_dtype_ok(index->dtype)) return dbl_ok(); /* writes nothing */
  vam_impl* impl;
  TRY(vam_impl_of(index, &impl));
  if (!dim) {
    dbl_violation("NULL dim (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  *dim = (int)impl->dim;
  return dbl_ok();
}

/* ---- the build ---- */

typedef struct {
  const float* rows; /* n x dim floats */
  int64_t dim;
} vam_data;

static float vam_dist(const vam_data* d, int64_t a, int64_t b)
{
  const float* x = d->rows + a * d->dim;
  const float* y = d->rows + b * d->dim;
  float s = 0;
  for (int64_t j = 0; j < d->dim; j++) {
    float t = x[j] - y[j];
    s += t * t;
  }
  return s;
}

typedef struct {
  float d;
  uint32_t id;
} vam_cand;

static int vam_cand_cmp(const void* a, const void* b)
{
  const vam_cand* x = a;
  const vam_cand* y = b;
  if (x->d != y->d) return x->d < y->d ? -1 : 1;
  return x->id < y->id ? -1 : (x->id > y->id);
}

static uint64_t vam_rng(uint64_t* s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

typedef struct {
  const vam_data* data;
  uint32_t* graph;
  int64_t n, R;
  int L;
  float alpha;
  /* scratch */
  vam_cand* list;     /* L best candidates, sorted */
  uint8_t* expanded;  /* per list entry */
  uint32_t* visited;  /* expanded ids */
  int64_t n_visited;
  uint32_t* mark;     /* per row: stamp when seen in this search */
  uint32_t stamp;
  vam_cand* pool;     /* prune candidates */
  float* occl;
} vam_ctx;

static int64_t vam_degree(const vam_ctx* c, int64_t p)
{
  int64_t k = 0;
  while (k < c->R && c->graph[p * c->R + k] != UINT32_MAX) k++;
  return k;
}

/* Greedy search for row q from start: the expanded rows land in visited. */
static void vam_greedy(vam_ctx* c, uint32_t start, int64_t q)
{
  c->stamp++;
  if (c->stamp == 0) {
    memset(c->mark, 0, (size_t)c->n * sizeof(uint32_t));
    c->stamp = 1;
  }
  int size = 0;
  c->list[size] = (vam_cand){vam_dist(c->data, q, start), start};
  c->expanded[size++] = 0;
  c->mark[start] = c->stamp;
  c->n_visited = 0;
  for (;;) {
    int pos = -1;
    for (int i = 0; i < size; i++)
      if (!c->expanded[i]) {
        pos = i;
        break;
      }
    if (pos < 0) break;
    c->expanded[pos] = 1;
    uint32_t p = c->list[pos].id;
    c->visited[c->n_visited++] = p;
    for (int64_t e = 0; e < c->R; e++) {
      uint32_t nb = c->graph[(int64_t)p * c->R + e];
      if (nb == UINT32_MAX) break;
      if (c->mark[nb] == c->stamp) continue;
      c->mark[nb] = c->stamp;
      vam_cand cand = {vam_dist(c->data, q, nb), nb};
      if (size == c->L && vam_cand_cmp(&cand, &c->list[size - 1]) >= 0) continue;
      int at = size < c->L ? size : size - 1;
      while (at > 0 && vam_cand_cmp(&cand, &c->list[at - 1]) < 0) {
        c->list[at] = c->list[at - 1];
        c->expanded[at] = c->expanded[at - 1];
        at--;
      }
      c->list[at] = cand;
      c->expanded[at] = 0;
      if (size < c->L) size++;
    }
  }
}

/* RobustPrune of row p over the m candidates in pool (any order, may hold p
 * and repeats): writes p's new neighbour list. */
static void vam_prune(vam_ctx* c, int64_t p, int64_t m)
{
  for (int64_t i = 0; i < m; i++) c->pool[i].d = vam_dist(c->data, p, c->pool[i].id);
  qsort(c->pool, (size_t)m, sizeof(vam_cand), vam_cand_cmp);
  int64_t u = 0;
  for (int64_t i = 0; i < m; i++) {
    if (c->pool[i].id == (uint32_t)p) continue;
    if (u > 0 && c->pool[u - 1].id == c->pool[i].id) continue;
    c->pool[u++] = c->pool[i];
  }
  for (int64_t i = 0; i < u; i++) c->occl[i] = 0;
  uint32_t* out = c->graph + p * c->R;
  int64_t k = 0;
  for (int64_t i = 0; i < u && k < c->R; i++) {
    if (c->occl[i] < 0) continue;
    out[k++] = c->pool[i].id;
    for (int64_t j = i + 1; j < u; j++) {
      if (c->occl[j] < 0) continue;
      if (c->alpha * vam_dist(c->data, c->pool[i].id, c->pool[j].id) <= c->pool[j].d) c->occl[j] = -1;
    }
  }
  for (; k < c->R; k++) out[k] = UINT32_MAX;
}

/* Returns 0, or -1 on allocation failure. */
static int vam_build_graph(const vam_data* data, int64_t n, int64_t R, int L, float alpha,
                           float iters, uint32_t* graph, uint32_t* medoid)
{
  for (int64_t i = 0; i < n * R; i++) graph[i] = UINT32_MAX;
  uint64_t seed = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
  *medoid = (uint32_t)(vam_rng(&seed) % (uint64_t)n);
  int64_t pool_cap = (int64_t)L * (R + 1) + R + 2;
  vam_ctx c = {.data = data, .graph = graph, .n = n, .R = R, .L = L, .alpha = alpha};
  c.list = malloc((size_t)L * sizeof(vam_cand));
  c.expanded = malloc((size_t)L);
  c.visited = malloc((size_t)pool_cap * sizeof(uint32_t));
  c.mark = calloc((size_t)n, sizeof(uint32_t));
  c.pool = malloc((size_t)pool_cap * sizeof(vam_cand));
  c.occl = malloc((size_t)pool_cap * sizeof(float));
  uint32_t* order = malloc((size_t)n * sizeof(uint32_t));
  int rc = 0;
  if (!c.list || !c.expanded || !c.visited || !c.mark || !c.pool || !c.occl || !order) {
    rc = -1;
    goto out;
  }
  for (int64_t i = 0; i < n; i++) order[i] = (uint32_t)i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(vam_rng(&seed) % (uint64_t)(i + 1));
    uint32_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  int64_t total = (int64_t)(iters * (float)n);
  for (int64_t s = 0; s < total; s++) {
    int64_t p = order[s % n];
    vam_greedy(&c, *medoid, p);
    int64_t m = 0;
    for (int64_t i = 0; i < c.n_visited; i++) c.pool[m++].id = c.visited[i];
    int64_t deg = vam_degree(&c, p);
    for (int64_t e = 0; e < deg; e++) c.pool[m++].id = graph[p * R + e];
    vam_prune(&c, p, m);
    deg = vam_degree(&c, p);
    for (int64_t e = 0; e < deg; e++) {
      int64_t j = graph[p * R + e];
      int64_t dj = vam_degree(&c, j);
      int dup = 0;
      for (int64_t x = 0; x < dj && !dup; x++) dup = graph[j * R + x] == (uint32_t)p;
      if (dup) continue;
      if (dj < R) {
        graph[j * R + dj] = (uint32_t)p;
      } else {
        int64_t mm = 0;
        for (int64_t x = 0; x < dj; x++) c.pool[mm++].id = graph[j * R + x];
        c.pool[mm++].id = (uint32_t)p;
        vam_prune(&c, j, mm);
      }
    }
  }
out:
  free(c.list), free(c.expanded), free(c.visited), free(c.mark), free(c.pool), free(c.occl);
  free(order);
  return rc;
}

static int pow2_at_least(int start, int v)
{
  int p = start;
  while (p < v) p <<= 1;
  return p;
}

static cuvsError_t vam_build(cuvsVamanaIndexParams_t params, DLManagedTensor* dataset,
                             cuvsVamanaIndex_t index)
{
  if (dbl_reg_find(index, NULL) != K_VAMANA_INDEX) {
    dbl_violation("cuvsVamanaBuild: invalid cuvsVamanaIndex_t %p (the real library would crash)",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsVamanaIndex_t %p", (void*)index);
  }
  TRY(dl_check_ptr(dataset, "dataset"));
  const DLTensor* t = &dataset->dl_tensor;
  index->dtype = t->dtype;
  if (!vam_dtype_ok(t->dtype)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)t->dtype.code,
                     (int)t->dtype.bits);
  }
  if (!params) {
    dbl_violation("NULL cuvsVamanaIndexParams_t (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL params");
  }
  struct cuvsVamanaIndexParams p = *params; /* read by value */
  if (index->addr != 0) {
    dbl_violation("cuvsVamanaBuild into a cuvsVamanaIndex_t that holds an index: the real "
                  "library leaks the previous one (so does the double)");
  }
  /* `new index(res)` comes first: everything refused below leaks it */
  vam_impl* impl = vam_impl_new();
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(impl, K_VAMANA_IMPL, sizeof *impl);
  int where;
  if (dl_dev_compat(t)) {
    where = WANT_DEVICE;
  } else if (dl_host_compat(t)) {
    where = WANT_HOST;
  } else {
    index->addr = (uintptr_t)impl; /* an empty index, and success */
    return CUVS_SUCCESS;
  }
  TRY(dl_view(dataset, LAYOUT_ROW, t->dtype.code, t->dtype.bits, where, 2));
  TRY(dl_strict(t, "dataset"));
  EXPECTS(p.metric == L2Expanded, "Currently only L2Expanded metric is supported");
  uint32_t R = p.graph_degree;
  EXPECTS(R == 32 || R == 64 || R == 128 || R == 256, "Provided graph_degree not currently supported");
  EXPECTS(p.visited_size > R, "visited_size must be > graph_degree");
  EXPECTS(p.vamana_iters >= 1.0f, "vamana_iters must be at least 1.0 to insert the entire input dataset");
  int64_t n = t->shape[0], dim = t->shape[1];
  int max_batch = (int)(p.max_fraction * (float)n);
  if (max_batch > n) max_batch = (int)n;
  int L = (int)p.visited_size;
  if ((L & (L - 1)) != 0) L = pow2_at_least((int)R, L);
  if (n > 0 && (max_batch < 1 || p.batch_base < 1.0f || p.reverse_batchsize == 0 ||
                (int)p.reverse_batchsize < 0)) {
    dbl_violation("cuvsVamanaBuild: max_fraction %g of %lld rows (a batch of %d), batch_base %g, "
                  "reverse_batchsize %u: the real build loops forever",
                  (double)p.max_fraction, (long long)n, max_batch, (double)p.batch_base,
                  p.reverse_batchsize);
    return RAFT_FAIL("cuvsdouble: vamana batch sizes of 0 rows (the real build never ends)");
  }
  if (L > (R == 256 ? 1024 : 512)) {
    dbl_violation("cuvsVamanaBuild: visited_size %u (%d) is above what cuVS sorts for degree %u",
                  p.visited_size, L, R);
    return RAFT_FAIL("cuvsdouble: visited_size %u not supported for graph_degree %u",
                     p.visited_size, R);
  }
  size_t es = dl_elem_size(t->dtype);
  impl->n = n;
  impl->dim = dim;
  impl->degree = R;
  impl->dtype = t->dtype;
  impl->dtype.lanes = 1;
  size_t row_bytes = (size_t)dim * es;
  if (where == WANT_DEVICE && row_bytes % 16 == 0) {
    impl->data = t->data; /* a view: the caller's memory */
    dbl_entry e;
    if (n * dim > 0 && dbl_reg_containing(t->data, (size_t)n * row_bytes, &e)) {
      impl->borrow_id = e.id;
      dbl_reg_borrow(e.id, +1);
    }
  } else {
    impl->owned_bytes = (size_t)n * row_bytes;
    impl->owned = dbl_buf_alloc(impl->owned_bytes ? impl->owned_bytes : 1);
    if (!impl->owned) return dbl_plain_fail("std::bad_alloc");
    if (impl->owned_bytes) memcpy(impl->owned, t->data, impl->owned_bytes);
    impl->data = impl->owned;
  }
  float* rows = malloc((size_t)(n * dim > 0 ? n * dim : 1) * sizeof(float));
  impl->graph = dbl_buf_alloc((size_t)(n * R > 0 ? n * R : 1) * 4);
  if (!rows || !impl->graph) {
    free(rows);
    return dbl_plain_fail("std::bad_alloc");
  }
  for (int64_t i = 0; i < n; i++) dl_load_row(impl->data, impl->dtype, dim, 1, i, dim, rows + i * dim);
  vam_data d = {rows, dim};
  int rc = n > 0 ? vam_build_graph(&d, n, R, L, p.alpha, p.vamana_iters, impl->graph, &impl->medoid)
                 : 0;
  free(rows);
  if (rc != 0) return dbl_plain_fail("std::bad_alloc");
  index->addr = (uintptr_t)impl;
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsVamanaBuild(cuvsResources_t res, cuvsVamanaIndexParams_t params,
                                    DLManagedTensor* dataset, cuvsVamanaIndex_t index)
{
  DBL_ENTER(cuvsVamanaBuild);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = vam_build(params, dataset, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- serialization ---- */

static int vam_write_dataset(const vam_impl* impl, const char* path)
{
  FILE* f = fopen(path, "wb");
  if (!f) return -1;
  int32_t n = (int32_t)impl->n, dim = (int32_t)impl->dim;
  size_t bytes = (size_t)(impl->n * impl->dim) * dl_elem_size(impl->dtype);
  int ok = fwrite(&n, 4, 1, f) == 1 && fwrite(&dim, 4, 1, f) == 1 &&
           (bytes == 0 || fwrite(impl->data, 1, bytes, f) == bytes);
  ok = (fclose(f) == 0) && ok;
  return ok ? 0 : -1;
}

static cuvsError_t vam_serialize(const char* filename, cuvsVamanaIndex_t index, bool include_dataset)
{
  if (dbl_reg_find(index, NULL) != K_VAMANA_INDEX) {
    dbl_violation("invalid cuvsVamanaIndex_t %p (the real library would crash)", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsVamanaIndex_t %p", (void*)index);
  }
  if (!vam_dtype_ok(index->dtype)) {
    return RAFT_FAIL("Unsupported index DLtensor dtype: %d and bits: %d", (int)index->dtype.code,
                     (int)index->dtype.bits);
  }
  vam_impl* impl;
  TRY(vam_impl_of(index, &impl));
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  FILE* f = fopen(filename, "wb");
  EXPECTS(f, "Cannot open file %s", filename);
  uint64_t index_size = 24;
  uint32_t max_degree = 0, start = impl->medoid;
  uint64_t frozen = 0;
  int ok = fwrite(&index_size, 8, 1, f) == 1 && fwrite(&max_degree, 4, 1, f) == 1 &&
           fwrite(&start, 4, 1, f) == 1 && fwrite(&frozen, 8, 1, f) == 1;
  for (int64_t i = 0; i < impl->n && ok; i++) {
    uint32_t e = 0;
    while (e < impl->degree && impl->graph[i * impl->degree + e] != UINT32_MAX) e++;
    ok = fwrite(&e, 4, 1, f) == 1 && (e == 0 || fwrite(impl->graph + i * impl->degree, 4, e, f) == e);
    if (e > max_degree) max_degree = e;
    index_size += 4 * ((uint64_t)e + 1);
  }
  if (ok) {
    ok = fseek(f, 0, SEEK_SET) == 0 && fwrite(&index_size, 8, 1, f) == 1 &&
         fwrite(&max_degree, 4, 1, f) == 1;
  }
  ok = (fclose(f) == 0) && ok;
  EXPECTS(ok, "Error writing output %s", filename);
  if (include_dataset) {
    size_t len = strlen(filename);
    char* path = malloc(len + 6);
    if (!path) return CUVS_SUCCESS; /* bad_alloc: caught and logged */
    memcpy(path, filename, len);
    memcpy(path + len, ".data", 6);
    (void)vam_write_dataset(impl, path); /* "Failed to serialize dataset": logged only */
    free(path);
  }
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsVamanaSerialize(cuvsResources_t res, const char* filename,
                                        cuvsVamanaIndex_t index, bool include_dataset)
{
  DBL_ENTER(cuvsVamanaSerialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = vam_serialize(filename, index, include_dataset);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
