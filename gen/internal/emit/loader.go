package emit

import (
	"fmt"
	"go/format"
)

func (g *gen) loaderGo() ([]byte, error) {
	src := fmt.Sprintf("// %s\n\n%s\n%s", g.banner(), loaderSrc, fmt.Sprintf(versionSrc, g.api.CuvsVersion, g.api.DLPackVersion))
	return format.Source([]byte(src))
}

const versionSrc = `// The releases of the headers these bindings were generated from.
const (
	CuvsVersion   = %q
	DLPackVersion = %q
)
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
)

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

// MissingSymbolError is returned by a function the loaded library does not
// export: an older release, or a build without an optional algorithm (HNSW,
// multi-GPU).
type MissingSymbolError struct {
	Symbol  string
	Library string
}

func (e *MissingSymbolError) Error() string {
	return fmt.Sprintf("%s is not exported by %s (older cuVS, or a build without this algorithm)", e.Symbol, e.Library)
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
	loadMu  sync.Mutex
	loaded  atomic.Bool
	libPath string
)

// Load opens libcuvs_c with RTLD_NOW|RTLD_LOCAL and binds every function of
// these bindings that it exports. The library is, in order: path if it is
// not empty; else $CUVS_LIBRARY if set; else DefaultLibraries through the
// dynamic loader's search, then under $CONDA_PREFIX/lib. Loading again is a
// no-op when path is empty or names the library already loaded.
func Load(path string) error {
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
			C.cuvsgo_bind()
			libPath = c
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

// Functions lists the C functions these bindings cover.
func Functions() []string { return append([]string(nil), functionNames[:]...) }

// Has reports whether the loaded library exports the C function name.
func Has(name string) bool {
	for i, n := range functionNames {
		if n == name {
			return C.cuvsgo_bound(C.int(i)) != 0
		}
	}
	return false
}

// Missing lists the functions of these bindings the loaded library lacks.
func Missing() []string {
	if !loaded.Load() {
		return Functions()
	}
	var m []string
	for i, n := range functionNames {
		if C.cuvsgo_bound(C.int(i)) == 0 {
			m = append(m, n)
		}
	}
	return m
}

func symbolError(fn int) error {
	if !loaded.Load() {
		return fmt.Errorf("%s: %w", functionNames[fn], ErrNotLoaded)
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
