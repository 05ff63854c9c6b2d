#pragma once
#include <stdint.h>
typedef enum { CUVS_ERROR = 0, CUVS_SUCCESS = 1 } cuvsError_t;
typedef union {
  int32_t i;
  float f;
} cuvsScalar;
