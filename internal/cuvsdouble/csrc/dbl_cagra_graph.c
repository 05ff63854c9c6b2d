/*
 * cuvsdouble CAGRA graph construction and graph search, on the CPU. Written
 * after the structure of cuVS's own (cpp/src/neighbors/detail/cagra/), to
 * give results of the same kind: approximate, deterministic, with the same
 * sentinels and the same failure of selective filters.
 *
 * Build (cuVS: cagra_build.cuh build(), graph_core.cuh optimize()):
 *   1. an intermediate kNN graph of `intermediate` neighbours, self excluded.
 *      cuVS gets it from NN-Descent, IVF-PQ or iterative search, all
 *      approximate; the double computes the exact one and then makes it
 *      approximate in a fixed, seeded way (some entries of each row are
 *      replaced by a neighbour's neighbour), so the graph is close to but not
 *      the exact kNN graph;
 *   2. rank-based detour pruning (kern_fused_prune): for each edge A->B, count
 *      the detours A->D->B through closer neighbours D; keep the `degree`
 *      edges with the fewest detours (ties: closer first);
 *   3. reverse edges (kern_make_rev_graph_k) merged in after the first
 *      degree/2 "protected" forward edges (kern_merge_graphs).
 *
 * Search (cuVS: search_single_cta_kernel / search_multi_cta_kernel):
 *   - itopk + search_width * degree starting candidates, each the best of
 *     num_random_samplings pseudo-random rows, xorshift64(gid ^ rand_xor_mask)
 *     % n, the same for every query;
 *   - each iteration sorts the candidates into the internal top-k list,
 *     picks the search_width best not yet expanded entries as parents and
 *     computes the distances to their graph neighbours not yet visited; it
 *     stops when no parent is left (after min_iterations) or at
 *     max_iterations;
 *   - a bitset filter is applied the way cuVS applies it: filtered nodes are
 *     walked through (expanded) and their slot emptied once expanded, then
 *     removed from the final list; the single-CTA walk keeps its list the way
 *     the kernel's bitonic top-k does (swizzled addresses, the emptied slot
 *     removed in address order, the final compaction that moves nothing: see
 *     move_invalid and the end of walk), which is what makes its recall fall
 *     under a filter like the real library's (issue 18, TestCagraFilterTable);
 *     so a selective filter leaves slots empty (id 0x7FFFFFFF, distance
 *     FLT_MAX);
 *   - multi-CTA (cuVS's choice for small batches): several independent walks
 *     of itopk 32 and search width 1, walks that later start skip nodes an
 *     earlier walk expanded, results merged.
 */
#include "dbl_cagra_graph.h"

#include <float.h>
#include <math.h>

#define MSB 0x80000000u
#define INVALID 0xFFFFFFFFu

/* ---- distances: the CAGRA metrics, arithmetic as in dbl_knn.c ---- */

static float cg_dist(int metric, const float* a, const float* b, int64_t dim)
{
  float s = 0;
  switch (metric) {
    case InnerProduct:
      for (int64_t j = 0; j < dim; j++) s += a[j] * b[j];
      return s;
    case CosineExpanded: {
      float dot = 0, na = 0, nb = 0;
      for (int64_t j = 0; j < dim; j++) {
        dot += a[j] * b[j];
        na += a[j] * a[j];
        nb += b[j] * b[j];
      }
      float den = sqrtf(na) * sqrtf(nb);
      return den == 0 ? 1.0f : 1.0f - dot / den;
    }
    case BitwiseHamming: {
      unsigned n = 0;
      for (int64_t j = 0; j < dim; j++) {
        unsigned x = (unsigned)(uint8_t)(int)a[j] ^ (unsigned)(uint8_t)(int)b[j];
        n += (unsigned)__builtin_popcount(x);
      }
      return (float)n;
    }
    default: /* L2Expanded */
      for (int64_t j = 0; j < dim; j++) {
        float d = a[j] - b[j];
        s += d * d;
      }
      return s;
  }
}

/* Smaller is better. */
static float cg_key(int metric, float v)
{
  float key = metric == InnerProduct ? -v : v;
  return isnan(key) ? FLT_MAX : key;
}

