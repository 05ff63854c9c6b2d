/*
 * cuvsPairwiseDistance (c/src/distance/pairwise_distance.cpp, both releases;
 * cpp/src/distance/distance-inl.cuh and detail/distance_ops/ for the metrics).
 *
 * What the real C function does, and the double with it:
 *   - reads the dtype of x three times (the C code's y_dt and dist_dt are x's
 *     dtype): x must be a float tensor; y's and dist's dtypes are checked
 *     only later, by from_dlpack (y as x's type, dist as float32 for f16/f32
 *     inputs and float64 for f64);
 *   - each of x, y and dist must be C- or F-contiguous, all three the same
 *     (C-contiguity is tested first);
 *   - 16, 32 or 64 bits (half inputs give float32 distances);
 *   - the C++ function checks the shapes (columns equal, dist rows = x rows,
 *     dist columns = y rows), then dispatches on the metric: 16 metrics, any
 *     other THROWs "Unknown or unsupported distance metric";
 *   - Hellinger and KL divergence write into the inputs during the call (the
 *     real library takes square roots / logarithms in place and queues their
 *     undoing on the stream); the double does the same (dbl_rewrite.c).
 */
#include <math.h>

#include "dbl.h"

typedef struct {
  const void* p;
  DLDataType dt;
  int64_t rows, cols, rs, cs; /* element strides */
} pd_mat;

static double pd_at(const pd_mat* m, int64_t i, int64_t j)
{
  int64_t off = i * m->rs + j * m->cs;
  if (m->dt.bits == 32) return ((const float*)m->p)[off];
  if (m->dt.bits == 64) return ((const double*)m->p)[off];
  return dl_half_to_float(((const uint16_t*)m->p)[off]);
}

static void pd_make(const DLTensor* t, int row_major, pd_mat* m)
{
  m->p = t->data;
  m->dt = t->dtype;
  m->rows = t->shape[0];
  m->cols = t->shape[1];
  if (row_major) {
    m->rs = m->cols;
    m->cs = 1;
  } else {
    m->rs = 1;
    m->cs = m->rows;
  }
}

int dbl_pd_metric_ok(int metric)
{
  switch (metric) {
    case Canberra:
    case CorrelationExpanded:
    case CosineExpanded:
    case HammingUnexpanded:
    case HellingerExpanded:
    case InnerProduct:
    case JensenShannon:
    case KLDivergence:
    case L1:
    case L2Expanded:
    case L2SqrtExpanded:
    case L2SqrtUnexpanded:
    case L2Unexpanded:
    case Linf:
    case LpUnexpanded:
    case RusselRaoExpanded: return 1;
  }
  return 0;
}

