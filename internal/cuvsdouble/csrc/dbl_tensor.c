/*
 * cuvsdouble tensors: the DLPack checks cuVS makes (same order, same words),
 * and element access. Every tensor, whatever its device type, is read as host
 * memory through dl_tensor.data; like cuVS, byte_offset is ignored.
 */
#include "dbl.h"

#include <math.h>

int dl_dev_compat(const DLTensor* t)
{
  int d = t->device.device_type;
  return d == kDLCUDAManaged || d == kDLCUDAHost || d == kDLCUDA;
}

int dl_host_compat(const DLTensor* t)
{
  int d = t->device.device_type;
  return d == kDLCUDAManaged || d == kDLCUDAHost || d == kDLCPU;
}

int dl_c_contig(const DLTensor* t)
{
  if (!t->strides) return 1;
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->strides[i] != expected) return 0;
    expected *= t->shape[i];
  }
  return 1;
}

int dl_f_contig(const DLTensor* t)
{
  if (!t->strides) return 0;
  int64_t expected = 1;
  for (int i = 0; i < t->ndim; i++) {
    if (t->strides[i] != expected) return 0;
    expected *= t->shape[i];
  }
  return 1;
}

size_t dl_elem_size(DLDataType dt) { return (size_t)((dt.bits * dt.lanes + 7) / 8); }

int64_t dl_numel(const DLTensor* t)
{
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

int dl_is_dtype(DLDataType dt, int code, int bits) { return dt.code == code && dt.bits == bits; }

cuvsError_t dl_check_ptr(const DLManagedTensor* mt, const char* what)
{
  if (!mt) {
    dbl_violation("NULL DLManagedTensor* for %s (the real library would crash)", what);
    return RAFT_FAIL("cuvsdouble: NULL DLManagedTensor* for %s", what);
  }
  const DLTensor* t = &mt->dl_tensor;
  if (t->ndim < 0 || (t->ndim > 0 && !t->shape)) {
    dbl_violation("%s: ndim %d with shape %p (the real library would crash)", what, t->ndim,
                  (void*)t->shape);
    return RAFT_FAIL("cuvsdouble: %s has ndim %d and no shape", what, t->ndim);
  }
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0) {
      dbl_violation("%s: negative extent %lld", what, (long long)t->shape[i]);
      return RAFT_FAIL("cuvsdouble: %s has a negative extent", what);
    }
  }
  if (t->byte_offset != 0) {
    dbl_violation("%s: byte_offset %llu is ignored by cuVS (fold it into data)", what,
                  (unsigned long long)t->byte_offset);
  }
  return CUVS_SUCCESS;
}

cuvsError_t dl_view(const DLManagedTensor* mt, int layout, int code, int bits, int where, int ndim)
{
  const DLTensor* t = &mt->dl_tensor;
  if (layout == LAYOUT_ROW) {
    EXPECTS(dl_c_contig(t), "Expected a row-major matrix");
  } else {
    EXPECTS(dl_f_contig(t), "Expected a col-major matrix");
  }
  EXPECTS(code == t->dtype.code, "code mismatch between return mdspan (%i) and DLTensor (%i)",
          code, (int)t->dtype.code);
  EXPECTS(bits == t->dtype.bits, "bits mismatch between return mdspan (%i) and DLTensor (%i)",
          bits, (int)t->dtype.bits);
  EXPECTS(t->dtype.lanes == 1, "lanes mismatch between return mdspan and DLTensor");
  if (where == WANT_DEVICE) {
    EXPECTS(dl_dev_compat(t), "device_type mismatch between return mdspan and DLTensor");
  } else {
    EXPECTS(dl_host_compat(t), "device_type mismatch between return mdspan and DLTensor");
  }
  EXPECTS(ndim == t->ndim, "ndim mismatch between return mdspan and DLTensor");
  if (dl_numel(t) > 0 && t->data == NULL) {
    dbl_violation("tensor with %lld elements and a NULL data pointer", (long long)dl_numel(t));
    return RAFT_FAIL("cuvsdouble: NULL data pointer");
  }
  return CUVS_SUCCESS;
}

