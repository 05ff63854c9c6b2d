package safe

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/base"
	"github.com/cuvs-go/cuvs/safe/internal/cudart"
)

// DeviceMemory is a device's memory as CUDA and the safe layer see it now
// (Resources.DeviceMemory). Sizes are bytes.
type DeviceMemory struct {
	Device int
	// Free and Total are cudaMemGetInfo's. A pool's reserve, used or not,
	// is not free. Both are 0 where the CUDA runtime has no cudaMemGetInfo.
	Free, Total int64
	Pool        PoolState
	// InUse is what the safe layer accounts on the device: its
	// DeviceMatrix and DeviceVector allocations, the estimated device size
	// of every live index it built (the packages' EstimateMemory), and the
	// estimated peak of every Build running. cuVS's C API does not report
	// what its pool has handed out: this is the bindings' own count, as
	// good as the estimates.
	InUse int64
	// Limit is SetMemoryLimit's (or WithMemoryLimit's) promise, 0 for none.
	Limit int64
	// Available is what a new allocation can still get: the free memory,
	// plus the pool's reserve not in use, but no more than the pool's
	// maximum or Limit less InUse. Builds are refused when their estimated
	// peak exceeds it. -1 when not known: no cudaMemGetInfo, no pool
	// sizes, no Limit.
	Available int64
}

// PoolState is the device memory pool Load (or EnableMemoryPool) made on
// a device: cuVS's pool_memory_resource, whose sizes cuVS computes as a
// percent of the device's free memory when it is enabled (RMM's
// percent_of_free_device_memory, aligned down to 256 bytes). The safe layer
// reads the free memory just before and computes the same sizes.
type PoolState struct {
	Enabled bool
	Managed bool
	// Initial is what the pool took from the device when enabled, Max the
	// most it may grow to: its cap. 0 when not known (no cudaMemGetInfo).
	Initial, Max int64
	// Size is what the pool holds from the device now, as seen from the
	// free memory: Initial, or what the free memory fell by since the pool
	// was enabled, whichever is larger (an overestimate when something
	// else allocated meanwhile), at most Max.
	Size int64
}

// MemoryShape is what an index package's EstimateMemory estimates for: a
// build over Rows × Dim vectors of DType, in host memory when HostDataset,
// and a search of Batch queries for K neighbours (Batch 0: no search
// estimate).
type MemoryShape struct {
	Rows, Dim   int
	DType       dlpack.DataType
	HostDataset bool
	Batch, K    int
}

// Check refuses a shape no estimate can be made for, naming op.
func (s MemoryShape) Check(op string) error {
	if s.Rows < 1 || s.Dim < 1 {
		return argf(op, "shape", "%d rows × %d dimensions, want at least 1 × 1", s.Rows, s.Dim)
	}
	if int64(s.Rows) > (1<<48)/int64(s.Dim) || s.Batch > 1<<31 || s.K > 1<<20 {
		return argf(op, "shape", "%d rows × %d dimensions, batch %d, k %d: too large to estimate", s.Rows, s.Dim, s.Batch, s.K)
	}
	if s.Batch < 0 || s.K < 0 || (s.Batch > 0 && s.K < 1) {
		return argf(op, "shape", "batch %d, k %d: want both positive, or batch 0 for no search", s.Batch, s.K)
	}
	return nil
}

// MemoryEstimate is what an index package's EstimateMemory expects a
// build, the built index and a search to take of device memory, in bytes.
// See each package's doc for what it counts and leaves out.
type MemoryEstimate struct {
	// BuildPeak is the most cuVS's build holds at once: the index under
	// construction and its scratch.
	BuildPeak int64
	// Dataset is the device copy the bindings make of a dataset given in
	// host memory before calling cuVS (0 for a device dataset, or where
	// cuVS takes host rows itself); Build checks BuildPeak + Dataset.
	Dataset int64
	// Index is the built index's device memory, held until Close.
	Index int64
	// Search is a search's scratch for the batch size asked.
	Search int64
}

