package cuvsdouble

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

//go:embed csrc/*.c csrc/*.h csrc/*.inc
var csrc embed.FS

// The cuVS releases the double serves, oldest first. Each build of the double
// is one release's libcuvs_c: compiled against generated/cuvs_decls.h in that
// release's mode (-DCUVSGO_RELEASE=2606 or 2608, see gen/README.md), exporting
// that release's functions only, with that release's struct layouts and
// semantics, and reporting that release's version from cuvsVersionGet.
const (
	Release2606 = "26.06"
	Release2608 = "26.08"
)

// Releases lists the releases the double can be built as, oldest first.
func Releases() []string { return []string{Release2606, Release2608} }

// NewestRelease is the release cuvsdouble-build builds without -release.
const NewestRelease = Release2608

// ReleaseEnv names an environment variable choosing the release Build and
// BuildFile compile when no Release option is given ("26.06" or "26.08").
// Without it they build 26.06, the release the double's own tests and the
// safe layer's tests are written against.
const ReleaseEnv = "CUVSDOUBLE_RELEASE"

// releaseInfo is what a release's build differs in: the CUVSGO_RELEASE value
// and the version cuvsVersionGet reports by default (the newest patch release
// whose C sources the double follows: v26.06.00, v26.08.01).
var releaseInfo = map[string]struct {
	macro               int
	major, minor, patch int
}{
	Release2606: {2606, 26, 6, 0},
	Release2608: {2608, 26, 8, 1},
}

// Release builds the double as the given cuVS release ("26.06" or "26.08").
func Release(r string) Option {
	return func(c *config) { c.release = r }
}

// ReleaseVersion returns the version cuvsVersionGet of a release's double
// reports by default.
func ReleaseVersion(r string) (major, minor, patch uint16, ok bool) {
	info, ok := releaseInfo[r]
	return uint16(info.major), uint16(info.minor), uint16(info.patch), ok
}

// LibraryName is the file name the built library gets, the soname of the
// real one.
const LibraryName = "libcuvs_c.so"

// DeclsHeaderEnv names an environment variable that overrides the path of the
// declarations header the double is compiled against.
const DeclsHeaderEnv = "CUVSDOUBLE_DECLS_HEADER"

// RealHeadersEnv names an environment variable holding a list of include
// directories (separated by the OS list separator) with cuVS's and DLPack's
// headers. When set, and no other header is chosen by an option, the double is
// compiled against those instead of the generated declarations.
const RealHeadersEnv = "CUVSDOUBLE_REAL_HEADERS"

// CFlagsEnv names an environment variable with extra compiler flags for
// every build, e.g. "-fsanitize=address" (then run the tests with the
// sanitizer's runtime in LD_PRELOAD).
const CFlagsEnv = "CUVSDOUBLE_CFLAGS"

// CacheEnv names an environment variable choosing the directory where built
// libraries are cached; "off" builds every library in the test's temporary
// directory instead.
const CacheEnv = "CUVSDOUBLE_CACHE"

// Option changes how Build compiles the double.
type Option func(*config)

type config struct {
	omit        []string
	decls       string
	realHeaders []string
	cflags      []string
	isolated    bool
	release     string
}

// Omit leaves the named cuVS functions out of the library's exported symbols,
// for tests of a library that lacks them (e.g. "cuvsCagraSerializeToHnswlib",
// "cuvsVersionGet"). The functions still exist inside the library.
func Omit(functions ...string) Option {
	return func(c *config) { c.omit = append(c.omit, functions...) }
}

// DeclsHeader compiles against the declarations header at path instead of
// the module's generated/cuvs_decls.h.
func DeclsHeader(path string) Option {
	return func(c *config) { c.decls = path }
}

// RealHeaders compiles against cuVS's and DLPack's own headers found in the
// given include directories (cuVS's c/include and DLPack's include), with
// stand-ins for cuda_runtime.h and c_config.h: a cross-check that the double's
// signatures match the real ones.
func RealHeaders(includeDirs ...string) Option {
	return func(c *config) { c.realHeaders = append([]string(nil), includeDirs...) }
}

// CFlags adds compiler flags (e.g. "-fsanitize=address", "-O0", "-g3").
func CFlags(flags ...string) Option {
	return func(c *config) { c.cflags = append(c.cflags, flags...) }
}

// Isolated gives the test its own copy of the library file (in t.TempDir()),
// so that loading it yields a library instance, with its own counters and
// settings, that no other test shares in this process.
func Isolated() Option {
	return func(c *config) { c.isolated = true }
}

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{} // key -> library path, for this process
	memCache   = map[string][]byte{} // key -> library bytes, when there is no cache directory
)

