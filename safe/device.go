package safe

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/cudart"
)

// Choosing the GPU.
//
// A CUDA device is current per OS thread, and goroutines move between
// threads between two cgo calls. A Resources made with OnDevice(n) therefore
// makes every C call on it from a locked thread with device n current:
// Lock locks the goroutine to its thread and, unless n is current already,
// calls cudaSetDevice(n); Unlock restores the thread's previous device and
// unlocks it. A Resources made without OnDevice works on whatever device is
// current (device 0 unless the process changed it); its calls make no CUDA
// runtime call (NewResources makes one: the Resources' stream).
//
// The CUDA runtime is opened the first time a device or a stream is asked
// for (DeviceCount, OnDevice, NewResources), from, in order: WithCUDARuntime's path,
// $CUVS_CUDART_LIBRARY, the loaded cuVS library itself when it (or a
// library it depends on) exports the device functions, then libcudart.so.13,
// libcudart.so.12 and libcudart.so.

// CUDARuntimeEnv names the environment variable that gives the CUDA runtime
// library to open for device selection.
const CUDARuntimeEnv = "CUVS_CUDART_LIBRARY"

var cudartOverride atomic.Pointer[string]

// WithCUDARuntime makes device selection (DeviceCount, OnDevice) open the
// CUDA runtime library at path rather than search for one. It takes effect
// when Load applies its options, before the runtime is first opened; once
// opened, the runtime is not changed.
func WithCUDARuntime(path string) Option {
	return func(*loadConfig) { cudartOverride.Store(&path) }
}

