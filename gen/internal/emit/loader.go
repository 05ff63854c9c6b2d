package emit

import (
	"fmt"
	"go/format"
	"strings"
)

func (g *gen) loaderGo() ([]byte, error) {
	var rows strings.Builder
	for _, r := range g.rels {
		var major, minor int
		fmt.Sscanf(r.Name, "%d.%d", &major, &minor)
		fmt.Fprintf(&rows, "\t{%q, %d, %d, %q},\n", r.Name, major, minor, r.CuvsVersion)
	}
	old := g.rels[0]
	src := fmt.Sprintf("// %s\n\n%s\n%s", g.banner(), loaderSrc, fmt.Sprintf(versionSrc, old.CuvsVersion, old.DLPackVersion, rows.String()))
	return format.Source([]byte(src))
}

const versionSrc = `// The headers of the oldest release of the window, the one whose
// declarations keep their unsuffixed Go names (see Releases).
const (
	CuvsVersion   = %q
	DLPackVersion = %q
)

// releases is the window, oldest first: the release, the major and minor
// version numbers a library reports for it, the headers it was parsed from.
var releases = [...]releaseInfo{
%s}
`

// loaderSrc is the run-time loading and error part of the package; it is
// the same for every API, only the function table differs.
const loaderSrc = `//go:generate go run ../gen

package generated

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "zcuvs_shims.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// EnvLibrary names the environment variable that points Load at a library.
const EnvLibrary = "CUVS_LIBRARY"

// DefaultLibraries are the names Load asks the dynamic loader for when no
// path is given, in order.
var DefaultLibraries = []string{"libcuvs_c.so", "libcuvs_c.so.1"}

var (
	// ErrNotLoaded is returned by every function called before Load.
	ErrNotLoaded = errors.New("cuVS library not loaded (call Load first)")
	// ErrLibraryNotFound is matched by a *LibraryError.
	ErrLibraryNotFound = errors.New("cuVS library not found")
	// ErrMissingSymbol is matched by a *MissingSymbolError.
	ErrMissingSymbol = errors.New("function missing from the loaded cuVS library")
	// ErrNotInRelease is matched by a *NotInReleaseError.
	ErrNotInRelease = errors.New("function not in the loaded cuVS release")
	// ErrUnsupportedRelease is matched by a *ReleaseError.
	ErrUnsupportedRelease = errors.New("cuVS release not supported by these bindings")
)

type releaseInfo struct {
	name         string
	major, minor int
	headers      string
}

// Releases lists the cuVS releases these bindings serve, oldest first, as
// major.minor ("26.06"). Load binds a library of any of them. The Go names
// of the generated types and functions are those of the C declarations of
// the oldest release; a later release whose declaration differs (another
// struct layout, another signature) has its own variant, named with the
// suffix _v and the release without its dot: CuvsCagraBuild_v2608.
func Releases() []string {
	rs := make([]string, len(releases))
	for i, r := range releases {
		rs[i] = r.name
	}
	return rs
}

// HeaderVersion is the cuVS version whose headers the declarations of
// release were generated from (v26.08.01 for 26.08), "" for a release
// outside the window.
func HeaderVersion(release string) string {
	for _, r := range releases {
		if r.name == release {
			return r.headers
		}
	}
	return ""
}

// Release is the release of the loaded library, "" before Load.
func Release() string {
	if i := int(loadedRelease.Load()); i > 0 {
		return releases[i-1].name
	}
	return ""
}

// FunctionReleases lists the releases that have the C function name, with
// any signature; nil for a function no release has.
func FunctionReleases(name string) []string {
	var m uint32
	for i, n := range functionNames {
		if n == name {
			m |= functionReleases[i]
		}
	}
	return maskReleases(m)
}

func maskReleases(m uint32) []string {
	var rs []string
	for i, r := range releases {
		if m&(1<<i) != 0 {
			rs = append(rs, r.name)
		}
	}
	return rs
}

// NotInReleaseError is returned by a function the loaded library's release
// does not declare so: the C function is not in that release, or has
// another signature there, which another Go function (Variant) binds.
type NotInReleaseError struct {
	Func    string   // the Go function called
	Symbol  string   // the C function it binds
	Release string   // the loaded library's release
	In      []string // the releases whose declaration Func binds
	Variant string   // the Go function binding Symbol for Release, if any
}

func (e *NotInReleaseError) Error() string {
	if e.Variant != "" {
		return fmt.Sprintf("%s binds %s as cuVS %s declares it; the loaded library is cuVS %s, whose %s is %s",
			e.Func, e.Symbol, strings.Join(e.In, ", "), e.Release, e.Symbol, e.Variant)
	}
	return fmt.Sprintf("%s is not in cuVS %s (the loaded library's release); it is in cuVS %s",
		e.Symbol, e.Release, strings.Join(e.In, ", "))
}

// Is reports whether target is ErrNotInRelease.
func (e *NotInReleaseError) Is(target error) bool { return target == ErrNotInRelease }

// ReleaseError is returned by Load for a library whose release is not one of
// Releases, or which cannot tell its version.
type ReleaseError struct {
	Library   string
	Version   string   // what cuvsVersionGet reported, "" if it could not be read
	Supported []string // Releases
}

func (e *ReleaseError) Error() string {
	if e.Version == "" {
		return fmt.Sprintf("%s reports no cuVS version (cuvsVersionGet missing or failing); these bindings support cuVS %s",
			e.Library, strings.Join(e.Supported, ", "))
	}
	return fmt.Sprintf("%s is cuVS %s; these bindings support cuVS %s", e.Library, e.Version, strings.Join(e.Supported, ", "))
}

// Is reports whether target is ErrUnsupportedRelease.
func (e *ReleaseError) Is(target error) bool { return target == ErrUnsupportedRelease }

// LibraryError says which libraries Load tried and why each failed.
type LibraryError struct {
	Tried   []string // what was passed to dlopen
	Reasons []string // dlopen's message for each
}

func (e *LibraryError) Error() string {
	var b strings.Builder
	b.WriteString("cuVS library not found: ")
	for i, t := range e.Tried {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(t + ": " + e.Reasons[i])
	}
	b.WriteString(". Install libcuvs (conda: libcuvs; pip: libcuvs-cu12/-cu13) and set " + EnvLibrary +
		" to the path of libcuvs_c.so, or add its folder to LD_LIBRARY_PATH")
	return b.String()
}

// Is reports whether target is ErrLibraryNotFound.
func (e *LibraryError) Is(target error) bool { return target == ErrLibraryNotFound }

// MissingSymbolError is returned by a function of the loaded library's
// release that the library does not export: a build without an optional
// algorithm (HNSW, multi-GPU). A function the release lacks returns a
// *NotInReleaseError instead.
type MissingSymbolError struct {
	Symbol  string
	Library string
}

func (e *MissingSymbolError) Error() string {
	return fmt.Sprintf("%s is not built into this libcuvs (%s does not export it: a build without this algorithm)", e.Symbol, e.Library)
}

// Is reports whether target is ErrMissingSymbol.
func (e *MissingSymbolError) Is(target error) bool { return target == ErrMissingSymbol }

// Error is a cuVS function that returned CUVS_ERROR.
type Error struct {
	Func string      // the C function
	Code CuvsError_t // its result
	Text string      // the library's error text, read on the calling thread
}

func (e *Error) Error() string {
	if e.Text == "" {
		return e.Func + " failed"
	}
	return e.Func + ": " + e.Text
}

var (
	loadMu        sync.Mutex
	loaded        atomic.Bool
	loadedRelease atomic.Int32 // index into releases, plus one
	libPath       string
)

// Load opens libcuvs_c with RTLD_NOW|RTLD_LOCAL, asks it its version
// (cuvsVersionGet), and binds every function of that release (see Releases)
// that it exports. A library of a release outside the window is closed
// again and refused with a *ReleaseError naming the supported releases.
// The library is, in order: path if it is not empty; else $CUVS_LIBRARY if
// set; else DefaultLibraries through the dynamic loader's search, then
// under $CONDA_PREFIX/lib. Loading again is a no-op when path is empty or
// names the library already loaded.
func Load(path string) error { return load(path, true) }

// LoadUnchecked is Load for a library of a release outside the window: it
// binds it as the nearest release (the newest one not newer than the
// library, else the oldest), whose struct layouts may not be the library's.
// It is meant for experiments only.
func LoadUnchecked(path string) error { return load(path, false) }

// selectRelease reads the opened library's version and picks its release.
func selectRelease(lib string, strict bool) (int, error) {
	var major, minor, patch C.uint16_t
	rc := C.cuvsgo_version(&major, &minor, &patch)
	rerr := &ReleaseError{Library: lib, Supported: Releases()}
	if rc != 1 { // CUVS_SUCCESS
		if strict {
			return 0, rerr
		}
		return len(releases) - 1, nil
	}
	nearest := 0
	for i, r := range releases {
		if r.major == int(major) && r.minor == int(minor) {
			return i, nil
		}
		if r.major < int(major) || r.major == int(major) && r.minor < int(minor) {
			nearest = i
		}
	}
	if strict {
		rerr.Version = fmt.Sprintf("%d.%02d.%02d", int(major), int(minor), int(patch))
		return 0, rerr
	}
	return nearest, nil
}

func load(path string, strict bool) error {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded.Load() {
		if path == "" || path == libPath {
			return nil
		}
		return fmt.Errorf("cuVS library already loaded from %s, cannot also load %s", libPath, path)
	}
	var candidates []string
	switch env := os.Getenv(EnvLibrary); {
	case path != "":
		candidates = []string{path}
	case env != "":
		candidates = []string{env}
	default:
		candidates = append(candidates, DefaultLibraries...)
		if conda := os.Getenv("CONDA_PREFIX"); conda != "" {
			for _, n := range DefaultLibraries {
				candidates = append(candidates, filepath.Join(conda, "lib", n))
			}
		}
	}
	lerr := &LibraryError{}
	for _, c := range candidates {
		cs := C.CString(c)
		var msg *C.char
		rc := C.cuvsgo_open(cs, &msg)
		C.free(unsafe.Pointer(cs))
		if rc == 0 {
			r, err := selectRelease(c, strict)
			if err != nil {
				C.cuvsgo_unload()
				return err
			}
			C.cuvsgo_bind(C.uint32_t(1) << r)
			libPath = c
			loadedRelease.Store(int32(r + 1))
			loaded.Store(true)
			return nil
		}
		lerr.Tried = append(lerr.Tried, c)
		lerr.Reasons = append(lerr.Reasons, C.GoString(msg))
		C.free(unsafe.Pointer(msg))
	}
	return lerr
}

// Unload unbinds every function and closes the library. It is meant for
// tests: no call into the library may be in flight or start meanwhile.
func Unload() {
	loadMu.Lock()
	defer loadMu.Unlock()
	if !loaded.Load() {
		return
	}
	loaded.Store(false)
	C.cuvsgo_unload()
	loadedRelease.Store(0)
	libPath = ""
}

// Loaded reports whether a library is loaded.
func Loaded() bool { return loaded.Load() }

// LibraryPath is the path or name the loaded library was opened by.
func LibraryPath() string {
	loadMu.Lock()
	defer loadMu.Unlock()
	return libPath
}

// Functions lists the C functions these bindings cover, in every release of
// the window, each once.
func Functions() []string {
	var fs []string
	seen := map[string]bool{}
	for _, n := range functionNames {
		if !seen[n] {
			seen[n] = true
			fs = append(fs, n)
		}
	}
	return fs
}

// Has reports whether the loaded library exports the C function name and
// its release has it.
func Has(name string) bool {
	for i, n := range functionNames {
		if n == name && C.cuvsgo_bound(C.int(i)) != 0 {
			return true
		}
	}
	return false
}

// Missing lists the functions of the loaded library's release that the
// library lacks (a build without an optional algorithm); before Load, every
// function.
func Missing() []string {
	if !loaded.Load() {
		return Functions()
	}
	bit := uint32(1) << (loadedRelease.Load() - 1)
	var m []string
	for i, n := range functionNames {
		if functionReleases[i]&bit != 0 && C.cuvsgo_bound(C.int(i)) == 0 {
			m = append(m, n)
		}
	}
	return m
}

func symbolError(fn int) error {
	if !loaded.Load() {
		return fmt.Errorf("%s: %w", functionNames[fn], ErrNotLoaded)
	}
	if r := int(loadedRelease.Load()) - 1; r >= 0 && functionReleases[fn]&(1<<r) == 0 {
		e := &NotInReleaseError{Func: goFunctionNames[fn], Symbol: functionNames[fn], Release: releases[r].name,
			In: maskReleases(functionReleases[fn])}
		for i, n := range functionNames {
			if n == e.Symbol && functionReleases[i]&(1<<r) != 0 {
				e.Variant = goFunctionNames[i]
			}
		}
		return e
	}
	return &MissingSymbolError{Symbol: functionNames[fn], Library: LibraryPath()}
}

func statusError(fn int, code int32, text *C.char) error {
	if code == C.CUVSGO_MISSING {
		return symbolError(fn)
	}
	e := &Error{Func: functionNames[fn], Code: CuvsError_t(code)}
	if text != nil {
		e.Text = C.GoString(text)
		C.free(unsafe.Pointer(text))
	}
	return e
}
`
