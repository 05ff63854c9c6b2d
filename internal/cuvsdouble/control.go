package cuvsdouble

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
	void (*set_version)(int, int, int);
	int (*function_count)(void);
	const char* (*function_name)(int);
	int (*function_can_fail)(int);
	int (*fail)(const char*, int64_t, int64_t, const char*, int);
	void (*clear_faults)(void);
	int (*pending_faults)(void);
	int64_t (*fault_hits)(void);
	int64_t (*calls)(const char*);
	int (*counter_count)(void);
	const char* (*counter_name)(int);
	int64_t (*counter_get)(int, int);
	int64_t (*violation_count)(void);
	int (*violation_copy)(int, char*, int);
	void (*clear_violations)(void);
	void (*set_device_id)(int);
	void (*set_strict_device)(int);
	void (*set_call_delay_us)(int);
	void (*set_call_jitter_us)(int);
	int64_t (*pending_ops)(void);
	void (*set_model)(int);
	double (*model_delay_us)(int64_t, int, int);
	int64_t (*model_searches)(int);
	int64_t (*event_waits)(int);
	void (*set_instant)(int);
	int (*instant)(void);
	int (*pool_state)(int*, int*, int*);
	void (*reset)(void);
	void (*set_device_count)(int);
	int64_t (*cuda_calls)(int);
	int (*pool_on_device)(int);
	int (*cuda_set_device)(int);
	int (*cuda_get_device)(int*);
} dbl_api;

static void* dbl_open(const char* path, char** err) {
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char* e = dlerror();
		*err = (char*)(e ? e : "dlopen failed");
	}
	return h;
}

static const char* dbl_load(void* h, dbl_api* a) {
#define DBL_LOAD(field, name) \
	if (!(*(void**)&a->field = dlsym(h, name))) return name;
	DBL_LOAD(set_version, "cuvsdouble_set_version")
	DBL_LOAD(function_count, "cuvsdouble_function_count")
	DBL_LOAD(function_name, "cuvsdouble_function_name")
	DBL_LOAD(function_can_fail, "cuvsdouble_function_can_fail")
	DBL_LOAD(fail, "cuvsdouble_fail")
	DBL_LOAD(clear_faults, "cuvsdouble_clear_faults")
	DBL_LOAD(pending_faults, "cuvsdouble_pending_faults")
	DBL_LOAD(fault_hits, "cuvsdouble_fault_hits")
	DBL_LOAD(calls, "cuvsdouble_calls")
	DBL_LOAD(counter_count, "cuvsdouble_counter_count")
	DBL_LOAD(counter_name, "cuvsdouble_counter_name")
	DBL_LOAD(counter_get, "cuvsdouble_counter_get")
	DBL_LOAD(violation_count, "cuvsdouble_violation_count")
	DBL_LOAD(violation_copy, "cuvsdouble_violation_copy")
	DBL_LOAD(clear_violations, "cuvsdouble_clear_violations")
	DBL_LOAD(set_device_id, "cuvsdouble_set_device_id")
	DBL_LOAD(set_strict_device, "cuvsdouble_set_strict_device")
	DBL_LOAD(set_call_delay_us, "cuvsdouble_set_call_delay_us")
	DBL_LOAD(set_call_jitter_us, "cuvsdouble_set_call_jitter_us")
	DBL_LOAD(pending_ops, "cuvsdouble_pending_ops")
	DBL_LOAD(set_model, "cuvsdouble_set_model")
	DBL_LOAD(model_delay_us, "cuvsdouble_model_delay_us")
	DBL_LOAD(model_searches, "cuvsdouble_model_searches")
	DBL_LOAD(event_waits, "cuvsdouble_event_waits")
	DBL_LOAD(set_instant, "cuvsdouble_set_instant")
	DBL_LOAD(instant, "cuvsdouble_instant")
	DBL_LOAD(pool_state, "cuvsdouble_pool_state")
	DBL_LOAD(reset, "cuvsdouble_reset")
	DBL_LOAD(set_device_count, "cuvsdouble_set_device_count")
	DBL_LOAD(cuda_calls, "cuvsdouble_cuda_calls")
	DBL_LOAD(pool_on_device, "cuvsdouble_pool_on_device")
	DBL_LOAD(cuda_set_device, "cudaSetDevice")
	DBL_LOAD(cuda_get_device, "cudaGetDevice")
#undef DBL_LOAD
	return NULL;
}

