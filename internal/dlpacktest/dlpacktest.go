// Package dlpacktest makes DLPack tensors the way a foreign producer does, in
// C memory with a C deleter, for the tests of package dlpack: it counts
// deleter calls and can call a deleter from a thread Go did not create. It is
// test support only and does not import dlpack.
package dlpacktest

/*
#cgo CFLAGS: -I${SRCDIR}/../../generated
#cgo LDFLAGS: -lpthread
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "cuvs_decls.h"

// What a producer keeps per tensor. The deleter frees the originals, not what
// the struct's fields hold at the time, so tests may corrupt the fields.
typedef struct {
	long calls;
	void* alloc;
	int64_t* shape;
	int64_t* strides;
} dlpt_ctx;

static void dlpt_deleter(DLManagedTensor* self) {
	dlpt_ctx* ctx = (dlpt_ctx*)self->manager_ctx;
	__atomic_add_fetch(&ctx->calls, 1, __ATOMIC_SEQ_CST);
	free(ctx->alloc);
	free(ctx->shape);
	free(ctx->strides);
	ctx->alloc = NULL;
	ctx->shape = NULL;
	ctx->strides = NULL;
	free(self);
}

static DLManagedTensor* dlpt_new(dlpt_ctx* ctx, size_t nbytes, uint64_t offset, int32_t ndim, int has_strides) {
	DLManagedTensor* t = calloc(1, sizeof(DLManagedTensor));
	ctx->alloc = calloc(1, nbytes + offset + 1);
	ctx->shape = calloc(ndim > 0 ? ndim : 1, sizeof(int64_t));
	ctx->strides = has_strides ? calloc(ndim > 0 ? ndim : 1, sizeof(int64_t)) : NULL;
	t->dl_tensor.data = ctx->alloc;
	t->dl_tensor.byte_offset = offset;
	t->dl_tensor.ndim = ndim;
	t->dl_tensor.shape = ctx->shape;
	t->dl_tensor.strides = ctx->strides;
	t->manager_ctx = ctx;
	t->deleter = dlpt_deleter;
	return t;
}

static long dlpt_calls(dlpt_ctx* ctx) { return __atomic_load_n(&ctx->calls, __ATOMIC_SEQ_CST); }

static void* dlpt_run_deleter(void* arg) {
	DLManagedTensor* t = (DLManagedTensor*)arg;
	t->deleter(t);
	return NULL;
}

static int dlpt_delete_on_new_thread(DLManagedTensor* t) {
	pthread_t th;
	int rc = pthread_create(&th, NULL, dlpt_run_deleter, t);
	if (rc != 0) return rc;
	return pthread_join(th, NULL);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
)

// Spec describes a tensor to make in C memory.
type Spec struct {
	Device     generated.DLDevice
	DType      generated.DLDataType
	Shape      []int64
	Strides    []int64 // nil: a NULL strides pointer
	ByteOffset uint64  // the data starts this many bytes into the allocation
	Data       []byte  // copied to the data; the allocation is len(Data) bytes (plus the offset)
}

// CTensor is a DLManagedTensor made as a C producer would make it.
type CTensor struct {
	MT  *generated.DLManagedTensor
	ctx *C.dlpt_ctx
}

// New makes a tensor from spec. Free its counter with Free once done.
func New(spec Spec) *CTensor {
	ctx := (*C.dlpt_ctx)(C.calloc(1, C.size_t(unsafe.Sizeof(C.dlpt_ctx{}))))
	mt := C.dlpt_new(ctx, C.size_t(len(spec.Data)), C.uint64_t(spec.ByteOffset), C.int32_t(len(spec.Shape)), boolInt(spec.Strides != nil))
	t := &CTensor{MT: (*generated.DLManagedTensor)(unsafe.Pointer(mt)), ctx: ctx}
	dl := &t.MT.DlTensor
	dl.Device = spec.Device
	dl.Dtype = spec.DType
	copy(unsafe.Slice(dl.Shape, max(len(spec.Shape), 1)), spec.Shape)
	if spec.Strides != nil {
		copy(unsafe.Slice(dl.Strides, max(len(spec.Strides), 1)), spec.Strides)
	}
	copy(unsafe.Slice((*byte)(dl.Data), len(spec.Data)+int(spec.ByteOffset))[spec.ByteOffset:], spec.Data)
	return t
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// DeleterCalls returns how many times the deleter ran.
func (t *CTensor) DeleterCalls() int { return int(C.dlpt_calls(t.ctx)) }

// Delete calls the deleter, as a producer's capsule destructor would.
func (t *CTensor) Delete() { C.dlpt_deleter((*C.DLManagedTensor)(unsafe.Pointer(t.MT))) }

// Free releases the deleter counter; call it after the deleter ran.
func (t *CTensor) Free() { C.free(unsafe.Pointer(t.ctx)) }

// DeleteOnNewThread calls mt's deleter from a thread created by C, and waits
// for it.
func DeleteOnNewThread(mt *generated.DLManagedTensor) error {
	if rc := C.dlpt_delete_on_new_thread((*C.DLManagedTensor)(unsafe.Pointer(mt))); rc != 0 {
		return fmt.Errorf("pthread: %d", rc)
	}
	return nil
}

// Malloc returns n bytes of zeroed C memory, e.g. to stand for device memory
// (the tests never dereference it); release it with Release.
func Malloc(n int) unsafe.Pointer { return C.calloc(1, C.size_t(max(n, 1))) }

// Release frees memory from Malloc.
func Release(p unsafe.Pointer) { C.free(p) }

// Layout returns the C compiler's size of DLManagedTensor and offsets of its
// members, to check the Go mirror against.
func Layout() (size, tensor, ctx, deleter uintptr) {
	var t C.DLManagedTensor
	return unsafe.Sizeof(t), unsafe.Offsetof(t.dl_tensor), unsafe.Offsetof(t.manager_ctx), unsafe.Offsetof(t.deleter)
}
