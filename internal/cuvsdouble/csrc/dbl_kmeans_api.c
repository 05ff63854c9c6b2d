/*
 * The k-means C API (c/src/cluster/kmeans.cpp; cpp/src/cluster/detail/kmeans.cuh,
 * cpp/src/cluster/kmeans_balanced.cuh). dbl_kmeans.c is the IVF trainer; this
 * file is the public API:
 *   cuvsKMeansParamsCreate/Destroy, cuvsKMeansFit, cuvsKMeansPredict,
 *   cuvsKMeansClusterCost, and on 26.06 the _v2 twins (cuvsKMeansParams_v2
 *   lacks inertia_check; both structs are converted the same way and
 *   inertia_check is never read). 26.08 has one struct, the v2 layout with
 *   streaming_batch_size renamed device_buffer_samples.
 *
 * What the real code does and the double imitates:
 *   - fit takes float32 or float64 X; X in host memory is read as a row-major
 *     n x d array with no layout check (only its data pointer and shape), the
 *     centroids must then be device memory and the weights host memory;
 *     hierarchical (balanced) k-means refuses host X, sample weights and
 *     float64, uses the centroids' row count (not n_clusters) and
 *     hierarchical_n_iters iterations, and reports n_iter = hierarchical_n_iters
 *     and inertia = cluster_cost; its training (build_hierarchical, with each
 *     release's re-balancing of small clusters) is imitated below;
 *   - regular fit: metric L2Expanded or L2SqrtExpanded, n_clusters > 0,
 *     tol > 0, oversampling_factor >= 0, centroids n_clusters x d, weights of
 *     n rows with a positive sum, normalized to sum n; init Array uses the
 *     centroids as given (and one init), Random samples rows, KMeansPlusPlus
 *     seeds by D^2 sampling; the best of n_init runs is kept;
 *   - fit's inertia is cluster_cost's (cpp/src/cluster/detail/kmeans.cuh,
 *     the end of each n_init run; cpp/src/cluster/kmeans.cuh cluster_cost):
 *     the squared L2 distance to the nearest centroid whatever the metric
 *     (L2SqrtExpanded included), times the weights rescaled to sum to n;
 *     that path (minClusterDistanceCompute) is always the fused kernel,
 *     3xTF32 on SM 8.0 and later, about as exact as float32;
 *   - predict needs device X, int32 labels; its inertia (detail/kmeans.cuh
 *     kmeans_predict) is the sum of the weights (rescaled to sum to n only
 *     when normalize_weight, raw otherwise, 1 without weights) times the
 *     metric's distance to the label's centroid: squared for L2Expanded,
 *     the square root for L2SqrtExpanded. Labels and distances come from
 *     minClusterAndDistanceCompute (detail/minClusterDistanceCompute.cu),
 *     which use_fused (detail/kmeans_common.cuh) sends, on SM 9.x with
 *     fewer than 4096 rows and 4096 centroids (and on SM 10 and later
 *     always), to unfusedDistanceNNMinReduce (cpp/src/distance/
 *     unfused_distance_nn.cuh): a cuBLAS GEMM with
 *     CUBLAS_COMPUTE_32F_FAST_TF32 for float, then ||x||^2 + ||c||^2 - 2 x.c
 *     clamped at 0 and the first minimum (then sqrt for L2SqrtExpanded).
 *     With 10-bit mantissas and the cancellation, a float32 predict's
 *     distances are off by up to ~2^-9 x.c: on an H200 a fit's inertia
 *     matched Go's and the predict of the same data with its centroids was
 *     34% higher. The double imitates such a device (SM 9.x): float32
 *     predicts below those sizes round x and c to TF32 (round to nearest)
 *     and accumulate in float; float64 (CUBLAS_COMPUTE_64F) and larger
 *     predicts are exact. Its fit's assignments stay exact;
 *   - the weights' sum must be positive: always for host weights, for
 *     device weights only on 26.08 (weightSum's check_positive); 26.06
 *     divides by it;
 *   - the balanced predict reports inertia 0;
 *   - cluster cost: sum over rows of the squared L2 distance to the nearest
 *     centroid (unweighted).
 * Inertias are DataT in the C++ code: float32 inputs give float sums.
 * The double runs Lloyd's iterations on the CPU with a fixed seed (balanced:
 * cuVS's deterministic seeding and its prime offsets, which advance across
 * calls as cuVS's static counter does).
 */
#include <math.h>

#include "dbl.h"
#include "dbl_ivf.h"

/* The fields both structs share, read by one conversion (as the C code's
 * templated convert_params). */
typedef struct {
  int metric, n_clusters, init, max_iter, n_init, batch_samples, batch_centroids;
  double tol, oversampling;
  bool hierarchical;
  int hierarchical_n_iters;
  int64_t buffer_samples, init_size;
} km_params;

#define KM_FILL(out, p)                               \
  do {                                                \
    (out)->metric = (int)(p)->metric;                 \
    (out)->n_clusters = (p)->n_clusters;              \
    (out)->init = (int)(p)->init;                     \
    (out)->max_iter = (p)->max_iter;                  \
    (out)->tol = (p)->tol;                            \
    (out)->n_init = (p)->n_init;                      \
    (out)->oversampling = (p)->oversampling_factor;   \
    (out)->batch_samples = (p)->batch_samples;        \
    (out)->batch_centroids = (p)->batch_centroids;    \
    (out)->hierarchical = (p)->hierarchical;          \
    (out)->hierarchical_n_iters = (p)->hierarchical_n_iters; \
    (out)->init_size = (p)->init_size;                \
  } while (0)

