// A tiny stand-in for libcuvs_c, built by the loader tests: a handful of
// functions with the real signatures (from generated/cuvs_decls.h), a
// thread-local error text like the real library's, and everything else
// absent so that missing symbols can be tested.
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

cuvsError_t cuvsVersionGet(uint16_t* major, uint16_t* minor, uint16_t* patch) {
  *major = 26;
  *minor = 6;
  *patch = 0;
  err_set = 0;
  return CUVS_SUCCESS;
}

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
