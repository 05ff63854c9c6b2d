/*
 * cuvsdouble Vamana (cuvs/neighbors/vamana.h): params, index handles, build
 * and serialization (there is no search in the C API).
 *
 * Build follows cuVS's batched insertion (batched_insert_vamana): batches
 * of 1, batch_base, batch_base^2, ... rows up to max_fraction of them, in a
 * random order; in a batch each row is found by a greedy search from the
 * medoid (a random row, as in cuVS) over the graph as it was before the
 * batch, its first visited_size expanded rows become its candidates, and
 * RobustPrune merges them with the row's edges; then every new edge's
 * destination gets the sources as a reverse list, merged and pruned the same
 * way. The merge, the prune and the write are cuVS's own (see vam_prune):
 * repeats are dropped only head to head, a merge no longer than the degree
 * is written unpruned, and a shorter result leaves the row's old tail in
 * place, so rows may hold the same neighbour more than once, as real graphs
 * do. Unfilled slots hold UINT32_MAX (raft::upper_bound). Distances are
 * squared L2; the double's greedy search is a plain beam search.
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
 *   - a dataset in pageable host memory (kDLCPU) makes the real kernels
 *     read a host pointer (cuVS issue #1380): cudaErrorIllegalAddress, and
 *     the process's CUDA context is lost; the double records a violation
 *     and fails with that error;
 *   - GreedySearchKernel's dynamic shared memory (the row padded to 16
 *     elements, 4 bytes per degree, 16 per queue_size) above 48 KiB fails
 *     the launch (cudaErrorInvalidValue): the double fails the same way;
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
/* 48 KiB of shared memory a kernel gets without opting in, less 64 bytes
 * for GreedySearchKernel's static __shared__ variables */
#define VAM_SMEM_LIMIT (48u * 1024u - 64u)

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
  /* greedy-search scratch */
  vam_cand* list;     /* L best candidates, sorted */
  uint8_t* expanded;  /* per list entry */
  uint32_t* visited;  /* expanded ids, in the order expanded */
  int64_t n_visited;
  uint32_t* mark;     /* per row: stamp when seen in this search */
  uint32_t stamp;
  /* prune scratch: R + L entries */
  vam_cand* merged;
  float* occl;
  uint8_t* accepted;
} vam_ctx;

/* Greedy search for row q from start: the first L rows expanded land in
 * visited (cuVS's QueryCandidates holds visited_size of them). */
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
    if (c->n_visited < c->L) c->visited[c->n_visited++] = p;
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

static void vam_sort_by_dist(vam_cand* v, int64_t m)
{
  /* insertion sort: stable, by distance only (cuVS's CmpDist) */
  for (int64_t i = 1; i < m; i++) {
    vam_cand x = v[i];
    int64_t j = i;
    while (j > 0 && v[j - 1].d > x.d) {
      v[j] = v[j - 1];
      j--;
    }
    v[j] = x;
  }
}

/* RobustPruneKernel + SortPairsKernel(degree) + write_graph_edges_kernel for
 * row q and its candidate list cand[0..m) (dists to q; UINT32_MAX ends it),
 * as cuVS does them (robust_prune.cuh, greedy_search.cuh, vamana_structs.cuh):
 *   - the row's edges (up to its first UINT32_MAX) and the candidates are
 *     merged by comparing the two heads' distances; a repeat is dropped only
 *     when the graph's head is the same row as the list's head at the moment
 *     the list's is taken, so neither list needs to be sorted and repeats
 *     survive when they are not met head to head;
 *   - only a merge longer than the degree is pruned (passes of alpha 1, 1.2,
 *     1.44, ... up to alpha; a candidate occluded by an accepted one by a
 *     factor above the pass's alpha waits, the row itself is never
 *     accepted; a repeat of an accepted row is occluded by d/0 = inf);
 *     compaction keeps entry 0 in place and moves the accepted entries from
 *     1 on behind it;
 *   - the result is sorted by distance only for degrees 64 and up (there is
 *     no sort size for 32: SEARCH_SELECT_SORT starts at 64 for topk > 32);
 *   - only the result's entries are written: a row that had more edges keeps
 *     its old ones after them (a stale tail, repeats included).
 * Returns how many entries were written (the reverse edges' sources). */
