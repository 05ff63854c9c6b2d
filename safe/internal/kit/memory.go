package kit

import (
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