static int dbl_has(void* h, const char* name) { return dlsym(h, name) != NULL; }
static int dbl_close(void* h) { return dlclose(h); }

static void dbl_set_version(dbl_api* a, int x, int y, int z) { a->set_version(x, y, z); }
static int dbl_function_count(dbl_api* a) { return a->function_count(); }
static const char* dbl_function_name(dbl_api* a, int i) { return a->function_name(i); }
static int dbl_function_can_fail(dbl_api* a, int i) { return a->function_can_fail(i); }
static int dbl_fail(dbl_api* a, const char* fn, int64_t skip, int64_t count, const char* text, int raw) {
	return a->fail(fn, skip, count, text, raw);
}
static void dbl_clear_faults(dbl_api* a) { a->clear_faults(); }
static int dbl_pending_faults(dbl_api* a) { return a->pending_faults(); }
static int64_t dbl_fault_hits(dbl_api* a) { return a->fault_hits(); }
static int64_t dbl_calls(dbl_api* a, const char* fn) { return a->calls(fn); }
static int dbl_counter_count(dbl_api* a) { return a->counter_count(); }
static const char* dbl_counter_name(dbl_api* a, int i) { return a->counter_name(i); }
static int64_t dbl_counter_get(dbl_api* a, int i, int which) { return a->counter_get(i, which); }
static int64_t dbl_violation_count(dbl_api* a) { return a->violation_count(); }
static int dbl_violation_copy(dbl_api* a, int i, char* buf, int cap) { return a->violation_copy(i, buf, cap); }
static void dbl_clear_violations(dbl_api* a) { a->clear_violations(); }
static void dbl_set_device_id(dbl_api* a, int id) { a->set_device_id(id); }
static void dbl_set_strict_device(dbl_api* a, int on) { a->set_strict_device(on); }
static void dbl_set_call_delay_us(dbl_api* a, int us) { a->set_call_delay_us(us); }
static void dbl_set_call_jitter_us(dbl_api* a, int us) { a->set_call_jitter_us(us); }
static int64_t dbl_pending_ops(dbl_api* a) { return a->pending_ops(); }
static void dbl_set_model(dbl_api* a, int on) { a->set_model(on); }
static double dbl_model_delay_us(dbl_api* a, int64_t b, int c, int m) { return a->model_delay_us(b, c, m); }
static int64_t dbl_model_searches(dbl_api* a, int m) { return a->model_searches(m); }
static int64_t dbl_event_waits(dbl_api* a, int b) { return a->event_waits(b); }
static void dbl_set_instant(dbl_api* a, int on) { a->set_instant(on); }
static int dbl_instant(dbl_api* a) { return a->instant(); }
static int dbl_pool_state(dbl_api* a, int* initial, int* max, int* managed) {
	return a->pool_state(initial, max, managed);
}
static void dbl_reset(dbl_api* a) { a->reset(); }
static void dbl_set_device_count(dbl_api* a, int n) { a->set_device_count(n); }
static int64_t dbl_cuda_calls(dbl_api* a, int which) { return a->cuda_calls(which); }
static int dbl_pool_on_device(dbl_api* a, int dev) { return a->pool_on_device(dev); }
static int dbl_cuda_set_device(dbl_api* a, int dev) { return a->cuda_set_device(dev); }
static int dbl_cuda_get_device(dbl_api* a) {
	int d = -1;
	a->cuda_get_device(&d);
	return d;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// Control drives the test-only side of a loaded double: faults, version,
// counters, violations. Its methods are safe for concurrent use.
type Control struct {
	// Path is the library file, the one to hand to the bindings.
	Path string

	mu     sync.Mutex
	handle unsafe.Pointer // dlopen handle; nil once closed
	api    *C.dbl_api     // C memory
}

// Open loads the library at path (dlopen with RTLD_NOW|RTLD_LOCAL, as the
// bindings do, so both share one instance of it) and finds its control
// functions.
func Open(path string) (*Control, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	h := C.dbl_open(cpath, &cerr)
	if h == nil {
		return nil, fmt.Errorf("cuvsdouble: dlopen %s: %s", path, C.GoString(cerr))
	}
	api := (*C.dbl_api)(C.calloc(1, C.size_t(unsafe.Sizeof(C.dbl_api{}))))
	if missing := C.dbl_load(h, api); missing != nil {
		name := C.GoString(missing)
		C.free(unsafe.Pointer(api))
		C.dbl_close(h)
		return nil, fmt.Errorf("cuvsdouble: %s is not the test double (no %s)", path, name)
	}
	return &Control{Path: path, handle: h, api: api}, nil
}

// New builds the double with opts, loads it and returns its Control, closed
// when the test ends. It does not reset the library's state: with a shared
// (not Isolated) build, call Reset first if earlier tests may have left some.
func New(t testing.TB, opts ...Option) *Control {
	t.Helper()
	path := Build(t, opts...)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Close unloads the Control's reference to the library (the library stays
// loaded while the bindings hold theirs). Closing twice is harmless.
func (c *Control) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handle == nil {
		return nil
	}
	rc := C.dbl_close(c.handle)
	C.free(unsafe.Pointer(c.api))
	c.handle, c.api = nil, nil
	if rc != 0 {
		return errors.New("cuvsdouble: dlclose failed")
	}
	return nil
}

// apiOrPanic returns the function table; using a closed Control is a bug in
// the test.
func (c *Control) apiOrPanic() *C.dbl_api {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.api == nil {
		panic("cuvsdouble: Control used after Close")
	}
	return c.api
}

// Has reports whether the library exports symbol (false for Omit'ted ones).
func (c *Control) Has(symbol string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handle == nil {
		return false
	}
	cs := C.CString(symbol)
	defer C.free(unsafe.Pointer(cs))
	return C.dbl_has(c.handle, cs) != 0
}

// SetVersion sets what cuvsVersionGet reports (26.6.0 until set).
func (c *Control) SetVersion(major, minor, patch uint16) {
	C.dbl_set_version(c.apiOrPanic(), C.int(major), C.int(minor), C.int(patch))
}

// Functions lists the cuVS functions the double defines (whether or not a
// build omitted some from its exports).
func (c *Control) Functions() []string {
	a := c.apiOrPanic()
	n := int(C.dbl_function_count(a))
	out := make([]string, n)
	for i := range out {
		out[i] = C.GoString(C.dbl_function_name(a, C.int(i)))
	}
	return out
}

// CanFail reports whether fn returns cuvsError_t, so that a Fault can make
// it fail (cuvsGetLastErrorText, cuvsSetLastErrorText, cuvsGetLogLevel and
// cuvsSetLogLevel cannot).
func (c *Control) CanFail(fn string) bool {
	a := c.apiOrPanic()
	n := int(C.dbl_function_count(a))
	for i := 0; i < n; i++ {
		if C.GoString(C.dbl_function_name(a, C.int(i))) == fn {
			return C.dbl_function_can_fail(a, C.int(i)) != 0
		}
	}
	return false
}

// AnyFunction in a Fault matches every function that can fail.
const AnyFunction = "*"

// Fault describes calls to make fail. A failing call returns CUVS_ERROR at
// once, before it reads its arguments or allocates anything, with the given
// error text in the calling thread's last-error text.
type Fault struct {
	// Func is the cuVS function name, or AnyFunction.
	Func string
	// Skip is how many matching calls go through before failures begin.
	Skip int
	// Count is how many matching calls then fail: 0 means 1, negative means
	// every one from then on (until ClearFaults or Reset).
	Count int
	// Text is the reason. Unless Raw, the error text is decorated like a RAFT
	// failure: "RAFT failure at file=... line=...: <Text>" and a stack trace.
	Text string
	// Raw makes Text the whole error text; an empty one leaves no text at all.
	Raw bool
}

// Fail arms f. Faults are consumed in order of arming; several can be armed.
func (c *Control) Fail(f Fault) error {
	a := c.apiOrPanic()
	count := int64(f.Count)
	if count == 0 {
		count = 1
	}
	fn := C.CString(f.Func)
	defer C.free(unsafe.Pointer(fn))
	text := C.CString(f.Text)
	defer C.free(unsafe.Pointer(text))
	raw := 0
	if f.Raw {
		raw = 1
	}
	switch rc := C.dbl_fail(a, fn, C.int64_t(f.Skip), C.int64_t(count), text, C.int(raw)); rc {
	case 0:
		return nil
	case -1:
		return fmt.Errorf("cuvsdouble: unknown function %q", f.Func)
	case -2:
		return fmt.Errorf("cuvsdouble: %s does not return cuvsError_t and cannot fail", f.Func)
	default:
		return fmt.Errorf("cuvsdouble: too many faults armed (%d)", int(rc))
	}
}

// FailNext makes the next call of fn fail with reason text. It panics on a
// name the double does not know.
func (c *Control) FailNext(fn, text string) {
	if err := c.Fail(Fault{Func: fn, Text: text}); err != nil {
		panic(err)
	}
}

// FailNth makes the n-th next call (1 = the next) of fn fail with reason
// text. It panics on a name the double does not know or on n < 1.
func (c *Control) FailNth(fn string, n int, text string) {
	if n < 1 {
		panic("cuvsdouble: FailNth needs n >= 1")
	}
	if err := c.Fail(Fault{Func: fn, Skip: n - 1, Text: text}); err != nil {
		panic(err)
	}
}

// ClearFaults disarms every fault.
func (c *Control) ClearFaults() { C.dbl_clear_faults(c.apiOrPanic()) }

// PendingFaults is the number of faults armed and not yet spent.
func (c *Control) PendingFaults() int { return int(C.dbl_pending_faults(c.apiOrPanic())) }

// FaultHits is the number of calls made to fail so far.
func (c *Control) FaultHits() int64 { return int64(C.dbl_fault_hits(c.apiOrPanic())) }

// Calls is the number of calls of the cuVS function fn so far (failed ones
// included); -1 for a name the double does not know.
func (c *Control) Calls(fn string) int64 {
	cs := C.CString(fn)
	defer C.free(unsafe.Pointer(cs))
	return int64(C.dbl_calls(c.apiOrPanic(), cs))
}

// Pair counts acquisitions (create, alloc) and releases (destroy, free) of
// one kind of object, or bytes for the *_bytes counters.
type Pair struct {
	Acquired, Released int64
}

// Live is how many are still held.
func (p Pair) Live() int64 { return p.Acquired - p.Released }

// Counters maps a kind of object to its Pair. The kinds: resources,
// multi_gpu_resources, cagra_index_params, cagra_ivf_pq_params (the
// graph_build_params cuvsCagraIndexParamsCreate allocates),
// cagra_compression_params, ace_params, ace_build_dir (the strings
// cuvsAceParamsCreate allocates), cagra_extend_params, cagra_search_params,
// ivf_pq_index_params, ivf_pq_search_params, nn_descent_index_params,
// brute_force_index and cagra_index (handles from ...IndexCreate),
// brute_force_index_data and cagra_index_data (built indexes), rmm and
// rmm_bytes (cuvsRMMAlloc/Free), host and host_bytes (cuvsRMMHostAlloc/Free),
// tensor_metadata (shape/strides arrays the library hands out with a deleter),
// buffer and buffer_bytes (the double's own storage); ivf_flat_index_params,
// ivf_flat_search_params, ivf_flat_index, ivf_flat_index_data and their
// ivf_sq_* twins, ivf_pq_index and ivf_pq_index_data (IVF handles and built
// indexes); scalar_quantizer_params, scalar_quantizer and their binary_* and
// product_* twins (quantizer params and handles; the trained binary and
// product quantizers, which cuVS's Destroy leaks, are counted by none).
type Counters map[string]Pair

// Unbalanced returns the kinds whose Live count is not zero.
func (cs Counters) Unbalanced() Counters {
	out := Counters{}
	for k, p := range cs {
		if p.Live() != 0 {
			out[k] = p
		}
	}
	return out
}

// String lists the counters, one kind a line, in name order.
func (cs Counters) String() string {
	keys := make([]string, 0, len(cs))
	for k := range cs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		p := cs[k]
		fmt.Fprintf(&b, "%s: acquired %d, released %d, live %d\n", k, p.Acquired, p.Released, p.Live())
	}
	return b.String()
}

