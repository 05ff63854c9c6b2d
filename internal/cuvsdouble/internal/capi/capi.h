/*
 * capi: a tiny caller of the libcuvs_c ABI for the test double's own tests.
 * The types below are this package's own mirror of the ABI (DLPack 0.8 and
 * the cuVS structs it uses); the functions are reached through dlsym, and
 * each wrapper copies the last error text in the same C call.
 */
#ifndef CUVSDOUBLE_CAPI_H
#define CUVSDOUBLE_CAPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  int32_t device_type;
  int32_t device_id;
} capi_device;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} capi_dtype;

typedef struct {
  void* data;
  capi_device device;
  int32_t ndim;
  capi_dtype dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} capi_dltensor;

typedef struct capi_managed {
  capi_dltensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct capi_managed*);
} capi_managed;

/* a managed tensor with room for its own shape and strides */
typedef struct {
  capi_managed m;
  int64_t shape[4];
  int64_t strides[4];
} capi_tensor;

typedef struct {
  uintptr_t addr;
  capi_dtype dtype;
} capi_index;

typedef struct {
  uintptr_t addr;
  int type;
} capi_filter;

typedef struct {
  int metric;
  size_t intermediate_graph_degree;
  size_t graph_degree;
  int build_algo;
  size_t nn_descent_niter;
  void* compression;
  void* graph_build_params;
} capi_cagra_index_params;

typedef struct {
  void* ivf_pq_build_params;
  void* ivf_pq_search_params;
  float refinement_rate;
} capi_ivf_pq_params;

typedef struct {
  uint32_t pq_bits;
  uint32_t pq_dim;
  uint32_t vq_n_centers;
  uint32_t kmeans_n_iters;
  double vq_kmeans_trainset_fraction;
  double pq_kmeans_trainset_fraction;
} capi_compression_params;

typedef struct {
  size_t npartitions;
  size_t ef_construction;
  const char* build_dir;
  bool use_disk;
  double max_host_memory_gb;
  double max_gpu_memory_gb;
} capi_ace_params;

typedef struct {
  uint32_t max_chunk_size;
} capi_extend_params;

typedef struct {
  size_t max_queries;
  size_t itopk_size;
  size_t max_iterations;
  int algo;
  size_t team_size;
  size_t search_width;
  size_t min_iterations;
  size_t thread_block_size;
  int hashmap_mode;
  size_t hashmap_min_bitlen;
  float hashmap_max_fill_rate;
  uint32_t num_random_samplings;
  uint64_t rand_xor_mask;
  bool persistent;
  float persistent_lifetime;
  float persistent_device_usage;
} capi_search_params;

typedef struct {
  int metric;
  float metric_arg;
  bool add_data_on_build;
  uint32_t n_lists;
  uint32_t kmeans_n_iters;
  double kmeans_trainset_fraction;
  uint32_t pq_bits;
  uint32_t pq_dim;
  int codebook_kind;
  bool force_random_rotation;
  bool conservative_memory_allocation;
  uint32_t max_train_points_per_pq_code;
  int codes_layout;
} capi_ivf_pq_index_params;

typedef struct {
  uint32_t n_probes;
  int lut_dtype;
  int internal_distance_dtype;
  int coarse_search_dtype;
  uint32_t max_internal_batch_size;
  double preferred_shmem_carveout;
} capi_ivf_pq_search_params;

typedef struct {
  int metric;
  float metric_arg;
  size_t graph_degree;
  size_t intermediate_graph_degree;
  size_t max_iterations;
  float termination_threshold;
  bool return_distances;
  int dist_comp_dtype;
} capi_nnd_params;

typedef struct {
  int st; /* 1 success, 0 error, -1 symbol missing */
  char* err;
} capi_ret;

typedef struct capi_lib capi_lib;
/* dlsym in the opened library (NULL when it lacks the symbol) */
void* capi_sym(capi_lib* l, const char* name);

capi_lib* capi_open(const char* path, char** err);
void capi_device_sync(void);
void capi_close(capi_lib* l);
int capi_has(capi_lib* l, const char* name);

/* error text, read in its own call (tests lock the OS thread) */
char* capi_last_text(capi_lib* l);
void capi_set_last_text(capi_lib* l, const char* text);

capi_ret capi_version(capi_lib* l, uint16_t* ma, uint16_t* mi, uint16_t* pa);
int capi_get_log_level(capi_lib* l);
void capi_set_log_level(capi_lib* l, int level);

