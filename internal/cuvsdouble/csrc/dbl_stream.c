/* Streams: the double's work is asynchronous where the GPU's is.
 *
 * On a GPU, a kernel or a copy between device (or pinned) buffers is queued
 * on a stream and done later; only a synchronization (cuvsStreamSync,
 * cudaStreamSynchronize, a copy to pageable memory) makes its result visible
 * to the host. The double imitates that, so that a missing or misplaced sync
 * fails a test here instead of giving other rows on a GPU:
 *
 *  - every write the double's functions make into a caller's device or
 *    pinned buffer (memory from cuvsRMMAlloc / cuvsRMMHostAlloc: search
 *    outputs, cuvsMatrixCopy's destination) is queued on the resources'
 *    stream, and the destination is poisoned (0xFF bytes: NaN floats, ids
 *    -1 / 0xFFFFFFFF) until the stream is flushed;
 *  - a stream is flushed, in order, by cuvsStreamSync, cudaStreamSynchronize,
 *    cudaDeviceSynchronize, and by the next call on it (work on one stream is
 *    ordered: a search sees the copy queued before it on its stream, not one
 *    queued on another stream);
 *  - cuvsMatrixCopy with pageable memory (anything the double did not
 *    allocate) on either side is synchronous, as cudaMemcpyAsync with
 *    pageable memory is;
 *  - the stream of a fresh resources is cudaStreamPerThread, as RAFT's: one
 *    stream per OS thread, resolved when the work is queued. Work queued
 *    from one thread and synchronized from another is not waited for;
 *  - freeing memory (cuvsRMMFree, cuvsRMMHostFree) first completes every
 *    stream's queued work, so that no queued write outlives its buffer.
 *
 * cudaStreamCreateWithFlags and cudaStreamDestroy make and release streams
 * of their own (counted: a stream never destroyed is a leak).
 *
 * Events (cudaEventCreateWithFlags, cudaEventRecord, cudaEventSynchronize,
 * cudaEventDestroy; counted as streams are): recording one marks the
 * stream, synchronizing it flushes that stream (what was queued before the
 * record, and what came after: the double has no finer order). The waits
 * on a blocking-sync event are counted (cuvsdouble_event_waits), so that a
 * test can tell which wait a caller used. */

#include "dbl.h"

#include <math.h>
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

typedef struct dbl_op {
  char* dst;
  const char* src; /* read when the op runs; owned (freed after) when own */
  int64_t rows;
  size_t row_bytes, dst_stride, src_stride;
  int own;
  struct dbl_op* next;
} dbl_op;

typedef struct {
  uintptr_t key;
  dbl_op *head, *tail;
} dbl_queue;

#define DBL_MAX_QUEUES 4096

static pthread_mutex_t g_smu = PTHREAD_MUTEX_INITIALIZER;
static dbl_queue g_queues[DBL_MAX_QUEUES];
static int g_nqueues = 0;
static atomic_llong g_pending = 0; /* ops queued and not yet run */

/* The address of a thread-local byte: unique among live threads, never 1
 * (the legacy stream) nor a heap address (a created stream). */
static __thread char tls_anchor;

#define STREAM_LEGACY ((uintptr_t)0x1)
#define STREAM_PER_THREAD ((uintptr_t)0x2)

static uintptr_t stream_key(cudaStream_t s)
{
  uintptr_t v = (uintptr_t)s;
  /* 0 is the per-thread default stream too: RAPIDS builds with
   * --default-stream per-thread. */
  if (v == 0 || v == STREAM_PER_THREAD) return (uintptr_t)&tls_anchor;
  return v;
}

static void run_op(dbl_op* op)
{
  for (int64_t i = 0; i < op->rows; i++) {
    memmove(op->dst + (size_t)i * op->dst_stride, op->src + (size_t)i * op->src_stride,
            op->row_bytes);
  }
  if (op->own) free((void*)op->src);
  free(op);
  atomic_fetch_sub(&g_pending, 1);
}