// Counters reads every counter.
func (c *Control) Counters() Counters {
	a := c.apiOrPanic()
	n := int(C.dbl_counter_count(a))
	out := make(Counters, n)
	for i := 0; i < n; i++ {
		name := C.GoString(C.dbl_counter_name(a, C.int(i)))
		out[name] = Pair{
			Acquired: int64(C.dbl_counter_get(a, C.int(i), 0)),
			Released: int64(C.dbl_counter_get(a, C.int(i), 1)),
		}
	}
	return out
}

// ViolationCount is the number of violations recorded (Violations keeps the
// text of the first 64).
func (c *Control) ViolationCount() int64 { return int64(C.dbl_violation_count(c.apiOrPanic())) }

// Violations returns the recorded violations: misuses that would be undefined
// behaviour, a crash or a leak in the real library. Each starts with the name
// of the cuVS function that saw it.
func (c *Control) Violations() []string {
	a := c.apiOrPanic()
	n := int(C.dbl_violation_count(a))
	const limit = 64
	if n > limit {
		n = limit
	}
	const size = 2048
	buf := (*C.char)(C.malloc(size))
	defer C.free(unsafe.Pointer(buf))
	var out []string
	for i := 0; i < n; i++ {
		if C.dbl_violation_copy(a, C.int(i), buf, size) >= 0 {
			out = append(out, C.GoString(buf))
		}
	}
	return out
}

