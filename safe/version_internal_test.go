package safe

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
)

func TestVersionCheck(t *testing.T) {
	// Package safe's own tests cannot import internal/safetest (it imports
	// safe): they read its variable themselves.
	if lib := os.Getenv("CUVS_TEST_LIBRARY"); lib != "" {
		t.Skipf("needs the ABI test double (internal/cuvsdouble) for forced versions; CUVS_TEST_LIBRARY=%s is another library", lib)
	}
	ctl, err := cuvsdouble.Open(generated.LibraryPath())
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.SetVersion(26, 6, 0)
	if err := checkVersion(); err != nil {
		t.Fatalf("matching version refused: %v", err)
	}
	ctl.SetVersion(26, 6, 3) // a patch release is fine
	if err := checkVersion(); err != nil {
		t.Fatalf("patch release refused: %v", err)
	}
	ctl.SetVersion(26, 8, 1) // the other release of the window
	if err := checkVersion(); err != nil {
		t.Fatalf("26.08 refused: %v", err)
	}
	for _, v := range [][3]uint16{{26, 10, 0}, {25, 6, 0}} {
		ctl.SetVersion(v[0], v[1], v[2])
		err := checkVersion()
		if !errors.Is(err, ErrVersion) {
			t.Fatalf("%v: got %v, want ErrVersion", v, err)
		}
		lib := Version{int(v[0]), int(v[1]), int(v[2])}.String()
		for _, want := range []string{lib, "26.06, 26.08", "WithoutVersionCheck"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not mention %q", err, want)
			}
		}
	}
}

func TestParseVersion(t *testing.T) {
	if v, err := parseVersion("v26.06.00"); err != nil || v != (Version{26, 6, 0}) {
		t.Errorf("got %v, %v", v, err)
	}
	if _, err := parseVersion("vX.1"); err == nil {
		t.Error("bad version accepted")
	}
	// The headers of the loaded library's release: v26.06.00 or v26.08.01.
	want := map[string]Version{"26.06": {26, 6, 0}, "26.08": {26, 8, 1}}[generated.Release()]
	if BindingsVersion() != want {
		t.Errorf("BindingsVersion = %v on release %s, want %v", BindingsVersion(), generated.Release(), want)
	}
}

// TestLoadSelectsTheLibrarysRelease reloads the double as a 26.08 library:
// the bindings select 26.08, the functions both releases share still work,
// and a function 26.08 dropped is refused as not in the release.
func TestLoadSelectsTheLibrarysRelease(t *testing.T) {
	if lib := os.Getenv("CUVS_TEST_LIBRARY"); lib != "" {
		t.Skipf("needs the ABI test double (internal/cuvsdouble) for forced versions; CUVS_TEST_LIBRARY=%s is another library", lib)
	}
	path := generated.LibraryPath()
	ctl, err := cuvsdouble.Open(path) // keeps the double, and its state, open across the reload
	if err != nil {
		t.Fatal(err)
	}
	reload := func() {
		t.Helper()
		generated.Unload()
		if err := generated.Load(path); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { ctl.SetVersion(26, 6, 0); reload() }()
	ctl.SetVersion(26, 8, 1)
	reload()
	if generated.Release() != "26.08" || BindingsVersion() != (Version{26, 8, 1}) {
		t.Fatalf("release %q, bindings %v", generated.Release(), BindingsVersion())
	}
	if v, err := LibraryVersion(); err != nil || v != (Version{26, 8, 1}) {
		t.Errorf("LibraryVersion = %v, %v", v, err)
	}
	if err := checkVersion(); err != nil {
		t.Error(err)
	}
	if _, err := GetLogLevel(); err != nil {
		t.Errorf("a function of both releases: %v", err)
	}
	err = generated.CuvsCagraSerialize(0, nil, 0, false)
	if !errors.Is(err, generated.ErrNotInRelease) || !strings.Contains(err.Error(), "26.06") {
		t.Errorf("a function 26.08 dropped: %v", err)
	}
	ctl.SetVersion(26, 6, 0)
	reload()
	if generated.Release() != "26.06" || BindingsVersion() != (Version{26, 6, 0}) {
		t.Errorf("back on 26.06: release %q, bindings %v", generated.Release(), BindingsVersion())
	}
}

// WithAsyncMemoryResource on a 26.06 library: Load refuses, naming the
// release that has it, and leaves nothing loaded.
func TestLoadAsyncMemoryResourceNeeds2608(t *testing.T) {
	if lib := os.Getenv("CUVS_TEST_LIBRARY"); lib != "" {
		t.Skipf("reloads the ABI test double; CUVS_TEST_LIBRARY=%s is another library", lib)
	}
	if generated.Release() != "26.06" {
		t.Skipf("the double is %s", generated.Release())
	}
	path := generated.LibraryPath()
	loadMu.Lock()
	was, wasOK := loaded, loadedOK
	loadedOK = false
	loadMu.Unlock()
	generated.Unload()
	defer func() {
		generated.Unload()
		if err := generated.Load(path); err != nil {
			t.Fatal(err)
		}
		loadMu.Lock()
		loaded, loadedOK = was, wasOK
		loadMu.Unlock()
	}()
	err := Load(WithLibrary(path), WithAsyncMemoryResource())
	if !errors.Is(err, ErrNotInRelease) || !strings.Contains(err.Error(), "26.08") {
		t.Fatalf("Load with the async resource on 26.06: %v", err)
	}
	if generated.Loaded() {
		t.Error("a refused Load left the library loaded")
	}
}

// TestErrorTextProbe: Load's check stores a text through
// cuvsSetLastErrorText, reads it back through cuvsGetLastErrorText on the
// same thread and clears it, so that no later failure reports the probe.
func TestErrorTextProbe(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := checkErrorText(); err != nil {
		t.Fatal(err)
	}
	if got, err := generated.CuvsGetLastErrorText(); err != nil || got != "" {
		t.Errorf("after the probe the thread's error text is %q (%v), want it cleared", got, err)
	}
}
