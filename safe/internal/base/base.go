// Package base sits below package safe and its toolkit, safe/internal/kit:
// the error-text helpers both use, and the hooks through which kit reaches
// safe's unexported internals (a Resources' handle, a Filter's memory).
// Package safe sets the hooks in its init; nothing else may.
//
// The hooks take the safe types as any, since this package cannot name
// them (safe imports it); kit's typed functions are the only callers.
package base

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
)

// Hooks into package safe, set by its init.
var (
	// Lock takes a *safe.Resources for one C call and returns its handle.
	Lock func(res any, op string) (generated.CuvsResources_t, error)
	// Unlock ends what Lock began.
	Unlock func(res any)
	// Open refuses a nil, zero or closed *safe.Resources, naming op.
	Open func(res any, op string) error
	// Params returns a locked *safe.Resources' C memory for the params
	// struct of the call it is locked for (n bytes at most).
	Params func(res any, n uintptr) uintptr
	// CheckDevice refuses memory of another CUDA device than the
	// *safe.Resources'.
	CheckDevice func(res any, op, arg string, dev dlpack.Device) error
	// DeviceID returns the CUDA device a *safe.Resources works on.
	DeviceID func(res any, op string) (int32, error)
	// InRelease refuses a C function the loaded release lacks.
	InRelease func(op, cName string) error
	// BindFilter checks a *safe.Filter against an index of rows rows
	// searched with nQueries queries and binds its memory to c.
	BindFilter func(f any, op string, c dlpack.Call, rows, nQueries int64) (generated.CuvsFilter, error)
	// FilterHostWords returns a *safe.Filter's bitset words in host
	// memory (read-only, copied once with the *safe.Resources given).
	FilterHostWords func(f any, op string, res any) ([]uint32, error)
	// HoldFilter keeps a *safe.Filter from being closed until
	// ReleaseFilter (a Batcher's queued requests); it refuses a closed one.
	HoldFilter    func(f any, op string) error
	ReleaseFilter func(f any)
	// NewBatchBitmap makes a bitmap *safe.Filter for at most maxQueries
	// queries over rows rows, whose words (the *safe.DeviceVector[uint32]
	// returned with it) a batch rewrites; SetBatchQueries sets its query
	// count and each query's allowed rows for the batch.
	NewBatchBitmap  func(res any, maxQueries, rows int64) (f, words any, err error)
	SetBatchQueries func(f any, perQuery []int64)
	// Retain keeps a *safe.Resources from being destroyed (its C handle
	// and its stream) until the returned release is called, Close
	// notwithstanding: for C objects made with it, whose memory cuVS
	// frees on that stream and through that handle's memory resources.
	Retain func(res any, op string) (release func(), err error)
	// Argf returns a *safe.ArgError, its cause the error given for a %w
	// verb; Wrap turns a *generated.Error into a *safe.Error for op and
	// wraps other errors with op (nil stays nil). They are package safe's
	// argf and wrap, which kit.Argf and kit.Wrap call: the safe layer's one
	// implementation of each.
	Argf func(op, arg, format string, args ...any) error
	Wrap func(op string, err error) error
)

// location matches the source-location prefixes of cuVS's error texts:
// RAFT's "RAFT failure at file=... line=...: " (RAFT_EXPECTS, RAFT_FAIL),
// "exception occurred! file=... line=...: " (RAFT's THROW) and CUDA's
// "CUDA error encountered at: file=... line=...: ".
var location = regexp.MustCompile(`^.*?(?:(?:failure|error encountered) at:?|exception occurred!) ?file=\S+ line=\d+:\s*`)

// Reason extracts the human part of a cuVS error text: its first line,
// without the source location.
func Reason(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	return strings.TrimSpace(location.ReplaceAllString(line, ""))
}

// Quote makes text from outside the program (a cuVS error text, which
// may quote bytes of a damaged file) safe to print: valid UTF-8 with no
// control characters but newlines and tabs. Every byte that is not part
// of valid UTF-8 becomes \xNN and every other non-printable character its
// Go escape (as strconv.Quote writes them, without the quotes); the rest,
// backslashes included, is kept as it is.
func Quote(text string) string {
	clean := true
	for _, r := range text {
		if r == utf8.RuneError || (!strconv.IsPrint(r) && r != '\n' && r != '\t') {
			clean = false
			break
		}
	}
	if clean {
		return text
	}
	var b strings.Builder
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, "\\x%02x", text[i])
		case r == '\n' || r == '\t' || strconv.IsPrint(r):
			b.WriteString(text[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// outOfMemory matches the texts of allocation failures: RMM's
// rmm::out_of_memory ("std::bad_alloc: out_of_memory: ..."), its pools'
// "Maximum pool size exceeded", CUDA's cudaErrorMemoryAllocation, and a
// plain std::bad_alloc.
var outOfMemory = regexp.MustCompile(`out_of_memory|[Oo]ut of memory|Maximum pool size exceeded|cudaErrorMemoryAllocation|std::bad_alloc`)

// OutOfMemory reports whether a cuVS error text is an allocation failure.
func OutOfMemory(text string) bool { return outOfMemory.MatchString(text) }

// Arg formats an argument error's reason as fmt.Errorf would and returns
// its cause: the error given for a %w verb (the formatted error itself when
// there are several), or nil.
func Arg(format string, args ...any) (reason string, cause error) {
	e := fmt.Errorf(format, args...)
	switch u := e.(type) {
	case interface{ Unwrap() error }:
		return e.Error(), u.Unwrap()
	case interface{ Unwrap() []error }:
		return e.Error(), e
	}
	return e.Error(), nil
}

// CPath returns path as a NUL-terminated byte slice for a C call, or why C
// cannot take it.
func CPath(path string) ([]byte, string) {
	if path == "" {
		return nil, "empty"
	}
	if strings.IndexByte(path, 0) >= 0 {
		return nil, "contains a NUL byte"
	}
	return append([]byte(path), 0), ""
}

// Reserve checks that a *safe.Resources' device can give need bytes (a
// *safe.MemoryError otherwise; not when check is false or the Resources
// was made WithoutMemoryCheck) and counts charge bytes on it until release.
var Reserve func(res any, op, what string, need, charge int64, check bool) (release func(), err error)
