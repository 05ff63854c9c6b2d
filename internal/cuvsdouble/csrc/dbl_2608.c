/*
 * cuvsdouble: what cuVS 26.08 added outside CAGRA, as its C sources
 * (tag v26.08.01) do it:
 *   - the Dataset API (c/src/neighbors/cagra.cpp cuvsDataset*, over
 *     cpp/include/cuvs/neighbors/common.hpp make_*_dataset[_view]): a
 *     cuvsDataset is a handle whose addr is an owner (a padded copy the
 *     library allocated) or a view of the caller's memory; an index built on
 *     either references its rows, never copies them;
 *   - cuvsSelectK (c/src/selection/select_k.cpp): the k smallest of one row,
 *     unsorted (cuVS passes sorted=false: the double returns them in input
 *     order).
 * The resources functions 26.08 added are in dbl_core.c, CAGRA's in
 * dbl_cagra_2608.inc. Compiled in the 26.08 build only.
 */
#include "dbl.h"

#if DBL_RELEASE >= 2608

#define DS_MAGIC 0x4441544153455444ULL

int64_t dbl_cagra_row_width(int64_t dim, size_t es)
{
  int64_t bytes = ((dim * (int64_t)es + 15) / 16) * 16;
  return es ? bytes / (int64_t)es : dim;
}

static int ds_dtype_ok(DLDataType dt)
{
  return dl_is_dtype(dt, kDLFloat, 32) || dl_is_dtype(dt, kDLFloat, 16) ||
         dl_is_dtype(dt, kDLInt, 8) || dl_is_dtype(dt, kDLUInt, 8);
}

static dbl_ds* ds_new(void)
{
  dbl_ds* s = dbl_buf_alloc(sizeof(dbl_ds));
  if (s) {
    memset(s, 0, sizeof *s);
    s->magic = DS_MAGIC;
  }
  return s;
}

dbl_ds* dbl_ds_new_owned(int64_t n, int64_t dim, int64_t stride, size_t es)
{
  dbl_ds* s = ds_new();
  if (!s) return NULL;
  size_t bytes = (size_t)(n * stride) * es;
  void* p = NULL;
  if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) {
    dbl_buf_free(s, sizeof *s);
    return NULL;
  }
  memset(p, 0, bytes ? bytes : 1);
  s->storage_id = dbl_reg_add(p, K_DATASET_STORAGE, bytes ? bytes : 1);
  dbl_count(K_DATASET_BYTES, 0, (int64_t)bytes);
  s->owned = p;
  s->owned_bytes = bytes;
  s->data = p;
  s->n = n;
  s->dim = dim;
  s->stride = stride;
  return s;
}

void dbl_ds_free(dbl_ds* s)
{
  if (!s) return;
  if (s->owned) {
    dbl_stream_flush_all(); /* no queued write may outlive its buffer */
    dbl_entry e;
    if (dbl_reg_remove(s->owned, K_DATASET_STORAGE, &e, NULL) == 0 && e.borrows > 0) {
      dbl_violation("cuvsDatasetDestroy of a dataset whose rows %lld CAGRA index(es) still "
                    "reference (cuVS frees them: the index dangles)",
                    (long long)e.borrows);
    }
    dbl_count(K_DATASET_BYTES, 1, (int64_t)s->owned_bytes);
    free(s->owned);
  }
  dbl_dev_give(&s->dev);
  s->magic = 0;
  dbl_buf_free(s, sizeof *s);
}

/* The destroy_addr of every dataset the double makes. */
static void ds_destroy_addr(void* addr) { dbl_ds_free((dbl_ds*)addr); }

int dbl_ds_fill(cuvsDataset_t* h, dbl_ds* s, DLDataType dt, int mem_type, int layout, int owning)
{
  cuvsDataset_t d = *h;
  if (!d) {
    d = calloc(1, sizeof *d);
    if (!d) return -1;
    dbl_reg_add(d, K_DATASET, sizeof *d);
  }
  d->addr = (uintptr_t)s;
  d->destroy_addr = ds_destroy_addr;
  d->dtype = dt;
  d->mem_type = (cuvsDatasetMemType_t)mem_type;
  d->layout = (cuvsDatasetLayout_t)layout;
  d->is_owning = owning != 0;
  *h = d;
  return 0;
}

