/* cbench: the workload of examples/serving written in C with pthreads
 * against libcuvs_c's C API directly, the baseline the Go program is
 * measured against (run both with examples/serving/compare.sh).
 *
 * It builds a CAGRA index from uniform random float32 data (or, with -dtype
 * int8 or uint8, the same values scaled onto -128..127 or 0..255, as the Go
 * program's quantize), warms up with one
 * search, then for each thread count runs that many threads, each with its
 * own cuvsResources_t (own CUDA stream) and its own device queries, neighbors
 * and distances allocated before the clock starts, calling cuvsCagraSearch
 * then cuvsStreamSync in a loop for -seconds, and prints QPS and latency
 * percentiles per thread count. Flags, random data, histogram and output
 * format are those of the Go program, line for line.
 *
 * The library is opened at run time (dlopen, RTLD_NOW | RTLD_LOCAL, as the
 * Go bindings do), so the program builds with only gcc and libc, against the
 * bindings' generated declarations:
 *
 *   gcc -std=gnu11 -O2 -Igenerated internal/cbench/csrc/cbench.c -o build/cbench -pthread -ldl
 *
 * (make cbench). It speaks cuVS 26.06 and 26.08, the releases of the Go
 * bindings' window: it reads the library's release with cuvsVersionGet and
 * calls that release's cuvsCagraBuild (see build_index); it refuses any other
 * release, and, as the Go program does, the persistent kernel. When
 * the library is the ABI test double it also reports the double's violation
 * and leak counts, for the CI smoke test. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuvs_decls.h"

/* ---- the library ---- */

/* The releases this program speaks (major * 100 + minor), as cuvsVersionGet
 * reports them. They differ in what the program calls: 26.08's struct
 * cuvsCagraIndexParams has no compression member, and its cuvsCagraBuild
 * takes a cuvsDataset_t (made with cuvsDatasetMakePadded, a function 26.06
 * lacks) instead of a DLManagedTensor*. The declarations header names
 * 26.08's variants with a _v2608 suffix; a library of either release exports
 * its own under the plain C names. */
enum { RELEASE_2606 = 2606, RELEASE_2608 = 2608 };

/* The functions both releases export with the same C type (besides
 * cuvsGetLastErrorText and cuvsVersionGet, bound first). */
#define CUVS_FUNCS(X)                  \
  X(cuvsResourcesCreate)               \
  X(cuvsResourcesDestroy)              \
  X(cuvsStreamSync)                    \
  X(cuvsRMMAlloc)                      \
  X(cuvsRMMFree)                       \
  X(cuvsRMMPoolMemoryResourceEnable)   \
  X(cuvsMatrixCopy)                    \
  X(cuvsCagraSearchParamsCreate)       \
  X(cuvsCagraSearchParamsDestroy)      \
  X(cuvsCagraIndexCreate)              \
  X(cuvsCagraIndexDestroy)             \
  X(cuvsCagraSearch)

/* Each release's own: X(declaration, exported name), looked up only in a
 * library of that release (a 26.06 library has no cuvsDatasetMakePadded). */
#define CUVS_FUNCS_2606(X)                                        \
  X(cuvsCagraIndexParamsCreate, cuvsCagraIndexParamsCreate)       \
  X(cuvsCagraIndexParamsDestroy, cuvsCagraIndexParamsDestroy)     \
  X(cuvsCagraBuild, cuvsCagraBuild)
#define CUVS_FUNCS_2608(X)                                          \
  X(cuvsCagraIndexParamsCreate_v2608, cuvsCagraIndexParamsCreate)   \
  X(cuvsCagraIndexParamsDestroy_v2608, cuvsCagraIndexParamsDestroy) \
  X(cuvsCagraBuild_v2608, cuvsCagraBuild)                           \
  X(cuvsDatasetMakePadded, cuvsDatasetMakePadded)                   \
  X(cuvsDatasetDestroy, cuvsDatasetDestroy)

#define DECLARE_FN(f) static __typeof__(f)* p_##f;
#define DECLARE_FN2(f, sym) DECLARE_FN(f)
DECLARE_FN(cuvsGetLastErrorText)
DECLARE_FN(cuvsVersionGet)
CUVS_FUNCS(DECLARE_FN)
CUVS_FUNCS_2606(DECLARE_FN2)
CUVS_FUNCS_2608(DECLARE_FN2)
#undef DECLARE_FN2
#undef DECLARE_FN

/* The same memory pool safe.Load enables by default. */
enum { POOL_INITIAL_PERCENT = 10, POOL_MAX_PERCENT = 60 };

