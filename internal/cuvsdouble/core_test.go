package cuvsdouble_test

import (
	"errors"
	"math/rand"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

func TestFunctionsAndSymbols(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	fns := f.ctl.Functions()
	const want = 61 + 30 + 23 + // + IVF-Flat (14), IVF-SQ (15), refine (1), IVF-PQ indexes (23)
		16 + // distance (1), k-means (5 + 4 _v2), PCA (6)
		27 + // quantizers
		15 + // NN-Descent (5), all-neighbors (3), Vamana (7)
		17 + 8 + // HNSW, tiered
		36 + // multi-GPU indexes
		0
	if len(fns) != want {
		t.Errorf("%d functions, want %d: %v", len(fns), want, fns)
	}
	for _, fn := range fns {
		if !f.ctl.Has(fn) {
			t.Errorf("%s not exported", fn)
		}
	}
	for _, fn := range []string{"cuvsCagraBuild", "cuvsVersionGet", "cuvsRMMFree"} {
		if !f.ctl.CanFail(fn) {
			t.Errorf("CanFail(%s) = false", fn)
		}
	}
	for _, fn := range []string{"cuvsGetLastErrorText", "cuvsSetLogLevel", "nope"} {
		if f.ctl.CanFail(fn) {
			t.Errorf("CanFail(%s) = true", fn)
		}
	}
	if f.ctl.Has("dbl_enter") || f.ctl.Has("knn_search") {
		t.Error("internal functions are exported")
	}
}

func TestVersion(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	ma, mi, pa, err := f.lib.Version()
	if err != nil || ma != 26 || mi != 6 || pa != 0 {
		t.Fatalf("version %d.%d.%d, %v; want 26.6.0", ma, mi, pa, err)
	}
	f.ctl.SetVersion(25, 12, 3)
	if ma, mi, pa, _ = f.lib.Version(); ma != 25 || mi != 12 || pa != 3 {
		t.Fatalf("version %d.%d.%d after SetVersion(25, 12, 3)", ma, mi, pa)
	}
	f.must(f.lib.ResourcesDestroy(f.res, false))
	f.res = 0
	f.ctl.Reset() // nothing is alive: counters may restart
	if ma, mi, pa, _ = f.lib.Version(); ma != 26 || mi != 6 || pa != 0 {
		t.Fatalf("version %d.%d.%d after Reset", ma, mi, pa)
	}
	if c := f.ctl.Counters(); c["resources"] != (cuvsdouble.Pair{}) || f.ctl.Calls("cuvsVersionGet") != 1 {
		t.Fatalf("after Reset: %v, %d calls", c["resources"], f.ctl.Calls("cuvsVersionGet"))
	}
}

func TestErrorText(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f := newFixture(t)
	defer f.close()

	if _, ok := f.lib.LastText(); ok {
		t.Fatal("error text set after a successful call")
	}
	f.ctl.FailNext("cuvsStreamSync", "the reason")
	err := f.lib.StreamSync(f.res)
	var ce *capi.Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want an error", err)
	}
	if !strings.HasPrefix(ce.Text, "RAFT failure at file=") || !strings.Contains(ce.Text, ": the reason\nObtained 3 stack frames\n#0 in ") ||
		!strings.Contains(ce.Text, "#1 in libcuvs_c.so(cuvsStreamSync+") {
		t.Fatalf("error text %q", ce.Text)
	}
	if text, ok := f.lib.LastText(); !ok || text != ce.Text {
		t.Fatalf("last text %q, %v", text, ok)
	}
	// cuvsVersionGet neither sets nor clears it (it is not wrapped in
	// translate_exceptions in cuVS)
	if _, _, _, err := f.lib.Version(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.lib.LastText(); !ok {
		t.Fatal("cuvsVersionGet cleared the error text")
	}
	// any other successful call clears it
	f.must(f.lib.StreamSync(f.res))
	if text, ok := f.lib.LastText(); ok {
		t.Fatalf("error text %q after success", text)
	}
	f.lib.SetLastText("set by hand", false)
	if text, _ := f.lib.LastText(); text != "set by hand" {
		t.Fatalf("last text %q", text)
	}
	f.lib.SetLastText("", false)
	if _, ok := f.lib.LastText(); ok {
		t.Fatal("an empty text must read back as NULL")
	}
	f.lib.SetLastText("x", false)
	f.lib.SetLastText("", true)
	if _, ok := f.lib.LastText(); ok {
		t.Fatal("NULL must clear the text")
	}

	// raw texts, empty ones included
	f.must(f.ctl.Fail(cuvsdouble.Fault{Func: "cuvsStreamSync", Text: "plain", Raw: true}))
	if err := f.lib.StreamSync(f.res); !errors.As(err, &ce) || ce.Text != "plain" {
		t.Fatalf("raw fault: %v", err)
	}
	f.must(f.ctl.Fail(cuvsdouble.Fault{Func: "cuvsStreamSync", Raw: true}))
	if err := f.lib.StreamSync(f.res); !errors.As(err, &ce) || ce.Text != "" {
		t.Fatalf("empty raw fault: %v", err)
	}

	// the text is per thread
	f.lib.SetLastText("this thread", false)
	done := make(chan string)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		text, ok := f.lib.LastText()
		if ok {
			done <- text
		}
		close(done)
	}()
	if text, ok := <-done; ok {
		t.Fatalf("another thread sees %q", text)
	}
	f.lib.SetLastText("", true)
}

