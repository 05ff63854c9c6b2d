package safe

import (
	"errors"
	"fmt"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/base"
)

// Sentinel errors, for errors.Is.
var (
	// ErrNotLoaded: Load has not succeeded yet.
	ErrNotLoaded = generated.ErrNotLoaded
	// ErrNotInRelease: the function is not in the loaded library's cuVS
	// release (Release); the error is a *NotInReleaseError, which names the
	// releases that have it.
	ErrNotInRelease = generated.ErrNotInRelease
	// ErrLibraryNotFound: Load found no libcuvs_c; the error names where it
	// looked and the releases that load (Releases).
	ErrLibraryNotFound = generated.ErrLibraryNotFound
	// ErrMissingSymbol: the loaded library lacks a function (older release,
	// or a build without the algorithm).
	ErrMissingSymbol = generated.ErrMissingSymbol
	// ErrVersion: the library's major.minor version is none of the
	// releases the bindings serve (Releases), or the library failed Load's
	// check of its error channel.
	ErrVersion = errors.New("incompatible cuVS version")
	// ErrCuvs: a cuVS function reported a failure; the *Error says which
	// and why.
	ErrCuvs = errors.New("cuVS call failed")
	// ErrClosed: the handle was closed. Its getters, which return no
	// error, return their zero values once it is (a closed index's Rows and
	// Dim are 0, its DType the zero DataType).
	ErrClosed = errors.New("use of a closed handle")
	// ErrInvalidArgument: an argument failed validation before any C call:
	// an *ArgError, or a refusal of package dlpack (a negative extent, a
	// bad stride: every *dlpack.Error), whose dlpack.ErrInvalidArgument it
	// is.
	ErrInvalidArgument = dlpack.ErrInvalidArgument
	// ErrOutOfMemory: cuVS could not allocate device (or pinned host) memory:
	// RMM's out_of_memory, a pool at its maximum size, or CUDA's
	// cudaErrorMemoryAllocation. A service may shed load on it. The *Error
	// that carries it also satisfies errors.Is(err, ErrCuvs).
	ErrOutOfMemory = errors.New("out of device memory")
)

// NotInReleaseError is the error of a call that the loaded library's cuVS
// release does not have (errors.Is(err, ErrNotInRelease)): the C function
// (Symbol), the loaded release (Release) and the releases that have it
// (In). It is package generated's type, returned alike by the safe layer's
// refusals before any C call and by package generated's functions, so one
// errors.As matches both:
//
//	var nr *safe.NotInReleaseError
//	if errors.As(err, &nr) {
//		log.Printf("%s needs cuVS %s", nr.Symbol, strings.Join(nr.In, " or "))
//	}
type NotInReleaseError = generated.NotInReleaseError

// Error is a failed cuVS call.
type Error struct {
	Op     string // the Go operation, e.g. "cagra.Index.Search"
	Func   string // the C function that failed
	Reason string // cuVS's reason: the first line of Text without its source location
	Text   string // cuVS's full error text, often with a stack trace: for debugging
	// OutOfMemory: the failure was an allocation (see ErrOutOfMemory).
	OutOfMemory bool
	// Corrupt: a deserializer refused the file's contents (see
	// ErrCorruptIndex).
	Corrupt bool
}

// Error returns "Op: Reason", or "Op: Func failed" when cuVS gave no reason.
func (e *Error) Error() string {
	if e.Reason == "" {
		return e.Op + ": " + e.Func + " failed"
	}
	return e.Op + ": " + e.Reason
}

// Is makes errors.Is(err, ErrCuvs) true, errors.Is(err, ErrOutOfMemory)
// for an allocation failure, and errors.Is(err, ErrCorruptIndex) for a
// refused index file.
func (e *Error) Is(target error) bool {
	return target == ErrCuvs || (target == ErrOutOfMemory && e.OutOfMemory) || (target == ErrCorruptIndex && e.Corrupt)
}

// ArgError is an argument refused before any C call.
type ArgError struct {
	Op     string // the Go operation
	Arg    string // the argument, e.g. "queries"
	Reason string
	// Err is the cause, when the refusal comes from another error (an
	// expired or borrowed view, say); Unwrap returns it, so errors.Is and
	// errors.As reach dlpack.ErrExpired, *dlpack.BorrowedError and the like.
	Err error
}

// Error returns "Op: Arg: Reason".
func (e *ArgError) Error() string { return e.Op + ": " + e.Arg + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *ArgError) Is(target error) bool { return target == ErrInvalidArgument }

// Unwrap returns the cause, if any.
func (e *ArgError) Unwrap() error { return e.Err }

// argf returns an *ArgError; an error given for a %w verb is its cause.
// The algorithm packages call it as kit.Argf (through base.Argf).
func argf(op, arg, format string, args ...any) error {
	reason, cause := base.Arg(format, args...)
	return &ArgError{Op: op, Arg: arg, Reason: reason, Err: cause}
}

// wrap turns an error from package generated into an *Error for op; other
// errors are wrapped with op. nil stays nil. The algorithm packages call it
// as kit.Wrap (through base.Wrap).
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var ge *generated.Error
	if errors.As(err, &ge) {
		text := base.Quote(ge.Text) // it may quote a damaged file's bytes
		return &Error{Op: op, Func: ge.Func, Reason: base.Reason(text), Text: text, OutOfMemory: base.OutOfMemory(text)}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// ErrCorruptIndex is wrapped by the refusals of an index file or stream
// that is not a whole, well-formed index of the type being read:
// truncated, damaged, of another index type or format, or with bytes
// after the index. The safe layer checks what it cheaply can of cuVS's
// formats before any C call (the header, that the file is the header's
// items to its end), and a failure of cuVS's deserializer on the file's
// contents is reported with it too (an *Error, which is also ErrCuvs). A
// file that cannot be opened is not corrupt.
//
// What the bindings write carries a checksum (a CRC-32C per MiB, after
// cuVS's bytes; hnsw's files keep it in a sidecar, path+".crc32c"),
// checked first: any flipped bit, and any burst of up to 32 damaged bits
// in a MiB, is refused naming the damaged byte range; other damage
// escapes with a chance of 2^-32 per MiB. A file cuVS wrote has no
// checksum: only its layout and cuVS's reader check it, and a flipped
// bit in its data may load (RequireChecksum refuses such files). The
// checksum proves the bytes are those written, not who wrote them.
var ErrCorruptIndex = errors.New("corrupt or truncated index")