/* One distance, as cuVS's distance ops define it (double accumulators). */
double dbl_pd_one(int metric, double arg, const double* x, const double* y, int64_t k)
{
  double acc = 0, sx = 0, sy = 0, sx2 = 0, sy2 = 0;
  switch (metric) {
    case L2Expanded:
    case L2SqrtExpanded:
    case L2Unexpanded:
    case L2SqrtUnexpanded:
      for (int64_t j = 0; j < k; j++) acc += (x[j] - y[j]) * (x[j] - y[j]);
      if (acc < 0) acc = 0;
      return (metric == L2SqrtExpanded || metric == L2SqrtUnexpanded) ? sqrt(acc) : acc;
    case InnerProduct:
      for (int64_t j = 0; j < k; j++) acc += x[j] * y[j];
      return acc;
    case CosineExpanded:
      for (int64_t j = 0; j < k; j++) {
        acc += x[j] * y[j];
        sx2 += x[j] * x[j];
        sy2 += y[j] * y[j];
      }
      return 1.0 - acc / (sqrt(sx2) * sqrt(sy2));
    case CorrelationExpanded:
      for (int64_t j = 0; j < k; j++) {
        acc += x[j] * y[j];
        sx += x[j];
        sy += y[j];
        sx2 += x[j] * x[j];
        sy2 += y[j] * y[j];
      }
      {
        double numer = (double)k * acc - sx * sy;
        double q = (double)k * sx2 - sx * sx, r = (double)k * sy2 - sy * sy;
        return 1.0 - numer / sqrt(q * r);
      }
    case L1:
      for (int64_t j = 0; j < k; j++) acc += fabs(x[j] - y[j]);
      return acc;
    case Linf:
      for (int64_t j = 0; j < k; j++) {
        double d = fabs(x[j] - y[j]);
        if (d > acc) acc = d;
      }
      return acc;
    case LpUnexpanded:
      for (int64_t j = 0; j < k; j++) acc += pow(fabs(x[j] - y[j]), arg);
      return pow(acc, 1.0 / arg);
    case Canberra:
      for (int64_t j = 0; j < k; j++) {
        double d = fabs(x[j] - y[j]), s = fabs(x[j]) + fabs(y[j]);
        if (s != 0) acc += d / s;
      }
      return acc;
    case HammingUnexpanded:
      for (int64_t j = 0; j < k; j++) acc += x[j] != y[j];
      return acc / (double)k;
    case RusselRaoExpanded:
      for (int64_t j = 0; j < k; j++) acc += x[j] * y[j];
      return ((double)k - acc) / (double)k;
    case HellingerExpanded:
      for (int64_t j = 0; j < k; j++) acc += sqrt(x[j]) * sqrt(y[j]);
      acc = 1.0 - acc;
      return acc > 0 ? sqrt(acc) : 0;
    case JensenShannon:
      for (int64_t j = 0; j < k; j++) {
        double m = 0.5 * (x[j] + y[j]);
        double lm = m == 0 ? 0 : log(m);
        double lx = x[j] == 0 ? 0 : log(x[j]), ly = y[j] == 0 ? 0 : log(y[j]);
        acc += -x[j] * (lm - lx) - y[j] * (lm - ly);
      }
      return sqrt(0.5 * acc);
    case KLDivergence:
      for (int64_t j = 0; j < k; j++) {
        if (x[j] == 0) continue;
        double ly = y[j] == 0 ? 0 : log(y[j]);
        acc += x[j] * (log(x[j]) - ly);
      }
      return 0.5 * acc;
    case KNN_HELLINGER_REWRITTEN: /* x and y already square roots */
      for (int64_t j = 0; j < k; j++) acc += x[j] * y[j];
      acc = 1.0 - acc;
      return acc > 0 ? sqrt(acc) : 0;
    case KNN_KL_REWRITTEN: /* y already logarithms (0 for 0) */
      for (int64_t j = 0; j < k; j++) {
        if (x[j] == 0) continue;
        acc += x[j] * (log(x[j]) - y[j]);
      }
      return 0.5 * acc;
  }
  return NAN;
}

