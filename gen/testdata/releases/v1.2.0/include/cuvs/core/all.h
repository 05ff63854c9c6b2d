#pragma once

#include <cuvs/core/c_config.h>
#include <cuvs/core/export.h>
#include <cuvs/core/c_api.h>
#include <cuvs/neighbors/common.h>
#include <cuvs/neighbors/tree.h>

#ifdef CUVS_BUILD_CAGRA_HNSWLIB
#include <cuvs/neighbors/hnsw.h>
#endif
