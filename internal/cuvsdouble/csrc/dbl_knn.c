/*
 * cuvsdouble exact k-nearest-neighbour search, used by brute force, by CAGRA
 * search and by CAGRA graph construction.
 *
 * Distances are computed directly (not in cuVS's "expanded" form), in float,
 * accumulating over the dimensions in order, so a plain float32 loop in a test
 * reproduces them bit for bit (the library is built with -ffp-contract=off).
 * Results are ordered by distance (by descending inner product for
 * InnerProduct), ties by the smaller row id.
 */
#include "dbl.h"

#include <float.h>
#include <math.h>

int knn_metric_supported(int metric)
{
  switch (metric) {
    case L2Expanded:
    case L2SqrtExpanded:
    case CosineExpanded:
    case L1:
    case L2Unexpanded:
    case L2SqrtUnexpanded:
    case InnerProduct:
    case Linf:
    case Canberra:
    case LpUnexpanded:
    case CorrelationExpanded:
    case HellingerExpanded:
    case BrayCurtis:
    case HammingUnexpanded:
    case RusselRaoExpanded:
    case BitwiseHamming: return 1;
    default: return 0;
  }
}

int knn_larger_is_better(int metric) { return metric == InnerProduct; }

float knn_worst(int metric) { return knn_larger_is_better(metric) ? -FLT_MAX : FLT_MAX; }

static float distance(int metric, float p, const float* a, const float* b, int64_t dim)
{
  float s = 0;
  switch (metric) {
    case L2Expanded:
    case L2Unexpanded:
      for (int64_t j = 0; j < dim; j++) {
        float d = a[j] - b[j];
        s += d * d;
      }
      return s;
    case L2SqrtExpanded:
    case L2SqrtUnexpanded:
      for (int64_t j = 0; j < dim; j++) {
        float d = a[j] - b[j];
        s += d * d;
      }
      return sqrtf(s);
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
    case L1:
      for (int64_t j = 0; j < dim; j++) s += fabsf(a[j] - b[j]);
      return s;
    case InnerProduct:
      for (int64_t j = 0; j < dim; j++) s += a[j] * b[j];
      return s;
    case Linf:
      for (int64_t j = 0; j < dim; j++) {
        float d = fabsf(a[j] - b[j]);
        if (d > s) s = d;
      }
      return s;
    case Canberra:
      for (int64_t j = 0; j < dim; j++) {
        float den = fabsf(a[j]) + fabsf(b[j]);
        if (den != 0) s += fabsf(a[j] - b[j]) / den;
      }
      return s;
    case LpUnexpanded:
      for (int64_t j = 0; j < dim; j++) s += powf(fabsf(a[j] - b[j]), p);
      return powf(s, 1.0f / p);
    case CorrelationExpanded: {
      float sa = 0, sb = 0, sab = 0, saa = 0, sbb = 0, n = (float)dim;
      for (int64_t j = 0; j < dim; j++) {
        sa += a[j];
        sb += b[j];
        sab += a[j] * b[j];
        saa += a[j] * a[j];
        sbb += b[j] * b[j];
      }
      float num = n * sab - sa * sb;
      float den = sqrtf((n * saa - sa * sa) * (n * sbb - sb * sb));
      return den == 0 ? 1.0f : 1.0f - num / den;
    }
    case HellingerExpanded:
      for (int64_t j = 0; j < dim; j++) s += sqrtf(a[j] * b[j]);
      return sqrtf(s < 1.0f ? 1.0f - s : 0.0f);
    case KNN_HELLINGER_REWRITTEN: /* both sides already square roots */
      for (int64_t j = 0; j < dim; j++) s += a[j] * b[j];
      return sqrtf(s < 1.0f ? 1.0f - s : 0.0f);
    case KNN_KL_REWRITTEN: /* b already logarithms (0 for 0) */
      for (int64_t j = 0; j < dim; j++) s += a[j] * (logf(a[j] + (a[j] == 0)) - b[j]);
      return 0.5f * s;
    case BrayCurtis: {
      float num = 0, den = 0;
      for (int64_t j = 0; j < dim; j++) {
        num += fabsf(a[j] - b[j]);
        den += fabsf(a[j] + b[j]);
      }
      return den == 0 ? 0.0f : num / den;
    }
    case HammingUnexpanded:
      for (int64_t j = 0; j < dim; j++) s += (a[j] != b[j]) ? 1.0f : 0.0f;
      return dim ? s / (float)dim : 0.0f;
    case RusselRaoExpanded:
      for (int64_t j = 0; j < dim; j++) s += a[j] * b[j];
      return dim ? ((float)dim - s) / (float)dim : 0.0f;
    case JensenShannon: /* cuVS's jensen_shannon_distance_op: 0 log 0 is 0 */
      for (int64_t j = 0; j < dim; j++) {
        float x = a[j], y = b[j], m = 0.5f * (x + y);
        float lm = m == 0 ? 0.0f : logf(m);
        s += -x * (lm - logf(x + (x == 0))) + -y * (lm - logf(y + (y == 0)));
      }
      return (float)sqrt(0.5 * s);
    case KLDivergence: /* cuVS's kl_divergence_op with y's logarithms taken
                        * first (a zero y reads as log y = 0); note the ½ */
      for (int64_t j = 0; j < dim; j++) {
        float x = a[j], ly = b[j] == 0 ? 0.0f : logf(b[j]);
        s += x * (logf(x + (x == 0)) - ly);
      }
      return 0.5f * s;
    case Haversine: { /* cuVS's compute_haversine: rows are (latitude,
                       * longitude) in radians, the result the central
                       * angle in radians; only 2-dimensional rows get here */
      float s0 = sinf(0.5f * (a[0] - b[0])), s1 = sinf(0.5f * (a[1] - b[1]));
      float r = s0 * s0 + cosf(a[0]) * cosf(b[0]) * s1 * s1;
      return 2.0f * asinf(sqrtf(r));
    }
    case BitwiseHamming: {
      unsigned n = 0;
      for (int64_t j = 0; j < dim; j++) {
        unsigned x = (unsigned)(uint8_t)(int)a[j] ^ (unsigned)(uint8_t)(int)b[j];
        n += (unsigned)__builtin_popcount(x);
      }
      return (float)n;
    }
    default: return 0;
  }
}

