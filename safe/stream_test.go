package safe_test

import (
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// queueCopy queues src → dst on res's stream (cuvsMatrixCopy) without
// waiting for it, as a search does with its outputs.
func queueCopy(t *testing.T, res *safe.Resources, src dlpack.Tensor, dst dlpack.TensorMut) {
	t.Helper()
	const op = "test.queueCopy"
	c := dlpack.Begin(op)
	defer c.End()
	sv, err := src.View()
	if err != nil {
		t.Fatal(err)
	}
	dv, err := dst.ViewMut()
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.In(&sv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Out(&dv)
	if err != nil {
		t.Fatal(err)
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		t.Fatal(err)
	}
	defer kit.Unlock(res)
	if err := generated.CuvsMatrixCopy(h, a, b); err != nil {
		t.Fatal(err)
	}
}

// roundTrip is a pinned source, a device matrix and a pinned destination of
// rows × cols, closed when t ends: the buffers of a copy there and back.
type roundTrip struct {
	src, dst *safe.PinnedMatrix[float32]
	dev      *safe.DeviceMatrix[float32]
}

func newRoundTrip(t *testing.T, res *safe.Resources, rows, cols int) roundTrip {
	t.Helper()
	var b roundTrip
	var err error
	if b.src, err = safe.NewPinnedMatrix[float32](rows, cols); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { safetest.Close(t, b.src) })
	if b.dev, err = safe.NewDeviceMatrix[float32](res, rows, cols); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { safetest.Close(t, b.dev) })
	if b.dst, err = safe.NewPinnedMatrix[float32](rows, cols); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { safetest.Close(t, b.dst) })
	return b
}

// A Resources queues all its work on one stream, whatever OS thread the
// calling goroutine is on: work queued from one thread and synchronized
// from another is waited for. With cuVS's default stream
// (cudaStreamPerThread) it is not: this is how the batcher handed callers
// other queries' rows on a GPU.
func TestResourcesOrderWorkAcrossOSThreads(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	bufs := newRoundTrip(t, res, 64, 16)
	src, dev, dst := bufs.src, bufs.dev, bufs.dst
	want := src.Data()
	for i := range want {
		want[i] = float32(i)
	}

	// Thread A queues host → device and keeps its thread locked while thread
	// B (then another thread) queues device → host and synchronizes.
	queued, finished := make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		queueCopy(t, res, src, dev)
		close(queued)
		<-finished
	}()
	<-queued
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		queueCopy(t, res, dev, dst)
		if err := res.Sync(); err != nil {
			t.Error(err)
		}
	}()
	<-done
	close(finished)
	if got := dst.Data(); !slices.Equal(got, want) {
		t.Fatalf("after Sync from another thread: %v..., want %v...", got[:8], want[:8])
	}
	s, err := res.Stream()
	if err != nil {
		t.Fatal(err)
	}
	if s == 0 || s == 2 {
		t.Errorf("Stream() = %#x: a default stream, not the Resources' own", s)
	}
}

// isArg reports whether err is an *safe.ArgError naming arg.
func isArg(err error, arg string) bool {
	var ae *safe.ArgError
	return errors.As(err, &ae) && ae.Arg == arg
}

// The zero Resources is refused by every call, naming it; its Close does
// nothing.
func TestZeroResources(t *testing.T) {
	var r safe.Resources
	if err := r.Sync(); !isArg(err, "res") {
		t.Errorf("Sync on a zero Resources: %v", err)
	}
	if _, err := safe.NewDeviceMatrix[float32](&r, 2, 2); !isArg(err, "res") {
		t.Errorf("NewDeviceMatrix with a zero Resources: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close of a zero Resources: %v", err)
	}
	var nilRes *safe.Resources
	if err := nilRes.Close(); err != nil {
		t.Errorf("Close of a nil *Resources: %v", err)
	}
}

