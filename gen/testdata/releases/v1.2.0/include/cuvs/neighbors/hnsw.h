// Behind CUVS_BUILD_CAGRA_HNSWLIB, like cuVS's optional algorithms.
#pragma once

#include <cuvs/core/c_api.h>

CUVS_EXPORT cuvsError_t cuvsHnswProbe(cuvsResources_t res, uint64_t* count);