static float* cg_load_all(const dbl_matrix* m)
{
  size_t dim = (size_t)(m->dim > 0 ? m->dim : 1);
  float* f = malloc((size_t)(m->n > 0 ? m->n : 1) * dim * sizeof(float));
  if (!f) return NULL;
  for (int64_t i = 0; i < m->n; i++) {
    dl_load_row(m->base, m->dtype, m->rs, m->cs, i, m->dim, f + (size_t)i * dim);
  }
  return f;
}

static uint64_t xorshift64(uint64_t u)
{
  u ^= u >> 12;
  u ^= u << 25;
  u ^= u >> 27;
  return u * 0x2545F4914F6CDD1DULL;
}

/* ---- build ---- */

/* Exact kNN graph of k neighbours (self excluded), ties to the smaller id. */
static int knn_graph(const float* x, int64_t n, int64_t dim, int metric, int64_t k, uint32_t* out)
{
  float* keys = malloc((size_t)(n * k) * sizeof(float));
  int64_t* cnt = calloc((size_t)n, sizeof(int64_t));
  if (!keys || !cnt) {
    free(keys), free(cnt);
    return -1;
  }
  for (int64_t i = 0; i < n; i++) {
    const float* a = x + i * dim;
    for (int64_t j = i + 1; j < n; j++) {
      float key = cg_key(metric, cg_dist(metric, a, x + j * dim, dim));
      /* into row i (candidate j) and row j (candidate i); every row sees its
       * candidates in increasing id, so ties keep the smaller id first */
      for (int side = 0; side < 2; side++) {
        int64_t r = side ? j : i, c = side ? i : j;
        float* rk = keys + r * k;
        uint32_t* ri = out + r * k;
        if (cnt[r] == k && !(key < rk[k - 1])) continue;
        int64_t pos = cnt[r] < k ? cnt[r] : k - 1;
        while (pos > 0 && key < rk[pos - 1]) {
          rk[pos] = rk[pos - 1];
          ri[pos] = ri[pos - 1];
          pos--;
        }
        rk[pos] = key;
        ri[pos] = (uint32_t)c;
        if (cnt[r] < k) cnt[r]++;
      }
    }
  }
  free(keys), free(cnt);
  return 0;
}

/* Makes the exact kNN graph approximate, as the real builders leave it: in
 * each row, a few entries past the first quarter are replaced by a
 * neighbour's neighbour that is not yet in the row (what NN-Descent converges
 * to when it misses a true neighbour), the row then re-sorted by distance.
 * Deterministic: the choices come from xorshift64 of the row id. */
static void approximate(const float* x, int64_t n, int64_t dim, int metric, int64_t k,
                        uint32_t* g)
{
  if (k < 4 || n <= 2 * k) return; /* small sets: NN-Descent finds everything */
  float* key = malloc((size_t)k * sizeof(float));
  if (!key) return;
  /* ~6% of the entries past the first quarter at low dimension; NN-Descent
   * does much worse on high-dimensional uniform data: from 64 dimensions on,
   * 70% of the entries anywhere in the row (fitted to the real library's
   * recall on 20,000 x 64 uniform data, issue 18's 100% row), linear between */
  int64_t miss = k / 16, lo = k / 4;
  if (dim >= 64) {
    miss = k * 70 / 100, lo = 0;
  } else if (dim > 32) {
    miss = k / 16 + (k * 70 / 100 - k / 16) * (dim - 32) / 32;
    lo = k / 4 - (k / 4) * (dim - 32) / 32;
  }
  for (int64_t i = 0; i < n; i++) {
    uint32_t* row = g + i * k;
    uint64_t r = xorshift64((uint64_t)i * 0x9E3779B97F4A7C15ULL + 1);
    for (int64_t m = 0; m < miss; m++) {
      r = xorshift64(r);
      int64_t slot = lo + (int64_t)(r % (uint64_t)(k - lo));
      r = xorshift64(r);
      uint32_t via = row[r % (uint64_t)(k / 4 > 0 ? k / 4 : 1)];
      r = xorshift64(r);
      uint32_t cand = g[(int64_t)via * k + (int64_t)(k / 2 + r % (uint64_t)(k - k / 2))];
      int dup = cand == (uint32_t)i;
      for (int64_t j = 0; j < k && !dup; j++) dup = row[j] == cand;
      if (!dup) row[slot] = cand;
    }
    for (int64_t j = 0; j < k; j++) {
      key[j] = cg_key(metric, cg_dist(metric, x + i * dim, x + (int64_t)row[j] * dim, dim));
    }
    for (int64_t a = 1; a < k; a++) { /* insertion sort by (key, id) */
      float kk = key[a];
      uint32_t id = row[a];
      int64_t b = a;
      while (b > 0 && (kk < key[b - 1] || (kk == key[b - 1] && id < row[b - 1]))) {
        key[b] = key[b - 1];
        row[b] = row[b - 1];
        b--;
      }
      key[b] = kk;
      row[b] = id;
    }
  }
  free(key);
}

