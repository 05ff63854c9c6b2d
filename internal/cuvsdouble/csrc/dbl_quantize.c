/*
 * cuvsdouble quantizers (c/src/preprocessing/quantize/{scalar,binary,pq}.cpp
 * and cpp/src/preprocessing/quantize/detail of cuVS v26.06.00 / v26.08.01;
 * the C API is the same in both), on the CPU:
 *
 * Scalar (int8):
 *   - params default quantile 0.99; train takes float32/16/64 rows in host or
 *     device memory, refuses a quantile outside (0, 1], and sets min/max to the
 *     (0.5 -/+ 0.5 q) quantiles of all the elements of at most
 *     floor(1e6 / dim) rows (cuVS samples those rows at random; the double
 *     takes them evenly spaced), as T;
 *   - transform maps x <= min to -128, x >= max to 127, else
 *     lroundf(scale * x + offset) with scale = 255 / (max - min) (1 when
 *     max <= min) and offset = -128 - min * scale, in double; inverse gives
 *     (q - offset) / scale. The output's memory side must match the input's;
 *     on the host path cuVS checks no shapes (it writes the input's element
 *     count into the output), on the device path the extents must match;
 *   - the quantizer is plain data (min, max): any cuvsScalarQuantizer works.
 * Binary:
 *   - params default threshold MEAN, sampling ratio 0.1; train takes
 *     float32/16/64 rows (host or device) and keeps a threshold vector: none
 *     for ZERO, the column means for MEAN, for SAMPLING_MEDIAN (ratio in
 *     (0, 1]) the median of each column over an odd sample of rows taken
 *     with a prime stride (the host path). On device data cuVS's median path
 *     copies the thresholds from the unsorted sample ((n-1)/2 + i*n-th element
 *     of the row-major samples) instead of the sorted columns: the double does
 *     the same over its strided sample (cuVS samples at random);
 *   - transform sets bit j%8 of byte j/8 when x_j - threshold_j > 0; the output
 *     needs at least ceil(dim/8) columns and as many rows; the host path zeroes
 *     extra columns, the device path leaves them;
 *   - cuvsBinaryQuantizerCreate leaves addr and dtype uninitialized; Train sets
 *     dtype before checking it; TransformWithParams reads addr as a quantizer
 *     of the *dataset's* dtype (a mismatch, or another dimension, is a
 *     violation here, memory misread in cuVS); cuvsBinaryQuantizerTransform
 *     trains a ZERO quantizer for each call;
 *   - Destroy frees the handle only: the trained quantizer leaks, in cuVS and
 *     here (kept in a list of the double's, counted by no counter), as does a
 *     quantizer trained again.
 * Product (PQ):
 *   - params default pq_bits 8, pq_dim 0 (ceil(dim/4)), subspaces, no VQ,
 *     vq_n_centers 0 (sqrt(rows) rounded up to 8), 25 iterations, balanced
 *     k-means, 256 training points per PQ code and 1024 per VQ cluster;
 *   - build: float32 only (host or device), pq_bits in [4, 16], VQ centers by
 *     k-means on at most max_train_points_per_vq_cluster * vq_n_centers rows
 *     (their mean for one center), then the PQ codebook(s) by k-means on at
 *     most max_train_points_per_pq_code * 2^pq_bits rows (at least 2^pq_bits):
 *     with subspaces dim must be a multiple of pq_dim, the training rows are
 *     the first rows (the VQ residuals of a subsample with VQ), the codebook is
 *     [pq_dim * 2^bits, pq_len]; without, one [2^bits, pq_len] codebook over
 *     every sub-vector. The k-means is the double's (Lloyd's, dbl_ivf_pq.c),
 *     not cuVS's balanced one, on evenly spaced subsamples;
 *   - transform: codes in device memory (uint8, rows x ceil(pq_dim*bits/8)),
 *     each code the nearest center of its sub-vector's residual; VQ labels are
 *     computed only into a labels vector given (else every row uses VQ center
 *     0, as cuVS does); codes are bit-packed, LSB first, the pad bits of the
 *     last byte kept;
 *   - VQ labels come from predict_vq (cpp/src/neighbors/detail/vpq_dataset.cuh):
 *     cuVS's balanced k-means predict with L2Expanded, i.e.
 *     minClusterAndDistanceCompute, which on SM 9.x below 4096 rows (of a
 *     batch of up to 65536) and 4096 centers takes the unfused TF32 GEMM
 *     path (see dbl_kmeans_api.c): a label may be a center nearest only
 *     within TF32 rounding (seen on an H200: 1.73454 against 1.73373). The
 *     double imitates that device;
 *   - inverse transform: codes and output in device memory, output float32;
 *     without labels every row adds VQ center 0;
 *   - getters refuse a NULL quantizer and a dtype other than float32; the
 *     codebook getters hand out views (to_dlpack: shape from the library, a
 *     deleter freeing only that);
 *   - Create leaves addr/dtype uninitialized, Destroy leaks the trained
 *     quantizer (as the binary one).
 */
#include "dbl.h"

#include <float.h>
#include <math.h>

#define QZ_GARBAGE 0xBEBEBEBEBEBEBEBEULL
#define BQ_MAGIC 0x5a54425142444c42ULL
#define PQQ_MAGIC 0x5a54515051444c42ULL

/* ---- the trained quantizers cuVS leaks: a list of the double's own ---- */

typedef struct qz_node {
  struct qz_node* next;
  void* p;
} qz_node;

static pthread_mutex_t qz_mu = PTHREAD_MUTEX_INITIALIZER;
static qz_node* qz_live;

static void qz_keep(void* p)
{
  qz_node* n = malloc(sizeof *n);
  if (!n) return;
  pthread_mutex_lock(&qz_mu);
  n->p = p, n->next = qz_live, qz_live = n;
  pthread_mutex_unlock(&qz_mu);
}

static int qz_known(const void* p)
{
  int ok = 0;
  pthread_mutex_lock(&qz_mu);
  for (qz_node* n = qz_live; n && !ok; n = n->next) ok = n->p == p;
  pthread_mutex_unlock(&qz_mu);
  return ok;
}

/* ---- elements ---- */

static double qz_get(const void* base, DLDataType dt, int64_t i)
{
  if (dt.bits == 16) return dl_half_to_float(((const uint16_t*)base)[i]);
  if (dt.bits == 64) return ((const double*)base)[i];
  return ((const float*)base)[i];
}

static void qz_put(void* base, DLDataType dt, int64_t i, double v)
{
  if (dt.bits == 16) {
    ((uint16_t*)base)[i] = dl_float_to_half((float)v);
  } else if (dt.bits == 64) {
    ((double*)base)[i] = v;
  } else {
    ((float*)base)[i] = (float)v;
  }
}

