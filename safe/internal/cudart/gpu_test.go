package cudart

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
)

// The tests here need a real CUDA runtime and GPU: they open
// $CUVS_CUDART_LIBRARY or libcudart.so.13/.12/.so and skip when none opens.
// Built on a CPU machine with internal/devicecheck/build.sh, run on the GPU
// machine (see that script).

func openReal(t testing.TB) int {
	t.Helper()
	var cands []Candidate
	if p := os.Getenv("CUVS_CUDART_LIBRARY"); p != "" {
		cands = append(cands, Candidate{Path: p})
	}
	cands = append(cands, Candidate{Path: "libcudart.so.13"}, Candidate{Path: "libcudart.so.12"}, Candidate{Path: "libcudart.so"})
	if err := Open(cands); err != nil {
		t.Skip(err)
	}
	n, err := DeviceCount()
	if err != nil {
		t.Skip(err)
	}
	if n < 1 {
		t.Skip("no CUDA device")
	}
	return n
}

func TestGPUEnterLeave(t *testing.T) {
	n := openReal(t)
	t.Logf("%s: %d device(s)", Path(), n)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home, err := GetDevice()
	if err != nil {
		t.Fatal(err)
	}
	for d := int32(0); d < int32(n); d++ {
		prev, err := Enter(d)
		if err != nil {
			t.Fatal(err)
		}
		if prev != int32(home) {
			t.Errorf("Enter(%d): previous device %d, want %d", d, prev, home)
		}
		if cur, _ := GetDevice(); cur != int(d) {
			t.Errorf("after Enter(%d), device %d current", d, cur)
		}
		got, err := allocDevice()
		if err != nil || got != int(d) {
			t.Errorf("memory allocated with device %d current is on device %d, %v", d, got, err)
		}
		if err := Leave(prev, d); err != nil {
			t.Fatal(err)
		}
		if cur, _ := GetDevice(); cur != home {
			t.Errorf("after Leave, device %d current, want %d", cur, home)
		}
	}
	if err := SetDevice(n); err == nil {
		t.Errorf("cudaSetDevice(%d) of %d devices accepted", n, n)
	} else {
		t.Logf("cudaSetDevice(%d): %v", n, err)
	}
}

// Goroutines on every device at once, each allocating on its device from
// whatever thread it runs on: the device is per thread, set and restored
// around each step.
func TestGPUConcurrentDevices(t *testing.T) {
	n := openReal(t)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 4*n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := int32(g % n)
			for i := 0; i < 200; i++ {
				runtime.LockOSThread()
				prev, err := Enter(d)
				if err != nil {
					runtime.UnlockOSThread()
					errs <- err.Error()
					return
				}
				got, err := allocDevice()
				_ = Leave(prev, d)
				runtime.UnlockOSThread()
				if err != nil || got != int(d) {
					select {
					case errs <- fmt.Sprintf("goroutine on device %d: memory on device %d, %v", d, got, err):
					default:
					}
					return
				}
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// every thread is back on device 0: check a few fresh and reused ones
	for i := 0; i < 16; i++ {
		done := make(chan int)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			d, _ := GetDevice()
			done <- d
		}()
		if d := <-done; d != 0 {
			t.Errorf("a thread left on device %d", d)
		}
	}
}

func BenchmarkGPUGetDevice(b *testing.B) {
	openReal(b)
	for b.Loop() {
		_, _ = GetDevice()
	}
}

// The bound-Resources path: lock the thread, make d current, restore.
func BenchmarkGPUEnterLeave(b *testing.B) {
	n := openReal(b)
	for _, d := range []int32{0, 1} {
		if int(d) >= n {
			continue
		}
		name := "same-device"
		if d != 0 {
			name = "switch-device"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				runtime.LockOSThread()
				prev, _ := Enter(d)
				_ = Leave(prev, d)
				runtime.UnlockOSThread()
			}
		})
	}
}

// TestGPUStreams: the runtime has the stream functions, and a stream made
// on each device can be destroyed from another OS thread (as Close may
// run on any goroutine).
func TestGPUStreams(t *testing.T) {
	n := openReal(t)
	if !HasStreams() {
		t.Fatalf("%s lacks cudaStreamCreateWithFlags or cudaStreamDestroy", Path())
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var made []uintptr
	for d := int32(0); d < int32(n); d++ {
		prev, err := Enter(d)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewStream()
		if err != nil || s == 0 || s == 1 || s == 2 {
			t.Fatalf("NewStream on device %d: %#x, %v", d, s, err)
		}
		made = append(made, s)
		if err := Leave(prev, d); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for _, s := range made {
			if e := DestroyStream(s); e != nil && err == nil {
				err = e
			}
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