/* Runs and empties queue q. g_smu is held. */
static void flush_locked(dbl_queue* q)
{
  dbl_op* op = q->head;
  q->head = q->tail = NULL;
  while (op) {
    dbl_op* next = op->next;
    run_op(op);
    op = next;
  }
}

static dbl_queue* find_locked(uintptr_t key, int make)
{
  for (int i = 0; i < g_nqueues; i++) {
    if (g_queues[i].key == key) return &g_queues[i];
  }
  if (!make) return NULL;
  for (int i = 0; i < g_nqueues; i++) { /* reuse an empty one */
    if (g_queues[i].head == NULL) {
      g_queues[i].key = key;
      return &g_queues[i];
    }
  }
  if (g_nqueues == DBL_MAX_QUEUES) return NULL;
  dbl_queue* q = &g_queues[g_nqueues++];
  q->key = key;
  q->head = q->tail = NULL;
  return q;
}

static void flush_key(uintptr_t key)
{
  if (atomic_load(&g_pending) == 0) return;
  pthread_mutex_lock(&g_smu);
  dbl_queue* q = find_locked(key, 0);
  if (q) flush_locked(q);
  pthread_mutex_unlock(&g_smu);
}

void dbl_stream_flush(cudaStream_t s) { flush_key(stream_key(s)); }

void dbl_stream_flush_all(void)
{
  if (atomic_load(&g_pending) == 0) return;
  pthread_mutex_lock(&g_smu);
  for (int i = 0; i < g_nqueues; i++) flush_locked(&g_queues[i]);
  pthread_mutex_unlock(&g_smu);
}

/* Whether [p, p+n) is memory the double allocated as device or pinned
 * memory: where GPU writes are asynchronous. */
static int async_memory(const void* p, size_t n)
{
  return p != NULL && n > 0 && dbl_reg_containing(p, n, NULL);
}

/* Queues op on s, or runs it now when the queue table is full. */
static void enqueue(cudaStream_t s, dbl_op* op)
{
  atomic_fetch_add(&g_pending, 1);
  pthread_mutex_lock(&g_smu);
  dbl_queue* q = find_locked(stream_key(s), 1);
  if (!q) {
    pthread_mutex_unlock(&g_smu);
    run_op(op);
    return;
  }
  op->next = NULL;
  if (q->tail) {
    q->tail->next = op;
  } else {
    q->head = op;
  }
  q->tail = op;
  pthread_mutex_unlock(&g_smu);
}

static void poison(char* dst, int64_t rows, size_t row_bytes, size_t stride)
{
  for (int64_t i = 0; i < rows; i++) memset(dst + (size_t)i * stride, 0xFF, row_bytes);
}

/* rows, bytes of a row and row stride in bytes of a row-major tensor. */
static void tensor_rows(const DLTensor* t, int64_t* rows, size_t* row_bytes, size_t* stride)
{
  size_t es = dl_elem_size(t->dtype);
  if (t->ndim == 0) {
    *rows = 1;
    *row_bytes = *stride = es;
    return;
  }
  if (t->ndim == 1) {
    *rows = 1;
    *row_bytes = *stride = (size_t)t->shape[0] * es;
    return;
  }
  int64_t cols = 1;
  for (int i = 1; i < t->ndim; i++) cols *= t->shape[i];
  *rows = t->shape[0];
  *row_bytes = (size_t)cols * es;
  *stride = t->strides ? (size_t)t->strides[0] * es : *row_bytes;
}

static size_t span_bytes(int64_t rows, size_t row_bytes, size_t stride)
{
  return rows <= 0 ? 0 : (size_t)(rows - 1) * stride + row_bytes;
}

