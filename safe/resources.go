package safe

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe/internal/base"
	"github.com/cuvs-go/cuvs/safe/internal/cudart"
)

// Stream is a CUDA stream (cudaStream_t), as a plain handle value.
type Stream uintptr

// Resources is a cuVS resources handle: a CUDA stream and the device it
// works on, plus cuVS's scratch state. Every cuVS call runs on one.
//
// Made with OnDevice(n), it is bound to device n: every C call on it runs on
// a locked OS thread with device n current (see OnDevice). Made without, it
// works on the calling thread's current device, device 0 unless the process
// changed it, as cuVS's own handles do.
//
// A Resources may be shared between goroutines: calls on it are serialized
// (they would race on its stream otherwise). For concurrency, give each
// goroutine its own Resources: calls on different ones run in parallel, and
// several may search one index at once.
//
// Each Resources owns a CUDA stream, created by NewResources
// (cudaStreamCreateWithFlags, non-blocking) and destroyed by Close, and
// every call on it queues its work there, whichever OS thread the calling
// goroutine runs on. cuVS's own default is cudaStreamPerThread, a different
// stream on every OS thread: since goroutines move between threads between
// two cgo calls, a search queued from one thread and a Sync or copy made
// from another would not be ordered, and results would be read before
// they are written. Where no CUDA runtime with stream functions can be
// opened (see DeviceCount for where it is looked for), the Resources uses
// the legacy default stream instead (cudaStreamLegacy, 0x1): ordered too,
// but shared by every Resources of the device, so their work does not
// overlap on the GPU. Stream tells which.
//
// The zero Resources is not usable: every call given one returns an
// *ArgError naming it (make one with NewResources); its Close does nothing.
type Resources struct {
	mu     sync.Mutex
	h      generated.CuvsResources_t
	stream uintptr // the stream NewResources made, 0 when on the legacy stream
	event  uintptr // a blocking-sync event for SyncBlocking, 0 when the runtime has none
	cur    uintptr // the stream r queues on when it is not stream (SetStream), else 0
	closed bool
	deps   int  // C objects made with r not yet destroyed (retain): Close leaves r to the last
	parked bool // Close came while deps > 0: the last release destroys r
	clean  runtime.Cleanup
	dev    int32        // OnDevice's device, or unbound
	prev   int32        // between Lock and Unlock of a bound handle: the device to restore
	devID  atomic.Int32 // the device id once known (CheckDevice), else -1
	pmem   uintptr      // C memory for one call's params struct (params), freed with h

	noMemCheck bool // WithoutMemoryCheck: builds skip the check of their estimate (memory.go)
}

// WithWorkspacePool makes the Resources' temporary workspace an uncapped
// pool with initialBytes reserved at first use
// (cuvsResourcesSetWorkspacePool, cuVS 26.08 and later): a search's
// scratch allocations then come from the pool instead of the device memory
// resource, which spares concurrent searches the CUDA context's lock. The
// pool never shrinks until Close. On 26.06 NewResources returns an error
// wrapping ErrNotInRelease.
func WithWorkspacePool(initialBytes int64) ResourcesOption {
	return func(c *resourcesConfig) { c.workspace, c.pool = initialBytes, true }
}

// WithMemoryTracking creates the Resources with allocation tracking
// (cuvsResourcesCreateWithMemoryTracking, cuVS 26.08 and later): every
// memory resource it reaches is wrapped, and a background thread writes CSV
// samples of the allocations to csvPath (created or truncated) at most
// every interval (at least 1 ms; cuVS's default is 10 ms). cuVS replaces the
// process's global host and device memory resources while the handle
// lives, and restores them at Close: make one tracked Resources at a time,
// for diagnosis. On 26.06 NewResources returns an error wrapping
// ErrNotInRelease.
func WithMemoryTracking(csvPath string, interval time.Duration) ResourcesOption {
	return func(c *resourcesConfig) {
		c.tracking, c.trackCSV, c.trackMS = true, csvPath, interval.Milliseconds()
	}
}