static size_t extent_bytes(const DLTensor* t)
{
  int64_t n = dl_numel(t);
  if (n <= 0) return 0;
  if (!t->strides) return (size_t)n * dl_elem_size(t->dtype);
  int64_t last = 0;
  for (int i = 0; i < t->ndim; i++) last += (t->shape[i] - 1) * t->strides[i];
  return (size_t)(last + 1) * dl_elem_size(t->dtype);
}

cuvsError_t dl_strict(const DLTensor* t, const char* what)
{
  if (!atomic_load(&dbl_strict_device)) return CUVS_SUCCESS;
  size_t n = extent_bytes(t);
  if (n == 0) return CUVS_SUCCESS;
  dbl_entry e;
  int found = dbl_reg_containing(t->data, n, &e);
  int d = t->device.device_type;
  if (d == kDLCUDA || d == kDLCUDAManaged) {
    /* 26.08: an owning dataset's rows are device memory of the library's */
    if (!found || (e.kind != K_RMM DBL_R2608(&&e.kind != K_DATASET_STORAGE))) {
      return RAFT_FAIL(
        "cuvsdouble (strict device mode): %s is a device tensor whose %zu bytes at %p are not "
        "inside a live cuvsRMMAlloc allocation",
        what, n, t->data);
    }
    if (d == kDLCUDA && e.kind == K_RMM && e.device != dbl_current_device()) {
      /* Without peer access the real kernel faults (cudaErrorIllegalAddress). */
      dbl_violation("%s is memory of device %d, read with device %d current", what, e.device,
                    dbl_current_device());
      return RAFT_FAIL("cuvsdouble (strict device mode): %s is memory of device %d, used on device %d",
                       what, e.device, dbl_current_device());
    }
  } else if (d == kDLCUDAHost) {
    if (!found || e.kind != K_HOST) {
      return RAFT_FAIL(
        "cuvsdouble (strict device mode): %s is a kDLCUDAHost tensor whose %zu bytes at %p are "
        "not inside a live cuvsRMMHostAlloc allocation",
        what, n, t->data);
    }
  } else if (d == kDLCPU) {
    if (found && e.kind == K_RMM) {
      return RAFT_FAIL(
        "cuvsdouble (strict device mode): %s is labelled kDLCPU but points into device memory "
        "from cuvsRMMAlloc",
        what);
    }
  }
  return CUVS_SUCCESS;
}

float dl_half_to_float(uint16_t h)
{
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal */
      float f = ldexpf((float)man, -24);
      return (h & 0x8000) ? -f : f;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t dl_float_to_half(float f)
{
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return sign;
    man |= 0x800000;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t h = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (man >> 13);
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

void dl_load_row(const void* base, DLDataType dt, int64_t rs, int64_t cs, int64_t i, int64_t dim,
                 float* out)
{
  int64_t off = i * rs;
  if (dt.code == kDLFloat && dt.bits == 32) {
    const float* p = (const float*)base + off;
    if (cs == 1) {
      memcpy(out, p, (size_t)dim * sizeof(float));
    } else {
      for (int64_t j = 0; j < dim; j++) out[j] = p[j * cs];
    }
  } else if (dt.code == kDLFloat && dt.bits == 16) {
    const uint16_t* p = (const uint16_t*)base + off;
    for (int64_t j = 0; j < dim; j++) out[j] = dl_half_to_float(p[j * cs]);
  } else if (dt.code == kDLInt && dt.bits == 8) {
    const int8_t* p = (const int8_t*)base + off;
    for (int64_t j = 0; j < dim; j++) out[j] = (float)p[j * cs];
  } else if (dt.code == kDLUInt && dt.bits == 8) {
    const uint8_t* p = (const uint8_t*)base + off;
    for (int64_t j = 0; j < dim; j++) out[j] = (float)p[j * cs];
  } else if (dt.code == kDLFloat && dt.bits == 64) {
    const double* p = (const double*)base + off;
    for (int64_t j = 0; j < dim; j++) out[j] = (float)p[j * cs];
  } else {
    for (int64_t j = 0; j < dim; j++) out[j] = 0;
  }
}