capi_ret capi_resources_create(capi_lib* l, uintptr_t* res, int multi);
capi_ret capi_resources_destroy(capi_lib* l, uintptr_t res, int multi);
capi_ret capi_stream_set(capi_lib* l, uintptr_t res, uintptr_t stream);
capi_ret capi_stream_get(capi_lib* l, uintptr_t res, uintptr_t* stream);
capi_ret capi_stream_sync(capi_lib* l, uintptr_t res);
capi_ret capi_device_id(capi_lib* l, uintptr_t res, int* id);
capi_ret capi_rmm_alloc(capi_lib* l, uintptr_t res, void** p, size_t n);
capi_ret capi_rmm_free(capi_lib* l, uintptr_t res, void* p, size_t n);
capi_ret capi_host_alloc(capi_lib* l, void** p, size_t n);
capi_ret capi_host_free(capi_lib* l, void* p, size_t n);
capi_ret capi_pool_enable(capi_lib* l, int a, int b, int managed);
capi_ret capi_pool_reset(capi_lib* l);
capi_ret capi_matrix_copy(capi_lib* l, uintptr_t res, capi_tensor* src, capi_tensor* dst);
capi_ret capi_matrix_slice(capi_lib* l, uintptr_t res, capi_tensor* src, int64_t a, int64_t b,
                           capi_tensor* dst);

capi_ret capi_bf_create(capi_lib* l, capi_index** idx);
capi_ret capi_bf_destroy(capi_lib* l, capi_index* idx);
capi_ret capi_bf_build(capi_lib* l, uintptr_t res, capi_tensor* ds, int metric, float arg,
                       capi_index* idx);
capi_ret capi_bf_search(capi_lib* l, uintptr_t res, capi_index* idx, capi_tensor* q,
                        capi_tensor* nb, capi_tensor* d, capi_tensor* filter, int ftype);
capi_ret capi_bf_serialize(capi_lib* l, uintptr_t res, const char* path, capi_index* idx);
capi_ret capi_bf_deserialize(capi_lib* l, uintptr_t res, const char* path, capi_index* idx);

/* kind: "CagraIndexParams", "CagraCompressionParams", "AceParams",
 * "CagraExtendParams", "CagraSearchParams", "IvfPqIndexParams",
 * "IvfPqSearchParams", "NNDescentIndexParams" */
capi_ret capi_params_create(capi_lib* l, const char* kind, void** p);
capi_ret capi_params_destroy(capi_lib* l, const char* kind, void* p);
capi_ret capi_from_hnsw(capi_lib* l, void* p, int64_t n, int64_t dim, int M, int ef, int heur,
                        int metric);

capi_ret capi_cagra_create(capi_lib* l, capi_index** idx);
capi_ret capi_cagra_destroy(capi_lib* l, capi_index* idx);
capi_ret capi_cagra_build(capi_lib* l, uintptr_t res, void* params, capi_tensor* ds,
                          capi_index* idx);
capi_ret capi_cagra_search(capi_lib* l, uintptr_t res, void* params, capi_index* idx,
                           capi_tensor* q, capi_tensor* nb, capi_tensor* d, capi_tensor* filter,
                           int ftype);
capi_ret capi_cagra_extend(capi_lib* l, uintptr_t res, void* params, capi_tensor* add,
                           capi_index* idx);
capi_ret capi_cagra_serialize(capi_lib* l, uintptr_t res, const char* path, capi_index* idx,
                              int include);
capi_ret capi_cagra_serialize_hnsw(capi_lib* l, uintptr_t res, const char* path,
                                   capi_index* idx);
capi_ret capi_cagra_deserialize(capi_lib* l, uintptr_t res, const char* path, capi_index* idx);
capi_ret capi_cagra_from_args(capi_lib* l, uintptr_t res, int metric, capi_tensor* graph,
                              capi_tensor* ds, capi_index* idx);
capi_ret capi_cagra_merge(capi_lib* l, uintptr_t res, void* params, capi_index** idx, size_t n,
                          capi_tensor* filter, int ftype, capi_index* out);
/* which: 0 dims, 1 size, 2 graph degree */
capi_ret capi_cagra_get(capi_lib* l, capi_index* idx, int which, int64_t* out);
/* which: 0 dataset, 1 graph */
capi_ret capi_cagra_view(capi_lib* l, capi_index* idx, int which, capi_tensor* out);

void capi_call_deleter(capi_tensor* t);

#endif
