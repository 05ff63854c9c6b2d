/*
 * cuvsdouble IVF core (see dbl_ivf.h): k-means, inverted lists, probing
 * search and scalar quantisation, shared by dbl_ivf_flat.c and
 * dbl_ivf_sq.c. Deterministic: the same data gives the same lists.
 */
#include "dbl_ivf.h"

#include <float.h>
#include <math.h>

#define IVF_MAGIC 0x4956464c49535453ULL

int ivf_metric_ok(int metric, int sq)
{
  switch (metric) {
    case L2Expanded:
    case L2SqrtExpanded:
    case InnerProduct:
    case CosineExpanded: return 1;
    case L2Unexpanded:
    case L2SqrtUnexpanded: return !sq;
    default: return 0;
  }
}

int ivf_larger_is_better(int metric) { return metric == InnerProduct; }

float ivf_distance(int metric, const float* a, const float* b, int64_t dim)
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
    default:
      for (int64_t j = 0; j < dim; j++) {
        float d = a[j] - b[j];
        s += d * d;
      }
      return (metric == L2SqrtExpanded || metric == L2SqrtUnexpanded) ? sqrtf(s) : s;
  }
}

/* A key that sorts nearest first. */
static float ivf_key(int metric, const float* a, const float* b, int64_t dim)
{
  float v = ivf_distance(metric, a, b, dim);
  float key = ivf_larger_is_better(metric) ? -v : v;
  return isnan(key) ? FLT_MAX : key;
}

static void* xcalloc(size_t n, size_t size) { return calloc(n ? n : 1, size ? size : 1); }

ivf_impl* ivf_new(int sq, DLDataType dt, int metric, float metric_arg, int64_t dim, uint32_t n_lists)
{
  ivf_impl* impl = xcalloc(1, sizeof *impl);
  if (!impl) return NULL;
  impl->magic = IVF_MAGIC;
  impl->sq = sq;
  impl->dtype = dt;
  impl->metric = metric;
  impl->metric_arg = metric_arg;
  impl->dim = dim;
  impl->n_lists = n_lists;
  impl->centers = xcalloc((size_t)n_lists * (size_t)dim, sizeof(float));
  if (sq) {
    impl->vmin = xcalloc((size_t)dim, sizeof(float));
    impl->delta = xcalloc((size_t)dim, sizeof(float));
  }
  pthread_rwlock_init(&impl->lock, NULL);
  if (!impl->centers || (sq && (!impl->vmin || !impl->delta))) {
    ivf_free(impl);
    return NULL;
  }
  return impl;
}

void ivf_free(ivf_impl* impl)
{
  if (!impl) return;
  dbl_dev_give(&impl->dev_fixed);
  dbl_dev_give(&impl->dev_lists);
  free(impl->centers);
  free(impl->vmin);
  free(impl->delta);
  free(impl->labels);
  free(impl->ids);
  free(impl->vecs);
  free(impl->codes);
  pthread_rwlock_destroy(&impl->lock);
  impl->magic = 0;
  free(impl);
}

static uint32_t nearest_list(const ivf_impl* impl, const float* v)
{
  uint32_t best = 0;
  float bk = FLT_MAX;
  for (uint32_t c = 0; c < impl->n_lists; c++) {
    float key = ivf_key(impl->metric, v, impl->centers + (size_t)c * impl->dim, impl->dim);
    if (c == 0 || key < bk) {
      bk = key;
      best = c;
    }
  }
  return best;
}

