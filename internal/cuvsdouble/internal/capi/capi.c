#include "capi.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The last opened library's cudaDeviceSynchronize, for CopyOut. */
static int (*g_device_sync)(void);

void capi_device_sync(void)
{
  if (g_device_sync) g_device_sync();
}

struct capi_lib {
  void* h;
  const char* (*get_err)(void);
  void (*set_err)(const char*);
  int (*get_level)(void);
  void (*set_level)(int);
  int (*version)(uint16_t*, uint16_t*, uint16_t*);
  int (*res_create)(uintptr_t*);
  int (*res_destroy)(uintptr_t);
  int (*mg_create)(uintptr_t*);
  int (*mg_destroy)(uintptr_t);
  int (*stream_set)(uintptr_t, void*);
  int (*stream_get)(uintptr_t, void**);
  int (*stream_sync)(uintptr_t);
  int (*device_id)(uintptr_t, int*);
  int (*rmm_alloc)(uintptr_t, void**, size_t);
  int (*rmm_free)(uintptr_t, void*, size_t);
  int (*host_alloc)(void**, size_t);
  int (*host_free)(void*, size_t);
  int (*pool_enable)(int, int, bool);
  int (*pool_reset)(void);
  int (*matrix_copy)(uintptr_t, capi_managed*, capi_managed*);
  int (*matrix_slice)(uintptr_t, capi_managed*, int64_t, int64_t, capi_managed*);
  int (*bf_create)(capi_index**);
  int (*bf_destroy)(capi_index*);
  int (*bf_build)(uintptr_t, capi_managed*, int, float, capi_index*);
  int (*bf_search)(uintptr_t, capi_index*, capi_managed*, capi_managed*, capi_managed*,
                   capi_filter);
  int (*bf_serialize)(uintptr_t, const char*, capi_index*);
  int (*bf_deserialize)(uintptr_t, const char*, capi_index*);
  int (*from_hnsw)(void*, int64_t, int64_t, int, int, int, int);
  int (*cagra_create)(capi_index**);
  int (*cagra_destroy)(capi_index*);
  int (*cagra_build)(uintptr_t, void*, capi_managed*, capi_index*);
  int (*cagra_search)(uintptr_t, void*, capi_index*, capi_managed*, capi_managed*, capi_managed*,
                      capi_filter);
  int (*cagra_extend)(uintptr_t, void*, capi_managed*, capi_index*);
  int (*cagra_serialize)(uintptr_t, const char*, capi_index*, bool);
  int (*cagra_serialize_hnsw)(uintptr_t, const char*, capi_index*);
  int (*cagra_deserialize)(uintptr_t, const char*, capi_index*);
  int (*cagra_from_args)(uintptr_t, int, capi_managed*, capi_managed*, capi_index*);
  int (*cagra_merge)(uintptr_t, void*, capi_index**, size_t, capi_filter, capi_index*);
  int (*cagra_dims)(capi_index*, int64_t*);
  int (*cagra_size)(capi_index*, int64_t*);
  int (*cagra_degree)(capi_index*, int64_t*);
  int (*cagra_dataset)(capi_index*, capi_managed*);
  int (*cagra_graph)(capi_index*, capi_managed*);
};

#define SYM(field, name) *(void**)&l->field = dlsym(h, name)

capi_lib* capi_open(const char* path, char** err)
{
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *err = strdup(e ? e : "dlopen failed");
    return NULL;
  }
  capi_lib* l = calloc(1, sizeof *l);
  l->h = h;
  *(void**)&g_device_sync = dlsym(h, "cudaDeviceSynchronize");
  SYM(get_err, "cuvsGetLastErrorText");
  SYM(set_err, "cuvsSetLastErrorText");
  SYM(get_level, "cuvsGetLogLevel");
  SYM(set_level, "cuvsSetLogLevel");
  SYM(version, "cuvsVersionGet");
  SYM(res_create, "cuvsResourcesCreate");
  SYM(res_destroy, "cuvsResourcesDestroy");
  SYM(mg_create, "cuvsMultiGpuResourcesCreate");
  SYM(mg_destroy, "cuvsMultiGpuResourcesDestroy");
  SYM(stream_set, "cuvsStreamSet");
  SYM(stream_get, "cuvsStreamGet");
  SYM(stream_sync, "cuvsStreamSync");
  SYM(device_id, "cuvsDeviceIdGet");
  SYM(rmm_alloc, "cuvsRMMAlloc");
  SYM(rmm_free, "cuvsRMMFree");
  SYM(host_alloc, "cuvsRMMHostAlloc");
  SYM(host_free, "cuvsRMMHostFree");
  SYM(pool_enable, "cuvsRMMPoolMemoryResourceEnable");
  SYM(pool_reset, "cuvsRMMMemoryResourceReset");
  SYM(matrix_copy, "cuvsMatrixCopy");
  SYM(matrix_slice, "cuvsMatrixSliceRows");
  SYM(bf_create, "cuvsBruteForceIndexCreate");
  SYM(bf_destroy, "cuvsBruteForceIndexDestroy");
  SYM(bf_build, "cuvsBruteForceBuild");
  SYM(bf_search, "cuvsBruteForceSearch");
  SYM(bf_serialize, "cuvsBruteForceSerialize");
  SYM(bf_deserialize, "cuvsBruteForceDeserialize");
  SYM(from_hnsw, "cuvsCagraIndexParamsFromHnswParams");
  SYM(cagra_create, "cuvsCagraIndexCreate");
  SYM(cagra_destroy, "cuvsCagraIndexDestroy");
  SYM(cagra_build, "cuvsCagraBuild");
  SYM(cagra_search, "cuvsCagraSearch");
  SYM(cagra_extend, "cuvsCagraExtend");
  SYM(cagra_serialize, "cuvsCagraSerialize");
  SYM(cagra_serialize_hnsw, "cuvsCagraSerializeToHnswlib");
  SYM(cagra_deserialize, "cuvsCagraDeserialize");
  SYM(cagra_from_args, "cuvsCagraIndexFromArgs");
  SYM(cagra_merge, "cuvsCagraMerge");
  SYM(cagra_dims, "cuvsCagraIndexGetDims");
  SYM(cagra_size, "cuvsCagraIndexGetSize");
  SYM(cagra_degree, "cuvsCagraIndexGetGraphDegree");
  SYM(cagra_dataset, "cuvsCagraIndexGetDataset");
  SYM(cagra_graph, "cuvsCagraIndexGetGraph");
  return l;
}