// check refuses options the library's release cannot honour, or out of
// range, before anything is created.
func (c *resourcesConfig) check(op string) error {
	if c.pool {
		if c.workspace < 0 {
			return argf(op, "WithWorkspacePool", "%d bytes is negative", c.workspace)
		}
		if err := inRelease(op, "cuvsResourcesSetWorkspacePool"); err != nil {
			return err
		}
	}
	if c.tracking {
		if c.trackCSV == "" {
			return argf(op, "WithMemoryTracking", "an empty CSV path")
		}
		if c.trackMS < 1 {
			return argf(op, "WithMemoryTracking", "an interval under 1 ms")
		}
		if err := inRelease(op, "cuvsResourcesCreateWithMemoryTracking"); err != nil {
			return err
		}
	}
	return nil
}

// create makes the C handle as the options say, on the calling thread's
// current device.
func (c *resourcesConfig) create(op string) (generated.CuvsResources_t, error) {
	var h generated.CuvsResources_t
	if c.tracking {
		p, why := base.CPath(c.trackCSV)
		if why != "" {
			return 0, argf(op, "WithMemoryTracking", "%s", why)
		}
		if err := generated.CuvsResourcesCreateWithMemoryTracking(&h, &p[0], c.trackMS); err != nil {
			return 0, wrap(op, err)
		}
	} else if err := generated.CuvsResourcesCreate(&h); err != nil {
		return 0, wrap(op, err)
	}
	if c.pool {
		if err := generated.CuvsResourcesSetWorkspacePool(h, uint64(c.workspace)); err != nil {
			_ = generated.CuvsResourcesDestroy(h)
			return 0, wrap(op, err)
		}
	}
	return h, nil
}

// releaseKey names a C function in a release.
type releaseKey struct{ release, cName string }

// inReleaseOK remembers the functions found in the loaded release.
var inReleaseOK sync.Map

// inRelease refuses a C function the loaded release lacks with a
// *NotInReleaseError (package generated's, as its functions return),
// wrapped with op: it names the releases that have the function.
func inRelease(op, cName string) error {
	rel := generated.Release()
	key := releaseKey{rel, cName}
	if _, ok := inReleaseOK.Load(key); ok {
		return nil // the common case, without allocating
	}
	in := generated.FunctionReleases(cName)
	if slices.Contains(in, rel) {
		inReleaseOK.Store(key, struct{}{})
		return nil
	}
	if rel == "" {
		return fmt.Errorf("%s: %w", op, ErrNotLoaded)
	}
	// Func is the Go function that binds cName as the releases in have it:
	// its name in the first of them, which has no variant suffix.
	fn := cName
	if fn != "" {
		fn = strings.ToUpper(fn[:1]) + fn[1:]
	}
	return fmt.Errorf("%s: %w", op, &NotInReleaseError{Func: fn, Symbol: cName, Release: rel, In: in})
}

// cudaStreamLegacy is the CUDA runtime's handle of the legacy default stream.
const cudaStreamLegacy = 0x1

// ownStream gives h a stream of its own, made on the calling thread's
// current device, and returns it: 0 when no CUDA runtime with stream
// functions could be opened, h then working on the legacy default stream.
// With the stream it makes a blocking-sync event on the same device for
// SyncBlocking, when the runtime has events (else 0). On failure h is left
// for the caller to destroy.
func ownStream(op string, h generated.CuvsResources_t) (stream, event uintptr, err error) {
	if openCUDART(op) != nil || !cudart.HasStreams() {
		return 0, 0, wrap(op, generated.CuvsStreamSet(h, cudaStreamLegacy))
	}
	s, err := cudart.NewStream()
	if err != nil {
		return 0, 0, cudaError(op, err)
	}
	if err := generated.CuvsStreamSet(h, generated.CudaStream_t(s)); err != nil {
		_ = cudart.DestroyStream(s)
		return 0, 0, wrap(op, err)
	}
	if cudart.HasEvents() {
		if event, err = cudart.NewBlockingEvent(); err != nil {
			_ = cudart.DestroyStream(s)
			return 0, 0, cudaError(op, err)
		}
	}
	return s, event, nil
}

