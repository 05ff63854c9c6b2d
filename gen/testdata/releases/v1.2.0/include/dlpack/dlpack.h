// A DLPack-shaped header written for the generator's tests: the same kinds
// of declarations as the real dlpack.h (anonymous typedef'd enums and
// structs, a tagged struct with a function-pointer member), nothing more.
#ifndef FIXTURE_DLPACK_H
#define FIXTURE_DLPACK_H

#include <stdint.h>
#include <stddef.h>

#define DLPACK_VERSION 80

typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLFloat = 2U,
} DLDataTypeCode;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#endif