void capi_close(capi_lib* l)
{
  if (!l) return;
  dlclose(l->h);
  free(l);
}

int capi_has(capi_lib* l, const char* name) { return dlsym(l->h, name) != NULL; }
void* capi_sym(capi_lib* l, const char* name) { return dlsym(l->h, name); }

char* capi_last_text(capi_lib* l)
{
  const char* e = l->get_err ? l->get_err() : NULL;
  return e ? strdup(e) : NULL;
}

void capi_set_last_text(capi_lib* l, const char* text)
{
  if (l->set_err) l->set_err(text);
}

static capi_ret fin(capi_lib* l, int st)
{
  capi_ret r = {st, NULL};
  const char* e = l->get_err ? l->get_err() : NULL;
  if (e) r.err = strdup(e);
  return r;
}

static const capi_ret missing = {-1, NULL};

#define CALL(field, ...) (l->field ? fin(l, l->field(__VA_ARGS__)) : missing)

capi_ret capi_version(capi_lib* l, uint16_t* ma, uint16_t* mi, uint16_t* pa)
{
  return CALL(version, ma, mi, pa);
}

int capi_get_log_level(capi_lib* l) { return l->get_level ? l->get_level() : -1; }
void capi_set_log_level(capi_lib* l, int level)
{
  if (l->set_level) l->set_level(level);
}

capi_ret capi_resources_create(capi_lib* l, uintptr_t* res, int multi)
{
  return multi ? CALL(mg_create, res) : CALL(res_create, res);
}
capi_ret capi_resources_destroy(capi_lib* l, uintptr_t res, int multi)
{
  return multi ? CALL(mg_destroy, res) : CALL(res_destroy, res);
}
capi_ret capi_stream_set(capi_lib* l, uintptr_t res, uintptr_t stream)
{
  return CALL(stream_set, res, (void*)stream);
}
capi_ret capi_stream_get(capi_lib* l, uintptr_t res, uintptr_t* stream)
{
  return CALL(stream_get, res, (void**)stream);
}
capi_ret capi_stream_sync(capi_lib* l, uintptr_t res) { return CALL(stream_sync, res); }
capi_ret capi_device_id(capi_lib* l, uintptr_t res, int* id) { return CALL(device_id, res, id); }
capi_ret capi_rmm_alloc(capi_lib* l, uintptr_t res, void** p, size_t n)
{
  return CALL(rmm_alloc, res, p, n);
}
capi_ret capi_rmm_free(capi_lib* l, uintptr_t res, void* p, size_t n)
{
  return CALL(rmm_free, res, p, n);
}
capi_ret capi_host_alloc(capi_lib* l, void** p, size_t n) { return CALL(host_alloc, p, n); }
capi_ret capi_host_free(capi_lib* l, void* p, size_t n) { return CALL(host_free, p, n); }
capi_ret capi_pool_enable(capi_lib* l, int a, int b, int managed)
{
  return CALL(pool_enable, a, b, managed != 0);
}
capi_ret capi_pool_reset(capi_lib* l) { return CALL(pool_reset); }
capi_ret capi_matrix_copy(capi_lib* l, uintptr_t res, capi_tensor* src, capi_tensor* dst)
{
  return CALL(matrix_copy, res, src ? &src->m : NULL, dst ? &dst->m : NULL);
}
capi_ret capi_matrix_slice(capi_lib* l, uintptr_t res, capi_tensor* src, int64_t a, int64_t b,
                           capi_tensor* dst)
{
  return CALL(matrix_slice, res, src ? &src->m : NULL, a, b, dst ? &dst->m : NULL);
}

static capi_filter mkfilter(capi_tensor* f, int type)
{
  capi_filter r = {f ? (uintptr_t)&f->m : 0, type};
  return r;
}