func TestFaults(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	if err := f.ctl.Fail(cuvsdouble.Fault{Func: "cuvsNoSuchFunction"}); err == nil {
		t.Error("unknown function accepted")
	}
	if err := f.ctl.Fail(cuvsdouble.Fault{Func: "cuvsGetLogLevel"}); err == nil {
		t.Error("a function that cannot fail accepted")
	}
	// the third call fails, the others do not
	f.ctl.FailNth("cuvsStreamSync", 3, "third")
	for i := 1; i <= 4; i++ {
		err := f.lib.StreamSync(f.res)
		if (err != nil) != (i == 3) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if f.ctl.PendingFaults() != 0 || f.ctl.FaultHits() != 1 {
		t.Fatalf("pending %d hits %d", f.ctl.PendingFaults(), f.ctl.FaultHits())
	}
	if n := f.ctl.Calls("cuvsStreamSync"); n != 4 {
		t.Fatalf("Calls = %d", n)
	}
	// forever, until cleared
	f.must(f.ctl.Fail(cuvsdouble.Fault{Func: "cuvsStreamSync", Count: -1, Text: "always"}))
	for i := 0; i < 3; i++ {
		if f.lib.StreamSync(f.res) == nil {
			t.Fatal("expected a failure")
		}
	}
	f.ctl.ClearFaults()
	f.must(f.lib.StreamSync(f.res))

	// a failing create leaks nothing and leaves its out-parameter alone
	before := f.ctl.Counters()
	f.ctl.FailNext("cuvsResourcesCreate", "no")
	if r, err := f.lib.ResourcesCreate(false); err == nil || r != 0 {
		t.Fatalf("got %v, %v", r, err)
	}
	if after := f.ctl.Counters(); after["resources"] != before["resources"] {
		t.Fatalf("counters moved: %v -> %v", before["resources"], after["resources"])
	}
}

// Every C call of a CAGRA build-and-search sequence, failed in turn, leaves
// the counters as they were once the sequence unwinds.
func TestWildcardFaultsLeakNothing(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	data := randomMatrix(newRand(), 40, 8)
	ds := f.f32(capi.CUDA, capi.CUDA, 40, 8, data)
	defer f.drop(ds)
	q := f.f32(capi.CUDA, capi.CUDA, 2, 8, data[:16])
	defer f.drop(q)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.UInt, 32, 2, 4)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 2, 4)
	defer f.drop(d)

	// cleanup retries once: a destroy that was made to fail did nothing
	retry := func(fn func() error) {
		if fn() != nil {
			_ = fn()
		}
	}
	sequence := func() error {
		p, err := f.lib.ParamsCreate("CagraIndexParams")
		if err != nil {
			return err
		}
		defer retry(func() error { return f.lib.ParamsDestroy("CagraIndexParams", p) })
		sp, err := f.lib.ParamsCreate("CagraSearchParams")
		if err != nil {
			return err
		}
		defer retry(func() error { return f.lib.ParamsDestroy("CagraSearchParams", sp) })
		idx, err := f.lib.CagraCreate()
		if err != nil {
			return err
		}
		defer retry(func() error { return f.lib.CagraDestroy(idx) })
		if err := f.lib.CagraBuild(f.res, p, ds.t, idx); err != nil {
			return err
		}
		return f.lib.CagraSearch(f.res, sp, idx, q.t, nb.t, d.t, capi.Filter{})
	}
	base := f.ctl.Counters()
	for i := 0; ; i++ {
		f.must(f.ctl.Fail(cuvsdouble.Fault{Func: cuvsdouble.AnyFunction, Skip: i, Text: "injected"}))
		err := sequence()
		hit := f.ctl.PendingFaults() == 0
		f.ctl.ClearFaults()
		if got := f.ctl.Counters(); !equalLive(got, base) {
			t.Fatalf("failing call %d: counters\n%v\nwant\n%v", i, got, base)
		}
		if !hit {
			if err != nil {
				t.Fatalf("sequence failed without a fault: %v", err)
			}
			if i < 5 {
				t.Fatalf("only %d calls", i)
			}
			break
		}
		if err != nil && !strings.Contains(err.Error(), "injected") {
			t.Fatalf("failing call %d: %v", i, err)
		}
	}
	if v := f.ctl.Violations(); len(v) > 0 {
		t.Fatal(v)
	}
}