// Build compiles the double (or reuses a library built earlier with the same
// sources, header and options) and returns the path of the shared library.
// It fails the test when the compiler or the declarations header is missing.
//
// Without Isolated, every caller asking for the same options in one process
// gets the same path (unless CUVSDOUBLE_CACHE=off), hence, once loaded, the
// same library instance and state.
func Build(t testing.TB, opts ...Option) string {
	t.Helper()
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	path, err := build(&cfg, t.TempDir)
	if err != nil {
		t.Fatalf("cuvsdouble: %v", err)
	}
	if !cfg.isolated {
		return path
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, LibraryName)
	if err := copyFile(path, dst); err != nil {
		t.Fatalf("cuvsdouble: %v", err)
	}
	return dst
}

// sources returns the C sources of the double, by file name.
func sources() map[string][]byte {
	out := map[string][]byte{}
	entries, _ := csrc.ReadDir("csrc")
	for _, e := range entries {
		b, err := csrc.ReadFile("csrc/" + e.Name())
		if err == nil {
			out[e.Name()] = b
		}
	}
	return out
}

// A stand-in for CUDA's runtime header: cuVS's C headers use two of its types.
const cudaRuntimeStandIn = "typedef struct CUstream_st* cudaStream_t;\ntypedef int cudaDataType_t;\n"

func build(cfg *config, tempDir func() string) (string, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return "", fmt.Errorf("no C compiler %q on PATH: %w", cc, err)
	}

	var header []byte
	var headerName string
	realDirs := cfg.realHeaders
	if cfg.decls == "" && len(realDirs) == 0 {
		if env := os.Getenv(DeclsHeaderEnv); env != "" {
			cfg.decls = env
		} else if p, err := defaultDeclsHeader(); err == nil {
			cfg.decls = p
		} else if env := os.Getenv(RealHeadersEnv); env != "" {
			realDirs = filepath.SplitList(env)
		} else {
			return "", err
		}
	}
	if len(realDirs) == 0 {
		b, err := os.ReadFile(cfg.decls)
		if err != nil {
			return "", fmt.Errorf("reading the declarations header: %w", err)
		}
		header, headerName = b, "cuvs_decls.h"
	}

	release := cfg.release
	if release == "" {
		release = os.Getenv(ReleaseEnv)
	}
	if release == "" {
		release = Release2606
	}
	info, ok := releaseInfo[release]
	if !ok {
		return "", fmt.Errorf("release %q: the double serves %s", release, strings.Join(Releases(), ", "))
	}

	cflags := append(strings.Fields(os.Getenv(CFlagsEnv)), cfg.cflags...)
	omit := slices.Clone(cfg.omit)
	sort.Strings(omit)
	omit = slices.Compact(omit)
	for _, fn := range omit {
		if !isIdent(fn) {
			return "", fmt.Errorf("Omit(%q): not a C identifier", fn)
		}
	}

	srcs := sources()
	names := make([]string, 0, len(srcs))
	for n := range srcs {
		names = append(names, n)
	}
	sort.Strings(names)

	h := sha256.New()
	fmt.Fprintf(h, "cuvsdouble v1\ncc=%s\n", cc)
	for _, n := range names {
		fmt.Fprintf(h, "src %s %d\n", n, len(srcs[n]))
		h.Write(srcs[n])
	}
	fmt.Fprintf(h, "header %s %d\n", headerName, len(header))
	h.Write(header)
	fmt.Fprintf(h, "real %q\nomit %q\ncflags %q\nrelease %s\n", realDirs, omit, cflags, release)
	key := hex.EncodeToString(h.Sum(nil))[:24]

	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildCache[key]; ok {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}

	if b, ok := memCache[key]; ok {
		final := filepath.Join(tempDir(), LibraryName)
		return final, os.WriteFile(final, b, 0o755)
	}
	final := ""
	if dir := cacheDir(); dir != "" {
		final = filepath.Join(dir, key, LibraryName)
		if _, err := os.Stat(final); err == nil {
			buildCache[key] = final
			return final, nil
		}
	}

	work, err := os.MkdirTemp("", "cuvsdouble-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	var files []string
	for _, n := range names {
		p := filepath.Join(work, n)
		if err := os.WriteFile(p, srcs[n], 0o644); err != nil {
			return "", err
		}
		if strings.HasSuffix(n, ".c") {
			files = append(files, p)
		}
	}
	args := []string{"-std=gnu11", "-O2", "-g", "-fPIC", "-shared", "-pthread",
		"-fvisibility=hidden", "-ffp-contract=off", "-Wall", "-Wextra", "-Wno-unused-parameter",
		fmt.Sprintf("-DCUVSGO_RELEASE=%d", info.macro),
		fmt.Sprintf("-DDBL_VERSION_MAJOR=%d", info.major),
		fmt.Sprintf("-DDBL_VERSION_MINOR=%d", info.minor),
		fmt.Sprintf("-DDBL_VERSION_PATCH=%d", info.patch)}
	if len(realDirs) > 0 {
		stand := filepath.Join(work, "standin")
		if err := os.MkdirAll(filepath.Join(stand, "cuvs", "core"), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(stand, "cuda_runtime.h"), []byte(cudaRuntimeStandIn), 0o644); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(stand, "cuvs", "core", "c_config.h"), nil, 0o644); err != nil {
			return "", err
		}
		args = append(args, "-DCUVSDOUBLE_REAL_HEADERS", "-I"+stand)
		for _, d := range realDirs {
			args = append(args, "-I"+d)
		}
	} else {
		if err := os.WriteFile(filepath.Join(work, headerName), header, 0o644); err != nil {
			return "", err
		}
		args = append(args, "-I"+work)
	}
	args = append(args, cflags...)
	args = append(args, files...)
	out := filepath.Join(work, LibraryName)
	args = append(args, "-o", out, "-lm")
	if len(omit) > 0 {
		script := filepath.Join(work, "omit.map")
		var b bytes.Buffer
		b.WriteString("{\n  local:\n")
		for _, fn := range omit {
			fmt.Fprintf(&b, "    %s;\n", fn)
		}
		b.WriteString("};\n")
		if err := os.WriteFile(script, b.Bytes(), 0o644); err != nil {
			return "", err
		}
		args = append(args, "-Wl,--version-script="+script)
	}
	cmd := exec.Command(cc, args...)
	cmd.Dir = work
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("compiling the test double failed: %v\n%s %s\n%s", err, cc, strings.Join(args, " "), msg)
	}

	if final == "" {
		// no cache directory: keep the bytes for this process's next tests
		b, err := os.ReadFile(out)
		if err != nil {
			return "", err
		}
		memCache[key] = b
		final = filepath.Join(tempDir(), LibraryName)
		return final, os.WriteFile(final, b, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(final), ".tmp-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	if err := copyFile(out, tmp.Name()); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Rename(tmp.Name(), final); err != nil { // atomic: a reader never sees half a file
		os.Remove(tmp.Name())
		return "", err
	}
	buildCache[key] = final
	return final, nil
}