/* Rank-based detour pruning of a kNN graph (k per row) to `degree`. */
static int prune(const uint32_t* knn, int64_t n, int64_t k, int64_t degree, uint32_t* out)
{
  const uint32_t maxval = 0xffff;
  uint32_t* detour = malloc((size_t)k * sizeof(uint32_t));
  int64_t* stamp = malloc((size_t)n * sizeof(int64_t));
  uint32_t* pos = malloc((size_t)n * sizeof(uint32_t));
  if (!detour || !stamp || !pos) {
    free(detour), free(stamp), free(pos);
    return -1;
  }
  for (int64_t i = 0; i < n; i++) stamp[i] = -1;
  for (int64_t a = 0; a < n; a++) {
    const uint32_t* row = knn + a * k;
    for (int64_t j = k - 1; j >= 0; j--) { /* first position of each id */
      detour[j] = row[j] == (uint32_t)a ? (uint32_t)k : 0;
      if (row[j] < (uint64_t)n) {
        stamp[row[j]] = a;
        pos[row[j]] = (uint32_t)j;
      }
    }
    for (int64_t ad = 0; ad + 1 < k; ad++) {
      uint32_t d = row[ad];
      if (d >= (uint64_t)n) continue;
      for (int64_t db = 0; db < k; db++) {
        uint32_t b = knn[(int64_t)d * k + db];
        if (b < (uint64_t)n && stamp[b] == a && pos[b] > ad) detour[pos[b]]++;
      }
    }
    for (int64_t j = 0; j < k; j++) {
      if (detour[j] > maxval) detour[j] = maxval;
      if (row[j] >= (uint64_t)n) detour[j] = maxval;
    }
    uint32_t* o = out + a * degree;
    for (int64_t s = 0; s < degree; s++) {
      uint32_t best = maxval;
      int64_t bj = -1;
      for (int64_t j = 0; j < k; j++) {
        if (detour[j] < best) best = detour[j], bj = j;
      }
      if (bj < 0) { /* not enough distinct neighbours: cuVS flags the row */
        o[s] = INVALID;
        continue;
      }
      uint32_t sel = row[bj];
      for (int64_t j = 0; j < k; j++) {
        if (row[j] == sel) detour[j] = maxval;
      }
      o[s] = sel;
    }
  }
  free(detour), free(stamp), free(pos);
  return 0;
}

/* Reverse edges merged after the protected first half of each row. */
static int merge_reverse(uint32_t* g, int64_t n, int64_t degree)
{
  uint32_t* rev = malloc((size_t)(n * degree) * sizeof(uint32_t));
  uint32_t* cnt = calloc((size_t)n, sizeof(uint32_t));
  if (!rev || !cnt) {
    free(rev), free(cnt);
    return -1;
  }
  for (int64_t k = 0; k < degree; k++) {
    for (int64_t src = 0; src < n; src++) {
      uint32_t dst = g[src * degree + k];
      if (dst >= (uint64_t)n) continue;
      if (cnt[dst] < degree) rev[(int64_t)dst * degree + cnt[dst]] = (uint32_t)src;
      cnt[dst]++;
    }
  }
  int64_t protect = degree / 2;
  for (int64_t v = 0; v < n && protect < degree; v++) {
    uint32_t* row = g + v * degree;
    int64_t kr = cnt[v] < degree ? cnt[v] : degree;
    while (kr > 0) {
      kr--;
      uint32_t r = rev[v * degree + kr];
      int64_t p = degree;
      for (int64_t j = 0; j < degree; j++) {
        if (row[j] == r) {
          p = j;
          break;
        }
      }
      if (p < protect) continue;
      int64_t shift = p >= degree ? degree - protect - 1 : p - protect;
      memmove(row + protect + 1, row + protect, (size_t)shift * sizeof(uint32_t));
      row[protect] = r;
    }
  }
  free(rev), free(cnt);
  return 0;
}

