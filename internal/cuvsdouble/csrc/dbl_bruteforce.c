/*
 * cuvsdouble brute force: exact kNN on the CPU. Like cuVS, the index keeps a
 * pointer to the dataset it was built from (it never copies it) and the
 * dataset must be "device" memory (any host pointer labelled kDLCUDA,
 * kDLCUDAHost or kDLCUDAManaged). Row-major and column-major datasets and
 * queries are accepted, f32 and f16; neighbors are int64, distances f32;
 * bitset and bitmap filters, with what cuVS does when a filter lets fewer
 * than k rows through (bf_filtered below). Build takes any metric value;
 * the search refuses what cuVS's does (bf_unfiltered_check below) and
 * computes the others as cuVS's distance ops do (dbl_knn.c).
 */
#include "dbl.h"

#include <float.h>
#include <math.h>

#define BF_MAGIC 0x4246494e44455831ULL

typedef struct {
  uint64_t magic;
  DLDataType dtype;
  int64_t n, dim;
  int metric;
  float metric_arg;
  const void* data;
  int64_t rs, cs;
  void* owned; /* deserialized indexes own their data */
  size_t owned_bytes;
  uint64_t borrow_id; /* registry id of the allocation holding a borrowed dataset */
  /* What cuVS's index holds on the device (detail/knn_brute_force.cuh,
   * build; brute_force.cu, index): float norms of the rows for
   * L2Expanded, L2SqrtExpanded and CosineExpanded, and a row-major copy of
   * a column-major dataset. A row-major device dataset is referenced. */
  dbl_dev_block dev;
  pthread_rwlock_t lock;
} bf_impl;

