#pragma once
#include <stdint.h>
typedef enum { CUVS_ERROR = 0, CUVS_SUCCESS = 1 } cuvsError_t;
typedef struct {
  int64_t extents[4];
} cuvsShape;
