/*
 * In-place rewrites of cuVS's Hellinger and KL divergence distances
 * (distance/detail/distance.cuh, distance_impl, both releases), shared by
 * the double's brute-force search and pairwise distance. cuVS takes square
 * roots of x and y (of their union, once, when the two overlap) for
 * Hellinger, and logarithms of y for KL divergence (not when x == y; 0
 * stays 0), runs the distance kernel on the rewritten values, and queues the
 * undoing (squares; exponentials, 0 staying 0, so that 1 comes back as 0)
 * on the stream after it. The double rewrites the same memory at the call,
 * in the element type's own arithmetic (rounding included), and queues the
 * undoing on the stream (dbl_async_restore): until the stream is
 * synchronized, a reader on another stream sees the rewritten values, as it
 * would on the GPU.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dbl.h"

static float rw_f32(int op, float x)
{
  switch (op) {
    case DBL_RW_SQRT: return sqrtf(x);
    case DBL_RW_SQUARE: return x * x;
    case DBL_RW_LOG: return x == 0 ? 0.0f : logf(x);
    case DBL_RW_EXP: return x == 0 ? 0.0f : expf(x);
  }
  return x;
}

static double rw_f64(int op, double x)
{
  switch (op) {
    case DBL_RW_SQRT: return sqrt(x);
    case DBL_RW_SQUARE: return x * x;
    case DBL_RW_LOG: return x == 0 ? 0.0 : log(x);
    case DBL_RW_EXP: return x == 0 ? 0.0 : exp(x);
  }
  return x;
}

static void rw_map(void* p, DLDataType dt, int64_t count, int op)
{
  if (dt.bits == 64) {
    double* v = p;
    for (int64_t i = 0; i < count; i++) v[i] = rw_f64(op, v[i]);
  } else if (dt.bits == 16) {
    uint16_t* h = p;
    for (int64_t i = 0; i < count; i++) h[i] = dl_float_to_half(rw_f32(op, dl_half_to_float(h[i])));
  } else {
    float* v = p;
    for (int64_t i = 0; i < count; i++) v[i] = rw_f32(op, v[i]);
  }
}

/* rw_spans splits x (nx elements) and y (ny; y may be NULL) into the spans
 * to rewrite, each element once: their union when they overlap. */
static int rw_spans(void* x, int64_t nx, void* y, int64_t ny, size_t es, char* p[2], int64_t n[2])
{
  char *xb = x, *xe = xb + (size_t)nx * es;
  if (!y) {
    p[0] = xb, n[0] = nx;
    return 1;
  }
  char *yb = y, *ye = yb + (size_t)ny * es;
  if (xb < ye && yb < xe) {
    char* lo = xb < yb ? xb : yb;
    char* hi = xe > ye ? xe : ye;
    p[0] = lo, n[0] = (int64_t)((size_t)(hi - lo) / es);
    return 1;
  }
  p[0] = xb, n[0] = nx, p[1] = yb, n[1] = ny;
  return 2;
}

void dbl_rewrite(void* x, int64_t nx, void* y, int64_t ny, DLDataType dt, int op)
{
  char* p[2];
  int64_t n[2];
  int spans = rw_spans(x, nx, y, ny, dt.bits / 8, p, n);
  for (int i = 0; i < spans; i++) rw_map(p[i], dt, n[i], op);
}

void dbl_rewrite_undo(cudaStream_t s, void* x, int64_t nx, void* y, int64_t ny, DLDataType dt, int op)
{
  size_t es = dt.bits / 8;
  char* p[2];
  int64_t n[2];
  int spans = rw_spans(x, nx, y, ny, es, p, n);
  for (int i = 0; i < spans; i++) {
    size_t bytes = (size_t)n[i] * es;
    char* buf = malloc(bytes ? bytes : 1);
    if (!buf) { /* undo now */
      rw_map(p[i], dt, n[i], op);
      continue;
    }
    memcpy(buf, p[i], bytes);
    rw_map(buf, dt, n[i], op);
    if (!dbl_async_restore(s, p[i], buf, bytes)) { /* memory the GPU would write at once */
      memcpy(p[i], buf, bytes);
      free(buf);
    }
  }
}