/* ---- the arithmetic, on doubles ---- */

typedef struct {
  const void* p;
  int bits;
  int64_t n, d;
} km_mat;

static double km_at(const km_mat* m, int64_t i, int64_t j)
{
  if (m->bits == 64) return ((const double*)m->p)[i * m->d + j];
  return ((const float*)m->p)[i * m->d + j];
}

static double km_sq(const km_mat* x, int64_t i, const double* c, int64_t d)
{
  double s = 0;
  for (int64_t j = 0; j < d; j++) {
    double t = km_at(x, i, j) - c[j];
    s += t * t;
  }
  return s;
}

/* score of row i against centroid c, smaller is nearer */
static double km_score(int metric, const km_mat* x, int64_t i, const double* c, int64_t d)
{
  if (metric == InnerProduct || metric == CosineExpanded) {
    double ip = 0, nx = 0, nc = 0;
    for (int64_t j = 0; j < d; j++) {
      double v = km_at(x, i, j);
      ip += v * c[j];
      nx += v * v;
      nc += c[j] * c[j];
    }
    if (metric == CosineExpanded) return 1.0 - ip / (sqrt(nx) * sqrt(nc) + 1e-30);
    return -ip;
  }
  double s = km_sq(x, i, c, d);
  return metric == L2SqrtExpanded ? sqrt(s) : s;
}

static int32_t km_nearest(int metric, const km_mat* x, int64_t i, const double* c, int64_t k,
                          int64_t d, double* best)
{
  int32_t bi = 0;
  double bv = INFINITY;
  for (int64_t j = 0; j < k; j++) {
    double v = km_score(metric, x, i, c + j * d, d);
    if (v < bv) {
      bv = v;
      bi = (int32_t)j;
    }
  }
  if (best) *best = bv;
  return bi;
}

