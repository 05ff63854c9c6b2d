#pragma once
#include <stdint.h>
typedef enum { CUVS_ERROR = 0, CUVS_SUCCESS = 1 } cuvsError_t;
struct cuvsFlags {
  uint32_t on : 1;
  uint32_t rest : 31;
};