// MemoryError is a refusal made before cuVS was called: the estimate of
// what the call needs exceeds what the device can still give. It matches
// ErrOutOfMemory.
type MemoryError struct {
	Op        string
	What      string // e.g. "the build's peak (EstimateMemory)"
	Need      int64  // bytes, estimated
	Available int64  // DeviceMemory.Available when refused
	Free      int64  // cudaMemGetInfo's free bytes
	PoolMax   int64  // the pool's maximum, 0 without one
	Limit     int64  // SetMemoryLimit's, 0 without one
	InUse     int64  // the safe layer's count (DeviceMemory.InUse)

	exact bool // an allocation of known size over Limit: WithoutMemoryCheck does not skip it
}

func (e *MemoryError) Error() string {
	s := fmt.Sprintf("%s: %s needs about %s of device memory, the device can give %s (free %s, in use by the bindings %s",
		e.Op, e.What, fmtBytes(e.Need), fmtBytes(e.Available), fmtBytes(e.Free), fmtBytes(e.InUse))
	if e.PoolMax > 0 {
		s += ", pool cap " + fmtBytes(e.PoolMax)
	}
	if e.Limit > 0 {
		s += ", limit " + fmtBytes(e.Limit)
	}
	if e.exact {
		return s + "): out of device memory (refused: SetMemoryLimit's limit)"
	}
	return s + "): out of device memory (refused before calling cuVS; NewResources(WithoutMemoryCheck()) skips the check)"
}

// Is makes errors.Is(err, ErrOutOfMemory) true.
func (e *MemoryError) Is(target error) bool { return target == ErrOutOfMemory }

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30 || n <= -(1<<30):
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20 || n <= -(1<<20):
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d B", n)
}

// WithoutMemoryCheck makes the Resources' builds skip the check of their
// estimated peak (the index packages' EstimateMemory) against what the
// device can still give (DeviceMemory.Available: free memory, the pool's
// cap, SetMemoryLimit's limit): cuVS is called whatever the estimate, and
// fails inside the build (ErrOutOfMemory) if memory runs out, the pool's
// cap holding. For estimates known to be wrong for a workload. The
// bindings still count the build and its index in DeviceMemory.InUse, and
// an exact allocation (NewDeviceMatrix, a host dataset's upload) over
// SetMemoryLimit's limit is still refused.
func WithoutMemoryCheck() ResourcesOption {
	return func(c *resourcesConfig) { c.noMemCheck = true }
}

// memDevices is the safe layer's count per device, and its pools.
var memDevices struct {
	mu    sync.Mutex
	inUse [64]atomic.Int64
	pool  [64]poolRecord
	limit atomic.Int64
}

type poolRecord struct {
	on, managed  bool
	freeAtEnable int64 // free memory just before the pool was enabled
	initial, max int64
}

func devSlot(d int32) int32 {
	if d < 0 || d >= 64 {
		return 0
	}
	return d
}