void dbl_async_output(cudaStream_t s, const DLTensor* t)
{
  if (!t || !t->data) return;
  int64_t rows;
  size_t rb, st;
  tensor_rows(t, &rows, &rb, &st);
  if (rows <= 0 || rb == 0 || !async_memory(t->data, span_bytes(rows, rb, st))) return;
  char* buf = malloc((size_t)rows * rb);
  if (!buf) return; /* stays synchronous */
  for (int64_t i = 0; i < rows; i++) memcpy(buf + (size_t)i * rb, (char*)t->data + (size_t)i * st, rb);
  poison(t->data, rows, rb, st);
  dbl_op* op = calloc(1, sizeof(dbl_op));
  if (!op) { /* undo: write now */
    for (int64_t i = 0; i < rows; i++) memcpy((char*)t->data + (size_t)i * st, buf + (size_t)i * rb, rb);
    free(buf);
    return;
  }
  *op = (dbl_op){.dst = t->data, .src = buf, .rows = rows, .row_bytes = rb, .dst_stride = st,
                 .src_stride = rb, .own = 1};
  enqueue(s, op);
}

void dbl_async_outputs(dbl_res* r, DLManagedTensor* a, DLManagedTensor* b)
{
  if (a) dbl_async_output(r->stream, &a->dl_tensor);
  if (b) dbl_async_output(r->stream, &b->dl_tensor);
}

int dbl_async_copy(cudaStream_t s, char* dst, const char* src, int64_t rows, size_t row_bytes,
                   size_t dst_stride, size_t src_stride)
{
  if (rows <= 0 || row_bytes == 0) return 0;
  if (!async_memory(dst, span_bytes(rows, row_bytes, dst_stride)) ||
      !async_memory(src, span_bytes(rows, row_bytes, src_stride))) {
    return 0; /* pageable memory on a side: the caller copies now */
  }
  dbl_op* op = calloc(1, sizeof(dbl_op));
  if (!op) return 0;
  *op = (dbl_op){.dst = dst, .src = src, .rows = rows, .row_bytes = row_bytes,
                 .dst_stride = dst_stride, .src_stride = src_stride, .own = 0};
  poison(dst, rows, row_bytes, dst_stride);
  enqueue(s, op);
  return 1;
}

int dbl_async_restore(cudaStream_t s, void* dst, void* src, size_t bytes)
{
  if (bytes == 0 || !async_memory(dst, bytes)) return 0;
  dbl_op* op = calloc(1, sizeof(dbl_op));
  if (!op) return 0;
  *op = (dbl_op){.dst = dst, .src = src, .rows = 1, .row_bytes = bytes, .dst_stride = bytes,
                 .src_stride = bytes, .own = 1};
  enqueue(s, op);
  return 1;
}

/* ------------------------------------------------------------------------ */
/* the CUDA runtime's stream functions                                      */

typedef struct {
  uint64_t magic;
} dbl_stream;

#define STREAM_MAGIC 0x53545245414d2121ULL

DBL_API int cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags)
{
  (void)flags;
  if (!s) return 1; /* cudaErrorInvalidValue */
  dbl_stream* st = calloc(1, sizeof(dbl_stream));
  if (!st) return 2; /* cudaErrorMemoryAllocation */
  st->magic = STREAM_MAGIC;
  dbl_reg_add(st, K_STREAM, sizeof(dbl_stream));
  *s = (cudaStream_t)st;
  return 0;
}

DBL_API int cudaStreamDestroy(cudaStream_t s)
{
  dbl_stream* st = (dbl_stream*)s;
  if (dbl_reg_find(st, NULL) != K_STREAM) {
    dbl_violation("cudaStreamDestroy of %p, which is not a live stream", (void*)s);
    return 400; /* cudaErrorInvalidResourceHandle */
  }
  /* Work still queued completes before the stream is released. */
  flush_key((uintptr_t)s);
  dbl_reg_remove(st, K_STREAM, NULL, NULL);
  st->magic = 0;
  free(st);
  return 0;
}

DBL_API int cudaStreamSynchronize(cudaStream_t s)
{
  flush_key(stream_key(s));
  return 0;
}

DBL_API int cudaDeviceSynchronize(void)
{
  dbl_stream_flush_all();
  return 0;
}