static cuvsError_t bf_handle(cuvsBruteForceIndex_t index)
{
  if (dbl_reg_find(index, NULL) != K_BF_INDEX) {
    dbl_violation("invalid or destroyed cuvsBruteForceIndex_t %p (the real library would crash)",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsBruteForceIndex_t %p", (void*)index);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t bf_impl_of(cuvsBruteForceIndex_t index, bf_impl** out)
{
  TRY(bf_handle(index));
  bf_impl* impl = (bf_impl*)index->addr;
  if (dbl_reg_find(impl, NULL) != K_BF_IMPL) {
    dbl_violation("brute-force index %p holds no built index (addr %#lx; the real library would "
                  "dereference it)",
                  (void*)index, (unsigned long)index->addr);
    return RAFT_FAIL("cuvsdouble: the brute-force index was not built");
  }
  *out = impl;
  return CUVS_SUCCESS;
}

static void bf_impl_free(bf_impl* impl)
{
  if (pthread_rwlock_trywrlock(&impl->lock) != 0) {
    dbl_violation("brute-force index destroyed while another thread uses it");
    pthread_rwlock_wrlock(&impl->lock);
  }
  dbl_reg_borrow(impl->borrow_id, -1);
  dbl_buf_free(impl->owned, impl->owned_bytes);
  dbl_dev_give(&impl->dev);
  pthread_rwlock_unlock(&impl->lock);
  pthread_rwlock_destroy(&impl->lock);
  impl->magic = 0;
  free(impl);
}

static bf_impl* bf_impl_new(void)
{
  bf_impl* impl = calloc(1, sizeof(bf_impl));
  if (!impl) return NULL;
  impl->magic = BF_MAGIC;
  pthread_rwlock_init(&impl->lock, NULL);
  return impl;
}

static void bf_install(cuvsBruteForceIndex_t index, bf_impl* impl)
{
  if (index->addr != 0) {
    dbl_violation("writing a new index into a cuvsBruteForceIndex_t that already holds one: the "
                  "real library leaks the previous one (so does the double)");
  }
  dbl_reg_add(impl, K_BF_IMPL, sizeof(bf_impl));
  index->addr = (uintptr_t)impl;
}

DBL_API cuvsError_t cuvsBruteForceIndexCreate(cuvsBruteForceIndex_t* index)
{
  DBL_ENTER(cuvsBruteForceIndexCreate);
  if (!index) {
    dbl_violation("NULL cuvsBruteForceIndex_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  cuvsBruteForceIndex* h = calloc(1, sizeof(cuvsBruteForceIndex));
  if (!h) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(h, K_BF_INDEX, sizeof *h);
  dbl_res_owner_reset(h);
  *index = h;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsBruteForceIndexDestroy(cuvsBruteForceIndex_t index)
{
  DBL_ENTER(cuvsBruteForceIndexDestroy);
  if (dbl_reg_remove(index, K_BF_INDEX, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsBruteForceIndex_t %p",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsBruteForceIndex_t %p", (void*)index);
  }
  dbl_res_owner_destroy(index, "cuvsBruteForceIndexDestroy");
  bf_impl* impl = (bf_impl*)index->addr;
  if (impl) {
    if (dbl_reg_remove(impl, K_BF_IMPL, NULL, NULL) == 0) {
      bf_impl_free(impl);
    } else {
      dbl_violation("cuvsBruteForceIndexDestroy: addr %p is not a live index", (void*)impl);
    }
  }
  free(index);
  return dbl_ok();
}

static cuvsError_t bf_build(DLManagedTensor* dataset, cuvsDistanceType metric, float metric_arg,
                            cuvsBruteForceIndex_t index)
{
  TRY(bf_handle(index));
  TRY(dl_check_ptr(dataset, "dataset"));
  const DLTensor* t = &dataset->dl_tensor;
  index->dtype = t->dtype;
  int layout;
  if (dl_is_dtype(t->dtype, kDLFloat, 32) || dl_is_dtype(t->dtype, kDLFloat, 16)) {
    if (dl_c_contig(t)) {
      layout = LAYOUT_ROW;
    } else if (dl_f_contig(t)) {
      layout = LAYOUT_COL;
    } else {
      return RAFT_FAIL("dataset input to cuvsBruteForceBuild must be contiguous (non-strided)");
    }
  } else {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)t->dtype.code,
                     (int)t->dtype.bits);
  }
  TRY(dl_view(dataset, layout, kDLFloat, t->dtype.bits, WANT_DEVICE, 2));
  TRY(dl_strict(t, "dataset"));
  /* cuVS's build takes any metric value (it only computes norms for the
   * expanded ones): an unsupported one is refused by the search */
  if (metric == LpUnexpanded && !(metric_arg > 0)) {
    return RAFT_FAIL("cuvsdouble: LpUnexpanded needs metric_arg > 0, got %g", (double)metric_arg);
  }
  bf_impl* impl = bf_impl_new();
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  impl->dtype = t->dtype;
  impl->n = t->shape[0];
  impl->dim = t->shape[1];
  impl->metric = (int)metric;
  impl->metric_arg = metric_arg;
  impl->data = t->data;
  impl->rs = layout == LAYOUT_ROW ? impl->dim : 1;
  impl->cs = layout == LAYOUT_ROW ? 1 : impl->n;
  dbl_entry e;
  size_t bytes = (size_t)(impl->n * impl->dim) * dl_elem_size(t->dtype);
  uint64_t dev = 0;
  if (metric == L2Expanded || metric == L2SqrtExpanded || metric == CosineExpanded) {
    dev += ((uint64_t)impl->n * 4 + 255) / 256 * 256;
  }
  if (layout == LAYOUT_COL) dev += ((uint64_t)bytes + 255) / 256 * 256;
  cuvsError_t st = dbl_dev_take(dev, &impl->dev);
  if (st != CUVS_SUCCESS) {
    bf_impl_free(impl);
    return st;
  }
  if (bytes > 0 && dbl_reg_containing(t->data, bytes, &e)) {
    impl->borrow_id = e.id;
    dbl_reg_borrow(e.id, +1);
  }
  bf_install(index, impl);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsBruteForceBuild(cuvsResources_t res, DLManagedTensor* dataset,
                                        cuvsDistanceType metric, float metric_arg,
                                        cuvsBruteForceIndex_t index)
{
  DBL_ENTER(cuvsBruteForceBuild);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_used_by(r, index);
  cuvsError_t st = bf_build(dataset, metric, metric_arg, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* Shared by brute force and CAGRA: validates a bitset/bitmap filter tensor. */
DBL_HIDDEN cuvsError_t dbl_filter_view(cuvsFilter f, int64_t n_rows, int64_t n_queries,
                                       dbl_filter* out)
{
  out->kind = FILTER_NONE;
  out->words = NULL;
  if (f.type == NO_FILTER) return CUVS_SUCCESS;
  DLManagedTensor* mt = (DLManagedTensor*)f.addr;
  TRY(dl_check_ptr(mt, "filter"));
  TRY(dl_view(mt, LAYOUT_ROW, kDLUInt, 32, WANT_DEVICE, 1));
  TRY(dl_strict(&mt->dl_tensor, "filter"));
  int64_t bits = f.type == BITMAP ? n_rows * n_queries : n_rows;
  int64_t need = (bits + 31) / 32;
  if (mt->dl_tensor.shape[0] < need) {
    dbl_violation("the %s filter has %lld uint32 words but %lld rows need %lld (the real library "
                  "reads past its end)",
                  f.type == BITMAP ? "bitmap" : "bitset", (long long)mt->dl_tensor.shape[0],
                  (long long)bits, (long long)need);
    return RAFT_FAIL("cuvsdouble: filter too short: %lld words, %lld needed",
                     (long long)mt->dl_tensor.shape[0], (long long)need);
  }
  out->kind = f.type == BITMAP ? FILTER_BITMAP : FILTER_BITSET;
  out->words = (const uint32_t*)mt->dl_tensor.data;
  return CUVS_SUCCESS;
}

/* ---- filtered search ----
 * cuVS (cpp/src/neighbors/detail/knn_brute_force.cuh, brute_force_search_
 * filtered) counts the rows the filter lets through, nnz, over all queries
 * (a bitset's count times the number of queries) and picks a path by
 * sparsity = 1 - nnz / (queries * rows), computed in float:
 *  - sparsity < 0.9: dense distances, the filtered-out ones replaced by
 *    +infinity (the lowest float for InnerProduct), then a top-k over all
 *    rows. A query that sees fewer than k rows gets, after its allowed
 *    rows, rows the filter excluded with those distances. Which excluded
 *    rows is not known (cuVS's select_k is not stable); the double takes
 *    the smallest ids.
 *  - otherwise: distances only at the allowed (query, row) pairs (a CSR
 *    matrix), then raft::sparse::matrix::select_k, which returns at once,
 *    writing nothing, when nnz is 0, and leaves the outputs of a query with
 *    fewer than k entries uninitialised: on an H200 ids such as
 *    10179072491519 and -4294948285 and NaN distances came back, with none
 *    of the allowed rows (a bitset allowing 3 or 50 of 20,000 rows). The
 *    double writes such values, deterministically, into every slot of such
 *    a query. Whether the other queries of a bitmap search stay exact is
 *    not known (the double keeps them exact). */

/* the number of rows query q may see */
static int64_t bf_allowed(const dbl_filter* f, int64_t q, int64_t n)
{
  int64_t base = f->kind == FILTER_BITMAP ? q * n : 0, c = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t b = base + i;
    c += (f->words[b >> 5] >> (b & 31)) & 1u;
  }
  return c;
}

/* what uninitialised device memory looked like on an H200: large positive
 * ids with the low word all ones and negative ones with a small low word */
static int64_t bf_garbage_id(int64_t q, int64_t j)
{
  if ((q + j) % 2 == 0) return (int64_t)(((uint64_t)(0x941 + q) << 32) | (0xFFFFFFFFu - (uint32_t)j));
  return (int64_t)(0xFFFFFFFF00000000ULL | (uint64_t)(0x4A43 + 7 * q + j));
}

static cuvsError_t bf_filtered(const bf_impl* impl, const dbl_matrix* data, const dbl_matrix* qm,
                               int64_t k, const dbl_filter* filter, int64_t* nb, float* ds)
{
  int64_t nq = qm->n, n = impl->n;
  int64_t* cnt = malloc((size_t)(nq > 0 ? nq : 1) * sizeof(int64_t));
  if (!cnt) return dbl_plain_fail("std::bad_alloc");
  int64_t nnz = 0;
  for (int64_t q = 0; q < nq; q++) nnz += cnt[q] = bf_allowed(filter, q, n);
  float sparsity = (float)(1.0 - (double)nnz / (1.0 * (double)nq * (double)n));
  int sparse = !(sparsity < 0.9f);
  if (sparse && nnz == 0) { /* select_k returns before writing anything */
    free(cnt);
    return CUVS_SUCCESS;
  }
  if (knn_search(data, qm, impl->metric, impl->metric_arg, k, filter, 0, nb, NULL, k, ds, k) != 0) {
    free(cnt);
    return dbl_plain_fail("std::bad_alloc");
  }
  float masked = impl->metric == InnerProduct ? -FLT_MAX : INFINITY;
  for (int64_t q = 0; q < nq; q++) {
    if (cnt[q] >= k) continue;
    if (sparse) {
      for (int64_t j = 0; j < k; j++) {
        nb[q * k + j] = bf_garbage_id(q, j);
        ds[q * k + j] = NAN;
      }
      continue;
    }
    int64_t j = cnt[q];
    int64_t base = filter->kind == FILTER_BITMAP ? q * n : 0;
    for (int64_t i = 0; i < n && j < k; i++) {
      int64_t b = base + i;
      if ((filter->words[b >> 5] >> (b & 31)) & 1u) continue;
      nb[q * k + j] = i;
      ds[q * k + j] = masked;
      j++;
    }
  }
  free(cnt);
  return CUVS_SUCCESS;
}

/* The metrics of an unfiltered search (knn_brute_force.cuh,
 * brute_force_knn_impl, the same in 26.06 and 26.08): Haversine goes to
 * haversine_knn, which ASSERTs 2 dimensions; every other metric to
 * tiled_brute_force_knn (or, for the L2 ones with k <= 64, fusedL2Knn),
 * whose cuvs::distance::pairwise_distance dispatches on the 16 metrics of
 * cuvsPairwiseDistance and THROWs on any other (BrayCurtis,
 * JaccardExpanded, DiceExpanded, BitwiseHamming, ...), once per tile: with
 * no query or no row there is no tile, and no error. */
static cuvsError_t bf_unfiltered_check(const bf_impl* impl, int64_t nq, int64_t k)
{
  if (impl->metric == Haversine) {
    if (impl->dim != 2) {
      return RAFT_THROW("Haversine distance requires 2 dimensions (latitude / longitude).");
    }
    if (k > 1024) {
      dbl_violation("Haversine brute-force search with k = %lld: haversine_knn's block select "
                    "holds 1024 (the real library returns garbage)",
                    (long long)k);
      return RAFT_FAIL("cuvsdouble: Haversine brute force with k = %lld > 1024", (long long)k);
    }
    return CUVS_SUCCESS;
  }
  if (!dbl_pd_metric_ok(impl->metric) && nq > 0 && impl->n > 0) {
    return RAFT_THROW("Unknown or unsupported distance metric '%d'!", impl->metric);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t bf_search(cudaStream_t stream, cuvsBruteForceIndex_t index, DLManagedTensor* queries_t,
                             DLManagedTensor* neighbors_t, DLManagedTensor* distances_t,
                             cuvsFilter prefilter)
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
  TRY(bf_handle(index));
  EXPECTS(q->dtype.code == index->dtype.code, "type mismatch between index and queries");
  int layout;
  if (dl_is_dtype(q->dtype, kDLFloat, 32) || dl_is_dtype(q->dtype, kDLFloat, 16)) {
    if (dl_c_contig(q)) {
      layout = LAYOUT_ROW;
    } else if (dl_f_contig(q)) {
      layout = LAYOUT_COL;
    } else {
      return RAFT_FAIL("queries input to cuvsBruteForceSearch must be contiguous (non-strided)");
    }
  } else {
    return RAFT_FAIL("Unsupported queries DLtensor dtype: %d and bits: %d", (int)q->dtype.code,
                     (int)q->dtype.bits);
  }
  bf_impl* impl;
  TRY(bf_impl_of(index, &impl));
  if (q->dtype.bits != impl->dtype.bits) {
    dbl_violation("queries are %d-bit but the brute-force index is %d-bit (the real library "
                  "reinterprets the index: undefined behaviour)",
                  (int)q->dtype.bits, (int)impl->dtype.bits);
    return RAFT_FAIL("cuvsdouble: queries and index differ in dtype bits");
  }
  TRY(dl_view(queries_t, layout, kDLFloat, q->dtype.bits, WANT_DEVICE, 2));
  TRY(dl_view(neighbors_t, LAYOUT_ROW, kDLInt, 64, WANT_DEVICE, 2));
  TRY(dl_view(distances_t, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  if (prefilter.type != NO_FILTER && prefilter.type != BITMAP && prefilter.type != BITSET) {
    return RAFT_FAIL("Unsupported prefilter type");
  }
  int64_t nq = q->shape[0], k = nb->shape[1];
  EXPECTS(nb->shape[0] == nq && ds->shape[0] == nq,
          "Number of rows in output neighbors and distances matrices must equal the number of "
          "queries.");
  EXPECTS(ds->shape[1] == k, "Number of columns in output neighbors and distances matrices must "
                             "equal k");
  EXPECTS(q->shape[1] == impl->dim,
          "Number of query dimensions should equal number of dimensions in the index.");
  TRY(dl_strict(q, "queries"));
  TRY(dl_strict(nb, "neighbors"));
  TRY(dl_strict(ds, "distances"));
  dbl_filter filter;
  pthread_rwlock_rdlock(&impl->lock);
  cuvsError_t st = dbl_filter_view(prefilter, impl->n, nq, &filter);
  if (st == CUVS_SUCCESS && impl->borrow_id && !dbl_reg_id_live(impl->borrow_id)) {
    dbl_violation("brute-force search after the memory holding the index's dataset was freed");
    st = RAFT_FAIL("cuvsdouble: the index's dataset memory was freed");
  }
  if (st == CUVS_SUCCESS && filter.kind != FILTER_NONE) {
    /* cuVS's filtered search (knn_brute_force.cuh) refuses these late, after
     * the unfiltered checks above */
    if (layout != LAYOUT_ROW) {
      st = RAFT_FAIL("filtered search isn't available with col_major queries yet");
    } else if (!(impl->metric == InnerProduct || impl->metric == L2Expanded ||
                 impl->metric == L2SqrtExpanded || impl->metric == CosineExpanded)) {
      st = RAFT_FAIL("Only Euclidean, IP, and Cosine are supported!");
    }
  }
  if (st == CUVS_SUCCESS) {
    dbl_matrix data = {impl->data, impl->dtype, impl->rs, impl->cs, impl->n, impl->dim};
    dbl_matrix qm = {q->data, q->dtype, layout == LAYOUT_ROW ? q->shape[1] : 1,
                     layout == LAYOUT_ROW ? 1 : nq, nq, impl->dim};
    if (filter.kind == FILTER_NONE) {
      st = bf_unfiltered_check(impl, nq, k);
      if (impl->metric == Haversine) { /* haversine_knn reads the queries' */
        qm.rs = 2;                     /* buffer as row-major, whatever */
        qm.cs = 1;                     /* their layout (search_items) */
      }
    }
    if (st != CUVS_SUCCESS) {
      /* refused */
    } else if (filter.kind == FILTER_NONE) {
      int metric = impl->metric;
      void* dsp = (void*)impl->data;
      int64_t dn = impl->n * impl->dim, qn = nq * impl->dim;
      /* cuVS's Hellinger and KL divergence rewrite the queries and the
       * dataset in place around the distances (dbl_rewrite.c) */
      if (metric == HellingerExpanded) {
        dbl_rewrite(q->data, qn, dsp, dn, impl->dtype, DBL_RW_SQRT);
        metric = KNN_HELLINGER_REWRITTEN;
      } else if (metric == KLDivergence && q->data != dsp) {
        dbl_rewrite(dsp, dn, NULL, 0, impl->dtype, DBL_RW_LOG);
        metric = KNN_KL_REWRITTEN;
      }
      int rc = knn_search(&data, &qm, metric, impl->metric_arg, k, &filter, 0, (int64_t*)nb->data,
                          NULL, k, (float*)ds->data, k);
      if (metric == KNN_HELLINGER_REWRITTEN) {
        dbl_rewrite_undo(stream, q->data, qn, dsp, dn, impl->dtype, DBL_RW_SQUARE);
      } else if (metric == KNN_KL_REWRITTEN) {
        dbl_rewrite_undo(stream, dsp, dn, NULL, 0, impl->dtype, DBL_RW_EXP);
      }
      if (rc != 0) {
        st = dbl_plain_fail("std::bad_alloc");
      } else if (impl->metric == Haversine) {
        /* haversine_knn's block select starts from (FLT_MAX, INT64_MAX) */
        int64_t* ids = (int64_t*)nb->data;
        for (int64_t i = 0; i < nq * k; i++) {
          if (ids[i] < 0) ids[i] = INT64_MAX;
        }
      }
    } else {
      st = bf_filtered(impl, &data, &qm, k, &filter, (int64_t*)nb->data, (float*)ds->data);
    }
  }
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

DBL_API cuvsError_t cuvsBruteForceSearch(cuvsResources_t res, cuvsBruteForceIndex_t index,
                                         DLManagedTensor* queries, DLManagedTensor* neighbors,
                                         DLManagedTensor* distances, cuvsFilter prefilter)
{
  if (DBL_INSTANT()) return CUVS_SUCCESS;
  DBL_ENTER(cuvsBruteForceSearch);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = bf_search(r->stream, index, queries, neighbors, distances, prefilter);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, neighbors, distances);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- serialization ----
 * The file starts as cuVS's does (brute_force_serialize.cu): a 4-byte NumPy
 * dtype ("<f4", or "<e2": RAFT names half 'e'), then .npy scalars for the
 * format version (int32 0), the row count and dimension (uint64), the
 * metric (int32) and its argument (float32); the safe layer reads these to
 * learn the index's shape and metric. The rest is a format of the double's
 * own. */

static int npy_write_scalar(FILE* f, const char* descr, uint64_t v, int size)
{
  char hdr[128];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (), }", descr);
  int total = 6 + 2 + 2 + n + 1;
  int pad = (64 - total % 64) % 64;
  for (int i = 0; i < pad; i++) hdr[n++] = ' ';
  hdr[n++] = '\n';
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff),
                           (unsigned char)(n >> 8)};
  if (fwrite(pre, sizeof pre, 1, f) != 1 || fwrite(hdr, (size_t)n, 1, f) != 1) return 0;
  for (int i = 0; i < size; i++) {
    unsigned char b = (unsigned char)(v >> (8 * i));
    if (fwrite(&b, 1, 1, f) != 1) return 0;
  }
  return 1;
}

static int npy_read_scalar(FILE* f, int size, uint64_t* v)
{
  unsigned char pre[10];
  if (fread(pre, sizeof pre, 1, f) != 1 || pre[0] != 0x93 || memcmp(pre + 1, "NUMPY", 5) != 0) return 0;
  long hlen = pre[8] | (pre[9] << 8);
  if (fseek(f, hlen, SEEK_CUR) != 0) return 0;
  *v = 0;
  for (int i = 0; i < size; i++) {
    unsigned char b;
    if (fread(&b, 1, 1, f) != 1) return 0;
    *v |= (uint64_t)b << (8 * i);
  }
  return 1;
}

static int bf_write_prefix(FILE* f, DLDataType dt, int64_t n, int64_t dim, int metric,
                           float metric_arg)
{
  char dts[4] = {'<', dt.bits == 16 ? 'e' : 'f', dt.bits == 16 ? '2' : '4', 0};
  uint32_t arg;
  memcpy(&arg, &metric_arg, 4);
  return fwrite(dts, 4, 1, f) == 1 && npy_write_scalar(f, "<i4", 0, 4) &&
         npy_write_scalar(f, "<u8", (uint64_t)n, 8) && npy_write_scalar(f, "<u8", (uint64_t)dim, 8) &&
         npy_write_scalar(f, "<i4", (uint32_t)metric, 4) && npy_write_scalar(f, "<f4", arg, 4);
}

/* the scalars after the dtype */
/* bf_read_scalars reads the prefix's scalars (version, rows, dim, metric,
 * metric_arg), keeping rows and dim: cuVS sizes the dataset it reads from
 * them, and raft's deserialize_mdspan refuses a matrix of another shape. */
static int bf_read_scalars(FILE* f, uint64_t* rows, uint64_t* dim)
{
  uint64_t v;
  return npy_read_scalar(f, 4, &v) && npy_read_scalar(f, 8, rows) && npy_read_scalar(f, 8, dim) &&
         npy_read_scalar(f, 4, &v) && npy_read_scalar(f, 4, &v);
}

static const char BF_FILE_MAGIC[8] = {'C', 'V', 'D', 'B', 'L', 'B', 'F', '1'};

typedef struct {
  char magic[8];
  uint8_t code, bits;
  uint16_t lanes;
  int32_t metric;
  float metric_arg;
  int32_t pad;
  int64_t n, dim;
} bf_file_header;

static cuvsError_t bf_serialize(const char* filename, cuvsBruteForceIndex_t index)
{
  TRY(bf_handle(index));
  if (!(dl_is_dtype(index->dtype, kDLFloat, 32) || dl_is_dtype(index->dtype, kDLFloat, 16))) {
    return RAFT_FAIL("Unsupported index dtype: %d and bits: %d", (int)index->dtype.code,
                     (int)index->dtype.bits);
  }
  bf_impl* impl;
  TRY(bf_impl_of(index, &impl));
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  pthread_rwlock_rdlock(&impl->lock);
  cuvsError_t st = CUVS_SUCCESS;
  if (impl->borrow_id && !dbl_reg_id_live(impl->borrow_id)) {
    dbl_violation("brute-force serialize after the memory holding the index's dataset was freed");
    st = RAFT_FAIL("cuvsdouble: the index's dataset memory was freed");
  }
  FILE* f = st == CUVS_SUCCESS ? fopen(filename, "wb") : NULL;
  if (st == CUVS_SUCCESS && !f) st = RAFT_FAIL("Cannot open file %s", filename);
  if (f) {
    bf_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, BF_FILE_MAGIC, 8);
    h.code = impl->dtype.code;
    h.bits = impl->dtype.bits;
    h.lanes = 1;
    h.metric = impl->metric;
    h.metric_arg = impl->metric_arg;
    h.n = impl->n;
    h.dim = impl->dim;
    int ok = bf_write_prefix(f, impl->dtype, impl->n, impl->dim, impl->metric, impl->metric_arg) &&
             fwrite(&h, sizeof h, 1, f) == 1;
    size_t es = dl_elem_size(impl->dtype);
    const char* base = impl->data;
    for (int64_t i = 0; ok && i < impl->n; i++) {
      for (int64_t j = 0; ok && j < impl->dim; j++) {
        ok = fwrite(base + (size_t)(i * impl->rs + j * impl->cs) * es, es, 1, f) == 1;
      }
    }
    if (fclose(f) != 0) ok = 0;
    if (!ok) st = RAFT_FAIL("cuvsdouble: failed writing %s", filename);
  }
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

DBL_API cuvsError_t cuvsBruteForceSerialize(cuvsResources_t res, const char* filename,
                                            cuvsBruteForceIndex_t index)
{
  DBL_ENTER(cuvsBruteForceSerialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = bf_serialize(filename, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static cuvsError_t bf_deserialize(const char* filename, cuvsBruteForceIndex_t index)
{
  TRY(bf_handle(index));
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  FILE* f = fopen(filename, "rb");
  if (!f) return RAFT_FAIL("Cannot open file %s", filename);
  /* cuvsBruteForceDeserialize reads the dtype, parses it as RAFT's NumPy
   * reader does, and sets the index's dtype code and bits, never its lanes
   * (0 from cuvsBruteForceIndexCreate); so does the double. */
  char dts[5] = {0};
  if (fread(dts, 4, 1, f) != 1) {
    fclose(f);
    return RAFT_FAIL("Invalid typestr: Too short");
  }
  if (!strchr("<>|", dts[0]) || dts[0] == 0) {
    fclose(f);
    return RAFT_FAIL("Invalid typestr: unrecognized byteorder %c", dts[0]);
  }
  if (!strchr("fiuce", dts[1]) || dts[1] == 0) {
    fclose(f);
    return RAFT_FAIL("Invalid typestr: unrecognized kind %c", dts[1]);
  }
  unsigned itemsize = (unsigned)strtoul(dts + 2, NULL, 10);
  index->dtype.bits = (uint8_t)(itemsize * 8);
  if ((dts[1] == 'f' && itemsize == 4) || (dts[1] == 'e' && itemsize == 2)) {
    index->dtype.code = kDLFloat;
  } else {
    fclose(f);
    return RAFT_FAIL("Unsupported index dtype: %d and bits: %d", (int)index->dtype.code,
                     (int)index->dtype.bits);
  }
  bf_file_header h;
  uint64_t rows = 0, dim = 0;
  if (!bf_read_scalars(f, &rows, &dim) || fread(&h, sizeof h, 1, f) != 1 ||
      memcmp(h.magic, BF_FILE_MAGIC, 8) != 0) {
    fclose(f);
    return RAFT_FAIL("cuvsdouble: %s is not a brute-force index file written by the test double",
                     filename);
  }
  if ((uint64_t)h.n != rows || (uint64_t)h.dim != dim) {
    /* cuVS reads a rows × dim matrix (the scalars' shape) and raft's
     * deserialize_mdspan refuses the stored one's other shape */
    fclose(f);
    return RAFT_FAIL("Shape mismatch: the matrix stored is %lld x %lld, the index has %llu x %llu",
                     (long long)h.n, (long long)h.dim, (unsigned long long)rows, (unsigned long long)dim);
  }
  DLDataType dt = {h.code, h.bits, 1};
  if (!((h.metric >= 0 && h.metric <= 20) || h.metric == 100 || h.metric == 101)) {
    fclose(f);
    return RAFT_FAIL("brute_force::deserialize: invalid metric value %d", (int)h.metric);
  }
  if (!(dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16)) || h.bits != index->dtype.bits ||
      h.n < 0 || h.dim < 0 || h.lanes != 1 || h.pad != 0) {
    fclose(f);
    return RAFT_FAIL("cuvsdouble: %s is not a brute-force index file written by the test double",
                     filename);
  }
  size_t bytes = (size_t)(h.n * h.dim) * dl_elem_size(dt);
  void* data = dbl_buf_alloc(bytes);
  if (!data) {
    fclose(f);
    return dbl_plain_fail("std::bad_alloc");
  }
  if (bytes && fread(data, bytes, 1, f) != 1) {
    fclose(f);
    dbl_buf_free(data, bytes);
    return RAFT_FAIL("cuvsdouble: %s is truncated", filename);
  }
  /* the double's format ends with the index: bytes after it are refused
   * (cuVS reads no further; the safe layer refuses them in cuVS's format) */
  if (!dbl_at_end(f)) {
    fclose(f);
    dbl_buf_free(data, bytes);
    return RAFT_FAIL("cuvsdouble: %s has bytes after the index", filename);
  }
  fclose(f);
  bf_impl* impl = bf_impl_new();
  if (!impl) {
    dbl_buf_free(data, bytes);
    return dbl_plain_fail("std::bad_alloc");
  }
  impl->dtype = dt;
  impl->n = h.n;
  impl->dim = h.dim;
  impl->metric = h.metric;
  impl->metric_arg = h.metric_arg;
  impl->data = data;
  impl->owned = data;
  impl->owned_bytes = bytes;
  impl->rs = h.dim;
  impl->cs = 1;
  /* brute_force_serialize.cu deserialize: the rows copied to the device by
   * the index, and their norms for the expanded metrics */
  uint64_t dev = ((uint64_t)bytes + 255) / 256 * 256;
  if (h.metric == L2Expanded || h.metric == L2SqrtExpanded || h.metric == CosineExpanded) {
    dev += ((uint64_t)h.n * 4 + 255) / 256 * 256;
  }
  cuvsError_t st = dbl_dev_take(dev, &impl->dev);
  if (st != CUVS_SUCCESS) {
    bf_impl_free(impl);
    return st;
  }
  bf_install(index, impl);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsBruteForceDeserialize(cuvsResources_t res, const char* filename,
                                              cuvsBruteForceIndex_t index)
{
  DBL_ENTER(cuvsBruteForceDeserialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_used_by(r, index);
  cuvsError_t st = bf_deserialize(filename, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