int ivf_train(ivf_impl* impl, const dbl_matrix* data, int64_t n_train, uint32_t n_iters)
{
  int64_t dim = impl->dim, n = data->n;
  uint32_t nl = impl->n_lists;
  if (n_train < nl) n_train = nl;
  if (n_train > n) n_train = n;
  float* train = xcalloc((size_t)n_train * (size_t)dim, sizeof(float));
  uint32_t* lab = xcalloc((size_t)n_train, sizeof(uint32_t));
  double* sum = xcalloc((size_t)nl * (size_t)dim, sizeof(double));
  int64_t* cnt = xcalloc(nl, sizeof(int64_t));
  if (!train || !lab || !sum || !cnt) {
    free(train), free(lab), free(sum), free(cnt);
    return -1;
  }
  for (int64_t i = 0; i < n_train; i++) {
    int64_t row = (int64_t)((double)i * (double)n / (double)n_train);
    dl_load_row(data->base, data->dtype, data->rs, data->cs, row, dim, train + i * dim);
  }
  for (uint32_t c = 0; c < nl; c++) {
    int64_t row = (int64_t)((double)c * (double)n_train / (double)nl);
    memcpy(impl->centers + (size_t)c * dim, train + row * dim, (size_t)dim * sizeof(float));
  }
  for (uint32_t it = 0; it < n_iters; it++) {
    memset(sum, 0, (size_t)nl * (size_t)dim * sizeof(double));
    memset(cnt, 0, nl * sizeof(int64_t));
    for (int64_t i = 0; i < n_train; i++) {
      uint32_t c = nearest_list(impl, train + i * dim);
      cnt[c]++;
      for (int64_t j = 0; j < dim; j++) sum[(size_t)c * dim + j] += train[i * dim + j];
    }
    for (uint32_t c = 0; c < nl; c++) {
      if (cnt[c] == 0) continue; /* an empty cluster keeps its center */
      for (int64_t j = 0; j < dim; j++) {
        impl->centers[(size_t)c * dim + j] = (float)(sum[(size_t)c * dim + j] / (double)cnt[c]);
      }
    }
  }
  if (impl->sq) {
    /* per-dimension range of the residuals, widened by 5% each side */
    float* vmax = xcalloc((size_t)dim, sizeof(float));
    if (!vmax) {
      free(train), free(lab), free(sum), free(cnt);
      return -1;
    }
    for (int64_t j = 0; j < dim; j++) {
      impl->vmin[j] = FLT_MAX;
      vmax[j] = -FLT_MAX;
    }
    for (int64_t i = 0; i < n_train; i++) {
      uint32_t c = nearest_list(impl, train + i * dim);
      for (int64_t j = 0; j < dim; j++) {
        float r = train[i * dim + j] - impl->centers[(size_t)c * dim + j];
        if (r < impl->vmin[j]) impl->vmin[j] = r;
        if (r > vmax[j]) vmax[j] = r;
      }
    }
    for (int64_t j = 0; j < dim; j++) {
      float range = vmax[j] - impl->vmin[j];
      float margin = range * 0.05f;
      impl->delta[j] = range > 0 ? (range + 2.0f * margin) / 255.0f : 1.0f;
      impl->vmin[j] -= margin;
    }
    free(vmax);
  }
  free(train), free(lab), free(sum), free(cnt);
  return 0;
}

static int ivf_grow(ivf_impl* impl, int64_t need)
{
  if (need <= impl->cap) return 0;
  int64_t cap = impl->cap ? impl->cap : 64;
  while (cap < need) cap *= 2;
  uint32_t* labels = realloc(impl->labels, (size_t)cap * sizeof(uint32_t));
  if (!labels) return -1;
  impl->labels = labels;
  int64_t* ids = realloc(impl->ids, (size_t)cap * sizeof(int64_t));
  if (!ids) return -1;
  impl->ids = ids;
  if (impl->sq) {
    uint8_t* codes = realloc(impl->codes, (size_t)cap * (size_t)impl->dim);
    if (!codes) return -1;
    impl->codes = codes;
  } else {
    float* vecs = realloc(impl->vecs, (size_t)cap * (size_t)impl->dim * sizeof(float));
    if (!vecs) return -1;
    impl->vecs = vecs;
  }
  impl->cap = cap;
  return 0;
}

int ivf_add(ivf_impl* impl, const dbl_matrix* data, const int64_t* ids)
{
  int64_t dim = impl->dim;
  if (ivf_grow(impl, impl->size + data->n) != 0) return -1;
  float* row = xcalloc((size_t)dim, sizeof(float));
  if (!row) return -1;
  for (int64_t i = 0; i < data->n; i++) {
    dl_load_row(data->base, data->dtype, data->rs, data->cs, i, dim, row);
    uint32_t c = nearest_list(impl, row);
    int64_t at = impl->size + i;
    impl->labels[at] = c;
    impl->ids[at] = ids ? ids[i] : impl->size + i;
    if (impl->sq) {
      const float* ctr = impl->centers + (size_t)c * dim;
      for (int64_t j = 0; j < dim; j++) {
        float val = row[j] - ctr[j], dv = impl->delta[j];
        float code = dv > 0 ? roundf((val - impl->vmin[j]) / dv) : 0.0f;
        impl->codes[at * dim + j] = (uint8_t)fminf(fmaxf(code, 0.0f), 255.0f);
      }
    } else {
      memcpy(impl->vecs + at * dim, row, (size_t)dim * sizeof(float));
    }
  }
  impl->size += data->n;
  if (data->n > 0) impl->has_norms = 1;
  free(row);
  return 0;
}

