package safe_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// devices gives the test n CUDA devices: on the double it sets its fake
// device count (back to 1 at the end of the test, after the cleanups
// registered later); on another library it skips unless the machine has n.
func devices(t *testing.T, n int) {
	t.Helper()
	if ctl := safetest.Control(); ctl != nil {
		ctl.SetDeviceCount(n)
		t.Cleanup(func() { ctl.SetDeviceCount(1) })
		return
	}
	have, err := safe.DeviceCount()
	if err != nil || have < n {
		t.Skipf("needs %d CUDA devices: %d, %v", n, have, err)
	}
}

// boundResources returns resources on device d, closed at the end of t.
func boundResources(t *testing.T, d int) *safe.Resources {
	t.Helper()
	r, err := safe.NewResources(safe.OnDevice(d))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

func TestDeviceCount(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "its fake device count")
	devices(t, 3)
	n, err := safe.DeviceCount()
	if err != nil || n != 3 {
		t.Fatalf("DeviceCount = %d, %v; want 3", n, err)
	}
	// the double exports the CUDA device functions itself: no libcudart here
	if got := safe.CUDARuntimePath(); got != safetest.LibraryPath() {
		t.Errorf("CUDA runtime opened from %q, want the loaded library %q", got, safetest.LibraryPath())
	}
	_ = ctl
}

func TestResourcesOnDevice(t *testing.T) {
	safetest.Check(t)
	devices(t, 3)
	for d := 0; d < 3; d++ {
		res := boundResources(t, d)
		if got, bound := res.Device(); got != d || !bound {
			t.Errorf("Device() = %d, %v; want %d, true", got, bound, d)
		}
		if id, err := res.DeviceID(); err != nil || id != d {
			t.Errorf("DeviceID() = %d, %v; want %d", id, err, d)
		}
		data := []float32{1, 2, 3, 4, 5, float32(d)}
		m, err := safe.DeviceMatrixFrom(res, data, 3, 2)
		if err != nil {
			t.Fatal(err)
		}
		if m.Device() != (dlpack.Device{Type: dlpack.CUDA, ID: int32(d)}) {
			t.Errorf("matrix made on device %d reports %v", d, m.Device())
		}
		back, err := m.ToHost(res)
		if err != nil || fmt.Sprint(back) != fmt.Sprint(data) {
			t.Errorf("round trip on device %d: %v, %v", d, back, err)
		}
		safetest.Close(t, m)
	}
	if _, bound := safetest.Resources(t).Device(); bound {
		t.Error("resources made without OnDevice report a bound device")
	}
	for _, d := range []int{-1, 3} {
		_, err := safe.NewResources(safe.OnDevice(d))
		var ae *safe.ArgError
		if !errors.As(err, &ae) || ae.Arg != "OnDevice" {
			t.Errorf("OnDevice(%d) of 3 devices: %v, want an *ArgError for OnDevice", d, err)
		}
	}
}

// Load's pool reaches the other devices: RMM keeps one memory resource per
// device.
func TestOnDeviceGetsThePool(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "its per-device pool state")
	devices(t, 2)
	boundResources(t, 1)
	if !ctl.PoolOnDevice(1) {
		t.Error("no memory pool on device 1 after its first Resources")
	}
}

// Resources made without OnDevice never select a device: no
// cudaSetDevice, cudaGetDevice or cudaGetDeviceCount (their only runtime
// calls are NewResources' stream creation and Close's destruction).
func TestUnboundResourcesMakeNoDeviceCalls(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "its CUDA call counts")
	calls := func() int64 {
		return ctl.CUDACalls(cuvsdouble.CUDASetDevice) + ctl.CUDACalls(cuvsdouble.CUDAGetDevice) + ctl.CUDACalls(cuvsdouble.CUDAGetDeviceCount)
	}
	before := calls()
	res := safetest.Resources(t)
	m, err := safe.DeviceMatrixFrom(res, []float32{1, 2}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ToHost(res); err != nil {
		t.Fatal(err)
	}
	if err := res.Sync(); err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, m)
	if n := calls() - before; n != 0 {
		t.Errorf("%d CUDA device calls on unbound resources, want 0", n)
	}
}

