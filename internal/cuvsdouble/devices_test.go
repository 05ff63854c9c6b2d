package cuvsdouble_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
)

// onThread runs fn on a goroutine locked to a fresh OS thread, which ends
// with it (the thread's fake current device dies with the thread).
func onThread(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		fn()
	}()
	<-done
}

func TestFakeDevices(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	f.ctl.SetDeviceCount(3)
	onThread(func() {
		if d := f.ctl.CurrentDevice(); d != 0 {
			t.Errorf("a new thread is on device %d, want 0", d)
		}
		if rc := f.ctl.SetCurrentDevice(3); rc != 101 {
			t.Errorf("cudaSetDevice(3) of 3 devices: %d, want 101 (cudaErrorInvalidDevice)", rc)
		}
		if rc := f.ctl.SetCurrentDevice(2); rc != 0 || f.ctl.CurrentDevice() != 2 {
			t.Errorf("cudaSetDevice(2): %d, current %d", rc, f.ctl.CurrentDevice())
		}
		// resources belong to the device current at creation
		r2 := f.must1(f.lib.ResourcesCreate(false))
		if id, err := f.lib.DeviceID(r2); err != nil || id != 2 {
			t.Errorf("resources made on device 2 report %d, %v", id, err)
		}
		p, err := f.lib.RMMAlloc(r2, 64)
		f.must(err)

		// the same handle used with device 1 current: refused, and recorded
		f.ctl.SetCurrentDevice(1)
		err = f.lib.StreamSync(r2)
		if err == nil || !strings.Contains(err.Error(), "invalid device context") {
			t.Errorf("call on the wrong device: %v", err)
		}
		f.expectViolations("of device 2 used with device 1 current")
		if err := f.lib.RMMFree(r2, p, 64); err == nil {
			t.Error("cuvsRMMFree on the wrong device accepted")
		}
		f.expectViolations("of device 2 used with device 1 current")

		f.ctl.SetCurrentDevice(2)
		f.must(f.lib.RMMFree(r2, p, 64))
		f.must(f.lib.ResourcesDestroy(r2, false))
	})
	// another thread is still on device 0: the fixture's resources work there
	onThread(func() { f.must(f.lib.StreamSync(f.res)) })
	if n := f.ctl.CUDACalls(cuvsdouble.CUDASetDevice); n != 4 {
		t.Errorf("%d cudaSetDevice calls, want 4", n)
	}
}

func TestFakeDevicesPoolPerDevice(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	f.ctl.SetDeviceCount(2)
	onThread(func() {
		f.ctl.SetCurrentDevice(1)
		f.must(f.lib.PoolEnable(10, 60, false))
	})
	if f.ctl.PoolOnDevice(0) || !f.ctl.PoolOnDevice(1) {
		t.Errorf("pool on devices 0, 1: %v, %v; want false, true", f.ctl.PoolOnDevice(0), f.ctl.PoolOnDevice(1))
	}
	onThread(func() {
		f.ctl.SetCurrentDevice(1)
		f.must(f.lib.PoolReset())
	})
}

func TestFakeDevicesDestroyOnWrongDevice(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	f.ctl.SetDeviceCount(2)
	onThread(func() {
		f.ctl.SetCurrentDevice(1)
		r := f.must1(f.lib.ResourcesCreate(false))
		f.ctl.SetCurrentDevice(0)
		f.must(f.lib.ResourcesDestroy(r, false)) // destroyed all the same
	})
	f.expectViolations("of device 1 destroyed with device 0 current")
}

func TestFakeDevicesCountResetsThreads(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	f.ctl.SetDeviceCount(2)
	onThread(func() {
		f.ctl.SetCurrentDevice(1)
		f.ctl.SetDeviceCount(2) // a new epoch: every thread back on device 0
		if d := f.ctl.CurrentDevice(); d != 0 {
			t.Errorf("device %d after SetDeviceCount, want 0", d)
		}
	})
}