static void decode_row(const ivf_impl* impl, int64_t at, float* out)
{
  int64_t dim = impl->dim;
  if (!impl->sq) {
    memcpy(out, impl->vecs + at * dim, (size_t)dim * sizeof(float));
    return;
  }
  const float* ctr = impl->centers + (size_t)impl->labels[at] * dim;
  for (int64_t j = 0; j < dim; j++) {
    out[j] = ctr[j] + impl->vmin[j] + (float)impl->codes[at * dim + j] * impl->delta[j];
  }
}

int ivf_search(ivf_impl* impl, const dbl_matrix* queries, uint32_t n_probes, int64_t k,
               const dbl_filter* filter, int64_t filter_bits, int64_t* nb, float* dist)
{
  int64_t dim = impl->dim;
  uint32_t nl = impl->n_lists;
  if (n_probes > nl) n_probes = nl;
  float* q = xcalloc((size_t)dim, sizeof(float));
  float* v = xcalloc((size_t)dim, sizeof(float));
  float* ckey = xcalloc(nl, sizeof(float));
  uint8_t* probe = xcalloc(nl, 1);
  float* bkey = xcalloc((size_t)k, sizeof(float));
  float* bval = xcalloc((size_t)k, sizeof(float));
  int64_t* bid = xcalloc((size_t)k, sizeof(int64_t));
  if (!q || !v || !ckey || !probe || !bkey || !bval || !bid) {
    free(q), free(v), free(ckey), free(probe), free(bkey), free(bval), free(bid);
    return -1;
  }
  int larger = ivf_larger_is_better(impl->metric);
  /* IVF-Flat's fill (below): the first row stored in each list, in the
   * order rows were added. */
  int64_t* first = impl->sq ? NULL : xcalloc(nl ? nl : 1, sizeof(int64_t));
  if (!impl->sq && !first) {
    free(q), free(v), free(ckey), free(probe), free(bkey), free(bval), free(bid);
    return -1;
  }
  if (first) {
    for (uint32_t c = 0; c < nl; c++) first[c] = -1;
    for (int64_t at = impl->size - 1; at >= 0; at--) first[impl->labels[at]] = at;
  }
  for (int64_t qi = 0; qi < queries->n; qi++) {
    dl_load_row(queries->base, queries->dtype, queries->rs, queries->cs, qi, dim, q);
    /* the n_probes nearest lists (ties to the smaller list) */
    memset(probe, 0, nl);
    for (uint32_t c = 0; c < nl; c++) {
      ckey[c] = ivf_key(impl->metric, q, impl->centers + (size_t)c * dim, dim);
    }
    int64_t fill_id = INT64_MAX;
    for (uint32_t p = 0; p < n_probes; p++) {
      int64_t best = -1;
      for (uint32_t c = 0; c < nl; c++) {
        if (!probe[c] && (best < 0 || ckey[c] < ckey[best])) best = c;
      }
      probe[best] = 1;
      if (first && fill_id == INT64_MAX && first[best] >= 0) fill_id = impl->ids[first[best]];
    }
    int64_t found = 0;
    for (int64_t at = 0; at < impl->size; at++) {
      if (!probe[impl->labels[at]]) continue;
      int64_t id = impl->ids[at];
      if (filter && filter->kind == FILTER_BITSET) {
        if (id < 0 || id >= filter_bits) {
          if (id < 0 || id >= (filter_bits + 31) / 32 * 32) {
            dbl_violation("IVF search: id %lld is outside the bitset of %lld rows (the real "
                          "library reads past the bitset)",
                          (long long)id, (long long)filter_bits);
          }
          continue;
        }
        if (!((filter->words[id >> 5] >> (id & 31)) & 1u)) continue;
      }
      decode_row(impl, at, v);
      float val = ivf_distance(impl->metric, q, v, dim);
      float key = larger ? -val : val;
      if (isnan(key)) key = FLT_MAX;
      if (found == k && !(key < bkey[k - 1] || (key == bkey[k - 1] && id < bid[k - 1]))) continue;
      int64_t pos = found < k ? found : k - 1;
      while (pos > 0 && (key < bkey[pos - 1] || (key == bkey[pos - 1] && id < bid[pos - 1]))) {
        bkey[pos] = bkey[pos - 1];
        bval[pos] = bval[pos - 1];
        bid[pos] = bid[pos - 1];
        pos--;
      }
      bkey[pos] = key;
      bval[pos] = val;
      bid[pos] = id;
      if (found < k) found++;
    }
    /* The slots left empty, as cuVS's fused top-k path leaves them
     * (ivf_flat_search.cuh, ivf_sq_search.cuh, then ivf_common.cuh's
     * postprocess_neighbors; measured on an H200 for L2): the distance is
     * the sort's dummy, +Inf (-Inf where larger is better); the id is
     * where the dummy sample index points. IVF-Flat's block sort keeps
     * sample index 0 there, which postprocess_neighbors maps to the first
     * row stored in the first non-empty probed list, filtered out or not;
     * IVF-SQ's scan keeps an index past every probed list, mapped to
     * kOutOfBoundsRecord (INT64_MAX), as with no rows probed at all. */
    for (int64_t j = 0; j < k; j++) {
      int ok = j < found;
      nb[qi * k + j] = ok ? bid[j] : (impl->sq ? INT64_MAX : fill_id);
      dist[qi * k + j] = ok ? bval[j] : (larger ? -INFINITY : INFINITY);
    }
  }
  free(first);
  free(q), free(v), free(ckey), free(probe), free(bkey), free(bval), free(bid);
  return 0;
}