// Many goroutines, each on its own device, and unbound ones on device 0, at
// once: the double records any call made with the wrong device current.
func TestConcurrentDevices(t *testing.T) {
	safetest.Check(t)
	const n = 4
	devices(t, n)
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for g := 0; g < 2*n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res *safe.Resources
			var err error
			if g < n {
				res, err = safe.NewResources(safe.OnDevice(g))
			} else {
				res, err = safe.NewResources()
			}
			if err != nil {
				errs <- err
				return
			}
			defer res.Close()
			for i := 0; i < 50; i++ {
				m, err := safe.DeviceMatrixFrom(res, []float32{float32(g), float32(i)}, 1, 2)
				if err != nil {
					errs <- err
					return
				}
				back, err := m.ToHost(res)
				m.Close()
				if err != nil || back[0] != float32(g) || back[1] != float32(i) {
					errs <- fmt.Errorf("goroutine %d: %v, %v", g, back, err)
					return
				}
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A tensor on one device given to a call on another device's resources is
// refused before any C call.
func TestWrongDeviceTensorRefused(t *testing.T) {
	safetest.Check(t)
	devices(t, 2)
	res0, res1 := boundResources(t, 0), boundResources(t, 1)
	q1, err := safe.DeviceMatrixFrom(res1, []float32{1, 2, 3, 4}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer safetest.Close(t, q1)
	nb0, err := safe.NewDeviceMatrix[int64](res0, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer safetest.Close(t, nb0)
	d0, err := safe.NewDeviceMatrix[float32](res0, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer safetest.Close(t, d0)
	nb1, err := safe.NewDeviceMatrix[int64](res1, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer safetest.Close(t, nb1)
	d1, err := safe.NewDeviceMatrix[float32](res1, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer safetest.Close(t, d1)

	qv, _ := q1.View()
	if err := kit.CheckDevice(res1, "op", "queries", qv.Device()); err != nil {
		t.Errorf("device 1 tensor on device 1 resources: %v", err)
	}
	err = kit.CheckDevice(res0, "op", "queries", qv.Device())
	var ae *safe.ArgError
	if !errors.As(err, &ae) || ae.Arg != "queries" || !strings.Contains(ae.Reason, "device 1") {
		t.Errorf("device 1 tensor on device 0 resources: %v, want an *ArgError", err)
	}
	// host memory is anyone's
	if err := kit.CheckDevice(res0, "op", "queries", dlpack.HostDevice); err != nil {
		t.Error(err)
	}

	rules := kit.SearchRules{
		Queries:   kit.Rule{Arg: "queries", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true},
		Neighbors: kit.Rule{Arg: "neighbors", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 2, RowMajor: true},
		Distances: kit.Rule{Arg: "distances", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true},
	}
	bind := func(res *safe.Resources, nb dlpack.TensorMut, d dlpack.TensorMut) error {
		c := dlpack.Begin("test")
		defer c.End()
		var st kit.SearchTensors
		return rules.BindOn("test", res, c, q1, nb, d, dlpack.Float32, 2, 10, &st)
	}
	if err := bind(res1, nb1, d1); err != nil {
		t.Errorf("all on device 1: %v", err)
	}
	if err := bind(res0, nb1, d1); !errors.As(err, &ae) || ae.Arg != "queries" {
		t.Errorf("queries on device 1, resources on 0: %v", err)
	}
	if err := bind(res1, nb0, d1); !errors.As(err, &ae) || ae.Arg != "neighbors" {
		t.Errorf("neighbors on device 0, queries on 1: %v", err)
	}
	if err := bind(res1, nb1, d0); !errors.As(err, &ae) || ae.Arg != "distances" {
		t.Errorf("distances on device 0, queries on 1: %v", err)
	}

	// Copy's argument rule, through Rule.CheckOn
	rule := kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2}
	if err := rule.CheckOn("test", res0, &qv); !errors.As(err, &ae) || ae.Arg != "dataset" {
		t.Errorf("Rule.CheckOn: %v", err)
	}
}

// The double catches a call made with the wrong device current: what would
// happen if the safe layer forgot to set it. The test takes the handle
// through Lock (device 1 current, thread locked), switches the thread to
// device 0 behind the safe layer's back, and calls C directly.
func TestDoubleCatchesForgottenDevice(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "its per-thread device tracking")
	devices(t, 2)
	res := boundResources(t, 1)
	h, err := kit.Lock(res, "test")
	if err != nil {
		t.Fatal(err)
	}
	if d := ctl.CurrentDevice(); d != 1 {
		t.Errorf("device %d current inside Lock, want 1", d)
	}
	ctl.SetCurrentDevice(0)
	err = generated.CuvsStreamSync(h)
	ctl.SetCurrentDevice(1)
	kit.Unlock(res)
	if err == nil || !strings.Contains(err.Error(), "invalid device context") {
		t.Errorf("a call on device 1's resources with device 0 current: %v", err)
	}
	v := ctl.TakeViolations()
	if len(v) != 1 || !strings.Contains(v[0], "of device 1 used with device 0 current") {
		t.Errorf("violations %q", v)
	}
}

// Lock restores the thread's device: after a bound call, an unbound call on
// the same thread still runs on device 0.
func TestLockRestoresTheDevice(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "its per-thread device tracking")
	devices(t, 2)
	res1 := boundResources(t, 1)
	res0 := safetest.Resources(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := res1.Sync(); err != nil {
		t.Fatal(err)
	}
	if d := ctl.CurrentDevice(); d != 0 {
		t.Errorf("device %d current after a call on device 1's resources, want 0 again", d)
	}
	if err := res0.Sync(); err != nil {
		t.Error(err)
	}
}

// Memory whose resources were closed first is freed on its own device.
func TestFreeAfterBoundResourcesClosed(t *testing.T) {
	safetest.Check(t)
	devices(t, 2)
	res, err := safe.NewResources(safe.OnDevice(1))
	if err != nil {
		t.Fatal(err)
	}
	m, err := safe.NewDeviceMatrix[float32](res, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

// The cost of Lock/Unlock: unbound (the default path), and bound with the
// device already current on the thread or not.
func BenchmarkResourcesLock(b *testing.B) {
	b.Run("unbound", func(b *testing.B) {
		res, err := safe.NewResources()
		if err != nil {
			b.Fatal(err)
		}
		defer res.Close()
		for b.Loop() {
			if _, err := kit.Lock(res, "bench"); err != nil {
				b.Fatal(err)
			}
			kit.Unlock(res)
		}
	})
	for _, d := range []int{0, 1} {
		b.Run(fmt.Sprintf("bound-device%d", d), func(b *testing.B) {
			if ctl := safetest.Control(); ctl != nil {
				ctl.SetDeviceCount(2)
				defer ctl.SetDeviceCount(1)
			} else if n, err := safe.DeviceCount(); err != nil || n <= d {
				b.Skipf("needs %d devices", d+1)
			}
			res, err := safe.NewResources(safe.OnDevice(d))
			if err != nil {
				b.Fatal(err)
			}
			defer res.Close()
			for b.Loop() {
				if _, err := kit.Lock(res, "bench"); err != nil {
					b.Fatal(err)
				}
				kit.Unlock(res)
			}
		})
	}
}