type unsafePointer struct{ p unsafe.Pointer }

func newRand() *rand.Rand { return rand.New(rand.NewSource(1)) }

func equalLive(a, b cuvsdouble.Counters) bool {
	for k, p := range a {
		if p.Live() != b[k].Live() {
			return false
		}
	}
	return true
}

func TestOmit(t *testing.T) {
	f := newFixture(t, cuvsdouble.Omit("cuvsCagraSerializeToHnswlib", "cuvsVersionGet"))
	defer f.close()
	for _, fn := range []string{"cuvsCagraSerializeToHnswlib", "cuvsVersionGet"} {
		if f.ctl.Has(fn) || f.lib.Has(fn) {
			t.Errorf("%s is exported", fn)
		}
	}
	if !f.lib.Has("cuvsCagraSerialize") {
		t.Error("cuvsCagraSerialize missing")
	}
	_, _, _, err := f.lib.Version()
	var ce *capi.Error
	if !errors.As(err, &ce) || !ce.Missing {
		t.Fatalf("got %v, want a missing symbol", err)
	}
	if !slices.Contains(f.ctl.Functions(), "cuvsVersionGet") {
		t.Error("Functions lists what the double defines, omitted or not")
	}
}

func TestResourcesStreamsDevice(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	s, err := f.lib.StreamGet(f.res)
	if err != nil || s != 2 {
		t.Fatalf("default stream %#x, %v; want cudaStreamPerThread (0x2)", s, err)
	}
	f.must(f.lib.StreamSet(f.res, 0x1234))
	if s, _ = f.lib.StreamGet(f.res); s != 0x1234 {
		t.Fatalf("stream %#x", s)
	}
	if id, err := f.lib.DeviceID(f.res); err != nil || id != 0 {
		t.Fatalf("device %d, %v", id, err)
	}
	f.ctl.SetDeviceID(3)
	r2 := f.must1(f.lib.ResourcesCreate(false))
	if id, _ := f.lib.DeviceID(r2); id != 3 {
		t.Fatalf("device %d after SetDeviceID(3)", id)
	}
	f.must(f.lib.ResourcesDestroy(r2, false))
	mg := f.must1(f.lib.ResourcesCreate(true))
	f.must(f.lib.ResourcesDestroy(mg, true))

	// a destroyed handle is an error and a violation, not a crash
	if err := f.lib.StreamSync(r2); err == nil {
		t.Fatal("use after destroy accepted")
	}
	f.expectViolations("invalid or destroyed cuvsResources_t")
}

func TestLogLevel(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	if l := f.lib.LogLevel(); l != 2 {
		t.Fatalf("default log level %d, want INFO (2)", l)
	}
	f.lib.SetLogLevel(5)
	if l := f.lib.LogLevel(); l != 5 {
		t.Fatalf("log level %d", l)
	}
	f.lib.SetLogLevel(9) // the real library terminates here
	if l := f.lib.LogLevel(); l != 5 {
		t.Fatalf("log level %d after an invalid set", l)
	}
	f.expectViolations("cuvsSetLogLevel(9)")
}

