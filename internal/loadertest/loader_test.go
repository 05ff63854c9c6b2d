package loadertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
)

var (
	lib  string                // path of the built tiny library (26.06.00)
	libs = map[string]string{} // the tiny library built for other versions, by name
)

// tinyBuilds are the other versions the tiny library is built as: the
// -D flags of each.
var tinyBuilds = map[string][]string{
	"26.08":     {"-DCUVSGO_RELEASE=2608", "-DTINY_MINOR=8", "-DTINY_PATCH=1"},
	"26.10":     {"-DCUVSGO_RELEASE=2608", "-DTINY_MINOR=10"},
	"25.12":     {"-DCUVSGO_RELEASE=2606", "-DTINY_MAJOR=25", "-DTINY_MINOR=12"},
	"noversion": {"-DCUVSGO_RELEASE=2606", "-DTINY_NO_VERSION"},
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loadertest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := func(out string, defs ...string) {
		args := append([]string{"-shared", "-fPIC", "-O1", "-I../../generated", "-o", out}, defs...)
		cmd := exec.Command("gcc", append(args, "testdata/tinycuvs.c")...)
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the tiny library: %v\n%s", err, b)
			os.Exit(1)
		}
	}
	lib = filepath.Join(dir, "libtinycuvs.so")
	build(lib, "-DCUVSGO_RELEASE=2606")
	for name, defs := range tinyBuilds {
		libs[name] = filepath.Join(dir, "libtinycuvs-"+name+".so")
		build(libs[name], defs...)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func load(t *testing.T, path string) {
	t.Helper()
	if err := generated.Load(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(generated.Unload)
}

func TestCallBeforeLoad(t *testing.T) {
	var major, minor, patch uint16
	err := generated.CuvsVersionGet(&major, &minor, &patch)
	if !errors.Is(err, generated.ErrNotLoaded) {
		t.Fatalf("got %v, want ErrNotLoaded", err)
	}
	if !strings.Contains(err.Error(), "cuvsVersionGet") {
		t.Errorf("error %q does not name the function", err)
	}
	if _, err := generated.CuvsGetLogLevel(); !errors.Is(err, generated.ErrNotLoaded) {
		t.Errorf("CuvsGetLogLevel before Load: %v", err)
	}
	if err := generated.CuvsSetLogLevel(generated.CuvsLogLevel_t_CUVS_LOG_LEVEL_OFF); !errors.Is(err, generated.ErrNotLoaded) {
		t.Errorf("CuvsSetLogLevel before Load: %v", err)
	}
	if generated.Loaded() || generated.Has("cuvsVersionGet") {
		t.Error("nothing should be loaded")
	}
	if got, want := len(generated.Missing()), len(generated.Functions()); got != want {
		t.Errorf("Missing() before Load lists %d, want all %d", got, want)
	}
}

func TestMissingLibrary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libnothere.so")
	err := generated.Load(missing)
	var le *generated.LibraryError
	if !errors.As(err, &le) || !errors.Is(err, generated.ErrLibraryNotFound) {
		t.Fatalf("got %v, want a *LibraryError", err)
	}
	if len(le.Tried) != 1 || le.Tried[0] != missing {
		t.Errorf("Tried = %v", le.Tried)
	}
	for _, want := range []string{missing, generated.EnvLibrary, "LD_LIBRARY_PATH"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if generated.Loaded() {
		t.Error("Loaded after a failed Load")
	}
}

// safe.Load's refusal of a missing library names the releases that load,
// from the bindings' table (safe.Releases), not a version written in the
// message (issue 46).
func TestSafeLoadNotFoundNamesReleases(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libnothere.so")
	err := safe.Load(safe.WithLibrary(missing))
	if !errors.Is(err, safe.ErrLibraryNotFound) {
		t.Fatalf("got %v, want ErrLibraryNotFound", err)
	}
	rs := safe.Releases()
	if len(rs) < 2 {
		t.Fatalf("Releases() = %v", rs)
	}
	for _, want := range append([]string{missing, generated.EnvLibrary, "cuVS " + strings.Join(rs, " or ")}, rs...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if generated.Loaded() {
		t.Error("Loaded after a failed Load")
	}
}

func TestDefaultSearchNamesSoname(t *testing.T) {
	t.Setenv(generated.EnvLibrary, "")
	t.Setenv("CONDA_PREFIX", t.TempDir())
	t.Setenv("LD_LIBRARY_PATH", "")
	err := generated.Load("")
	if err == nil {
		generated.Unload()
		t.Skip("a libcuvs_c is installed on this machine")
	}
	var le *generated.LibraryError
	if !errors.As(err, &le) {
		t.Fatalf("got %v", err)
	}
	if le.Tried[0] != "libcuvs_c.so" || len(le.Tried) != 2*len(generated.DefaultLibraries) {
		t.Errorf("Tried = %v", le.Tried)
	}
}

func TestEnvLibrary(t *testing.T) {
	t.Setenv(generated.EnvLibrary, lib)
	load(t, "")
	if generated.LibraryPath() != lib {
		t.Errorf("LibraryPath = %q, want %q", generated.LibraryPath(), lib)
	}
	if err := generated.Load(""); err != nil {
		t.Errorf("second Load: %v", err)
	}
	if err := generated.Load("/other/libcuvs_c.so"); err == nil {
		t.Error("loading a second, different library should fail")
	}
}

func TestVersionAndLogLevel(t *testing.T) {
	load(t, lib)
	var major, minor, patch uint16
	if err := generated.CuvsVersionGet(&major, &minor, &patch); err != nil {
		t.Fatal(err)
	}
	if major != 26 || minor != 6 || patch != 0 {
		t.Errorf("version %d.%d.%d, want 26.6.0", major, minor, patch)
	}
	if err := generated.CuvsSetLogLevel(generated.CuvsLogLevel_t_CUVS_LOG_LEVEL_WARN); err != nil {
		t.Fatal(err)
	}
	lvl, err := generated.CuvsGetLogLevel()
	if err != nil || lvl != generated.CuvsLogLevel_t_CUVS_LOG_LEVEL_WARN {
		t.Errorf("log level %v, %v", lvl, err)
	}
	if lvl.String() != "CUVS_LOG_LEVEL_WARN" {
		t.Errorf("String() = %q", lvl.String())
	}
	msg := []byte("set from Go\x00")
	if err := generated.CuvsSetLastErrorText(&msg[0]); err != nil {
		t.Fatal(err)
	}
}

func TestMissingSymbol(t *testing.T) {
	load(t, lib)
	var idx generated.CuvsCagraIndex_t
	err := generated.CuvsCagraIndexCreate(&idx)
	var ms *generated.MissingSymbolError
	if !errors.As(err, &ms) || !errors.Is(err, generated.ErrMissingSymbol) {
		t.Fatalf("got %v, want *MissingSymbolError", err)
	}
	if ms.Symbol != "cuvsCagraIndexCreate" || ms.Library != lib {
		t.Errorf("got %+v", ms)
	}
	if !strings.Contains(err.Error(), "cuvsCagraIndexCreate is not built into this libcuvs") {
		t.Errorf("message %q does not say the function is not built into this libcuvs", err)
	}
	if !generated.Has("cuvsRMMAlloc") || generated.Has("cuvsCagraIndexCreate") || generated.Has("noSuchFunction") {
		t.Error("Has is wrong")
	}
	// Missing lists what the library lacks of its own release (26.06) only.
	in2606 := 0
	for _, f := range generated.Functions() {
		if slices.Contains(generated.FunctionReleases(f), "26.06") {
			in2606++
		}
	}
	missing := generated.Missing()
	if len(missing) != in2606-8 || in2606 >= len(generated.Functions()) {
		t.Errorf("%d functions missing, want all %d of 26.06 but the 8 the tiny library has", len(missing), in2606)
	}
	if slices.Contains(missing, "cuvsRMMAsyncMemoryResourceEnable") || !slices.Contains(missing, "cuvsCagraIndexCreate") {
		t.Error("Missing lists a function of another release, or misses one of 26.06")
	}
}

func TestErrorTextFromCallingThread(t *testing.T) {
	load(t, lib)
	const goroutines, calls = 16, 300
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var p unsafe.Pointer
			for i := 0; i < calls; i++ {
				n := uint64(2*(g*calls+i) + 1) // odd: fails with its own text
				err := generated.CuvsRMMAlloc(0, &p, n)
				var ce *generated.Error
				if !errors.As(err, &ce) {
					errs <- fmt.Errorf("size %d: got %v, want *generated.Error", n, err)
					return
				}
				if want := fmt.Sprintf("cannot allocate %d bytes", n); ce.Text != want || ce.Func != "cuvsRMMAlloc" || ce.Code != generated.CuvsError_t_CUVS_ERROR {
					errs <- fmt.Errorf("got %+v, want text %q", ce, want)
					return
				}
				// A success in between clears nothing we rely on.
				if err := generated.CuvsRMMAlloc(0, &p, n+1); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