// TakeViolations returns the recorded violations and forgets them, for tests
// that provoke some on purpose and go on to check the balance.
func (c *Control) TakeViolations() []string {
	v := c.Violations()
	C.dbl_clear_violations(c.apiOrPanic())
	return v
}

// SetDeviceID sets the device id that resources created from now on report,
// whatever device is current; a negative id restores the default: the
// device current on the creating thread.
func (c *Control) SetDeviceID(id int) { C.dbl_set_device_id(c.apiOrPanic(), C.int(id)) }

// SetDeviceCount sets the number of fake CUDA devices (1 to 64) that the
// double's cudaGetDeviceCount reports and its cudaSetDevice accepts, and puts
// every thread back on device 0. With more than one, a resources handle
// belongs to the device current on the thread that created it, and every
// call on it made while another device is current on the calling thread
// fails with "invalid device context" and records a violation, as does a
// kDLCUDA tensor of another device's memory under strict device mode (the
// real library would misbehave instead: wrong device, illegal addresses).
func (c *Control) SetDeviceCount(n int) { C.dbl_set_device_count(c.apiOrPanic(), C.int(n)) }

// CUDA functions the double exports, for CUDACalls.
const (
	CUDAGetDeviceCount = 0
	CUDASetDevice      = 1
	CUDAGetDevice      = 2
)

