/*
 * PCA (c/src/preprocessing/pca.cpp; cpp/src/preprocessing/pca/detail/pca.cuh,
 * which calls raft::linalg::pca_* (raft/linalg/detail/pca.cuh, tsvd.cuh)).
 *
 * What the real code does and the double imitates:
 *   - float32, device-accessible input; 26.06 requires every matrix to be
 *     column-major (F-contiguous, strides given); 26.08 takes C- or
 *     F-contiguous, deciding from the first matrix (F tested first) and
 *     requiring the others to match;
 *   - explained_var, explained_var_ratio, singular_vals and mu are rank-1
 *     device vectors; noise_vars is a device_scalar_view, whose extents are
 *     rank 1 with a static extent of 1, so it too must be a rank-1 tensor
 *     (any other rank: "ndim mismatch between return mdspan and DLTensor",
 *     seen on 26.06); its shape is not checked against the static 1 and
 *     one value is written;
 *   - n_components comes from the params in RAFT's pointer-based PCA, from
 *     the components' rows in the layout-generic RAFT of 26.08's row-major
 *     path; when the two disagree the real library goes out of bounds (or
 *     ignores the params): the double refuses and records a violation;
 *   - fit: n_cols > 1, n_rows > 1, n_components > 0; mu = column means;
 *     covariance with n_rows - 1; eigenvectors sorted by decreasing
 *     eigenvalue; explained_var = eigenvalues, ratio = eigenvalue / sum of
 *     all, singular_vals = sqrt(eigenvalue * (n_rows - 1)), noise_vars =
 *     mean of the remaining eigenvalues when n_components < min(n_cols,
 *     n_rows), else 0; signs: the entry of largest magnitude of each
 *     component (or, with flip_signs_based_on_U, of its projection of the
 *     centered data) is made positive;
 *   - transform: (X - mu) * components^T, with whiten each component scaled
 *     by sqrt(n_rows - 1) / singular_val (n_rows of the data transformed,
 *     zero singular values skipped); inverse: T * components + mu, whiten
 *     scaling by singular_val / sqrt(n_rows - 1) (0 when n_rows is 1).
 * The double solves the eigenproblem with cyclic Jacobi rotations.
 */
#include <math.h>

#include "dbl.h"
#include "dbl_ivf.h"

typedef struct {
  float* p;
  int64_t rows, cols, rs, cs;
} pca_mat;

static float* pca_at(pca_mat* m, int64_t i, int64_t j) { return m->p + i * m->rs + j * m->cs; }

static void pca_make(const DLTensor* t, int layout, pca_mat* m)
{
  m->p = t->data;
  m->rows = t->shape[0];
  m->cols = t->shape[1];
  if (layout == LAYOUT_ROW) {
    m->rs = m->cols;
    m->cs = 1;
  } else {
    m->rs = 1;
    m->cs = m->rows;
  }
}

/* The layout a call runs with, from its first matrix, as the release
 * decides it. */
static cuvsError_t pca_layout(const DLManagedTensor* t, const char* what, int* layout)
{
  EXPECTS(t->dl_tensor.dtype.code == kDLFloat && t->dl_tensor.dtype.bits == 32,
          "PCA %s must be float32 (kDLFloat, 32 bits)", what);
  EXPECTS(dl_dev_compat(&t->dl_tensor), "PCA %s must be device-accessible memory", what);
#if DBL_RELEASE >= 2608
  if (dl_f_contig(&t->dl_tensor)) {
    *layout = LAYOUT_COL;
  } else if (dl_c_contig(&t->dl_tensor)) {
    *layout = LAYOUT_ROW;
  } else {
    return RAFT_FAIL("PCA %s must be contiguous (C- or F-order)", what);
  }
#else
  EXPECTS(dl_f_contig(&t->dl_tensor), "PCA %s must be col-major (Fortran-contiguous)", what);
  *layout = LAYOUT_COL;
#endif
  return CUVS_SUCCESS;
}