static cuvsError_t pairwise(cudaStream_t stream, DLManagedTensor* x_t, DLManagedTensor* y_t, DLManagedTensor* d_t,
                            cuvsDistanceType metric, float metric_arg)
{
  TRY(dl_check_ptr(x_t, "x"));
  TRY(dl_check_ptr(y_t, "y"));
  TRY(dl_check_ptr(d_t, "dist"));
  DLDataType dt = x_t->dl_tensor.dtype;
  EXPECTS(dt.code == kDLFloat, "Inputs to cuvsPairwiseDistance must all be floating point tensors");
  int xr, yr, dr;
  if (dl_c_contig(&x_t->dl_tensor)) {
    xr = 1;
  } else if (dl_f_contig(&x_t->dl_tensor)) {
    xr = 0;
  } else {
    return RAFT_FAIL("X input to cuvsPairwiseDistance must be contiguous (non-strided)");
  }
  if (dl_c_contig(&y_t->dl_tensor)) {
    yr = 1;
  } else if (dl_f_contig(&y_t->dl_tensor)) {
    yr = 0;
  } else {
    return RAFT_FAIL("Y input to cuvsPairwiseDistance must be contiguous (non-strided)");
  }
  if (dl_c_contig(&d_t->dl_tensor)) {
    dr = 1;
  } else if (dl_f_contig(&d_t->dl_tensor)) {
    dr = 0;
  } else {
    return RAFT_FAIL("distances input to cuvsPairwiseDistance must be contiguous (non-strided)");
  }
  EXPECTS(xr == yr && xr == dr,
          "Inputs to cuvsPairwiseDistance must all have the same layout (row-major or col-major)");
  int layout = xr ? LAYOUT_ROW : LAYOUT_COL;
  int bits = dt.bits;
  if (bits != 16 && bits != 32 && bits != 64) {
    return RAFT_FAIL("Unsupported DLtensor dtype: %d and bits: %d", (int)dt.code, (int)dt.bits);
  }
  int dbits = bits == 64 ? 64 : 32;
  TRY(dl_view(x_t, layout, kDLFloat, bits, WANT_DEVICE, 2));
  TRY(dl_view(y_t, layout, kDLFloat, bits, WANT_DEVICE, 2));
  TRY(dl_view(d_t, layout, kDLFloat, dbits, WANT_DEVICE, 2));
  TRY(dl_strict(&x_t->dl_tensor, "x"));
  TRY(dl_strict(&y_t->dl_tensor, "y"));
  TRY(dl_strict(&d_t->dl_tensor, "dist"));
  pd_mat x, y, d;
  pd_make(&x_t->dl_tensor, xr, &x);
  pd_make(&y_t->dl_tensor, xr, &y);
  pd_make(&d_t->dl_tensor, xr, &d);
  EXPECTS(x.cols == y.cols, "Number of columns must be equal.");
  EXPECTS(d.rows == x.rows, "Number of rows in output must be equal to number of rows in X");
  EXPECTS(d.cols == y.rows, "Number of columns in output must be equal to number of rows in Y");
  if (!dbl_pd_metric_ok((int)metric)) {
    return RAFT_THROW("Unknown or unsupported distance metric '%d'!", (int)metric);
  }
  int64_t k = x.cols;
  size_t bytes = (size_t)(k ? k : 1) * sizeof(double);
  double* xa = dbl_buf_alloc(bytes);
  double* ya = dbl_buf_alloc(bytes);
  if (!xa || !ya) {
    if (xa) dbl_buf_free(xa, bytes);
    if (ya) dbl_buf_free(ya, bytes);
    return dbl_plain_fail("std::bad_alloc");
  }
  /* cuVS's Hellinger and KL divergence rewrite x and y in place around the
   * distances, and queue the undoing on the stream (dbl_rewrite.c). */
  void *xp = x_t->dl_tensor.data, *yp = y_t->dl_tensor.data;
  int64_t nx = x.rows * x.cols, ny = y.rows * y.cols;
  int m = (int)metric;
  if (m == HellingerExpanded) {
    dbl_rewrite(xp, nx, yp, ny, dt, DBL_RW_SQRT);
    m = KNN_HELLINGER_REWRITTEN;
  } else if (m == KLDivergence && xp != yp) {
    dbl_rewrite(yp, ny, NULL, 0, dt, DBL_RW_LOG);
    m = KNN_KL_REWRITTEN;
  }
  for (int64_t i = 0; i < x.rows; i++) {
    for (int64_t j = 0; j < k; j++) xa[j] = pd_at(&x, i, j);
    for (int64_t r = 0; r < y.rows; r++) {
      for (int64_t j = 0; j < k; j++) ya[j] = pd_at(&y, r, j);
      double v = dbl_pd_one(m, metric_arg, xa, ya, k);
      int64_t off = i * d.rs + r * d.cs;
      if (dbits == 64) {
        ((double*)d.p)[off] = v;
      } else {
        ((float*)d.p)[off] = (float)v;
      }
    }
  }
  dbl_buf_free(xa, bytes);
  dbl_buf_free(ya, bytes);
  if (m == KNN_HELLINGER_REWRITTEN) {
    dbl_rewrite_undo(stream, xp, nx, yp, ny, dt, DBL_RW_SQUARE);
  } else if (m == KNN_KL_REWRITTEN) {
    dbl_rewrite_undo(stream, yp, ny, NULL, 0, dt, DBL_RW_EXP);
  }
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsPairwiseDistance(cuvsResources_t res, DLManagedTensor* x,
                                         DLManagedTensor* y, DLManagedTensor* dist,
                                         cuvsDistanceType metric, float metric_arg)
{
  DBL_ENTER(cuvsPairwiseDistance);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pairwise(r->stream, x, y, dist, metric, metric_arg);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, dist, NULL);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
