#pragma once
#include <stdint.h>
typedef enum { CUVS_ERROR = 0, CUVS_SUCCESS = 1 } cuvsError_t;
cuvsError_t cuvsLogf(const char* format, ...);
