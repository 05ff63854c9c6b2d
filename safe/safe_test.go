package safe_test

import (
	"errors"
	"path/filepath"
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

func TestLoadIsIdempotentAndEnablesThePool(t *testing.T) {
	if err := safe.Load(); err != nil {
		t.Fatal(err)
	}
	// Any patch release of the version the bindings were made for loads.
	v, err := safe.LibraryVersion()
	if b := safe.BindingsVersion(); err != nil || v.Major != b.Major || v.Minor != b.Minor {
		t.Errorf("LibraryVersion = %v, %v; bindings %v", v, err, b)
	}
	if ctl := safetest.Control(); ctl != nil { // the pool's state: the double only
		p := ctl.Pool()
		if !p.Enabled || p.InitialPercent != safe.DefaultPoolInitialPercent || p.MaxPercent != safe.DefaultPoolMaxPercent {
			t.Errorf("pool after Load: %+v", p)
		}
		if v != (safe.Version{Major: 26, Minor: 6}) {
			t.Errorf("the double's version: %v", v)
		}
	}
}

func TestReason(t *testing.T) {
	for text, want := range map[string]string{
		"RAFT failure at file=/src/cagra.cu line=42: queries should have device compatible memory\nObtained 3 stack frames\n#0 in x": "queries should have device compatible memory",
		"CUDA error encountered at: file=/a/b.cu line=7: call='cudaMalloc', Reason=out of memory":                                    "call='cudaMalloc', Reason=out of memory",
		"std::bad_alloc": "std::bad_alloc",
		"":               "",
	} {
		if got := kit.Reason(text); got != want {
			t.Errorf("Reason(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestErrorFromCuvs(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "its control surface")
	ctl.FailNext("cuvsResourcesCreate", "no more streams")
	_, err := safe.NewResources()
	var e *safe.Error
	if !errors.As(err, &e) || !errors.Is(err, safe.ErrCuvs) {
		t.Fatalf("got %v, want *safe.Error", err)
	}
	if e.Op != "safe.NewResources" || e.Func != "cuvsResourcesCreate" || e.Reason != "no more streams" || !strings.Contains(e.Text, "stack frames") {
		t.Errorf("got %+v", e)
	}
	if err.Error() != "safe.NewResources: no more streams" {
		t.Errorf("Error() = %q", err)
	}
}

func TestResources(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	if err := res.Sync(); err != nil {
		t.Fatal(err)
	}
	id, err := res.DeviceID()
	if err != nil || id != 0 {
		t.Errorf("DeviceID = %d, %v", id, err)
	}
	// A stream set is the stream got. A real library must be given a real
	// stream: its own back; the double takes any value.
	s, err := res.Stream()
	if err != nil {
		t.Fatal(err)
	}
	if safetest.Control() != nil {
		s = 0x1234
	}
	if err := res.SetStream(s); err != nil {
		t.Fatal(err)
	}
	if got, err := res.Stream(); err != nil || got != s {
		t.Errorf("Stream = %#x, %v, want %#x", got, err, s)
	}
	r2, err := safe.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := r2.Sync(); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
	var nilRes *safe.Resources
	if err := nilRes.Sync(); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil Resources: %v", err)
	}
}

// One Resources shared by many goroutines: calls are serialized, which the
// double checks (it records a violation when two threads use one handle);
// on another library, nothing fails.
func TestResourcesSharedByGoroutines(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	if ctl := safetest.Control(); ctl != nil {
		ctl.SetCallDelay(20_000) // 20 µs per call: overlaps would be seen
		defer ctl.SetCallDelay(0)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if err := res.Sync(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestLogLevel(t *testing.T) {
	safetest.Check(t)
	if err := safe.SetLogLevel(safe.LogError); err != nil {
		t.Fatal(err)
	}
	if l, err := safe.GetLogLevel(); err != nil || l != safe.LogError {
		t.Errorf("GetLogLevel = %v, %v", l, err)
	}
	if err := safe.SetLogLevel(safe.LogLevel(42)); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("invalid level: %v", err)
	}
	safe.SetLogLevel(safe.LogInfo)
	for l, want := range map[safe.LogLevel]string{safe.LogTrace: "CUVS_LOG_LEVEL_TRACE", safe.LogWarn: "CUVS_LOG_LEVEL_WARN",
		safe.LogOff: "CUVS_LOG_LEVEL_OFF", safe.LogLevel(42): "LogLevel(42)"} {
		if l.String() != want {
			t.Errorf("%d.String() = %q, want %q", int32(l), l.String(), want)
		}
	}
}

func TestMemoryPoolArguments(t *testing.T) {
	for _, c := range [][2]int{{0, 50}, {50, 20}, {10, 101}} {
		if err := safe.EnableMemoryPool(c[0], c[1], false); !errors.Is(err, safe.ErrInvalidArgument) {
			t.Errorf("%v: %v", c, err)
		}
	}
}

func TestDeviceMatrixRoundTrip(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(1, 7, 5)
	m, err := safe.DeviceMatrixFrom(res, data, 7, 5)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, m)
	got, err := m.ToHost(res)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		if got[i] != data[i] {
			t.Fatalf("element %d: %v, want %v", i, got[i], data[i])
		}
	}
	v, err := m.RowsView(2, 5)
	if err != nil || v.Dim(0) != 3 || v.Dim(1) != 5 {
		t.Fatalf("RowsView: %v, %v", v, err)
	}
	// Copy rows 2..5 into a second matrix through cuvsMatrixCopy.
	m2, err := safe.NewDeviceMatrix[float32](res, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, m2)
	if err := m2.CopyFrom(res, v); err != nil {
		t.Fatal(err)
	}
	sub, _ := m2.ToHost(res)
	for i := range sub {
		if sub[i] != data[10+i] {
			t.Fatalf("row slice element %d: %v, want %v", i, sub[i], data[10+i])
		}
	}
	for _, bad := range []struct {
		name string
		err  error
	}{
		{"rows", func() error { _, err := m.RowsView(4, 9); return err }()},
		{"len", m.CopyFromHost(res, data[:3])},
		{"shape", m2.CopyFrom(res, m)},
	} {
		if !errors.Is(bad.err, safe.ErrInvalidArgument) {
			t.Errorf("%s: %v", bad.name, bad.err)
		}
	}
	if _, err := safe.NewDeviceMatrix[float32](res, -1, 3); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("negative rows: %v", err)
	}
	if _, err := safe.NewDeviceMatrix[float32](res, 1<<40, 1<<40); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("overflow: %v", err)
	}
}

func TestDeviceMatrixRefusesCloseWhileRetained(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	m, err := safe.NewDeviceMatrix[float32](res, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := m.View()
	r, err := v.Retain("an index")
	if err != nil {
		t.Fatal(err)
	}
	err = m.Close()
	if !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), "an index") {
		t.Fatalf("Close while retained: %v", err)
	}
	if err := m.CopyFromHost(res, make([]float32, 16)); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("write while retained: %v", err)
	}
	r.End()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Data(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("view after Close: %v", err)
	}
}