// CUDACalls returns how many times the double's cudaGetDeviceCount,
// cudaSetDevice or cudaGetDevice (CUDAGetDeviceCount, ...) was called since
// loading or the last Reset.
func (c *Control) CUDACalls(which int) int64 {
	return int64(C.dbl_cuda_calls(c.apiOrPanic(), C.int(which)))
}

// PoolOnDevice reports whether the pool is the current memory resource of
// device dev (cuvsRMMPoolMemoryResourceEnable acts on the device current on
// the calling thread, as RMM's per-device resources do).
func (c *Control) PoolOnDevice(dev int) bool {
	return C.dbl_pool_on_device(c.apiOrPanic(), C.int(dev)) != 0
}

// SetCurrentDevice calls the double's cudaSetDevice on the calling OS thread
// and returns its CUDA status (0 on success). The caller must hold the thread
// (runtime.LockOSThread) for it to mean anything; tests use it to make calls
// on a deliberately wrong device.
func (c *Control) SetCurrentDevice(dev int) int {
	return int(C.dbl_cuda_set_device(c.apiOrPanic(), C.int(dev)))
}

// CurrentDevice returns the double's current device of the calling OS thread
// (cudaGetDevice).
func (c *Control) CurrentDevice() int { return int(C.dbl_cuda_get_device(c.apiOrPanic())) }

// SetStrictDevice turns strict device mode on or off. When on, the data of a
// kDLCUDA or kDLCUDAManaged tensor must lie inside a live cuvsRMMAlloc
// allocation, that of a kDLCUDAHost tensor inside a cuvsRMMHostAlloc one, and
// a kDLCPU tensor must not point into cuvsRMMAlloc memory; a call given
// anything else fails. It catches host memory passed off as device memory,
// which the real library would not survive.
func (c *Control) SetStrictDevice(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.dbl_set_strict_device(c.apiOrPanic(), C.int(v))
}

// SetCallDelay makes every call that takes a cuvsResources_t sleep d while
// it holds it, widening the window in which concurrent use of one
// cuvsResources_t is detected.
func (c *Control) SetCallDelay(d time.Duration) {
	C.dbl_set_call_delay_us(c.apiOrPanic(), C.int(d/time.Microsecond))
}

// SetCallJitter makes every call that takes a cuvsResources_t sleep a
// random time between 0 and d more (on top of SetCallDelay's), so that
// concurrent callers interleave differently on every run: stress tests use
// it to widen races.
func (c *Control) SetCallJitter(d time.Duration) {
	C.dbl_set_call_jitter_us(c.apiOrPanic(), C.int(d/time.Microsecond))
}

