/*
 * cuvsdouble IVF-PQ, on the CPU, with the real algorithm's shape and losses:
 *   - build samples a training set as cuVS does (kmeans_trainset_fraction,
 *     at least n_lists rows), clusters it into n_lists coarse lists with a
 *     small deterministic k-means of the double's own, makes the rotation
 *     (identity when dim == rot_dim and no random rotation is forced, else a
 *     random matrix with orthonormal columns) and trains the PQ codebooks
 *     (2^pq_bits centres per sub-space, or per list) by k-means on the
 *     residuals, at most max_train_points_per_pq_code * 2^pq_bits points;
 *   - extend encodes each row as its nearest list plus one code per sub-space,
 *     so what search sees really lost precision;
 *   - search probes only the n_probes nearest lists and ranks their rows by
 *     the distance to the reconstructed (decoded) vectors;
 *   - int8 and uint8 data are mapped to floats as cuVS maps them (x/128,
 *     x/256), so distances are in that scale;
 *   - the getters hand out views into the index's memory as the C code does
 *     (shape and strides from the library, a deleter that frees only those);
 *   - BuildPrecomputed keeps references to the caller's four tensors;
 *   - serialization writes cuVS's ten .npy header scalars (version 4, size,
 *     dim, pq_bits, pq_dim, conservative allocation, metric, codebook kind,
 *     codes layout, n_lists: ivf_pq_serialize.cuh) and then a body of the
 *     double's own; Deserialize leaves the handle's dtype as it was, as cuVS
 *     does.
 * The slots a search cannot fill (fewer rows than k in the probed lists)
 * get cuVS's kOutOfBoundsRecord (INT64_MAX) with distance +Inf, as an H200
 * showed for L2 (ivf_pq_search.cuh's top-k dummy, then ivf_common.cuh's
 * postprocess_neighbors/postprocess_distances; -Inf for inner product,
 * whose scores postprocessing negates back). Cosine distances are -cos to the
 * decoded vector (cuVS leaves the negated inner product of the normalized
 * vectors: -1 for a row along the query on an H200), inner products the
 * inner product, larger first.
 */
#include "dbl.h"
#include "dbl_ivf.h"

#include <float.h>
#include <math.h>

#define PQ_MAGIC 0x5150464956444258ULL
#define PQ_FILE_MAGIC "DBLIVFPQ"
#define PQ_INVALID_RECORD (INT64_MAX - 1) /* ivf::kInvalidRecord<int64_t> */
#define PQ_OUT_OF_BOUNDS INT64_MAX         /* ivf_pq kOutOfBoundsRecord<int64_t> */

/* cudaDataType_t values (CUDA's library_types.h) besides dbl.h's two */
#define DBL_CUDA_R_8I 3
#define DBL_CUDA_R_8U 8

DBL_HIDDEN cuvsError_t dbl_check_params(const void* p, int kind);
DBL_HIDDEN cuvsError_t dbl_check_plain_params(const void* p, int kind);

typedef struct {
  int64_t* ids;   /* cap entries; unused slots hold kInvalidRecord */
  uint8_t* codes; /* cap * pq_dim, one byte per code */
  int64_t size, cap;
} pq_list;

typedef struct {
  uint64_t magic;
  int metric, codebook_kind, layout, conservative, view;
  uint32_t n_lists, dim, pq_bits, pq_dim, pq_len, rot_dim, dim_ext, book;
  float* centers;     /* [n_lists, dim_ext]: centre, its squared norm, zeros */
  float* pq_centers;  /* [pq_dim or n_lists, pq_len, book] */
  float* centers_rot; /* [n_lists, rot_dim] */
  float* rotation;    /* [rot_dim, dim] */
  size_t centers_bytes, pqc_bytes, crot_bytes, rot_bytes;
  uint64_t borrows[4]; /* registry ids of the tensors a view index references */
  uint32_t* list_sizes; /* [n_lists] */
  pq_list* lists;       /* [n_lists] */
  int lists_made;       /* cuVS allocates every list on the first extend */
  int64_t size;
  /* What cuVS's index holds on the device (pq_dev_* below): the model and
   * the list bookkeeping, and the lists at their capacity. */
  dbl_dev_block dev_fixed, dev_lists;
  pthread_rwlock_t lock;
} pq_impl;

/* ---- small helpers ---- */

static int pq_dtype_ok(DLDataType dt)
{
  return dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) ||
         dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8);
}

/* Loads row i as cuVS's utils::mapping<float> sees it. */
static void pq_load(const void* base, DLDataType dt, int64_t i, int64_t dim, float* out)
{
  dl_load_row(base, dt, dim, 1, i, dim, out);
  float s = dl_is_dtype(dt, kDLInt, 8) ? 1.0f / 128 : dl_is_dtype(dt, kDLUInt, 8) ? 1.0f / 256 : 1;
  if (s != 1) {
    for (int64_t j = 0; j < dim; j++) out[j] *= s;
  }
}

static uint64_t lcg(uint64_t* s)
{
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 11;
}