static uint64_t km_rng(uint64_t* s)
{
  *s += 0x9E3779B97F4A7C15ULL;
  uint64_t z = *s;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static double km_unit(uint64_t* s) { return (double)(km_rng(s) >> 11) / 9007199254740992.0; }

static void km_row(const km_mat* x, int64_t i, double* out)
{
  for (int64_t j = 0; j < x->d; j++) out[j] = km_at(x, i, j);
}

/* k-means++ (D^2 sampling) or uniform row sampling into c (k x d). */
static void km_seed(const km_mat* x, const double* w, int init, int64_t k, uint64_t* rng, double* c)
{
  int64_t n = x->n, d = x->d;
  if (init == 1) { /* Random: k distinct rows */
    int64_t* pick = calloc((size_t)n, sizeof *pick);
    for (int64_t i = 0; i < n; i++) pick[i] = i;
    for (int64_t j = 0; j < k; j++) {
      int64_t r = j + (int64_t)(km_rng(rng) % (uint64_t)(n - j));
      int64_t t = pick[j];
      pick[j] = pick[r];
      pick[r] = t;
      km_row(x, pick[j], c + j * d);
    }
    free(pick);
    return;
  }
  double* dist = malloc((size_t)n * sizeof *dist);
  km_row(x, (int64_t)(km_rng(rng) % (uint64_t)n), c);
  for (int64_t i = 0; i < n; i++) dist[i] = km_sq(x, i, c, d);
  for (int64_t j = 1; j < k; j++) {
    double total = 0;
    for (int64_t i = 0; i < n; i++) total += dist[i] * (w ? w[i] : 1);
    int64_t pick = n - 1;
    if (total > 0) {
      double u = km_unit(rng) * total, acc = 0;
      for (int64_t i = 0; i < n; i++) {
        acc += dist[i] * (w ? w[i] : 1);
        if (acc >= u && dist[i] > 0) {
          pick = i;
          break;
        }
      }
    } else {
      pick = (int64_t)(km_rng(rng) % (uint64_t)n);
    }
    km_row(x, pick, c + j * d);
    for (int64_t i = 0; i < n; i++) {
      double v = km_sq(x, i, c + j * d, d);
      if (v < dist[i]) dist[i] = v;
    }
  }
  free(dist);
}

/* Lloyd's iterations from c; returns the iterations run, the (weighted)
 * inertia in *inertia. */
static int km_lloyd(const km_mat* x, const double* w, int metric, int64_t k, int max_iter,
                    double tol, double* c, double* inertia)
{
  int64_t n = x->n, d = x->d;
  double* sums = calloc((size_t)(k * d), sizeof *sums);
  double* cnt = calloc((size_t)k, sizeof *cnt);
  int it = 0;
  for (it = 0; it < max_iter;) {
    memset(sums, 0, (size_t)(k * d) * sizeof *sums);
    memset(cnt, 0, (size_t)k * sizeof *cnt);
    for (int64_t i = 0; i < n; i++) {
      int32_t l = km_nearest(metric, x, i, c, k, d, NULL);
      double wi = w ? w[i] : 1;
      for (int64_t j = 0; j < d; j++) sums[l * d + j] += wi * km_at(x, i, j);
      cnt[l] += wi;
    }
    double shift = 0;
    for (int64_t l = 0; l < k; l++) {
      if (cnt[l] <= 0) continue; /* an empty cluster keeps its centroid */
      for (int64_t j = 0; j < d; j++) {
        double v = sums[l * d + j] / cnt[l];
        shift += (v - c[l * d + j]) * (v - c[l * d + j]);
        c[l * d + j] = v;
      }
    }
    it++;
    if (shift < tol) break;
  }
  /* cluster_cost: squared distances, whatever the metric */
  double in = 0;
  for (int64_t i = 0; i < n; i++) {
    double b;
    km_nearest(L2Expanded, x, i, c, k, d, &b);
    in += (w ? w[i] : 1) * b;
  }
  *inertia = in;
  free(sums);
  free(cnt);
  return it;
}

/* ---- balanced (hierarchical) k-means: cpp/src/cluster/detail/kmeans_balanced.cuh ----
 *
 * build_hierarchical: round(sqrt(k)) mesoclusters by build_clusters, the k
 * fine clusters split among them in proportion to their sizes
 * (arrange_fine_clusters) and built by build_clusters on each
 * mesocluster's rows (at most ceil(2n / mesoclusters) of them), then
 * max(n_iters / 10, 2) balancing EM iterations over all rows.
 * build_clusters seeds the labels round-robin (row i in cluster i mod k),
 * takes the means, and runs n_iters balancing EM iterations. Each EM
 * iteration but the first starts by moving the centers of small clusters
 * (adjust_centers), which adds an iteration on the first and then every
 * pullback-th (2, and 5 in the final pass) adjusting one; IP and cosine
 * normalize the centers; then labels by the metric and means (an empty
 * cluster's mean is 0: div_checkzero_op). adjust_centers differs:
 *   26.06: every cluster of at most (IdxT)(n/k (integer) x thr) rows
 *     (thr 0.25 in build_clusters, 0.2 in the final pass) moves to
 *     (w c_donor + x_i) / (w + 1), w = min(its size, 7), x_i the next row
 *     of the sequence (ofst x (count+1)) mod n whose cluster has at least
 *     n/k rows;
 *   26.08: clusters sorted by size, the j-th smallest paired with the j-th
 *     largest while the small one is under 0.333 x n/k or the large one
 *     over 3 x n/k (balanced_params' defaults, which the C API keeps); the
 *     small one moves to c_large + 0.01 (x_i - c_large), x_i the first row
 *     of the large one in the sequence (ofst (t+1) + pair) mod n.
 * ofst is the next prime of a fixed list not dividing n, from a counter
 * cuVS keeps across calls (a static); the double keeps one too. */

typedef struct {
  const double* x; /* n x d */
  int64_t n, d;
  int metric;
} kb_data;

static atomic_uint g_kb_primes;

static int64_t kb_prime(int64_t n)
{
  static const int64_t primes[] = {29,   71,   113,  173,  229,  281,  349,  409,  463,  541,
                                   601,  659,  733,  809,  863,  941,  1013, 1069, 1151, 1223,
                                   1291, 1373, 1451, 1511, 1583, 1657, 1733, 1811, 1889, 1987,
                                   2053, 2129, 2213, 2287, 2357, 2423, 2531, 2617, 2687, 2741};
  const unsigned np = sizeof primes / sizeof primes[0];
  int64_t p;
  do {
    p = primes[(atomic_fetch_add(&g_kb_primes, 1u) + 1u) % np];
  } while (n % p == 0);
  return p;
}

/* calc_centers_and_sizes with reset: means, 0 for an empty cluster */
static void kb_means(const kb_data* D, const int64_t* lab, int64_t k, double* c, int64_t* sz)
{
  int64_t d = D->d;
  memset(c, 0, (size_t)(k * d) * sizeof *c);
  memset(sz, 0, (size_t)k * sizeof *sz);
  for (int64_t i = 0; i < D->n; i++) {
    sz[lab[i]]++;
    for (int64_t j = 0; j < d; j++) c[lab[i] * d + j] += D->x[i * d + j];
  }
  for (int64_t l = 0; l < k; l++) {
    for (int64_t j = 0; j < d; j++) c[l * d + j] = sz[l] ? c[l * d + j] / (double)sz[l] : 0;
  }
}

static int kb_pair_cmp(const void* a, const void* b)
{
  const int64_t *x = a, *y = b;
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* adjust_centers: whether a center moved */
static int kb_adjust(const kb_data* D, const int64_t* lab, const int64_t* sz, int64_t k, double lower,
                     double upper, double* c)
{
  int64_t n = D->n, d = D->d;
  if (k == 0) return 0;
#if DBL_RELEASE < 2608
  (void)upper;
  int64_t average = n / k, ofst = kb_prime(n), count = 0;
  int moved = 0;
  for (int64_t l = 0; l < k; l++) {
    if (sz[l] > (int64_t)((float)average * (float)lower)) continue;
    int64_t i = -1;
    for (int64_t tries = 0; tries < n; tries++) {
      int64_t cand = (ofst * (++count)) % n;
      if (sz[lab[cand]] >= average) {
        i = cand;
        break;
      }
    }
    if (i < 0) continue;
    double wc = sz[l] < 7 ? (double)sz[l] : 7.0;
    const double* donor = c + lab[i] * d;
    for (int64_t j = 0; j < d; j++) c[l * d + j] = (wc * donor[j] + D->x[i * d + j]) / (wc + 1);
    moved = 1;
  }
  return moved;
#else
  double average = (double)(float)((float)n / (float)k);
  double lo = (float)average * (float)lower, hi = (float)average * (float)upper;
  int64_t* sorted = malloc((size_t)k * 2 * sizeof *sorted);
  for (int64_t l = 0; l < k; l++) sorted[2 * l] = sz[l], sorted[2 * l + 1] = l;
  qsort(sorted, (size_t)k, 2 * sizeof *sorted, kb_pair_cmp);
  int64_t pairs = 0;
  for (; pairs < k / 2; pairs++) {
    int64_t ss = sorted[2 * pairs], sc = sorted[2 * pairs + 1];
    int64_t ls = sorted[2 * (k - 1 - pairs)], lc = sorted[2 * (k - 1 - pairs) + 1];
    if (sc == lc || ls == 0) break;
    if ((double)ss >= lo && (double)ls <= hi) break;
  }
  if (pairs == 0) {
    free(sorted);
    return 0;
  }
  int64_t ofst = kb_prime(n), span = (n + 31) / 32 * 32;
  for (int64_t p = 0; p < pairs; p++) {
    int64_t recv = sorted[2 * p + 1], donor = sorted[2 * (k - 1 - p) + 1], i = -1;
    for (int64_t t = 0; t < span && i < 0; t++) {
      int64_t cand = (ofst * (t + 1) + p) % n;
      if (lab[cand] == donor) i = cand;
    }
    if (i < 0) continue;
    for (int64_t j = 0; j < d; j++) {
      double dc = c[donor * d + j];
      c[recv * d + j] = dc + 0.01 * (D->x[i * d + j] - dc);
    }
  }
  free(sorted);
  return 1;
#endif
}

/* balancing_em_iters from the centers in c */
static void kb_em(const kb_data* D, int64_t k, int n_iters, int pullback, double lower, double upper,
                  double* c, int64_t* lab, int64_t* sz)
{
  km_mat cm = {D->x, 64, D->n, D->d};
  int64_t d = D->d;
  int counter = pullback;
  for (int iter = 0; iter < n_iters; iter++) {
    if (iter > 0 && kb_adjust(D, lab, sz, k, lower, upper, c)) {
      if (counter++ >= pullback) {
        counter -= pullback;
        n_iters++;
      }
    }
    if (D->metric == InnerProduct || D->metric == CosineExpanded) {
      for (int64_t l = 0; l < k; l++) {
        double s = 0;
        for (int64_t j = 0; j < d; j++) s += c[l * d + j] * c[l * d + j];
        s = sqrt(s);
        if (s > 0) {
          for (int64_t j = 0; j < d; j++) c[l * d + j] /= s;
        }
      }
    }
    for (int64_t i = 0; i < D->n; i++) lab[i] = km_nearest(D->metric, &cm, i, c, k, d, NULL);
    kb_means(D, lab, k, c, sz);
  }
}

/* build_clusters: round-robin labels, their means, n_iters EM iterations */
static void kb_build(const kb_data* D, int64_t k, int n_iters, double lower, double upper, double* c,
                     int64_t* lab, int64_t* sz)
{
  for (int64_t i = 0; i < D->n; i++) lab[i] = i % k;
  kb_means(D, lab, k, c, sz);
  kb_em(D, k, n_iters, 2, lower, upper, c, lab, sz);
}

#if DBL_RELEASE < 2608
#define KB_LOWER 0.25
#define KB_FINAL_LOWER 0.2
#define KB_UPPER 0.0 /* 26.06 has no upper bound */
#else
#define KB_LOWER 0.333f
#define KB_FINAL_LOWER 0.333f
#define KB_UPPER 3.0f
#endif

/* build_hierarchical of the n x d rows x into c (k x d) */
static void km_balanced(const km_mat* xm, int metric, int64_t k, int n_iters, double* c)
{
  int64_t n = xm->n, d = xm->d;
  double* x = malloc((size_t)(n * d) * sizeof *x);
  for (int64_t i = 0; i < n; i++) km_row(xm, i, x + i * d);
  kb_data all = {x, n, d, metric};
  int64_t nm = (int64_t)(sqrt((double)k) + 0.5);
  if (nm > k) nm = k;
  if (nm < 1) nm = 1;
  double* mc = calloc((size_t)(nm * d), sizeof *mc);
  int64_t* mlab = calloc((size_t)n, sizeof *mlab);
  int64_t* msz = calloc((size_t)nm, sizeof *msz);
  kb_build(&all, nm, n_iters, KB_LOWER, KB_UPPER, mc, mlab, msz);

  /* arrange_fine_clusters */
  int64_t* fine = calloc((size_t)nm, sizeof *fine);
  int64_t* csum = calloc((size_t)nm + 1, sizeof *csum);
  int64_t lists_rem = k, nonempty_rem = 0, rows_rem = n, size_max = 0;
  for (int64_t i = 0; i < nm; i++) nonempty_rem += msz[i] > 0;
  for (int64_t i = 0; i < nm; i++) {
    if (i < nm - 1) {
      if (msz[i] == 0) {
        fine[i] = 0;
      } else {
        nonempty_rem--;
        int64_t s = (int64_t)((double)(lists_rem * msz[i]) / (double)rows_rem + .5);
        if (s > lists_rem - nonempty_rem) s = lists_rem - nonempty_rem;
        fine[i] = s > 1 ? s : 1;
      }
    } else {
      fine[i] = lists_rem;
    }
    lists_rem -= fine[i];
    rows_rem -= msz[i];
    if (msz[i] > size_max) size_max = msz[i];
    csum[i + 1] = csum[i] + fine[i];
  }
  int64_t balanced_max = (2 * n + nm - 1) / nm;
  if (size_max > balanced_max) size_max = balanced_max;

  /* build_fine_clusters: each mesocluster's first size_max rows */
  double* sub = malloc((size_t)((size_max ? size_max : 1) * d) * sizeof *sub);
  int64_t* slab = calloc((size_t)(size_max ? size_max : 1), sizeof *slab);
  int64_t* ssz = calloc((size_t)k, sizeof *ssz);
  for (int64_t m = 0; m < nm; m++) {
    int64_t rows = 0;
    for (int64_t i = 0; i < n && rows < size_max; i++) {
      if (mlab[i] == m) memcpy(sub + (rows++) * d, x + i * d, (size_t)d * sizeof *x);
    }
    if (rows == 0 || fine[m] == 0) continue;
    kb_data part = {sub, rows, d, metric};
    kb_build(&part, fine[m], n_iters, KB_LOWER, KB_UPPER, c + csum[m] * d, slab, ssz);
  }

  /* the final balancing over all rows */
  int64_t* lab = calloc((size_t)n, sizeof *lab);
  int64_t* sz = calloc((size_t)k, sizeof *sz);
  int fin = n_iters / 10 > 2 ? n_iters / 10 : 2;
  kb_em(&all, k, fin, 5, KB_FINAL_LOWER, KB_UPPER, c, lab, sz);
  free(x), free(mc), free(mlab), free(msz), free(fine), free(csum);
  free(sub), free(slab), free(ssz), free(lab), free(sz);
}

/* float rounded to TF32 (10 explicit mantissa bits), to nearest, ties away
 * from zero (cvt.rna.tf32.f32) */
float dbl_tf32(float v)
{
  if (!isfinite(v)) return v;
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  u = (u + 0x1000u) & ~0x1fffu;
  memcpy(&v, &u, sizeof v);
  return v;
}

/* use_fused on SM 9.x: fused once m or n reaches 4096, else the unfused
 * TF32 GEMM (float32; float64 runs CUBLAS_COMPUTE_64F) */
int dbl_unfused_tf32(int64_t rows, int64_t centers) { return rows < 4096 && centers < 4096; }

/* reduce_min_kernel's L2 distance from the GEMM output: norms in float, the
 * dot product of TF32 operands accumulated in float, clamped at 0 */
float dbl_tf32_l2(const float* x, const float* c, int64_t d)
{
  float xn = 0, cn = 0, z = 0;
  for (int64_t j = 0; j < d; j++) {
    xn += x[j] * x[j];
    cn += c[j] * c[j];
    z += dbl_tf32(x[j]) * dbl_tf32(c[j]);
  }
  float f = xn + cn - 2.0f * z;
  return f > 0 ? f : 0;
}

/* minClusterAndDistanceCompute for row i of x against the centroids cm
 * (x's dtype): the label (the first minimum), and the metric's distance in
 * *value; tf32: the unfused path's arithmetic, else exact. */
static int32_t km_assign(int metric, const km_mat* x, int64_t i, const km_mat* cm, int tf32,
                         double* value)
{
  int64_t d = x->d;
  int32_t bi = 0;
  double bv = INFINITY;
  for (int64_t c = 0; c < cm->n; c++) {
    double v;
    if (tf32) {
      v = dbl_tf32_l2((const float*)x->p + i * d, (const float*)cm->p + c * d, d);
    } else {
      v = 0;
      for (int64_t j = 0; j < d; j++) {
        double t = km_at(x, i, j) - km_at(cm, c, j);
        v += t * t;
      }
    }
    if (v < bv) {
      bv = v;
      bi = (int32_t)c;
    }
  }
  if (metric == L2SqrtExpanded) bv = sqrt(bv);
  *value = bv;
  return bi;
}

/* an inertia as the C++ code's DataT holds it */
static double km_datat(int bits, double v) { return bits == 32 ? (double)(float)v : v; }

/* ---- tensors ---- */

static int km_bits(const DLTensor* t)
{
  if (t->dtype.code == kDLFloat && t->dtype.bits == 32) return 32;
  if (t->dtype.code == kDLFloat && t->dtype.bits == 64) return 64;
  return 0;
}

static double* km_weights(const DLTensor* t, int bits, int64_t n)
{
  double* w = malloc((size_t)(n ? n : 1) * sizeof *w);
  for (int64_t i = 0; i < n; i++) {
    w[i] = bits == 64 ? ((const double*)t->data)[i] : ((const float*)t->data)[i];
  }
  return w;
}

static void km_store(void* dst, int bits, const double* src, int64_t n)
{
  for (int64_t i = 0; i < n; i++) {
    if (bits == 64) {
      ((double*)dst)[i] = src[i];
    } else {
      ((float*)dst)[i] = (float)src[i];
    }
  }
}

static cuvsError_t km_fit(const km_params* p, DLManagedTensor* X, DLManagedTensor* sw,
                          DLManagedTensor* centroids, double* inertia, int* n_iter)
{
  TRY(dl_check_ptr(X, "X"));
  int bits = km_bits(&X->dl_tensor);
  if (!bits) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d",
                     (int)X->dl_tensor.dtype.code, (int)X->dl_tensor.dtype.bits);
  }
  EXPECTS(inertia != NULL && n_iter != NULL, "cuvsdouble: NULL inertia or n_iter");
  const DLTensor* xt = &X->dl_tensor;
  km_mat x = {xt->data, bits, xt->ndim > 0 ? xt->shape[0] : 0, xt->ndim > 1 ? xt->shape[1] : 0};
  TRY(dl_check_ptr(centroids, "centroids"));
  const DLTensor* ct = &centroids->dl_tensor;
  double* w = NULL;
  if (!dl_dev_compat(xt)) {
    EXPECTS(!p->hierarchical, "hierarchical kmeans is not supported with host data");
    EXPECTS(dl_dev_compat(ct), "centroids must be on device memory");
    TRY(dl_view(centroids, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 2));
    if (sw) EXPECTS(dl_host_compat(&sw->dl_tensor), "sample_weight must be host accessible when X is on host");
  } else if (p->hierarchical) {
    EXPECTS(sw == NULL, "sample_weight cannot be used with hierarchical kmeans");
    EXPECTS(bits == 32, "float64 is an unsupported dtype for hierarchical kmeans");
    TRY(dl_view(X, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 2));
    TRY(dl_view(centroids, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 2));
    TRY(dl_strict(xt, "X"));
    TRY(dl_strict(ct, "centroids"));
    int64_t k = ct->shape[0], d = x.d;
    EXPECTS(ct->shape[1] == d, "Number of features in dataset and centroids are different");
    EXPECTS(k > 0 && k <= x.n,
            "The number of centroids must be strictly positive and cannot exceed the number of "
            "points in the training dataset.");
    int m = p->metric;
    if (m != L2Expanded && m != L2SqrtExpanded && m != CosineExpanded && m != InnerProduct) {
      return RAFT_FAIL("The chosen distance metric is not supported (%d)", m);
    }
    double* c = calloc((size_t)(k * d), sizeof *c);
    km_balanced(&x, m, k, p->hierarchical_n_iters, c);
    /* build_hierarchical's inertia: cluster_cost, squared L2 whatever the metric */
    double in = 0;
    for (int64_t i = 0; i < x.n; i++) {
      double b;
      km_nearest(L2Expanded, &x, i, c, k, d, &b);
      in += b;
    }
    km_store(ct->data, bits, c, k * d);
    free(c);
    *inertia = km_datat(bits, in);
    *n_iter = p->hierarchical_n_iters;
    return CUVS_SUCCESS;
  } else {
    TRY(dl_view(X, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 2));
    TRY(dl_strict(xt, "X"));
    if (sw) {
      TRY(dl_view(sw, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 1));
      TRY(dl_strict(&sw->dl_tensor, "sample_weight"));
    }
    TRY(dl_view(centroids, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 2));
  }
  TRY(dl_strict(ct, "centroids"));
  EXPECTS(p->metric == L2Expanded || p->metric == L2SqrtExpanded,
          "kmeans only supports L2Expanded or L2SqrtExpanded distance metrics.");
  if (sw) {
    EXPECTS(sw->dl_tensor.shape[0] == x.n, "invalid parameter (sample_weight!=n_samples)");
  }
  EXPECTS(p->n_clusters > 0, "invalid parameter (n_clusters<=0)");
  EXPECTS(p->tol > 0, "invalid parameter (tol<=0)");
  EXPECTS(p->oversampling >= 0, "invalid parameter (oversampling_factor<0)");
  EXPECTS(ct->shape[0] == p->n_clusters, "invalid parameter (centroids.extent(0) != n_clusters)");
  EXPECTS(ct->shape[1] == x.d, "invalid parameter (centroids.extent(1) != n_features)");
  int64_t n = x.n, d = x.d, k = p->n_clusters;
  EXPECTS(k <= n, "cuvsdouble: n_clusters (%lld) exceeds the %lld samples", (long long)k,
          (long long)n);
  if (sw) {
    w = km_weights(&sw->dl_tensor, bits, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += w[i];
    if (!(s > 0)) {
      free(w);
#if DBL_RELEASE < 2608
      if (dl_dev_compat(xt)) {
        dbl_violation("fit: device weights summing to %g (26.06 divides by it)", s);
      }
#endif
      return RAFT_FAIL("invalid parameter (sum of sample weights must be positive)");
    }
    for (int64_t i = 0; i < n; i++) w[i] *= (double)n / s;
  }
  double* c = malloc((size_t)(k * d) * sizeof *c);
  double* best = malloc((size_t)(k * d) * sizeof *best);
  double best_in = INFINITY;
  int best_it = 0;
  int runs = p->init == 2 ? 1 : (p->n_init > 0 ? p->n_init : 1);
  uint64_t rng = 0;
  for (int r = 0; r < runs; r++) {
    if (p->init == 2) {
      for (int64_t i = 0; i < k * d; i++) {
        c[i] = bits == 64 ? ((const double*)ct->data)[i] : ((const float*)ct->data)[i];
      }
    } else {
      km_seed(&x, w, p->init, k, &rng, c);
    }
    double in;
    int it = km_lloyd(&x, w, p->metric, k, p->max_iter, p->tol, c, &in);
    if (in < best_in || r == 0) {
      best_in = in;
      best_it = it;
      memcpy(best, c, (size_t)(k * d) * sizeof *c);
    }
  }
  km_store(ct->data, bits, best, k * d);
  free(c);
  free(best);
  free(w);
  *inertia = km_datat(bits, best_in);
  *n_iter = best_it;
  return CUVS_SUCCESS;
}

static cuvsError_t km_predict(const km_params* p, DLManagedTensor* X, DLManagedTensor* sw,
                              DLManagedTensor* centroids, DLManagedTensor* labels,
                              bool normalize, double* inertia)
{
  TRY(dl_check_ptr(X, "X"));
  int bits = km_bits(&X->dl_tensor);
  if (!bits) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d",
                     (int)X->dl_tensor.dtype.code, (int)X->dl_tensor.dtype.bits);
  }
  EXPECTS(inertia != NULL, "cuvsdouble: NULL inertia");
  EXPECTS(dl_dev_compat(&X->dl_tensor), "X dataset must be accessible on device memory");
  TRY(dl_check_ptr(centroids, "centroids"));
  TRY(dl_check_ptr(labels, "labels"));
  if (p->hierarchical) {
    EXPECTS(sw == NULL, "sample_weight cannot be used with hierarchical kmeans");
    EXPECTS(bits == 32, "float64 is an unsupported dtype for hierarchical kmeans");
  }
  TRY(dl_view(X, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 2));
  if (sw && !p->hierarchical) TRY(dl_view(sw, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 1));
  TRY(dl_view(centroids, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 2));
  TRY(dl_view(labels, LAYOUT_ROW, kDLInt, 32, WANT_DEVICE, 1));
  TRY(dl_strict(&X->dl_tensor, "X"));
  TRY(dl_strict(&centroids->dl_tensor, "centroids"));
  TRY(dl_strict(&labels->dl_tensor, "labels"));
  const DLTensor *xt = &X->dl_tensor, *ct = &centroids->dl_tensor, *lt = &labels->dl_tensor;
  km_mat x = {xt->data, bits, xt->shape[0], xt->shape[1]};
  int64_t k = ct->shape[0], d = x.d, n = x.n;
  int m = p->metric;
  if (p->hierarchical) {
    EXPECTS(n == lt->shape[0], "The number of rows in the dataset and labels must be the same");
    EXPECTS(ct->shape[1] == d, "The number of features in dataset and centroids must be the same");
    if (m != L2Expanded && m != L2SqrtExpanded && m != CosineExpanded && m != InnerProduct) {
      return RAFT_FAIL("The chosen distance metric is not supported (%d)", m);
    }
  } else {
    EXPECTS(m == L2Expanded || m == L2SqrtExpanded,
            "kmeans only supports L2Expanded or L2SqrtExpanded distance metrics.");
    if (sw) EXPECTS(sw->dl_tensor.shape[0] == n, "invalid parameter (sample_weight!=n_samples)");
    EXPECTS(p->n_clusters > 0, "invalid parameter (n_clusters<=0)");
    EXPECTS(p->tol > 0, "invalid parameter (tol<=0)");
    EXPECTS(p->oversampling >= 0, "invalid parameter (oversampling_factor<0)");
    EXPECTS(k == p->n_clusters, "invalid parameter (centroids.extent(0) != n_clusters)");
    EXPECTS(ct->shape[1] == d, "invalid parameter (centroids.extent(1) != n_features)");
    EXPECTS(lt->shape[0] == n, "invalid parameter (labels.extent(0) != n_samples)");
  }
  int32_t* lab = lt->data;
  if (p->hierarchical) {
    double* c = malloc((size_t)(k * d ? k * d : 1) * sizeof *c);
    for (int64_t i = 0; i < k * d; i++) {
      c[i] = bits == 64 ? ((const double*)ct->data)[i] : ((const float*)ct->data)[i];
    }
    for (int64_t i = 0; i < n; i++) lab[i] = km_nearest(m, &x, i, c, k, d, NULL);
    free(c);
    *inertia = 0;
    return CUVS_SUCCESS;
  }
  double* w = sw ? km_weights(&sw->dl_tensor, bits, n) : NULL;
  if (w && normalize) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += w[i];
    if (!(s > 0)) {
      free(w);
#if DBL_RELEASE < 2608
      dbl_violation("predict: normalize_weight with weights summing to %g (26.06 divides by it)", s);
#endif
      return RAFT_FAIL("invalid parameter (sum of sample weights must be positive)");
    }
    for (int64_t i = 0; i < n; i++) w[i] = km_datat(bits, w[i] * (double)n / s);
  }
  km_mat cm = {ct->data, bits, k, d};
  int tf32 = bits == 32 && dbl_unfused_tf32(n, k);
  double in = 0;
  for (int64_t i = 0; i < n; i++) {
    double b;
    lab[i] = km_assign(m, &x, i, &cm, tf32, &b);
    in += (w ? w[i] : 1) * b;
  }
  free(w);
  *inertia = km_datat(bits, in);
  return CUVS_SUCCESS;
}

