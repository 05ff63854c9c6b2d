/*
 * cuvsdouble CAGRA graph construction and graph search (dbl_cagra_graph.c),
 * shared by dbl_cagra.c only.
 */
#ifndef CUVSDOUBLE_DBL_CAGRA_GRAPH_H
#define CUVSDOUBLE_DBL_CAGRA_GRAPH_H

#include "dbl.h"

/* The id CAGRA writes where it has no result: the graph index type's
 * "invalid" value (all ones) with its most significant bit cleared, written
 * as is into uint32 and int64 neighbors alike. */
#define CG_SENTINEL_ID 0x7FFFFFFFu

/* Builds a CAGRA graph of `degree` neighbours per row: a kNN graph of
 * `intermediate` neighbours (self excluded) whose entries are perturbed as an
 * approximate kNN build would leave them, then pruned and merged with
 * reverse edges as cuVS's graph optimisation does. out holds n * degree ids.
 * Returns 0, or -1 on allocation failure. */
/* cagra::search's checks of its parameters for k neighbours (dbl_cagra.c) */
DBL_HIDDEN cuvsError_t cg_check_search_params(cuvsCagraSearchParams_t p, int64_t k, int filtered);

DBL_HIDDEN int cg_graph_build(const dbl_matrix* data, int metric, int64_t intermediate,
                              int64_t degree, uint32_t* out);

typedef struct {
  int64_t itopk;       /* internal top-k (already rounded up to 32) */
  int64_t width;       /* parents per iteration */
  int64_t min_iter, max_iter;
  int64_t samplings;   /* random samplings per seed slot */
  uint64_t xor_mask;   /* rand_xor_mask */
  int multi_cta;       /* emulate the multi-CTA kernel (several itopk-32 walks) */
  int64_t n_cta;
} cg_search_cfg;

/* Greedy graph search for every query (see dbl_cagra_graph.c). Writes k
 * results per query into nb32 or nb64 (row stride k) and dist; missing
 * results get CG_SENTINEL_ID and the sentinel distance. Returns 0 or -1. */
DBL_HIDDEN int cg_graph_search(const dbl_matrix* data, const uint32_t* graph, int64_t degree,
                               int metric, const dbl_filter* filter, const dbl_matrix* queries,
                               int64_t k, const cg_search_cfg* cfg, uint32_t* nb32, int64_t* nb64,
                               float* dist);

#endif