cuvsError_t dbl_ds_get(cuvsDataset_t d, dbl_ds** out)
{
  *out = NULL;
  if (dbl_reg_find(d, NULL) != K_DATASET) {
    dbl_violation("invalid or destroyed cuvsDataset_t %p (the real library would crash)",
                  (void*)d);
    return RAFT_FAIL("cuvsdouble: invalid cuvsDataset_t %p", (void*)d);
  }
  if (d->addr == 0) return CUVS_SUCCESS;
  dbl_ds* s = (dbl_ds*)d->addr;
  if (s->magic != DS_MAGIC) {
    dbl_violation("cuvsDataset_t %p holds addr %#lx, which the library did not make", (void*)d,
                  (unsigned long)d->addr);
    return RAFT_FAIL("cuvsdouble: cuvsDataset_t %p holds foreign storage", (void*)d);
  }
  *out = s;
  return CUVS_SUCCESS;
}

uint64_t dbl_ds_borrow_id(const dbl_ds* s, size_t es)
{
  if (s->storage_id) return s->storage_id;
  size_t bytes = s->n > 0 ? (size_t)((s->n - 1) * s->stride + s->dim) * es : 0;
  dbl_entry e;
  if (bytes > 0 && dbl_reg_containing(s->data, bytes, &e)) return e.id;
  return 0;
}

/* ---- the Dataset API ---- */

