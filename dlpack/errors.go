package dlpack

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidArgument is matched by every refusal of a tensor, a view or an
// owner given to this package (every *Error, whatever its Kind): the one
// sentinel of refused arguments across this package and the safe layer,
// whose safe.ErrInvalidArgument it is. A *BorrowedError is not one: the
// memory is in use, the request itself was well formed.
var ErrInvalidArgument = errors.New("invalid argument")

// The kinds of error this package returns. Every error it returns wraps one
// of them: test with errors.Is, and use errors.As with *Error or
// *BorrowedError for the details.
var (
	// ErrUnsupportedDevice: the device type is not a DLPack device type, or
	// not one the operation can use (host access to device memory, say).
	ErrUnsupportedDevice = errors.New("dlpack: unsupported device")
	// ErrUnsupportedDType: the element type is unknown, has a width that is
	// not a whole number of bytes or not legal for its kind, has no lanes, or
	// is not the Go element type asked for.
	ErrUnsupportedDType = errors.New("dlpack: unsupported dtype")
	// ErrStridesRank: the strides do not have one entry per dimension.
	ErrStridesRank = errors.New("dlpack: strides/rank mismatch")
	// ErrInvalidMetadata: anything else a C consumer would trip on: rank,
	// negative extents, sizes that overflow, a nil or misaligned data
	// pointer, a buffer shorter than its shape.
	ErrInvalidMetadata = errors.New("dlpack: invalid metadata")
	// ErrExpired: the view was used after its call ended, or after the
	// memory's owner was closed.
	ErrExpired = errors.New("dlpack: expired")
	// ErrAliased: a writable view overlaps another view of the same call, or
	// itself.
	ErrAliased = errors.New("dlpack: aliased")
	// ErrBorrowed: the owner cannot be closed or lent as asked because the
	// memory is borrowed; see *BorrowedError for by whom.
	ErrBorrowed = errors.New("dlpack: still borrowed")
)

// Error describes a refused tensor: which operation, which field, which value
// and why. Kind is one of the Err* values above; errors.Is(err, Kind) holds.
type Error struct {
	Kind   error  // one of ErrUnsupportedDevice, ..., ErrAliased
	Op     string // the operation, e.g. "FromRawParts", "Import", "Call.Out"
	Field  string // the offending field, e.g. "shape[1]", "dtype.bits"
	Value  any    // the offending value
	Reason string // what is wrong with it
}

// Error formats the error as "dlpack: OP: KIND: FIELD = VALUE: REASON".
func (e *Error) Error() string {
	kind := "error"
	if e.Kind != nil {
		kind = strings.TrimPrefix(e.Kind.Error(), "dlpack: ")
	}
	return fmt.Sprintf("dlpack: %s: %s: %s = %v: %s", e.Op, kind, e.Field, e.Value, e.Reason)
}

// Unwrap returns e.Kind.
func (e *Error) Unwrap() error { return e.Kind }

// Is makes errors.Is(err, ErrInvalidArgument) true (and so
// errors.Is(err, safe.ErrInvalidArgument)).
func (e *Error) Is(target error) bool { return target == ErrInvalidArgument }

// nilTensor is the error of a method called on a typed nil tensor.
func nilTensor(op string) error {
	return newError(ErrInvalidMetadata, op, "tensor", nil, "a nil pointer")
}

func newError(kind error, op, field string, value any, reason string) *Error {
	return &Error{Kind: kind, Op: op, Field: field, Value: value, Reason: reason}
}

// BorrowedError says that an owner refused to be closed or lent because its
// memory is borrowed, and by whom. errors.Is(err, ErrBorrowed) holds.
type BorrowedError struct {
	Owner string   // the owner's label (see Owner.SetLabel)
	Op    string   // what was refused: "close", "lend mutably", "borrow", "borrow mutably"
	By    []string // the holders, e.g. `call "cagra.Search"`, `"cagra.Index" (retained)`
}

// Error says what was refused and lists the holders.
func (e *BorrowedError) Error() string {
	return fmt.Sprintf("dlpack: cannot %s %s: still borrowed by %s", e.Op, e.Owner, strings.Join(e.By, ", "))
}

// Unwrap returns ErrBorrowed.
func (e *BorrowedError) Unwrap() error { return ErrBorrowed }