// openCUDART opens the CUDA runtime if it is not open yet.
func openCUDART(op string) error {
	if cudart.Opened() {
		return nil
	}
	var cands []cudart.Candidate
	if p := cudartOverride.Load(); p != nil && *p != "" {
		cands = append(cands, cudart.Candidate{Path: *p})
	} else if p := os.Getenv(CUDARuntimeEnv); p != "" {
		cands = append(cands, cudart.Candidate{Path: p})
	} else {
		if generated.Loaded() {
			cands = append(cands, cudart.Candidate{Path: generated.LibraryPath(), NoLoad: true})
		}
		cands = append(cands,
			cudart.Candidate{Path: "libcudart.so.13"},
			cudart.Candidate{Path: "libcudart.so.12"},
			cudart.Candidate{Path: "libcudart.so"})
	}
	if err := cudart.Open(cands); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// CUDARuntimePath returns the CUDA runtime library opened for device
// selection, or "" when none was needed yet.
func CUDARuntimePath() string { return cudart.Path() }

// DeviceCount returns the number of CUDA devices (cudaGetDeviceCount),
// opening the CUDA runtime if needed.
func DeviceCount() (int, error) {
	const op = "safe.DeviceCount"
	if err := openCUDART(op); err != nil {
		return 0, err
	}
	n, err := cudart.DeviceCount()
	if err != nil {
		return 0, cudaError(op, err)
	}
	return n, nil
}

// cudaError turns a CUDA runtime failure into an *Error.
func cudaError(op string, err error) error {
	if ce, ok := err.(*cudart.Error); ok {
		return &Error{Op: op, Func: ce.Func, Reason: ce.Error(), Text: ce.Error()}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// ResourcesOption configures NewResources.
type ResourcesOption func(*resourcesConfig)

type resourcesConfig struct {
	bound      bool // OnDevice was given
	device     int
	pool       bool  // WithWorkspacePool was given
	workspace  int64 // its bytes
	trackCSV   string
	trackMS    int64
	tracking   bool
	noMemCheck bool // WithoutMemoryCheck was given
}

// OnDevice makes NewResources create the handle on CUDA device n and bind it
// there: every C call made on it, by any goroutine, runs on a locked OS
// thread with device n current. Device memory allocated through it is
// device n's, and tensors on another device are refused by the calls that
// take both. The first Resources of a device also gets the device memory
// pool that Load enabled (RMM keeps one memory resource per device).
func OnDevice(n int) ResourcesOption {
	return func(c *resourcesConfig) { c.bound, c.device = true, n }
}

// unbound is Resources.dev for a handle made without OnDevice.
const unbound = -1

// newBoundResources creates a handle with device n current, on one locked
// thread.
func newBoundResources(op string, n int, c *resourcesConfig) (*Resources, error) {
	if n < 0 {
		return nil, argf(op, "OnDevice", "device %d is negative", n)
	}
	count, err := DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if n >= count {
		return nil, argf(op, "OnDevice", "device %d, the process sees %d CUDA device(s)", n, count)
	}
	d := int32(n)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := cudart.Enter(d)
	if err != nil {
		return nil, cudaError(op, err)
	}
	defer func() { _ = cudart.Leave(prev, d) }()
	if err := poolOn(op, d); err != nil {
		return nil, err
	}
	h, err := c.create(op)
	if err != nil {
		return nil, err
	}
	// cuVS's resources learn their device at the first question: ask it now,
	// with n current, so that the handle is n's whatever happens later.
	var id int32
	if err := generated.CuvsDeviceIdGet(h, &id); err != nil || id != d {
		_ = generated.CuvsResourcesDestroy(h)
		if err == nil {
			return nil, fmt.Errorf("%s: resources made with device %d current report device %d", op, n, id)
		}
		return nil, wrap(op, err)
	}
	s, ev, err := ownStream(op, h)
	if err != nil {
		_ = generated.CuvsResourcesDestroy(h)
		return nil, err
	}
	pmem, err := newParamsMem(op)
	if err != nil {
		_ = destroyOn(resHandle{h, s, ev, d, 0})
		return nil, err
	}
	liveResources.Inc()
	r := &Resources{h: h, stream: s, event: ev, dev: d, pmem: pmem, noMemCheck: c.noMemCheck}
	r.devID.Store(d)
	r.clean = runtime.AddCleanup(r, destroyResources, resHandle{h, s, ev, d, r.pmem})
	return r, nil
}

// Load's device memory pool, for the devices it did not reach: RMM's
// memory resource is per device, and cuvsRMMPoolMemoryResourceEnable sets
// the current device's. Load ran with device 0 current (the CUDA runtime's
// default for every thread: the bindings never change it outside a bound
// call), so device 0 counts as done.
var devicePools struct {
	mu           sync.Mutex
	on           bool
	initial, max int
	managed      bool
	async        bool  // the asynchronous resource, not the pool
	limit        int64 // WithMemoryLimit's bytes: each device's pool is capped at them
	done         map[int32]bool
}

// rememberPool records the pool Load enabled on the device current at Load.
func rememberPool(initial, max int, managed bool, limit int64) {
	devicePools.mu.Lock()
	defer devicePools.mu.Unlock()
	devicePools.on, devicePools.initial, devicePools.max, devicePools.managed, devicePools.async = true, initial, max, managed, false
	devicePools.limit = limit
	devicePools.done = map[int32]bool{0: true}
}

// rememberAsync records that Load enabled the asynchronous memory resource
// on the device current at Load.
func rememberAsync() {
	devicePools.mu.Lock()
	defer devicePools.mu.Unlock()
	devicePools.on, devicePools.async = true, true
	devicePools.done = map[int32]bool{0: true}
}

// poolOn enables Load's pool on device d, current on the calling thread,
// the first time a Resources of d is made.
func poolOn(op string, d int32) error {
	devicePools.mu.Lock()
	defer devicePools.mu.Unlock()
	if !devicePools.on || devicePools.done[d] {
		return nil
	}
	if devicePools.async {
		if err := generated.CuvsRMMAsyncMemoryResourceEnable(); err != nil {
			return wrap(op+": enabling the asynchronous memory resource on device "+fmt.Sprint(d), err)
		}
		devicePools.done[d] = true
		return nil
	}
	if err := enablePool(op+": on device "+fmt.Sprint(d), d, devicePools.initial, devicePools.max, devicePools.managed, devicePools.limit); err != nil {
		return err
	}
	devicePools.done[d] = true
	return nil
}

// resHandle is what the safety-net cleanup of a Resources needs.
type resHandle struct {
	h      generated.CuvsResources_t
	stream uintptr // owned, 0 for none
	event  uintptr // owned, 0 for none
	dev    int32
	pmem   uintptr // params memory, freed after h
}

// destroyOn destroys h, then its stream, with its device current when it
// has one.
func destroyOn(h resHandle) error {
	if h.h == 0 {
		return nil
	}
	if h.dev != unbound {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		prev, err := cudart.Enter(h.dev)
		if err != nil {
			return err
		}
		defer func() { _ = cudart.Leave(prev, h.dev) }()
	}
	err := generated.CuvsResourcesDestroy(h.h)
	if err == nil {
		freeParamsMem(h.pmem)
	}
	if h.event != 0 {
		if eerr := cudart.DestroyEvent(h.event); err == nil {
			err = eerr
		}
	}
	if h.stream != 0 {
		// Work still queued on the stream completes before the device
		// releases it.
		if serr := cudart.DestroyStream(h.stream); err == nil {
			err = serr
		}
	}
	return err
}

// enter is Lock's part for a bound handle: the thread, then the device.
// r.mu is held.
func (r *Resources) enter(op string) error {
	runtime.LockOSThread()
	prev, err := cudart.Enter(r.dev)
	if err != nil {
		runtime.UnlockOSThread()
		return cudaError(op, err)
	}
	r.prev = prev
	return nil
}

// leave undoes enter. r.mu is held.
func (r *Resources) leave() {
	if r.prev != r.dev {
		_ = cudart.Leave(r.prev, r.dev) // the device was set on this thread a moment ago
	}
	runtime.UnlockOSThread()
}

// Device returns the device r was bound to with OnDevice, and true; or
// -1 and false for a handle that works on the thread's current device.
func (r *Resources) Device() (int, bool) {
	if r == nil || r.dev == unbound {
		return -1, false
	}
	return int(r.dev), true
}

// sibling makes a new handle on r's device (bound the same way), for work
// that must outlive a closed r (freeing its memory).
func (r *Resources) sibling() (*Resources, error) {
	if r == nil || r.dev == unbound {
		return NewResources()
	}
	return NewResources(OnDevice(int(r.dev)))
}

// deviceID is the device r works on, asked once (cuvsDeviceIdGet) for an
// unbound handle and then remembered.
func (r *Resources) deviceID(op string) (int32, error) {
	if d := r.devID.Load(); d >= 0 {
		return d, nil
	}
	id, err := r.askDeviceID(op)
	if err != nil {
		return 0, err
	}
	r.devID.Store(id)
	return id, nil
}

// CheckDevice refuses, with an *ArgError naming arg, a tensor in the memory
// of a CUDA device other than r's (kDLCUDA with another device id). Host,
// pinned and managed memory are reachable from every device and pass. It
// costs two comparisons once r's device is known (an unbound handle asks
// cuVS once).
func (r *Resources) checkDevice(op, arg string, dev dlpack.Device) error {
	if dev.Type != dlpack.CUDA || r == nil {
		return nil
	}
	want, err := r.deviceID(op)
	if err != nil {
		return err
	}
	if dev.ID != want {
		return argf(op, arg, "memory of CUDA device %d, the resources work on device %d", dev.ID, want)
	}
	return nil
}

// cudaOrCuvs wraps an error of a C call that may come from the CUDA runtime
// (setting the device) or from cuVS.
func cudaOrCuvs(op string, err error) error {
	if _, ok := err.(*cudart.Error); ok {
		return cudaError(op, err)
	}
	return wrap(op, err)
}
