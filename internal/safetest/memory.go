package safetest

import (
	"errors"
	"math"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
)

// MemoryCase is one build whose estimate is checked against the double's
// accounting of device memory (internal/cuvsdouble's DeviceMemory: what
// cuVS would take from the memory resource, as the double's build takes
// it). Build builds on res from a dataset already on the device (or in
// host memory: then the upload counts in the peak, as Dataset); CFunc is
// the C build function, counted to show a refusal never reached it.
type MemoryCase struct {
	Name     string
	Estimate safe.MemoryEstimate
	Build    func(res *safe.Resources) (interface{ Close() error }, error)
	CFunc    string
	// Own is the device memory Build allocates itself for the dataset
	// (and frees, or, with OwnKept, keeps with the index until Close):
	// part of the peak measured.
	Own     int64
	OwnKept bool
	// Tol is the relative tolerance of the peak and index comparisons
	// (the estimates assume balanced lists; the double's k-means is not).
	Tol float64
}

func within(got, want int64, tol float64) bool {
	if want == 0 {
		return got == 0
	}
	return math.Abs(float64(got-want)) <= tol*float64(want)
}

// CheckMemoryEstimate builds c on the double and checks its estimate: the
// peak the double's memory resource reached during the build (less what
// was allocated before) against BuildPeak + Dataset, what stays allocated
// after against Index, the bindings' own count (DeviceMemory.InUse)
// growing by Index exactly and back after Close, and everything freed.
func CheckMemoryEstimate(t *testing.T, c MemoryCase) {
	t.Helper()
	ctl := Double(t, "the double's device memory accounting")
	res := Resources(t)
	Check(t)
	before := ctl.DeviceMemory(0).Allocated
	bm, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	ctl.ResetDevicePeak(0)
	idx, err := c.Build(res)
	if err != nil {
		t.Fatalf("%s: build: %v", c.Name, err)
	}
	after := ctl.DeviceMemory(0)
	peak, held := int64(after.Peak-before), int64(after.Allocated-before)
	t.Logf("%s: estimate peak %d (+ dataset %d) index %d; the double: peak %d, held %d", c.Name, c.Estimate.BuildPeak, c.Estimate.Dataset, c.Estimate.Index, peak, held)
	if !within(peak-c.Own, c.Estimate.BuildPeak+c.Estimate.Dataset, c.Tol) {
		t.Errorf("%s: build peak %d bytes on the double (less %d of the caller's dataset), estimated %d + %d (tolerance %.0f%%)", c.Name, peak, c.Own, c.Estimate.BuildPeak, c.Estimate.Dataset, 100*c.Tol)
	}
	if c.OwnKept {
		held -= c.Own
	}
	kept := keptUpload(held, c.Estimate)
	held -= kept * c.Estimate.Dataset
	if !within(held, c.Estimate.Index, c.Tol) {
		t.Errorf("%s: the index holds %d bytes on the double, estimated %d (tolerance %.0f%%)", c.Name, held, c.Estimate.Index, 100*c.Tol)
	}
	am, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	own := int64(0)
	if c.OwnKept {
		own = c.Own
	}
	if got := am.InUse - bm.InUse - own; got != c.Estimate.Index+c.Estimate.Dataset*kept {
		t.Errorf("%s: DeviceMemory.InUse grew by %d, want the index's estimate %d", c.Name, got, c.Estimate.Index)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ctl.DeviceMemory(0).Allocated; got != before {
		t.Errorf("%s: %d bytes allocated on the double after Close, %d before the build", c.Name, got, before)
	}
	if em, _ := res.DeviceMemory(); em.InUse != bm.InUse {
		t.Errorf("%s: DeviceMemory.InUse %d after Close, %d before", c.Name, em.InUse, bm.InUse)
	}
}

// keptUpload is 1 when the index keeps the bindings' upload of a host
// dataset (brute force's does), which then counts in InUse too.
func keptUpload(held int64, e safe.MemoryEstimate) int64 {
	if e.Dataset > 0 && held >= e.Index+e.Dataset {
		return 1
	}
	return 0
}

// CheckMemoryLimit checks that, with safe.SetMemoryLimit under what c's
// build needs, Build is refused with a *safe.MemoryError matching
// safe.ErrOutOfMemory before cuVS is called, and that a Resources made
// WithoutMemoryCheck calls cuVS anyway.
func CheckMemoryLimit(t *testing.T, c MemoryCase) {
	t.Helper()
	ctl := Double(t, "call counts")
	res := Resources(t)
	Check(t)
	m, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	need := c.Estimate.BuildPeak + c.Estimate.Dataset
	limit := m.InUse + c.Own + need - 1 // Build's own dataset fits, the build does not
	if err := safe.SetMemoryLimit(limit); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = safe.SetMemoryLimit(0) })
	calls := ctl.Calls(c.CFunc)
	idx, err := c.Build(res)
	var me *safe.MemoryError
	if !errors.Is(err, safe.ErrOutOfMemory) || !errors.As(err, &me) {
		if idx != nil {
			_ = idx.Close()
		}
		t.Fatalf("%s: build over the limit: %v (%T), want a *safe.MemoryError matching ErrOutOfMemory", c.Name, err, err)
	}
	if me.Need != need || me.Available >= need || me.Limit != limit {
		t.Errorf("%s: refusal says need %d, available %d, limit %d; want need %d over what is left of the limit %d", c.Name, me.Need, me.Available, me.Limit, need, limit)
	}
	if got := ctl.Calls(c.CFunc); got != calls {
		t.Errorf("%s: %s called %d times by a refused build", c.Name, c.CFunc, got-calls)
	}
	// The limit counts the bindings' estimates only: without the check,
	// cuVS is called (and, on the double's large device, succeeds).
	free, err := safe.NewResources(safe.WithoutMemoryCheck())
	if err != nil {
		t.Fatal(err)
	}
	defer free.Close()
	idx, err = c.Build(free)
	if err != nil && !errors.Is(err, safe.ErrOutOfMemory) {
		t.Fatalf("%s: WithoutMemoryCheck: %v", c.Name, err)
	}
	if err != nil {
		t.Logf("%s: WithoutMemoryCheck: %v", c.Name, err)
	}
	if err == nil {
		_ = idx.Close()
	}
	if got := ctl.Calls(c.CFunc); got != calls+1 {
		t.Errorf("%s: WithoutMemoryCheck: %s called %d times, want once", c.Name, c.CFunc, got-calls)
	}
}