/* ---- serialization ---- */

int ivf_npy_write(FILE* f, const char* descr, uint64_t v, int size)
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

int ivf_npy_read(FILE* f, int size, uint64_t* v)
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

static const char IVF_FILE_MAGIC[8] = {'C', 'V', 'D', 'B', 'L', 'I', 'V', 'F'};

typedef struct {
  char magic[8];
  int32_t sq, metric;
  uint8_t code, bits;
  uint16_t pad0;
  float metric_arg;
  int64_t dim, size;
  uint32_t n_lists;
  int32_t adaptive_centers, cma, has_norms;
} ivf_file_header;

int ivf_write(FILE* f, const ivf_impl* impl)
{
  ivf_file_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, IVF_FILE_MAGIC, 8);
  h.sq = impl->sq;
  h.metric = impl->metric;
  h.code = impl->dtype.code;
  h.bits = impl->dtype.bits;
  h.metric_arg = impl->metric_arg;
  h.dim = impl->dim;
  h.size = impl->size;
  h.n_lists = impl->n_lists;
  h.adaptive_centers = impl->adaptive_centers;
  h.cma = impl->cma;
  h.has_norms = impl->has_norms;
  size_t nc = (size_t)impl->n_lists * (size_t)impl->dim, n = (size_t)impl->size;
  size_t d = (size_t)impl->dim;
  int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(impl->centers, sizeof(float), nc, f) == nc;
  if (ok && impl->sq) {
    ok = fwrite(impl->vmin, sizeof(float), d, f) == d && fwrite(impl->delta, sizeof(float), d, f) == d;
  }
  if (ok && n) {
    ok = fwrite(impl->labels, sizeof(uint32_t), n, f) == n && fwrite(impl->ids, sizeof(int64_t), n, f) == n;
    if (ok && impl->sq) ok = fwrite(impl->codes, 1, n * d, f) == n * d;
    if (ok && !impl->sq) ok = fwrite(impl->vecs, sizeof(float), n * d, f) == n * d;
  }
  return ok;
}