// cacheDir is where built libraries are kept across test runs, keyed by a hash
// of everything that goes into them; "" means no cache.
func cacheDir() string {
	if env := os.Getenv(CacheEnv); env != "" {
		if env == "off" {
			return ""
		}
		return env
	}
	if d, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(d, "cuvs-go", "cuvsdouble")
		if os.MkdirAll(p, 0o755) == nil {
			return p
		}
	}
	p := filepath.Join(os.TempDir(), fmt.Sprintf("cuvs-go-cuvsdouble-%d", os.Getuid()))
	if os.MkdirAll(p, 0o755) == nil {
		return p
	}
	return ""
}

const modulePath = "github.com/cuvs-go/cuvs"

// defaultDeclsHeader finds generated/cuvs_decls.h at the root of this module:
// from this file's location when the sources are at hand, else from the
// working directory up.
func defaultDeclsHeader() (string, error) {
	var roots []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		roots = append(roots, filepath.Join(filepath.Dir(file), "..", ".."))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			roots = append(roots, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, r := range roots {
		mod, err := os.ReadFile(filepath.Join(r, "go.mod"))
		if err != nil || !isModule(mod) {
			continue
		}
		p := filepath.Join(r, "generated", "cuvs_decls.h")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		return "", fmt.Errorf("the declarations header %s does not exist (run the generator, or set %s or %s)", p, DeclsHeaderEnv, RealHeadersEnv)
	}
	return "", errors.New("cannot find the module root holding generated/cuvs_decls.h (set " + DeclsHeaderEnv + ")")
}

func isModule(gomod []byte) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" && strings.Trim(f[1], `"`) == modulePath {
			return true
		}
	}
	return false
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// BuildFile is Build for a TestMain, where there is no testing.TB: it
// returns the library's path and a cleanup that removes any temporary
// folder it made.
func BuildFile(opts ...Option) (path string, cleanup func(), err error) {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	var dirs []string
	cleanup = func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}
	tempDir := func() string {
		d, err := os.MkdirTemp("", "cuvsdouble-")
		if err != nil {
			panic(err)
		}
		dirs = append(dirs, d)
		return d
	}
	path, err = build(&cfg, tempDir)
	if err != nil {
		cleanup()
		return "", func() {}, fmt.Errorf("cuvsdouble: %w", err)
	}
	if cfg.isolated {
		dst := filepath.Join(tempDir(), LibraryName)
		if err := copyFile(path, dst); err != nil {
			cleanup()
			return "", func() {}, fmt.Errorf("cuvsdouble: %w", err)
		}
		path = dst
	}
	return path, cleanup, nil
}
