package multigpu

import (
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Resources is a multi-GPU resources handle: one rank per device, with an
// NCCL clique over them (raft's device_resources_snmg). Every function of
// this package runs on one; the first device of the list is the root rank,
// where sharded results are merged.
//
// It is a type of its own, not a safe.Resources: the C API hands both out
// as cuvsResources_t and cannot tell them apart (a single-GPU handle given to
// a multi-GPU function is reinterpreted, undefined behaviour), so here
// passing one where the other belongs does not compile.
//
// Calls on one Resources are serialized (cuVS drives every device of the
// clique from the calling thread's OpenMP team). The zero Resources is not
// usable: every call given one returns an *safe.ArgError naming it; its
// Close does nothing.
//
// One GPU is enough: resources on one device lay an index over it (sharded
// is then one shard), with every operation of two. A library built without
// multi-GPU support (CUVS_BUILD_MG_ALGOS off) lacks every function of this
// package: each call returns an error wrapping generated.ErrMissingSymbol.
type Resources struct {
	mu      sync.Mutex
	h       generated.CuvsResources_t
	devices []int // the ranks' devices, root first; nil when not known
	closed  bool
	clean   runtime.Cleanup
}

// Option configures NewResources.
type Option func(*config)

type config struct {
	devices    []int
	hasDevices bool
	pool       int
}

// WithDevices makes the clique of these CUDA devices, in this order (the
// first is the root rank): cuvsMultiGpuResourcesCreateWithDeviceIds, given
// the list as an int32 host vector. Without it NewResources takes every
// visible device (cuvsMultiGpuResourcesCreate). The list must be non-empty,
// without repeats, and every id a visible device.
func WithDevices(ids ...int) Option {
	return func(c *config) { c.devices, c.hasDevices = append([]int(nil), ids...), true }
}

// WithMemoryPool gives every device of the clique an RMM pool sized at
// percent (1 to 100) of its free memory
// (cuvsMultiGpuResourcesSetMemoryPool).
func WithMemoryPool(percent int) Option {
	return func(c *config) { c.pool = percent }
}

var liveResources = live.New("multigpu.Resources")

// NewResources creates a multi-GPU resources handle: on every visible
// device, or on WithDevices' list (checked against safe.DeviceCount first).
// With WithMemoryPool, the pool is set before NewResources returns; if that
// fails, the handle is destroyed.
//
// C calls: cuvsMultiGpuResourcesCreate or
// cuvsMultiGpuResourcesCreateWithDeviceIds, cuvsMultiGpuResourcesSetMemoryPool
// (WithMemoryPool), cuvsMultiGpuResourcesDestroy (on failure); and
// cudaGetDeviceCount (safe.DeviceCount).
func NewResources(opts ...Option) (*Resources, error) {
	const op = "multigpu.NewResources"
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.pool != 0 && (c.pool < 1 || c.pool > 100) {
		return nil, kit.Argf(op, "WithMemoryPool", "%d%% is not in [1, 100]", c.pool)
	}
	count, cerr := safe.DeviceCount()
	var devices []int
	if c.hasDevices {
		if len(c.devices) == 0 {
			return nil, kit.Argf(op, "WithDevices", "an empty device list")
		}
		for i, d := range c.devices {
			if d < 0 || (cerr == nil && d >= count) || d > 1<<30 {
				return nil, kit.Argf(op, "WithDevices", "device %d: %d visible devices", d, count)
			}
			if slices.Contains(c.devices[:i], d) {
				return nil, kit.Argf(op, "WithDevices", "device %d listed twice", d)
			}
		}
		devices = c.devices
	} else if cerr == nil {
		devices = make([]int, count)
		for i := range devices {
			devices[i] = i
		}
	}
	var h generated.CuvsResources_t
	if c.hasDevices {
		ids := make([]int32, len(devices))
		for i, d := range devices {
			ids[i] = int32(d)
		}
		v, err := dlpack.NewHostVector(ids).View()
		if err != nil {
			return nil, kit.Argf(op, "WithDevices", "%w", err)
		}
		call := dlpack.Begin(op)
		t, err := call.In(&v)
		if err == nil {
			err = kit.Wrap(op, generated.CuvsMultiGpuResourcesCreateWithDeviceIds(&h, t))
		} else {
			err = kit.Argf(op, "WithDevices", "%w", err)
		}
		call.End()
		if err != nil {
			return nil, err
		}
	} else if err := generated.CuvsMultiGpuResourcesCreate(&h); err != nil {
		return nil, kit.Wrap(op, err)
	}
	if c.pool != 0 {
		if err := generated.CuvsMultiGpuResourcesSetMemoryPool(h, int32(c.pool)); err != nil {
			_ = generated.CuvsMultiGpuResourcesDestroy(h)
			return nil, kit.Wrap(op, err)
		}
	}
	liveResources.Inc()
	r := &Resources{h: h, devices: devices}
	r.clean = runtime.AddCleanup(r, destroyResources, h)
	return r, nil
}

func destroyResources(h generated.CuvsResources_t) {
	liveResources.Dec()
	_ = generated.CuvsMultiGpuResourcesDestroy(h)
}

// Devices returns the ranks' CUDA devices, root first (a copy); nil when
// the visible devices could not be counted (no CUDA runtime found).
func (r *Resources) Devices() []int {
	if r == nil {
		return nil
	}
	return append([]int(nil), r.devices...)
}

// Ranks returns the number of devices of the clique, 0 when not known
// (see Devices).
func (r *Resources) Ranks() int {
	if r == nil {
		return 0
	}
	return len(r.devices)
}

// Close destroys the handle (cuvsMultiGpuResourcesDestroy). Closing twice is
// harmless; it waits for a call in progress on r. If the destroy fails, r
// stays open and a later Close tries again.
func (r *Resources) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.h == 0 {
		return nil
	}
	if err := generated.CuvsMultiGpuResourcesDestroy(r.h); err != nil {
		// Still alive: a later Close (or the cleanup) tries again.
		return kit.Wrap("multigpu.Resources.Close", err)
	}
	r.closed = true
	r.clean.Stop()
	liveResources.Dec()
	return nil
}

// lock takes r for one C call and returns its handle; unlock gives it back.
func (r *Resources) lock(op string) (generated.CuvsResources_t, error) {
	if r == nil {
		return 0, kit.Argf(op, "res", "nil *multigpu.Resources")
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return 0, fmt.Errorf("%s: res: the Resources is closed: %w", op, safe.ErrClosed)
	}
	if r.h == 0 {
		r.mu.Unlock()
		return 0, kit.Argf(op, "res", "a zero Resources: make one with NewResources")
	}
	return r.h, nil
}

func (r *Resources) unlock() { r.mu.Unlock() }