DBL_API cuvsError_t cuvsDatasetCreate(cuvsDataset_t* dataset)
{
  DBL_ENTER(cuvsDatasetCreate);
  EXPECTS(dataset != NULL, "cuvsDatasetCreate: output handle must not be null");
  cuvsDataset_t d = calloc(1, sizeof *d);
  if (!d) return dbl_plain_fail("std::bad_alloc");
  d->mem_type = CUVS_DATASET_MEM_TYPE_DEVICE;
  d->layout = CUVS_DATASET_LAYOUT_STANDARD;
  d->is_owning = true;
  dbl_reg_add(d, K_DATASET, sizeof *d);
  *dataset = d;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsDatasetDestroy(cuvsDataset_t dataset)
{
  DBL_ENTER(cuvsDatasetDestroy);
  if (dataset == NULL) return dbl_ok();
  if (dbl_reg_remove(dataset, K_DATASET, NULL, NULL) != 0) {
    dbl_violation("destroying an invalid or already destroyed cuvsDataset_t %p (the real library "
                  "would crash)",
                  (void*)dataset);
    return RAFT_FAIL("cuvsdouble: invalid cuvsDataset_t %p", (void*)dataset);
  }
  if (dataset->destroy_addr != NULL && dataset->addr != 0) {
    dataset->destroy_addr((void*)dataset->addr);
  }
  free(dataset);
  return dbl_ok();
}

/* The source tensor's checks of from_dlpack<matrix_view<T const, int64_t,
 * row_major>> (device or host, as where says), after the caller's null and
 * dtype checks. */
static cuvsError_t ds_source(DLManagedTensor* t, int where, const char* what)
{
  TRY(dl_check_ptr(t, what));
  const DLTensor* d = &t->dl_tensor;
  TRY(dl_view(t, LAYOUT_ROW, d->dtype.code, d->dtype.bits, where, 2));
  TRY(dl_strict(d, what));
  return CUVS_SUCCESS;
}

static cuvsError_t ds_dtype(const DLTensor* d)
{
  if (!ds_dtype_ok(d->dtype)) {
    return RAFT_FAIL("Unsupported dataset DLtensor dtype: %d and bits: %d", (int)d->dtype.code,
                     (int)d->dtype.bits);
  }
  return CUVS_SUCCESS;
}

/* A kDLCUDA or kDLCUDAManaged tensor: what cudaPointerGetAttributes reports
 * as device or managed memory (pinned host memory is host memory to it). */
static int ds_device_memory(const DLTensor* d)
{
  return d->device.device_type == kDLCUDA || d->device.device_type == kDLCUDAManaged;
}

/* make_{device,host}_dense_row_major_dataset_from_src: a zero-padded copy in
 * rows of the required width. */
static cuvsError_t ds_copy(const DLTensor* d, int to_device, cuvsDataset_t* out)
{
  size_t es = dl_elem_size(d->dtype);
  int64_t n = d->shape[0], dim = d->shape[1];
  int64_t stride = dbl_cagra_row_width(dim, es);
  int device_src = ds_device_memory(d);
  if (to_device && device_src && dim == stride) {
    return RAFT_FAIL("source is device and stride is already correct. Use "
                     "make_device_padded_dataset_view() to get a view instead.");
  }
  if (!to_device && !device_src && dim == stride) {
    return RAFT_FAIL("source stride is already correct. Use make_host_padded_dataset_view() to "
                     "get a view instead.");
  }
  dbl_ds* s = dbl_ds_new_owned(n, dim, stride, es);
  if (!s) return dbl_plain_fail("std::bad_alloc");
  if (to_device) { /* device rows: taken from the device model (dbl_devmem.c) */
    cuvsError_t st = dbl_dev_take(s->owned_bytes, &s->dev);
    if (st != CUVS_SUCCESS) {
      dbl_ds_free(s);
      return st;
    }
  }
  for (int64_t i = 0; i < n; i++) {
    memcpy((char*)s->owned + (size_t)(i * stride) * es, (const char*)d->data + (size_t)(i * dim) * es,
           (size_t)dim * es);
  }
  *out = NULL;
  if (dbl_ds_fill(out, s, d->dtype, to_device ? CUVS_DATASET_MEM_TYPE_DEVICE : CUVS_DATASET_MEM_TYPE_HOST,
                  CUVS_DATASET_LAYOUT_PADDED, 1) != 0) {
    dbl_ds_free(s);
    return dbl_plain_fail("std::bad_alloc");
  }
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsDatasetMakePadded(cuvsResources_t res, DLManagedTensor* dataset,
                                          cuvsDatasetMemType_t target_mem_type,
                                          cuvsDataset_t* padded_dataset)
{
  DBL_ENTER(cuvsDatasetMakePadded);
  EXPECTS(dataset != NULL, "cuvsDatasetMakePadded: null input tensor");
  EXPECTS(padded_dataset != NULL, "cuvsDatasetMakePadded: null output dataset");
  *padded_dataset = NULL;
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = CUVS_SUCCESS;
  const DLTensor* d = &dataset->dl_tensor;
  st = ds_dtype(d);
  if (st == CUVS_SUCCESS) {
    if (target_mem_type == CUVS_DATASET_MEM_TYPE_DEVICE) {
      if (dl_dev_compat(d)) {
        st = ds_source(dataset, WANT_DEVICE, "dataset");
      } else if (dl_host_compat(d)) {
        st = ds_source(dataset, WANT_HOST, "dataset");
      } else {
        st = RAFT_FAIL("cuvsDatasetMakePadded: unsupported source tensor memory type");
      }
      if (st == CUVS_SUCCESS) st = ds_copy(d, 1, padded_dataset);
    } else if (target_mem_type == CUVS_DATASET_MEM_TYPE_HOST) {
      if (dl_host_compat(d)) {
        st = ds_source(dataset, WANT_HOST, "dataset");
      } else if (dl_dev_compat(d)) {
        st = ds_source(dataset, WANT_DEVICE, "dataset");
      } else {
        st = RAFT_FAIL("cuvsDatasetMakePadded: unsupported source tensor memory type");
      }
      if (st == CUVS_SUCCESS) st = ds_copy(d, 0, padded_dataset);
    } else {
      st = RAFT_FAIL("cuvsDatasetMakePadded: invalid target memory type");
    }
  }
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

/* A view of the caller's rows (C-contiguous: row width dim). padded: the
 * row width must already be the required one. */
static cuvsError_t ds_view(DLManagedTensor* dataset, int padded, const char* fn,
                           cuvsDataset_t* out)
{
  const DLTensor* d = &dataset->dl_tensor;
  TRY(ds_dtype(d));
  int device;
  if (dl_dev_compat(d)) {
    device = 1;
  } else if (dl_host_compat(d)) {
    device = 0;
  } else {
    return RAFT_FAIL("%s: unsupported tensor memory type", fn);
  }
  TRY(ds_source(dataset, device ? WANT_DEVICE : WANT_HOST, "dataset"));
  size_t es = dl_elem_size(d->dtype);
  int64_t n = d->shape[0], dim = d->shape[1];
  if (padded && dim != dbl_cagra_row_width(dim, es)) {
    if (device) {
      return RAFT_FAIL("make_device_padded_dataset_view: stride is incorrect (required stride for "
                       "alignment). Use make_device_padded_dataset() to get an owning padded copy.");
    }
    return RAFT_FAIL("make_host_padded_dataset_view: stride is incorrect (required stride for "
                     "alignment). Use make_host_padded_dataset() to get an owning padded copy.");
  }
  dbl_ds* s = ds_new();
  if (!s) return dbl_plain_fail("std::bad_alloc");
  s->data = d->data;
  s->n = n;
  s->dim = dim;
  s->stride = dim;
  if (dbl_ds_fill(out, s, d->dtype, device ? CUVS_DATASET_MEM_TYPE_DEVICE : CUVS_DATASET_MEM_TYPE_HOST,
                  padded ? CUVS_DATASET_LAYOUT_PADDED : CUVS_DATASET_LAYOUT_STANDARD, 0) != 0) {
    dbl_ds_free(s);
    return dbl_plain_fail("std::bad_alloc");
  }
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsDatasetMakePaddedView(cuvsResources_t res, DLManagedTensor* dataset,
                                              cuvsDataset_t* padded_dataset)
{
  DBL_ENTER(cuvsDatasetMakePaddedView);
  EXPECTS(dataset != NULL, "cuvsDatasetMakePaddedView: null input tensor");
  EXPECTS(padded_dataset != NULL, "cuvsDatasetMakePaddedView: null output view");
  *padded_dataset = NULL;
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = ds_view(dataset, 1, "cuvsDatasetMakePaddedView", padded_dataset);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

DBL_API cuvsError_t cuvsDatasetMakeStandardView(cuvsResources_t res, DLManagedTensor* dataset,
                                                cuvsDataset_t* standard_dataset)
{
  DBL_ENTER(cuvsDatasetMakeStandardView);
  EXPECTS(dataset != NULL, "cuvsDatasetMakeStandardView: null input tensor");
  EXPECTS(standard_dataset != NULL, "cuvsDatasetMakeStandardView: null output view");
  *standard_dataset = NULL;
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = ds_view(dataset, 0, "cuvsDatasetMakeStandardView", standard_dataset);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

static cuvsError_t ds_getter(cuvsDataset_t d, const void* out, const char* fn)
{
  if (d == NULL) return RAFT_FAIL("%s: null dataset", fn);
  if (out == NULL) return RAFT_FAIL("%s: null output", fn);
  dbl_ds* s;
  return dbl_ds_get(d, &s);
}

DBL_API cuvsError_t cuvsDatasetGetMemType(cuvsDataset_t dataset, cuvsDatasetMemType_t* mem_type)
{
  DBL_ENTER(cuvsDatasetGetMemType);
  TRY(ds_getter(dataset, mem_type, "cuvsDatasetGetMemType"));
  *mem_type = dataset->mem_type;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsDatasetGetLayout(cuvsDataset_t dataset, cuvsDatasetLayout_t* layout)
{
  DBL_ENTER(cuvsDatasetGetLayout);
  TRY(ds_getter(dataset, layout, "cuvsDatasetGetLayout"));
  *layout = dataset->layout;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsDatasetGetIsOwning(cuvsDataset_t dataset, bool* is_owning)
{
  DBL_ENTER(cuvsDatasetGetIsOwning);
  TRY(ds_getter(dataset, is_owning, "cuvsDatasetGetIsOwning"));
  *is_owning = dataset->is_owning;
  return dbl_ok();
}

DBL_API cuvsError_t cuvsDatasetGetDtype(cuvsDataset_t dataset, DLDataType* dtype)
{
  DBL_ENTER(cuvsDatasetGetDtype);
  TRY(ds_getter(dataset, dtype, "cuvsDatasetGetDtype"));
  *dtype = dataset->dtype;
  return dbl_ok();
}

/* ---- select_k ---- */

typedef struct {
  float v;
  int64_t i;
} sk_pair;

static int sk_cmp_val(const void* a, const void* b)
{
  const sk_pair *x = a, *y = b;
  if (x->v < y->v) return -1;
  if (x->v > y->v) return 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

static int sk_cmp_idx(const void* a, const void* b)
{
  const sk_pair *x = a, *y = b;
  return x->i < y->i ? -1 : x->i > y->i;
}

static cuvsError_t select_k(DLManagedTensor* in_val, DLManagedTensor* out_val,
                            DLManagedTensor* out_idx)
{
  EXPECTS(in_val != NULL && out_val != NULL && out_idx != NULL,
          "Tensors passed to cuvsSelectK must not be null");
  EXPECTS(in_val->dl_tensor.byte_offset == 0 && out_val->dl_tensor.byte_offset == 0 &&
            out_idx->dl_tensor.byte_offset == 0,
          "Tensors passed to cuvsSelectK must have a zero byte_offset");
  TRY(dl_check_ptr(in_val, "in_val"));
  TRY(dl_check_ptr(out_val, "out_val"));
  TRY(dl_check_ptr(out_idx, "out_idx"));
  TRY(dl_view(in_val, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_view(out_val, LAYOUT_ROW, kDLFloat, 32, WANT_DEVICE, 2));
  TRY(dl_view(out_idx, LAYOUT_ROW, kDLInt, 64, WANT_DEVICE, 2));
  const DLTensor *in = &in_val->dl_tensor, *ov = &out_val->dl_tensor, *oi = &out_idx->dl_tensor;
  EXPECTS(in->shape[0] == 1 && ov->shape[0] == 1 && oi->shape[0] == 1,
          "cuvsSelectK only supports a single row (batch_size == 1)");
  EXPECTS(ov->shape[1] == oi->shape[1],
          "out_val and out_idx passed to cuvsSelectK must have the same length");
  EXPECTS(ov->shape[1] <= in->shape[1], "k passed to cuvsSelectK must not exceed the input length");
  TRY(dl_strict(in, "in_val"));
  TRY(dl_strict(ov, "out_val"));
  TRY(dl_strict(oi, "out_idx"));
  int64_t n = in->shape[1], k = ov->shape[1];
  if (k == 0) return CUVS_SUCCESS;
  sk_pair* p = dbl_buf_alloc((size_t)n * sizeof *p);
  if (!p) return dbl_plain_fail("std::bad_alloc");
  const float* v = in->data;
  for (int64_t i = 0; i < n; i++) p[i] = (sk_pair){v[i], i};
  qsort(p, (size_t)n, sizeof *p, sk_cmp_val);
  qsort(p, (size_t)k, sizeof *p, sk_cmp_idx); /* unsorted output: input order */
  float* outv = ov->data;
  int64_t* outi = oi->data;
  for (int64_t j = 0; j < k; j++) {
    outv[j] = p[j].v;
    outi[j] = p[j].i;
  }
  dbl_buf_free(p, (size_t)n * sizeof *p);
  return CUVS_SUCCESS;
}

DBL_API cuvsError_t cuvsSelectK(cuvsResources_t res, DLManagedTensor* in_val,
                                DLManagedTensor* out_val, DLManagedTensor* out_idx)
{
  DBL_ENTER(cuvsSelectK);
  dbl_res* r;
  TRY(dbl_res_acquire(res, &r));
  cuvsError_t st = select_k(in_val, out_val, out_idx);
  if (st == CUVS_SUCCESS) dbl_async_outputs(r, out_val, out_idx);
  dbl_res_release(r);
  return st == CUVS_SUCCESS ? dbl_ok() : st;
}

#endif