int cg_graph_build(const dbl_matrix* data, int metric, int64_t intermediate, int64_t degree,
                   uint32_t* out)
{
  int64_t n = data->n, dim = data->dim;
  if (n <= 0 || degree <= 0) return 0;
  float* x = cg_load_all(data);
  uint32_t* knn = malloc((size_t)(n * intermediate) * sizeof(uint32_t));
  int rc = -1;
  if (x && knn && knn_graph(x, n, dim, metric, intermediate, knn) == 0) {
    approximate(x, n, dim, metric, intermediate, knn);
    rc = prune(knn, n, intermediate, degree, out);
    if (rc == 0) rc = merge_reverse(out, n, degree);
  }
  free(x), free(knn);
  return rc;
}

/* ---- search ---- */

typedef struct {
  float key, val;
  uint32_t id; /* MSB set: expanded; INVALID: empty */
} cand;

static int cand_cmp(const void* pa, const void* pb)
{
  const cand* a = pa;
  const cand* b = pb;
  if (a->key < b->key) return -1;
  if (a->key > b->key) return 1;
  uint32_t ia = a->id & ~MSB, ib = b->id & ~MSB;
  return ia < ib ? -1 : ia > ib;
}

static int pass(const dbl_filter* f, uint32_t id)
{
  if (!f || f->kind == FILTER_NONE) return 1;
  return (int)((f->words[id >> 5] >> (id & 31)) & 1u);
}

typedef struct {
  const float* x; /* dataset as floats */
  int64_t n, dim, degree;
  const uint32_t* graph;
  int metric;
  const dbl_filter* filter;
  uint32_t* visited;   /* per row: vstamp when this walk has seen it */
  uint32_t* traversed; /* per row: tstamp when a walk of this query expanded it */
  uint32_t vstamp, tstamp;
} walker;

static void set_cand(const walker* w, const float* q, cand* c, uint32_t id)
{
  float v = cg_dist(w->metric, q, w->x + (int64_t)id * w->dim, w->dim);
  c->val = v;
  c->key = cg_key(w->metric, v);
  c->id = id;
}

static void empty(cand* c)
{
  c->key = FLT_MAX;
  c->val = FLT_MAX;
  c->id = INVALID;
}

/* Whether an expanded parent the filter rejects keeps its list slot in the
 * multi-CTA emulation: for half of the rows (a fitted stand-in, kept as it
 * was; the single-CTA walk below follows the real kernel's list instead). */
static int stale_slot(uint32_t id) { return xorshift64((uint64_t)id + 77) % 2 == 0; }

/* ---- the single-CTA kernel's internal top-k list, as the GPU keeps it ----
 *
 * cuVS's single-CTA kernel (search_single_cta_jit.cuh with the bitonic top-k
 * of search_single_cta_device_helpers.cuh, used when search_width * degree
 * <= 256 and itopk <= 256) keeps the list in shared memory at swizzled
 * addresses: logical position j lives at j ^ (j >> 5). Its bitonic merges
 * read and write through that mapping, but move_invalid_to_end_of_list, which
 * removes the slot of a parent the filter rejected, shifts the entries in
 * address order; from position 32 on that leaves the list out of order, and
 * the next bitonic merge (which takes the list as sorted) then drops entries
 * that belonged to the top-k and keeps worse ones. Each rejected parent adds
 * to the disorder: that is why the real search loses recall under a filter
 * much faster than a list that frees the slot cleanly would (fitted before
 * by hand: the stale_slot of the multi-CTA emulation). The final compaction
 * of the valid entries moves nothing (see the end of walk), which gives the
 * sentinels at 10-50% allowed. The double runs the same networks on a
 * logical array. */

static int64_t swz(int64_t j) { return j ^ (j >> 5); }