// NewResources creates a resources handle (cuvsResourcesCreate): on the
// calling thread's current CUDA device, or, with OnDevice(n), on device n
// and bound to it.
func NewResources(opts ...ResourcesOption) (*Resources, error) {
	const op = "safe.NewResources"
	var c resourcesConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if err := c.check(op); err != nil {
		return nil, err
	}
	if c.bound {
		return newBoundResources(op, c.device, &c)
	}
	h, err := c.create(op)
	if err != nil {
		return nil, err
	}
	s, ev, err := ownStream(op, h)
	if err != nil {
		_ = generated.CuvsResourcesDestroy(h)
		return nil, err
	}
	pmem, err := newParamsMem(op)
	if err != nil {
		_ = destroyOn(resHandle{h, s, ev, unbound, 0})
		return nil, err
	}
	liveResources.Inc()
	r := &Resources{h: h, stream: s, event: ev, dev: unbound, pmem: pmem, noMemCheck: c.noMemCheck}
	r.devID.Store(-1)
	r.clean = runtime.AddCleanup(r, destroyResources, resHandle{h, s, ev, unbound, r.pmem})
	return r, nil
}

// liveResources counts the handles not yet destroyed, for tests' leak checks.
var liveResources = live.New("safe.Resources")

func destroyResources(h resHandle) {
	liveResources.Dec()
	_ = destroyOn(h)
}

// Close destroys the handle. Closing twice is harmless. It waits for a call
// in progress on r to finish.
//
// C objects made with r keep it: an index built, extended or deserialized
// on r (and the exact-path and filter state made on it) holds memory that
// cuVS frees, when the index is destroyed, on r's stream and through r's
// memory resources, and on the real library destroying an index after its
// Resources crashed the process (SIGSEGV in cuvsCagraIndexDestroy and
// cuvsBruteForceIndexDestroy). So while such an object lives, Close only
// closes r: every later call given r refuses with ErrClosed, and the
// handle and its stream are destroyed when the last of them is. Close the
// indexes to free them all; the order of the Close calls does not matter.
func (r *Resources) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.h == 0 {
		return nil
	}
	r.closed = true
	if r.deps > 0 {
		r.parked = true
		return nil
	}
	return r.destroy()
}

// destroy frees the handle and its stream; r.mu is held.
func (r *Resources) destroy() error {
	r.clean.Stop()
	liveResources.Dec()
	if err := destroyOn(resHandle{r.h, r.stream, r.event, r.dev, r.pmem}); err != nil {
		return cudaOrCuvs("safe.Resources.Close", err)
	}
	return nil
}

// retain keeps r's handle and stream alive until release is called (once;
// later calls do nothing), even if r is closed before: see Close. It
// refuses a nil, zero or closed r as lock does.
func (r *Resources) retain(op string) (release func(), err error) {
	if _, err := r.lock(op); err != nil {
		return nil, err
	}
	r.deps++
	r.unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.deps--
			if r.deps == 0 && r.parked {
				r.parked = false
				_ = r.destroy()
			}
		})
	}, nil
}

// Lock takes r for one C call and returns its handle; Unlock gives it back.
// The safe layer's packages use it around their calls; users do not need
// it. For a handle bound with OnDevice, Lock also locks the goroutine to
// its OS thread and makes r's device current there (cudaSetDevice, only
// when another is), and Unlock restores the thread's device and unlocks it:
// Lock and Unlock must be called on the same goroutine, with only C calls
// on r between them.
func (r *Resources) lock(op string) (generated.CuvsResources_t, error) {
	if r == nil {
		return 0, argf(op, "res", "nil *Resources")
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return 0, fmt.Errorf("%s: res: the Resources is closed: %w", op, ErrClosed)
	}
	if r.h == 0 {
		r.mu.Unlock()
		return 0, argf(op, "res", "a zero Resources: make one with NewResources")
	}
	if r.dev != unbound {
		if err := r.enter(op); err != nil {
			r.mu.Unlock()
			return 0, err
		}
	}
	return r.h, nil
}

