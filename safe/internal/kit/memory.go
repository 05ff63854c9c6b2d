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
