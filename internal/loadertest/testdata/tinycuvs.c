// A tiny stand-in for libcuvs_c, built by the loader tests: a handful of
// functions with the real signatures (from generated/cuvs_decls.h), a
// thread-local error text like the real library's, and everything else
// absent so that missing symbols can be tested. TINY_MAJOR, TINY_MINOR and
// TINY_PATCH choose the version it reports (26.06.00 by default); with
// TINY_NO_VERSION it has no cuvsVersionGet. It is compiled with
// CUVSGO_RELEASE set to the release whose ABI it implements (2606 or 2608),
// so cuvs_decls.h declares that release's functions under their C names.
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

// In every release, with a struct whose layout differs: struct
// cuvsCagraIndexParams is the layout of the release compiled for.
static struct cuvsCagraIndexParams params;
_Static_assert(sizeof params == (CUVSGO_RELEASE >= 2608 ? 48 : 56), "cuvsCagraIndexParams of the release");

cuvsError_t cuvsCagraIndexParamsCreate(cuvsCagraIndexParams_t* p) {
  memset(&params, 0, sizeof params);
  params.intermediate_graph_degree = 100 + TINY_MINOR;
  params.graph_degree = 200 + TINY_MINOR;
  *p = &params;
  err_set = 0;
  return CUVS_SUCCESS;
}

// In every release, with another signature in 26.08: fails with a text
// saying which one it is.
#if CUVSGO_RELEASE >= 2608
cuvsError_t cuvsCagraBuild(cuvsResources_t res, cuvsCagraIndexParams_t p, cuvsDataset_t dataset,
                           cuvsCagraIndex_t index) {
  (void)res, (void)p, (void)dataset, (void)index;
  snprintf(err_text, sizeof err_text, "26.08 build from a cuvsDataset_t");
#else
cuvsError_t cuvsCagraBuild(cuvsResources_t res, cuvsCagraIndexParams_t p, DLManagedTensor* dataset,
                           cuvsCagraIndex_t index) {
  (void)res, (void)p, (void)dataset, (void)index;
  snprintf(err_text, sizeof err_text, "26.06 build from a DLManagedTensor");
#endif
  err_set = 1;
  return CUVS_ERROR;
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
