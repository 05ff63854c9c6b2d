/*
 * cuvsdouble IVF core, shared by IVF-Flat and IVF-SQ (dbl_kmeans.c): a
 * small deterministic k-means, inverted lists, the coarse search that probes
 * only the n_probes nearest lists, and 8-bit scalar quantisation of the
 * residuals as cuVS's IVF-SQ does. No GPU: every list is host memory.
 */
#ifndef CUVSDOUBLE_DBL_IVF_H
#define CUVSDOUBLE_DBL_IVF_H

#include "dbl.h"

/* The metrics both IVF scans implement (cuVS v26.06's interleaved scans:
 * IVF-Flat also takes the *Unexpanded L2 forms, treated as L2 here). */
DBL_HIDDEN int ivf_metric_ok(int metric, int sq);
DBL_HIDDEN int ivf_larger_is_better(int metric);
/* The metric's distance of two float vectors (L2: squared; L2Sqrt: root;
 * InnerProduct: the dot product; Cosine: 1 - cos). */
DBL_HIDDEN float ivf_distance(int metric, const float* a, const float* b, int64_t dim);

typedef struct {
  uint64_t magic;
  int sq;           /* 0 IVF-Flat, 1 IVF-SQ */
  DLDataType dtype; /* element type of the vectors it was built from */
  int metric;
  float metric_arg;
  int64_t dim;
  uint32_t n_lists;
  int adaptive_centers, cma;
  float* centers; /* n_lists x dim */
  int has_norms;  /* IVF-SQ: center norms exist once rows were added */
  float *vmin, *delta; /* IVF-SQ: per-dimension quantiser */
  /* rows, in insertion order: label, id, and the vector (IVF-Flat: floats
   * exactly as given; IVF-SQ: one code byte per dimension) */
  int64_t size, cap;
  uint32_t* labels;
  int64_t* ids;
  float* vecs;
  uint8_t* codes;
  int hollow; /* built in instant mode: shape only */
  /* IVF-Flat: what cuVS would hold on the device (dbl_ivf_flat.c): the
   * centers and list bookkeeping, and the lists at their capacity. */
  dbl_dev_block dev_fixed, dev_lists;
  pthread_rwlock_t lock;
} ivf_impl;

DBL_HIDDEN ivf_impl* ivf_new(int sq, DLDataType dt, int metric, float metric_arg, int64_t dim,
                             uint32_t n_lists);
DBL_HIDDEN void ivf_free(ivf_impl* impl);

/* Trains the centers on n_train rows of the dataset (rows picked evenly),
 * with n_iters Lloyd iterations from evenly spaced initial rows; IVF-SQ
 * also trains its quantiser on the same rows' residuals. */
DBL_HIDDEN int ivf_train(ivf_impl* impl, const dbl_matrix* data, int64_t n_train, uint32_t n_iters);
/* Adds rows to their nearest lists with ids (or, ids NULL, size+i). */
DBL_HIDDEN int ivf_add(ivf_impl* impl, const dbl_matrix* data, const int64_t* ids);
/* Searches nq queries: probes the n_probes nearest lists of each. Slots
 * left empty get distance +Inf (-Inf for inner product) and, for IVF-SQ,
 * id INT64_MAX; for IVF-Flat, the id of the first row stored in the first
 * non-empty probed list (INT64_MAX if none), as cuVS leaves them (read from
 * ivf_flat_search.cuh, ivf_sq_search.cuh, ivf_common.cuh; measured on an
 * H200 for L2). */
DBL_HIDDEN int ivf_search(ivf_impl* impl, const dbl_matrix* queries, uint32_t n_probes, int64_t k,
                          const dbl_filter* filter, int64_t filter_bits, int64_t* nb, float* dist);
/* Writes/reads the double's own payload after a prefix. */
DBL_HIDDEN int ivf_write(FILE* f, const ivf_impl* impl);
DBL_HIDDEN ivf_impl* ivf_read(FILE* f, int sq);

/* .npy scalars, as raft's serialize_scalar writes them. */
DBL_HIDDEN int ivf_npy_write(FILE* f, const char* descr, uint64_t v, int size);
DBL_HIDDEN int ivf_npy_read(FILE* f, int size, uint64_t* v);

/* Fills a caller's DLManagedTensor with a view of n_lists x dim float32
 * centers in "device" memory, shape from dbl_meta_alloc and a deleter that
 * frees it, as cuVS's to_dlpack does. */
DBL_HIDDEN cuvsError_t ivf_centers_view(ivf_impl* impl, DLManagedTensor* out);

/* A params struct handed to a build or search: made by the matching Create
 * (registry kind), or a plain struct of the caller's. */
DBL_HIDDEN cuvsError_t ivf_check_plain(const void* p, int kind, const char* name);
DBL_HIDDEN cuvsError_t ivf_plain_destroy(void* p, int kind, const char* name);

#endif
