// A tiny stand-in for libcuvs_c, built by the loader tests: a handful of
// functions with the real signatures (from generated/cuvs_decls.h), a
// thread-local error text like the real library's, and everything else
// absent so that missing symbols can be tested. TINY_MAJOR, TINY_MINOR and
// TINY_PATCH choose the version it reports (26.06.00 by default); with
// TINY_NO_VERSION it has no cuvsVersionGet.
#include <stdio.h>
#include <string.h>

#include "cuvs_decls.h"

static __thread char err_text[128];
static __thread int err_set;

const char* cuvsGetLastErrorText(void) { return err_set ? err_text : NULL; }

void cuvsSetLastErrorText(const char* error) {
  err_set = error != NULL;
  if (error) snprintf(err_text, sizeof err_text, "%s", error);
}

#ifndef TINY_MAJOR
#define TINY_MAJOR 26
#endif
#ifndef TINY_MINOR
#define TINY_MINOR 6
#endif
#ifndef TINY_PATCH
#define TINY_PATCH 0
#endif

#ifndef TINY_NO_VERSION
cuvsError_t cuvsVersionGet(uint16_t* major, uint16_t* minor, uint16_t* patch) {
  *major = TINY_MAJOR;
  *minor = TINY_MINOR;
  *patch = TINY_PATCH;
  err_set = 0;
  return CUVS_SUCCESS;
}
#endif

// In every release, with a struct whose layout differs (26.06: 56 bytes,
// 26.08: 48): fills the members both layouts share, so a test can read them
// through the Go type of the loaded release.
static union {
  struct cuvsCagraIndexParams v2606;
  struct cuvsCagraIndexParams_v2608 v2608;
} params;

cuvsError_t cuvsCagraIndexParamsCreate(cuvsCagraIndexParams_t* p) {
  memset(&params, 0, sizeof params);
  params.v2606.intermediate_graph_degree = 100 + TINY_MINOR;
  params.v2606.graph_degree = 200 + TINY_MINOR;
  *p = &params.v2606;
  err_set = 0;
  return CUVS_SUCCESS;
}

#if TINY_MAJOR > 26 || TINY_MAJOR == 26 && TINY_MINOR >= 8
// Only in 26.08 and later.
cuvsError_t cuvsRMMAsyncMemoryResourceEnable(void) {
  err_set = 0;
  return CUVS_SUCCESS;
}
#endif

// Fails for odd sizes with a text naming the size, so a test can check the
// text it gets back belongs to its own call.
cuvsError_t cuvsRMMAlloc(cuvsResources_t res, void** ptr, size_t bytes) {
  (void)res;
  if (bytes % 2 == 1) {
    snprintf(err_text, sizeof err_text, "cannot allocate %zu bytes", bytes);
    err_set = 1;
    return CUVS_ERROR;
  }
  *ptr = NULL;
  err_set = 0;
  return CUVS_SUCCESS;
}

static cuvsLogLevel_t level = CUVS_LOG_LEVEL_INFO;

cuvsLogLevel_t cuvsGetLogLevel(void) { return level; }
void cuvsSetLogLevel(cuvsLogLevel_t l) { level = l; }
