/*
 * cuvsdouble core: bookkeeping (counters, registry, violations, faults, the
 * thread-local error text), the cuvsdouble_* control functions, and the
 * functions of cuVS's core C API.
 *
 * REMINDER: no GPU. cuvsRMMAlloc is posix_memalign (256-byte aligned, filled
 * with 0xCD like uninitialised memory), cuvsRMMHostAlloc likewise, streams are
 * dummy values, cuvsStreamSync does nothing, cuvsMatrixCopy is memcpy.
 */
#include "dbl.h"

#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* names                                                                    */

static const char* const g_fn_names[F_COUNT] = {
#define DBL_X(name, kind) #name,
  DBL_FUNCS(DBL_X)
#undef DBL_X
};

static const char g_fn_kinds[F_COUNT] = {
#define DBL_X(name, kind) #kind[0],
  DBL_FUNCS(DBL_X)
#undef DBL_X
};

static const char* const g_kind_names[K_COUNT] = {
#define DBL_X(id, name) name,
  DBL_KINDS(DBL_X)
#undef DBL_X
};

/* ------------------------------------------------------------------------ */
/* global state                                                             */

static atomic_llong g_cnt[K_COUNT][2];
static atomic_llong g_calls[F_COUNT];

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* registry, faults, violations */

static atomic_int g_ver_major = DBL_VERSION_MAJOR, g_ver_minor = DBL_VERSION_MINOR,
                  g_ver_patch = DBL_VERSION_PATCH;
static atomic_int g_log_level = 2; /* CUVS_LOG_LEVEL_INFO: spdlog's default */
static atomic_int g_device_id = -1; /* >= 0: the id every new resources reports */
static atomic_int g_call_delay_us = 0;
static atomic_int g_call_jitter_us = 0; /* each call adds a random 0..jitter µs */
atomic_int dbl_strict_device = 0;
atomic_int dbl_instant = 0;

/* memory resource state (cuvsRMMPoolMemoryResourceEnable / Reset). RMM keeps
 * one current resource per device: each device has its generation, bumped
 * when its resource changes; the g_pool_* values are the last one set. */
static atomic_ullong g_mr_gen[DBL_MAX_DEVICES];
static atomic_int g_pool_on[DBL_MAX_DEVICES];
static atomic_int g_pool_enabled = 0, g_pool_initial = 0, g_pool_max = 0, g_pool_managed = 0;

static __thread const char* tls_fn = "cuvsdouble";
static __thread int tls_host_mr = 0; /* this thread called cuvsRMMHostAlloc */

/* fake CUDA devices: a count, and each thread's current device */
static atomic_int g_device_count = 1;
/* A thread's device counts only in the epoch it was set in: changing the
 * device count (or a reset) puts every thread back on device 0. */
static atomic_llong g_device_epoch = 1;
static __thread int tls_device_raw = 0;
static __thread long long tls_device_epoch = 0;
static atomic_llong g_cuda_calls[3]; /* cudaGetDeviceCount, cudaSetDevice, cudaGetDevice */

int dbl_current_device(void)
{
  return tls_device_epoch == atomic_load(&g_device_epoch) ? tls_device_raw : 0;
}
#define tls_device dbl_current_device()
int dbl_device_count(void) { return atomic_load(&g_device_count); }

void dbl_count(int kind, int released, int64_t n) { atomic_fetch_add(&g_cnt[kind][released], n); }

/* ------------------------------------------------------------------------ */
/* registry: open addressing on the pointer value, linear probing,          */
/* backward-shift deletion. Guarded by g_mu.                                */

static dbl_entry* g_tab = NULL;
static size_t g_tab_cap = 0, g_tab_len = 0;
static uint64_t g_next_id = 1;

static size_t reg_hash(const void* p, size_t cap)
{
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)(x & (cap - 1));
}

static size_t reg_slot(const void* p)
{
  size_t i = reg_hash(p, g_tab_cap);
  while (g_tab[i].p != NULL && g_tab[i].p != p) {
    i = (i + 1) & (g_tab_cap - 1);
  }
  return i;
}

static int reg_grow(void)
{
  size_t ncap = g_tab_cap ? g_tab_cap * 2 : 256;
  dbl_entry* old = g_tab;
  size_t ocap = g_tab_cap;
  dbl_entry* nt = calloc(ncap, sizeof(dbl_entry));
  if (!nt) return -1;
  g_tab = nt;
  g_tab_cap = ncap;
  for (size_t i = 0; i < ocap; i++) {
    if (old[i].p) { g_tab[reg_slot(old[i].p)] = old[i]; }
  }
  free(old);
  return 0;
}

uint64_t dbl_reg_add(void* p, int kind, size_t size)
{
  pthread_mutex_lock(&g_mu);
  if ((g_tab_len + 1) * 2 > g_tab_cap && reg_grow() != 0) {
    pthread_mutex_unlock(&g_mu);
    fprintf(stderr, "cuvsdouble: out of memory in the registry\n");
    abort();
  }
  size_t i = reg_slot(p);
  uint64_t id = g_next_id++;
  if (g_tab[i].p == NULL) g_tab_len++;
  g_tab[i] = (dbl_entry){.p = p,
                         .kind = kind,
                         .size = size,
                         .id = id,
                         .mr_gen = atomic_load(&g_mr_gen[tls_device]),
                         .borrows = 0,
                         .device = tls_device};
  pthread_mutex_unlock(&g_mu);
  dbl_count(kind, 0, 1);
  if (kind == K_RMM) dbl_count(K_RMM_BYTES, 0, (int64_t)size);
  if (kind == K_HOST) dbl_count(K_HOST_BYTES, 0, (int64_t)size);
  return id;
}

int dbl_reg_find(const void* p, dbl_entry* out)
{
  int kind = -1;
  if (p == NULL) return -1;
  pthread_mutex_lock(&g_mu);
  if (g_tab_cap) {
    size_t i = reg_slot(p);
    if (g_tab[i].p == p) {
      kind = g_tab[i].kind;
      if (out) *out = g_tab[i];
    }
  }
  pthread_mutex_unlock(&g_mu);
  return kind;
}

int dbl_reg_remove(void* p, int kind, dbl_entry* out, int* actual_kind)
{
  if (p == NULL) return -1;
  pthread_mutex_lock(&g_mu);
  if (!g_tab_cap) {
    pthread_mutex_unlock(&g_mu);
    return -1;
  }
  size_t i = reg_slot(p);
  if (g_tab[i].p != p) {
    pthread_mutex_unlock(&g_mu);
    return -1;
  }
  if (g_tab[i].kind != kind) {
    if (actual_kind) *actual_kind = g_tab[i].kind;
    pthread_mutex_unlock(&g_mu);
    return -2;
  }
  dbl_entry e = g_tab[i];
  if (out) *out = e;
  /* backward-shift deletion */
  size_t j = i;
  for (;;) {
    g_tab[i].p = NULL;
    for (;;) {
      j = (j + 1) & (g_tab_cap - 1);
      if (g_tab[j].p == NULL) goto done;
      size_t h = reg_hash(g_tab[j].p, g_tab_cap);
      /* move j to i if h is cyclically outside (i, j] */
      if ((i <= j) ? (i < h && h <= j) : (i < h || h <= j)) continue;
      break;
    }
    g_tab[i] = g_tab[j];
    i = j;
  }
done:
  g_tab_len--;
  pthread_mutex_unlock(&g_mu);
  dbl_count(kind, 1, 1);
  if (kind == K_RMM) dbl_count(K_RMM_BYTES, 1, (int64_t)e.size);
  if (kind == K_HOST) dbl_count(K_HOST_BYTES, 1, (int64_t)e.size);
  return 0;
}