static void* g_lib;
static char g_lib_name[4096];
static int g_release; /* RELEASE_2606 or RELEASE_2608 */
static uint16_t g_major, g_minor, g_patch;

static bool try_open(const char* path, char* why, size_t cap)
{
  g_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (g_lib) {
    snprintf(g_lib_name, sizeof g_lib_name, "%s", path);
    return true;
  }
  const char* e = dlerror();
  size_t n = strlen(why);
  if (n < cap) snprintf(why + n, cap - n, "\n  %s: %s", path, e ? e : "dlopen failed");
  return false;
}

/* The address of an exported function of the library, or the end. */
static void* need(const char* name)
{
  void* f = dlsym(g_lib, name);
  if (!f) {
    fprintf(stderr, "cbench: %s does not export %s\n", g_lib_name, name);
    exit(1);
  }
  return f;
}

static void die_cuvs(const char* what);

/* Opens the library in the Go bindings' order: -lib, $CUVS_LIBRARY, the
 * loader's search for libcuvs_c.so(.1), then $CONDA_PREFIX/lib. Then reads
 * its release (cuvsVersionGet), refuses a release other than 26.06 and
 * 26.08, and binds the functions of both releases and of its own. */
static void open_library(const char* lib)
{
  char why[8192] = "";
  if (lib && *lib) {
    if (!try_open(lib, why, sizeof why)) goto fail;
  } else if (getenv("CUVS_LIBRARY") && *getenv("CUVS_LIBRARY")) {
    if (!try_open(getenv("CUVS_LIBRARY"), why, sizeof why)) goto fail;
  } else {
    const char* names[] = {"libcuvs_c.so", "libcuvs_c.so.1"};
    for (size_t i = 0; i < 2 && !g_lib; i++) try_open(names[i], why, sizeof why);
    const char* conda = getenv("CONDA_PREFIX");
    for (size_t i = 0; i < 2 && !g_lib && conda && *conda; i++) {
      char p[4096];
      snprintf(p, sizeof p, "%s/lib/%s", conda, names[i]);
      try_open(p, why, sizeof why);
    }
    if (!g_lib) goto fail;
  }
#define LOAD_FN2(f, sym) *(void**)&p_##f = need(#sym);
#define LOAD_FN(f) LOAD_FN2(f, f)
  LOAD_FN(cuvsGetLastErrorText)
  LOAD_FN(cuvsVersionGet)
  if (p_cuvsVersionGet(&g_major, &g_minor, &g_patch) != CUVS_SUCCESS) die_cuvs("cuvsVersionGet");
  if (g_major == 26 && g_minor == 6) {
    g_release = RELEASE_2606;
  } else if (g_major == 26 && g_minor == 8) {
    g_release = RELEASE_2608;
  } else {
    fprintf(stderr, "cbench: %s is cuVS %d.%02d.%02d; this program speaks cuVS 26.06 and 26.08\n", g_lib_name,
            g_major, g_minor, g_patch);
    exit(1);
  }
  CUVS_FUNCS(LOAD_FN)
  if (g_release == RELEASE_2606) {
    CUVS_FUNCS_2606(LOAD_FN2)
  } else {
    CUVS_FUNCS_2608(LOAD_FN2)
  }
#undef LOAD_FN
#undef LOAD_FN2
  return;
fail:
  fprintf(stderr, "cbench: cannot open libcuvs_c (give -lib or set CUVS_LIBRARY):%s\n", why);
  exit(1);
}

/* The first line of the library's last error text, read on this thread right
 * after the failing call (the text is thread-local). */
static void last_error(char* buf, size_t cap)
{
  const char* t = p_cuvsGetLastErrorText();
  if (!t || !*t) t = "(no error text)";
  size_t n = strcspn(t, "\n");
  if (n >= cap) n = cap - 1;
  memcpy(buf, t, n);
  buf[n] = 0;
}

static void die_cuvs(const char* what)
{
  char text[1024];
  last_error(text, sizeof text);
  fprintf(stderr, "cbench: %s: %s\n", what, text);
  exit(1);
}

