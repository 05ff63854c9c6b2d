// Package cudart opens the CUDA runtime's device functions at run time
// (dlopen: building needs no CUDA headers or libraries) and sets the calling
// OS thread's current device around the safe layer's C calls.
//
// Four functions are required: cudaGetDeviceCount, cudaSetDevice,
// cudaGetDevice and cudaGetErrorString. The current device is per OS
// thread: callers hold the thread (runtime.LockOSThread) between Enter and
// Leave. cudaStreamCreateWithFlags and cudaStreamDestroy are bound too when
// the runtime has them (every CUDA runtime does): NewStream and
// DestroyStream; cudaMemGetInfo too when the runtime has it (MemInfo).
package cudart

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*cudart_count_fn)(int*);
typedef int (*cudart_set_fn)(int);
typedef int (*cudart_get_fn)(int*);
typedef const char* (*cudart_errstr_fn)(int);
typedef int (*cudart_stream_create_fn)(void**, unsigned int);
typedef int (*cudart_stream_destroy_fn)(void*);
typedef int (*cudart_event_create_fn)(void**, unsigned int);
typedef int (*cudart_event_record_fn)(void*, void*);
typedef int (*cudart_event_sync_fn)(void*);
typedef int (*cudart_event_destroy_fn)(void*);
typedef int (*cudart_mem_info_fn)(size_t*, size_t*);
typedef int (*cudart_malloc_fn)(void**, size_t);
typedef int (*cudart_free_fn)(void*);

static cudart_count_fn cudart_count;
static cudart_set_fn cudart_set;
static cudart_get_fn cudart_get;
static cudart_errstr_fn cudart_errstr;
static cudart_stream_create_fn cudart_stream_create;   // NULL when the runtime lacks it
static cudart_stream_destroy_fn cudart_stream_destroy; // NULL when the runtime lacks it
// The event functions, all four or none (NULL).
static cudart_event_create_fn cudart_event_create;
static cudart_event_record_fn cudart_event_record;
static cudart_event_sync_fn cudart_event_sync;
static cudart_event_destroy_fn cudart_event_destroy;
static cudart_mem_info_fn cudart_mem_info; // NULL when the runtime lacks it
// cudaMalloc and cudaFree, both or none (NULL).
static cudart_malloc_fn cudart_malloc;
static cudart_free_fn cudart_free;
void* cudart_handle; // the library opened, for gpucheck.go

// Opens path (RTLD_NOLOAD: only if the process already has it) and binds the
// four functions. Returns NULL, or why not (dlerror's text or a static one).
// The handle is kept for the life of the process: the pointers stay valid.
static const char* cudart_open(const char* path, int noload) {
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | (noload ? RTLD_NOLOAD : 0));
	if (!h) {
		const char* e = dlerror();
		return e ? e : "dlopen failed";
	}
	cudart_count_fn c = (cudart_count_fn)dlsym(h, "cudaGetDeviceCount");
	cudart_set_fn s = (cudart_set_fn)dlsym(h, "cudaSetDevice");
	cudart_get_fn g = (cudart_get_fn)dlsym(h, "cudaGetDevice");
	cudart_errstr_fn e = (cudart_errstr_fn)dlsym(h, "cudaGetErrorString");
	if (!c || !s || !g || !e) {
		dlclose(h);
		return "cudaGetDeviceCount, cudaSetDevice, cudaGetDevice or cudaGetErrorString is missing";
	}
	cudart_count = c;
	cudart_set = s;
	cudart_get = g;
	cudart_errstr = e;
	cudart_stream_create = (cudart_stream_create_fn)dlsym(h, "cudaStreamCreateWithFlags");
	cudart_stream_destroy = (cudart_stream_destroy_fn)dlsym(h, "cudaStreamDestroy");
	if (!cudart_stream_create || !cudart_stream_destroy) {
		cudart_stream_create = NULL;
		cudart_stream_destroy = NULL;
	}
	cudart_event_create = (cudart_event_create_fn)dlsym(h, "cudaEventCreateWithFlags");
	cudart_event_record = (cudart_event_record_fn)dlsym(h, "cudaEventRecord");
	cudart_event_sync = (cudart_event_sync_fn)dlsym(h, "cudaEventSynchronize");
	cudart_event_destroy = (cudart_event_destroy_fn)dlsym(h, "cudaEventDestroy");
	if (!cudart_event_create || !cudart_event_record || !cudart_event_sync || !cudart_event_destroy) {
		cudart_event_create = NULL;
		cudart_event_record = NULL;
		cudart_event_sync = NULL;
		cudart_event_destroy = NULL;
	}
	cudart_mem_info = (cudart_mem_info_fn)dlsym(h, "cudaMemGetInfo");
	cudart_malloc = (cudart_malloc_fn)dlsym(h, "cudaMalloc");
	cudart_free = (cudart_free_fn)dlsym(h, "cudaFree");
	if (!cudart_malloc || !cudart_free) {
		cudart_malloc = NULL;
		cudart_free = NULL;
	}
	cudart_handle = h;
	return NULL;
}

