package kit

import (
	"fmt"
	"math"
	"sync"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/base"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// ReserveBuild refuses a build whose estimate (its peak, plus the device
// copy of a host dataset the bindings make before calling cuVS) exceeds what
// res's device can still give, with a *safe.MemoryError, unless res was
// made safe.WithoutMemoryCheck; else it counts the peak in
// safe.DeviceMemory.InUse until done is called (the upload counts itself).
func ReserveBuild(op string, res *safe.Resources, est safe.MemoryEstimate) (done func(), err error) {
	return base.Reserve(res, op, "the build (EstimateMemory: BuildPeak + Dataset)", est.BuildPeak+est.Dataset, est.BuildPeak, true)
}

// KeepIndex counts an index's estimated device bytes in
// safe.DeviceMemory.InUse until life releases the index.
func KeepIndex(op string, res *safe.Resources, life *Life, bytes int64) {
	if rel, err := base.Reserve(res, op, "", 0, bytes, false); err == nil {
		life.OnRelease(rel)
	}
}

// Charge counts bytes in safe.DeviceMemory.InUse until release is called
// (at most once counts): for device memory an index holds apart from its
// Life (tiered's C index, replaced as the index grows).
func Charge(op string, res *safe.Resources, bytes int64) (release func()) {
	if rel, err := base.Reserve(res, op, "", 0, bytes, false); err == nil {
		return rel
	}
	return func() {}
}

// CheckMemory refuses, with a *safe.MemoryError, an operation needing need
// bytes of device memory (its estimated peak) that res's device cannot
// give, unless res was made safe.WithoutMemoryCheck; it counts nothing.
func CheckMemory(op string, res *safe.Resources, need int64) error {
	_, err := base.Reserve(res, op, "the operation's peak (EstimateMemory)", need, 0, true)
	return err
}

// CheckFileMemory refuses, with a *safe.MemoryError, a Deserialize whose
// index needs need bytes of device memory (the package's bound of what it
// will hold, from the file's header) that res's device cannot give, before
// cuVS reads the file, unless res was made safe.WithoutMemoryCheck; it
// counts nothing (the loaded index counts what it holds).
func CheckFileMemory(op string, res *safe.Resources, need int64) error {
	_, err := base.Reserve(res, op, "the index the file holds (from its header)", need, 0, true)
	return err
}

// Product multiplies a header's counts without wrapping: 0 when a count
// is 0, else math.MaxInt64 when a count is negative or the product
// overflows (more than any file holds: FileHolds refuses it).
func Product(xs ...int64) int64 {
	p := int64(1)
	for _, x := range xs {
		if x == 0 {
			return 0
		}
	}
	for _, x := range xs {
		if x < 0 || p > math.MaxInt64/x {
			return math.MaxInt64
		}
		p *= x
	}
	return p
}

// FileHolds refuses a header whose counts need more data than the file
// holds: data bytes (a Product of them) that any file of the format, cuVS's
// or the test double's, holds for them, against the file's size bytes. A
// header that claims more rows than its file holds is a damaged or
// truncated file, not an index too large for the device.
func FileHolds(size int64, what string, data int64) error {
	if data > size {
		return fmt.Errorf("%w: the header's sizes need %d bytes of %s, the file holds %d in all (truncated or damaged)", npy.ErrFormat, data, what, size)
	}
	return nil
}

// ReserveExtend refuses an Extend (or a Merge) whose estimate exceeds what
// res's device can still give, as ReserveBuild refuses a build: est is
// what the operation takes beyond what the index already holds
// (BuildPeak, counted in safe.DeviceMemory.InUse until done is called)
// and the bindings' own allocations for it (Dataset: they count
// themselves); what names the estimate in the *safe.MemoryError.
func ReserveExtend(op, what string, res *safe.Resources, est safe.MemoryEstimate) (done func(), err error) {
	return base.Reserve(res, op, what, est.BuildPeak+est.Dataset, est.BuildPeak, true)
}

// Held is what an index counts in safe.DeviceMemory.InUse for the device
// memory it holds: set when the index is made (Build, Deserialize, Merge),
// replaced when it changes (Extend), released with the index. It lives
// apart from the index (a Life's OnRelease may not point into the index),
// and is safe for concurrent use.
type Held struct {
	mu      sync.Mutex
	bytes   int64
	release func()
}

// NewHeld returns a Held that life releases with the index.
func NewHeld(life *Life) *Held {
	h := &Held{}
	life.OnRelease(h.Release)
	return h
}

// Set counts bytes on res's device in place of what h counted before.
func (h *Held) Set(op string, res *safe.Resources, bytes int64) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.release != nil {
		h.release()
	}
	h.release, h.bytes = nil, 0
	if rel, err := base.Reserve(res, op, "", 0, bytes, false); err == nil && bytes > 0 {
		h.release, h.bytes = rel, bytes
	}
}

// Bytes is what h counts now.
func (h *Held) Bytes() int64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bytes
}

// Release stops counting (at most once counts).
func (h *Held) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.release != nil {
		h.release()
	}
	h.release, h.bytes = nil, 0
}

// ExtendShape completes and checks the shape of an EstimateExtend: s.Rows
// rows to add to an index of dim columns of dt (dt zero: not known yet),
// s.Dim 0 or dim, s.DType zero or dt; no search (Batch 0).
func ExtendShape(op string, s *safe.MemoryShape, dim int64, dt dlpack.DataType) error {
	if s.Dim == 0 {
		s.Dim = int(dim)
	}
	if s.DType == (dlpack.DataType{}) {
		s.DType = dt
	}
	if err := s.Check(op); err != nil {
		return err
	}
	if int64(s.Dim) != dim || (dt != (dlpack.DataType{}) && s.DType != dt) || s.Batch != 0 {
		return Argf(op, "shape", "%d × %d %s, batch %d: the index holds %s × %d and Extend searches nothing", s.Rows, s.Dim, s.DType, s.Batch, dt, dim)
	}
	return nil
}