/* The value as T holds it (rounded to half or float). */
static double qz_as(DLDataType dt, double v)
{
  if (dt.bits == 16) return dl_half_to_float(dl_float_to_half((float)v));
  if (dt.bits == 32) return (float)v;
  return v;
}

static int qz_float_dtype(DLDataType dt)
{
  return dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) ||
         dl_is_dtype(dt, kDLFloat, 64);
}

static int cmp_double(const void* a, const void* b)
{
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The matrix view of a dataset, host or device path as cuVS picks it. */
static cuvsError_t qz_matrix(DLManagedTensor* mt, const char* what, int* on_device)
{
  TRY(dl_check_ptr(mt, what));
  const DLTensor* t = &mt->dl_tensor;
  int dev = dl_dev_compat(t);
  if (!dev && !dl_host_compat(t)) return RAFT_FAIL("dataset must be accessible on host or device memory");
  TRY(dl_view(mt, LAYOUT_ROW, t->dtype.code, t->dtype.bits, dev ? WANT_DEVICE : WANT_HOST, 2));
  TRY(dl_strict(t, what));
  if (on_device) *on_device = dev;
  return CUVS_SUCCESS;
}

static cuvsError_t qz_null(const void* p, const char* what)
{
  if (!p) {
    dbl_violation("NULL %s (the real library would crash)", what);
    return RAFT_FAIL("cuvsdouble: NULL %s", what);
  }
  return CUVS_SUCCESS;
}

static cuvsError_t qz_plain_destroy(void* p, int kind, const char* name)
{
  if (p == NULL) return dbl_ok();
  if (dbl_reg_remove(p, kind, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed %s %p", name, p);
    return RAFT_FAIL("cuvsdouble: invalid %s %p", name, p);
  }
  free(p);
  return dbl_ok();
}

/* ======================= scalar ======================= */

DBL_API cuvsError_t cuvsScalarQuantizerParamsCreate(cuvsScalarQuantizerParams_t* params)
{
  DBL_ENTER(cuvsScalarQuantizerParamsCreate);
  TRY(qz_null(params, "out-parameter"));
  struct cuvsScalarQuantizerParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->quantile = 0.99f;
  dbl_reg_add(p, K_SCALAR_QUANTIZER_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsScalarQuantizerParamsDestroy(cuvsScalarQuantizerParams_t params)
{
  DBL_ENTER(cuvsScalarQuantizerParamsDestroy);
  return qz_plain_destroy(params, K_SCALAR_QUANTIZER_PARAMS, "cuvsScalarQuantizerParams");
}

DBL_API cuvsError_t cuvsScalarQuantizerCreate(cuvsScalarQuantizer_t* quantizer)
{
  DBL_ENTER(cuvsScalarQuantizerCreate);
  TRY(qz_null(quantizer, "out-parameter"));
  cuvsScalarQuantizer* q = calloc(1, sizeof *q);
  if (!q) return dbl_plain_fail("std::bad_alloc");
  dbl_reg_add(q, K_SCALAR_QUANTIZER, sizeof *q);
  *quantizer = q;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsScalarQuantizerDestroy(cuvsScalarQuantizer_t quantizer)
{
  DBL_ENTER(cuvsScalarQuantizerDestroy);
  return qz_plain_destroy(quantizer, K_SCALAR_QUANTIZER, "cuvsScalarQuantizer");
}

static cuvsError_t sq_train(cuvsScalarQuantizerParams_t params, DLManagedTensor* dataset,
                            cuvsScalarQuantizer_t q)
{
  TRY(qz_null(params, "cuvsScalarQuantizerParams_t"));
  TRY(qz_null(q, "cuvsScalarQuantizer_t"));
  TRY(dl_check_ptr(dataset, "dataset"));
  DLDataType dt = dataset->dl_tensor.dtype;
  if (!qz_float_dtype(dt)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", dt.code, dt.bits);
  }
  TRY(qz_matrix(dataset, "dataset", NULL));
  float quantile = params->quantile;
  EXPECTS(quantile > 0.0 && quantile <= 1.0,
          "quantile for scalar quantization needs to be within (0, 1] but is %f", quantile);
  const DLTensor* t = &dataset->dl_tensor;
  int64_t n = t->shape[0], dim = t->shape[1];
  if (n < 1 || dim < 1) {
    dbl_violation("scalar quantizer trained on an empty dataset (%lld x %lld): cuVS reads past "
                  "the sorted sample",
                  (long long)n, (long long)dim);
    return RAFT_FAIL("cuvsdouble: empty dataset");
  }
  int64_t ns = 1000000 / dim;
  if (ns > n) ns = n;
  if (ns < 1) ns = 1;
  size_t size = (size_t)ns * (size_t)dim;
  double* v = malloc(size * sizeof(double));
  if (!v) return dbl_plain_fail("std::bad_alloc");
  for (int64_t s = 0; s < ns; s++) {
    int64_t r = ns == n ? s : (int64_t)((double)s * (double)n / (double)ns);
    for (int64_t j = 0; j < dim; j++) v[s * dim + j] = qz_get(t->data, dt, r * dim + j);
  }
  qsort(v, size, sizeof(double), cmp_double);
  double half_pos = (0.5 + 0.5 * (double)quantile) * (double)size;
  int pos_max = (int)ceil(half_pos) - 1;
  int pos_min = (int)size - pos_max - 1;
  q->min_ = v[pos_min];
  q->max_ = v[pos_max];
  free(v);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsScalarQuantizerTrain(cuvsResources_t res, cuvsScalarQuantizerParams_t params,
                                             DLManagedTensor* dataset, cuvsScalarQuantizer_t quantizer)
{
  DBL_ENTER(cuvsScalarQuantizerTrain);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = sq_train(params, dataset, quantizer);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

typedef struct {
  double min, max, scale, offset;
} sq_op;

static sq_op sq_make(DLDataType dt, const cuvsScalarQuantizer* q)
{
  sq_op o;
  o.min = qz_as(dt, q->min_), o.max = qz_as(dt, q->max_);
  o.scale = o.max > o.min ? (127.0 - -128.0) / (o.max - o.min) : 1.0;
  o.offset = -128.0 - o.min * o.scale;
  return o;
}

/* The output's checks: same memory side as the input, dtype, rank; the
 * device path's map wants equal extents, the host path checks none. */
static cuvsError_t sq_out(DLManagedTensor* in, DLManagedTensor* out, int dev, int code, int bits)
{
  TRY(dl_check_ptr(out, "out"));
  TRY(dl_view(out, LAYOUT_ROW, code, bits, dev ? WANT_DEVICE : WANT_HOST, 2));
  TRY(dl_strict(&out->dl_tensor, "out"));
  const DLTensor *a = &in->dl_tensor, *b = &out->dl_tensor;
  if (a->shape[0] != b->shape[0] || a->shape[1] != b->shape[1]) {
    if (dev) {
      return RAFT_FAIL("ERROR: out and in extents must match ([%lld, %lld] and [%lld, %lld])",
                       (long long)b->shape[0], (long long)b->shape[1], (long long)a->shape[0],
                       (long long)a->shape[1]);
    }
    if (dl_numel(b) < dl_numel(a)) {
      dbl_violation("scalar quantizer: host output of %lld elements for %lld inputs (cuVS writes "
                    "past its end)",
                    (long long)dl_numel(b), (long long)dl_numel(a));
      return RAFT_FAIL("cuvsdouble: output too small");
    }
  }
  return CUVS_SUCCESS;
}

static cuvsError_t sq_transform(cuvsScalarQuantizer_t q, DLManagedTensor* dataset, DLManagedTensor* out,
                                dbl_res* r)
{
  TRY(dl_check_ptr(dataset, "dataset"));
  DLDataType dt = dataset->dl_tensor.dtype;
  if (!qz_float_dtype(dt)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", dt.code, dt.bits);
  }
  TRY(qz_null(q, "cuvsScalarQuantizer_t"));
  int dev;
  TRY(qz_matrix(dataset, "dataset", &dev));
  TRY(sq_out(dataset, out, dev, kDLInt, 8));
  sq_op o = sq_make(dt, q);
  const DLTensor* t = &dataset->dl_tensor;
  int8_t* y = out->dl_tensor.data;
  int64_t n = dl_numel(t);
  for (int64_t i = 0; i < n; i++) {
    double x = qz_get(t->data, dt, i);
    if (!(o.min < x)) {
      y[i] = -128;
    } else if (!(x < o.max)) {
      y[i] = 127;
    } else {
      y[i] = (int8_t)lroundf((float)(o.scale * x + o.offset));
    }
  }
  if (dev) dbl_async_outputs(r, out, NULL);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsScalarQuantizerTransform(cuvsResources_t res, cuvsScalarQuantizer_t quantizer,
                                                 DLManagedTensor* dataset, DLManagedTensor* out)
{
  DBL_ENTER(cuvsScalarQuantizerTransform);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = sq_transform(quantizer, dataset, out, r);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static cuvsError_t sq_inverse(cuvsScalarQuantizer_t q, DLManagedTensor* codes, DLManagedTensor* out,
                              dbl_res* r)
{
  TRY(dl_check_ptr(out, "out"));
  DLDataType dt = out->dl_tensor.dtype;
  if (!qz_float_dtype(dt)) {
    return RAFT_FAIL("Unsupported output dataset DLtensor dtype: %d and bits: %d", dt.code, dt.bits);
  }
  TRY(qz_null(q, "cuvsScalarQuantizer_t"));
  TRY(dl_check_ptr(codes, "dataset"));
  const DLTensor* t = &codes->dl_tensor;
  int dev = dl_dev_compat(t);
  if (!dev && !dl_host_compat(t)) return RAFT_FAIL("dataset must be accessible on host or device memory");
  TRY(dl_view(codes, LAYOUT_ROW, kDLInt, 8, dev ? WANT_DEVICE : WANT_HOST, 2));
  TRY(dl_strict(t, "dataset"));
  TRY(sq_out(codes, out, dev, kDLFloat, dt.bits));
  sq_op o = sq_make(dt, q);
  const int8_t* c = t->data;
  int64_t n = dl_numel(t);
  for (int64_t i = 0; i < n; i++) qz_put(out->dl_tensor.data, dt, i, ((double)c[i] - o.offset) / o.scale);
  if (dev) dbl_async_outputs(r, out, NULL);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsScalarQuantizerInverseTransform(cuvsResources_t res,
                                                        cuvsScalarQuantizer_t quantizer,
                                                        DLManagedTensor* dataset, DLManagedTensor* out)
{
  DBL_ENTER(cuvsScalarQuantizerInverseTransform);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = sq_inverse(quantizer, dataset, out, r);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ======================= binary ======================= */

typedef struct {
  uint64_t magic;
  DLDataType dtype; /* T */
  int64_t dim;      /* the threshold's length (0 for ZERO) */
  double* threshold;
} bq_impl;

DBL_API cuvsError_t cuvsBinaryQuantizerParamsCreate(cuvsBinaryQuantizerParams_t* params)
{
  DBL_ENTER(cuvsBinaryQuantizerParamsCreate);
  TRY(qz_null(params, "out-parameter"));
  struct cuvsBinaryQuantizerParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->threshold = MEAN;
  p->sampling_ratio = 0.1f;
  dbl_reg_add(p, K_BINARY_QUANTIZER_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsBinaryQuantizerParamsDestroy(cuvsBinaryQuantizerParams_t params)
{
  DBL_ENTER(cuvsBinaryQuantizerParamsDestroy);
  return qz_plain_destroy(params, K_BINARY_QUANTIZER_PARAMS, "cuvsBinaryQuantizerParams");
}

DBL_API cuvsError_t cuvsBinaryQuantizerCreate(cuvsBinaryQuantizer_t* quantizer)
{
  DBL_ENTER(cuvsBinaryQuantizerCreate);
  TRY(qz_null(quantizer, "out-parameter"));
  cuvsBinaryQuantizer* q = malloc(sizeof *q);
  if (!q) return dbl_plain_fail("std::bad_alloc");
  memset(q, 0xBE, sizeof *q); /* `new cuvsBinaryQuantizer`: uninitialized */
  dbl_reg_add(q, K_BINARY_QUANTIZER, sizeof *q);
  *quantizer = q;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsBinaryQuantizerDestroy(cuvsBinaryQuantizer_t quantizer)
{
  DBL_ENTER(cuvsBinaryQuantizerDestroy);
  /* `delete quantizer`: the trained quantizer at addr leaks, as in cuVS */
  return qz_plain_destroy(quantizer, K_BINARY_QUANTIZER, "cuvsBinaryQuantizer");
}

static uint64_t bq_stride(int64_t n)
{
  static const uint64_t primes[] = {611323u, 611333u, 611389u, 611393u};
  int i = 0;
  while (i < 3 && (uint64_t)n % primes[i] == 0) i++;
  return primes[i];
}

static cuvsError_t bq_train(cuvsBinaryQuantizerParams_t params, DLManagedTensor* dataset,
                            cuvsBinaryQuantizer_t q)
{
  TRY(qz_null(q, "cuvsBinaryQuantizer_t"));
  TRY(dl_check_ptr(dataset, "dataset"));
  DLDataType dt = dataset->dl_tensor.dtype;
  q->dtype = dt; /* before the check, as cuVS */
  if (!qz_float_dtype(dt)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", dt.code, dt.bits);
  }
  TRY(qz_null(params, "cuvsBinaryQuantizerParams_t"));
  int th = params->threshold;
  if (th != ZERO && th != MEAN && th != SAMPLING_MEDIAN) return RAFT_FAIL("Unsupported threshold");
  int dev;
  TRY(qz_matrix(dataset, "dataset", &dev));
  const DLTensor* t = &dataset->dl_tensor;
  int64_t n = t->shape[0], dim = t->shape[1];
  bq_impl* impl = calloc(1, sizeof *impl);
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  impl->magic = BQ_MAGIC;
  impl->dtype = dt;
  if (th != ZERO) {
    impl->dim = dim;
    impl->threshold = calloc((size_t)(dim ? dim : 1), sizeof(double));
    if (!impl->threshold) {
      free(impl);
      return dbl_plain_fail("std::bad_alloc");
    }
  }
  if (th == MEAN) {
    for (int64_t j = 0; j < dim; j++) {
      double s = 0;
      float sf = 0;
      for (int64_t i = 0; i < n; i++) {
        double x = qz_get(t->data, dt, i * dim + j);
        if (dt.bits == 64) {
          s += x;
        } else {
          sf += (float)x; /* float accumulation (f16's host path and device kernel, f32) */
        }
      }
      double m = dt.bits == 64 ? s / (double)n : (double)(sf / (float)n);
      impl->threshold[j] = qz_as(dt, m);
    }
  } else if (th == SAMPLING_MEDIAN) {
    float ratio = params->sampling_ratio;
    if (!(ratio > 0 && ratio <= 1)) {
      free(impl->threshold), free(impl);
      return RAFT_FAIL("The sampling ratio must be within the range (0, 1].");
    }
    size_t half = ((size_t)((double)n * (double)ratio) + 1) / 2;
    size_t ns = (half * 2 > 2 ? half * 2 : 2) - 1;
    uint64_t stride = bq_stride(n);
    double* s = malloc(ns * (size_t)(dim ? dim : 1) * sizeof(double)); /* row-major ns x dim */
    double* col = malloc(ns * sizeof(double));
    if (!s || !col) {
      free(s), free(col), free(impl->threshold), free(impl);
      return dbl_plain_fail("std::bad_alloc");
    }
    for (size_t o = 0; o < ns; o++) {
      int64_t in = n > 0 ? (int64_t)(((uint64_t)o * stride) % (uint64_t)n) : 0;
      for (int64_t j = 0; j < dim; j++) s[o * dim + j] = n > 0 ? qz_get(t->data, dt, in * dim + j) : 0;
    }
    for (int64_t j = 0; j < dim; j++) {
      if (dev) {
        /* cuVS's device path: copy_matrix from the unsorted samples */
        impl->threshold[j] = s[(ns - 1) / 2 + (size_t)j * ns];
      } else {
        for (size_t o = 0; o < ns; o++) col[o] = s[o * dim + j];
        qsort(col, ns, sizeof(double), cmp_double);
        impl->threshold[j] = qz_as(dt, col[(ns - 1) / 2]);
      }
    }
    free(s), free(col);
  }
  q->addr = (uintptr_t)impl;
  qz_keep(impl);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsBinaryQuantizerTrain(cuvsResources_t res, cuvsBinaryQuantizerParams_t params,
                                             DLManagedTensor* dataset, cuvsBinaryQuantizer_t quantizer)
{
  DBL_ENTER(cuvsBinaryQuantizerTrain);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = bq_train(params, dataset, quantizer);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static cuvsError_t bq_transform(cuvsBinaryQuantizer_t q, DLManagedTensor* dataset, DLManagedTensor* out,
                                dbl_res* r)
{
  TRY(dl_check_ptr(dataset, "dataset"));
  DLDataType dt = dataset->dl_tensor.dtype;
  if (!qz_float_dtype(dt)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", dt.code, dt.bits);
  }
  TRY(qz_null(q, "cuvsBinaryQuantizer_t"));
  bq_impl* impl = (bq_impl*)q->addr;
  if (!qz_known(impl)) {
    dbl_violation("cuvsBinaryQuantizer %p was never trained: cuVS reads its uninitialized addr",
                  (void*)q);
    return RAFT_FAIL("cuvsdouble: untrained binary quantizer");
  }
  int dev;
  TRY(qz_matrix(dataset, "dataset", &dev));
  const DLTensor* t = &dataset->dl_tensor;
  int64_t n = t->shape[0], dim = t->shape[1];
  if (impl->dtype.bits != dt.bits) {
    dbl_violation("binary quantizer trained on %d-bit floats used on %d-bit floats: cuVS reads it "
                  "as the dataset's type",
                  impl->dtype.bits, dt.bits);
    return RAFT_FAIL("cuvsdouble: binary quantizer of another dtype");
  }
  if (impl->threshold && impl->dim < dim) {
    dbl_violation("binary quantizer of %lld thresholds used on %lld columns: cuVS reads past them",
                  (long long)impl->dim, (long long)dim);
    return RAFT_FAIL("cuvsdouble: binary quantizer of another dimension");
  }
  TRY(dl_check_ptr(out, "out"));
  TRY(dl_view(out, LAYOUT_ROW, kDLUInt, 8, dev ? WANT_DEVICE : WANT_HOST, 2));
  TRY(dl_strict(&out->dl_tensor, "out"));
  int64_t out_rows = out->dl_tensor.shape[0], out_dim = out->dl_tensor.shape[1];
  int64_t min_dim = (dim + 7) / 8;
  EXPECTS(out_dim >= min_dim,
          "The quantized dataset dimension must be larger or equal to %u but is %u passed",
          (unsigned)min_dim, (unsigned)out_dim);
  EXPECTS(out_rows >= n,
          "The quantized dataset size must be larger or equal to the input dataset size (%lu) but "
          "is %lu passed",
          (unsigned long)n, (unsigned long)out_rows);
  uint8_t* y = out->dl_tensor.data;
  for (int64_t i = 0; i < n; i++) {
    for (int64_t oj = 0; oj < out_dim; oj++) {
      if (oj >= min_dim) {
        if (!dev) y[i * out_dim + oj] = 0;
        continue;
      }
      uint8_t pack = 0;
      for (int b = 0; b < 8; b++) {
        int64_t j = oj * 8 + b;
        if (j >= dim) break;
        double x = qz_get(t->data, dt, i * dim + j);
        if (impl->threshold) x = qz_as(dt, x - impl->threshold[j]);
        if (x > 0) pack |= (uint8_t)(1u << b);
      }
      y[i * out_dim + oj] = pack;
    }
  }
  if (dev) dbl_async_outputs(r, out, NULL);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsBinaryQuantizerTransformWithParams(cuvsResources_t res,
                                                           cuvsBinaryQuantizer_t quantizer,
                                                           DLManagedTensor* dataset, DLManagedTensor* out)
{
  DBL_ENTER(cuvsBinaryQuantizerTransformWithParams);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = bq_transform(quantizer, dataset, out, r);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsBinaryQuantizerTransform(cuvsResources_t res, DLManagedTensor* dataset,
                                                 DLManagedTensor* out)
{
  DBL_ENTER(cuvsBinaryQuantizerTransform);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  /* cuVS: params (ZERO), a quantizer, Train (its status ignored), Transform,
   * Destroy: the trained quantizer leaks */
  struct cuvsBinaryQuantizerParams p = {.threshold = ZERO, .sampling_ratio = 0.1f};
  cuvsBinaryQuantizer q;
  memset(&q, 0xBE, sizeof q);
  (void)bq_train(&p, dataset, &q);
  dbl_set_error(NULL);
  cuvsError_t st = bq_transform(&q, dataset, out, r);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* ======================= product ======================= */

DBL_HIDDEN int pq_kmeans(const float* pts, int64_t n, uint32_t w, uint32_t k, uint32_t iters, int ip,
                         float* centers);

typedef struct {
  uint64_t magic;
  struct cuvsProductQuantizerParams p; /* filled: pq_dim, vq_n_centers resolved */
  uint32_t dim, pq_len, book_rows;
  float* vq;   /* [vq_rows, dim] */
  uint32_t vq_rows;
  float* book; /* [book_rows, pq_len] */
} pqq_impl;

DBL_API cuvsError_t cuvsProductQuantizerParamsCreate(cuvsProductQuantizerParams_t* params)
{
  DBL_ENTER(cuvsProductQuantizerParamsCreate);
  TRY(qz_null(params, "out-parameter"));
  struct cuvsProductQuantizerParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  *p = (struct cuvsProductQuantizerParams){.pq_bits = 8,
                                           .pq_dim = 0,
                                           .use_subspaces = true,
                                           .use_vq = false,
                                           .vq_n_centers = 0,
                                           .kmeans_n_iters = 25,
                                           .pq_kmeans_type = CUVS_KMEANS_TYPE_KMEANS_BALANCED,
                                           .max_train_points_per_pq_code = 256,
                                           .max_train_points_per_vq_cluster = 1024};
  dbl_reg_add(p, K_PQ_QUANTIZER_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsProductQuantizerParamsDestroy(cuvsProductQuantizerParams_t params)
{
  DBL_ENTER(cuvsProductQuantizerParamsDestroy);
  return qz_plain_destroy(params, K_PQ_QUANTIZER_PARAMS, "cuvsProductQuantizerParams");
}

DBL_API cuvsError_t cuvsProductQuantizerCreate(cuvsProductQuantizer_t* quantizer)
{
  DBL_ENTER(cuvsProductQuantizerCreate);
  TRY(qz_null(quantizer, "out-parameter"));
  cuvsProductQuantizer* q = malloc(sizeof *q);
  if (!q) return dbl_plain_fail("std::bad_alloc");
  memset(q, 0xBE, sizeof *q); /* `new cuvsProductQuantizer`: uninitialized */
  dbl_reg_add(q, K_PQ_QUANTIZER, sizeof *q);
  *quantizer = q;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsProductQuantizerDestroy(cuvsProductQuantizer_t quantizer)
{
  DBL_ENTER(cuvsProductQuantizerDestroy);
  return qz_plain_destroy(quantizer, K_PQ_QUANTIZER, "cuvsProductQuantizer");
}

static float l2(const float* a, const float* b, uint32_t n)
{
  float s = 0;
  for (uint32_t j = 0; j < n; j++) {
    float d = a[j] - b[j];
    s += d * d;
  }
  return s;
}

static uint32_t nearest(const float* x, const float* centers, uint32_t k, uint32_t w)
{
  uint32_t best = 0;
  float bd = INFINITY;
  for (uint32_t c = 0; c < k; c++) {
    float d = l2(x, centers + (size_t)c * w, w);
    if (d < bd) bd = d, best = c;
  }
  return best;
}

/* nearest by the unfused TF32 path's distances (the first minimum) */
static uint32_t nearest_tf32(const float* x, const float* centers, uint32_t k, uint32_t w)
{
  uint32_t best = 0;
  float bd = INFINITY;
  for (uint32_t c = 0; c < k; c++) {
    float d = dbl_tf32_l2(x, centers + (size_t)c * w, w);
    if (d < bd) bd = d, best = c;
  }
  return best;
}

/* n_take rows of src (n x dim) evenly spaced (all when n_take >= n). */
static float* subsample(const float* src, int64_t n, uint32_t dim, int64_t n_take)
{
  float* out = malloc((size_t)(n_take ? n_take : 1) * dim * sizeof(float));
  if (!out) return NULL;
  for (int64_t s = 0; s < n_take; s++) {
    int64_t r = n_take >= n ? s : (int64_t)((double)s * (double)n / (double)n_take);
    memcpy(out + (size_t)s * dim, src + (size_t)r * dim, dim * sizeof(float));
  }
  return out;
}

static void pqq_free(pqq_impl* impl)
{
  if (!impl) return;
  free(impl->vq), free(impl->book), free(impl);
}

static cuvsError_t pqq_build(cuvsProductQuantizerParams_t params, DLManagedTensor* dataset,
                             cuvsProductQuantizer_t q)
{
  TRY(qz_null(q, "cuvsProductQuantizer_t"));
  TRY(dl_check_ptr(dataset, "dataset"));
  DLDataType dt = dataset->dl_tensor.dtype;
  q->dtype = dt;
  if (!dl_is_dtype(dt, kDLFloat, 32)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", dt.code, dt.bits);
  }
  TRY(qz_null(params, "cuvsProductQuantizerParams_t"));
  TRY(qz_matrix(dataset, "dataset", NULL));
  const DLTensor* t = &dataset->dl_tensor;
  int64_t n = t->shape[0];
  uint32_t dim = (uint32_t)t->shape[1];
  const float* x = t->data;
  struct cuvsProductQuantizerParams p = *params;
  EXPECTS(p.pq_bits >= 4 && p.pq_bits <= 16, "PQ bits must be within [4, 16], got %u", p.pq_bits);
  if (p.pq_dim == 0) p.pq_dim = (dim + 3) / 4;
  if (p.vq_n_centers == 0) p.vq_n_centers = ((uint32_t)sqrt((double)n) + 7) / 8 * 8;
  if (n < 1 || dim < 1 || p.pq_dim > dim) {
    dbl_violation("product quantizer on a %lld x %u dataset with pq_dim %u: cuVS's kernels divide "
                  "by zero or read past the rows",
                  (long long)n, dim, p.pq_dim);
    return RAFT_FAIL("cuvsdouble: empty dataset or pq_dim > dim");
  }
  uint32_t book = 1u << p.pq_bits;
  pqq_impl* impl = calloc(1, sizeof *impl);
  if (!impl) return dbl_plain_fail("std::bad_alloc");
  impl->magic = PQQ_MAGIC;
  impl->dim = dim;
  uint32_t iters = p.kmeans_n_iters ? p.kmeans_n_iters : 1;
  cuvsError_t st = CUVS_SUCCESS;
  float* train = NULL;
  if (p.use_vq) {
    int64_t nt = (int64_t)p.max_train_points_per_vq_cluster * p.vq_n_centers;
    if (nt > n) nt = n;
    if (nt < (int64_t)p.vq_n_centers) {
      /* guessed: cuVS's balanced k-means needs a row per cluster */
      st = RAFT_FAIL("The number of training samples (%lld) must be at least the number of VQ "
                     "centers (%u)",
                     (long long)nt, p.vq_n_centers);
      goto fail;
    }
    float* vt = subsample(x, n, dim, nt);
    impl->vq = malloc((size_t)p.vq_n_centers * dim * sizeof(float));
    if (!vt || !impl->vq) {
      free(vt);
      st = dbl_plain_fail("std::bad_alloc");
      goto fail;
    }
    if (p.vq_n_centers == 1) {
      for (uint32_t j = 0; j < dim; j++) {
        double s = 0;
        for (int64_t i = 0; i < nt; i++) s += vt[(size_t)i * dim + j];
        impl->vq[j] = (float)(s / (double)nt);
      }
    } else if (pq_kmeans(vt, nt, dim, p.vq_n_centers, iters, 0, impl->vq) != 0) {
      free(vt);
      st = dbl_plain_fail("std::bad_alloc");
      goto fail;
    }
    free(vt);
    impl->vq_rows = p.vq_n_centers;
  }
  int64_t nt = (int64_t)p.max_train_points_per_pq_code * book;
  if (nt > n) nt = n;
  if (p.use_subspaces) {
    if (dim % p.pq_dim != 0) {
      st = RAFT_FAIL("Dimension must be divisible by pq_dim");
      goto fail;
    }
    impl->pq_len = dim / p.pq_dim;
    if (nt < (int64_t)book) {
      st = RAFT_FAIL("The number of training samples must be equal to or greater than the number "
                     "of PQ centers");
      goto fail;
    }
    /* the first rows, or the VQ residuals of a subsample */
    train = impl->vq ? subsample(x, n, dim, nt) : subsample(x, nt, dim, nt);
  } else {
    impl->pq_len = (dim + p.pq_dim - 1) / p.pq_dim;
    if (nt < (int64_t)book) {
      st = RAFT_FAIL("The number of training samples must be greater than or equal to the number "
                     "of PQ centers");
      goto fail;
    }
    if (dim % p.pq_dim != 0) {
      dbl_violation("product quantizer without subspaces: dim %u is not a multiple of pq_dim %u, "
                    "cuVS reads its training set past its end",
                    dim, p.pq_dim);
      st = RAFT_FAIL("cuvsdouble: dim not a multiple of pq_dim");
      goto fail;
    }
    train = subsample(x, n, dim, nt);
  }
  if (!train) {
    st = dbl_plain_fail("std::bad_alloc");
    goto fail;
  }
  if (impl->vq) {
    for (int64_t i = 0; i < nt; i++) {
      float* row = train + (size_t)i * dim;
      /* predict_vq, as in transform */
      uint32_t l = dbl_unfused_tf32(nt, impl->vq_rows) ? nearest_tf32(row, impl->vq, impl->vq_rows, dim)
                                                       : nearest(row, impl->vq, impl->vq_rows, dim);
      for (uint32_t j = 0; j < dim; j++) row[j] -= impl->vq[(size_t)l * dim + j];
    }
  }
  uint32_t pl = impl->pq_len;
  impl->book_rows = p.use_subspaces ? p.pq_dim * book : book;
  impl->book = calloc((size_t)impl->book_rows * pl, sizeof(float));
  if (!impl->book) {
    st = dbl_plain_fail("std::bad_alloc");
    goto fail;
  }
  if (p.use_subspaces) {
    float* sub = malloc((size_t)nt * pl * sizeof(float));
    if (!sub) {
      st = dbl_plain_fail("std::bad_alloc");
      goto fail;
    }
    for (uint32_t m = 0; m < p.pq_dim; m++) {
      for (int64_t i = 0; i < nt; i++) memcpy(sub + (size_t)i * pl, train + (size_t)i * dim + (size_t)m * pl, pl * sizeof(float));
      if (pq_kmeans(sub, nt, pl, book, iters, 0, impl->book + (size_t)m * book * pl) != 0) {
        free(sub);
        st = dbl_plain_fail("std::bad_alloc");
        goto fail;
      }
    }
    free(sub);
  } else if (pq_kmeans(train, nt * p.pq_dim, pl, book, iters, 0, impl->book) != 0) {
    st = dbl_plain_fail("std::bad_alloc");
    goto fail;
  }
  free(train);
  impl->p = p;
  q->addr = (uintptr_t)impl;
  qz_keep(impl);
  return CUVS_SUCCESS;
fail:
  free(train);
  pqq_free(impl);
  return st;
}

DBL_API cuvsError_t cuvsProductQuantizerBuild(cuvsResources_t res, cuvsProductQuantizerParams_t params,
                                              DLManagedTensor* dataset, cuvsProductQuantizer_t quantizer)
{
  DBL_ENTER(cuvsProductQuantizerBuild);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pqq_build(params, dataset, quantizer);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* The trained quantizer of a handle: NULL handle and non-float32 dtypes are
 * cuVS's errors; an addr that is no trained quantizer is a violation. */
static cuvsError_t pqq_of(cuvsProductQuantizer_t q, pqq_impl** out)
{
  if (q == NULL) return RAFT_FAIL("quantizer is not initialized");
  if (!dl_is_dtype(q->dtype, kDLFloat, 32)) {
    return RAFT_FAIL("Unsupported quantizer dtype: %d and bits: %d", q->dtype.code, q->dtype.bits);
  }
  pqq_impl* impl = (pqq_impl*)q->addr;
  if (!qz_known(impl)) {
    dbl_violation("cuvsProductQuantizer %p holds no built quantizer: cuVS dereferences its "
                  "uninitialized addr",
                  (void*)q);
    return RAFT_FAIL("cuvsdouble: product quantizer not built");
  }
  *out = impl;
  return CUVS_SUCCESS;
}

static uint32_t pqq_code_cols(const pqq_impl* impl)
{
  return (impl->p.pq_dim * impl->p.pq_bits + 7) / 8;
}

static void put_code(uint8_t* row, uint32_t j, uint32_t bits, uint32_t code)
{
  uint32_t bit = j * bits, off = bit % 8;
  uint8_t* ptr = row + bit / 8;
  uint32_t mask = (1u << bits) - 1u;
  uint32_t pair = ptr[0];
  int nb = off + bits > 16 ? 3 : off + bits > 8 ? 2 : 1;
  if (nb > 1) pair |= (uint32_t)ptr[1] << 8;
  if (nb > 2) pair |= (uint32_t)ptr[2] << 16;
  pair &= ~(mask << off);
  pair |= (code & mask) << off;
  for (int b = 0; b < nb; b++) ptr[b] = (uint8_t)(pair >> (8 * b));
}

static uint32_t get_code(const uint8_t* row, uint32_t j, uint32_t bits)
{
  uint32_t bit = j * bits, off = bit % 8;
  const uint8_t* ptr = row + bit / 8;
  uint32_t pair = ptr[0];
  if (off + bits > 8) pair |= (uint32_t)ptr[1] << 8;
  if (off + bits > 16) pair |= (uint32_t)ptr[2] << 16;
  return (pair >> off) & ((1u << bits) - 1u);
}

static cuvsError_t pq_labels(DLManagedTensor* labels, int64_t n)
{
  if (!labels) return CUVS_SUCCESS;
  TRY(dl_check_ptr(labels, "vq_labels"));
  TRY(dl_view(labels, LAYOUT_ROW, kDLUInt, 32, WANT_DEVICE, 1));
  TRY(dl_strict(&labels->dl_tensor, "vq_labels"));
  if (labels->dl_tensor.shape[0] < n) {
    dbl_violation("vq_labels of %lld entries for %lld rows: cuVS reads or writes past its end",
                  (long long)labels->dl_tensor.shape[0], (long long)n);
    return RAFT_FAIL("cuvsdouble: vq_labels too short");
  }
  return CUVS_SUCCESS;
}

static cuvsError_t pqq_transform(cuvsProductQuantizer_t q, DLManagedTensor* dataset,
                                 DLManagedTensor* codes, DLManagedTensor* labels, dbl_res* r)
{
  TRY(dl_check_ptr(dataset, "dataset"));
  DLDataType dt = dataset->dl_tensor.dtype;
  if (!dl_is_dtype(dt, kDLFloat, 32)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", dt.code, dt.bits);
  }
  TRY(qz_null(q, "cuvsProductQuantizer_t"));
  pqq_impl* impl = (pqq_impl*)q->addr;
  if (!qz_known(impl)) {
    dbl_violation("cuvsProductQuantizer %p holds no built quantizer: cuVS dereferences its "
                  "uninitialized addr",
                  (void*)q);
    return RAFT_FAIL("cuvsdouble: product quantizer not built");
  }
  int64_t n = dataset->dl_tensor.ndim == 2 && dataset->dl_tensor.shape ? dataset->dl_tensor.shape[0] : 0;
  TRY(pq_labels(labels, 0));
  TRY(qz_matrix(dataset, "dataset", NULL));
  TRY(dl_check_ptr(codes, "codes_out"));
  TRY(dl_view(codes, LAYOUT_ROW, kDLUInt, 8, WANT_DEVICE, 2));
  TRY(dl_strict(&codes->dl_tensor, "codes_out"));
  const DLTensor* t = &dataset->dl_tensor;
  EXPECTS(codes->dl_tensor.shape[0] == n,
          "Output matrix must have the same number of rows as the input dataset");
  EXPECTS(codes->dl_tensor.shape[1] == pqq_code_cols(impl),
          "Output matrix doesn't have the correct number of columns");
  if (t->shape[1] != impl->dim) {
    dbl_violation("product quantizer of dimension %u used on %lld columns: cuVS reads past the "
                  "rows or the codebook",
                  impl->dim, (long long)t->shape[1]);
    return RAFT_FAIL("cuvsdouble: dataset of another dimension");
  }
  TRY(pq_labels(labels, n));
  uint32_t dim = impl->dim, pl = impl->pq_len, bits = impl->p.pq_bits, book = 1u << bits;
  uint32_t* lab = labels ? labels->dl_tensor.data : NULL;
  uint8_t* y = codes->dl_tensor.data;
  int64_t cols = codes->dl_tensor.shape[1];
  float* res = malloc((size_t)dim * sizeof(float));
  if (!res) return dbl_plain_fail("std::bad_alloc");
  for (int64_t i = 0; i < n; i++) {
    const float* x = (const float*)t->data + (size_t)i * dim;
    uint32_t l = 0;
    if (impl->vq && lab) {
      /* the rows of i's batch (process_and_fill_codes: up to 65536) */
      int64_t b0 = i / 65536 * 65536, bn = n - b0 < 65536 ? n - b0 : 65536;
      lab[i] = l = dbl_unfused_tf32(bn, impl->vq_rows) ? nearest_tf32(x, impl->vq, impl->vq_rows, dim)
                                                       : nearest(x, impl->vq, impl->vq_rows, dim);
    }
    for (uint32_t j = 0; j < dim; j++) res[j] = x[j] - (impl->vq ? impl->vq[(size_t)l * dim + j] : 0);
    for (uint32_t m = 0; m < impl->p.pq_dim; m++) {
      const float* b = impl->book + (impl->p.use_subspaces ? (size_t)m * book * pl : 0);
      put_code(y + (size_t)i * cols, m, bits, nearest(res + (size_t)m * pl, b, book, pl));
    }
  }
  free(res);
  dbl_async_outputs(r, codes, labels);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsProductQuantizerTransform(cuvsResources_t res, cuvsProductQuantizer_t quantizer,
                                                  DLManagedTensor* dataset, DLManagedTensor* codes_out,
                                                  DLManagedTensor* vq_labels)
{
  DBL_ENTER(cuvsProductQuantizerTransform);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pqq_transform(quantizer, dataset, codes_out, vq_labels, r);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static cuvsError_t pqq_inverse(cuvsProductQuantizer_t q, DLManagedTensor* codes, DLManagedTensor* out,
                               DLManagedTensor* labels, dbl_res* r)
{
  TRY(dl_check_ptr(out, "out"));
  DLDataType dt = out->dl_tensor.dtype;
  if (!dl_is_dtype(dt, kDLFloat, 32)) {
    return RAFT_FAIL("Unsupported out DLtensor dtype: %d and bits: %d", dt.code, dt.bits);
  }
  TRY(qz_null(q, "cuvsProductQuantizer_t"));
  pqq_impl* impl = (pqq_impl*)q->addr;
  if (!qz_known(impl)) {
    dbl_violation("cuvsProductQuantizer %p holds no built quantizer: cuVS dereferences its "
                  "uninitialized addr",
                  (void*)q);
    return RAFT_FAIL("cuvsdouble: product quantizer not built");
  }
  TRY(dl_check_ptr(codes, "pq_codes"));
  if (!dl_dev_compat(&codes->dl_tensor)) return RAFT_FAIL("codes must be accessible on device memory");
  TRY(dl_view(codes, LAYOUT_ROW, kDLUInt, 8, WANT_DEVICE, 2));
  TRY(dl_strict(&codes->dl_tensor, "pq_codes"));
  TRY(dl_view(out, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_strict(&out->dl_tensor, "out"));
  TRY(pq_labels(labels, 0));
  int64_t n = codes->dl_tensor.shape[0];
  EXPECTS(out->dl_tensor.shape[0] == n, "Output matrix must have the same number of rows as the input codes");
  EXPECTS(codes->dl_tensor.shape[1] == pqq_code_cols(impl), "Codes matrix doesn't have the correct number of columns");
  if (out->dl_tensor.shape[1] != impl->dim) {
    dbl_violation("inverse transform into %lld columns, the quantizer has dimension %u: cuVS "
                  "writes past the rows or reads past the codes",
                  (long long)out->dl_tensor.shape[1], impl->dim);
    return RAFT_FAIL("cuvsdouble: output of another dimension");
  }
  TRY(pq_labels(labels, n));
  uint32_t dim = impl->dim, pl = impl->pq_len, bits = impl->p.pq_bits, book = 1u << bits;
  const uint32_t* lab = labels ? labels->dl_tensor.data : NULL;
  const uint8_t* c = codes->dl_tensor.data;
  int64_t cols = codes->dl_tensor.shape[1];
  float* y = out->dl_tensor.data;
  for (int64_t i = 0; i < n; i++) {
    uint32_t l = lab ? lab[i] : 0;
    if (impl->vq && l >= impl->vq_rows) {
      dbl_violation("VQ label %u of row %lld, the quantizer has %u VQ centers: cuVS reads past them",
                    l, (long long)i, impl->vq_rows);
      return RAFT_FAIL("cuvsdouble: VQ label out of range");
    }
    for (uint32_t m = 0; m < impl->p.pq_dim; m++) {
      uint32_t code = get_code(c + (size_t)i * cols, m, bits);
      const float* b = impl->book + ((impl->p.use_subspaces ? (size_t)m * book : 0) + code) * pl;
      for (uint32_t k = 0; k < pl; k++) {
        uint32_t col = m * pl + k;
        float v = b[k];
        if (impl->vq) v += impl->vq[(size_t)l * dim + col];
        y[(size_t)i * dim + col] = v;
      }
    }
  }
  dbl_async_outputs(r, out, NULL);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsProductQuantizerInverseTransform(cuvsResources_t res,
                                                         cuvsProductQuantizer_t quantizer,
                                                         DLManagedTensor* pq_codes, DLManagedTensor* out,
                                                         DLManagedTensor* vq_labels)
{
  DBL_ENTER(cuvsProductQuantizerInverseTransform);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pqq_inverse(quantizer, pq_codes, out, vq_labels, r);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsProductQuantizerGetPqBits(cuvsProductQuantizer_t quantizer, uint32_t* pq_bits)
{
  DBL_ENTER(cuvsProductQuantizerGetPqBits);
  pqq_impl* impl;
  TRY(pqq_of(quantizer, &impl));
  TRY(qz_null(pq_bits, "out-parameter"));
  *pq_bits = impl->p.pq_bits;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsProductQuantizerGetPqDim(cuvsProductQuantizer_t quantizer, uint32_t* pq_dim)
{
  DBL_ENTER(cuvsProductQuantizerGetPqDim);
  pqq_impl* impl;
  TRY(pqq_of(quantizer, &impl));
  TRY(qz_null(pq_dim, "out-parameter"));
  *pq_dim = impl->p.pq_dim;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsProductQuantizerGetEncodedDim(cuvsProductQuantizer_t quantizer,
                                                      uint32_t* encoded_dim)
{
  DBL_ENTER(cuvsProductQuantizerGetEncodedDim);
  pqq_impl* impl;
  TRY(pqq_of(quantizer, &impl));
  TRY(qz_null(encoded_dim, "out-parameter"));
  *encoded_dim = pqq_code_cols(impl);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsProductQuantizerGetUseVq(cuvsProductQuantizer_t quantizer, bool* use_vq)
{
  DBL_ENTER(cuvsProductQuantizerGetUseVq);
  pqq_impl* impl;
  TRY(pqq_of(quantizer, &impl));
  TRY(qz_null(use_vq, "out-parameter"));
  *use_vq = impl->p.use_vq;
  return dbl_ok();
}

/* to_dlpack of a device_matrix<float, uint32_t> view. */
static cuvsError_t pqq_view(DLManagedTensor* out, float* data, uint32_t rows, uint32_t cols)
{
  TRY(qz_null(out, "DLManagedTensor*"));
  DLTensor* t = &out->dl_tensor;
  if ((t->shape && dbl_reg_find(t->shape, NULL) == K_META) ||
      (t->strides && dbl_reg_find(t->strides, NULL) == K_META)) {
    dbl_violation("a view is written over a tensor whose previous library-made shape/strides "
                  "were never released (call its deleter first): they leak");
  }
  t->device.device_type = kDLCUDA;
  t->device.device_id = 0;
  t->dtype = (DLDataType){kDLFloat, 32, 1};
  t->ndim = 2;
  t->data = data;
  t->byte_offset = 0;
  t->shape = dbl_meta_alloc(2);
  t->shape[0] = rows;
  t->shape[1] = cols;
  t->strides = NULL;
  out->deleter = dbl_meta_deleter;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsProductQuantizerGetPqCodebook(cuvsProductQuantizer_t quantizer,
                                                      DLManagedTensor* pq_codebook)
{
  DBL_ENTER(cuvsProductQuantizerGetPqCodebook);
  pqq_impl* impl;
  TRY(pqq_of(quantizer, &impl));
  return pqq_view(pq_codebook, impl->book, impl->book_rows, impl->pq_len);
}

DBL_API cuvsError_t cuvsProductQuantizerGetVqCodebook(cuvsProductQuantizer_t quantizer,
                                                      DLManagedTensor* vq_codebook)
{
  DBL_ENTER(cuvsProductQuantizerGetVqCodebook);
  pqq_impl* impl;
  TRY(pqq_of(quantizer, &impl));
  return pqq_view(vq_codebook, impl->vq, impl->vq ? impl->vq_rows : 0, impl->vq ? impl->dim : 0);
}