static cuvsError_t km_cost(DLManagedTensor* X, DLManagedTensor* centroids, double* cost)
{
  TRY(dl_check_ptr(X, "X"));
  int bits = km_bits(&X->dl_tensor);
  if (!bits) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d",
                     (int)X->dl_tensor.dtype.code, (int)X->dl_tensor.dtype.bits);
  }
  EXPECTS(dl_dev_compat(&X->dl_tensor), "X dataset must be accessible on device memory");
  TRY(dl_check_ptr(centroids, "centroids"));
  TRY(dl_view(X, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 2));
  TRY(dl_view(centroids, LAYOUT_ROW, kDLFloat, bits, WANT_DEVICE, 2));
  TRY(dl_strict(&X->dl_tensor, "X"));
  TRY(dl_strict(&centroids->dl_tensor, "centroids"));
  EXPECTS(cost != NULL, "cuvsdouble: NULL cost");
  const DLTensor *xt = &X->dl_tensor, *ct = &centroids->dl_tensor;
  km_mat x = {xt->data, bits, xt->shape[0], xt->shape[1]};
  EXPECTS(ct->shape[1] == x.d, "cuvsdouble: centroids have %lld columns, X has %lld",
          (long long)ct->shape[1], (long long)x.d);
  int64_t k = ct->shape[0], d = x.d;
  double* c = malloc((size_t)(k * d ? k * d : 1) * sizeof *c);
  for (int64_t i = 0; i < k * d; i++) {
    c[i] = bits == 64 ? ((const double*)ct->data)[i] : ((const float*)ct->data)[i];
  }
  double s = 0;
  for (int64_t i = 0; i < x.n; i++) {
    double b;
    km_nearest(L2Expanded, &x, i, c, k, d, &b);
    s += b;
  }
  free(c);
  *cost = s;
  return CUVS_SUCCESS;
}

