/*
 * cuvsdouble device memory model: each fake device has a size (141 GiB, an
 * H200's, unless CUVSDOUBLE_DEVICE_BYTES or cuvsdouble_set_device_bytes says
 * otherwise), and every byte cuVS would take from the device memory
 * resource is counted against it, as RMM counts it:
 *
 *   - without a pool (rmm::mr::cuda_memory_resource), an allocation the
 *     device cannot hold fails as cudaMalloc does, rmm::out_of_memory with
 *     "cudaErrorMemoryAllocation out of memory";
 *   - cuvsRMMPoolMemoryResourceEnable (c/src/core/c_api.cpp of v26.06.00 and
 *     v26.08.01) makes a pool_memory_resource whose initial and maximum
 *     sizes are rmm::percent_of_free_device_memory: that percent of the
 *     device's free memory at the call, aligned down to 256 bytes. The
 *     initial size is taken from the device at once; the pool grows as
 *     allocations need (by what they lack: RMM's growth policy, which may
 *     take more, is not imitated) and refuses past its maximum with
 *     rmm::out_of_memory "Maximum pool size exceeded". Changing or resetting
 *     the resource gives the old pool's memory back to the device.
 *
 * Allocations are rounded up to 256 bytes (RMM's CUDA_ALLOCATION_ALIGNMENT).
 * cuvsRMMAlloc goes through it, and so does the device storage the double's
 * indexes would hold on a GPU (dbl_dev_take): their host buffers are where
 * the double keeps the data, the blocks are what cuVS would allocate.
 * cudaMemGetInfo reports the device's free and total bytes; the control
 * functions report what the memory resource has handed out and its peak.
 */
#include "dbl.h"

#define DEV_ALIGN 256
#define DEFAULT_DEVICE_BYTES (141ull << 30)

static pthread_mutex_t g_dev_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_dev_total = 0; /* 0: not read yet */
static uint64_t g_used[DBL_MAX_DEVICES];      /* taken from the device: non-pool blocks + pool size */
static uint64_t g_pool_size[DBL_MAX_DEVICES]; /* 0 without a pool */
static uint64_t g_pool_max[DBL_MAX_DEVICES];
static uint64_t g_pool_inuse[DBL_MAX_DEVICES];
static uint64_t g_pool_gen[DBL_MAX_DEVICES]; /* bumped at every change of the resource */
static int g_pool_on[DBL_MAX_DEVICES];
static uint64_t g_alloc[DBL_MAX_DEVICES]; /* handed out by the memory resource */
static uint64_t g_peak[DBL_MAX_DEVICES];

static uint64_t dev_total_locked(void)
{
  if (g_dev_total == 0) {
    const char* s = getenv("CUVSDOUBLE_DEVICE_BYTES");
    unsigned long long v = s ? strtoull(s, NULL, 10) : 0;
    g_dev_total = v ? (uint64_t)v : DEFAULT_DEVICE_BYTES;
  }
  return g_dev_total;
}