static int64_t vam_prune(vam_ctx* c, int64_t q, const vam_cand* cand, int64_t m)
{
  const int64_t R = c->R, L = c->L;
  uint32_t* g = c->graph + q * R;
  vam_cand* out = c->merged;
  int64_t gi = 0, li = 0, res_size = R + L;
  for (int64_t o = 0; o < R + L; o++) {
    if (gi < R && g[gi] == UINT32_MAX) gi = R;
    if (li < L && (li >= m || cand[li].id == UINT32_MAX)) li = L;
    vam_cand next;
    if (gi >= R) {
      if (li >= L) {
        if (res_size > o) res_size = o;
        out[o] = (vam_cand){FLT_MAX, UINT32_MAX};
        continue;
      }
      next = cand[li++];
    } else if (li >= L) {
      next = (vam_cand){vam_dist(c->data, q, g[gi]), g[gi]};
      gi++;
    } else {
      float gd = vam_dist(c->data, q, g[gi]);
      if (cand[li].d <= gd) {
        next = cand[li];
        if (g[gi] == cand[li].id) gi++;
        li++;
      } else {
        next = (vam_cand){gd, g[gi]};
        gi++;
      }
    }
    out[o] = next;
  }
  int64_t size = res_size;
  if (res_size > R) {
    for (int64_t i = 0; i < res_size; i++) c->occl[i] = 0, c->accepted[i] = 0;
    int64_t accept = 0;
    for (float a = 1.0f; a <= c->alpha && accept < R; a *= 1.2) {
      for (int64_t ps = 0; ps < res_size && accept < R; ps++) {
        if (c->accepted[ps] || c->occl[ps] > a) continue;
        if (out[ps].id == (uint32_t)q) continue;
        c->accepted[ps] = 1;
        accept++;
        for (int64_t k = ps + 1; k < res_size; k++) {
          if (c->occl[k] <= c->alpha && !c->accepted[k]) {
            float djk = vam_dist(c->data, out[ps].id, out[k].id);
            float occ = out[k].d / djk;
            if (c->occl[k] < occ) c->occl[k] = occ; /* std::max */
          }
        }
      }
    }
    int64_t oi = 1;
    for (int64_t ri = 1; oi < accept && ri < res_size; ri++)
      if (c->accepted[ri]) out[oi++] = out[ri];
    size = accept;
  }
  if (R >= 64) vam_sort_by_dist(out, size);
  for (int64_t j = 0; j < size; j++) g[j] = out[j].id;
  return size;
}

typedef struct {
  uint32_t dest, src;
  float d;
} vam_edge;

static int vam_edge_cmp(const void* a, const void* b)
{
  const vam_edge* x = a;
  const vam_edge* y = b;
  if (x->dest != y->dest) return x->dest < y->dest ? -1 : 1;
  if (x->d != y->d) return x->d < y->d ? -1 : 1;
  return x->src < y->src ? -1 : (x->src > y->src);
}

/* batched_insert_vamana (vamana_build.cuh): batches of 1, base, base^2, ...
 * rows up to max_batch, in a random order, iters times over the rows. In a
 * batch every greedy search reads the graph as it was before the batch;
 * each row's list is pruned and written; then each destination of the new
 * edges gets its sources (at most L, by distance) as a reverse list, pruned
 * with its row the same way. Returns 0, or -1 on allocation failure. */
