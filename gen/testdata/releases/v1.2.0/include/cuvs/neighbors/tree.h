// Release 1.2 of the fixture (gen/testdata/releases): against 1.0, the
// params lose a member (another layout), merge takes one more parameter,
// serialize is replaced by serialize_graph, the algo enum gains a value, a
// layout enum is new, and the index struct gains a tag (same layout).
//
// The params and index shapes: a named struct with a pointer typedef, an
// anonymous index struct with a pointer typedef, nested handles, an untyped
// void* member, a const char* member, bool/float/double/size_t members, a
// tagged enum used as a member, arrays of handles and by-value structs.
#pragma once

#include <cuvs/core/c_api.h>
#include <cuvs/neighbors/common.h>
#include <dlpack/dlpack.h>
#include <stdbool.h>
#include <stdint.h>

enum cuvsTreeAlgo {
  AUTO = 0,
  GREEDY = 1,
  EXACT = 2,
  HYBRID = 3,
};

typedef enum { ROW_MAJOR = 0, COL_MAJOR = 1 } cuvsTreeLayout;

struct cuvsTreeCompression {
  uint32_t pq_bits;
  double ratio;
};
typedef struct cuvsTreeCompression* cuvsTreeCompression_t;

struct cuvsTreeParams {
  enum cuvsTreeAlgo algo;
  size_t depth;
  bool balanced;
  float slack;
  void* algo_params;
  const char* scratch_dir;
  int8_t level_bias;
};
typedef struct cuvsTreeParams* cuvsTreeParams_t;

typedef struct cuvsTreeIndex {
  uintptr_t addr;
  DLDataType dtype;
} cuvsTreeIndex;
typedef cuvsTreeIndex* cuvsTreeIndex_t;

CUVS_EXPORT cuvsError_t cuvsTreeParamsCreate(cuvsTreeParams_t* params);
CUVS_EXPORT cuvsError_t cuvsTreeParamsDestroy(cuvsTreeParams_t params);
CUVS_EXPORT cuvsError_t cuvsTreeIndexCreate(cuvsTreeIndex_t* index);
CUVS_EXPORT cuvsError_t cuvsTreeBuild(cuvsResources_t res, cuvsTreeParams_t params,
                                      DLManagedTensor* dataset, cuvsTreeIndex_t index);
CUVS_EXPORT cuvsError_t cuvsTreeSearch(cuvsResources_t res, cuvsTreeIndex_t index,
                                       DLManagedTensor* queries, DLManagedTensor* neighbors,
                                       cuvsFilter filter);
CUVS_EXPORT cuvsError_t cuvsTreeMerge(cuvsResources_t res, cuvsTreeIndex_t* indices,
                                      size_t num_indices, DLManagedTensor* merged_dataset,
                                      cuvsTreeIndex_t output);
CUVS_EXPORT cuvsError_t cuvsTreeGetSize(cuvsTreeIndex_t index, int64_t* size, uint32_t* degree);
CUVS_EXPORT cuvsError_t cuvsTreeSerializeGraph(cuvsResources_t res, const char* filename,
                                               cuvsTreeIndex_t index, cuvsTreeLayout layout);
