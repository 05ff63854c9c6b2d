package kit

import (
	"sync"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/base"
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

// CheckFileMemory refuses, with a *safe.MemoryError, a Deserialize of a
// file of bytes bytes of index data whose index res's device cannot hold,
// before cuVS reads it, unless res was made safe.WithoutMemoryCheck. The
// need is three quarters of the file's data: a lower bound of what the
// loaded index takes on the device, whose arrays are the file's (IVF lists
// at their capacities, CAGRA's rows padded) less the format's own headers
// and sizes (on the double's models of cuVS's loaders, a file of 512 rows
// is at most 1.15 times what its index holds; larger ones come closer), so
// that a load that fits is never refused; what the index then holds
// counts in safe.DeviceMemory.InUse.
func CheckFileMemory(op string, res *safe.Resources, bytes int64) error {
	_, err := base.Reserve(res, op, "the index the file holds (3/4 of its data's bytes)", fileNeed(bytes), 0, true)
	return err
}

// fileNeed is what CheckFileMemory asks for a file of bytes bytes.
func fileNeed(bytes int64) int64 { return bytes / 4 * 3 }

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