static int vam_build_graph(const vam_data* data, int64_t n, int64_t R, int L, float alpha,
                           float iters, int max_batch, double base, uint32_t* graph,
                           uint32_t* medoid)
{
  for (int64_t i = 0; i < n * R; i++) graph[i] = UINT32_MAX;
  uint64_t seed = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
  *medoid = (uint32_t)(vam_rng(&seed) % (uint64_t)n);
  vam_ctx c = {.data = data, .graph = graph, .n = n, .R = R, .L = L, .alpha = alpha};
  c.list = malloc((size_t)L * sizeof(vam_cand));
  c.expanded = malloc((size_t)L);
  c.visited = malloc((size_t)L * sizeof(uint32_t));
  c.mark = calloc((size_t)n, sizeof(uint32_t));
  c.merged = malloc((size_t)(R + L) * sizeof(vam_cand));
  c.occl = malloc((size_t)(R + L) * sizeof(float));
  c.accepted = malloc((size_t)(R + L));
  uint32_t* order = malloc((size_t)n * sizeof(uint32_t));
  vam_cand* lists = malloc((size_t)max_batch * (size_t)L * sizeof(vam_cand));
  int64_t* counts = malloc((size_t)max_batch * sizeof(int64_t));
  vam_edge* edges = malloc((size_t)max_batch * (size_t)R * sizeof(vam_edge));
  vam_cand* rev = malloc((size_t)L * sizeof(vam_cand));
  int rc = 0;
  if (!c.list || !c.expanded || !c.visited || !c.mark || !c.merged || !c.occl || !c.accepted ||
      !order || !lists || !counts || !edges || !rev) {
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
  int step = 1;
  for (int start = 0; start < (int)(iters * (float)n);) {
    int total = (int)(iters * (float)n);
    if (start + step > total) step = total - start;
    if (start + step > n) step = (int)n - start;
    /* greedy searches over the graph before the batch */
    for (int b = 0; b < step; b++) {
      int64_t q = order[start + b];
      vam_greedy(&c, *medoid, q);
      vam_cand* l = lists + (int64_t)b * L;
      int64_t m = 0;
      for (int64_t i = 0; i < c.n_visited; i++) {
        if (c.visited[i] == (uint32_t)q) continue; /* self edges removed */
        l[m++] = (vam_cand){vam_dist(data, q, c.visited[i]), c.visited[i]};
      }
      vam_sort_by_dist(l, m);
      counts[b] = m;
    }
    /* prune and write each row */
    int64_t ne = 0;
    for (int b = 0; b < step; b++) {
      int64_t q = order[start + b];
      int64_t size = vam_prune(&c, q, lists + (int64_t)b * L, counts[b]);
      for (int64_t j = 0; j < size; j++) {
        uint32_t d = graph[q * R + j];
        edges[ne++] = (vam_edge){d, (uint32_t)q, vam_dist(data, q, d)};
      }
    }
    /* reverse edges, grouped by destination */
    qsort(edges, (size_t)ne, sizeof(vam_edge), vam_edge_cmp);
    for (int64_t e = 0; e < ne;) {
      int64_t f = e;
      while (f < ne && edges[f].dest == edges[e].dest) f++;
      int64_t m = 0;
      for (int64_t x = e; x < f && m < L; x++) rev[m++] = (vam_cand){edges[x].d, edges[x].src};
      vam_prune(&c, edges[e].dest, rev, m);
      e = f;
    }
    start += step;
    if (start >= n) {
      start = 0;
      iters -= 1.0f;
      step = max_batch;
    }
    step = (int)(step * base);
    if (step > max_batch) step = max_batch;
  }
out:
  free(c.list), free(c.expanded), free(c.visited), free(c.mark), free(c.merged), free(c.occl);
  free(c.accepted), free(order), free(lists), free(counts), free(edges), free(rev);
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
  size_t es = dl_elem_size(t->dtype);
  /* GreedySearchKernel's dynamic shared memory: the query row padded to 16
   * elements, the degree's neighbour ids and queue_size 16-byte DistPairs;
   * cuVS never raises the kernel's limit, so above 48 KiB (less its static
   * variables) the launch fails (cudaPeekAtLastError after it). */
  uint64_t smem = (uint64_t)((dim + 15) / 16 * 16) * es + (uint64_t)R * 4 + (uint64_t)p.queue_size * 16;
  if (n > 0 && smem > VAM_SMEM_LIMIT) {
    return dbl_plain_fail("CUDA error encountered at: file=cpp/src/neighbors/detail/vamana/"
                          "vamana_build.cuh line=258: call='cudaPeekAtLastError()', "
                          "Reason=cudaErrorInvalidValue:invalid argument");
  }
  if (n > 0 && where == WANT_HOST) {
    /* The host path hands the host pointer to GreedySearchKernel, which
     * reads the rows from the GPU (cuVS issue #1380): the kernel faults and
     * every later CUDA call of the process fails. */
    dbl_violation("cuvsVamanaBuild of a dataset in pageable host memory (kDLCPU): the real "
                  "library's kernels read the host pointer, raise cudaErrorIllegalAddress and "
                  "leave the CUDA context unusable");
    return dbl_plain_fail("CUDA error encountered at: file=cpp/src/neighbors/detail/vamana/"
                          "vamana_build.cuh line=271: call='cudaPeekAtLastError()', "
                          "Reason=cudaErrorIllegalAddress:an illegal memory access was "
                          "encountered");
  }
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
  int rc = n > 0 ? vam_build_graph(&d, n, R, L, p.alpha, p.vamana_iters, max_batch,
                                   (double)p.batch_base, impl->graph, &impl->medoid)
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