static int cudart_device_count(int* n) { return cudart_count(n); }
static int cudart_set_device(int d) { return cudart_set(d); }
static int cudart_get_device(int* d) { return cudart_get(d); }
static const char* cudart_error_string(int rc) { return cudart_errstr(rc); }
static int cudart_has_streams(void) { return cudart_stream_create != NULL; }

// cudaStreamNonBlocking: the stream does not synchronize with the legacy
// default stream.
static int cudart_new_stream(uintptr_t* s) {
	void* p = NULL;
	int rc = cudart_stream_create(&p, 0x01);
	*s = (uintptr_t)p;
	return rc;
}
static int cudart_free_stream(uintptr_t s) { return cudart_stream_destroy((void*)s); }

static int cudart_has_events(void) { return cudart_event_create != NULL; }

static int cudart_has_mem_info(void) { return cudart_mem_info != NULL; }
static int cudart_has_malloc(void) { return cudart_malloc != NULL; }
static int cudart_do_malloc(uintptr_t* p, uint64_t bytes) {
	void* q = NULL;
	int rc = cudart_malloc(&q, (size_t)bytes);
	*p = (uintptr_t)q;
	return rc;
}
static int cudart_do_free(uintptr_t p) { return cudart_free((void*)p); }
static int cudart_get_mem_info(uint64_t* free_b, uint64_t* total_b) {
	size_t f = 0, t = 0;
	int rc = cudart_mem_info(&f, &t);
	*free_b = f;
	*total_b = t;
	return rc;
}

// cudaEventBlockingSync | cudaEventDisableTiming: a thread waiting for the
// event sleeps until the GPU signals it, instead of spinning.
static int cudart_new_event(uintptr_t* e) {
	void* p = NULL;
	int rc = cudart_event_create(&p, 0x01 | 0x02);
	*e = (uintptr_t)p;
	return rc;
}
static int cudart_free_event(uintptr_t e) { return cudart_event_destroy((void*)e); }

// One cgo call: records e on s and waits for it. Returns 0, or the failed
// call's error code times 2 plus which call failed (0 cudaEventRecord, 1
// cudaEventSynchronize): no pointer argument, so that the Go side
// allocates nothing.
static int cudart_wait_event(uintptr_t e, uintptr_t s) {
	int rc = cudart_event_record((void*)e, (void*)s);
	if (rc != 0) return rc * 2;
	rc = cudart_event_sync((void*)e);
	return rc != 0 ? rc * 2 + 1 : 0;
}

// One cgo call for the hot path: makes d current unless it already is.
// *prev gets the device that was current (-1 when cudaGetDevice failed);
// *which says which call failed (0 cudaGetDevice, 1 cudaSetDevice).
static int cudart_enter(int d, int* prev, int* which) {
	*prev = -1;
	*which = 0;
	int rc = cudart_get(prev);
	if (rc != 0) return rc;
	if (*prev == d) return 0;
	*which = 1;
	return cudart_set(d);
}
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Candidate is a library to try: a file name or path for dlopen. NoLoad
// takes it only if the process has it loaded already (RTLD_NOLOAD): used
// for the cuVS library, whose own CUDA runtime is the one to steer.
type Candidate struct {
	Path   string
	NoLoad bool
}