/* move_invalid_to_end_of_list: the first entry (in address order) whose id
 * is INVALID is removed, the entries at higher addresses move down one
 * address, and the last address gets an empty entry. */
static void move_invalid(cand* lst, int64_t len)
{
  cand phys[256];
  for (int64_t p = 0; p < len; p++) phys[p] = lst[swz(p)];
  int64_t p0 = len;
  for (int64_t p = 0; p < len; p++) {
    if (phys[p].id == INVALID) {
      p0 = p;
      break;
    }
  }
  for (int64_t p = p0; p + 1 < len; p++) phys[p] = phys[p + 1];
  empty(&phys[len - 1]);
  for (int64_t p = 0; p < len; p++) lst[swz(p)] = phys[p];
}

static void cmpx(cand* a, int64_t x, int64_t y)
{
  if (a[x].key != a[y].key && a[x].key > a[y].key) {
    cand t = a[x];
    a[x] = a[y];
    a[y] = t;
  }
}

/* topk_by_bitonic_sort_and_merge: the candidates sorted (only the first
 * min(ncand, itopk) kept), each list entry j replaced by candidate M-1-j when
 * that one is closer, then the bitonic merge network of one warp (N = M/32
 * entries per lane, entry i of lane l at logical position N*l+i). On the
 * first iteration the list is sorted first. */
static void bitonic_merge(cand* lst, int64_t itopk, cand* cands, int64_t ncand, int first)
{
  int64_t M = itopk <= 64 ? 64 : itopk <= 128 ? 128 : 256, N = M / 32;
  cand a[256];
  for (int64_t j = 0; j < M; j++) {
    if (j < itopk) a[j] = lst[j];
    else empty(&a[j]);
  }
  if (first) qsort(a, (size_t)M, sizeof(cand), cand_cmp);
  qsort(cands, (size_t)ncand, sizeof(cand), cand_cmp);
  for (int64_t j = 0; j < M; j++) {
    int64_t k = M - 1 - j;
    if (k >= itopk || k >= ncand) continue;
    if (a[j].key > cands[k].key) a[j] = cands[k];
  }
  for (int64_t c = 16; c >= 1; c >>= 1) {
    for (int64_t l = 0; l < 32; l++) {
      if (l & c) continue;
      for (int64_t i = 0; i < N; i++) cmpx(a, N * l + i, N * (l | c) + i);
    }
  }
  for (int64_t c = N / 2; c >= 1; c >>= 1) {
    for (int64_t l = 0; l < 32; l++) {
      for (int64_t i = 0; i < N; i++) {
        if (!(i & c)) cmpx(a, N * l + i, N * l + (i | c));
      }
    }
  }
  for (int64_t j = 0; j < itopk; j++) lst[j] = a[j];
}

enum { WALK_MULTI, WALK_RADIX, WALK_BITONIC };

/* One walk; leaves the sorted internal list in buf[0..itopk) and the last
 * candidates after it (WALK_BITONIC: the kernel's k results first, the rest
 * empty). Returns the number of entries in buf. */