int dbl_reg_containing(const void* p, size_t n, dbl_entry* out)
{
  int found = 0;
  uintptr_t a = (uintptr_t)p;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_tab_cap; i++) {
    dbl_entry* e = &g_tab[i];
    if (!e->p || (e->kind != K_RMM && e->kind != K_HOST DBL_R2608(&&e->kind != K_DATASET_STORAGE)))
      continue;
    uintptr_t b = (uintptr_t)e->p;
    if (a >= b && a + n <= b + e->size) {
      if (out) *out = *e;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return found;
}

static dbl_entry* reg_by_id_locked(uint64_t id)
{
  for (size_t i = 0; i < g_tab_cap; i++) {
    if (g_tab[i].p && g_tab[i].id == id) return &g_tab[i];
  }
  return NULL;
}

void dbl_reg_borrow(uint64_t id, int delta)
{
  if (id == 0) return;
  pthread_mutex_lock(&g_mu);
  dbl_entry* e = reg_by_id_locked(id);
  if (e) e->borrows += delta;
  pthread_mutex_unlock(&g_mu);
}

int dbl_reg_id_live(uint64_t id)
{
  pthread_mutex_lock(&g_mu);
  int live = reg_by_id_locked(id) != NULL;
  pthread_mutex_unlock(&g_mu);
  return live;
}

/* ------------------------------------------------------------------------ */
/* violations                                                               */

#define DBL_MAX_VIOLATIONS 64
static char* g_viol[DBL_MAX_VIOLATIONS];
static int64_t g_viol_total = 0;

void dbl_violation(const char* fmt, ...)
{
  char msg[1024];
  int n = snprintf(msg, sizeof msg, "%s: ", tls_fn);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g_mu);
  if (g_viol_total < DBL_MAX_VIOLATIONS) { g_viol[g_viol_total] = strdup(msg); }
  g_viol_total++;
  pthread_mutex_unlock(&g_mu);
  if (getenv("CUVSDOUBLE_ABORT_ON_VIOLATION")) {
    fprintf(stderr, "cuvsdouble violation: %s\n", msg);
    abort();
  }
}

/* ------------------------------------------------------------------------ */
/* counted buffers and tensor metadata                                      */

void* dbl_buf_alloc(size_t bytes)
{
  void* p = malloc(bytes ? bytes : 1);
  if (!p) return NULL;
  dbl_count(K_BUFFER, 0, 1);
  dbl_count(K_BUFFER_BYTES, 0, (int64_t)bytes);
  return p;
}

void dbl_buf_free(void* p, size_t bytes)
{
  if (!p) return;
  free(p);
  dbl_count(K_BUFFER, 1, 1);
  dbl_count(K_BUFFER_BYTES, 1, (int64_t)bytes);
}

int64_t* dbl_meta_alloc(int n)
{
  int64_t* p = calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
  if (!p) return NULL;
  dbl_reg_add(p, K_META, (size_t)n * sizeof(int64_t));
  return p;
}

static void meta_free(int64_t* p, const char* what)
{
  if (!p) return;
  int actual = -1;
  int rc = dbl_reg_remove(p, K_META, NULL, &actual);
  if (rc == 0) {
    free(p);
  } else {
    dbl_violation(
      "DLManagedTensor deleter frees a %s array the library did not allocate, or frees it twice "
      "(the real deleter would delete[] it: undefined behaviour)",
      what);
  }
}

/* The deleter put on tensors whose shape/strides the library allocates
 * (cuvsMatrixSliceRows, cuvsCagraIndexGetDataset/GetGraph). Like cuVS's, it
 * frees only those arrays; it nulls them so a second call is harmless here
 * (the real one after GetDataset/GetGraph does not). */
void dbl_meta_deleter(DLManagedTensor* t)
{
  tls_fn = "DLManagedTensor deleter";
  if (!t) return;
  meta_free(t->dl_tensor.shape, "shape");
  t->dl_tensor.shape = NULL;
  meta_free(t->dl_tensor.strides, "strides");
  t->dl_tensor.strides = NULL;
}

/* ------------------------------------------------------------------------ */
/* thread-local error text                                                  */

static pthread_key_t g_err_key;
static pthread_once_t g_err_once = PTHREAD_ONCE_INIT;
static __thread char* tls_err = NULL;

static void err_key_init(void) { pthread_key_create(&g_err_key, free); }

void dbl_set_error(const char* text)
{
  pthread_once(&g_err_once, err_key_init);
  char* old = tls_err;
  tls_err = (text && *text) ? strdup(text) : NULL;
  pthread_setspecific(g_err_key, tls_err);
  free(old);
}

cuvsError_t dbl_ok(void)
{
  dbl_set_error(NULL);
  return CUVS_SUCCESS;
}

/* A fabricated, deterministic stack-trace block in raft::exception's shape. */
static void add_frames(char* buf, size_t cap)
{
  size_t n = strlen(buf);
  snprintf(buf + n,
           cap - n,
           "\nObtained 3 stack frames\n"
           "#0 in libcuvs_c.so(cuvsdouble_raise+0x1d) [0x7f00000011d0]\n"
           "#1 in libcuvs_c.so(%s+0x42) [0x7f0000002420]\n"
           "#2 in cuvsdouble-caller(+0x0) [0x400000]\n",
           tls_fn);
}

static cuvsError_t fail_v(const char* prefix, const char* file, int line, const char* fmt,
                          va_list ap, int frames)
{
  char buf[4096];
  int n = 0;
  if (prefix) n = snprintf(buf, sizeof buf, "%sfile=%s line=%d: ", prefix, file, line);
  vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  if (frames) add_frames(buf, sizeof buf);
  dbl_set_error(buf);
  return CUVS_ERROR;
}

cuvsError_t dbl_raft_fail(const char* file, int line, const char* fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cuvsError_t st = fail_v("RAFT failure at ", file, line, fmt, ap, 1);
  va_end(ap);
  return st;
}

cuvsError_t dbl_throw_fail(const char* file, int line, const char* fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cuvsError_t st = fail_v("exception occurred! ", file, line, fmt, ap, 1);
  va_end(ap);
  return st;
}

cuvsError_t dbl_plain_fail(const char* fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cuvsError_t st = fail_v(NULL, NULL, 0, fmt, ap, 0);
  va_end(ap);
  return st;
}

/* ------------------------------------------------------------------------ */
/* fault injection                                                          */