// Error is a failed CUDA runtime call.
type Error struct {
	Func string // e.g. "cudaSetDevice"
	Code int    // cudaError_t
	Text string // cudaGetErrorString's
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (CUDA error %d)", e.Func, e.Text, e.Code)
}

// OpenError says why no candidate could be opened.
type OpenError struct {
	Tried   []string
	Reasons []string
}

func (e *OpenError) Error() string {
	var b strings.Builder
	b.WriteString("no CUDA runtime with cudaSetDevice could be opened:")
	for i, p := range e.Tried {
		fmt.Fprintf(&b, "\n  %s: %s", p, e.Reasons[i])
	}
	return b.String()
}

var (
	mu   sync.Mutex
	path atomic.Pointer[string] // set once a candidate opened
)

// Open opens the first candidate that has the four functions. Once one has
// opened, later calls do nothing and return nil. Failures are not
// remembered: a later Open tries again.
func Open(cands []Candidate) error {
	if path.Load() != nil {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	if path.Load() != nil {
		return nil
	}
	oe := &OpenError{}
	for _, c := range cands {
		if c.Path == "" {
			continue
		}
		cp := C.CString(c.Path)
		noload := C.int(0)
		if c.NoLoad {
			noload = 1
		}
		why := C.cudart_open(cp, noload)
		C.free(unsafe.Pointer(cp))
		if why == nil {
			p := c.Path
			path.Store(&p)
			return nil
		}
		oe.Tried = append(oe.Tried, c.Path)
		oe.Reasons = append(oe.Reasons, C.GoString(why))
	}
	if len(oe.Tried) == 0 {
		oe.Tried, oe.Reasons = []string{"(none)"}, []string{"no candidate library"}
	}
	return oe
}

// Opened reports whether a runtime is open.
func Opened() bool { return path.Load() != nil }

// Path returns the library that was opened, or "".
func Path() string {
	if p := path.Load(); p != nil {
		return *p
	}
	return ""
}

func fail(fn string, rc C.int) error {
	return &Error{Func: fn, Code: int(rc), Text: C.GoString(C.cudart_error_string(rc))}
}

// DeviceCount returns cudaGetDeviceCount's answer. The runtime must be open.
func DeviceCount() (int, error) {
	var n C.int
	if rc := C.cudart_device_count(&n); rc != 0 {
		return 0, fail("cudaGetDeviceCount", rc)
	}
	return int(n), nil
}

// SetDevice makes d the calling thread's current device.
func SetDevice(d int) error {
	if rc := C.cudart_set_device(C.int(d)); rc != 0 {
		return fail("cudaSetDevice", rc)
	}
	return nil
}

// GetDevice returns the calling thread's current device.
func GetDevice() (int, error) {
	var d C.int
	if rc := C.cudart_get_device(&d); rc != 0 {
		return 0, fail("cudaGetDevice", rc)
	}
	return int(d), nil
}

// Enter makes d current on the calling thread, in one cgo call: a
// cudaGetDevice, and a cudaSetDevice only when another device is current.
// It returns the device that was current, for Leave.
func Enter(d int32) (prev int32, err error) {
	var p, which C.int
	if rc := C.cudart_enter(C.int(d), &p, &which); rc != 0 {
		fn := "cudaGetDevice"
		if which == 1 {
			fn = "cudaSetDevice"
		}
		return int32(p), fail(fn, rc)
	}
	return int32(p), nil
}

// Leave undoes Enter: it makes prev current again if Enter changed it.
func Leave(prev, d int32) error {
	if prev == d || prev < 0 {
		return nil
	}
	return SetDevice(int(prev))
}

// HasStreams reports whether the open runtime can create streams.
func HasStreams() bool { return Opened() && C.cudart_has_streams() != 0 }

// NewStream creates a non-blocking stream (cudaStreamCreateWithFlags with
// cudaStreamNonBlocking) on the calling thread's current device.
// HasStreams must be true.
func NewStream() (uintptr, error) {
	var s C.uintptr_t
	if rc := C.cudart_new_stream(&s); rc != 0 {
		return 0, fail("cudaStreamCreateWithFlags", rc)
	}
	return uintptr(s), nil
}

// DestroyStream destroys a stream made by NewStream (cudaStreamDestroy:
// work still queued on it completes first, on the device).
func DestroyStream(s uintptr) error {
	if rc := C.cudart_free_stream(C.uintptr_t(s)); rc != 0 {
		return fail("cudaStreamDestroy", rc)
	}
	return nil
}

// HasMemInfo reports whether the open runtime has cudaMemGetInfo (every
// CUDA runtime does).
func HasMemInfo() bool { return Opened() && C.cudart_has_mem_info() != 0 }

// MemInfo returns the calling thread's current device's free and total
// memory in bytes (cudaMemGetInfo). HasMemInfo must be true.
func MemInfo() (free, total uint64, err error) {
	var f, t C.uint64_t
	if rc := C.cudart_get_mem_info(&f, &t); rc != 0 {
		return 0, 0, fail("cudaMemGetInfo", rc)
	}
	return uint64(f), uint64(t), nil
}

// HasMalloc reports whether the open runtime has cudaMalloc and cudaFree.
func HasMalloc() bool { return Opened() && C.cudart_has_malloc() != 0 }

// Malloc allocates bytes on the calling thread's current device with
// cudaMalloc, outside any RMM memory resource; the address is an integer,
// never dereferenced by Go. HasMalloc must be true.
func Malloc(bytes uint64) (uintptr, error) {
	var p C.uintptr_t
	if rc := C.cudart_do_malloc(&p, C.uint64_t(bytes)); rc != 0 {
		return 0, fail("cudaMalloc", rc)
	}
	return uintptr(p), nil
}

// Free frees what Malloc gave (cudaFree).
func Free(p uintptr) error {
	if rc := C.cudart_do_free(C.uintptr_t(p)); rc != 0 {
		return fail("cudaFree", rc)
	}
	return nil
}

// HasEvents reports whether the open runtime has the event functions
// (cudaEventCreateWithFlags, cudaEventRecord, cudaEventSynchronize,
// cudaEventDestroy).
func HasEvents() bool { return Opened() && C.cudart_has_events() != 0 }

// NewBlockingEvent creates an event a waiting thread sleeps on
// (cudaEventCreateWithFlags with cudaEventBlockingSync and
// cudaEventDisableTiming), on the calling thread's current device.
// HasEvents must be true.
func NewBlockingEvent() (uintptr, error) {
	var e C.uintptr_t
	if rc := C.cudart_new_event(&e); rc != 0 {
		return 0, fail("cudaEventCreateWithFlags", rc)
	}
	return uintptr(e), nil
}

// DestroyEvent destroys an event made by NewBlockingEvent.
func DestroyEvent(e uintptr) error {
	if rc := C.cudart_free_event(C.uintptr_t(e)); rc != 0 {
		return fail("cudaEventDestroy", rc)
	}
	return nil
}

// WaitEvent records e on stream s and waits for it (cudaEventRecord, then
// cudaEventSynchronize): it returns when the work queued on s before the
// call is done, the calling thread asleep meanwhile if e is a blocking
// event. An error of that work is returned as cudaEventSynchronize's.
func WaitEvent(e, s uintptr) error {
	if rc := C.cudart_wait_event(C.uintptr_t(e), C.uintptr_t(s)); rc != 0 {
		fn := "cudaEventRecord"
		if rc%2 == 1 {
			fn = "cudaEventSynchronize"
		}
		return fail(fn, rc/2)
	}
	return nil
}