/* ---- params ---- */

#define KM_DEFAULTS(p)                  \
  do {                                  \
    (p)->metric = L2Expanded;           \
    (p)->n_clusters = 8;                \
    (p)->init = KMeansPlusPlus;         \
    (p)->max_iter = 300;                \
    (p)->tol = 1e-4;                    \
    (p)->n_init = 1;                    \
    (p)->oversampling_factor = 2.0;     \
    (p)->batch_samples = 1 << 15;       \
    (p)->batch_centroids = 0;           \
    (p)->hierarchical = false;          \
    (p)->hierarchical_n_iters = 20;     \
    (p)->init_size = 0;                 \
  } while (0)

DBL_API cuvsError_t cuvsKMeansParamsCreate(cuvsKMeansParams_t* params)
{
  DBL_ENTER(cuvsKMeansParamsCreate);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsKMeansParams* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  KM_DEFAULTS(p);
#if DBL_RELEASE >= 2608
  p->device_buffer_samples = 0;
#else
  p->inertia_check = false;
  p->streaming_batch_size = 0;
#endif
  dbl_reg_add(p, K_KMEANS_PARAMS, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsKMeansParamsDestroy(cuvsKMeansParams_t params)
{
  DBL_ENTER(cuvsKMeansParamsDestroy);
  return ivf_plain_destroy(params, K_KMEANS_PARAMS, "cuvsKMeansParams");
}

static void km_from_v1(const struct cuvsKMeansParams* p, km_params* out)
{
  KM_FILL(out, p);
#if DBL_RELEASE >= 2608
  out->buffer_samples = p->device_buffer_samples;
#else
  out->buffer_samples = p->streaming_batch_size;
#endif
}

DBL_API cuvsError_t cuvsKMeansFit(cuvsResources_t res, cuvsKMeansParams_t params,
                                  DLManagedTensor* X, DLManagedTensor* sample_weight,
                                  DLManagedTensor* centroids, double* inertia, int* n_iter)
{
  DBL_ENTER(cuvsKMeansFit);
  TRY(ivf_check_plain(params, K_KMEANS_PARAMS, "cuvsKMeansParams"));
  km_params p;
  km_from_v1(params, &p);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = km_fit(&p, X, sample_weight, centroids, inertia, n_iter);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, centroids, NULL);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsKMeansPredict(cuvsResources_t res, cuvsKMeansParams_t params,
                                      DLManagedTensor* X, DLManagedTensor* sample_weight,
                                      DLManagedTensor* centroids, DLManagedTensor* labels,
                                      bool normalize_weight, double* inertia)
{
  DBL_ENTER(cuvsKMeansPredict);
  TRY(ivf_check_plain(params, K_KMEANS_PARAMS, "cuvsKMeansParams"));
  km_params p;
  km_from_v1(params, &p);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = km_predict(&p, X, sample_weight, centroids, labels, normalize_weight, inertia);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, labels, NULL);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsKMeansClusterCost(cuvsResources_t res, DLManagedTensor* X,
                                          DLManagedTensor* centroids, double* cost)
{
  DBL_ENTER(cuvsKMeansClusterCost);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = km_cost(X, centroids, cost);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

#if DBL_RELEASE < 2608
DBL_API cuvsError_t cuvsKMeansParamsCreate_v2(cuvsKMeansParams_v2_t* params)
{
  DBL_ENTER(cuvsKMeansParamsCreate_v2);
  if (!params) {
    dbl_violation("NULL out-parameter (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  struct cuvsKMeansParams_v2* p = calloc(1, sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  KM_DEFAULTS(p);
  p->streaming_batch_size = 0;
  dbl_reg_add(p, K_KMEANS_PARAMS_V2, sizeof *p);
  *params = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsKMeansParamsDestroy_v2(cuvsKMeansParams_v2_t params)
{
  DBL_ENTER(cuvsKMeansParamsDestroy_v2);
  return ivf_plain_destroy(params, K_KMEANS_PARAMS_V2, "cuvsKMeansParams_v2");
}

static void km_from_v2(const struct cuvsKMeansParams_v2* p, km_params* out)
{
  KM_FILL(out, p);
  out->buffer_samples = p->streaming_batch_size;
}

DBL_API cuvsError_t cuvsKMeansFit_v2(cuvsResources_t res, cuvsKMeansParams_v2_t params,
                                     DLManagedTensor* X, DLManagedTensor* sample_weight,
                                     DLManagedTensor* centroids, double* inertia, int* n_iter)
{
  DBL_ENTER(cuvsKMeansFit_v2);
  TRY(ivf_check_plain(params, K_KMEANS_PARAMS_V2, "cuvsKMeansParams_v2"));
  km_params p;
  km_from_v2(params, &p);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = km_fit(&p, X, sample_weight, centroids, inertia, n_iter);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, centroids, NULL);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsKMeansPredict_v2(cuvsResources_t res, cuvsKMeansParams_v2_t params,
                                         DLManagedTensor* X, DLManagedTensor* sample_weight,
                                         DLManagedTensor* centroids, DLManagedTensor* labels,
                                         bool normalize_weight, double* inertia)
{
  DBL_ENTER(cuvsKMeansPredict_v2);
  TRY(ivf_check_plain(params, K_KMEANS_PARAMS_V2, "cuvsKMeansParams_v2"));
  km_params p;
  km_from_v2(params, &p);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = km_predict(&p, X, sample_weight, centroids, labels, normalize_weight, inertia);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, labels, NULL);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}
#endif