// The 26.08 options of NewResources: refused on 26.06 naming the release,
// and their arguments checked.
func TestResourcesOptionsByRelease(t *testing.T) {
	safetest.Check(t)
	if _, err := safe.NewResources(safe.WithWorkspacePool(-1)); !isArg(err, "WithWorkspacePool") {
		t.Errorf("negative pool: %v", err)
	}
	if _, err := safe.NewResources(safe.WithMemoryTracking("", time.Millisecond)); !isArg(err, "WithMemoryTracking") {
		t.Errorf("empty path: %v", err)
	}
	csv := filepath.Join(t.TempDir(), "mem.csv")
	for _, o := range []safe.ResourcesOption{safe.WithWorkspacePool(1 << 20), safe.WithMemoryTracking(csv, 10*time.Millisecond)} {
		r, err := safe.NewResources(o)
		if safe.Release() < "26.08" {
			if !errors.Is(err, safe.ErrNotInRelease) || !strings.Contains(err.Error(), "26.08") {
				t.Errorf("on %s: %v, want ErrNotInRelease naming 26.08", safe.Release(), err)
			}
			var nr *safe.NotInReleaseError
			if !errors.As(err, &nr) || nr.Release != safe.Release() || !slices.Contains(nr.In, "26.08") || !strings.HasPrefix(nr.Symbol, "cuvsResources") {
				t.Errorf("on %s: %v, want a *safe.NotInReleaseError of a cuvsResources function in 26.08 (%+v)", safe.Release(), err, nr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Sync(); err != nil {
			t.Error(err)
		}
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}
}

// SyncBlocking waits for the work queued on the Resources' stream, as Sync
// does, whichever thread queued it, and on the stream SetStream gave. On
// the double, the copy's destination is poisoned until the wait and the
// wait is counted as one on a blocking-sync event.
func TestSyncBlocking(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	other := safetest.Resources(t) // closed after res gets its own stream back
	own, err := res.Stream()
	if err != nil {
		t.Fatal(err)
	}
	bufs := newRoundTrip(t, res, 32, 8)
	src, dev, dst := bufs.src, bufs.dev, bufs.dst
	ctl := safetest.Control()
	var blocking0 int64
	if ctl != nil {
		blocking0, _ = ctl.EventWaits()
	}
	for round, stream := range []string{"its own stream", "a stream given by SetStream"} {
		if round == 1 {
			s, err := other.Stream()
			if err != nil {
				t.Fatal(err)
			}
			if err := res.SetStream(s); err != nil {
				t.Fatal(err)
			}
			defer func() { // before the buffers are freed on res's stream
				if err := res.SetStream(own); err != nil {
					t.Error(err)
				}
			}()
		}
		want := src.Data()
		for i := range want {
			want[i] = float32(i + 1000*round)
		}
		queued := make(chan struct{})
		go func() { // queued from another OS thread
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			queueCopy(t, res, src, dev)
			queueCopy(t, res, dev, dst)
			close(queued)
		}()
		<-queued
		if ctl != nil && !slices.ContainsFunc(dst.Data(), func(v float32) bool { return v != v }) {
			t.Errorf("%s: the double's queued copy is already visible before the wait", stream)
		}
		if err := res.SyncBlocking(); err != nil {
			t.Fatalf("%s: %v", stream, err)
		}
		if got := dst.Data(); !slices.Equal(got, want) {
			t.Fatalf("%s: after SyncBlocking: %v..., want %v...", stream, got[:4], want[:4])
		}
	}
	if ctl != nil {
		if blocking, _ := ctl.EventWaits(); blocking != blocking0+2 {
			t.Errorf("blocking-sync event waits: %d, want %d", blocking-blocking0, 2)
		}
	}
	r2, err := safe.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r2.SyncBlocking(); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("SyncBlocking after Close: %v", err)
	}
	var nilRes *safe.Resources
	if err := nilRes.SyncBlocking(); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil Resources: %v", err)
	}
	var zero safe.Resources
	if err := zero.SyncBlocking(); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("zero Resources: %v", err)
	}
}