static int64_t walk(walker* w, const float* q, cand* buf, int64_t itopk, int64_t width,
                    int64_t min_iter, int64_t max_iter, int64_t samplings, uint64_t mask,
                    uint32_t block, uint32_t n_blocks, int mode, int64_t k)
{
  int64_t cap = itopk + width * w->degree;
  /* random starting nodes, the best of `samplings` each */
  for (int64_t i = 0; i < cap; i++) {
    empty(&buf[i]);
    float best = FLT_MAX;
    uint32_t bid = INVALID;
    float bval = FLT_MAX;
    for (int64_t j = 0; j < samplings; j++) {
      uint64_t gid = (uint64_t)block + (uint64_t)n_blocks * (uint64_t)(i + cap * j);
      uint32_t id = (uint32_t)(xorshift64(gid ^ mask) % (uint64_t)w->n);
      cand c;
      set_cand(w, q, &c, id);
      if (c.key < best) best = c.key, bid = id, bval = c.val;
    }
    if (bid == INVALID) continue;
    if (w->visited[bid] == w->vstamp) continue;
    w->visited[bid] = w->vstamp;
    if (w->traversed && w->traversed[bid] == w->tstamp) continue;
    buf[i].key = best, buf[i].val = bval, buf[i].id = bid;
  }
  int64_t parents[64];
  if (width > 64) width = 64;
  int rejected = 0;
  int64_t last = 0; /* the last iteration run */
  for (int64_t iter = 0;; iter++) {
    last = iter;
    if (mode == WALK_BITONIC) {
      for (int r = 0; rejected && r < width; r++) move_invalid(buf, itopk);
      rejected = 0;
      bitonic_merge(buf, itopk, buf + itopk, cap - itopk, iter == 0);
    } else {
      qsort(buf, (size_t)cap, sizeof(cand), cand_cmp);
    }
    if (iter + 1 == max_iter) break;
    int64_t np = 0;
    for (int64_t i = 0; i < itopk && np < width; i++) {
      if (buf[i].id & MSB) continue; /* expanded or empty */
      buf[i].id |= MSB;
      parents[np++] = i;
    }
    if (np == 0 && iter >= min_iter) break;
    int64_t c = itopk;
    for (int64_t p = 0; p < np; p++) {
      uint32_t pid = buf[parents[p]].id & ~MSB;
      if (w->traversed) w->traversed[pid] = w->tstamp;
      for (int64_t j = 0; j < w->degree; j++, c++) {
        uint32_t child = w->graph[(int64_t)pid * w->degree + j];
        empty(&buf[c]);
        if (child >= (uint64_t)w->n || w->visited[child] == w->vstamp) continue;
        w->visited[child] = w->vstamp;
        if (w->traversed && w->traversed[child] == w->tstamp) continue;
        set_cand(w, q, &buf[c], child);
      }
    }
    for (; c < cap; c++) empty(&buf[c]);
    /* expanded parents the filter rejects leave the list, as in cuVS (the
     * bitonic kernel moves the emptied slot to the end at the start of the
     * next iteration); in the multi-CTA emulation half of them keep their
     * slot (stale_slot) */
    for (int64_t p = 0; p < np; p++) {
      uint32_t pid = buf[parents[p]].id & ~MSB;
      if (pass(w->filter, pid)) continue;
      if (mode == WALK_MULTI && stale_slot(pid)) continue;
      empty(&buf[parents[p]]);
      rejected = 1;
    }
  }
  /* final filtering over everything held, then the valid entries first */
  for (int64_t i = 0; i < cap; i++) {
    if (buf[i].id != INVALID && !pass(w->filter, buf[i].id & ~MSB)) empty(&buf[i]);
  }
  if (mode != WALK_BITONIC) {
    qsort(buf, (size_t)cap, sizeof(cand), cand_cmp);
    return cap;
  }
  /* the kernel then compacts the valid entries to the front, but its test
   * of validity ((id & ~MSB) == INVALID) is never true: nothing moves, and
   * the entries the final filtering removed stay empty in place. Only when
   * the k-th address is empty are the last candidates (the children merged
   * in the last iteration, whose valid ones may be in the list already) merged
   * in, once more without sorting the list first (the test reads address
   * k-1, the output logical positions 0..k-1). The first k entries are
   * the result; where one is empty the query gets a sentinel even though
   * valid entries further down the list were found. The double takes the
   * same entries (a repeat of an entry taken becomes a sentinel too), in
   * order of distance. */
  if (k > 0 && (k > itopk || buf[swz(k - 1)].id == INVALID)) {
    bitonic_merge(buf, itopk, buf + itopk, cap - itopk, last == 0);
  }
  cand res[256];
  int64_t got = 0;
  for (int64_t i = 0; i < k && i < itopk; i++) { /* the output reads logical positions */
    cand c = buf[i];
    if (c.id == INVALID) continue;
    int dup = 0;
    for (int64_t j = 0; j < got && !dup; j++) dup = (res[j].id & ~MSB) == (c.id & ~MSB);
    if (!dup) res[got++] = c;
  }
  for (int64_t i = 0; i < cap; i++) {
    if (i < got) buf[i] = res[i];
    else empty(&buf[i]);
  }
  return cap;
}