func TestMemory(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	b := f.alloc(capi.CUDA, 1000)
	if uintptr(b.p)%256 != 0 {
		t.Errorf("RMM pointer %p not 256-byte aligned", b.p)
	}
	c := f.ctl.Counters()
	if c["rmm"].Live() != 1 || c["rmm_bytes"].Live() != 1000 {
		t.Fatalf("counters %v", c)
	}
	f.free(b)
	h := f.alloc(capi.CUDAHost, 64)
	f.free(h)
	z := f.alloc(capi.CUDA, 0)
	if z.p != nil {
		t.Fatal("0-byte RMM allocation is not NULL")
	}
	f.free(z)
	if u := f.ctl.Counters().Unbalanced(); len(u) != 1 { // resources only
		t.Fatalf("unbalanced %v", u)
	}

	// pool state, and freeing across a memory-resource change
	f.must(f.lib.PoolEnable(10, 60, false))
	if p := f.ctl.Pool(); !p.Enabled || p.InitialPercent != 10 || p.MaxPercent != 60 || p.Managed {
		t.Fatalf("pool %+v", p)
	}
	if err := f.lib.PoolEnable(70, 60, false); err == nil {
		t.Fatal("initial > max accepted")
	}
	b = f.alloc(capi.CUDA, 16)
	f.must(f.lib.PoolReset())
	if f.ctl.Pool().Enabled {
		t.Fatal("pool still on after reset")
	}
	f.free(b)
	f.expectViolations("memory resource was changed")
}

// cuVS keeps its pinned-memory resource in a thread_local created by
// cuvsRMMHostAlloc: freeing on a thread that never allocated crashes it.
func TestHostFreeOnOtherThread(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	done := make(chan unsafePointer)
	go func() {
		runtime.LockOSThread() // keep this thread: it is the allocating one
		done <- unsafePointer{capi.Must(f.lib.HostAlloc(32))}
	}()
	p := <-done
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// this thread may still be a fresh one for the library
	f.must(f.lib.HostFree(p.p, 32))
	// the allocating thread is gone and this test has a library of its own,
	// so this thread never allocated in it
	f.expectViolations("never called cuvsRMMHostAlloc")
}

func TestMatrixCopyAndSlice(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	vals := []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11} // 4x3
	src := f.f32(capi.CPU, capi.CPU, 4, 3, vals)
	defer f.drop(src)
	dst := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 4, 3)
	defer f.drop(dst)
	f.must(f.lib.MatrixCopy(f.res, src.t, dst.t))
	if got := capi.CopyOut[float32](dst.b.p, 12); !slices.Equal(got, vals) {
		t.Fatalf("copy %v", got)
	}
	// strided destination: 4 rows of 5
	wide := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 4, 5)
	defer f.drop(wide)
	capi.CopyIn(wide.b.p, make([]float32, 20))
	wide.t.SetStrides(5, 1)
	narrow := capi.NewTensor(wide.b.p, capi.CUDA, capi.Float, 32, 4, 3)
	narrow.SetStrides(5, 1)
	defer narrow.Free()
	f.must(f.lib.MatrixCopy(f.res, src.t, narrow))
	got := capi.CopyOut[float32](wide.b.p, 20)
	want := []float32{0, 1, 2, 0, 0, 3, 4, 5, 0, 0, 6, 7, 8, 0, 0, 9, 10, 11, 0, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("strided copy %v", got)
	}
	// mismatches, with cuVS's words
	other := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 3, 3)
	defer f.drop(other)
	if err := f.lib.MatrixCopy(f.res, src.t, other.t); err == nil || !strings.Contains(err.Error(), "shape mismatch between src and dst tensors") {
		t.Fatalf("got %v", err)
	}
	ints := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 32, 4, 3)
	defer f.drop(ints)
	if err := f.lib.MatrixCopy(f.res, src.t, ints.t); err == nil || !strings.Contains(err.Error(), "dtype mismatch between src and dst tensors") {
		t.Fatalf("got %v", err)
	}

	sl, err := f.lib.MatrixSliceRows(f.res, src.t, 1, 3)
	f.must(err)
	if sh := sl.Shape(); !slices.Equal(sh, []int64{2, 3}) || sl.Strides() != nil || !sl.HasDeleter() {
		t.Fatalf("slice shape %v strides %v", sh, sl.Strides())
	}
	if got := capi.CopyOut[float32](sl.Data(), 6); !slices.Equal(got, vals[3:9]) {
		t.Fatalf("slice data %v", got)
	}
	if f.ctl.Counters()["tensor_metadata"].Live() != 1 {
		t.Fatal("slice shape not counted")
	}
	sl.CallDeleter()
	sl.Free()
	if err := f.lib.MatrixCopy(f.res, src.t, src.t); err != nil {
		t.Fatal(err)
	}
	bad, err := f.lib.MatrixSliceRows(f.res, src.t, 2, 1)
	bad.Free()
	if err == nil || !strings.Contains(err.Error(), "end index must be greater than start index") {
		t.Fatalf("got %v", err)
	}
}
