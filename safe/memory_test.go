package safe_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
)

// restorePool puts Load's default pool back after a test changed it.
func restorePool(t *testing.T) {
	t.Cleanup(func() {
		if err := safe.ResetMemoryResource(); err != nil {
			t.Error(err)
		}
		if ctl := safetest.Control(); ctl != nil {
			ctl.SetDeviceBytes(0)
		}
		_ = safe.SetMemoryLimit(0)
		if err := safe.EnableMemoryPool(safe.DefaultPoolInitialPercent, safe.DefaultPoolMaxPercent, false); err != nil {
			t.Error(err)
		}
	})
}

func TestDeviceMemory(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "the device model")
	res := safetest.Resources(t)
	m, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	dm := ctl.DeviceMemory(0)
	if m.Total != int64(dm.Total) || m.Free != int64(dm.Free()) || m.Device != 0 {
		t.Errorf("DeviceMemory %+v, the double's device %+v", m, dm)
	}
	// Load's pool: 10% reserved, 60% at most, of the free memory then.
	if !m.Pool.Enabled || m.Pool.Max != int64(dm.PoolMax) || m.Pool.Size != int64(dm.PoolSize) || m.Pool.Initial > m.Pool.Max {
		t.Errorf("pool %+v, the double's: size %d, max %d", m.Pool, dm.PoolSize, dm.PoolMax)
	}
	if m.Available <= 0 || m.Available > m.Pool.Max-m.InUse {
		t.Errorf("available %d: want positive, at most the pool's max less what is in use (%d)", m.Available, m.Pool.Max-m.InUse)
	}
	x, err := safe.NewDeviceMatrix[float32](res, 1000, 3) // 12000 bytes, 12032 rounded
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := res.DeviceMemory()
	if got := m2.InUse - m.InUse; got != 12032 {
		t.Errorf("a 12000-byte matrix counts %d bytes in use, want 12032 (RMM's 256-byte rounding)", got)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if m3, _ := res.DeviceMemory(); m3.InUse != m.InUse {
		t.Errorf("in use %d after Close, %d before", m3.InUse, m.InUse)
	}
}

func TestEnableMemoryLimit(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "the device model")
	if err := safe.ResetMemoryResource(); err != nil {
		t.Fatal(err)
	}
	restorePool(t)
	ctl.SetDeviceBytes(1 << 30)
	const limit = 10<<20 + 1000
	if err := safe.EnableMemoryLimit(10, limit, false); err != nil {
		t.Fatal(err)
	}
	dm := ctl.DeviceMemory(0)
	// The pool's cap is the limit less at most a 2 MiB CUDA page (the
	// filler's rounding; a whole percent of 1 GiB would be 10.7 MB), its
	// initial reserve 10% of it, and the filler that sized it is gone: only
	// the pool is taken from the device.
	if dm.PoolMax > limit || dm.PoolMax <= limit-2<<20 || dm.PoolSize != dm.PoolMax/10/256*256 || dm.Used != dm.PoolSize {
		t.Fatalf("the double's pool: max %d, size %d, device used %d; want a max within 2 MiB under %d, 10%% of it reserved, nothing else used", dm.PoolMax, dm.PoolSize, dm.Used, limit)
	}
	res := safetest.Resources(t)
	m, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	if m.Pool.Max != int64(dm.PoolMax) || m.Pool.Initial != int64(dm.PoolSize) || m.Limit != limit || safe.MemoryLimit() != limit {
		t.Errorf("DeviceMemory %+v: want the double's pool (max %d, initial %d) and the limit %d", m, dm.PoolMax, dm.PoolSize, limit)
	}
	// An exact allocation over the limit is refused before cuVS.
	calls := ctl.Calls("cuvsRMMAlloc")
	_, err = safe.NewDeviceMatrix[float32](res, 3<<20, 1) // 12 MiB
	var me *safe.MemoryError
	if !errors.As(err, &me) || !errors.Is(err, safe.ErrOutOfMemory) || ctl.Calls("cuvsRMMAlloc") != calls {
		t.Fatalf("12 MiB under a 10 MiB limit: %v, %d cuvsRMMAlloc calls; want a *MemoryError and none", err, ctl.Calls("cuvsRMMAlloc")-calls)
	}
	if me.Need != 12<<20 || me.Limit != limit || !strings.Contains(err.Error(), "SetMemoryLimit") {
		t.Errorf("refusal %+v: %v", me, err)
	}
	// The pool holds the cap itself: with the bindings' limit lifted, cuVS's
	// pool refuses (rmm::out_of_memory).
	if err := safe.SetMemoryLimit(0); err != nil {
		t.Fatal(err)
	}
	_, err = safe.NewDeviceMatrix[float32](res, 3<<20, 1)
	var ce *safe.Error
	if !errors.As(err, &ce) || !errors.Is(err, safe.ErrOutOfMemory) || !strings.Contains(ce.Text, "Maximum pool size exceeded") {
		t.Fatalf("12 MiB in a 10 MiB pool: %v (%T), want cuVS's out_of_memory", err, err)
	}
	// Under it, it grows.
	x, err := safe.NewDeviceMatrix[float32](res, 2<<20, 1) // 8 MiB
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := res.DeviceMemory()
	if dm := ctl.DeviceMemory(0); m2.Pool.Size != int64(dm.PoolSize) || dm.PoolSize < 8<<20 {
		t.Errorf("pool size %d, the double's %d: want it grown to at least 8 MiB", m2.Pool.Size, dm.PoolSize)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryLimitArgs(t *testing.T) {
	if err := safe.SetMemoryLimit(-1); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("SetMemoryLimit(-1): %v", err)
	}
	if err := safe.EnableMemoryLimit(0, 1<<20, false); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("EnableMemoryLimit(0%%): %v", err)
	}
	if err := safe.EnableMemoryLimit(10, 0, false); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("EnableMemoryLimit(0 bytes): %v", err)
	}
	e := &safe.MemoryError{Op: "x.Build", What: "the build", Need: 3 << 30, Available: 1 << 30, Free: 2 << 30, PoolMax: 4 << 30, InUse: 3 << 30}
	if s := e.Error(); !strings.Contains(s, "needs about 3.00 GiB") || !strings.Contains(s, "can give 1.00 GiB") || !strings.Contains(s, "pool cap 4.00 GiB") || !errors.Is(e, safe.ErrOutOfMemory) {
		t.Errorf("%q", s)
	}
}

func TestMemoryShapeCheck(t *testing.T) {
	for _, s := range []safe.MemoryShape{
		{Rows: 0, Dim: 1},
		{Rows: 1, Dim: 0},
		{Rows: 1 << 30, Dim: 1 << 20},
		{Rows: 10, Dim: 10, Batch: -1},
		{Rows: 10, Dim: 10, Batch: 5},
		{Rows: 10, Dim: 10, Batch: 5, K: 1 << 21},
	} {
		if err := s.Check("x"); !errors.Is(err, safe.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want an *ArgError", s, err)
		}
	}
	if err := (safe.MemoryShape{Rows: 1 << 30, Dim: 1 << 17, Batch: 10, K: 10}).Check("x"); err != nil {
		t.Errorf("2^47 elements: %v", err)
	}
}
