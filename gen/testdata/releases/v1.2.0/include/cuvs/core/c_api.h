// Core shapes: an integer handle, an anonymous typedef'd status enum whose
// success value is 1, functions with empty parentheses and void results,
// out-parameters of several integer types, void**, cudaStream_t and
// cudaStream_t*.
#pragma once

#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <stdbool.h>
#include <stdint.h>

#include <cuvs/core/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CUVS_ERROR = 0, CUVS_SUCCESS = 1 } cuvsError_t;

typedef enum {
  LEVEL_QUIET = 0,
  LEVEL_LOUD,
} cuvsLogLevel_t;

typedef uintptr_t cuvsResources_t;

CUVS_EXPORT const char* cuvsGetLastErrorText();
CUVS_EXPORT void cuvsSetLastErrorText(const char* error);
CUVS_EXPORT cuvsLogLevel_t cuvsGetLogLevel(void);
CUVS_EXPORT void cuvsSetLogLevel(cuvsLogLevel_t);
CUVS_EXPORT cuvsError_t cuvsResourcesCreate(cuvsResources_t* res);
CUVS_EXPORT cuvsError_t cuvsStreamSet(cuvsResources_t res, cudaStream_t stream);
CUVS_EXPORT cuvsError_t cuvsStreamGet(cuvsResources_t res, cudaStream_t* stream);
CUVS_EXPORT cuvsError_t cuvsDeviceIdGet(cuvsResources_t res, int* device_id);
CUVS_EXPORT cuvsError_t cuvsRMMAlloc(cuvsResources_t res, void** ptr, size_t bytes);
CUVS_EXPORT cuvsError_t cuvsVersionGet(uint16_t* major, uint16_t* minor, uint16_t* patch);
CUVS_EXPORT cuvsError_t cuvsRMMPoolEnable(int initial_percent, int max_percent, bool managed);
CUVS_EXPORT cuvsError_t cuvsDataTypeCheck(cudaDataType_t type, double alpha, float beta);

#ifdef __cplusplus
}
#endif