#define CHECK(call)                                  \
  do {                                               \
    if ((call) != CUVS_SUCCESS) die_cuvs(#call);     \
  } while (0)

/* ---- flags ---- */

enum { MAX_STEPS = 64 };

typedef struct {
  int64_t n, dim;
  int goroutines[MAX_STEPS];
  int steps;
  double seconds;
  bool pool, persistent;
  int algo; /* enum cuvsCagraSearchAlgo: AUTO, SINGLE_CTA or MULTI_CTA */
  int block; /* thread_block_size (0: cuVS's choice) */
  int dtype; /* -dtype: DT_FLOAT32, DT_INT8 or DT_UINT8 */
  int k, itopk, graph_degree, batch;
  const char* lib;
  uint64_t seed;
} config;

/* -dtype: the element type of the index and the queries. */
enum { DT_FLOAT32, DT_INT8, DT_UINT8 };
static const char* const dtype_names[] = {"float32", "int8", "uint8"};

static config g_cfg;

static void usage(FILE* f)
{
  fprintf(f,
          "usage: cbench [flags]\n"
          "  -n rows             dataset rows (100000)\n"
          "  -dim d              dimension (128)\n"
          "  -goroutines list    thread counts, e.g. 1,8,32 (1,8,32)\n"
          "  -seconds s          seconds per step (5)\n"
          "  -pool on|off        device memory pool (on)\n"
          "  -k k                neighbors per query (10)\n"
          "  -itopk n            CAGRA itopk_size (64)\n"
          "  -graph-degree d     CAGRA graph degree (32)\n"
          "  -batch b            queries per search (1)\n"
          "  -persistent on|off  persistent search kernel (off)\n"
          "  -algo auto|single|multi  CAGRA search kernel (auto: cuVS picks by batch size)\n"
          "  -block b            CAGRA thread block size: 0 (cuVS picks), 64 .. 1024 (0)\n"
          "  -dtype t            element type: float32, int8 or uint8 (float32)\n"
          "  -seed s             random seed (42)\n"
          "  -lib path           libcuvs_c.so (else $CUVS_LIBRARY, the loader's search, "
          "$CONDA_PREFIX/lib)\n");
}

static void bad_flag(const char* fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "cbench: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  usage(stderr);
  exit(2);
}

static int64_t parse_int(const char* name, const char* v, int64_t min)
{
  char* end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < min) bad_flag("-%s: %s is not an integer >= %lld", name, v, (long long)min);
  return x;
}

static bool parse_onoff(const char* name, const char* v)
{
  if (!strcmp(v, "on")) return true;
  if (!strcmp(v, "off")) return false;
  bad_flag("-%s: %s, want on or off", name, v);
  return false;
}

static void parse_flags(int argc, char** argv, config* c)
{
  *c = (config){.n = 100000, .dim = 128, .goroutines = {1, 8, 32}, .steps = 3, .seconds = 5,
                .pool = true, .k = 10, .itopk = 64, .graph_degree = 32, .batch = 1, .seed = 42, .algo = AUTO};
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (a[0] != '-') bad_flag("unexpected argument %s", a);
    a += a[1] == '-' ? 2 : 1;
    if (!strcmp(a, "h") || !strcmp(a, "help")) {
      usage(stdout);
      exit(0);
    }
    char name[64];
    const char* v;
    const char* eq = strchr(a, '=');
    if (eq) {
      snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
      v = eq + 1;
    } else {
      snprintf(name, sizeof name, "%s", a);
      if (i + 1 >= argc) bad_flag("flag needs an argument: -%s", name);
      v = argv[++i];
    }
    if (!strcmp(name, "n")) {
      c->n = parse_int(name, v, 2);
    } else if (!strcmp(name, "dim")) {
      c->dim = parse_int(name, v, 1);
    } else if (!strcmp(name, "goroutines")) {
      c->steps = 0;
      const char* s = v;
      while (*s) {
        char num[32];
        size_t len = strcspn(s, ",");
        if (len == 0 || len >= sizeof num) bad_flag("-goroutines: bad list %s", v);
        memcpy(num, s, len);
        num[len] = 0;
        if (c->steps == MAX_STEPS) bad_flag("-goroutines: more than %d counts", MAX_STEPS);
        c->goroutines[c->steps++] = (int)parse_int(name, num, 1);
        s += len;
        if (*s == ',') s++;
      }
      if (c->steps == 0) bad_flag("-goroutines: empty list");
    } else if (!strcmp(name, "seconds")) {
      char* end;
      c->seconds = strtod(v, &end);
      if (end == v || *end || !(c->seconds > 0)) bad_flag("-seconds: %s is not a positive number", v);
    } else if (!strcmp(name, "pool")) {
      c->pool = parse_onoff(name, v);
    } else if (!strcmp(name, "persistent")) {
      c->persistent = parse_onoff(name, v);
    } else if (!strcmp(name, "algo")) {
      if (!strcmp(v, "auto")) {
        c->algo = AUTO;
      } else if (!strcmp(v, "single")) {
        c->algo = SINGLE_CTA;
      } else if (!strcmp(v, "multi")) {
        c->algo = MULTI_CTA;
      } else {
        bad_flag("-algo: %s, want auto, single or multi", v);
      }
    } else if (!strcmp(name, "block")) {
      c->block = (int)parse_int(name, v, 0);
      if (c->block && c->block != 64 && c->block != 128 && c->block != 256 && c->block != 512 && c->block != 1024) {
        bad_flag("-block: %s, want 0, 64, 128, 256, 512 or 1024", v);
      }
    } else if (!strcmp(name, "k")) {
      c->k = (int)parse_int(name, v, 1);
    } else if (!strcmp(name, "itopk")) {
      c->itopk = (int)parse_int(name, v, 1);
    } else if (!strcmp(name, "graph-degree")) {
      c->graph_degree = (int)parse_int(name, v, 1);
    } else if (!strcmp(name, "batch")) {
      c->batch = (int)parse_int(name, v, 1);
    } else if (!strcmp(name, "dtype")) {
      if (!strcmp(v, "float32")) {
        c->dtype = DT_FLOAT32;
      } else if (!strcmp(v, "int8")) {
        c->dtype = DT_INT8;
      } else if (!strcmp(v, "uint8")) {
        c->dtype = DT_UINT8;
      } else {
        bad_flag("-dtype: \"%s\", want float32, int8 or uint8", v);
      }
    } else if (!strcmp(name, "seed")) {
      c->seed = (uint64_t)parse_int(name, v, 0);
    } else if (!strcmp(name, "lib")) {
      c->lib = v;
    } else {
      bad_flag("flag provided but not defined: -%s", name);
    }
  }
  if (c->n <= 2 * (int64_t)c->graph_degree) {
    bad_flag("-n %lld: want more rows than twice -graph-degree (%d)", (long long)c->n, c->graph_degree);
  }
  if (c->k > c->n) bad_flag("-k %d exceeds -n %lld", c->k, (long long)c->n);
}