func TestDeviceMatrixFaults(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	ctl := safetest.Double(t, "its control surface")
	for _, fn := range []string{"cuvsRMMAlloc", "cuvsMatrixCopy", "cuvsStreamSync", "cuvsDeviceIdGet"} {
		ctl.FailNext(fn, "injected "+fn)
		_, err := safe.DeviceMatrixFrom(res, []float32{1, 2, 3, 4}, 2, 2)
		var e *safe.Error
		if !errors.As(err, &e) || e.Func != fn || e.Reason != "injected "+fn {
			t.Errorf("%s: got %v", fn, err)
		}
	}
}

func TestPinnedMatrix(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	var wg sync.WaitGroup
	// Allocate and free from many goroutines: cuVS needs one thread for
	// both, which the double checks.
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := safe.NewPinnedMatrix[int32](3, 2)
			if err != nil {
				t.Error(err)
				return
			}
			copy(p.Data(), []int32{1, 2, 3, 4, 5, 6})
			d, err := safe.NewDeviceMatrix[int32](res, 3, 2)
			if err != nil {
				t.Error(err)
				return
			}
			if err := d.CopyFrom(res, p); err != nil {
				t.Error(err)
			}
			got, _ := d.ToHost(res)
			if got[5] != 6 {
				t.Errorf("copied %v", got)
			}
			d.Close()
			if err := p.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func TestFilters(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	f, err := safe.NewBitsetFilterAllowing(res, 70, []int64{0, 33, 69})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f)
	if f.Rows() != 70 || f.Kind() != safe.Bitset || kit.Words(70) != 3 {
		t.Errorf("filter %v rows %d", f.Kind(), f.Rows())
	}
	if f.Allowed() != 3 || f.AllowedFor(5) != 3 {
		t.Errorf("bitset Allowed = %d, AllowedFor(5) = %d, want 3", f.Allowed(), f.AllowedFor(5))
	}
	// A bitmap of 2 queries × 70 rows (query 1's bits straddle words):
	// query 0 sees rows 0-4, query 1 rows 31 and 69.
	words := make([]uint32, kit.Words(140))
	for _, b := range []int{0, 1, 2, 3, 4, 70 + 31, 70 + 69} {
		words[b/32] |= 1 << (b % 32)
	}
	bm, err := safe.NewBitmapFilter(res, 2, 70, words)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bm)
	if bm.Kind() != safe.Bitmap || bm.Allowed() != 2 || bm.AllowedFor(0) != 5 || bm.AllowedFor(1) != 2 || bm.AllowedFor(2) != 0 {
		t.Errorf("bitmap %v: Allowed = %d, AllowedFor = %d %d %d, want 2, 5 2 0", bm.Kind(), bm.Allowed(), bm.AllowedFor(0), bm.AllowedFor(1), bm.AllowedFor(2))
	}
	for name, err := range map[string]error{
		"id out of range": func() error { _, err := safe.NewBitsetFilterAllowing(res, 70, []int64{70}); return err }(),
		"short bitset":    func() error { _, err := safe.NewBitsetFilter(res, 70, []uint32{0, 0}); return err }(),
		"bits past rows":  func() error { _, err := safe.NewBitsetFilter(res, 70, []uint32{0, 0, 1 << 6}); return err }(),
		"bitmap size":     func() error { _, err := safe.NewBitmapFilter(res, 2, 70, []uint32{0, 0, 0, 0}); return err }(),
		"no rows":         func() error { _, err := safe.NewBitsetFilter(res, 0, nil); return err }(),
	} {
		if !errors.Is(err, safe.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCPath(t *testing.T) {
	if _, err := kit.CPath("op", ""); err == nil {
		t.Error("empty path accepted")
	}
	if _, err := kit.CPath("op", "a\x00b"); err == nil {
		t.Error("NUL accepted")
	}
	if p, err := kit.CPath("op", "/tmp/x"); err != nil || string(p) != "/tmp/x\x00" {
		t.Errorf("got %q, %v", p, err)
	}
}

var _ = generated.CuvsVersion
var _ = cuvsdouble.AnyFunction

// Closing the resources first does not leak the matrices allocated on them.
func TestDeviceMatrixOutlivesResources(t *testing.T) {
	safetest.Check(t)
	res, err := safe.NewResources()
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
		t.Fatalf("Close after the resources closed: %v", err)
	}
}

// A second Load with other options is refused, naming what differs; the
// same options (the defaults, or the library already loaded) are a no-op.
func TestLoadRefusesDifferentOptions(t *testing.T) {
	if err := safe.Load(); err != nil {
		t.Fatal(err)
	}
	path := generated.LibraryPath()
	for _, opts := range [][]safe.Option{
		nil,
		{safe.WithLibrary(path)},
		{safe.WithMemoryPool(safe.DefaultPoolInitialPercent, safe.DefaultPoolMaxPercent, false)},
	} {
		if err := safe.Load(opts...); err != nil {
			t.Errorf("Load with the same options: %v", err)
		}
	}
	for _, c := range []struct {
		opts []safe.Option
		want string
	}{
		{[]safe.Option{safe.WithoutMemoryPool()}, "memory pool off"},
		{[]safe.Option{safe.WithMemoryPool(20, 80, false)}, "memory pool 20%..80%"},
		{[]safe.Option{safe.WithMemoryPool(safe.DefaultPoolInitialPercent, safe.DefaultPoolMaxPercent, true)}, "managed true"},
		{[]safe.Option{safe.WithoutVersionCheck()}, "version check false"},
		{[]safe.Option{safe.WithLibrary(filepath.Join(t.TempDir(), "libother.so"))}, "libother.so"},
	} {
		err := safe.Load(c.opts...)
		var ae *safe.ArgError
		if !errors.As(err, &ae) || ae.Op != "safe.Load" || ae.Arg != "opts" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load with other options (%s): %v", c.want, err)
		}
	}
	if ctl := safetest.Control(); ctl != nil { // the refused Loads changed nothing
		if p := ctl.Pool(); !p.Enabled || p.InitialPercent != safe.DefaultPoolInitialPercent {
			t.Errorf("pool after the refused Loads: %+v", p)
		}
	}
}