// open refuses, as lock does, a nil, zero or closed r, naming op; it holds
// nothing after. An operation that goes on through others of the safe
// layer (a Slice helper uploading through DeviceMatrixFrom) asks it first,
// so that a closed r is refused under the name the caller called.
func (r *Resources) open(op string) error {
	if r == nil {
		return argf(op, "res", "nil *Resources")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("%s: res: the Resources is closed: %w", op, ErrClosed)
	}
	if r.h == 0 {
		return argf(op, "res", "a zero Resources: make one with NewResources")
	}
	return nil
}

// Unlock ends what Lock began.
func (r *Resources) unlock() {
	if r.dev != unbound {
		r.leave()
	}
	r.mu.Unlock()
}

// Sync waits until the work queued on r's stream is done.
func (r *Resources) Sync() error {
	const op = "safe.Resources.Sync"
	h, err := r.lock(op)
	if err != nil {
		return err
	}
	defer r.unlock()
	return wrap(op, generated.CuvsStreamSync(h))
}

// SyncBlocking waits as Sync does, but asleep: Sync (cudaStreamSynchronize,
// under CUDA's default scheduling) keeps the calling thread spinning on a
// CPU core until the GPU is done, which answers soonest but takes a core
// per waiting goroutine; SyncBlocking records a blocking-sync CUDA event on
// r's stream and waits for it (cudaEventRecord, cudaEventSynchronize with
// cudaEventBlockingSync), the thread sleeping until the GPU signals. Use it
// where many goroutines wait at once and the CPU has other work (the batch
// package's slots do with Options.Wait WaitSleep). The wake-up is later
// than a spin's: on the real H200 a lone one-query CAGRA search answered in
// 260 µs against 205 (p50). It is Sync where the CUDA runtime lacks events
// or r has no stream of its own, and after SetStream when the event cannot
// be recorded on the caller's stream (another device).
func (r *Resources) SyncBlocking() error {
	const op = "safe.Resources.SyncBlocking"
	h, err := r.lock(op)
	if err != nil {
		return err
	}
	defer r.unlock()
	if r.event != 0 {
		s := r.stream
		if r.cur != 0 {
			s = r.cur
		}
		err := cudart.WaitEvent(r.event, s)
		if err == nil {
			return nil
		}
		if ce, ok := err.(*cudart.Error); !ok || ce.Func != "cudaEventRecord" {
			return cudaError(op, err) // the queued work failed
		}
	}
	return wrap(op, generated.CuvsStreamSync(h))
}

// SetStream makes r queue its work on s, a cudaStream_t the caller owns and
// keeps alive while r uses it.
func (r *Resources) SetStream(s Stream) error {
	const op = "safe.Resources.SetStream"
	h, err := r.lock(op)
	if err != nil {
		return err
	}
	defer r.unlock()
	if err := generated.CuvsStreamSet(h, generated.CudaStream_t(s)); err != nil {
		return wrap(op, err)
	}
	r.cur = uintptr(s)
	if r.cur == r.stream {
		r.cur = 0
	}
	return nil
}

// Stream returns the stream r queues its work on: the one NewResources made
// for it (or the one SetStream gave), or cudaStreamLegacy (0x1) when no
// CUDA runtime could make one.
func (r *Resources) Stream() (Stream, error) {
	const op = "safe.Resources.Stream"
	h, err := r.lock(op)
	if err != nil {
		return 0, err
	}
	defer r.unlock()
	var s generated.CudaStream_t
	if err := generated.CuvsStreamGet(h, &s); err != nil {
		return 0, wrap(op, err)
	}
	return Stream(uintptr(s)), nil
}

// DeviceID returns the CUDA device r works on.
func (r *Resources) DeviceID() (int, error) {
	id, err := r.askDeviceID("safe.Resources.DeviceID")
	return int(id), err
}

// askDeviceID asks cuVS the device r works on (cuvsDeviceIdGet), for op:
// the operation its errors name, the caller's (a closed r is "op: res: the
// Resources is closed").
func (r *Resources) askDeviceID(op string) (int32, error) {
	h, err := r.lock(op)
	if err != nil {
		return 0, err
	}
	defer r.unlock()
	var id int32
	if err := generated.CuvsDeviceIdGet(h, &id); err != nil {
		return 0, wrap(op, err)
	}
	return id, nil
}