DBL_API int64_t cuvsdouble_pending_ops(void) { return atomic_load(&g_pending); }

typedef struct {
  uint64_t magic;
  unsigned int flags;
  uintptr_t key; /* the stream recorded on, 0 before the first record */
} dbl_event;

#define EVENT_MAGIC 0x4556454e54212121ULL
#define EVENT_BLOCKING_SYNC 0x01u

static atomic_llong g_event_waits[2]; /* [blocking]: waits on events */

static dbl_event* live_event(void* e, const char* fn)
{
  if (dbl_reg_find(e, NULL) != K_EVENT) {
    dbl_violation("%s of %p, which is not a live event", fn, e);
    return NULL;
  }
  return (dbl_event*)e;
}

DBL_API int cudaEventCreateWithFlags(void** e, unsigned int flags)
{
  if (!e) return 1; /* cudaErrorInvalidValue */
  dbl_event* ev = calloc(1, sizeof(dbl_event));
  if (!ev) return 2; /* cudaErrorMemoryAllocation */
  ev->magic = EVENT_MAGIC;
  ev->flags = flags;
  dbl_reg_add(ev, K_EVENT, sizeof(dbl_event));
  *e = ev;
  return 0;
}

DBL_API int cudaEventRecord(void* e, cudaStream_t s)
{
  dbl_event* ev = live_event(e, "cudaEventRecord");
  if (!ev) return 400; /* cudaErrorInvalidResourceHandle */
  ev->key = stream_key(s);
  return 0;
}

DBL_API int cudaEventSynchronize(void* e)
{
  dbl_event* ev = live_event(e, "cudaEventSynchronize");
  if (!ev) return 400;
  if (ev->key) flush_key(ev->key);
  atomic_fetch_add(&g_event_waits[(ev->flags & EVENT_BLOCKING_SYNC) ? 1 : 0], 1);
  return 0;
}

DBL_API int cudaEventDestroy(void* e)
{
  dbl_event* ev = live_event(e, "cudaEventDestroy");
  if (!ev) return 400;
  dbl_reg_remove(ev, K_EVENT, NULL, NULL);
  ev->magic = 0;
  free(ev);
  return 0;
}

DBL_API int64_t cuvsdouble_event_waits(int blocking) { return atomic_load(&g_event_waits[blocking ? 1 : 0]); }

/* ------------------------------------------------------------------------ */
/* the H200 delay model (CUVS_DOUBLE_MODEL=h200)                            */

/* CAGRA search + sync on an H200 (N = 100k, D = 128, degree 32, itopk 64;
 * CUVS_C_API.md's last section), p50 in µs by batch size and concurrent
 * callers, for each kernel.
 *
 * Single-CTA (libcuvs v26.06.00; 1 / 4 / 16 callers; v26.08.01 within 14%):
 *   batch 1: 341 / 351 / 370     64: 380 / 411 / 829
 *         4: 349 / 366 / 378    256: 409 / 821 / 3285
 *        16: 370 / 372 / 417   1024: 592 / 2069 / 8274
 * Fitted (within ~7% of every cell): a batch of b queries with c searches in
 * flight (itself included) takes
 *   (base(b)^3 + work(b, c)^3)^(1/3) + 1.9 (c - 1)
 * with base(b) = 341 + 0.25 b (one search alone), work = c b / cap(b) when
 * c > 1 (the GPU's share: cap(b) = 1.25 queries/µs up to b = 512, rising
 * linearly to 1.98 at 1024; 0 alone), and 1.9 µs per other caller
 * (host-side contention).
 *
 * Multi-CTA (libcuvs v26.08.01, internal/cbench -algo multi, 2026-12-02;
 * 1 / 2 / 4 / 8 callers):
 *   batch 1: 203 / 209 / 217 / 237 (32 callers: 833, 64: 1675)
 *        32: 231 / 241 / 257 / 288    256: 252 / 445 / 858 / 1733
 *        64: 234 / 255 / 271 / 462    512: 310 / 555 / 1085 / 2171
 *       128: 237 / 257 / 447 / 907   1024: 468 / 842 / 1667 / 3301
 * Fitted (within ~12%):
 *   (base(b)^4 + work(b, c)^4 + rate(m)^4)^(1/4)
 * with base(b) = 213 + 0.24 b, work = c b / cap(b) when c > 1 (cap 1.15
 * queries/µs up to b = 256, 1.85 at 512, 2.45 at 1024, linear between) and
 * rate = 27 µs per multi-CTA search in flight (m, itself included): the
 * real library ran at most ~38k multi-CTA searches a second, from 16 to 64
 * callers, whatever the batch. */