static int filter_pass(const dbl_filter* f, int64_t q, int64_t i, int64_t n)
{
  if (!f || f->kind == FILTER_NONE) return 1;
  int64_t bit = f->kind == FILTER_BITMAP ? q * n + i : i;
  return (int)((f->words[bit >> 5] >> (bit & 31)) & 1u);
}

int knn_search(const dbl_matrix* data, const dbl_matrix* queries, int metric, float metric_arg,
               int64_t k, const dbl_filter* filter, int exclude_self, int64_t* nb64,
               uint32_t* nb32, int64_t nb_rs, float* dist, int64_t dist_rs)
{
  int64_t dim = data->dim;
  float* qrow = malloc((size_t)(dim > 0 ? dim : 1) * sizeof(float));
  float* drow = malloc((size_t)(dim > 0 ? dim : 1) * sizeof(float));
  float* bkey = malloc((size_t)(k > 0 ? k : 1) * sizeof(float));
  float* bval = malloc((size_t)(k > 0 ? k : 1) * sizeof(float));
  int64_t* bid = malloc((size_t)(k > 0 ? k : 1) * sizeof(int64_t));
  if (!qrow || !drow || !bkey || !bval || !bid) {
    free(qrow), free(drow), free(bkey), free(bval), free(bid);
    return -1;
  }
  int larger = knn_larger_is_better(metric);
  for (int64_t q = 0; q < queries->n && k > 0; q++) {
    dl_load_row(queries->base, queries->dtype, queries->rs, queries->cs, q, dim, qrow);
    int64_t found = 0;
    for (int64_t i = 0; i < data->n; i++) {
      if (exclude_self && i == q) continue;
      if (!filter_pass(filter, q, i, data->n)) continue;
      dl_load_row(data->base, data->dtype, data->rs, data->cs, i, dim, drow);
      float v = distance(metric, metric_arg, qrow, drow, dim);
      float key = larger ? -v : v;
      if (isnan(key)) key = FLT_MAX;
      /* insert into the sorted top-k (key, id); rows come in increasing id,
       * so an equal key never displaces an earlier row */
      if (found == k && !(key < bkey[k - 1])) continue;
      int64_t pos = found < k ? found : k - 1;
      while (pos > 0 && key < bkey[pos - 1]) {
        bkey[pos] = bkey[pos - 1];
        bval[pos] = bval[pos - 1];
        bid[pos] = bid[pos - 1];
        pos--;
      }
      bkey[pos] = key;
      bval[pos] = v;
      bid[pos] = i;
      if (found < k) found++;
    }
    for (int64_t j = 0; j < k; j++) {
      int ok = j < found;
      if (nb64) nb64[q * nb_rs + j] = ok ? bid[j] : -1;
      if (nb32) nb32[q * nb_rs + j] = ok ? (uint32_t)bid[j] : UINT32_MAX;
      if (dist) dist[q * dist_rs + j] = ok ? bval[j] : knn_worst(metric);
    }
  }
  free(qrow), free(drow), free(bkey), free(bval), free(bid);
  return 0;
}

float knn_distance(int metric, float metric_arg, const float* a, const float* b, int64_t dim)
{
  return distance(metric, metric_arg, a, b, dim);
}