static float lcg_normal(uint64_t* s)
{
  double u1 = ((double)lcg(s) + 1) / 9007199254740993.0, u2 = (double)lcg(s) / 9007199254740992.0;
  return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

static float sqdist(const float* a, const float* b, uint32_t n)
{
  float s = 0;
  for (uint32_t j = 0; j < n; j++) {
    float d = a[j] - b[j];
    s += d * d;
  }
  return s;
}

static float dot(const float* a, const float* b, uint32_t n)
{
  float s = 0;
  for (uint32_t j = 0; j < n; j++) s += a[j] * b[j];
  return s;
}

static void normalize(float* a, uint32_t n)
{
  float s = sqrtf(dot(a, a, n));
  if (s > 0) {
    for (uint32_t j = 0; j < n; j++) a[j] /= s;
  }
}

static uint32_t calc_pq_dim(uint32_t dim)
{
  if (dim >= 128) dim /= 2;
  uint32_t r = dim / 32 * 32;
  if (r > 0) return r;
  r = 1;
  while ((r << 1) <= dim) r <<= 1;
  return r;
}

static int64_t list_capacity(const pq_impl* impl, int64_t n)
{
  if (impl->layout == CUVS_IVF_PQ_LIST_LAYOUT_FLAT) return n > 0 ? n : 1;
  int64_t amax = impl->conservative ? 32 : 1024, amin = 32;
  if (n >= amax) return (n + amax - 1) / amax * amax;
  int64_t c = 1, want = n > amin ? n : amin;
  while (c < want) c <<= 1;
  return c < amax ? c : amax;
}

/*
 * The double's own k-means (Lloyd's, deterministic): k centres of width w
 * from n points (row stride w); initial centres are points spread evenly over
 * the set; an empty cluster takes the point farthest from its centre. With
 * fewer points than centres the extra centres repeat points. ip: cluster by
 * largest inner product (centres normalized), else by L2.
 */
int pq_kmeans(const float* pts, int64_t n, uint32_t w, uint32_t k, uint32_t iters, int ip,
                     float* centers)
{
  if (n <= 0) {
    memset(centers, 0, (size_t)k * w * sizeof(float));
    return 0;
  }
  for (uint32_t c = 0; c < k; c++) {
    int64_t i = (int64_t)(((double)c + 0.5) * (double)n / (double)k);
    if (i >= n) i = n - 1;
    memcpy(centers + (size_t)c * w, pts + (size_t)i * w, w * sizeof(float));
  }
  if (ip) {
    for (uint32_t c = 0; c < k; c++) normalize(centers + (size_t)c * w, w);
  }
  uint32_t* lab = malloc((size_t)n * sizeof(uint32_t));
  float* best = malloc((size_t)n * sizeof(float));
  double* sum = malloc((size_t)k * w * sizeof(double));
  int64_t* cnt = malloc((size_t)k * sizeof(int64_t));
  if (!lab || !best || !sum || !cnt) {
    free(lab), free(best), free(sum), free(cnt);
    return -1;
  }
  for (uint32_t it = 0; it < iters; it++) {
    for (int64_t i = 0; i < n; i++) {
      const float* p = pts + (size_t)i * w;
      uint32_t bc = 0;
      float bd = FLT_MAX;
      for (uint32_t c = 0; c < k; c++) {
        float d = ip ? -dot(p, centers + (size_t)c * w, w) : sqdist(p, centers + (size_t)c * w, w);
        if (d < bd) bd = d, bc = c;
      }
      lab[i] = bc;
      best[i] = bd;
    }
    memset(sum, 0, (size_t)k * w * sizeof(double));
    memset(cnt, 0, (size_t)k * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
      cnt[lab[i]]++;
      for (uint32_t j = 0; j < w; j++) sum[(size_t)lab[i] * w + j] += pts[(size_t)i * w + j];
    }
    for (uint32_t c = 0; c < k; c++) {
      float* ctr = centers + (size_t)c * w;
      if (cnt[c] > 0) {
        for (uint32_t j = 0; j < w; j++) ctr[j] = (float)(sum[(size_t)c * w + j] / (double)cnt[c]);
      } else if (n > (int64_t)k) {
        int64_t far = 0;
        for (int64_t i = 1; i < n; i++) {
          if (best[i] > best[far]) far = i;
        }
        memcpy(ctr, pts + (size_t)far * w, w * sizeof(float));
        best[far] = -FLT_MAX;
      }
      if (ip) normalize(ctr, w);
    }
  }
  free(lab), free(best), free(sum), free(cnt);
  return 0;
}

/* ---- the impl ---- */

static pq_impl* pq_new(void)
{
  pq_impl* impl = calloc(1, sizeof(pq_impl));
  if (!impl) return NULL;
  impl->magic = PQ_MAGIC;
  pthread_rwlock_init(&impl->lock, NULL);
  return impl;
}

/* Sets the shape from the params; 0 or an error. */
static cuvsError_t pq_shape(pq_impl* impl, const struct cuvsIvfPqIndexParams* p, uint32_t dim)
{
  impl->metric = (int)p->metric;
  impl->codebook_kind = (int)p->codebook_kind;
  impl->layout = (int)p->codes_layout;
  impl->conservative = p->conservative_memory_allocation;
  impl->n_lists = p->n_lists;
  impl->dim = dim;
  impl->pq_bits = p->pq_bits;
  impl->pq_dim = p->pq_dim == 0 ? calc_pq_dim(dim) : p->pq_dim;
  EXPECTS(impl->pq_bits >= 4 && impl->pq_bits <= 8,
          "`pq_bits` must be within closed range [4,8], but got %u.", impl->pq_bits);
  EXPECTS((impl->pq_bits * impl->pq_dim) % 8 == 0,
          "`pq_bits * pq_dim` must be a multiple of 8, but got %u * %u = %u.", impl->pq_bits,
          impl->pq_dim, impl->pq_bits * impl->pq_dim);
  impl->pq_len = (dim + impl->pq_dim - 1) / impl->pq_dim;
  impl->rot_dim = impl->pq_len * impl->pq_dim;
  impl->dim_ext = (dim + 1 + 7) / 8 * 8;
  impl->book = 1u << impl->pq_bits;
  return CUVS_SUCCESS;
}

static uint32_t pq_books(const pq_impl* impl)
{
  return impl->codebook_kind == CUVS_IVF_PQ_CODEBOOK_GEN_PER_CLUSTER ? impl->n_lists
                                                                     : impl->pq_dim;
}

static int pq_alloc_model(pq_impl* impl)
{
  impl->centers_bytes = (size_t)impl->n_lists * impl->dim_ext * sizeof(float);
  impl->pqc_bytes = (size_t)pq_books(impl) * impl->pq_len * impl->book * sizeof(float);
  impl->crot_bytes = (size_t)impl->n_lists * impl->rot_dim * sizeof(float);
  impl->rot_bytes = (size_t)impl->rot_dim * impl->dim * sizeof(float);
  impl->centers = dbl_buf_alloc(impl->centers_bytes);
  impl->pq_centers = dbl_buf_alloc(impl->pqc_bytes);
  impl->centers_rot = dbl_buf_alloc(impl->crot_bytes);
  impl->rotation = dbl_buf_alloc(impl->rot_bytes);
  if (!impl->centers || !impl->pq_centers || !impl->centers_rot || !impl->rotation) return -1;
  memset(impl->centers, 0, impl->centers_bytes);
  memset(impl->pq_centers, 0, impl->pqc_bytes);
  return 0;
}

static int pq_alloc_lists(pq_impl* impl)
{
  impl->list_sizes = dbl_buf_alloc((size_t)impl->n_lists * sizeof(uint32_t));
  impl->lists = calloc(impl->n_lists ? impl->n_lists : 1, sizeof(pq_list));
  if (!impl->list_sizes || !impl->lists) return -1;
  memset(impl->list_sizes, 0, (size_t)impl->n_lists * sizeof(uint32_t));
  return 0;
}

static void pq_free_list(pq_list* l, uint32_t pq_dim)
{
  dbl_buf_free(l->ids, (size_t)l->cap * sizeof(int64_t));
  dbl_buf_free(l->codes, (size_t)l->cap * pq_dim);
  memset(l, 0, sizeof *l);
}

static void pq_free(pq_impl* impl)
{
  dbl_dev_give(&impl->dev_fixed);
  dbl_dev_give(&impl->dev_lists);
  if (impl->view) {
    for (int i = 0; i < 4; i++) dbl_reg_borrow(impl->borrows[i], -1);
  } else {
    dbl_buf_free(impl->centers, impl->centers_bytes);
    dbl_buf_free(impl->pq_centers, impl->pqc_bytes);
    dbl_buf_free(impl->centers_rot, impl->crot_bytes);
    dbl_buf_free(impl->rotation, impl->rot_bytes);
  }
  if (impl->lists) {
    for (uint32_t l = 0; l < impl->n_lists; l++) pq_free_list(&impl->lists[l], impl->pq_dim);
    free(impl->lists);
  }
  dbl_buf_free(impl->list_sizes, (size_t)impl->n_lists * sizeof(uint32_t));
  pthread_rwlock_destroy(&impl->lock);
  impl->magic = 0;
  free(impl);
}

static void pq_install(cuvsIvfPqIndex_t index, pq_impl* impl)
{
  if (index->addr != 0) {
    dbl_violation("writing a new index into a cuvsIvfPqIndex_t that already holds one: the real "
                  "library leaks the previous one (so does the double)");
  }
  dbl_reg_add(impl, K_IVFPQ_IMPL, sizeof(pq_impl));
  index->addr = (uintptr_t)impl;
}

static cuvsError_t pq_handle(cuvsIvfPqIndex_t index)
{
  if (dbl_reg_find(index, NULL) != K_IVFPQ_INDEX) {
    dbl_violation("invalid or destroyed cuvsIvfPqIndex_t %p (the real library would crash)",
                  (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsIvfPqIndex_t %p", (void*)index);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t pq_impl_of(cuvsIvfPqIndex_t index, pq_impl** out)
{
  TRY(pq_handle(index));
  pq_impl* impl = (pq_impl*)index->addr;
  if (dbl_reg_find(impl, NULL) != K_IVFPQ_IMPL) {
    dbl_violation("IVF-PQ index %p holds no built index (addr %#lx; the real library would "
                  "dereference it)",
                  (void*)index, (unsigned long)index->addr);
    return RAFT_FAIL("cuvsdouble: the IVF-PQ index was not built");
  }
  for (int i = 0; impl->view && i < 4; i++) {
    if (impl->borrows[i] && !dbl_reg_id_live(impl->borrows[i])) {
      dbl_violation("IVF-PQ index used after the memory of a precomputed tensor it references "
                    "was freed");
      return RAFT_FAIL("cuvsdouble: a tensor the IVF-PQ index references was freed");
    }
  }
  *out = impl;
  return CUVS_SUCCESS;
}

static void pq_set_center_norms(pq_impl* impl)
{
  for (uint32_t l = 0; l < impl->n_lists; l++) {
    float* c = impl->centers + (size_t)l * impl->dim_ext;
    c[impl->dim] = dot(c, c, impl->dim);
    for (uint32_t j = impl->dim + 1; j < impl->dim_ext; j++) c[j] = 0;
  }
}

/* rotation: identity when possible, else rot_dim x dim with orthonormal columns */
static void pq_make_rotation(pq_impl* impl, int force_random)
{
  uint32_t r = impl->rot_dim, d = impl->dim;
  float* m = impl->rotation;
  memset(m, 0, (size_t)r * d * sizeof(float));
  if (!force_random && r == d) {
    for (uint32_t i = 0; i < d; i++) m[(size_t)i * d + i] = 1;
    return;
  }
  uint64_t s = 137;
  for (size_t i = 0; i < (size_t)r * d; i++) m[i] = lcg_normal(&s);
  /* Gram-Schmidt over the d columns (each of length r >= d) */
  for (uint32_t c = 0; c < d; c++) {
    for (uint32_t p = 0; p < c; p++) {
      float pr = 0;
      for (uint32_t i = 0; i < r; i++) pr += m[(size_t)i * d + c] * m[(size_t)i * d + p];
      for (uint32_t i = 0; i < r; i++) m[(size_t)i * d + c] -= pr * m[(size_t)i * d + p];
    }
    float nrm = 0;
    for (uint32_t i = 0; i < r; i++) nrm += m[(size_t)i * d + c] * m[(size_t)i * d + c];
    nrm = sqrtf(nrm);
    for (uint32_t i = 0; i < r; i++) m[(size_t)i * d + c] /= nrm > 0 ? nrm : 1;
  }
}

static void pq_rotate(const pq_impl* impl, const float* x, float* out)
{
  for (uint32_t i = 0; i < impl->rot_dim; i++) out[i] = dot(impl->rotation + (size_t)i * impl->dim, x, impl->dim);
}

static int pq_ip(const pq_impl* impl)
{
  return impl->metric == InnerProduct || impl->metric == CosineExpanded;
}

static uint32_t pq_nearest_list(const pq_impl* impl, const float* x)
{
  uint32_t best = 0;
  float bd = FLT_MAX;
  for (uint32_t l = 0; l < impl->n_lists; l++) {
    const float* c = impl->centers + (size_t)l * impl->dim_ext;
    float d = pq_ip(impl) ? -dot(x, c, impl->dim) : sqdist(x, c, impl->dim);
    if (d < bd) bd = d, best = l;
  }
  return best;
}

/* codebook entry c of sub-space j for list l: pq_len floats, gathered */
static void pq_entry(const pq_impl* impl, uint32_t l, uint32_t j, uint32_t c, float* out)
{
  uint32_t b = impl->codebook_kind == CUVS_IVF_PQ_CODEBOOK_GEN_PER_CLUSTER ? l : j;
  const float* base = impl->pq_centers + (size_t)b * impl->pq_len * impl->book;
  for (uint32_t t = 0; t < impl->pq_len; t++) out[t] = base[(size_t)t * impl->book + c];
}

/* residual (rotated x minus rotated centre of l) */
static void pq_residual(const pq_impl* impl, const float* x, uint32_t l, float* rx, float* res)
{
  pq_rotate(impl, x, rx);
  const float* cr = impl->centers_rot + (size_t)l * impl->rot_dim;
  for (uint32_t i = 0; i < impl->rot_dim; i++) res[i] = rx[i] - cr[i];
}

static void pq_encode(const pq_impl* impl, uint32_t l, const float* res, uint8_t* codes, float* e)
{
  for (uint32_t j = 0; j < impl->pq_dim; j++) {
    uint32_t bc = 0;
    float bd = FLT_MAX;
    for (uint32_t c = 0; c < impl->book; c++) {
      pq_entry(impl, l, j, c, e);
      float d = sqdist(res + (size_t)j * impl->pq_len, e, impl->pq_len);
      if (d < bd) bd = d, bc = c;
    }
    codes[j] = (uint8_t)bc;
  }
}

static void pq_decode(const pq_impl* impl, uint32_t l, const uint8_t* codes, float* out)
{
  const float* cr = impl->centers_rot + (size_t)l * impl->rot_dim;
  for (uint32_t j = 0; j < impl->pq_dim; j++) {
    pq_entry(impl, l, j, codes[j], out + (size_t)j * impl->pq_len);
  }
  for (uint32_t i = 0; i < impl->rot_dim; i++) out[i] += cr[i];
}

/* Trains the coarse centres, rotation and codebooks from a float trainset. */
static int pq_train(pq_impl* impl, float* train, int64_t nt, uint32_t iters, uint32_t max_pts,
                    int force_random)
{
  int ip = pq_ip(impl);
  float* cen = malloc((size_t)impl->n_lists * impl->dim * sizeof(float));
  float* res = malloc((size_t)nt * impl->rot_dim * sizeof(float));
  float* rx = malloc((size_t)impl->rot_dim * sizeof(float));
  uint32_t* lab = malloc((size_t)(nt ? nt : 1) * sizeof(uint32_t));
  int rc = -1;
  if (!cen || !res || !rx || !lab) goto out;
  if (impl->metric == CosineExpanded) {
    for (int64_t i = 0; i < nt; i++) normalize(train + (size_t)i * impl->dim, impl->dim);
  }
  if (pq_kmeans(train, nt, impl->dim, impl->n_lists, iters ? iters : 1, ip, cen) != 0) goto out;
  for (uint32_t l = 0; l < impl->n_lists; l++) {
    memcpy(impl->centers + (size_t)l * impl->dim_ext, cen + (size_t)l * impl->dim,
           impl->dim * sizeof(float));
  }
  pq_set_center_norms(impl);
  pq_make_rotation(impl, force_random);
  for (uint32_t l = 0; l < impl->n_lists; l++) {
    pq_rotate(impl, cen + (size_t)l * impl->dim, impl->centers_rot + (size_t)l * impl->rot_dim);
  }
  for (int64_t i = 0; i < nt; i++) {
    lab[i] = pq_nearest_list(impl, train + (size_t)i * impl->dim);
    pq_residual(impl, train + (size_t)i * impl->dim, lab[i], rx, res + (size_t)i * impl->rot_dim);
  }
  int64_t cap = (int64_t)max_pts * impl->book;
  /* per cluster, every row gives pq_dim sub-vectors */
  size_t sub_rows = (size_t)(nt ? nt : 1) *
                    (impl->codebook_kind == CUVS_IVF_PQ_CODEBOOK_GEN_PER_CLUSTER ? impl->pq_dim : 1);
  float* sub = malloc(sub_rows * impl->pq_len * sizeof(float));
  float* book = malloc((size_t)impl->book * impl->pq_len * sizeof(float));
  if (!sub || !book) {
    free(sub), free(book);
    goto out;
  }
  uint32_t nb = pq_books(impl);
  for (uint32_t b = 0; b < nb; b++) {
    int64_t m = 0;
    if (impl->codebook_kind == CUVS_IVF_PQ_CODEBOOK_GEN_PER_CLUSTER) {
      /* every sub-space of the list's residuals */
      for (int64_t i = 0; i < nt && m < cap; i++) {
        if (lab[i] != b) continue;
        for (uint32_t j = 0; j < impl->pq_dim && m < cap; j++, m++) {
          memcpy(sub + (size_t)m * impl->pq_len,
                 res + (size_t)i * impl->rot_dim + (size_t)j * impl->pq_len,
                 impl->pq_len * sizeof(float));
        }
      }
    } else {
      for (int64_t i = 0; i < nt && m < cap; i++, m++) {
        memcpy(sub + (size_t)m * impl->pq_len,
               res + (size_t)i * impl->rot_dim + (size_t)b * impl->pq_len,
               impl->pq_len * sizeof(float));
      }
    }
    pq_kmeans(sub, m, impl->pq_len, impl->book, iters ? iters : 1, 0, book);
    float* dst = impl->pq_centers + (size_t)b * impl->pq_len * impl->book;
    for (uint32_t c = 0; c < impl->book; c++) {
      for (uint32_t t = 0; t < impl->pq_len; t++) {
        dst[(size_t)t * impl->book + c] = book[(size_t)c * impl->pq_len + t];
      }
    }
  }
  free(sub), free(book);
  rc = 0;
out:
  free(cen), free(res), free(rx), free(lab);
  return rc;
}

/* Appends n rows (ids NULL: numbered from 0, as cuVS on an empty index). */
static int pq_add(pq_impl* impl, const void* data, DLDataType dt, const int64_t* ids, int64_t n)
{
  if (!impl->lists_made) {
    for (uint32_t l = 0; l < impl->n_lists; l++) {
      pq_list* L = &impl->lists[l];
      L->cap = list_capacity(impl, 0);
      L->ids = dbl_buf_alloc((size_t)L->cap * sizeof(int64_t));
      L->codes = dbl_buf_alloc((size_t)L->cap * impl->pq_dim);
      if (!L->ids || !L->codes) return -1;
      for (int64_t i = 0; i < L->cap; i++) L->ids[i] = PQ_INVALID_RECORD;
      memset(L->codes, 0, (size_t)L->cap * impl->pq_dim);
    }
    impl->lists_made = 1;
  }
  float* x = malloc((size_t)impl->dim * sizeof(float));
  float* rx = malloc((size_t)impl->rot_dim * sizeof(float));
  float* res = malloc((size_t)impl->rot_dim * sizeof(float));
  float* rec = malloc((size_t)impl->rot_dim * sizeof(float));
  uint8_t* codes = malloc(impl->pq_dim);
  int rc = -1;
  if (!x || !rx || !res || !rec || !codes) goto out;
  for (int64_t i = 0; i < n; i++) {
    pq_load(data, dt, i, impl->dim, x);
    if (impl->metric == CosineExpanded) normalize(x, impl->dim);
    uint32_t l = pq_nearest_list(impl, x);
    pq_residual(impl, x, l, rx, res);
    pq_encode(impl, l, res, codes, rec);
    pq_list* L = &impl->lists[l];
    if (L->size + 1 > L->cap) {
      int64_t cap = list_capacity(impl, L->size + 1);
      int64_t* nid = dbl_buf_alloc((size_t)cap * sizeof(int64_t));
      uint8_t* nco = dbl_buf_alloc((size_t)cap * impl->pq_dim);
      if (!nid || !nco) {
        dbl_buf_free(nid, (size_t)cap * sizeof(int64_t));
        dbl_buf_free(nco, (size_t)cap * impl->pq_dim);
        goto out;
      }
      for (int64_t t = 0; t < cap; t++) nid[t] = PQ_INVALID_RECORD;
      memset(nco, 0, (size_t)cap * impl->pq_dim);
      memcpy(nid, L->ids, (size_t)L->size * sizeof(int64_t));
      memcpy(nco, L->codes, (size_t)L->size * impl->pq_dim);
      int64_t size = L->size;
      pq_free_list(L, impl->pq_dim);
      L->ids = nid, L->codes = nco, L->cap = cap, L->size = size;
    }
    L->ids[L->size] = ids ? ids[i] : i;
    memcpy(L->codes + (size_t)L->size * impl->pq_dim, codes, impl->pq_dim);
    L->size++;
    impl->list_sizes[l] = (uint32_t)L->size;
    impl->size++;
  }
  rc = 0;
out:
  free(x), free(rx), free(res), free(rec), free(codes);
  return rc;
}

/* ---- params ---- */

static cuvsError_t pq_index_params(cuvsIvfPqIndexParams_t p)
{
  TRY(dbl_check_params(p, K_IVFPQ_INDEX_PARAMS));
  return CUVS_SUCCESS;
}

/* ---- index handle ---- */

DBL_API cuvsError_t cuvsIvfPqIndexCreate(cuvsIvfPqIndex_t* index)
{
  DBL_ENTER(cuvsIvfPqIndexCreate);
  if (!index) {
    dbl_violation("NULL cuvsIvfPqIndex_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  cuvsIvfPqIndex* h = calloc(1, sizeof(cuvsIvfPqIndex));
  if (!h) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(h, K_IVFPQ_INDEX, sizeof *h);
  *index = h;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfPqIndexDestroy(cuvsIvfPqIndex_t index)
{
  DBL_ENTER(cuvsIvfPqIndexDestroy);
  if (dbl_reg_remove(index, K_IVFPQ_INDEX, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsIvfPqIndex_t %p", (void*)index);
    return RAFT_FAIL("cuvsdouble: invalid cuvsIvfPqIndex_t %p", (void*)index);
  }
  pq_impl* impl = (pq_impl*)index->addr;
  if (impl) {
    if (dbl_reg_remove(impl, K_IVFPQ_IMPL, NULL, NULL) == 0) {
      if (pthread_rwlock_trywrlock(&impl->lock) != 0) {
        dbl_violation("IVF-PQ index destroyed while another thread uses it");
        pthread_rwlock_wrlock(&impl->lock);
      }
      pthread_rwlock_unlock(&impl->lock);
      pq_free(impl);
    } else {
      dbl_violation("cuvsIvfPqIndexDestroy: addr %p is not a live index", (void*)impl);
    }
  }
  free(index);
  return dbl_ok();
}

/* ---- device memory (the model of dbl_devmem.c) ----
 *
 * What cuVS's IVF-PQ allocates, from cpp/src/neighbors/ivf_pq_index.cu
 * (owning_impl: codebooks, centers [n_lists, dim_ext], rotated centers,
 * rotation, all float32; list sizes, data and index pointers),
 * cpp/include/cuvs/neighbors/ivf_pq.hpp (interleaved lists: ceil(pq_dim /
 * (128 / pq_bits)) 16-byte chunks a row; flat: ceil(pq_dim * pq_bits / 8)
 * bytes; an int64 id a row; every list allocated on the first extend, an
 * empty one at its minimum capacity) and ivf_pq_build.cuh (training:
 * float32 training set, a copy of the element type while converting,
 * centers and labels, the codebooks' scratch, per cluster sized for an
 * average cluster; extend: a label per row and batches of at most 65536
 * rows of (dim + rot_dim) floats and an id, plus the rows when they are in
 * host memory). Every allocation is rounded up to 256 bytes. */

static uint64_t r256(uint64_t n) { return (n + 255) / 256 * 256; }

static uint64_t pq_codebook_floats(const pq_impl* impl)
{
  return (uint64_t)pq_books(impl) * impl->pq_len * impl->book;
}

static uint64_t pq_dev_fixed(const pq_impl* impl)
{
  uint64_t nl = impl->n_lists;
  return r256(pq_codebook_floats(impl) * 4) + r256(nl * impl->dim_ext * 4) +
         r256(nl * impl->rot_dim * 4) + r256((uint64_t)impl->rot_dim * impl->dim * 4) +
         r256(nl * 4) + 2 * r256(nl * 8);
}

static uint64_t pq_dev_lists_of(const pq_impl* impl, int skip_empty)
{
  uint64_t b = 0;
  for (uint32_t l = 0; l < impl->n_lists; l++) {
    if (skip_empty && impl->lists[l].size == 0) continue;
    uint64_t cap = (uint64_t)list_capacity(impl, impl->lists[l].size);
    uint64_t row;
    if (impl->layout == CUVS_IVF_PQ_LIST_LAYOUT_FLAT) {
      row = ((uint64_t)impl->pq_dim * impl->pq_bits + 7) / 8;
    } else {
      uint64_t per_chunk = 128 / impl->pq_bits;
      row = (impl->pq_dim + per_chunk - 1) / per_chunk * 16;
    }
    b += r256(cap * row) + r256(cap * 8);
  }
  return b;
}

/* The lists at their capacities; an extend allocates even the empty ones
 * (ivf_list.cuh resize_list makes a list of capacity align_min for 0 rows) */
static uint64_t pq_dev_lists(const pq_impl* impl) { return pq_dev_lists_of(impl, 0); }

/* The training phase's scratch over nt rows of esz-byte elements. */
static uint64_t pq_dev_train_bytes(const pq_impl* impl, int64_t nt, int64_t esz,
                                   uint32_t max_train_points)
{
  uint64_t nl = impl->n_lists, dim = impl->dim;
  uint64_t trainset = r256((uint64_t)nt * dim * 4);
  uint64_t convert = esz != 4 ? r256((uint64_t)nt * dim * (uint64_t)esz) : 0;
  uint64_t kmeans = r256(nl * dim * 4) + r256((uint64_t)nt * 4);
  uint64_t pqc = pq_codebook_floats(impl) * 4, codebook;
  if (impl->codebook_kind == CUVS_IVF_PQ_CODEBOOK_GEN_PER_CLUSTER) {
    uint64_t cluster = (uint64_t)nt / nl ? (uint64_t)nt / nl : 1;
    codebook = r256(pqc) + r256((uint64_t)nt * 8) + r256(cluster * impl->pq_dim * 4) +
               r256((uint64_t)impl->book * 4) + r256(cluster * impl->rot_dim * 4);
  } else {
    uint64_t rows = (uint64_t)max_train_points * impl->book;
    if (rows > (uint64_t)nt) rows = (uint64_t)nt;
    codebook = r256(pqc) + r256(rows * impl->pq_len * 4) + r256(rows * 4) +
               r256((uint64_t)impl->book * 4);
  }
  uint64_t rest = kmeans + codebook > convert ? kmeans + codebook : convert;
  return trainset + rest;
}

/* Takes the training phase's scratch and gives it back: its peak. */
static cuvsError_t pq_dev_train(const pq_impl* impl, int64_t nt, int64_t esz,
                                uint32_t max_train_points)
{
  dbl_dev_block b;
  TRY(dbl_dev_take(pq_dev_train_bytes(impl, nt, esz, max_train_points), &b));
  dbl_dev_give(&b);
  return CUVS_SUCCESS;
}

/* An IVF-PQ build's device memory computed without data (CAGRA's IVF-PQ
 * graph build, which the double does not run): the same sizes as a build
 * here, the lists sized for balanced clusters. *peak is the build's, *index
 * what the index holds; *geo gets n_lists, dim_ext and rot_dim. */
cuvsError_t dbl_ivf_pq_model(const struct cuvsIvfPqIndexParams* p, int64_t n, uint32_t dim,
                             int64_t esz, int host, uint64_t* peak, uint64_t* index,
                             uint32_t geo[3])
{
  pq_impl impl;
  memset(&impl, 0, sizeof impl);
  TRY(pq_shape(&impl, p, dim));
  EXPECTS(impl.n_lists > 0 && (int64_t)impl.n_lists <= n, "number of rows can't be less than n_lists");
  size_t want = (size_t)(p->kmeans_trainset_fraction * (double)n);
  if (want < impl.n_lists) want = impl.n_lists;
  size_t ratio = (size_t)n / (want ? want : 1);
  if (ratio < 1) ratio = 1;
  int64_t nt = n / (int64_t)ratio;
  uint64_t fixed = pq_dev_fixed(&impl);
  uint64_t train = pq_dev_train_bytes(&impl, nt, esz, p->max_train_points_per_pq_code);
  uint64_t lists = 0, extend = 0;
  if (p->add_data_on_build) {
    int64_t avg = (n + impl.n_lists - 1) / impl.n_lists;
    uint64_t cap = (uint64_t)list_capacity(&impl, avg), row;
    if (impl.layout == CUVS_IVF_PQ_LIST_LAYOUT_FLAT) {
      cap = (uint64_t)avg;
      row = ((uint64_t)impl.pq_dim * impl.pq_bits + 7) / 8;
    } else {
      uint64_t per_chunk = 128 / impl.pq_bits;
      row = (impl.pq_dim + per_chunk - 1) / per_chunk * 16;
    }
    lists = impl.n_lists * (r256(cap * row) + r256(cap * 8));
    uint64_t batch = n < 65536 ? (uint64_t)n : 65536;
    uint64_t factor = ((uint64_t)impl.dim + impl.rot_dim) * 4 + 8;
    if (host) factor += (uint64_t)impl.dim * (uint64_t)esz;
    extend = r256((uint64_t)n * 4) + r256(batch * factor);
  }
  *index = fixed + lists;
  *peak = fixed + (train > lists + extend ? train : lists + extend);
  geo[0] = impl.n_lists;
  geo[1] = impl.dim_ext;
  geo[2] = impl.rot_dim;
  return CUVS_SUCCESS;
}

/* After rows were added: the lists at their capacities, with the extend's
 * scratch of n rows (host: in host memory) taken at the same time. */
static cuvsError_t pq_dev_extend(pq_impl* impl, int64_t n, int64_t esz, int host)
{
  uint64_t batch = n < 65536 ? (uint64_t)n : 65536;
  uint64_t factor = ((uint64_t)impl->dim + impl->rot_dim) * 4 + 8;
  if (host) factor += (uint64_t)impl->dim * (uint64_t)esz;
  dbl_dev_block scratch, lists;
  TRY(dbl_dev_take(r256((uint64_t)n * 4) + r256(batch * factor), &scratch));
  cuvsError_t st = dbl_dev_take(pq_dev_lists(impl), &lists);
  dbl_dev_give(&scratch);
  if (st != CUVS_SUCCESS) return st;
  dbl_dev_give(&impl->dev_lists); /* the lists it had (resize_list copies, then frees) */
  impl->dev_lists = lists;
  return CUVS_SUCCESS;
}

/* ---- build ---- */

static cuvsError_t pq_build(cuvsIvfPqIndexParams_t params, DLManagedTensor* dataset,
                            cuvsIvfPqIndex_t index)
{
  TRY(pq_index_params(params));
  TRY(pq_handle(index));
  TRY(dl_check_ptr(dataset, "dataset"));
  const DLTensor* t = &dataset->dl_tensor;
  index->dtype.code = t->dtype.code;
  index->dtype.bits = t->dtype.bits;
  if (!pq_dtype_ok(t->dtype)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)t->dtype.code,
                     (int)t->dtype.bits);
  }
  int device = dl_dev_compat(t);
  TRY(dl_view(dataset, LAYOUT_ROW, t->dtype.code, t->dtype.bits, device ? WANT_DEVICE : WANT_HOST,
              2));
  TRY(dl_strict(t, "dataset"));
  int64_t n = t->shape[0], dim = t->shape[1];
  pq_impl* impl = pq_new();
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  cuvsError_t st = pq_shape(impl, params, (uint32_t)dim);
  if (st != CUVS_SUCCESS) {
    impl->lists = NULL;
    pq_free(impl);
    return st;
  }
  if (!(n > 0 && dim > 0)) {
    pq_free(impl);
    return RAFT_FAIL("empty dataset");
  }
  if (n < (int64_t)params->n_lists) {
    pq_free(impl);
    return RAFT_FAIL("number of rows can't be less than n_lists");
  }
  int m = impl->metric;
  if (m != L2Expanded && m != L2SqrtExpanded && m != InnerProduct && m != CosineExpanded) {
    pq_free(impl);
    return RAFT_FAIL("Unsupported distance type %d.", m);
  }
  if (pq_alloc_model(impl) != 0 || pq_alloc_lists(impl) != 0) {
    pq_free(impl);
    return dbl_plain_fail("std::bad_alloc");
  }
  /* the training set: every ratio-th row, as cuVS's sample size */
  size_t want = (size_t)(params->kmeans_trainset_fraction * (double)n);
  if (want < impl->n_lists) want = impl->n_lists;
  size_t ratio = (size_t)n / (want ? want : 1);
  if (ratio < 1) ratio = 1;
  int64_t nt = n / (int64_t)ratio;
  int64_t esz = t->dtype.bits / 8;
  st = dbl_dev_take(pq_dev_fixed(impl), &impl->dev_fixed);
  if (st == CUVS_SUCCESS) st = pq_dev_train(impl, nt, esz, params->max_train_points_per_pq_code);
  if (st != CUVS_SUCCESS) {
    pq_free(impl);
    return st;
  }
  float* train = malloc((size_t)nt * impl->dim * sizeof(float));
  if (!train) {
    pq_free(impl);
    return dbl_plain_fail("std::bad_alloc");
  }
  for (int64_t i = 0; i < nt; i++) {
    pq_load(t->data, t->dtype, i * (int64_t)ratio, impl->dim, train + (size_t)i * impl->dim);
  }
  int rc = pq_train(impl, train, nt, params->kmeans_n_iters, params->max_train_points_per_pq_code,
                    params->force_random_rotation);
  free(train);
  if (rc == 0 && params->add_data_on_build) rc = pq_add(impl, t->data, t->dtype, NULL, n);
  if (rc != 0) {
    pq_free(impl);
    return dbl_plain_fail("std::bad_alloc");
  }
  if (params->add_data_on_build) {
    st = pq_dev_extend(impl, n, esz, !device);
    if (st != CUVS_SUCCESS) {
      pq_free(impl);
      return st;
    }
  }
  pq_install(index, impl);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsIvfPqBuild(cuvsResources_t res, cuvsIvfPqIndexParams_t params,
                                   DLManagedTensor* dataset, cuvsIvfPqIndex_t index)
{
  DBL_ENTER(cuvsIvfPqBuild);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pq_build(params, dataset, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static cuvsError_t pq_borrow(pq_impl* impl, int i, const DLTensor* t)
{
  dbl_entry e;
  size_t bytes = (size_t)dl_numel(t) * sizeof(float);
  if (bytes > 0 && dbl_reg_containing(t->data, bytes, &e)) {
    impl->borrows[i] = e.id;
    dbl_reg_borrow(e.id, +1);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t pq_build_precomputed(cuvsIvfPqIndexParams_t params, uint32_t dim,
                                        DLManagedTensor* pqc_t, DLManagedTensor* cen_t,
                                        DLManagedTensor* crot_t, DLManagedTensor* rot_t,
                                        cuvsIvfPqIndex_t index)
{
  TRY(pq_index_params(params));
  TRY(pq_handle(index));
  TRY(dl_check_ptr(pqc_t, "pq_centers"));
  TRY(dl_check_ptr(cen_t, "centers"));
  TRY(dl_check_ptr(crot_t, "centers_rot"));
  TRY(dl_check_ptr(rot_t, "rotation_matrix"));
  const DLTensor *pqc = &pqc_t->dl_tensor, *cen = &cen_t->dl_tensor, *crot = &crot_t->dl_tensor,
                 *rot = &rot_t->dl_tensor;
  EXPECTS(dl_dev_compat(pqc), "pq_centers should have device compatible memory");
  EXPECTS(dl_dev_compat(cen), "centers should have device compatible memory");
  EXPECTS(dl_dev_compat(crot), "centers_rot should have device compatible memory");
  EXPECTS(dl_dev_compat(rot), "rotation_matrix should have device compatible memory");
  EXPECTS(dl_is_dtype(pqc->dtype, kDLFloat, 32), "pq_centers must be float32");
  EXPECTS(dl_is_dtype(cen->dtype, kDLFloat, 32), "centers must be float32");
  EXPECTS(dl_is_dtype(crot->dtype, kDLFloat, 32), "centers_rot must be float32");
  EXPECTS(dl_is_dtype(rot->dtype, kDLFloat, 32), "rotation_matrix must be float32");
  TRY(dl_view(pqc_t, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 3));
  TRY(dl_view(cen_t, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_view(crot_t, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_view(rot_t, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_strict(pqc, "pq_centers"));
  TRY(dl_strict(cen, "centers"));
  TRY(dl_strict(crot, "centers_rot"));
  TRY(dl_strict(rot, "rotation_matrix"));
  uint32_t pq_dim = params->pq_dim == 0 ? calc_pq_dim(dim) : params->pq_dim;
  uint32_t pq_len = (dim + pq_dim - 1) / pq_dim, book = 1u << (params->pq_bits & 31);
  uint32_t e0 = params->codebook_kind == CUVS_IVF_PQ_CODEBOOK_GEN_PER_CLUSTER ? params->n_lists
                                                                              : pq_dim;
  EXPECTS(pqc->shape[0] == e0 && pqc->shape[1] == pq_len && pqc->shape[2] == book,
          "pq_centers must have extent [%u, %u, %u]. Got [%u, %u, %u]", e0, pq_len, book,
          (unsigned)pqc->shape[0], (unsigned)pqc->shape[1], (unsigned)pqc->shape[2]);
  uint32_t dim_ext = (dim + 1 + 7) / 8 * 8;
  EXPECTS(cen->shape[0] == params->n_lists && cen->shape[1] == dim_ext,
          "centers must have extent [n_lists, round_up(dim + 1, 8)]. Expected [%u, %u], got [%u, "
          "%u]",
          params->n_lists, dim_ext, (unsigned)cen->shape[0], (unsigned)cen->shape[1]);
  EXPECTS(rot->shape[0] == pq_len * pq_dim && rot->shape[1] == dim,
          "rotation_matrix must have extent [rot_dim, dim] = [%u, %u]. Got [%u, %u]",
          pq_len * pq_dim, dim, (unsigned)rot->shape[0], (unsigned)rot->shape[1]);
  EXPECTS(crot->shape[0] == params->n_lists && crot->shape[1] == pq_len * pq_dim,
          "centers_rot must have extent [n_lists, pq_len * pq_dim]. Expected [%u, %u], got [%u, "
          "%u]",
          params->n_lists, pq_len * pq_dim, (unsigned)crot->shape[0], (unsigned)crot->shape[1]);
  pq_impl* impl = pq_new();
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  impl->view = 1;
  cuvsError_t st = pq_shape(impl, params, dim);
  if (st != CUVS_SUCCESS) {
    pq_free(impl);
    return st;
  }
  if (pq_alloc_lists(impl) != 0) {
    pq_free(impl);
    return dbl_plain_fail("std::bad_alloc");
  }
  impl->pq_centers = pqc->data;
  impl->centers = cen->data;
  impl->centers_rot = crot->data;
  impl->rotation = rot->data;
  pq_borrow(impl, 0, pqc);
  pq_borrow(impl, 1, cen);
  pq_borrow(impl, 2, crot);
  pq_borrow(impl, 3, rot);
  /* ivf_pq_index.cu: a view index's own part, the list sizes and pointers */
  uint64_t nl = impl->n_lists;
  st = dbl_dev_take(r256(nl * 4) + 2 * r256(nl * 8), &impl->dev_fixed);
  if (st != CUVS_SUCCESS) {
    pq_free(impl);
    return st;
  }
  pq_install(index, impl);
  index->dtype.code = 0;
  index->dtype.bits = 0;
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsIvfPqBuildPrecomputed(cuvsResources_t res, cuvsIvfPqIndexParams_t params,
                                              uint32_t dim, DLManagedTensor* pq_centers,
                                              DLManagedTensor* centers,
                                              DLManagedTensor* centers_rot,
                                              DLManagedTensor* rotation_matrix,
                                              cuvsIvfPqIndex_t index)
{
  DBL_ENTER(cuvsIvfPqBuildPrecomputed);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pq_build_precomputed(params, dim, pq_centers, centers, centers_rot,
                                        rotation_matrix, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- extend ---- */

/* The bytes of one row in the index's lists (interleaved: 16-byte chunks). */
static uint64_t pq_row_bytes(const pq_impl* impl)
{
  if (impl->layout == CUVS_IVF_PQ_LIST_LAYOUT_FLAT) {
    return ((uint64_t)impl->pq_dim * impl->pq_bits + 7) / 8;
  }
  uint64_t per_chunk = 128 / impl->pq_bits;
  return (impl->pq_dim + per_chunk - 1) / per_chunk * 16;
}

/* The device memory of cuVS's in-place extend of n rows (ivf_pq_build.cuh,
 * extend), taken and given back phase by phase; host: the rows are in host
 * memory. Before the rows are added (pq_dev_extend_pre): a placeholder
 * list of the new rows, which makes an extend too big fail before it
 * changes anything, then the centers unpadded for k-means predict; after
 * (pq_dev_extend_post, sizes[] the lists' sizes before): the old list
 * sizes with each list that outgrows its capacity allocated anew and
 * filled before the old one is freed, then the encoding batches; the
 * lists swapped. Each with the labels and a batch of host rows. */
static uint64_t pq_dev_extend_base(const pq_impl* impl, int64_t n, int64_t esz, int host)
{
  uint64_t b = (uint64_t)(n < 65536 ? n : 65536);
  return r256((uint64_t)n * 4) + (host ? r256(b * impl->dim * (uint64_t)esz) : 0);
}

static cuvsError_t pq_dev_extend_pre(const pq_impl* impl, int64_t n, int64_t esz, int host)
{
  uint64_t base = pq_dev_extend_base(impl, n, esz, host), placeholder;
  if (impl->layout == CUVS_IVF_PQ_LIST_LAYOUT_FLAT) {
    placeholder = r256((uint64_t)n * pq_row_bytes(impl));
  } else {
    int64_t m = n + 31 * (n < (int64_t)impl->n_lists ? n : (int64_t)impl->n_lists);
    uint64_t cap = (uint64_t)list_capacity(impl, m);
    placeholder = r256(cap * pq_row_bytes(impl)) + r256(cap * 8);
  }
  dbl_dev_block b;
  TRY(dbl_dev_take(base + placeholder, &b));
  dbl_dev_give(&b);
  TRY(dbl_dev_take(base + r256((uint64_t)impl->n_lists * impl->dim * 4), &b));
  dbl_dev_give(&b);
  return CUVS_SUCCESS;
}

static cuvsError_t pq_dev_extend_post(pq_impl* impl, const int64_t* sizes, int64_t n, int64_t esz,
                                      int host)
{
  uint64_t base = pq_dev_extend_base(impl, n, esz, host) + r256((uint64_t)impl->n_lists * 4);
  uint64_t row = pq_row_bytes(impl), old_bytes = 0, largest = 0;
  for (uint32_t l = 0; l < impl->n_lists; l++) {
    uint64_t cap = (uint64_t)list_capacity(impl, sizes[l]);
    uint64_t bytes = r256(cap * row) + r256(cap * 8);
    old_bytes += bytes;
    if ((uint64_t)impl->lists[l].size > cap && bytes > largest) largest = bytes;
  }
  uint64_t new_bytes = pq_dev_lists(impl);
  uint64_t grown = new_bytes > old_bytes ? new_bytes - old_bytes + largest : 0;
  uint64_t b = (uint64_t)(n < 65536 ? n : 65536);
  uint64_t encode = r256(b * (((uint64_t)impl->dim + impl->rot_dim) * 4 + 8)) + (host ? r256(b * 8) : 0);
  dbl_dev_block blk;
  TRY(dbl_dev_take(base + (grown > encode ? grown : encode), &blk));
  dbl_dev_give(&blk);
  dbl_dev_give(&impl->dev_lists);
  return dbl_dev_take(new_bytes, &impl->dev_lists);
}

static cuvsError_t pq_extend(DLManagedTensor* vec_t, DLManagedTensor* ids_t, cuvsIvfPqIndex_t index)
{
  TRY(pq_handle(index));
  TRY(dl_check_ptr(vec_t, "new_vectors"));
  TRY(dl_check_ptr(ids_t, "new_indices"));
  const DLTensor* v = &vec_t->dl_tensor;
  const DLTensor* ids = &ids_t->dl_tensor;
  if (index->dtype.code == 0 && index->dtype.bits == 0) {
    index->dtype.code = v->dtype.code;
    index->dtype.bits = v->dtype.bits;
  }
  if (!pq_dtype_ok(v->dtype)) {
    return RAFT_FAIL("Unsupported index dtype: %d and bits: %d", (int)v->dtype.code,
                     (int)v->dtype.bits);
  }
  int device = dl_dev_compat(v);
  EXPECTS(device == dl_dev_compat(ids),
          "extend inputs must both either be on device memory or host memory");
  int where = device ? WANT_DEVICE : WANT_HOST;
  TRY(dl_view(vec_t, LAYOUT_ROW, v->dtype.code, v->dtype.bits, where, 2));
  int auto_ids = ids->data == NULL; /* cuVS reads a NULL data pointer as "no ids" */
  if (!auto_ids) TRY(dl_view(ids_t, LAYOUT_ROW, kDLInt, 64, where, 1));
  TRY(dl_strict(v, "new_vectors"));
  if (!auto_ids) TRY(dl_strict(ids, "new_indices"));
  pq_impl* impl;
  TRY(pq_impl_of(index, &impl));
  EXPECTS(v->shape[1] == impl->dim, "new_vectors should have the same dimension as the index");
  int64_t n = v->shape[0];
  EXPECTS(auto_ids || n == ids->shape[0],
          "new_vectors and new_indices have different number of rows");
  if (pthread_rwlock_trywrlock(&impl->lock) != 0) {
    dbl_violation("IVF-PQ index extended while another thread uses it");
    pthread_rwlock_wrlock(&impl->lock);
  }
  cuvsError_t st = CUVS_SUCCESS;
  int64_t esz = v->dtype.bits / 8;
  int64_t* sizes = calloc(impl->n_lists ? impl->n_lists : 1, sizeof(int64_t));
  int64_t size = impl->size;
  if (!sizes) {
    st = dbl_plain_fail("std::bad_alloc");
  } else if (auto_ids && impl->size != 0) {
    st = RAFT_FAIL("You must pass data indices when the index is non-empty.");
  } else if ((st = pq_dev_extend_pre(impl, n, esz, !device)) != CUVS_SUCCESS) {
    /* refused before anything changed */
  } else {
    for (uint32_t l = 0; l < impl->n_lists; l++) sizes[l] = impl->lists_made ? impl->lists[l].size : 0;
    if (pq_add(impl, v->data, v->dtype, auto_ids ? NULL : ids->data, n) != 0) {
      st = dbl_plain_fail("std::bad_alloc");
    } else if ((st = pq_dev_extend_post(impl, sizes, n, esz, !device)) != CUVS_SUCCESS) {
      for (uint32_t l = 0; l < impl->n_lists; l++) { /* the rows were not added */
        impl->lists[l].size = sizes[l];
        impl->list_sizes[l] = (uint32_t)sizes[l];
      }
      impl->size = size;
    }
  }
  free(sizes);
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

DBL_API cuvsError_t cuvsIvfPqExtend(cuvsResources_t res, DLManagedTensor* new_vectors,
                                    DLManagedTensor* new_indices, cuvsIvfPqIndex_t index)
{
  DBL_ENTER(cuvsIvfPqExtend);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pq_extend(new_vectors, new_indices, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- search ---- */

typedef struct {
  float key;
  int64_t id;
  float val;
} pq_cand;

static int cand_cmp(const void* a, const void* b)
{
  const pq_cand *x = a, *y = b;
  if (x->key < y->key) return -1;
  if (x->key > y->key) return 1;
  return (x->id > y->id) - (x->id < y->id);
}

static cuvsError_t pq_search(cuvsIvfPqSearchParams_t params, cuvsIvfPqIndex_t index,
                             DLManagedTensor* q_t, DLManagedTensor* nb_t, DLManagedTensor* ds_t)
{
  TRY(dl_check_ptr(q_t, "queries"));
  TRY(dl_check_ptr(nb_t, "neighbors"));
  TRY(dl_check_ptr(ds_t, "distances"));
  const DLTensor* q = &q_t->dl_tensor;
  const DLTensor* nb = &nb_t->dl_tensor;
  const DLTensor* ds = &ds_t->dl_tensor;
  EXPECTS(dl_dev_compat(q), "queries should have device compatible memory");
  EXPECTS(dl_dev_compat(nb), "neighbors should have device compatible memory");
  EXPECTS(dl_dev_compat(ds), "distances should have device compatible memory");
  EXPECTS(dl_is_dtype(nb->dtype, kDLInt, 64), "neighbors should be of type int64_t");
  EXPECTS(dl_is_dtype(ds->dtype, kDLFloat, 32), "distances should be of type float32");
  TRY(pq_handle(index));
  if (!pq_dtype_ok(q->dtype)) {
    return RAFT_FAIL("Unsupported queries DLtensor dtype: %d and bits: %d", (int)q->dtype.code,
                     (int)q->dtype.bits);
  }
  TRY(dbl_check_plain_params(params, K_IVFPQ_SEARCH_PARAMS));
  pq_impl* impl;
  TRY(pq_impl_of(index, &impl));
  TRY(dl_view(q_t, LAYOUT_ROW, q->dtype.code, q->dtype.bits, WANT_DEVICE, 2));
  TRY(dl_view(nb_t, LAYOUT_ROW, kDLInt, 64, WANT_DEVICE, 2));
  TRY(dl_view(ds_t, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_strict(q, "queries"));
  TRY(dl_strict(nb, "neighbors"));
  TRY(dl_strict(ds, "distances"));
  EXPECTS(q->shape[0] == nb->shape[0] && q->shape[0] == ds->shape[0],
          "Number of rows in output neighbors and distances matrices must equal the number of "
          "queries.");
  EXPECTS(nb->shape[1] == ds->shape[1],
          "Number of columns in output neighbors and distances matrices must equal k");
  EXPECTS(q->shape[1] == impl->dim,
          "Number of query dimensions should equal number of dimensions in the index.");
  int idt = (int)params->internal_distance_dtype, lut = (int)params->lut_dtype;
  EXPECTS(idt == DBL_CUDA_R_16F || idt == DBL_CUDA_R_32F,
          "internal_distance_dtype must be either CUDA_R_16F or CUDA_R_32F");
  EXPECTS(lut == DBL_CUDA_R_16F || lut == DBL_CUDA_R_32F || lut == DBL_CUDA_R_8U,
          "lut_dtype must be CUDA_R_16F, CUDA_R_32F or CUDA_R_8U");
  int64_t k = nb->shape[1], nq = q->shape[0];
  EXPECTS(k > 0, "parameter `k` in top-k must be positive.");
  pthread_rwlock_rdlock(&impl->lock);
  cuvsError_t st = CUVS_SUCCESS;
  if (k > impl->size) {
    st = RAFT_FAIL("parameter `k` (%u) in top-k must not be larger that the total size of the "
                   "index (%zu)",
                   (unsigned)k, (size_t)impl->size);
  } else if (params->n_probes == 0) {
    st = RAFT_FAIL("n_probes (number of clusters to probe in the search) must be positive.");
  } else if (impl->layout != CUVS_IVF_PQ_LIST_LAYOUT_INTERLEAVED) {
    st = RAFT_FAIL("IVF-PQ search requires INTERLEAVED codes layout. FLAT layout is not supported "
                   "for GPU search.");
  } else if ((int)params->coarse_search_dtype != DBL_CUDA_R_32F &&
             (int)params->coarse_search_dtype != DBL_CUDA_R_16F &&
             (int)params->coarse_search_dtype != DBL_CUDA_R_8I) {
    st = RAFT_FAIL("Unexpected coarse_search_dtype (%d)", (int)params->coarse_search_dtype);
  } else if ((idt == DBL_CUDA_R_16F ? 2 : 4) < (lut == DBL_CUDA_R_32F ? 4 : lut == DBL_CUDA_R_16F ? 2 : 1)) {
    st = RAFT_FAIL("Unexpected lut_dtype / internal_distance_dtype combination (%d, %d). Size of "
                   "the internal_distance_dtype should be not smaller than the size of the "
                   "lut_dtype.",
                   lut, idt);
  } else if (impl->metric != L2Expanded && impl->metric != L2SqrtExpanded &&
             impl->metric != InnerProduct && impl->metric != CosineExpanded) {
    st = RAFT_FAIL("Unsupported distance type %d.", impl->metric);
  }
  if (st != CUVS_SUCCESS) {
    pthread_rwlock_unlock(&impl->lock);
    return st;
  }
  uint32_t probes = params->n_probes < impl->n_lists ? params->n_probes : impl->n_lists;
  int ipm = pq_ip(impl), larger = impl->metric == InnerProduct;
  float* x = malloc((size_t)impl->dim * sizeof(float));
  float* rx = malloc((size_t)impl->rot_dim * sizeof(float));
  float* rec = malloc((size_t)impl->rot_dim * sizeof(float));
  pq_cand* lc = malloc((size_t)impl->n_lists * sizeof(pq_cand));
  pq_cand* cand = malloc((size_t)(impl->size ? impl->size : 1) * sizeof(pq_cand));
  int64_t* nbo = nb->data;
  float* dso = ds->data;
  if (!x || !rx || !rec || !lc || !cand) {
    st = dbl_plain_fail("std::bad_alloc");
    goto out;
  }
  for (int64_t qi = 0; qi < nq; qi++) {
    pq_load(q->data, q->dtype, qi, impl->dim, x);
    if (impl->metric == CosineExpanded) normalize(x, impl->dim);
    for (uint32_t l = 0; l < impl->n_lists; l++) {
      const float* c = impl->centers + (size_t)l * impl->dim_ext;
      lc[l].key = ipm ? -dot(x, c, impl->dim) : sqdist(x, c, impl->dim);
      lc[l].id = l;
    }
    qsort(lc, impl->n_lists, sizeof(pq_cand), cand_cmp);
    pq_rotate(impl, x, rx);
    int64_t m = 0;
    for (uint32_t p = 0; p < probes; p++) {
      uint32_t l = (uint32_t)lc[p].id;
      const pq_list* L = &impl->lists[l];
      for (int64_t r = 0; impl->lists_made && r < L->size; r++) {
        pq_decode(impl, l, L->codes + (size_t)r * impl->pq_dim, rec);
        float v;
        if (impl->metric == InnerProduct) {
          v = dot(rx, rec, impl->rot_dim);
        } else if (impl->metric == CosineExpanded) {
          /* cuVS scores cosine as the negated inner product of the
           * normalized query and row, and its postprocessing leaves
           * CosineExpanded unflipped (ivf_pq_search.cuh: account_for_max_close
           * is false for it): -cos, smaller nearer; an H200 returned -1 for
           * a row along the query. */
          float nr = sqrtf(dot(rec, rec, impl->rot_dim));
          v = -dot(rx, rec, impl->rot_dim) / (nr > 0 ? nr : 1);
        } else {
          v = sqdist(rx, rec, impl->rot_dim);
          if (impl->metric == L2SqrtExpanded) v = sqrtf(v);
        }
        cand[m].key = larger ? -v : v;
        cand[m].val = v;
        cand[m].id = L->ids[r];
        m++;
      }
    }
    qsort(cand, (size_t)m, sizeof(pq_cand), cand_cmp);
    for (int64_t j = 0; j < k; j++) {
      nbo[qi * k + j] = j < m ? cand[j].id : PQ_OUT_OF_BOUNDS;
      dso[qi * k + j] = j < m ? cand[j].val : (larger ? -INFINITY : INFINITY);
    }
  }
out:
  pthread_rwlock_unlock(&impl->lock);
  free(x), free(rx), free(rec), free(lc), free(cand);
  return st;
}

DBL_API cuvsError_t cuvsIvfPqSearch(cuvsResources_t res, cuvsIvfPqSearchParams_t search_params,
                                    cuvsIvfPqIndex_t index, DLManagedTensor* queries,
                                    DLManagedTensor* neighbors, DLManagedTensor* distances)
{
  DBL_ENTER(cuvsIvfPqSearch);
  if (DBL_INSTANT()) return CUVS_SUCCESS;
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pq_search(search_params, index, queries, neighbors, distances);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, neighbors, distances);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- transform and list data ---- */

static void pq_pack(const uint8_t* codes, uint32_t pq_dim, uint32_t bits, uint8_t* out)
{
  uint32_t bytes = (pq_dim * bits + 7) / 8;
  memset(out, 0, bytes);
  for (uint32_t j = 0; j < pq_dim; j++) {
    uint32_t bit = j * bits;
    uint32_t v = (uint32_t)codes[j] << (bit % 8);
    out[bit / 8] |= (uint8_t)v;
    if (bit / 8 + 1 < bytes) out[bit / 8 + 1] |= (uint8_t)(v >> 8);
  }
}

static cuvsError_t pq_transform(cuvsIvfPqIndex_t index, DLManagedTensor* in_t,
                                DLManagedTensor* lab_t, DLManagedTensor* out_t)
{
  TRY(dl_check_ptr(in_t, "input_dataset"));
  TRY(dl_check_ptr(lab_t, "output_labels"));
  TRY(dl_check_ptr(out_t, "output_dataset"));
  const DLTensor *in = &in_t->dl_tensor, *lab = &lab_t->dl_tensor, *out = &out_t->dl_tensor;
  EXPECTS(dl_dev_compat(in), "input_dataset should have device compatible memory");
  EXPECTS(dl_dev_compat(lab), "output_labels should have device compatible memory");
  EXPECTS(dl_dev_compat(out), "output_dataset should have device compatible memory");
  EXPECTS(dl_is_dtype(lab->dtype, kDLUInt, 32), "output_labels must have a uint32 dtype ");
  EXPECTS(dl_is_dtype(out->dtype, kDLUInt, 8), "output_dataset must have a uint8 dtype");
  if (!pq_dtype_ok(in->dtype)) {
    return RAFT_FAIL("Unsupported input_dataset DLtensor dtype: %d and bits: %d",
                     (int)in->dtype.code, (int)in->dtype.bits);
  }
  TRY(pq_handle(index));
  pq_impl* impl;
  TRY(pq_impl_of(index, &impl));
  TRY(dl_view(in_t, LAYOUT_ROW, in->dtype.code, in->dtype.bits, WANT_DEVICE, 2));
  TRY(dl_view(lab_t, LAYOUT_ROW, kDLUInt, 32, WANT_DEVICE, 1));
  TRY(dl_view(out_t, LAYOUT_ROW, kDLUInt, 8, WANT_DEVICE, 2));
  TRY(dl_strict(in, "input_dataset"));
  TRY(dl_strict(lab, "output_labels"));
  TRY(dl_strict(out, "output_dataset"));
  int64_t n = in->shape[0];
  EXPECTS(lab->shape[0] == n, "incorrect number of rows in output_labels");
  EXPECTS(out->shape[0] == n, "incorrect number of rows in output_dataset");
  uint32_t bytes = (impl->pq_dim * impl->pq_bits + 7) / 8;
  EXPECTS(out->shape[1] == bytes, "incorrect number of cols in output_dataset");
  if (in->shape[1] != impl->dim) {
    dbl_violation("transform input has %lld columns, the index %u (the real library reads out of "
                  "bounds)",
                  (long long)in->shape[1], impl->dim);
    return RAFT_FAIL("cuvsdouble: transform input dimension mismatch");
  }
  float* x = malloc((size_t)impl->dim * sizeof(float));
  float* rx = malloc((size_t)impl->rot_dim * sizeof(float));
  float* res = malloc((size_t)impl->rot_dim * sizeof(float));
  float* rec = malloc((size_t)impl->rot_dim * sizeof(float));
  uint8_t* codes = malloc(impl->pq_dim);
  cuvsError_t st = CUVS_SUCCESS;
  if (!x || !rx || !res || !rec || !codes) {
    st = dbl_plain_fail("std::bad_alloc");
  } else {
    pthread_rwlock_rdlock(&impl->lock);
    for (int64_t i = 0; i < n; i++) {
      pq_load(in->data, in->dtype, i, impl->dim, x);
      if (impl->metric == CosineExpanded) normalize(x, impl->dim);
      uint32_t l = pq_nearest_list(impl, x);
      pq_residual(impl, x, l, rx, res);
      pq_encode(impl, l, res, codes, rec);
      ((uint32_t*)lab->data)[i] = l;
      pq_pack(codes, impl->pq_dim, impl->pq_bits, (uint8_t*)out->data + (size_t)i * bytes);
    }
    pthread_rwlock_unlock(&impl->lock);
  }
  free(x), free(rx), free(res), free(rec), free(codes);
  return st;
}

DBL_API cuvsError_t cuvsIvfPqTransform(cuvsResources_t res, cuvsIvfPqIndex_t index,
                                       DLManagedTensor* input_dataset,
                                       DLManagedTensor* output_labels,
                                       DLManagedTensor* output_dataset)
{
  DBL_ENTER(cuvsIvfPqTransform);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pq_transform(index, input_dataset, output_labels, output_dataset);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static cuvsError_t pq_unpack(cuvsIvfPqIndex_t index, DLManagedTensor* out_t, uint32_t label,
                             uint32_t offset)
{
  pq_impl* impl;
  TRY(pq_impl_of(index, &impl));
  TRY(dl_check_ptr(out_t, "out_codes"));
  TRY(dl_view(out_t, LAYOUT_ROW, kDLUInt, 8, WANT_DEVICE, 2));
  const DLTensor* out = &out_t->dl_tensor;
  TRY(dl_strict(out, "out_codes"));
  EXPECTS(impl->layout == CUVS_IVF_PQ_LIST_LAYOUT_INTERLEAVED,
          "unpack_contiguous_list_data currently only supports INTERLEAVED layout");
  if (label >= impl->n_lists || !impl->lists_made) {
    dbl_violation("unpacking list %u of an IVF-PQ index with %u lists%s (the real library "
                  "dereferences a missing list)",
                  label, impl->n_lists, impl->lists_made ? "" : " none of them allocated yet");
    return RAFT_FAIL("cuvsdouble: no list %u", label);
  }
  pthread_rwlock_rdlock(&impl->lock);
  const pq_list* L = &impl->lists[label];
  int64_t n = out->shape[0];
  uint32_t bytes = (impl->pq_dim * impl->pq_bits + 7) / 8;
  cuvsError_t st = CUVS_SUCCESS;
  if ((int64_t)offset + n > L->cap) {
    dbl_violation("unpacking rows %u..%lld of list %u whose capacity is %lld (the real library "
                  "reads out of bounds)",
                  offset, (long long)offset + n, label, (long long)L->cap);
    st = RAFT_FAIL("cuvsdouble: rows beyond the list's capacity");
  } else if (out->shape[1] < bytes && n > 0) {
    dbl_violation("out_codes has %lld columns, the codes need %u (the real library writes out of "
                  "bounds)",
                  (long long)out->shape[1], bytes);
    st = RAFT_FAIL("cuvsdouble: out_codes is too narrow");
  } else {
    for (int64_t i = 0; i < n; i++) {
      pq_pack(L->codes + (size_t)(offset + i) * impl->pq_dim, impl->pq_dim, impl->pq_bits,
              (uint8_t*)out->data + (size_t)i * out->shape[1]);
    }
  }
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

DBL_API cuvsError_t cuvsIvfPqIndexUnpackContiguousListData(cuvsResources_t res,
                                                           cuvsIvfPqIndex_t index,
                                                           DLManagedTensor* out_codes,
                                                           uint32_t label, uint32_t offset)
{
  DBL_ENTER(cuvsIvfPqIndexUnpackContiguousListData);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pq_unpack(index, out_codes, label, offset);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ---- getters ---- */

static cuvsError_t pq_get(cuvsIvfPqIndex_t index, int64_t* out, int which)
{
  pq_impl* impl;
  TRY(pq_impl_of(index, &impl));
  if (!out) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  pthread_rwlock_rdlock(&impl->lock);
  switch (which) {
    case 0: *out = impl->n_lists; break;
    case 1: *out = impl->dim; break;
    case 2: *out = impl->size; break;
    case 3: *out = impl->pq_dim; break;
    case 4: *out = impl->pq_bits; break;
    default: *out = impl->pq_len; break;
  }
  pthread_rwlock_unlock(&impl->lock);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfPqIndexGetNLists(cuvsIvfPqIndex_t index, int64_t* n_lists)
{
  DBL_ENTER(cuvsIvfPqIndexGetNLists);
  return pq_get(index, n_lists, 0);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetDim(cuvsIvfPqIndex_t index, int64_t* dim)
{
  DBL_ENTER(cuvsIvfPqIndexGetDim);
  return pq_get(index, dim, 1);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetSize(cuvsIvfPqIndex_t index, int64_t* size)
{
  DBL_ENTER(cuvsIvfPqIndexGetSize);
  return pq_get(index, size, 2);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetPqDim(cuvsIvfPqIndex_t index, int64_t* pq_dim)
{
  DBL_ENTER(cuvsIvfPqIndexGetPqDim);
  return pq_get(index, pq_dim, 3);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetPqBits(cuvsIvfPqIndex_t index, int64_t* pq_bits)
{
  DBL_ENTER(cuvsIvfPqIndexGetPqBits);
  return pq_get(index, pq_bits, 4);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetPqLen(cuvsIvfPqIndex_t index, int64_t* pq_len)
{
  DBL_ENTER(cuvsIvfPqIndexGetPqLen);
  return pq_get(index, pq_len, 5);
}

enum { V_CENTERS, V_CENTERS_PADDED, V_PQ_CENTERS, V_CENTERS_ROT, V_ROTATION, V_LIST_SIZES, V_LIST_INDICES };

/* Fills the caller's tensor as cuVS's to_dlpack does: shape (and, for the
 * strided centres, strides) from the library, a deleter freeing only those. */
static cuvsError_t pq_view(cuvsIvfPqIndex_t index, DLManagedTensor* out, int which, uint32_t label)
{
  pq_impl* impl;
  TRY(pq_impl_of(index, &impl));
  if (!out) {
    dbl_violation("NULL DLManagedTensor* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL DLManagedTensor*");
  }
  if (which == V_LIST_INDICES && (label >= impl->n_lists || !impl->lists_made)) {
    dbl_violation("list %u of an IVF-PQ index with %u lists%s (the real library dereferences a "
                  "missing list)",
                  label, impl->n_lists, impl->lists_made ? "" : ", none of them allocated yet");
    return RAFT_FAIL("cuvsdouble: no list %u", label);
  }
  DLTensor* t = &out->dl_tensor;
  if ((t->shape && dbl_reg_find(t->shape, NULL) == K_META) ||
      (t->strides && dbl_reg_find(t->strides, NULL) == K_META)) {
    dbl_violation("a view is written over a tensor whose previous library-made shape/strides "
                  "were never released (call its deleter first): they leak");
  }
  pthread_rwlock_rdlock(&impl->lock);
  t->device.device_type = kDLCUDA;
  t->device.device_id = 0;
  t->byte_offset = 0;
  t->strides = NULL;
  t->dtype = (DLDataType){kDLFloat, 32, 1};
  t->ndim = 2;
  switch (which) {
    case V_CENTERS:
      t->shape = dbl_meta_alloc(2);
      t->shape[0] = impl->n_lists, t->shape[1] = impl->dim;
      t->strides = dbl_meta_alloc(2);
      t->strides[0] = impl->dim_ext, t->strides[1] = 1;
      t->data = impl->centers;
      break;
    case V_CENTERS_PADDED:
      t->shape = dbl_meta_alloc(2);
      t->shape[0] = impl->n_lists, t->shape[1] = impl->dim_ext;
      t->data = impl->centers;
      break;
    case V_PQ_CENTERS:
      t->ndim = 3;
      t->shape = dbl_meta_alloc(3);
      t->shape[0] = pq_books(impl), t->shape[1] = impl->pq_len, t->shape[2] = impl->book;
      t->data = impl->pq_centers;
      break;
    case V_CENTERS_ROT:
      t->shape = dbl_meta_alloc(2);
      t->shape[0] = impl->n_lists, t->shape[1] = impl->rot_dim;
      t->data = impl->centers_rot;
      break;
    case V_ROTATION:
      t->shape = dbl_meta_alloc(2);
      t->shape[0] = impl->rot_dim, t->shape[1] = impl->dim;
      t->data = impl->rotation;
      break;
    case V_LIST_SIZES:
      t->ndim = 1;
      t->dtype = (DLDataType){kDLUInt, 32, 1};
      t->shape = dbl_meta_alloc(1);
      t->shape[0] = impl->n_lists;
      t->data = impl->list_sizes;
      break;
    default:
      t->ndim = 1;
      t->dtype = (DLDataType){kDLInt, 64, 1};
      t->shape = dbl_meta_alloc(1);
      t->shape[0] = impl->lists[label].cap;
      t->data = impl->lists[label].ids;
      break;
  }
  out->deleter = dbl_meta_deleter;
  pthread_rwlock_unlock(&impl->lock);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsIvfPqIndexGetCenters(cuvsIvfPqIndex_t index, DLManagedTensor* centers)
{
  DBL_ENTER(cuvsIvfPqIndexGetCenters);
  return pq_view(index, centers, V_CENTERS, 0);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetCentersPadded(cuvsIvfPqIndex_t index, DLManagedTensor* centers)
{
  DBL_ENTER(cuvsIvfPqIndexGetCentersPadded);
  return pq_view(index, centers, V_CENTERS_PADDED, 0);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetPqCenters(cuvsIvfPqIndex_t index, DLManagedTensor* pq_centers)
{
  DBL_ENTER(cuvsIvfPqIndexGetPqCenters);
  return pq_view(index, pq_centers, V_PQ_CENTERS, 0);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetCentersRot(cuvsIvfPqIndex_t index, DLManagedTensor* centers_rot)
{
  DBL_ENTER(cuvsIvfPqIndexGetCentersRot);
  return pq_view(index, centers_rot, V_CENTERS_ROT, 0);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetRotationMatrix(cuvsIvfPqIndex_t index,
                                                    DLManagedTensor* rotation_matrix)
{
  DBL_ENTER(cuvsIvfPqIndexGetRotationMatrix);
  return pq_view(index, rotation_matrix, V_ROTATION, 0);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetListSizes(cuvsIvfPqIndex_t index, DLManagedTensor* list_sizes)
{
  DBL_ENTER(cuvsIvfPqIndexGetListSizes);
  return pq_view(index, list_sizes, V_LIST_SIZES, 0);
}

DBL_API cuvsError_t cuvsIvfPqIndexGetListIndices(cuvsIvfPqIndex_t index, uint32_t label,
                                                 DLManagedTensor* out_labels)
{
  DBL_ENTER(cuvsIvfPqIndexGetListIndices);
  return pq_view(index, out_labels, V_LIST_INDICES, label);
}

/* ---- serialization: cuVS's header scalars, then the double's own body ---- */

typedef struct {
  char magic[8];
  int32_t metric, codebook_kind, layout, conservative;
  uint32_t n_lists, dim, pq_bits, pq_dim, lists_made, pad;
  int64_t size;
} pq_file_header;

static int wr(FILE* f, const void* p, size_t n) { return n == 0 || fwrite(p, n, 1, f) == 1; }
static int rd(FILE* f, void* p, size_t n) { return n == 0 || fread(p, n, 1, f) == 1; }

/* cuVS's header, as ivf_pq_serialize.cuh writes it (both releases): what
 * a reader of the file's header (the safe layer reads the metric and the
 * codes layout there) finds where cuVS puts it. */
static int pq_write_prefix(FILE* f, const pq_impl* impl)
{
  return ivf_npy_write(f, "<i4", 4, 4) && ivf_npy_write(f, "<i8", (uint64_t)impl->size, 8) &&
         ivf_npy_write(f, "<u4", impl->dim, 4) && ivf_npy_write(f, "<u4", impl->pq_bits, 4) &&
         ivf_npy_write(f, "<u4", impl->pq_dim, 4) &&
         ivf_npy_write(f, "|b1", (uint64_t)(impl->conservative != 0), 1) &&
         ivf_npy_write(f, "<i4", (uint64_t)(uint32_t)impl->metric, 4) &&
         ivf_npy_write(f, "<i4", (uint64_t)(uint32_t)impl->codebook_kind, 4) &&
         ivf_npy_write(f, "<i4", (uint64_t)(uint32_t)impl->layout, 4) &&
         ivf_npy_write(f, "<u4", impl->n_lists, 4);
}

static cuvsError_t pq_serialize(const char* filename, cuvsIvfPqIndex_t index)
{
  pq_impl* impl;
  TRY(pq_impl_of(index, &impl));
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  pthread_rwlock_rdlock(&impl->lock);
  FILE* f = fopen(filename, "wb");
  cuvsError_t st = CUVS_SUCCESS;
  if (!f) {
    st = RAFT_FAIL("Cannot open file %s", filename);
  } else {
    pq_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PQ_FILE_MAGIC, 8);
    h.metric = impl->metric, h.codebook_kind = impl->codebook_kind, h.layout = impl->layout;
    h.conservative = impl->conservative, h.n_lists = impl->n_lists, h.dim = impl->dim;
    h.pq_bits = impl->pq_bits, h.pq_dim = impl->pq_dim, h.lists_made = (uint32_t)impl->lists_made;
    h.size = impl->size;
    int ok = pq_write_prefix(f, impl) && wr(f, &h, sizeof h) &&
             wr(f, impl->centers, (size_t)impl->n_lists * impl->dim_ext * sizeof(float)) &&
             wr(f, impl->pq_centers,
                (size_t)pq_books(impl) * impl->pq_len * impl->book * sizeof(float)) &&
             wr(f, impl->centers_rot, (size_t)impl->n_lists * impl->rot_dim * sizeof(float)) &&
             wr(f, impl->rotation, (size_t)impl->rot_dim * impl->dim * sizeof(float));
    for (uint32_t l = 0; ok && impl->lists_made && l < impl->n_lists; l++) {
      const pq_list* L = &impl->lists[l];
      ok = wr(f, &L->size, sizeof L->size) && wr(f, L->ids, (size_t)L->size * sizeof(int64_t)) &&
           wr(f, L->codes, (size_t)L->size * impl->pq_dim);
    }
    if (fclose(f) != 0) ok = 0;
    if (!ok) st = RAFT_FAIL("Error writing output %s", filename);
  }
  pthread_rwlock_unlock(&impl->lock);
  return st;
}

DBL_API cuvsError_t cuvsIvfPqSerialize(cuvsResources_t res, const char* filename,
                                       cuvsIvfPqIndex_t index)
{
  DBL_ENTER(cuvsIvfPqSerialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pq_serialize(filename, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}


/* cuvs::util::is_valid_distance_type, which cuVS's deserializers apply to
 * the metric they read */
static int file_metric_ok(int m) { return (m >= 0 && m <= 20) || m == 100 || m == 101; }

/* The double's own formats end where the index does: bytes after it are
 * refused (cuVS reads no further; the safe layer refuses them before C in
 * cuVS's formats, whose items it can walk). */
static int file_at_end(FILE* f) { return dbl_at_end(f); }

static cuvsError_t pq_deserialize(const char* filename, cuvsIvfPqIndex_t index)
{
  TRY(pq_handle(index));
  if (!filename) {
    dbl_violation("NULL filename (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL filename");
  }
  FILE* f = fopen(filename, "rb");
  if (!f) return RAFT_FAIL("Cannot open file %s", filename);
  /* cuVS's header first: its version check, then the values, which the
   * double's own header repeats and must match */
  uint64_t pre[10];
  static const int pre_size[10] = {4, 8, 4, 4, 4, 1, 4, 4, 4, 4};
  int pre_ok = 1;
  for (int i = 0; i < 10 && pre_ok; i++) pre_ok = ivf_npy_read(f, pre_size[i], &pre[i]);
  if (pre_ok && pre[0] != 4) {
    fclose(f);
    return RAFT_FAIL("serialization version mismatch %d vs. %d", (int)(uint32_t)pre[0], 4);
  }
  pq_file_header h;
  if (!pre_ok || !rd(f, &h, sizeof h) || memcmp(h.magic, PQ_FILE_MAGIC, 8) != 0 || h.pq_bits < 4 ||
      h.pq_bits > 8 || h.pq_dim == 0 || h.dim == 0 || h.n_lists == 0 || h.n_lists > (1u << 24) ||
      h.dim > (1u << 24) || h.pq_dim > (1u << 24)) {
    fclose(f);
    return RAFT_FAIL("cuvsdouble: %s is not an IVF-PQ index file written by the test double",
                     filename);
  }
  /* what cuVS's deserialize checks of the values it reads */
  cuvsError_t bad = CUVS_SUCCESS;
  if (!file_metric_ok(h.metric)) {
    bad = RAFT_FAIL("ivf_pq::deserialize: invalid metric value %d", (int)h.metric);
  } else if (h.codebook_kind != 0 && h.codebook_kind != 1) {
    bad = RAFT_FAIL("ivf_pq::deserialize: invalid codebook_gen value %d", (int)h.codebook_kind);
  } else if (h.layout != 0 && h.layout != 1) {
    bad = RAFT_FAIL("ivf_pq::deserialize: invalid list_layout value %d", (int)h.layout);
  } else if ((h.conservative != 0 && h.conservative != 1) || (h.lists_made != 0 && h.lists_made != 1) ||
             h.pad != 0 || h.size < 0 || pre[1] != (uint64_t)h.size || pre[2] != h.dim ||
             pre[3] != h.pq_bits || pre[4] != h.pq_dim || pre[5] != (uint64_t)h.conservative ||
             pre[6] != (uint32_t)h.metric || pre[7] != (uint32_t)h.codebook_kind ||
             pre[8] != (uint32_t)h.layout || pre[9] != h.n_lists) {
    bad = RAFT_FAIL("cuvsdouble: %s is not an IVF-PQ index file written by the test double",
                    filename);
  }
  if (bad != CUVS_SUCCESS) {
    fclose(f);
    return bad;
  }
  struct cuvsIvfPqIndexParams p;
  memset(&p, 0, sizeof p);
  p.metric = (cuvsDistanceType)h.metric;
  p.codebook_kind = (enum cuvsIvfPqCodebookGen)h.codebook_kind;
  p.codes_layout = (enum cuvsIvfPqListLayout)h.layout;
  p.conservative_memory_allocation = h.conservative;
  p.n_lists = h.n_lists, p.pq_bits = h.pq_bits, p.pq_dim = h.pq_dim;
  pq_impl* impl = pq_new();
  if (!impl) {
    fclose(f);
    return dbl_plain_fail("std::bad_alloc");
  }
  cuvsError_t st = pq_shape(impl, &p, h.dim);
  /* the model's arrays, then per list at least its size: what the header
   * claims must fit in the file before anything is allocated */
  if (st == CUVS_SUCCESS) {
    const uint64_t q = UINT64_MAX / 8;
    uint64_t a = impl->centers_bytes, b = impl->pqc_bytes, c = impl->crot_bytes,
             d = impl->rot_bytes;
    if (a > q || b > q || c > q || d > q ||
        !dbl_file_holds(f, a + b + c + d, 1, 1, h.lists_made ? (uint64_t)h.n_lists : 0,
                        sizeof(int64_t), 1)) {
      pq_free(impl);
      fclose(f);
      return RAFT_FAIL("cuvsdouble: %s is truncated", filename);
    }
  }
  int ok = st == CUVS_SUCCESS && pq_alloc_model(impl) == 0 && pq_alloc_lists(impl) == 0;
  ok = ok && rd(f, impl->centers, impl->centers_bytes) && rd(f, impl->pq_centers, impl->pqc_bytes) &&
       rd(f, impl->centers_rot, impl->crot_bytes) && rd(f, impl->rotation, impl->rot_bytes);
  if (ok && h.lists_made) {
    ok = pq_add(impl, NULL, (DLDataType){kDLFloat, 32, 1}, NULL, 0) == 0; /* allocate the lists */
    for (uint32_t l = 0; ok && l < impl->n_lists; l++) {
      pq_list* L = &impl->lists[l];
      int64_t size;
      ok = rd(f, &size, sizeof size) && size >= 0 && size < ((int64_t)1 << 40) &&
           dbl_file_holds(f, (uint64_t)size, sizeof(int64_t) + impl->pq_dim, 1, 0, 0, 0);
      if (!ok) break;
      pq_free_list(L, impl->pq_dim);
      L->cap = list_capacity(impl, size);
      L->ids = dbl_buf_alloc((size_t)L->cap * sizeof(int64_t));
      L->codes = dbl_buf_alloc((size_t)L->cap * impl->pq_dim);
      ok = L->ids && L->codes;
      if (!ok) break;
      for (int64_t i = 0; i < L->cap; i++) L->ids[i] = PQ_INVALID_RECORD;
      memset(L->codes, 0, (size_t)L->cap * impl->pq_dim);
      L->size = size;
      ok = rd(f, L->ids, (size_t)size * sizeof(int64_t)) && rd(f, L->codes, (size_t)size * impl->pq_dim);
      impl->list_sizes[l] = (uint32_t)size;
      impl->size += size;
    }
  }
  int trailing = ok && !file_at_end(f);
  fclose(f);
  if (!ok) {
    pq_free(impl);
    return st != CUVS_SUCCESS ? st : RAFT_FAIL("cuvsdouble: %s is truncated", filename);
  }
  if (trailing || (h.lists_made && impl->size != h.size)) {
    pq_free(impl);
    return RAFT_FAIL(trailing ? "cuvsdouble: %s has bytes after the index"
                              : "cuvsdouble: %s: the lists do not hold the rows the header says",
                     filename);
  }
  /* ivf_pq_serialize.cuh deserialize: the model, and each list at the
   * capacity of its size (ivf_list.cuh deserialize_list) */
  st = dbl_dev_take(pq_dev_fixed(impl), &impl->dev_fixed);
  if (st == CUVS_SUCCESS && impl->lists_made) {
    st = dbl_dev_take(pq_dev_lists_of(impl, 1), &impl->dev_lists); /* deserialize_list: none for 0 rows */
  }
  if (st != CUVS_SUCCESS) {
    pq_free(impl);
    return st;
  }
  /* cuvsIvfPqDeserialize leaves index->dtype as it was */
  pq_install(index, impl);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsIvfPqDeserialize(cuvsResources_t res, const char* filename,
                                         cuvsIvfPqIndex_t index)
{
  DBL_ENTER(cuvsIvfPqDeserialize);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pq_deserialize(filename, index);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