/* ---- random data and latency histogram: as examples/serving/hist.go ---- */

static uint64_t splitmix64(uint64_t* s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* The size in bytes of an element of -dtype. */
static size_t elem_size(void);

/* rows x dim values of -dtype from seed: uniform [0, 1) float32s, or those
 * scaled onto int8 (x*256 - 128) or uint8 (x*256), as quantize in serve.go. */
static void* random_matrix(uint64_t seed, int64_t rows, int64_t dim)
{
  void* out = malloc((size_t)(rows * dim) * elem_size());
  if (!out) {
    fprintf(stderr, "cbench: out of host memory\n");
    exit(1);
  }
  uint64_t s = seed;
  for (int64_t i = 0; i < rows * dim; i++) {
    float x = (float)(splitmix64(&s) >> 40) * (1.0f / 16777216.0f);
    switch (g_cfg.dtype) {
      case DT_INT8: ((int8_t*)out)[i] = (int8_t)((int)(x * 256) - 128); break;
      case DT_UINT8: ((uint8_t*)out)[i] = (uint8_t)(x * 256); break;
      default: ((float*)out)[i] = x;
    }
  }
  return out;
}

static uint64_t query_seed(uint64_t seed, int w) { return seed ^ (0x5851f42d4c957f2dULL * (uint64_t)(w + 1)); }

/* Query batches a worker cycles through: at most 4M floats of queries. */
static int query_batches(const config* c)
{
  int64_t nb = (INT64_C(1) << 22) / ((int64_t)c->batch * c->dim);
  return nb < 1 ? 1 : nb > 64 ? 64 : (int)nb;
}

#define HIST_SUB_BITS 7
#define HIST_SUB (1 << HIST_SUB_BITS)
#define HIST_BUCKETS ((64 - HIST_SUB_BITS - 1) * HIST_SUB + 2 * HIST_SUB)

static int hist_index(uint64_t ns)
{
  int shift = 0, len = ns ? 64 - __builtin_clzll(ns) : 0;
  if (len > HIST_SUB_BITS + 1) shift = len - (HIST_SUB_BITS + 1);
  return shift * HIST_SUB + (int)(ns >> shift);
}

static uint64_t hist_value(int i)
{
  int shift = i / HIST_SUB - 1;
  if (shift < 0) shift = 0;
  uint64_t low = (uint64_t)(i - shift * HIST_SUB) << shift;
  return low + ((UINT64_C(1) << shift) >> 1);
}

static uint64_t hist_count(const uint64_t* h)
{
  uint64_t n = 0;
  for (int i = 0; i < HIST_BUCKETS; i++) n += h[i];
  return n;
}

static double hist_percentile_us(const uint64_t* h, uint64_t pct)
{
  uint64_t n = hist_count(h), cum = 0;
  if (n == 0) return 0;
  uint64_t rank = (n * pct + 99) / 100;
  if (rank < 1) rank = 1;
  for (int i = 0; i < HIST_BUCKETS; i++) {
    cum += h[i];
    if (cum >= rank) return (double)hist_value(i) / 1e3;
  }
  return 0;
}

static double hist_max_us(const uint64_t* h)
{
  for (int i = HIST_BUCKETS - 1; i >= 0; i--) {
    if (h[i]) return (double)hist_value(i) / 1e3;
  }
  return 0;
}

static int64_t now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- tensors and device memory ---- */

static void matrix(DLManagedTensor* t, int64_t* shape, void* data, DLDeviceType dev, uint8_t code,
                   int64_t rows, int64_t cols)
{
  memset(t, 0, sizeof *t);
  shape[0] = rows;
  shape[1] = cols;
  t->dl_tensor.data = data;
  t->dl_tensor.device.device_type = dev;
  t->dl_tensor.ndim = 2;
  t->dl_tensor.dtype.code = code;
  t->dl_tensor.dtype.bits = 32;
  t->dl_tensor.dtype.lanes = 1;
  t->dl_tensor.shape = shape;
}

static size_t elem_size(void) { return g_cfg.dtype == DT_FLOAT32 ? sizeof(float) : 1; }

/* A matrix of -dtype elements. */
static void elems(DLManagedTensor* t, int64_t* shape, void* data, DLDeviceType dev, int64_t rows, int64_t cols)
{
  matrix(t, shape, data, dev, kDLFloat, rows, cols);
  if (g_cfg.dtype != DT_FLOAT32) {
    t->dl_tensor.dtype.code = g_cfg.dtype == DT_INT8 ? kDLInt : kDLUInt;
    t->dl_tensor.dtype.bits = 8;
  }
}

/* Device memory holding a copy of host (rows x cols of -dtype). */
static void* upload(cuvsResources_t res, const void* host, int64_t rows, int64_t cols)
{
  void* dev;
  CHECK(p_cuvsRMMAlloc(res, &dev, (size_t)(rows * cols) * elem_size()));
  DLManagedTensor src, dst;
  int64_t ss[2], ds[2];
  elems(&src, ss, (void*)host, kDLCPU, rows, cols);
  elems(&dst, ds, dev, kDLCUDA, rows, cols);
  CHECK(p_cuvsMatrixCopy(res, &src, &dst));
  CHECK(p_cuvsStreamSync(res));
  return dev;
}

/* ---- the workload ---- */

static cuvsCagraIndex_t g_index;
static cuvsDataset_t g_dataset; /* 26.08: the index's rows, destroyed after it */
static cuvsCagraSearchParams_t g_sp;
static int64_t g_start_ns, g_deadline_ns;
static pthread_barrier_t g_ready, g_go;

typedef struct {
  cuvsResources_t res;
  void* queries; /* device: nb batches of batch x dim, of -dtype */
  uint32_t* neighbors;
  float* distances;
  int nb;
  DLManagedTensor tq, tn, td;
  int64_t sq[2], sn[2], sd[2];
  uint64_t* hist;
  int64_t searches, end_ns;
  char err[1024];
} worker;

static void worker_setup(worker* w, int id)
{
  const config* c = &g_cfg;
  memset(w, 0, sizeof *w);
  CHECK(p_cuvsResourcesCreate(&w->res));
  w->nb = query_batches(c);
  void* host = random_matrix(query_seed(c->seed, id), (int64_t)w->nb * c->batch, c->dim);
  w->queries = upload(w->res, host, (int64_t)w->nb * c->batch, c->dim);
  free(host);
  CHECK(p_cuvsRMMAlloc(w->res, (void**)&w->neighbors, (size_t)c->batch * c->k * sizeof(uint32_t)));
  CHECK(p_cuvsRMMAlloc(w->res, (void**)&w->distances, (size_t)c->batch * c->k * sizeof(float)));
  elems(&w->tq, w->sq, w->queries, kDLCUDA, c->batch, c->dim);
  matrix(&w->tn, w->sn, w->neighbors, kDLCUDA, kDLUInt, c->batch, c->k);
  matrix(&w->td, w->sd, w->distances, kDLCUDA, kDLFloat, c->batch, c->k);
  w->hist = calloc(HIST_BUCKETS, sizeof(uint64_t));
  if (!w->hist) {
    fprintf(stderr, "cbench: out of host memory\n");
    exit(1);
  }
}

static void worker_teardown(worker* w)
{
  const config* c = &g_cfg;
  CHECK(p_cuvsRMMFree(w->res, w->queries, (size_t)((int64_t)w->nb * c->batch * c->dim) * elem_size()));
  CHECK(p_cuvsRMMFree(w->res, w->neighbors, (size_t)c->batch * c->k * sizeof(uint32_t)));
  CHECK(p_cuvsRMMFree(w->res, w->distances, (size_t)c->batch * c->k * sizeof(float)));
  CHECK(p_cuvsResourcesDestroy(w->res));
  free(w->hist);
}

static void* worker_main(void* arg)
{
  worker* w = arg;
  const cuvsFilter none = {.addr = 0, .type = NO_FILTER};
  const size_t stride = (size_t)g_cfg.batch * (size_t)g_cfg.dim;
  pthread_barrier_wait(&g_ready);
  pthread_barrier_wait(&g_go); /* g_start_ns and g_deadline_ns are set */
  int b = 0;
  int64_t t0 = now_ns(), t1 = t0;
  for (;;) {
    w->tq.dl_tensor.data = w->queries + (size_t)b * stride;
    if (++b == w->nb) b = 0;
    if (p_cuvsCagraSearch(w->res, g_sp, g_index, &w->tq, &w->tn, &w->td, none) != CUVS_SUCCESS) {
      last_error(w->err, sizeof w->err);
      break;
    }
    if (p_cuvsStreamSync(w->res) != CUVS_SUCCESS) {
      last_error(w->err, sizeof w->err);
      break;
    }
    t1 = now_ns();
    w->hist[hist_index((uint64_t)(t1 - t0))]++;
    w->searches++;
    if (t1 >= g_deadline_ns) break;
    t0 = t1;
  }
  w->end_ns = w->err[0] ? now_ns() : t1;
  return NULL;
}

static void step(int threads)
{
  const config* c = &g_cfg;
  worker* ws = calloc((size_t)threads, sizeof(worker));
  pthread_t* tids = calloc((size_t)threads, sizeof(pthread_t));
  if (!ws || !tids) {
    fprintf(stderr, "cbench: out of host memory\n");
    exit(1);
  }
  for (int i = 0; i < threads; i++) worker_setup(&ws[i], i);
  pthread_barrier_init(&g_ready, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&g_go, NULL, (unsigned)threads + 1);
  for (int i = 0; i < threads; i++) {
    int e = pthread_create(&tids[i], NULL, worker_main, &ws[i]);
    if (e) {
      fprintf(stderr, "cbench: pthread_create: %s\n", strerror(e));
      exit(1);
    }
  }
  pthread_barrier_wait(&g_ready);
  g_start_ns = now_ns();
  g_deadline_ns = g_start_ns + (int64_t)(c->seconds * 1e9);
  pthread_barrier_wait(&g_go);
  for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
  pthread_barrier_destroy(&g_ready);
  pthread_barrier_destroy(&g_go);

  uint64_t* all = calloc(HIST_BUCKETS, sizeof(uint64_t));
  if (!all) exit(1);
  int64_t searches = 0, end = g_start_ns;
  for (int i = 0; i < threads; i++) {
    if (ws[i].err[0]) {
      fprintf(stderr, "cbench: %d threads: thread %d: cuvsCagraSearch: %s\n", threads, i, ws[i].err);
      exit(1);
    }
    for (int j = 0; j < HIST_BUCKETS; j++) all[j] += ws[i].hist[j];
    searches += ws[i].searches;
    if (ws[i].end_ns > end) end = ws[i].end_ns;
  }
  double elapsed = (double)(end - g_start_ns) / 1e9;
  double qps = elapsed > 0 ? (double)searches * c->batch / elapsed : 0;
  printf("%10d %12.1f %10.1f %10.1f %10.1f %10" PRId64 "\n", threads, qps, hist_percentile_us(all, 50),
         hist_percentile_us(all, 99), hist_max_us(all), searches);
  fflush(stdout);
  free(all);
  for (int i = 0; i < threads; i++) worker_teardown(&ws[i]);
  free(ws);
  free(tids);
}

/* One search of batch all-zero queries, as cagra.(*Index).WarmUp does. */
static double warm_up(cuvsResources_t res)
{
  const config* c = &g_cfg;
  int64_t t0 = now_ns();
  void* zeros = calloc((size_t)(c->batch * c->dim), elem_size());
  if (!zeros) exit(1);
  void* q = upload(res, zeros, c->batch, c->dim);
  free(zeros);
  void *n, *d;
  CHECK(p_cuvsRMMAlloc(res, &n, (size_t)c->batch * c->k * sizeof(uint32_t)));
  CHECK(p_cuvsRMMAlloc(res, &d, (size_t)c->batch * c->k * sizeof(float)));
  DLManagedTensor tq, tn, td;
  int64_t sq[2], sn[2], sd[2];
  elems(&tq, sq, q, kDLCUDA, c->batch, c->dim);
  matrix(&tn, sn, n, kDLCUDA, kDLUInt, c->batch, c->k);
  matrix(&td, sd, d, kDLCUDA, kDLFloat, c->batch, c->k);
  const cuvsFilter none = {.addr = 0, .type = NO_FILTER};
  CHECK(p_cuvsCagraSearch(res, g_sp, g_index, &tq, &tn, &td, none));
  CHECK(p_cuvsStreamSync(res));
  CHECK(p_cuvsRMMFree(res, q, (size_t)(c->batch * c->dim) * elem_size()));
  CHECK(p_cuvsRMMFree(res, n, (size_t)c->batch * c->k * sizeof(uint32_t)));
  CHECK(p_cuvsRMMFree(res, d, (size_t)c->batch * c->k * sizeof(float)));
  return (double)(now_ns() - t0) / 1e9;
}

/* The index parameters, on either release's layout: L2, NN-Descent graph,
 * intermediate degree twice the final one. Create's graph_build_params (an
 * IVF-PQ object) is left in place, unread by NN-Descent; the caller hands
 * the params back to Destroy with build_algo as Create set it (IVF_PQ), so
 * Destroy frees what Create allocated. */
#define SET_INDEX_PARAMS(ip, c)                                     \
  do {                                                              \
    (ip)->metric = L2Expanded;                                      \
    (ip)->graph_degree = (size_t)(c)->graph_degree;                 \
    (ip)->intermediate_graph_degree = 2 * (size_t)(c)->graph_degree; \
    (ip)->build_algo = NN_DESCENT;                                  \
  } while (0)

/* Builds g_index from the host matrix data (n x dim) and returns the
 * seconds it took, the copy to the device included, as cagra.Build on
 * either release:
 *   - 26.06: cuvsCagraBuild from the host tensor (cuVS copies it);
 *   - 26.08: cuvsDatasetMakePadded copies the host rows into a padded
 *     device dataset that it owns, cuvsCagraBuild reads the index's rows
 *     from it, and the index refers to that dataset without owning it: the
 *     dataset is kept in g_dataset and destroyed after the index
 *     (cuvsCagraIndexDestroy, then cuvsDatasetDestroy). */
static double build_index(cuvsResources_t res, void* data)
{
  const config* c = &g_cfg;
  DLManagedTensor td;
  int64_t sd[2];
  elems(&td, sd, data, kDLCPU, c->n, c->dim);
  CHECK(p_cuvsCagraIndexCreate(&g_index));
  int64_t t0;
  double took;
  if (g_release == RELEASE_2608) {
    cuvsCagraIndexParams_t_v2608 ip;
    CHECK(p_cuvsCagraIndexParamsCreate_v2608(&ip));
    enum cuvsCagraGraphBuildAlgo created_algo = ip->build_algo;
    SET_INDEX_PARAMS(ip, c);
    t0 = now_ns();
    CHECK(p_cuvsDatasetMakePadded(res, &td, CUVS_DATASET_MEM_TYPE_DEVICE, &g_dataset));
    CHECK(p_cuvsCagraBuild_v2608(res, ip, g_dataset, g_index));
    CHECK(p_cuvsStreamSync(res));
    took = (double)(now_ns() - t0) / 1e9;
    ip->build_algo = created_algo;
    CHECK(p_cuvsCagraIndexParamsDestroy_v2608(ip));
  } else {
    cuvsCagraIndexParams_t ip;
    CHECK(p_cuvsCagraIndexParamsCreate(&ip));
    enum cuvsCagraGraphBuildAlgo created_algo = ip->build_algo;
    SET_INDEX_PARAMS(ip, c);
    t0 = now_ns();
    CHECK(p_cuvsCagraBuild(res, ip, &td, g_index));
    CHECK(p_cuvsStreamSync(res));
    took = (double)(now_ns() - t0) / 1e9;
    ip->build_algo = created_algo;
    CHECK(p_cuvsCagraIndexParamsDestroy(ip));
  }
  return took;
}

/* Destroys g_index, then (26.08) the dataset it referred to. */
static void destroy_index(void)
{
  CHECK(p_cuvsCagraIndexDestroy(g_index));
  if (g_dataset) CHECK(p_cuvsDatasetDestroy(g_dataset));
  g_index = NULL;
  g_dataset = NULL;
}

/* When the library is the ABI test double, its own account of misuse and
 * leaks (absent from the real library). */
static void report_double(void)
{
  int64_t (*violations)(void) = (int64_t(*)(void))dlsym(g_lib, "cuvsdouble_violation_count");
  int (*violation_copy)(int, char*, int) = (int (*)(int, char*, int))dlsym(g_lib, "cuvsdouble_violation_copy");
  int (*counters)(void) = (int (*)(void))dlsym(g_lib, "cuvsdouble_counter_count");
  int64_t (*counter)(int, int) = (int64_t(*)(int, int))dlsym(g_lib, "cuvsdouble_counter_get");
  if (!violations || !violation_copy || !counters || !counter) return;
  int64_t live = 0;
  for (int i = 0; i < counters(); i++) live += counter(i, 0) - counter(i, 1);
  int64_t nv = violations();
  printf("# cuvsdouble: %" PRId64 " violations, %" PRId64 " objects live at exit\n", nv, live);
  for (int i = 0; i < nv && i < 8; i++) {
    char buf[512];
    if (violation_copy(i, buf, sizeof buf) >= 0) printf("# cuvsdouble violation: %s\n", buf);
  }
}

int main(int argc, char** argv)
{
  parse_flags(argc, argv, &g_cfg);
  const config* c = &g_cfg;
  open_library(c->lib);
  if (c->persistent) {
    /* As the Go program (cagra.PersistentRefused says why). */
    fprintf(stderr,
            "cbench: -persistent on: the persistent kernel is refused (%s is %d.%02d.%02d): cuVS's one "
            "process-wide persistent kernel holds every multiprocessor, so the work cuVS queues on a caller's "
            "stream waits until it idles out: one search per 2 s on the real library (26.06 and 26.08), and a "
            "crash (SIGSEGV) on 26.08\n",
            g_lib_name, g_major, g_minor, g_patch);
    exit(1);
  }
  if (c->pool) CHECK(p_cuvsRMMPoolMemoryResourceEnable(POOL_INITIAL_PERCENT, POOL_MAX_PERCENT, false));
  char pool[128];
  if (c->pool) {
    snprintf(pool, sizeof pool, "on (%d%%..%d%% of device memory)", POOL_INITIAL_PERCENT, POOL_MAX_PERCENT);
  } else {
    snprintf(pool, sizeof pool, "off (cuVS's default memory resource)");
  }
  printf("# serving (c): cuVS %d.%02d.%02d from %s; memory pool %s\n", g_major, g_minor, g_patch, g_lib_name, pool);
  fflush(stdout);

  cuvsResources_t res;
  CHECK(p_cuvsResourcesCreate(&res));

  void* data = random_matrix(c->seed, c->n, c->dim);
  double build_s = build_index(res, data);
  free(data);
  static const char* const scales[] = {"", ", scaled onto -128..127", ", scaled onto 0..255"};
  printf("# index: CAGRA %" PRId64 " x %" PRId64
         " %s (uniform random, seed %" PRIu64 "%s), graph degree %d (intermediate %d, NN-Descent), built in %.2f s\n",
         c->n, c->dim, dtype_names[c->dtype], c->seed, scales[c->dtype], c->graph_degree, 2 * c->graph_degree, build_s);

  CHECK(p_cuvsCagraSearchParamsCreate(&g_sp));
  g_sp->itopk_size = (size_t)c->itopk;
  g_sp->algo = (enum cuvsCagraSearchAlgo)c->algo;
  g_sp->thread_block_size = (size_t)c->block;
  if (c->persistent) {
    g_sp->persistent = true;
    g_sp->algo = SINGLE_CTA;
  }
  printf("# search: k %d, itopk %d, batch %d, algo %s, block %d, persistent kernel %s, uint32 neighbors; search + stream sync per "
         "call, %.2f s per step\n",
         c->k, c->itopk, c->batch, c->algo == SINGLE_CTA ? "single" : c->algo == MULTI_CTA ? "multi" : "auto", c->block, c->persistent ? "on" : "off", c->seconds);
  printf("# warm-up (first search): %.3f s\n", warm_up(res));
  printf("%10s %12s %10s %10s %10s %10s\n", "goroutines", "QPS", "p50_us", "p99_us", "max_us", "searches");
  fflush(stdout);

  for (int i = 0; i < c->steps; i++) step(c->goroutines[i]);

  CHECK(p_cuvsCagraSearchParamsDestroy(g_sp));
  destroy_index();
  CHECK(p_cuvsResourcesDestroy(res));
  report_double();
  return 0;
}