// CheckPoolCap shrinks the double's device to deviceBytes with a pool of
// at most maxPercent of it, and checks that c's build is refused before
// cuVS by the bindings (the pool's cap binds: *safe.MemoryError), and that,
// WithoutMemoryCheck, the double's pool itself refuses it as RMM's does
// (an *safe.Error matching ErrOutOfMemory from cuVS), leaving nothing
// allocated. c.Build must allocate its dataset itself (the pool changes
// under it). The device and Load's pool are restored after.
func CheckPoolCap(t *testing.T, c MemoryCase, deviceBytes uint64, maxPercent int) {
	t.Helper()
	ctl := Double(t, "a small device")
	if err := safe.ResetMemoryResource(); err != nil {
		t.Fatal(err)
	}
	ctl.SetDeviceBytes(deviceBytes)
	t.Cleanup(func() {
		_ = safe.ResetMemoryResource()
		ctl.SetDeviceBytes(0)
		if err := safe.EnableMemoryPool(safe.DefaultPoolInitialPercent, safe.DefaultPoolMaxPercent, false); err != nil {
			t.Error(err)
		}
	})
	if err := safe.EnableMemoryPool(1, maxPercent, false); err != nil {
		t.Fatal(err)
	}
	res := Resources(t)
	m, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(float64(deviceBytes)*float64(maxPercent)/100) / 256 * 256; m.Pool.Max != want || !m.Pool.Enabled || m.Total != int64(deviceBytes) {
		t.Fatalf("DeviceMemory %+v: want a pool of at most %d bytes on a device of %d", m, want, deviceBytes)
	}
	if dm := ctl.DeviceMemory(0); int64(dm.PoolMax) != m.Pool.Max {
		t.Fatalf("the bindings compute a pool cap of %d bytes, the double made %d", m.Pool.Max, dm.PoolMax)
	}
	calls := ctl.Calls(c.CFunc)
	idx, err := c.Build(res)
	var me *safe.MemoryError
	if !errors.As(err, &me) || !errors.Is(err, safe.ErrOutOfMemory) {
		if idx != nil {
			_ = idx.Close()
		}
		t.Fatalf("%s: build over the pool's cap: %v, want a *safe.MemoryError", c.Name, err)
	}
	if me.PoolMax != m.Pool.Max || ctl.Calls(c.CFunc) != calls {
		t.Errorf("%s: refusal %+v, C calls %d: want the pool cap %d named and no call", c.Name, me, ctl.Calls(c.CFunc)-calls, m.Pool.Max)
	}
	unchecked, err := safe.NewResources(safe.WithoutMemoryCheck())
	if err != nil {
		t.Fatal(err)
	}
	defer unchecked.Close()
	idx, err = c.Build(unchecked)
	var ce *safe.Error
	if err == nil {
		_ = idx.Close()
		t.Fatalf("%s: WithoutMemoryCheck, a build over the pool's cap succeeded on the double", c.Name)
	}
	if !errors.Is(err, safe.ErrOutOfMemory) || !errors.As(err, &ce) {
		t.Fatalf("%s: WithoutMemoryCheck: %v (%T), want cuVS's out-of-memory as an *safe.Error", c.Name, err, err)
	}
	if dm := ctl.DeviceMemory(0); dm.PoolInUse != 0 {
		t.Errorf("%s: %d bytes of the pool in use after the failed build", c.Name, dm.PoolInUse)
	}
}