static cuvsError_t pca_mat_view(DLManagedTensor* t, const char* what, int layout, pca_mat* m)
{
  TRY(dl_check_ptr(t, what));
  TRY(dl_view(t, layout, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_strict(&t->dl_tensor, what));
  pca_make(&t->dl_tensor, layout, m);
  return CUVS_SUCCESS;
}

static cuvsError_t pca_vec_view(DLManagedTensor* t, const char* what, int64_t need, float** out)
{
  TRY(dl_check_ptr(t, what));
  TRY(dl_view(t, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 1));
  TRY(dl_strict(&t->dl_tensor, what));
  if (t->dl_tensor.shape[0] < need) {
    dbl_violation("%s holds %lld values, the call uses %lld (the real library goes out of bounds)",
                  what, (long long)t->dl_tensor.shape[0], (long long)need);
    return RAFT_FAIL("cuvsdouble: %s holds %lld values, %lld are used", what,
                     (long long)t->dl_tensor.shape[0], (long long)need);
  }
  *out = t->dl_tensor.data;
  return CUVS_SUCCESS;
}

static cuvsError_t pca_need(const pca_mat* m, const char* what, int64_t rows, int64_t cols)
{
  if (m->rows != rows || m->cols != cols) {
    dbl_violation("%s is %lld x %lld, the call uses %lld x %lld (the real library goes out of "
                  "bounds or leaves it partly unwritten)",
                  what, (long long)m->rows, (long long)m->cols, (long long)rows, (long long)cols);
    return RAFT_FAIL("cuvsdouble: %s is %lld x %lld, want %lld x %lld", what, (long long)m->rows,
                     (long long)m->cols, (long long)rows, (long long)cols);
  }
  return CUVS_SUCCESS;
}

/* Symmetric eigen-decomposition of a (n x n, row-major, destroyed) by cyclic
 * Jacobi: eigenvalues in w, eigenvectors as the columns of v. */
static void pca_jacobi(double* a, int64_t n, double* w, double* v)
{
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) v[i * n + j] = i == j;
  for (int sweep = 0; sweep < 100; sweep++) {
    double off = 0;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = i + 1; j < n; j++) off += a[i * n + j] * a[i * n + j];
    if (off < 1e-30) break;
    for (int64_t p = 0; p < n; p++) {
      for (int64_t q = p + 1; q < n; q++) {
        double apq = a[p * n + q];
        if (fabs(apq) < 1e-300) continue;
        double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
        double c = 1 / sqrt(t * t + 1), s = t * c;
        for (int64_t k = 0; k < n; k++) {
          double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; k++) {
          double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (int64_t k = 0; k < n; k++) {
          double vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  for (int64_t i = 0; i < n; i++) w[i] = a[i * n + i];
}

typedef struct {
  pca_mat in, comp, trans;
  float *ev, *evr, *sv, *mu, *noise;
} pca_fit_args;

static cuvsError_t pca_fit_views(const struct cuvsPcaParams* p, DLManagedTensor* input,
                                 DLManagedTensor* trans, DLManagedTensor* components,
                                 DLManagedTensor* ev, DLManagedTensor* evr, DLManagedTensor* sv,
                                 DLManagedTensor* mu, DLManagedTensor* noise, pca_fit_args* a)
{
  TRY(dl_check_ptr(input, "input"));
  int layout;
  TRY(pca_layout(input, "input", &layout));
  TRY(pca_mat_view(input, "input", layout, &a->in));
  if (trans) TRY(pca_mat_view(trans, "trans_input", layout, &a->trans));
  TRY(pca_mat_view(components, "components", layout, &a->comp));
  int64_t n = a->in.rows, d = a->in.cols, k = p->n_components;
  EXPECTS(d > 1, "Parameter n_cols: number of columns cannot be less than two");
  EXPECTS(n > 1, "Parameter n_rows: number of rows cannot be less than two");
  EXPECTS(k > 0, "Parameter n_components: number of components cannot be less than one");
  if (k > d) k = d;
  TRY(pca_need(&a->comp, "components", p->n_components, d));
  if (trans) TRY(pca_need(&a->trans, "trans_input", n, p->n_components));
  TRY(pca_vec_view(ev, "explained_var", p->n_components, &a->ev));
  TRY(pca_vec_view(evr, "explained_var_ratio", p->n_components, &a->evr));
  TRY(pca_vec_view(sv, "singular_vals", k, &a->sv));
  TRY(pca_vec_view(mu, "mu", d, &a->mu));
  TRY(pca_vec_view(noise, "noise_vars", 1, &a->noise));
  return CUVS_SUCCESS;
}

static void pca_transform_math(const struct cuvsPcaParams* p, pca_mat* in, pca_mat* comp,
                               const float* sv, const float* mu, pca_mat* out)
{
  int64_t n = in->rows, d = in->cols, k = p->n_components;
  double scale = sqrt((double)(n - 1));
  for (int64_t i = 0; i < n; i++) {
    for (int64_t c = 0; c < k; c++) {
      double s = 0;
      for (int64_t j = 0; j < d; j++) s += ((double)*pca_at(in, i, j) - mu[j]) * *pca_at(comp, c, j);
      if (p->whiten && sv[c] != 0) s *= scale / sv[c];
      if (p->whiten && sv[c] == 0) s *= scale;
      *pca_at(out, i, c) = (float)s;
    }
  }
}

static cuvsError_t pca_fit(const struct cuvsPcaParams* p, pca_fit_args* a, bool flip_u)
{
  int64_t n = a->in.rows, d = a->in.cols, k = p->n_components;
  size_t dd = (size_t)(d * d);
  double* mean = calloc((size_t)d, sizeof *mean);
  double* cov = calloc(dd, sizeof *cov);
  double* vec = calloc(dd, sizeof *vec);
  double* w = calloc((size_t)d, sizeof *w);
  int64_t* order = calloc((size_t)d, sizeof *order);
  if (!mean || !cov || !vec || !w || !order) {
    free(mean), free(cov), free(vec), free(w), free(order);
    return dbl_plain_fail("std::bad_alloc");
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < d; j++) mean[j] += *pca_at(&a->in, i, j);
  for (int64_t j = 0; j < d; j++) mean[j] /= (double)n;
  for (int64_t i = 0; i < n; i++)
    for (int64_t r = 0; r < d; r++) {
      double xr = *pca_at(&a->in, i, r) - mean[r];
      for (int64_t c = r; c < d; c++) cov[r * d + c] += xr * (*pca_at(&a->in, i, c) - mean[c]);
    }
  for (int64_t r = 0; r < d; r++)
    for (int64_t c = r; c < d; c++) {
      cov[r * d + c] /= (double)(n - 1);
      cov[c * d + r] = cov[r * d + c];
    }
  pca_jacobi(cov, d, w, vec);
  for (int64_t i = 0; i < d; i++) order[i] = i;
  for (int64_t i = 1; i < d; i++) { /* insertion sort, decreasing eigenvalue */
    int64_t t = order[i], j = i;
    while (j > 0 && w[order[j - 1]] < w[t]) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = t;
  }
  double total = 0;
  for (int64_t i = 0; i < d; i++) total += w[i];
  for (int64_t c = 0; c < k; c++) {
    int64_t e = order[c];
    double sign = 1, best = -1;
    if (flip_u) {
      for (int64_t i = 0; i < n; i++) {
        double u = 0;
        for (int64_t j = 0; j < d; j++) u += (*pca_at(&a->in, i, j) - mean[j]) * vec[j * d + e];
        if (fabs(u) > best) {
          best = fabs(u);
          sign = u < 0 ? -1 : 1;
        }
      }
    } else {
      for (int64_t j = 0; j < d; j++) {
        double v = vec[j * d + e];
        if (fabs(v) > best) {
          best = fabs(v);
          sign = v < 0 ? -1 : 1;
        }
      }
    }
    for (int64_t j = 0; j < d; j++) *pca_at(&a->comp, c, j) = (float)(sign * vec[j * d + e]);
    double ev = w[e] > 0 ? w[e] : 0;
    a->ev[c] = (float)w[e];
    a->evr[c] = (float)(total != 0 ? w[e] / total : 0);
    a->sv[c] = (float)sqrt(ev * (double)(n - 1));
  }
  double noise = 0;
  if (k < d && k < n) {
    for (int64_t c = k; c < d; c++) noise += w[order[c]];
    noise /= (double)(d - k);
  }
  *a->noise = (float)noise;
  for (int64_t j = 0; j < d; j++) a->mu[j] = (float)mean[j];
  free(mean), free(cov), free(vec), free(w), free(order);
  return CUVS_SUCCESS;
}

static void pca_outputs(dbl_res* r, pca_fit_args* a, DLManagedTensor* trans, DLManagedTensor* comp,
                        DLManagedTensor* ev, DLManagedTensor* evr, DLManagedTensor* sv,
                        DLManagedTensor* mu, DLManagedTensor* noise)
{
  (void)a;
  dbl_async_outputs(r, comp, ev);
  dbl_async_outputs(r, evr, sv);
  dbl_async_outputs(r, mu, noise);
  if (trans) dbl_async_outputs(r, trans, NULL);
}

DBL_API cuvsError_t cuvsPcaParamsCreate(cuvsPcaParams_t* params)
{
  DBL_ENTER(cuvsPcaParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsPcaParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  p->n_components = 1;
  p->copy = true;
  p->whiten = false;
  p->algorithm = CUVS_PCA_COV_EIG_DQ;
  p->tol = 0.0f;
  p->n_iterations = 15;
  dbl_reg_add(p, K_PCA_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsPcaParamsDestroy(cuvsPcaParams_t params)
{
  DBL_ENTER(cuvsPcaParamsDestroy);
  return ivf_plain_destroy(params, K_PCA_PARAMS, "cuvsPcaParams");
}

static cuvsError_t pca_fit_call(cuvsResources_t res, cuvsPcaParams_t params, DLManagedTensor* input,
                                DLManagedTensor* trans, DLManagedTensor* components,
                                DLManagedTensor* ev, DLManagedTensor* evr, DLManagedTensor* sv,
                                DLManagedTensor* mu, DLManagedTensor* noise, bool flip_u)
{
  TRY(ivf_check_plain(params, K_PCA_PARAMS, "cuvsPcaParams"));
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  pca_fit_args a;
  cuvsError_t st = pca_fit_views(params, input, trans, components, ev, evr, sv, mu, noise, &a);
  if (st == CUVS_SUCCESS) st = pca_fit(params, &a, flip_u);
  if (st == CUVS_SUCCESS && trans) pca_transform_math(params, &a.in, &a.comp, a.sv, a.mu, &a.trans);
  if (st == CUVS_SUCCESS) pca_outputs(r, &a, trans, components, ev, evr, sv, mu, noise);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsPcaFit(cuvsResources_t res, cuvsPcaParams_t params, DLManagedTensor* input,
                               DLManagedTensor* components, DLManagedTensor* explained_var,
                               DLManagedTensor* explained_var_ratio, DLManagedTensor* singular_vals,
                               DLManagedTensor* mu, DLManagedTensor* noise_vars,
                               bool flip_signs_based_on_U)
{
  DBL_ENTER(cuvsPcaFit);
  return pca_fit_call(res, params, input, NULL, components, explained_var, explained_var_ratio,
                      singular_vals, mu, noise_vars, flip_signs_based_on_U);
}

DBL_API cuvsError_t cuvsPcaFitTransform(cuvsResources_t res, cuvsPcaParams_t params,
                                        DLManagedTensor* input, DLManagedTensor* trans_input,
                                        DLManagedTensor* components, DLManagedTensor* explained_var,
                                        DLManagedTensor* explained_var_ratio,
                                        DLManagedTensor* singular_vals, DLManagedTensor* mu,
                                        DLManagedTensor* noise_vars, bool flip_signs_based_on_U)
{
  DBL_ENTER(cuvsPcaFitTransform);
  TRY(dl_check_ptr(trans_input, "trans_input"));
  return pca_fit_call(res, params, input, trans_input, components, explained_var,
                      explained_var_ratio, singular_vals, mu, noise_vars, flip_signs_based_on_U);
}

static cuvsError_t pca_tx(const struct cuvsPcaParams* p, DLManagedTensor* input,
                          DLManagedTensor* components, DLManagedTensor* singular_vals,
                          DLManagedTensor* mu, DLManagedTensor* out, int inverse)
{
  const char* first = inverse ? "trans_input" : "input";
  TRY(dl_check_ptr(input, first));
  int layout;
  TRY(pca_layout(input, first, &layout));
  pca_mat in, comp, o;
  TRY(pca_mat_view(input, first, layout, &in));
  TRY(pca_mat_view(components, "components", layout, &comp));
  float *sv, *m;
  TRY(pca_mat_view(out, inverse ? "output" : "trans_input", layout, &o));
  int64_t k = p->n_components;
  int64_t n = inverse ? o.rows : in.rows, d = inverse ? o.cols : in.cols;
  EXPECTS(d > 1, "Parameter n_cols: number of columns cannot be less than two");
  EXPECTS(n > 0, "Parameter n_rows: number of rows cannot be less than one");
  EXPECTS(k > 0, "Parameter n_components: number of components cannot be less than one");
  TRY(pca_need(&comp, "components", k, d));
  TRY(pca_vec_view(singular_vals, "singular_vals", k, &sv));
  TRY(pca_vec_view(mu, "mu", d, &m));
  if (!inverse) {
    TRY(pca_need(&o, "trans_input", n, k));
    pca_transform_math(p, &in, &comp, sv, m, &o);
    return CUVS_SUCCESS;
  }
  TRY(pca_need(&in, "trans_input", n, k));
  double scale = n - 1 > 0 ? 1 / sqrt((double)(n - 1)) : 0;
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < d; j++) {
      double s = 0;
      for (int64_t c = 0; c < k; c++) {
        double cj = *pca_at(&comp, c, j);
        if (p->whiten) cj *= scale * (sv[c] != 0 ? sv[c] : 1);
        s += (double)*pca_at(&in, i, c) * cj;
      }
      *pca_at(&o, i, j) = (float)(s + m[j]);
    }
  }
  return CUVS_SUCCESS;
}

static cuvsError_t pca_tx_call(cuvsResources_t res, cuvsPcaParams_t params, DLManagedTensor* input,
                               DLManagedTensor* components, DLManagedTensor* singular_vals,
                               DLManagedTensor* mu, DLManagedTensor* out, int inverse)
{
  TRY(ivf_check_plain(params, K_PCA_PARAMS, "cuvsPcaParams"));
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = pca_tx(params, input, components, singular_vals, mu, out, inverse);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, out, NULL);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsPcaTransform(cuvsResources_t res, cuvsPcaParams_t params,
                                     DLManagedTensor* input, DLManagedTensor* components,
                                     DLManagedTensor* singular_vals, DLManagedTensor* mu,
                                     DLManagedTensor* trans_input)
{
  DBL_ENTER(cuvsPcaTransform);
  return pca_tx_call(res, params, input, components, singular_vals, mu, trans_input, 0);
}

DBL_API cuvsError_t cuvsPcaInverseTransform(cuvsResources_t res, cuvsPcaParams_t params,
                                            DLManagedTensor* trans_input,
                                            DLManagedTensor* components,
                                            DLManagedTensor* singular_vals, DLManagedTensor* mu,
                                            DLManagedTensor* output)
{
  DBL_ENTER(cuvsPcaInverseTransform);
  return pca_tx_call(res, params, trans_input, components, singular_vals, mu, output, 1);
}
