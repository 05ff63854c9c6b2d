package safe

import (
	"runtime"
	"sync"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
)

// Stream is a CUDA stream (cudaStream_t), as a plain handle value.
type Stream uintptr

// Resources is a cuVS resources handle: a CUDA stream and the device it
// works on, plus cuVS's scratch state. Every cuVS call runs on one.
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
}

// NewResources creates a resources handle on the current CUDA device.
func NewResources() (*Resources, error) {
	var h generated.CuvsResources_t
	if err := generated.CuvsResourcesCreate(&h); err != nil {
		return nil, Wrap("safe.NewResources", err)
	}
	liveResources.Inc()
	r := &Resources{h: h}
	r.clean = runtime.AddCleanup(r, destroyResources, h)
	return r, nil
}

// liveResources counts the handles not yet destroyed, for tests' leak checks.
var liveResources = live.New("safe.Resources")

func destroyResources(h generated.CuvsResources_t) {
	liveResources.Dec()
	_ = generated.CuvsResourcesDestroy(h)
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
	return Wrap("safe.Resources.Close", generated.CuvsResourcesDestroy(r.h))
}

// Lock takes r for one C call and returns its handle; Unlock gives it back.
// The safe layer's packages use it around their calls; users do not need
// it.
func (r *Resources) Lock(op string) (generated.CuvsResources_t, error) {
	if r == nil {
		return 0, Argf(op, "res", "nil *Resources")
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return 0, closedError(op)
	}
	return r.h, nil
}

// Unlock ends what Lock began.
func (r *Resources) Unlock() { r.mu.Unlock() }

// Sync waits until the work queued on r's stream is done.
func (r *Resources) Sync() error {
	const op = "safe.Resources.Sync"
	h, err := r.Lock(op)
	if err != nil {
		return err
	}
	defer r.Unlock()
	return Wrap(op, generated.CuvsStreamSync(h))
}

// SetStream makes r queue its work on s, a cudaStream_t the caller owns and
// keeps alive while r uses it.
func (r *Resources) SetStream(s Stream) error {
	const op = "safe.Resources.SetStream"
	h, err := r.Lock(op)
	if err != nil {
		return err
	}
	defer r.Unlock()
	return Wrap(op, generated.CuvsStreamSet(h, generated.CudaStream_t(s)))
}

// Stream returns the stream r queues its work on.
func (r *Resources) Stream() (Stream, error) {
	const op = "safe.Resources.Stream"
	h, err := r.Lock(op)
	if err != nil {
		return 0, err
	}
	defer r.Unlock()
	var s generated.CudaStream_t
	if err := generated.CuvsStreamGet(h, &s); err != nil {
		return 0, Wrap(op, err)
	}
	return Stream(uintptr(s)), nil
}

// DeviceID returns the CUDA device r works on.
func (r *Resources) DeviceID() (int, error) {
	const op = "safe.Resources.DeviceID"
	h, err := r.Lock(op)
	if err != nil {
		return 0, err
	}
	defer r.Unlock()
	var id int32
	if err := generated.CuvsDeviceIdGet(h, &id); err != nil {
		return 0, Wrap(op, err)
	}
	return int(id), nil
}