// memInfoOn returns device d's free and total memory (cudaMemGetInfo with d
// current on a locked thread); ok false when the runtime lacks the call.
func memInfoOn(op string, d int32) (free, total int64, ok bool, err error) {
	if openCUDART(op) != nil || !cudart.HasMemInfo() {
		return 0, 0, false, nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := cudart.Enter(d)
	if err != nil {
		return 0, 0, false, cudaError(op, err)
	}
	defer func() { _ = cudart.Leave(prev, d) }()
	f, t, err := cudart.MemInfo()
	if err != nil {
		return 0, 0, false, cudaError(op, err)
	}
	return int64(f), int64(t), true, nil
}

// currentDevice is the calling thread's device (0 when unknown).
func currentDevice() int32 {
	if openCUDART("") != nil {
		return 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, err := cudart.GetDevice()
	if err != nil {
		return 0
	}
	return int32(d)
}

// poolSizes computes what cuvsRMMPoolMemoryResourceEnable will make of the
// percents on device d, from its free memory now (before the call).
func recordPool(d int32, initialPct, maxPct int, managed bool) {
	free, _, ok, _ := memInfoOn("safe", d)
	rec := poolRecord{on: true, managed: managed}
	if ok {
		rec.freeAtEnable = free
		rec.initial = int64(float64(free)*float64(initialPct)/100) / 256 * 256
		rec.max = int64(float64(free)*float64(maxPct)/100) / 256 * 256
	}
	memDevices.mu.Lock()
	memDevices.pool[devSlot(d)] = rec
	memDevices.mu.Unlock()
}

// recordNoPool notes that device d's resource is no pool (reset, async).
func recordNoPool(d int32) {
	memDevices.mu.Lock()
	memDevices.pool[devSlot(d)] = poolRecord{}
	memDevices.mu.Unlock()
}

// SetMemoryLimit promises that the safe layer keeps its device memory
// (DeviceMemory.InUse, per device) under bytes: a Build whose estimated
// peak would cross it is refused with a *MemoryError before cuVS is called,
// as is a NewDeviceMatrix that would. 0 removes the limit. It binds the
// bindings' own count, made of estimates: to make the allocator itself
// refuse past a size, give the pool that maximum (WithMemoryLimit).
func SetMemoryLimit(bytes int64) error {
	if bytes < 0 {
		return argf("safe.SetMemoryLimit", "bytes", "%d is negative", bytes)
	}
	memDevices.limit.Store(bytes)
	return nil
}

// MemoryLimit returns SetMemoryLimit's bytes, 0 for none.
func MemoryLimit() int64 { return memDevices.limit.Load() }

// WithMemoryLimit makes Load's pool (on every device) grow to at most
// bytes, and sets SetMemoryLimit(bytes): a process that loads with it
// stays under bytes of device memory from cuVS, a build that would cross
// it being refused by the bindings' check before the call, and any
// allocation past it (a build unchecked or misestimated, a search) by the
// pool, with ErrOutOfMemory. cuVS sizes its pool as a percent of the free
// memory: Load makes the free memory bytes for the moment it enables the
// pool (a cudaMalloc'd filler, freed right after), so the cap is bytes
// less at most a 2 MiB CUDA page, never more; without cudaMalloc, the
// largest whole percent of the free memory not above bytes. The pool's initial reservation is its percent
// (WithMemoryPool's, else DefaultPoolInitialPercent) of bytes.
// WithMemoryLimit overrides WithAsyncMemoryResource and WithMemoryPool's
// maximum.
func WithMemoryLimit(bytes int64) Option {
	return func(c *loadConfig) { c.limit = bytes }
}

// enablePool enables the pool on device d (current on the calling thread)
// with initialPct% of its free memory reserved and maxPct% at most, as
// cuvsRMMPoolMemoryResourceEnable computes them, and records its sizes.
// With limit > 0 the maximum is limit bytes: cuVS sizes the pool as a
// percent of the free memory, so a cudaMalloc'd filler first takes what is
// free beyond limit, the pool is made at 100% of what is left, and the
// filler is freed (without cudaMalloc: the largest whole percent of the
// free memory not above limit).
func enablePool(op string, d int32, initialPct, maxPct int, managed bool, limit int64) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var filler uintptr
	if limit > 0 {
		free, _, ok, err := memInfoOn(op, d)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s: WithMemoryLimit: the CUDA runtime has no cudaMemGetInfo: %w", op, errors.ErrUnsupported)
		}
		maxPct = 100
		if free > limit {
			if cudart.HasMalloc() {
				if p, err := cudart.Malloc(uint64(free - limit)); err == nil {
					filler = p
				}
			}
			if filler == 0 {
				maxPct = int(limit * 100 / free)
				if maxPct < 1 {
					return argf(op, "WithMemoryLimit", "%s is under 1%% of the %s free, and no cudaMalloc to size the pool otherwise", fmtBytes(limit), fmtBytes(free))
				}
			}
		}
		initialPct = min(initialPct, maxPct)
	}
	recordPool(d, initialPct, maxPct, managed)
	err := generated.CuvsRMMPoolMemoryResourceEnable(int32(initialPct), int32(maxPct), managed)
	if filler != 0 {
		_ = cudart.Free(filler)
		// the free memory the pool's growth is read against: what is free
		// now, plus what the pool took at once
		if free, _, ok, _ := memInfoOn(op, d); ok {
			memDevices.mu.Lock()
			rec := &memDevices.pool[devSlot(d)]
			rec.freeAtEnable = free + rec.initial
			memDevices.mu.Unlock()
		}
	}
	if err != nil {
		recordNoPool(d)
		return wrap(op+": enabling the memory pool", err)
	}
	return nil
}