static uint64_t align_up(uint64_t n) { return (n + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN; }

static int cur_dev(void)
{
  int d = dbl_current_device();
  return d >= 0 && d < DBL_MAX_DEVICES ? d : 0;
}

/* Raw CUDA allocations (cudaMalloc), outside any memory resource. */
static cuvsError_t take_raw(uint64_t b, int d)
{
  pthread_mutex_lock(&g_dev_mu);
  uint64_t total = dev_total_locked();
  if (g_used[d] + b > total) {
    pthread_mutex_unlock(&g_dev_mu);
    return CUVS_ERROR;
  }
  g_used[d] += b;
  pthread_mutex_unlock(&g_dev_mu);
  return CUVS_SUCCESS;
}

cuvsError_t dbl_dev_take(size_t bytes, dbl_dev_block* out)
{
  memset(out, 0, sizeof *out);
  if (bytes == 0) return dbl_ok();
  int d = cur_dev();
  uint64_t b = align_up(bytes);
  pthread_mutex_lock(&g_dev_mu);
  uint64_t total = dev_total_locked();
  if (g_pool_on[d]) {
    if (g_pool_inuse[d] + b > g_pool_max[d]) {
      uint64_t inuse = g_pool_inuse[d], max = g_pool_max[d];
      pthread_mutex_unlock(&g_dev_mu);
      return dbl_plain_fail(
        "std::bad_alloc: out_of_memory: RMM failure at:/rmm/mr/pool_memory_resource.hpp:252: "
        "Maximum pool size exceeded (failed to allocate %zu bytes; pool in use %llu of %llu)",
        bytes, (unsigned long long)inuse, (unsigned long long)max);
    }
    if (g_pool_inuse[d] + b > g_pool_size[d]) {
      uint64_t grow = g_pool_inuse[d] + b - g_pool_size[d];
      if (g_used[d] + grow > total) {
        pthread_mutex_unlock(&g_dev_mu);
        return dbl_plain_fail("std::bad_alloc: out_of_memory: RMM failure at:/rmm/mr/"
                              "pool_memory_resource.hpp:252: Maximum pool size exceeded "
                              "(failed to allocate %zu bytes): the device has no more memory",
                              bytes);
      }
      g_pool_size[d] += grow;
      g_used[d] += grow;
    }
    g_pool_inuse[d] += b;
    out->pooled = 1;
  } else {
    if (g_used[d] + b > total) {
      pthread_mutex_unlock(&g_dev_mu);
      return dbl_plain_fail("std::bad_alloc: out_of_memory: CUDA error (failed to allocate %zu "
                            "bytes) at: /rmm/mr/cuda_memory_resource.hpp:62: "
                            "cudaErrorMemoryAllocation out of memory",
                            bytes);
    }
    g_used[d] += b;
  }
  g_alloc[d] += b;
  if (g_alloc[d] > g_peak[d]) g_peak[d] = g_alloc[d];
  out->bytes = b;
  out->device = d;
  out->gen = g_pool_gen[d];
  pthread_mutex_unlock(&g_dev_mu);
  return dbl_ok();
}

void dbl_dev_give(dbl_dev_block* blk)
{
  if (blk->bytes == 0) return;
  int d = blk->device;
  pthread_mutex_lock(&g_dev_mu);
  if (blk->pooled) {
    /* A block of a pool since replaced went back to the device with it. */
    if (blk->gen == g_pool_gen[d] && g_pool_on[d]) {
      g_pool_inuse[d] -= blk->bytes;
      g_alloc[d] -= blk->bytes;
    }
  } else {
    g_used[d] -= blk->bytes;
    g_alloc[d] -= blk->bytes;
  }
  pthread_mutex_unlock(&g_dev_mu);
  memset(blk, 0, sizeof *blk);
}

/* The resource of the current device changes: the old pool's memory goes
 * back to the device, and what it had handed out no longer counts. */
static void drop_pool_locked(int d)
{
  if (g_pool_on[d]) {
    g_used[d] -= g_pool_size[d];
    g_alloc[d] -= g_pool_inuse[d];
  }
  g_pool_on[d] = 0;
  g_pool_size[d] = g_pool_max[d] = g_pool_inuse[d] = 0;
  g_pool_gen[d]++;
}

cuvsError_t dbl_dev_pool_enable(int initial_percent, int max_percent)
{
  int d = cur_dev();
  pthread_mutex_lock(&g_dev_mu);
  drop_pool_locked(d);
  uint64_t total = dev_total_locked();
  uint64_t free_b = g_used[d] < total ? total - g_used[d] : 0;
  uint64_t initial = (uint64_t)((double)free_b * initial_percent / 100.0) / DEV_ALIGN * DEV_ALIGN;
  uint64_t max = (uint64_t)((double)free_b * max_percent / 100.0) / DEV_ALIGN * DEV_ALIGN;
  g_pool_on[d] = 1;
  g_pool_size[d] = initial;
  g_pool_max[d] = max;
  g_used[d] += initial;
  pthread_mutex_unlock(&g_dev_mu);
  return dbl_ok();
}

void dbl_dev_pool_reset(void)
{
  int d = cur_dev();
  pthread_mutex_lock(&g_dev_mu);
  drop_pool_locked(d);
  pthread_mutex_unlock(&g_dev_mu);
}

/* cudaMalloc / cudaFree: device memory straight from the device, outside
 * RMM (counted in cudaMemGetInfo, not in what the memory resource handed
 * out). The pointers are host tokens, not memory: nothing may be written
 * through them. Rounded to CUDA's 2 MiB pages. */
typedef struct raw_block {
  void* p;
  uint64_t bytes;
  int device;
  struct raw_block* next;
} raw_block;
static raw_block* g_raw = NULL;

DBL_API int cudaMalloc(void** p, size_t bytes)
{
  if (!p) return 1; /* cudaErrorInvalidValue */
  *p = NULL;
  if (bytes == 0) return 0;
  uint64_t b = ((uint64_t)bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  int d = cur_dev();
  if (take_raw(b, d) != CUVS_SUCCESS) return 2; /* cudaErrorMemoryAllocation */
  raw_block* r = malloc(sizeof *r);
  void* tok = malloc(1);
  if (!r || !tok) {
    free(r), free(tok);
    pthread_mutex_lock(&g_dev_mu);
    g_used[d] -= b;
    pthread_mutex_unlock(&g_dev_mu);
    return 2;
  }
  pthread_mutex_lock(&g_dev_mu);
  *r = (raw_block){tok, b, d, g_raw};
  g_raw = r;
  pthread_mutex_unlock(&g_dev_mu);
  *p = tok;
  return 0;
}

DBL_API int cudaFree(void* p)
{
  if (!p) return 0;
  pthread_mutex_lock(&g_dev_mu);
  for (raw_block** pp = &g_raw; *pp; pp = &(*pp)->next) {
    if ((*pp)->p == p) {
      raw_block* r = *pp;
      *pp = r->next;
      g_used[r->device] -= r->bytes;
      pthread_mutex_unlock(&g_dev_mu);
      free(r->p);
      free(r);
      return 0;
    }
  }
  pthread_mutex_unlock(&g_dev_mu);
  dbl_violation("cudaFree(%p) of memory cudaMalloc did not give", p);
  return 1; /* cudaErrorInvalidValue */
}

DBL_API int cudaMemGetInfo(size_t* free_b, size_t* total_b)
{
  if (!free_b || !total_b) return 1; /* cudaErrorInvalidValue */
  int d = cur_dev();
  pthread_mutex_lock(&g_dev_mu);
  uint64_t total = dev_total_locked();
  *total_b = (size_t)total;
  *free_b = (size_t)(g_used[d] < total ? total - g_used[d] : 0);
  pthread_mutex_unlock(&g_dev_mu);
  return 0;
}

/* Sets every device's size (0: back to the default or the environment's).
 * Only while nothing is allocated: the test's own business. */
DBL_API void cuvsdouble_set_device_bytes(uint64_t bytes)
{
  pthread_mutex_lock(&g_dev_mu);
  g_dev_total = bytes;
  if (bytes == 0) (void)dev_total_locked();
  pthread_mutex_unlock(&g_dev_mu);
}

/* Device dev's memory: out[0] total, out[1] taken from the device, out[2]
 * handed out by the memory resource, out[3] its peak, out[4] the pool's
 * size, out[5] its maximum, out[6] its bytes in use, out[7] whether on. */
DBL_API void cuvsdouble_device_memory(int dev, uint64_t out[8])
{
  if (dev < 0 || dev >= DBL_MAX_DEVICES) dev = 0;
  pthread_mutex_lock(&g_dev_mu);
  out[0] = dev_total_locked();
  out[1] = g_used[dev];
  out[2] = g_alloc[dev];
  out[3] = g_peak[dev];
  out[4] = g_pool_size[dev];
  out[5] = g_pool_max[dev];
  out[6] = g_pool_inuse[dev];
  out[7] = (uint64_t)g_pool_on[dev];
  pthread_mutex_unlock(&g_dev_mu);
}

/* Restarts device dev's peak from what is handed out now. */
DBL_API void cuvsdouble_reset_device_peak(int dev)
{
  if (dev < 0 || dev >= DBL_MAX_DEVICES) dev = 0;
  pthread_mutex_lock(&g_dev_mu);
  g_peak[dev] = g_alloc[dev];
  pthread_mutex_unlock(&g_dev_mu);
}

/* cuvsdouble_reset: every pool dropped, the size back to the default; what
 * is still allocated stays counted (reset when nothing is alive). */
void dbl_dev_reset(void)
{
  pthread_mutex_lock(&g_dev_mu);
  for (int d = 0; d < DBL_MAX_DEVICES; d++) {
    drop_pool_locked(d);
    g_peak[d] = g_alloc[d];
  }
  g_dev_total = 0;
  pthread_mutex_unlock(&g_dev_mu);
}