#define DBL_MAX_FAULTS 32
typedef struct {
  int fn; /* -1: any function returning cuvsError_t */
  int64_t skip;
  int64_t count; /* < 0: forever */
  char* text;
  int raw;
} dbl_fault;

static dbl_fault g_faults[DBL_MAX_FAULTS];
static atomic_int g_nfaults = 0;
static atomic_llong g_fault_hits = 0;

int dbl_enter(int fn)
{
  tls_fn = g_fn_names[fn];
  atomic_fetch_add(&g_calls[fn], 1);
  if (atomic_load(&g_nfaults) == 0) return 0;
  char* text = NULL;
  int raw = 0, fire = 0;
  pthread_mutex_lock(&g_mu);
  int n = atomic_load(&g_nfaults);
  for (int i = 0; i < n; i++) {
    dbl_fault* f = &g_faults[i];
    if (f->fn != fn && f->fn != -1) continue;
    if (f->skip > 0) {
      f->skip--;
      continue;
    }
    if (fire) continue;
    fire = 1;
    raw = f->raw;
    text = f->text ? strdup(f->text) : NULL;
    if (f->count > 0) f->count--;
    if (f->count == 0) { /* spent: remove */
      free(f->text);
      g_faults[i] = g_faults[n - 1];
      memset(&g_faults[n - 1], 0, sizeof(dbl_fault));
      n--;
      atomic_store(&g_nfaults, n);
      i--;
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (!fire) return 0;
  atomic_fetch_add(&g_fault_hits, 1);
  if (raw) {
    dbl_set_error(text);
  } else {
    dbl_raft_fail("cuvsdouble_fault.c", 1, "%s", text ? text : "");
  }
  free(text);
  return 1;
}

/* ------------------------------------------------------------------------ */
/* resources                                                                */

#define RES_MAGIC 0x5245534f55524345ULL /* "RESOURCE" */

/* A raft::cuda_error's text: "CUDA error encountered at: file=F line=L:
 * call='C', Reason=NAME:TEXT" (RAFT_CUDA_TRY's format). */
static cuvsError_t dbl_cuda_fail(const char* call, int code, const char* name, const char* text)
{
  (void)code;
  char buf[512];
  snprintf(buf, sizeof buf, "CUDA error encountered at: file=%s line=%d: call='%s', Reason=%s:%s",
           __FILE_NAME__, __LINE__, call, name, text);
  return dbl_plain_fail("%s", buf);
}

cuvsError_t dbl_res_acquire(cuvsResources_t res, dbl_res** out)
{
  dbl_res* r = (dbl_res*)res;
  int kind = dbl_reg_find(r, NULL);
  if (kind != K_RES && kind != K_MGRES) {
    dbl_violation("invalid or destroyed cuvsResources_t %#lx (the real library would crash)",
                  (unsigned long)res);
    return RAFT_FAIL("cuvsdouble: invalid cuvsResources_t %#lx", (unsigned long)res);
  }
  if (!r->multi && atomic_load(&g_device_count) > 1 && r->device_id != tls_device) {
    /* The real library would queue work for device r->device_id on the
     * current device's context, with memory from the current device's
     * resource: wrong results or cudaErrorIllegalAddress, not this error. */
    dbl_violation("cuvsResources_t of device %d used with device %d current on the calling thread "
                  "(cudaSetDevice(%d) missing)",
                  r->device_id, tls_device, r->device_id);
    return dbl_cuda_fail("cudaGetDevice", 201, "cudaErrorDeviceUninitialized",
                         "invalid device context");
  }
  if (atomic_exchange(&r->busy, 1) != 0) {
    dbl_violation("one cuvsResources_t used by two threads at the same time");
  }
  int d = atomic_load(&g_call_delay_us);
  int j = atomic_load(&g_call_jitter_us);
  if (j > 0) {
    static __thread unsigned seed;
    if (seed == 0) seed = (unsigned)(uintptr_t)&seed | 1u;
    d += (int)(rand_r(&seed) % (unsigned)(j + 1));
  }
  if (d > 0) usleep((useconds_t)d);
  /* Work queued on this stream before is done before this call's. */
  dbl_stream_flush(r->stream);
  *out = r;
  return CUVS_SUCCESS;
}

void dbl_res_release(dbl_res* r)
{
  if (r) atomic_store(&r->busy, 0);
}

static cuvsError_t res_create(cuvsResources_t* res, int multi)
{
  if (!res) {
    dbl_violation("NULL cuvsResources_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  dbl_res* r = calloc(1, sizeof(dbl_res));
  if (!r) return dbl_plain_fail("std::bad_alloc");
  r->magic = RES_MAGIC;
  r->multi = multi;
  int fixed = atomic_load(&g_device_id);
  r->device_id = fixed >= 0 ? fixed : tls_device;
  r->stream = DBL_STREAM_PER_THREAD;
  r->reg_id = dbl_reg_add(r, multi ? K_MGRES : K_RES, sizeof(dbl_res));
  *res = (cuvsResources_t)(uintptr_t)r;
  return dbl_ok();
}

static cuvsError_t res_destroy(cuvsResources_t res, int multi)
{
  dbl_res* r = (dbl_res*)res;
  int actual = -1;
  int rc = dbl_reg_remove(r, multi ? K_MGRES : K_RES, NULL, &actual);
  if (rc == -2 && (actual == K_RES || actual == K_MGRES)) {
    dbl_violation("%s destroys a %s handle", multi ? "cuvsMultiGpuResourcesDestroy" : "cuvsResourcesDestroy",
                  actual == K_MGRES ? "multi-GPU resources" : "single-GPU resources");
    rc = dbl_reg_remove(r, actual, NULL, NULL);
  }
  if (rc != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsResources_t %#lx",
                  (unsigned long)res);
    return RAFT_FAIL("cuvsdouble: invalid cuvsResources_t %#lx", (unsigned long)res);
  }
  if (atomic_load(&r->busy)) { dbl_violation("cuvsResources_t destroyed while another thread uses it"); }
  if (!multi && atomic_load(&g_device_count) > 1 && r->device_id != tls_device) {
    /* The real destructor frees the handle's streams and scratch memory
     * through the current device: recorded, and destroyed all the same. */
    dbl_violation("cuvsResources_t of device %d destroyed with device %d current", r->device_id,
                  tls_device);
  }
  r->magic = 0;
  free(r);
  return dbl_ok();
}

/* Which index handles hold memory of which cuvsResources_t (dbl.h). */
typedef struct {
  const void* owner;
  uint64_t res_id;
} res_use;
static res_use* g_uses;
static size_t g_nuses, g_cap_uses;
static pthread_mutex_t g_uses_mu = PTHREAD_MUTEX_INITIALIZER;

void dbl_res_used_by(dbl_res* r, const void* owner)
{
  if (!r || !owner) return;
  pthread_mutex_lock(&g_uses_mu);
  for (size_t i = 0; i < g_nuses; i++) {
    if (g_uses[i].owner == owner && g_uses[i].res_id == r->reg_id) {
      pthread_mutex_unlock(&g_uses_mu);
      return;
    }
  }
  if (g_nuses == g_cap_uses) {
    size_t cap  = g_cap_uses ? 2 * g_cap_uses : 64;
    res_use* nu = realloc(g_uses, cap * sizeof *nu);
    if (!nu) {
      pthread_mutex_unlock(&g_uses_mu);
      return;
    }
    g_uses     = nu;
    g_cap_uses = cap;
  }
  g_uses[g_nuses++] = (res_use){owner, r->reg_id};
  pthread_mutex_unlock(&g_uses_mu);
}

static void owner_forget(const void* owner, const char* fn)
{
  pthread_mutex_lock(&g_uses_mu);
  for (size_t i = 0; i < g_nuses;) {
    if (g_uses[i].owner != owner) {
      i++;
      continue;
    }
    if (fn && !dbl_reg_id_live(g_uses[i].res_id)) {
      dbl_violation("%s of an index whose memory was allocated on a cuvsResources_t destroyed "
                    "before it (the real library frees it on that handle's stream and memory "
                    "resource: SIGSEGV)",
                    fn);
    }
    g_uses[i] = g_uses[--g_nuses];
  }
  pthread_mutex_unlock(&g_uses_mu);
}

void dbl_res_owner_destroy(const void* owner, const char* fn) { owner_forget(owner, fn); }

void dbl_res_owner_reset(const void* owner) { owner_forget(owner, NULL); }

DBL_API cuvsError_t cuvsResourcesCreate(cuvsResources_t* res)
{
  DBL_ENTER(cuvsResourcesCreate);
  return res_create(res, 0);
}

DBL_API cuvsError_t cuvsResourcesDestroy(cuvsResources_t res)
{
  DBL_ENTER(cuvsResourcesDestroy);
  return res_destroy(res, 0);
}

DBL_API cuvsError_t cuvsMultiGpuResourcesCreate(cuvsResources_t* res)
{
  DBL_ENTER(cuvsMultiGpuResourcesCreate);
  TRY(res_create(res, 1));
  /* raft::device_resources_snmg(): every visible device, one rank each */
  dbl_res* r = (dbl_res*)*res;
  r->n_ranks = atomic_load(&g_device_count);
  for (int i = 0; i < r->n_ranks; i++) r->rank_device[i] = i;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsMultiGpuResourcesCreateWithDeviceIds(cuvsResources_t* res,
                                                             DLManagedTensor* device_ids)
{
  DBL_ENTER(cuvsMultiGpuResourcesCreateWithDeviceIds);
  if (device_ids == NULL || device_ids->dl_tensor.data == NULL) {
    return dbl_plain_fail("device_ids cannot be null");
  }
  if (device_ids->dl_tensor.dtype.code != kDLInt || device_ids->dl_tensor.dtype.bits != 32) {
    return dbl_plain_fail("device_ids must be int32");
  }
  if (device_ids->dl_tensor.device.device_type != kDLCPU) {
    return dbl_plain_fail("device_ids must be on host memory");
  }
  /* cuVS reads shape[0] ids whatever the rank; raft's constructor sets each
   * device (RAFT_CUDA_TRY) and makes an NCCL clique of them */
  int64_t n = device_ids->dl_tensor.ndim > 0 ? device_ids->dl_tensor.shape[0] : 0;
  const int* ids = (const int*)device_ids->dl_tensor.data;
  if (n > DBL_MAX_DEVICES) return dbl_plain_fail("ncclInvalidUsage: too many devices");
  for (int64_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= atomic_load(&g_device_count)) {
      return dbl_cuda_fail("cudaSetDevice(dev_id)", 101, "cudaErrorInvalidDevice",
                           "invalid device ordinal");
    }
    for (int64_t j = 0; j < i; j++) {
      if (ids[j] == ids[i]) {
        /* what NCCL does with a device twice in one clique is not known: the
         * double refuses */
        return dbl_plain_fail("cuvsdouble: device %d listed twice (NCCL clique)", ids[i]);
      }
    }
  }
  if (n == 0) return dbl_plain_fail("cuvsdouble: an empty device list (NCCL clique of none)");
  TRY(res_create(res, 1));
  dbl_res* r = (dbl_res*)*res;
  r->n_ranks = (int)n;
  for (int64_t i = 0; i < n; i++) r->rank_device[i] = ids[i];
  r->device_id = ids[0];
  return dbl_ok();
}

DBL_API cuvsError_t cuvsMultiGpuResourcesDestroy(cuvsResources_t res)
{
  DBL_ENTER(cuvsMultiGpuResourcesDestroy);
  return res_destroy(res, 1);
}

DBL_API cuvsError_t cuvsMultiGpuResourcesSetMemoryPool(cuvsResources_t res,
                                                       int percent_of_free_memory)
{
  DBL_ENTER(cuvsMultiGpuResourcesSetMemoryPool);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = CUVS_SUCCESS;
  if (!r->multi) {
    dbl_violation("cuvsMultiGpuResourcesSetMemoryPool on single-GPU resources (the real library "
                  "reinterprets the handle: undefined behaviour)");
    st = RAFT_FAIL("cuvsdouble: not a multi-GPU resources handle");
  } else if (percent_of_free_memory <= 0 || percent_of_free_memory > 100) {
    st = RAFT_FAIL("Error: percent_of_free_memory must be in (0, 100], got %d",
                   percent_of_free_memory);
  }
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsStreamSet(cuvsResources_t res, cudaStream_t stream)
{
  DBL_ENTER(cuvsStreamSet);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  r->stream = stream;
  dbl_res_release(r);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsStreamGet(cuvsResources_t res, cudaStream_t* stream)
{
  DBL_ENTER(cuvsStreamGet);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  if (!stream) {
    dbl_res_release(r);
    dbl_violation("NULL cudaStream_t* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  *stream = r->stream;
  dbl_res_release(r);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsStreamSync(cuvsResources_t res)
{
  DBL_ENTER(cuvsStreamSync);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r)); /* which completes the work queued on r's stream */
  dbl_res_release(r);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsDeviceIdGet(cuvsResources_t res, int* device_id)
{
  DBL_ENTER(cuvsDeviceIdGet);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  if (!device_id) {
    dbl_res_release(r);
    dbl_violation("NULL int* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  *device_id = r->device_id;
  dbl_res_release(r);
  return dbl_ok();
}

/* ------------------------------------------------------------------------ */
/* memory: "device" memory is host memory                                   */

static void* aligned_alloc_fill(size_t bytes)
{
  void* p = NULL;
  if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) return NULL;
  memset(p, 0xCD, bytes);
  return p;
}

DBL_API cuvsError_t cuvsRMMAlloc(cuvsResources_t res, void** ptr, size_t bytes)
{
  DBL_ENTER(cuvsRMMAlloc);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_release(r);
  if (!ptr) {
    dbl_violation("NULL void** (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  if (bytes == 0) { /* cudaMalloc(0) gives a null pointer */
    *ptr = NULL;
    dbl_count(K_RMM, 0, 1);
    return dbl_ok();
  }
  dbl_dev_block blk;
  TRY(dbl_dev_take(bytes, &blk)); /* the device's size, or the pool's maximum */
  void* p = aligned_alloc_fill(bytes);
  if (!p) {
    dbl_dev_give(&blk);
    return dbl_plain_fail("std::bad_alloc: out_of_memory: failed to allocate %zu bytes", bytes);
  }
  dbl_reg_add(p, K_RMM, bytes);
  pthread_mutex_lock(&g_mu);
  g_tab[reg_slot(p)].blk = blk;
  pthread_mutex_unlock(&g_mu);
  *ptr = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsRMMFree(cuvsResources_t res, void* ptr, size_t bytes)
{
  DBL_ENTER(cuvsRMMFree);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_release(r);
  if (ptr == NULL) {
    if (bytes != 0) { dbl_violation("cuvsRMMFree(NULL, %zu)", bytes); }
    dbl_count(K_RMM, 1, 1);
    return dbl_ok();
  }
  dbl_stream_flush_all(); /* no queued write may outlive its buffer */
  dbl_entry e;
  int actual = -1;
  int rc = dbl_reg_remove(ptr, K_RMM, &e, &actual);
  if (rc != 0) {
    dbl_violation("cuvsRMMFree of %p, which is not a live cuvsRMMAlloc allocation%s", ptr,
                  rc == -2 ? " (it is another kind of object)" : " (double free?)");
    return RAFT_FAIL("cuvsdouble: cuvsRMMFree of an unknown pointer %p", ptr);
  }
  if (e.size != bytes) {
    dbl_violation("cuvsRMMFree(%p, %zu) but it was allocated with %zu bytes", ptr, bytes, e.size);
  }
  if (e.device != tls_device) {
    dbl_violation("cuvsRMMFree(%p) with device %d current, allocated on device %d (freed through "
                  "the wrong device's memory resource)",
                  ptr, tls_device, e.device);
  } else if (e.mr_gen != atomic_load(&g_mr_gen[tls_device])) {
    dbl_violation("cuvsRMMFree(%p) after the memory resource was changed since its allocation "
                  "(cuvsRMMPoolMemoryResourceEnable/Reset is process-wide: the real library frees "
                  "it through the wrong resource)",
                  ptr);
  }
  if (e.borrows > 0) {
    dbl_violation("cuvsRMMFree(%p) while %lld index(es) still reference that memory", ptr,
                  (long long)e.borrows);
  }
  dbl_dev_give(&e.blk);
  free(ptr);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsRMMPoolMemoryResourceEnable(int initial_pool_size_percent,
                                                    int max_pool_size_percent, bool managed)
{
  DBL_ENTER(cuvsRMMPoolMemoryResourceEnable);
  if (initial_pool_size_percent < 0 || initial_pool_size_percent > 100 ||
      max_pool_size_percent < 0 || max_pool_size_percent > 100) {
    return RAFT_FAIL("cuvsdouble: pool size percentages must be within [0, 100] (got %d, %d)",
                     initial_pool_size_percent, max_pool_size_percent);
  }
  if (initial_pool_size_percent > max_pool_size_percent) {
    return dbl_plain_fail("RMM failure at: Initial pool size exceeds the maximum pool size!");
  }
  atomic_fetch_add(&g_mr_gen[tls_device], 1);
  TRY(dbl_dev_pool_enable(initial_pool_size_percent, max_pool_size_percent));
  atomic_store(&g_pool_on[tls_device], 1);
  atomic_store(&g_pool_initial, initial_pool_size_percent);
  atomic_store(&g_pool_max, max_pool_size_percent);
  atomic_store(&g_pool_managed, managed ? 1 : 0);
  atomic_store(&g_pool_enabled, 1);
  return dbl_ok();
}

DBL_API cuvsError_t cuvsRMMMemoryResourceReset(void)
{
  DBL_ENTER(cuvsRMMMemoryResourceReset);
  atomic_fetch_add(&g_mr_gen[tls_device], 1);
  dbl_dev_pool_reset();
  atomic_store(&g_pool_on[tls_device], 0);
  atomic_store(&g_pool_enabled, 0);
  atomic_store(&g_pool_initial, 0);
  atomic_store(&g_pool_max, 0);
  atomic_store(&g_pool_managed, 0);
  return dbl_ok();
}

#if DBL_RELEASE >= 2608
/* 26.08 (c/src/core/c_api.cpp). cuvsResourcesCreateWithMemoryTracking makes a
 * raft::memory_tracking_resources sampling memory use into csv_path; the
 * double makes ordinary resources and creates (truncates) the file, writing
 * no samples (the CSV's format is raft's: not imitated). */
DBL_API cuvsError_t cuvsResourcesCreateWithMemoryTracking(cuvsResources_t* res, const char* csv_path,
                                                          int64_t sample_interval_ms)
{
  DBL_ENTER(cuvsResourcesCreateWithMemoryTracking);
  if (csv_path == NULL || csv_path[0] == 0) {
    return dbl_plain_fail("csv_path must be a non-empty string");
  }
  if (sample_interval_ms < 0) return dbl_plain_fail("sample_interval_ms must be >= 0");
  FILE* f = fopen(csv_path, "w");
  if (!f) return RAFT_FAIL("cuvsdouble: cannot open the memory tracking file %s", csv_path);
  fclose(f);
  return res_create(res, 0);
}

/* raft::resource::set_workspace_resource with an uncapped pool of
 * initial_size_bytes: the double checks the handle and allocates nothing. */
DBL_API cuvsError_t cuvsResourcesSetWorkspacePool(cuvsResources_t res, size_t initial_size_bytes)
{
  DBL_ENTER(cuvsResourcesSetWorkspacePool);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_release(r);
  return dbl_ok();
}

/* rmm::mr::set_current_device_resource(cuda_async_memory_resource{}): a
 * change of the current device's resource, as PoolMemoryResourceEnable is
 * (memory allocated before and freed after goes through the wrong one). */
DBL_API cuvsError_t cuvsRMMAsyncMemoryResourceEnable(void)
{
  DBL_ENTER(cuvsRMMAsyncMemoryResourceEnable);
  atomic_fetch_add(&g_mr_gen[tls_device], 1);
  dbl_dev_pool_reset();
  atomic_store(&g_pool_on[tls_device], 0);
  atomic_store(&g_pool_enabled, 0);
  atomic_store(&g_pool_initial, 0);
  atomic_store(&g_pool_max, 0);
  atomic_store(&g_pool_managed, 0);
  return dbl_ok();
}
#endif

DBL_API cuvsError_t cuvsRMMHostAlloc(void** ptr, size_t bytes)
{
  DBL_ENTER(cuvsRMMHostAlloc);
  tls_host_mr = 1; /* cuVS creates its pinned resource thread_local, here */
  if (!ptr) {
    dbl_violation("NULL void** (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL out-parameter");
  }
  if (bytes == 0) { /* like cuvsRMMAlloc(0): a null pointer */
    *ptr = NULL;
    dbl_count(K_HOST, 0, 1);
    return dbl_ok();
  }
  void* p = aligned_alloc_fill(bytes);
  if (!p) return dbl_plain_fail("std::bad_alloc: failed to allocate %zu bytes of pinned memory", bytes);
  dbl_reg_add(p, K_HOST, bytes);
  *ptr = p;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsRMMHostFree(void* ptr, size_t bytes)
{
  DBL_ENTER(cuvsRMMHostFree);
  if (!tls_host_mr) {
    dbl_violation("cuvsRMMHostFree on a thread that never called cuvsRMMHostAlloc: the real "
                  "library keeps its pinned memory resource in a thread_local that is still null "
                  "here and dereferences it (crash)");
  }
  if (ptr == NULL) {
    if (bytes != 0) { dbl_violation("cuvsRMMHostFree(NULL, %zu)", bytes); }
    dbl_count(K_HOST, 1, 1);
    return dbl_ok();
  }
  dbl_stream_flush_all(); /* no queued write may outlive its buffer */
  dbl_entry e;
  int rc = dbl_reg_remove(ptr, K_HOST, &e, NULL);
  if (rc != 0) {
    dbl_violation("cuvsRMMHostFree of %p, which is not a live cuvsRMMHostAlloc allocation", ptr);
    return RAFT_FAIL("cuvsdouble: cuvsRMMHostFree of an unknown pointer %p", ptr);
  }
  if (e.size != bytes) {
    dbl_violation("cuvsRMMHostFree(%p, %zu) but it was allocated with %zu bytes", ptr, bytes,
                  e.size);
  }
  if (e.borrows > 0) {
    dbl_violation("cuvsRMMHostFree(%p) while %lld index(es) still reference that memory", ptr,
                  (long long)e.borrows);
  }
  free(ptr);
  return dbl_ok();
}

/* ------------------------------------------------------------------------ */
/* errors, log level, version                                               */

DBL_API const char* cuvsGetLastErrorText(void)
{
  atomic_fetch_add(&g_calls[F_cuvsGetLastErrorText], 1);
  return tls_err;
}

DBL_API void cuvsSetLastErrorText(const char* error)
{
  atomic_fetch_add(&g_calls[F_cuvsSetLastErrorText], 1);
  dbl_set_error(error);
}

DBL_API cuvsLogLevel_t cuvsGetLogLevel(void)
{
  atomic_fetch_add(&g_calls[F_cuvsGetLogLevel], 1);
  return (cuvsLogLevel_t)atomic_load(&g_log_level);
}

DBL_API void cuvsSetLogLevel(cuvsLogLevel_t level)
{
  atomic_fetch_add(&g_calls[F_cuvsSetLogLevel], 1);
  tls_fn = "cuvsSetLogLevel";
  if ((int)level < CUVS_LOG_LEVEL_TRACE || (int)level > CUVS_LOG_LEVEL_OFF) {
    /* The real function throws out of an extern "C" function: std::terminate. */
    dbl_violation("cuvsSetLogLevel(%d): invalid level (the real library terminates the process)",
                  (int)level);
    return;
  }
  atomic_store(&g_log_level, (int)level);
}

/* Like the real one, this neither sets nor clears the last error text. */
DBL_API cuvsError_t cuvsVersionGet(uint16_t* major, uint16_t* minor, uint16_t* patch)
{
  DBL_ENTER(cuvsVersionGet);
  if (!major || !minor || !patch) {
    dbl_violation("NULL out-parameter to cuvsVersionGet (the real library would crash)");
    return CUVS_ERROR;
  }
  *major = (uint16_t)atomic_load(&g_ver_major);
  *minor = (uint16_t)atomic_load(&g_ver_minor);
  *patch = (uint16_t)atomic_load(&g_ver_patch);
  return CUVS_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* matrix copy and slicing                                                  */

static int copy_dtype_supported(DLDataType dt)
{
  switch (dt.code) {
    case kDLFloat: return dt.bits == 16 || dt.bits == 32 || dt.bits == 64;
    case kDLInt:
    case kDLUInt: return dt.bits == 8 || dt.bits == 16 || dt.bits == 32 || dt.bits == 64;
    default: return 0;
  }
}

DBL_API cuvsError_t cuvsMatrixCopy(cuvsResources_t res, DLManagedTensor* src_managed,
                                   DLManagedTensor* dst_managed)
{
  DBL_ENTER(cuvsMatrixCopy);
  TRY(dl_check_ptr(src_managed, "src"));
  TRY(dl_check_ptr(dst_managed, "dst"));
  const DLTensor* src = &src_managed->dl_tensor;
  const DLTensor* dst = &dst_managed->dl_tensor;
  EXPECTS(src->ndim == dst->ndim, "src and dst tensors should have the same dimensions");
  for (int i = 0; i < src->ndim; i++) {
    EXPECTS(src->shape[i] == dst->shape[i], "shape mismatch between src and dst tensors");
  }
  EXPECTS(src->dtype.code == dst->dtype.code, "dtype mismatch between src and dst tensors");
  EXPECTS(src->dtype.bits == dst->dtype.bits,
          "dtype bits width mismatch between src and dst tensors");
  if (!copy_dtype_supported(src->dtype)) {
    return RAFT_FAIL("Unsupported dtype: %d and bits: %d", src->dtype.code, src->dtype.bits);
  }
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_release(r);
  cudaStream_t stream = r->stream;
  TRY(dl_strict(src, "src"));
  TRY(dl_strict(dst, "dst"));
  size_t es = dl_elem_size(src->dtype);
  if (src->ndim == 2) {
    /* Like raft::copy_matrix here: row strides are honoured, column strides
     * are not (cuVS reads strides[0] only). */
    int64_t rows = src->shape[0], cols = src->shape[1];
    int64_t srs = src->strides ? src->strides[0] : cols;
    int64_t drs = dst->strides ? dst->strides[0] : cols;
    if ((src->strides && src->strides[1] != 1) || (dst->strides && dst->strides[1] != 1)) {
      dbl_violation("cuvsMatrixCopy with a column stride != 1: cuVS ignores column strides and "
                    "copies as if rows were contiguous");
    }
    if (rows > 0 && cols > 0) {
      if (!src->data || !dst->data) {
        dbl_violation("cuvsMatrixCopy with a NULL data pointer");
        return RAFT_FAIL("cuvsdouble: NULL data pointer");
      }
      if (!dbl_async_copy(stream, dst->data, src->data, rows, (size_t)cols * es, (size_t)drs * es,
                          (size_t)srs * es)) {
        for (int64_t i = 0; i < rows; i++) {
          memmove((char*)dst->data + (size_t)(i * drs) * es,
                  (const char*)src->data + (size_t)(i * srs) * es, (size_t)cols * es);
        }
      }
    }
  } else {
    EXPECTS(src->strides == NULL, "cuvsCopyMatrix only supports strides with 2D inputs");
    EXPECTS(dst->strides == NULL, "cuvsCopyMatrix only supports strides with 2D inputs");
    int64_t n = dl_numel(src);
    if (n > 0) {
      if (!src->data || !dst->data) {
        dbl_violation("cuvsMatrixCopy with a NULL data pointer");
        return RAFT_FAIL("cuvsdouble: NULL data pointer");
      }
      if (!dbl_async_copy(stream, dst->data, src->data, 1, (size_t)n * es, 0, 0)) {
        memmove(dst->data, src->data, (size_t)n * es);
      }
    }
  }
  return dbl_ok();
}

DBL_API cuvsError_t cuvsMatrixSliceRows(cuvsResources_t res, DLManagedTensor* src_managed,
                                        int64_t start, int64_t end, DLManagedTensor* dst_managed)
{
  DBL_ENTER(cuvsMatrixSliceRows);
  EXPECTS(end >= start, "end index must be greater than start index");
  TRY(dl_check_ptr(src_managed, "src"));
  if (!dst_managed) {
    dbl_violation("NULL dst DLManagedTensor* (the real library would crash)");
    return RAFT_FAIL("cuvsdouble: NULL DLManagedTensor* for dst");
  }
  const DLTensor* src = &src_managed->dl_tensor;
  DLTensor* dst = &dst_managed->dl_tensor;
  EXPECTS(src->ndim <= 2, "src should be a 1 or 2 dimensional tensor");
  EXPECTS(src->shape != NULL, "shape should be initialized in the src tensor");
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  dbl_res_release(r);
  if (start < 0 || end > src->shape[0]) {
    /* cuVS does not check this; the view would point outside the matrix. */
    dbl_violation("cuvsMatrixSliceRows [%lld, %lld) outside the %lld rows of src",
                  (long long)start, (long long)end, (long long)src->shape[0]);
  }
  if (dst->strides != NULL && !(src->ndim == 2 && src->strides)) {
    dbl_violation("cuvsMatrixSliceRows: dst->strides is not NULL and is left as is; the deleter "
                  "cuVS installs will delete[] it");
  }
  dst->dtype = src->dtype;
  dst->device = src->device;
  dst->ndim = src->ndim;
  dst->shape = dbl_meta_alloc(dst->ndim);
  dst->shape[0] = end - start;
  int64_t row_stride = 1;
  if (dst->ndim == 2) {
    dst->shape[1] = src->shape[1];
    row_stride = dst->shape[1];
    if (src->strides) {
      dst->strides = dbl_meta_alloc(2);
      row_stride = dst->strides[0] = src->strides[0];
      dst->strides[1] = src->strides[1];
    }
  }
  dst->data = (char*)src->data + start * row_stride * (dst->dtype.bits / 8);
  dst_managed->deleter = dbl_meta_deleter;
  return dbl_ok();
}

/* ------------------------------------------------------------------------ */
/* control API: exported with the cuvsdouble_ prefix, not part of cuVS      */

DBL_API void cuvsdouble_set_version(int major, int minor, int patch)
{
  atomic_store(&g_ver_major, major);
  atomic_store(&g_ver_minor, minor);
  atomic_store(&g_ver_patch, patch);
}

DBL_API int cuvsdouble_function_count(void) { return F_COUNT; }

DBL_API const char* cuvsdouble_function_name(int i)
{
  return (i >= 0 && i < F_COUNT) ? g_fn_names[i] : NULL;
}

/* 1 when the function returns cuvsError_t (and so can be made to fail). */
DBL_API int cuvsdouble_function_can_fail(int i)
{
  return (i >= 0 && i < F_COUNT) ? g_fn_kinds[i] == 'E' : 0;
}

static int fn_index(const char* name)
{
  if (!name) return -2;
  if (strcmp(name, "*") == 0) return -1;
  for (int i = 0; i < F_COUNT; i++) {
    if (strcmp(name, g_fn_names[i]) == 0) return i;
  }
  return -2;
}

/* Arms a fault: after `skip` matching calls, the next `count` (< 0: all)
 * matching calls of fn ("*": any function returning cuvsError_t) fail at once,
 * before touching anything, with error text `text` (decorated like a RAFT
 * failure unless raw). Returns 0, -1 (unknown function), -2 (function cannot
 * fail), -3 (too many faults). */
DBL_API int cuvsdouble_fail(const char* fn, int64_t skip, int64_t count, const char* text, int raw)
{
  int fi = fn_index(fn);
  if (fi == -2) return -1;
  if (fi >= 0 && g_fn_kinds[fi] != 'E') return -2;
  if (count == 0) return 0;
  pthread_mutex_lock(&g_mu);
  int n = atomic_load(&g_nfaults);
  if (n >= DBL_MAX_FAULTS) {
    pthread_mutex_unlock(&g_mu);
    return -3;
  }
  g_faults[n] = (dbl_fault){
    .fn = fi, .skip = skip < 0 ? 0 : skip, .count = count, .text = text ? strdup(text) : NULL, .raw = raw};
  atomic_store(&g_nfaults, n + 1);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

DBL_API void cuvsdouble_clear_faults(void)
{
  pthread_mutex_lock(&g_mu);
  int n = atomic_load(&g_nfaults);
  for (int i = 0; i < n; i++) {
    free(g_faults[i].text);
    memset(&g_faults[i], 0, sizeof(dbl_fault));
  }
  atomic_store(&g_nfaults, 0);
  pthread_mutex_unlock(&g_mu);
}

DBL_API int cuvsdouble_pending_faults(void) { return atomic_load(&g_nfaults); }

DBL_API int64_t cuvsdouble_fault_hits(void) { return atomic_load(&g_fault_hits); }

/* Calls of fn so far (-1: unknown name). */
DBL_API int64_t cuvsdouble_calls(const char* fn)
{
  int fi = fn_index(fn);
  if (fi < 0) return -1;
  return atomic_load(&g_calls[fi]);
}

DBL_API int cuvsdouble_counter_count(void) { return K_COUNT; }

DBL_API const char* cuvsdouble_counter_name(int i)
{
  return (i >= 0 && i < K_COUNT) ? g_kind_names[i] : NULL;
}

/* which: 0 acquired (created/allocated), 1 released (destroyed/freed). */
DBL_API int64_t cuvsdouble_counter_get(int i, int which)
{
  if (i < 0 || i >= K_COUNT || which < 0 || which > 1) return 0;
  return atomic_load(&g_cnt[i][which]);
}

DBL_API int64_t cuvsdouble_violation_count(void)
{
  pthread_mutex_lock(&g_mu);
  int64_t n = g_viol_total;
  pthread_mutex_unlock(&g_mu);
  return n;
}

/* Copies violation i (0-based; only the first 64 are kept) into buf. Returns
 * the full length, or -1. */
DBL_API int cuvsdouble_violation_copy(int i, char* buf, int cap)
{
  int len = -1;
  pthread_mutex_lock(&g_mu);
  if (i >= 0 && i < g_viol_total && i < DBL_MAX_VIOLATIONS && g_viol[i]) {
    len = (int)strlen(g_viol[i]);
    if (buf && cap > 0) snprintf(buf, (size_t)cap, "%s", g_viol[i]);
  }
  pthread_mutex_unlock(&g_mu);
  return len;
}

/* Forgets the recorded violations (counters and everything else stay). */
DBL_API void cuvsdouble_clear_violations(void)
{
  pthread_mutex_lock(&g_mu);
  int64_t kept = g_viol_total < DBL_MAX_VIOLATIONS ? g_viol_total : DBL_MAX_VIOLATIONS;
  for (int64_t i = 0; i < kept; i++) {
    free(g_viol[i]);
    g_viol[i] = NULL;
  }
  g_viol_total = 0;
  pthread_mutex_unlock(&g_mu);
}

DBL_API void cuvsdouble_set_device_id(int id) { atomic_store(&g_device_id, id < 0 ? -1 : id); }

/* ---- fake CUDA runtime: the three device functions, with CUDA's codes ---- */

DBL_API int cudaGetDeviceCount(int* n)
{
  atomic_fetch_add(&g_cuda_calls[0], 1);
  if (!n) return 1; /* cudaErrorInvalidValue */
  *n = atomic_load(&g_device_count);
  return 0;
}

DBL_API int cudaSetDevice(int d)
{
  atomic_fetch_add(&g_cuda_calls[1], 1);
  if (d < 0 || d >= atomic_load(&g_device_count)) return 101; /* cudaErrorInvalidDevice */
  tls_device_raw = d;
  tls_device_epoch = atomic_load(&g_device_epoch);
  return 0;
}

DBL_API int cudaGetDevice(int* d)
{
  atomic_fetch_add(&g_cuda_calls[2], 1);
  if (!d) return 1;
  *d = tls_device;
  return 0;
}

DBL_API const char* cudaGetErrorString(int code)
{
  switch (code) {
    case 0: return "no error";
    case 1: return "invalid argument";
    case 2: return "out of memory";
    case 101: return "invalid device ordinal";
    case 201: return "invalid device context";
  }
  return "unrecognized error code";
}

/* Sets the number of fake devices (1..DBL_MAX_DEVICES). */
DBL_API void cuvsdouble_set_device_count(int n)
{
  if (n < 1) n = 1;
  if (n > DBL_MAX_DEVICES) n = DBL_MAX_DEVICES;
  atomic_store(&g_device_count, n);
  atomic_fetch_add(&g_device_epoch, 1);
}

/* Calls of cudaGetDeviceCount (0), cudaSetDevice (1), cudaGetDevice (2). */
DBL_API int64_t cuvsdouble_cuda_calls(int which)
{
  if (which < 0 || which > 2) return -1;
  return atomic_load(&g_cuda_calls[which]);
}

/* Whether the pool is the current memory resource of device dev. */
DBL_API int cuvsdouble_pool_on_device(int dev)
{
  if (dev < 0 || dev >= DBL_MAX_DEVICES) return 0;
  return atomic_load(&g_pool_on[dev]);
}

DBL_API void cuvsdouble_set_strict_device(int on) { atomic_store(&dbl_strict_device, on ? 1 : 0); }

DBL_API void cuvsdouble_set_instant(int on) { atomic_store(&dbl_instant, on ? 1 : 0); }

DBL_API int cuvsdouble_instant(void) { return atomic_load(&dbl_instant); }

DBL_API void cuvsdouble_set_call_delay_us(int us) { atomic_store(&g_call_delay_us, us < 0 ? 0 : us); }

DBL_API void cuvsdouble_set_call_jitter_us(int us) { atomic_store(&g_call_jitter_us, us < 0 ? 0 : us); }

DBL_API int cuvsdouble_pool_state(int* initial, int* max, int* managed)
{
  if (initial) *initial = atomic_load(&g_pool_initial);
  if (max) *max = atomic_load(&g_pool_max);
  if (managed) *managed = atomic_load(&g_pool_managed);
  return atomic_load(&g_pool_enabled);
}

/* Back to the state after loading: counters, calls, faults and violations
 * cleared, version 26.6.0, log level INFO, one device (every thread back on
 * device 0), resources reporting the device current at their creation, strict mode, instant
 * mode and call delay off, no pool. Objects still alive stay valid (and tracked), but their
 * counters restart from zero: reset when nothing is alive. */
DBL_API void cuvsdouble_reset(void)
{
  cuvsdouble_clear_faults();
  for (int i = 0; i < K_COUNT; i++) {
    atomic_store(&g_cnt[i][0], 0);
    atomic_store(&g_cnt[i][1], 0);
  }
  for (int i = 0; i < F_COUNT; i++) atomic_store(&g_calls[i], 0);
  atomic_store(&g_fault_hits, 0);
  cuvsdouble_clear_violations();
  cuvsdouble_set_version(DBL_VERSION_MAJOR, DBL_VERSION_MINOR, DBL_VERSION_PATCH);
  atomic_store(&g_log_level, 2);
  atomic_store(&g_device_id, -1);
  atomic_store(&g_device_count, 1);
  atomic_fetch_add(&g_device_epoch, 1);
  for (int i = 0; i < 3; i++) atomic_store(&g_cuda_calls[i], 0);
  for (int i = 0; i < DBL_MAX_DEVICES; i++) atomic_store(&g_pool_on[i], 0);
  atomic_store(&dbl_strict_device, 0);
  atomic_store(&dbl_instant, 0);
  atomic_store(&g_call_delay_us, 0);
  atomic_store(&g_call_jitter_us, 0);
  dbl_stream_flush_all();
  atomic_store(&g_pool_enabled, 0);
  atomic_store(&g_pool_initial, 0);
  atomic_store(&g_pool_max, 0);
  atomic_store(&g_pool_managed, 0);
  dbl_dev_reset();
}

/* a*b, saturating at UINT64_MAX */
static uint64_t mul_sat(uint64_t a, uint64_t b)
{
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

int dbl_at_end(FILE* f)
{
  long at = ftell(f);
  if (fgetc(f) == EOF) return 1;
  struct stat st;
  if (at < 0 || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  uint64_t left = (uint64_t)st.st_size - (uint64_t)at;
  unsigned char ft[32];
  if (left < sizeof ft || fseek(f, st.st_size - (long)sizeof ft, SEEK_SET) != 0 ||
      fread(ft, 1, sizeof ft, f) != sizeof ft || memcmp(ft, "\x89" "cuvsgo\n", 8) != 0)
    return 0;
  uint64_t n = 0;
  uint32_t chunk = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | ft[8 + i];
  for (int i = 3; i >= 0; i--) chunk = chunk << 8 | ft[16 + i];
  if (chunk == 0 || n != (uint64_t)at) return 0;
  uint64_t chunks = n / chunk + (n % chunk != 0);
  return left == 4 * chunks + sizeof ft;
}

int dbl_file_holds(FILE* f, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e,
                   uint64_t g)
{
  long at = ftell(f);
  struct stat st;
  if (at < 0 || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) return 1;
  uint64_t left = (uint64_t)st.st_size > (uint64_t)at ? (uint64_t)st.st_size - (uint64_t)at : 0;
  uint64_t x = mul_sat(mul_sat(a, b), c), y = mul_sat(mul_sat(d, e), g);
  return x <= left && y <= left - x;
}