static atomic_int g_model = -1; /* -1: not read yet; 0: off; 1: h200 */
static atomic_int g_model_inflight = 0;
static atomic_int g_model_multi = 0; /* multi-CTA searches in flight */
static atomic_llong g_model_charged[2]; /* searches slept for: single-CTA, multi-CTA */

static int model_on(void)
{
  int m = atomic_load(&g_model);
  if (m < 0) {
    const char* v = getenv("CUVS_DOUBLE_MODEL");
    m = v && strcmp(v, "h200") == 0;
    const char* inst = getenv("CUVS_DOUBLE_INSTANT");
    if (inst && strcmp(inst, "1") == 0) atomic_store(&dbl_instant, 1);
    atomic_store(&g_model, m);
  }
  return m;
}

static double model_single_us(int64_t b, int c)
{
  double base = 341.0 + 0.25 * (double)b;
  double cap = b <= 512 ? 1.25 : 1.25 + (double)(b > 1024 ? 512 : b - 512) / 512.0 * 0.73;
  /* Alone, a search has the GPU to itself: its cost is base(b). */
  double work = c > 1 ? (double)c * (double)b / cap : 0.0;
  return cbrt(base * base * base + work * work * work) + 1.9 * (double)(c - 1);
}

static double model_multi_us(int64_t b, int c, int m)
{
  double base = 213.0 + 0.24 * (double)b;
  double cap = b <= 256 ? 1.15
               : b <= 512 ? 1.15 + (double)(b - 256) / 256.0 * 0.70
                          : 1.85 + (double)(b > 1024 ? 512 : b - 512) / 512.0 * 0.60;
  double work = c > 1 ? (double)c * (double)b / cap : 0.0;
  double rate = 27.0 * (double)m;
  return sqrt(sqrt(base * base * base * base + work * work * work * work + rate * rate * rate * rate));
}

double dbl_model_delay_us(int64_t b, int c, int m)
{
  if (b < 1) b = 1;
  if (c < 1) c = 1;
  if (m > c) m = c;
  return m > 0 ? model_multi_us(b, c, m) : model_single_us(b, c);
}

void dbl_model_begin(int64_t batch, int multi)
{
  if (!model_on()) return;
  atomic_fetch_add(&g_model_charged[multi ? 1 : 0], 1);
  int c = atomic_fetch_add(&g_model_inflight, 1) + 1;
  int m = multi ? atomic_fetch_add(&g_model_multi, 1) + 1 : 0;
  double us = dbl_model_delay_us(batch, c, m);
  struct timespec ts = {.tv_sec = (time_t)(us / 1e6), .tv_nsec = (long)((us - (double)(time_t)(us / 1e6) * 1e6) * 1e3)};
  while (nanosleep(&ts, &ts) != 0) {
  }
  if (multi) atomic_fetch_sub(&g_model_multi, 1);
  atomic_fetch_sub(&g_model_inflight, 1);
}

DBL_API void cuvsdouble_set_model(int on) { atomic_store(&g_model, on ? 1 : 0); }
DBL_API int64_t cuvsdouble_model_searches(int multi)
{
  return atomic_load(&g_model_charged[multi ? 1 : 0]);
}

DBL_API double cuvsdouble_model_delay_us(int64_t batch, int concurrent, int multi)
{
  return dbl_model_delay_us(batch, concurrent, multi);
}