int cg_graph_search(const dbl_matrix* data, const uint32_t* graph, int64_t degree, int metric,
                    const dbl_filter* filter, const dbl_matrix* queries, int64_t k,
                    const cg_search_cfg* cfg, uint32_t* nb32, int64_t* nb64, float* dist)
{
  int64_t n = data->n, dim = data->dim;
  int multi = cfg->multi_cta;
  int64_t itopk = multi ? 32 : cfg->itopk, width = multi ? 1 : cfg->width;
  int64_t walks = multi ? cfg->n_cta : 1;
  int64_t cap = itopk + width * degree;
  /* the kernel's top-k: bitonic for up to 256 candidates and itopk <= 256.
   * An itopk of 257-512 takes a two-warp bitonic merge with the same
   * move_invalid and final compaction, which the double does not copy: it
   * runs those, like the radix top-k (more than 256 candidates), with a
   * cleanly sorted list, kinder under a filter than the real kernel */
  int mode = multi ? WALK_MULTI
                   : width * degree <= 256 && itopk <= 256 ? WALK_BITONIC : WALK_RADIX;
  float* x = n > 0 ? cg_load_all(data) : NULL;
  float* q = malloc((size_t)(dim > 0 ? dim : 1) * sizeof(float));
  cand* buf = malloc((size_t)cap * sizeof(cand));
  cand* all = malloc((size_t)(walks * itopk + k) * sizeof(cand));
  uint32_t* visited = calloc((size_t)(n > 0 ? n : 1), sizeof(uint32_t));
  uint32_t* traversed = multi ? calloc((size_t)(n > 0 ? n : 1), sizeof(uint32_t)) : NULL;
  if ((n > 0 && !x) || !q || !buf || !all || !visited || (multi && !traversed)) {
    free(x), free(q), free(buf), free(all), free(visited), free(traversed);
    return -1;
  }
  walker w = {x, n, dim, degree, graph, metric, filter, visited, traversed, 0, 0};
  for (int64_t qi = 0; qi < queries->n; qi++) {
    dl_load_row(queries->base, queries->dtype, queries->rs, queries->cs, qi, dim, q);
    int64_t got = 0;
    if (n > 0) {
      for (int64_t b = 0; b < walks; b++) {
        w.vstamp = (uint32_t)(qi * walks + b + 1);
        w.tstamp = (uint32_t)(qi + 1);
        int64_t m = walk(&w, q, buf, itopk, width, cfg->min_iter, cfg->max_iter, cfg->samplings,
                         cfg->xor_mask, (uint32_t)b, (uint32_t)walks, mode, k);
        for (int64_t i = 0; i < m && i < itopk; i++) {
          if (buf[i].id == INVALID) break;
          uint32_t id = buf[i].id & ~MSB;
          int dup = 0;
          for (int64_t j = 0; j < got && !dup; j++) dup = (all[j].id & ~MSB) == id;
          if (!dup) all[got++] = buf[i];
        }
        if (!multi && got < k) { /* not enough in the list: take from the candidates */
          for (int64_t i = itopk; i < m && got < k; i++) {
            if (buf[i].id == INVALID) break;
            all[got++] = buf[i];
          }
        }
      }
    }
    qsort(all, (size_t)got, sizeof(cand), cand_cmp);
    /* the sentinel distance after cuVS's post-processing (cagra_search.cuh):
     * FLT_MAX negated for inner product, divided by the query norm plus one
     * for cosine (+Inf for a query norm below one) */
    float none = FLT_MAX;
    if (metric == InnerProduct) none = -FLT_MAX;
    if (metric == CosineExpanded) {
      float qn = 0;
      for (int64_t j = 0; j < dim; j++) qn += q[j] * q[j];
      qn = sqrtf(qn);
      none = qn == 0 ? FLT_MAX : FLT_MAX / qn + 1.0f;
    }
    for (int64_t j = 0; j < k; j++) {
      int ok = j < got;
      uint32_t id = ok ? all[j].id & ~MSB : CG_SENTINEL_ID;
      if (nb32) nb32[qi * k + j] = id;
      if (nb64) nb64[qi * k + j] = (int64_t)id;
      if (dist) dist[qi * k + j] = ok ? all[j].val : none;
    }
  }
  free(x), free(q), free(buf), free(all), free(visited), free(traversed);
  return 0;
}
