package safe

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
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
type Resources struct {
	mu     sync.Mutex
	h      generated.CuvsResources_t
	closed bool
	clean  runtime.Cleanup
	dev    int32        // OnDevice's device, or unbound
	prev   int32        // between Lock and Unlock of a bound handle: the device to restore
	devID  atomic.Int32 // the device id once known (CheckDevice), else -1
}

// NewResources creates a resources handle (cuvsResourcesCreate): on the
// calling thread's current CUDA device, or, with OnDevice(n), on device n
// and bound to it.
func NewResources(opts ...ResourcesOption) (*Resources, error) {
	const op = "safe.NewResources"
	var c resourcesConfig
	for _, o := range opts {
		o(&c)
	}
	if c.bound {
		return newBoundResources(op, c.device)
	}
	var h generated.CuvsResources_t
	if err := generated.CuvsResourcesCreate(&h); err != nil {
		return nil, wrap(op, err)
	}
	liveResources.Inc()
	r := &Resources{h: h, dev: unbound}
	r.devID.Store(-1)
	r.clean = runtime.AddCleanup(r, destroyResources, resHandle{h, unbound})
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
func (r *Resources) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.clean.Stop()
	liveResources.Dec()
	if err := destroyOn(resHandle{r.h, r.dev}); err != nil {
		return cudaOrCuvs("safe.Resources.Close", err)
	}
	return nil
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
		return 0, closedError(op)
	}
	if r.dev != unbound {
		if err := r.enter(op); err != nil {
			r.mu.Unlock()
			return 0, err
		}
	}
	return r.h, nil
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

// SetStream makes r queue its work on s, a cudaStream_t the caller owns and
// keeps alive while r uses it.
func (r *Resources) SetStream(s Stream) error {
	const op = "safe.Resources.SetStream"
	h, err := r.lock(op)
	if err != nil {
		return err
	}
	defer r.unlock()
	return wrap(op, generated.CuvsStreamSet(h, generated.CudaStream_t(s)))
}

// Stream returns the stream r queues its work on.
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
	const op = "safe.Resources.DeviceID"
	h, err := r.lock(op)
	if err != nil {
		return 0, err
	}
	defer r.unlock()
	var id int32
	if err := generated.CuvsDeviceIdGet(h, &id); err != nil {
		return 0, wrap(op, err)
	}
	return int(id), nil
}