// DeviceMemory reports r's device's memory: free and total
// (cudaMemGetInfo), its pool, and what the safe layer accounts on it.
func (r *Resources) DeviceMemory() (DeviceMemory, error) {
	const op = "safe.Resources.DeviceMemory"
	if r == nil {
		return DeviceMemory{}, argf(op, "res", "nil *Resources")
	}
	d, err := r.deviceID(op)
	if err != nil {
		return DeviceMemory{}, err
	}
	return deviceMemory(op, d)
}

func deviceMemory(op string, d int32) (DeviceMemory, error) {
	free, total, ok, err := memInfoOn(op, d)
	if err != nil {
		return DeviceMemory{}, err
	}
	memDevices.mu.Lock()
	rec := memDevices.pool[devSlot(d)]
	memDevices.mu.Unlock()
	m := DeviceMemory{Device: int(d), Free: free, Total: total, InUse: memDevices.inUse[devSlot(d)].Load(), Limit: memDevices.limit.Load()}
	m.Pool = PoolState{Enabled: rec.on, Managed: rec.managed, Initial: rec.initial, Max: rec.max}
	avail, known := free, ok
	if rec.on && rec.max > 0 {
		m.Pool.Size = min(max(rec.initial, rec.freeAtEnable-free), rec.max)
		spare := max(m.Pool.Size-m.InUse, 0)
		if known {
			avail = min(free+spare, rec.max-m.InUse)
		} else {
			avail = rec.max - m.InUse
		}
		known = true
	}
	if m.Limit > 0 {
		if known {
			avail = min(avail, m.Limit-m.InUse)
		} else {
			avail = m.Limit - m.InUse
		}
		known = true
	}
	m.Available = -1
	if known {
		m.Available = max(avail, 0)
	}
	return m, nil
}

// reserve checks (unless r was made WithoutMemoryCheck, or check is false)
// that r's device can give need bytes, a *MemoryError otherwise, and counts
// charge bytes on it until release is called. what names the need in the
// error.
func (r *Resources) reserve(op, what string, need, charge int64, check bool) (release func(), err error) {
	if r == nil {
		return nil, argf(op, "res", "nil *Resources")
	}
	d, err := r.deviceID(op)
	if err != nil {
		return nil, err
	}
	if check && need > 0 && !r.noMemCheck {
		m, err := deviceMemory(op, d)
		if err != nil {
			return nil, err
		}
		if m.Available >= 0 && need > m.Available {
			return nil, &MemoryError{Op: op, What: what, Need: need, Available: m.Available, Free: m.Free, PoolMax: m.Pool.Max, Limit: m.Limit, InUse: m.InUse}
		}
	}
	if charge <= 0 {
		return func() {}, nil
	}
	c := &memDevices.inUse[devSlot(d)]
	c.Add(charge)
	var once sync.Once
	return func() { once.Do(func() { c.Add(-charge) }) }, nil
}

// chargeMatrix counts a DeviceMatrix's bytes (rounded up as RMM rounds
// them) on device d, refusing with a *MemoryError when they would cross
// SetMemoryLimit's limit; uncharge gives them back.
func chargeMatrix(op string, d int32, bytes uint64) error {
	b := int64((bytes + 255) / 256 * 256)
	c := &memDevices.inUse[devSlot(d)]
	if lim := memDevices.limit.Load(); lim > 0 {
		if in := c.Load(); in+b > lim {
			return &MemoryError{Op: op, What: "the matrix", Need: b, Available: max(lim-in, 0), Limit: lim, InUse: in, exact: true}
		}
	}
	c.Add(b)
	return nil
}

func unchargeMatrix(d int32, bytes uint64) {
	memDevices.inUse[devSlot(d)].Add(-int64((bytes + 255) / 256 * 256))
}

func init() {
	base.Reserve = func(res any, op, what string, need, charge int64, check bool) (func(), error) {
		return res.(*Resources).reserve(op, what, need, charge, check)
	}
}