capi_ret capi_bf_create(capi_lib* l, capi_index** idx) { return CALL(bf_create, idx); }
capi_ret capi_bf_destroy(capi_lib* l, capi_index* idx) { return CALL(bf_destroy, idx); }
capi_ret capi_bf_build(capi_lib* l, uintptr_t res, capi_tensor* ds, int metric, float arg,
                       capi_index* idx)
{
  return CALL(bf_build, res, ds ? &ds->m : NULL, metric, arg, idx);
}
capi_ret capi_bf_search(capi_lib* l, uintptr_t res, capi_index* idx, capi_tensor* q,
                        capi_tensor* nb, capi_tensor* d, capi_tensor* filter, int ftype)
{
  return CALL(bf_search, res, idx, q ? &q->m : NULL, nb ? &nb->m : NULL, d ? &d->m : NULL,
              mkfilter(filter, ftype));
}
capi_ret capi_bf_serialize(capi_lib* l, uintptr_t res, const char* path, capi_index* idx)
{
  return CALL(bf_serialize, res, path, idx);
}
capi_ret capi_bf_deserialize(capi_lib* l, uintptr_t res, const char* path, capi_index* idx)
{
  return CALL(bf_deserialize, res, path, idx);
}

capi_ret capi_params_create(capi_lib* l, const char* kind, void** p)
{
  char name[128];
  snprintf(name, sizeof name, "cuvs%sCreate", kind);
  int (*fn)(void**) = NULL;
  *(void**)&fn = dlsym(l->h, name);
  return fn ? fin(l, fn(p)) : missing;
}

capi_ret capi_params_destroy(capi_lib* l, const char* kind, void* p)
{
  char name[128];
  snprintf(name, sizeof name, "cuvs%sDestroy", kind);
  int (*fn)(void*) = NULL;
  *(void**)&fn = dlsym(l->h, name);
  return fn ? fin(l, fn(p)) : missing;
}

capi_ret capi_from_hnsw(capi_lib* l, void* p, int64_t n, int64_t dim, int M, int ef, int heur,
                        int metric)
{
  return CALL(from_hnsw, p, n, dim, M, ef, heur, metric);
}

capi_ret capi_cagra_create(capi_lib* l, capi_index** idx) { return CALL(cagra_create, idx); }
capi_ret capi_cagra_destroy(capi_lib* l, capi_index* idx) { return CALL(cagra_destroy, idx); }
capi_ret capi_cagra_build(capi_lib* l, uintptr_t res, void* params, capi_tensor* ds,
                          capi_index* idx)
{
  return CALL(cagra_build, res, params, ds ? &ds->m : NULL, idx);
}
capi_ret capi_cagra_search(capi_lib* l, uintptr_t res, void* params, capi_index* idx,
                           capi_tensor* q, capi_tensor* nb, capi_tensor* d, capi_tensor* filter,
                           int ftype)
{
  return CALL(cagra_search, res, params, idx, q ? &q->m : NULL, nb ? &nb->m : NULL,
              d ? &d->m : NULL, mkfilter(filter, ftype));
}
capi_ret capi_cagra_extend(capi_lib* l, uintptr_t res, void* params, capi_tensor* add,
                           capi_index* idx)
{
  return CALL(cagra_extend, res, params, add ? &add->m : NULL, idx);
}
capi_ret capi_cagra_serialize(capi_lib* l, uintptr_t res, const char* path, capi_index* idx,
                              int include)
{
  return CALL(cagra_serialize, res, path, idx, include != 0);
}
capi_ret capi_cagra_serialize_hnsw(capi_lib* l, uintptr_t res, const char* path, capi_index* idx)
{
  return CALL(cagra_serialize_hnsw, res, path, idx);
}
capi_ret capi_cagra_deserialize(capi_lib* l, uintptr_t res, const char* path, capi_index* idx)
{
  return CALL(cagra_deserialize, res, path, idx);
}
capi_ret capi_cagra_from_args(capi_lib* l, uintptr_t res, int metric, capi_tensor* graph,
                              capi_tensor* ds, capi_index* idx)
{
  return CALL(cagra_from_args, res, metric, graph ? &graph->m : NULL, ds ? &ds->m : NULL, idx);
}
capi_ret capi_cagra_merge(capi_lib* l, uintptr_t res, void* params, capi_index** idx, size_t n,
                          capi_tensor* filter, int ftype, capi_index* out)
{
  return CALL(cagra_merge, res, params, idx, n, mkfilter(filter, ftype), out);
}
capi_ret capi_cagra_get(capi_lib* l, capi_index* idx, int which, int64_t* out)
{
  switch (which) {
    case 0: return CALL(cagra_dims, idx, out);
    case 1: return CALL(cagra_size, idx, out);
    default: return CALL(cagra_degree, idx, out);
  }
}
capi_ret capi_cagra_view(capi_lib* l, capi_index* idx, int which, capi_tensor* out)
{
  return which == 0 ? CALL(cagra_dataset, idx, &out->m) : CALL(cagra_graph, idx, &out->m);
}

void capi_call_deleter(capi_tensor* t)
{
  if (t->m.deleter) t->m.deleter(&t->m);
}