ivf_impl* ivf_read(FILE* f, int sq)
{
  ivf_file_header h;
  /* cuVS's deserializers also refuse a metric outside the enum
   * (is_valid_distance_type); the flags are bools */
  if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, IVF_FILE_MAGIC, 8) != 0 || h.sq != sq ||
      h.dim < 1 || h.size < 0 || h.n_lists < 1 || h.dim > (1 << 20) || h.n_lists > (1u << 20) ||
      !((h.metric >= 0 && h.metric <= 20) || h.metric == 100 || h.metric == 101) ||
      (uint32_t)h.adaptive_centers > 1 || (uint32_t)h.cma > 1 || (uint32_t)h.has_norms > 1 ||
      h.pad0 != 0 ||
      !((h.code == kDLFloat && (h.bits == 32 || h.bits == 16)) ||
        ((h.code == kDLInt || h.code == kDLUInt) && h.bits == 8))) {
    return NULL;
  }
  /* the centers (and the quantiser), then per row a label, an id and the
   * vector (codes) */
  if (!dbl_file_holds(f, (uint64_t)h.n_lists + (sq ? 2 : 0), (uint64_t)h.dim, sizeof(float),
                      (uint64_t)h.size, 1, sizeof(uint32_t) + sizeof(int64_t) + (uint64_t)h.dim * (sq ? 1 : sizeof(float)))) {
    return NULL;
  }
  DLDataType dt = {h.code, h.bits, 1};
  ivf_impl* impl = ivf_new(sq, dt, h.metric, h.metric_arg, h.dim, h.n_lists);
  if (!impl) return NULL;
  impl->adaptive_centers = h.adaptive_centers;
  impl->cma = h.cma;
  impl->has_norms = h.has_norms;
  size_t nc = (size_t)h.n_lists * (size_t)h.dim, n = (size_t)h.size, d = (size_t)h.dim;
  int ok = fread(impl->centers, sizeof(float), nc, f) == nc;
  if (ok && sq) ok = fread(impl->vmin, sizeof(float), d, f) == d && fread(impl->delta, sizeof(float), d, f) == d;
  if (ok && n) {
    ok = ivf_grow(impl, (int64_t)n) == 0;
    ok = ok && fread(impl->labels, sizeof(uint32_t), n, f) == n && fread(impl->ids, sizeof(int64_t), n, f) == n;
    if (ok && sq) ok = fread(impl->codes, 1, n * d, f) == n * d;
    if (ok && !sq) ok = fread(impl->vecs, sizeof(float), n * d, f) == n * d;
    for (size_t i = 0; ok && i < n; i++) ok = impl->labels[i] < h.n_lists;
  }
  /* the double's format ends with the index: bytes after it are refused */
  if (ok && !dbl_at_end(f)) ok = 0;
  if (!ok) {
    ivf_free(impl);
    return NULL;
  }
  impl->size = (int64_t)n;
  return impl;
}

/* ---- views, params ---- */

cuvsError_t ivf_centers_view(ivf_impl* impl, DLManagedTensor* out)
{
  if (!out) {
    dbl_violation("NULL DLManagedTensor* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL DLManagedTensor*");
  }
  DLTensor* t = &out->dl_tensor;
  if ((t->shape && dbl_reg_find(t->shape, NULL) == K_META) ||
      (t->strides && dbl_reg_find(t->strides, NULL) == K_META)) {
    dbl_violation("a view is written over a tensor whose previous library-made shape/strides "
                  "were never released (call its deleter first): they leak");
  }
  pthread_rwlock_rdlock(&impl->lock);
  /* cuVS's to_dlpack overwrites the caller's struct: a view of the index's
   * own centers, whatever data, shape or deleter the caller had put there. */
  t->device.device_type = kDLCUDA;
  t->device.device_id = 0;
  t->dtype = (DLDataType){kDLFloat, 32, 1};
  t->ndim = 2;
  t->data = impl->centers;
  t->byte_offset = 0;
  t->shape = dbl_meta_alloc(2);
  t->shape[0] = impl->n_lists;
  t->shape[1] = impl->dim;
  t->strides = NULL;
  out->deleter = dbl_meta_deleter;
  pthread_rwlock_unlock(&impl->lock);
  return CUVS_SUCCESS;
}

cuvsError_t ivf_check_plain(const void* p, int kind, const char* name)
{
  if (p == NULL) {
    dbl_violation("NULL %s (the real library would crash)", name);
    return RAFT_FAIL("cuvsdouble: NULL %s", name);
  }
  int k = dbl_reg_find(p, NULL);
  if (k >= 0 && k != kind) {
    dbl_violation("another kind of object passed where a %s is expected", name);
    return RAFT_FAIL("cuvsdouble: invalid %s %p", name, p);
  }
  return CUVS_SUCCESS;
}

cuvsError_t ivf_plain_destroy(void* p, int kind, const char* name)
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