// PendingOps returns the number of asynchronous writes queued on streams
// and not yet done (see the package documentation's streams section): 0
// once every stream that had work was synchronized.
func (c *Control) PendingOps() int64 { return int64(C.dbl_pending_ops(c.apiOrPanic())) }

// SetModel turns the H200 delay model on or off (the environment variable
// CUVS_DOUBLE_MODEL=h200 turns it on at load): every cuvsCagraSearch then
// sleeps ModelDelay(its batch, the searches in flight, the multi-CTA ones
// among them when it is one), before its work (or
// instead of it, in instant mode).
func (c *Control) SetModel(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.dbl_set_model(c.apiOrPanic(), C.int(v))
}

// ModelDelay is the H200 delay model: how long a CAGRA search of batch
// queries takes with concurrent searches in flight (itself included), of
// which multi are on the multi-CTA kernel (itself included; 0 for a
// single-CTA search), fitted to the latencies measured on an H200 (see the
// package documentation).
func (c *Control) ModelDelay(batch, concurrent, multi int) time.Duration {
	us := float64(C.dbl_model_delay_us(c.apiOrPanic(), C.int64_t(batch), C.int(concurrent), C.int(multi)))
	return time.Duration(us * float64(time.Microsecond))
}

// EventWaits returns how many waits on CUDA events (cudaEventSynchronize)
// the process has made since the library was loaded: on blocking-sync
// events (cudaEventBlockingSync, safe.Resources.SyncBlocking's) and on
// others.
func (c *Control) EventWaits() (blocking, other int64) {
	a := c.apiOrPanic()
	return int64(C.dbl_event_waits(a, 1)), int64(C.dbl_event_waits(a, 0))
}

// ModelSearches returns how many CAGRA searches the delay model has slept
// for since the library was loaded, on the single-CTA kernel and on the
// multi-CTA one (which cuVS runs for MULTI_CTA, and for AUTO below 264
// queries: twice the H200's 132 multiprocessors).
func (c *Control) ModelSearches() (single, multi int64) {
	a := c.apiOrPanic()
	return int64(C.dbl_model_searches(a, 0)), int64(C.dbl_model_searches(a, 1))
}

// SetInstant turns instant mode on or off, for benchmarks of the bindings'
// own cost. When on, cuvsCagraSearch and cuvsBruteForceSearch return
// CUVS_SUCCESS at once: they validate, read, count and write nothing (no
// call count, no fault, no output, the last-error text left as it was).
// cuvsCagraBuild then reads only the dataset's shape and dtype and installs
// a hollow index: its getters (size, dims, graph degree) and Destroy work,
// anything that needs its data fails; the dataset's data is never read, so
// building costs the same whatever its size.
func (c *Control) SetInstant(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.dbl_set_instant(c.apiOrPanic(), C.int(v))
}

// Instant reports whether instant mode is on.
func (c *Control) Instant() bool { return C.dbl_instant(c.apiOrPanic()) != 0 }

// PoolState is the memory resource last set by
// cuvsRMMPoolMemoryResourceEnable or cuvsRMMMemoryResourceReset.
type PoolState struct {
	Enabled                    bool
	InitialPercent, MaxPercent int
	Managed                    bool
}

// Pool returns the current memory-resource state.
func (c *Control) Pool() PoolState {
	var initial, maximum, managed C.int
	on := C.dbl_pool_state(c.apiOrPanic(), &initial, &maximum, &managed)
	return PoolState{Enabled: on != 0, InitialPercent: int(initial), MaxPercent: int(maximum), Managed: managed != 0}
}

// Reset clears counters, call counts, faults and violations and restores the
// defaults (version 26.6.0, log level INFO, one device with every thread on
// it, resources reporting the device current at creation, strict mode, instant
// mode and call delay off, no pool). Objects still alive stay valid, but their counters
// restart from zero: reset only when nothing is alive.
func (c *Control) Reset() { C.dbl_reset(c.apiOrPanic()) }

// AssertBalanced fails t when a counter is unbalanced (something created or
// allocated was not destroyed or freed) or a violation was recorded.
func (c *Control) AssertBalanced(t testing.TB) {
	t.Helper()
	if u := c.Counters().Unbalanced(); len(u) > 0 {
		t.Errorf("cuvsdouble: unbalanced counters (leaks, or releases of what was never acquired):\n%s", u)
	}
	if n := c.ViolationCount(); n > 0 {
		t.Errorf("cuvsdouble: %d violation(s):\n  %s", n, strings.Join(c.Violations(), "\n  "))
	}
}
