package kit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/stream"
)

// SerializeTo runs serialize (an index's Serialize to a path) with its
// output streamed to w (stream.ToWriter: a named pipe, nothing on disk),
// and returns the bytes written. serialize's own error comes back as it
// is; a failure of the stream or of w is wrapped with op.
func SerializeTo(op string, w io.Writer, serialize func(path string) error) (int64, error) {
	if w == nil {
		return 0, Argf(op, "w", "nil io.Writer")
	}
	var serr error
	n, err := stream.ToWriter(w, func(path string) error {
		serr = serialize(path)
		return serr
	})
	if err != nil && serr == nil {
		err = fmt.Errorf("%s: %w", op, err)
	}
	return n, err
}

// DeserializeFrom copies r to its end into an anonymous in-memory file
// (stream.FromReader: cuVS's deserializers read a path, some twice; a
// private temporary file where memfd_create is missing), checks its
// checksum trailer where it has one (a damaged stream, or one without a
// trailer where opts require it, is safe.ErrCorruptIndex; opts' Verified
// is set), cuts the trailer off and runs deserialize on its path. deserialize's own error comes back as the
// caller's (FromStream: named op, the file called "the stream"); a stream
// over opts' MaxBytes is an *ArgError naming r; a failure of r or of the
// copy is wrapped with op.
func DeserializeFrom[I any](op string, r io.Reader, opts []safe.DeserializeOption, deserialize func(path string) (I, error)) (I, error) {
	var idx, zero I
	if r == nil {
		return zero, Argf(op, "r", "nil io.Reader")
	}
	lim, err := Limits(op, opts)
	if err != nil {
		return zero, err
	}
	var derr error
	_, err = stream.FromReaderFile(r, lim.MaxBytes, func(f *os.File, path string) error {
		if derr = checkStream(op, f, lim); derr != nil {
			return derr
		}
		idx, derr = deserialize(path)
		derr = FromStream(op, path, derr)
		return derr
	})
	if err != nil {
		var tl *stream.TooLargeError
		switch {
		case errors.As(err, &tl):
			err = Argf(op, "r", "the stream holds more than MaxBytes = %d bytes", tl.Limit)
		case derr == nil:
			err = fmt.Errorf("%s: %w", op, err)
		}
		return zero, err
	}
	return idx, nil
}

// streamName stands for the in-memory file in errors.
const streamName = "the stream"

// FromStream rewrites err, the error of a path-taking deserializer (op
// minus its "From", e.g. cagra.Deserialize) run by op (cagra.DeserializeFrom)
// on path, the in-memory file DeserializeFrom made: it names op, the
// function the caller called, and calls the file "the stream" rather than
// its internal /proc/self/fd path. A *safe.Error or *safe.ArgError stays
// one (a copy, with op); any other error keeps its chain (errors.Is and
// errors.As see what they saw). nil stays nil.
func FromStream(op, path string, err error) error {
	if err == nil {
		return nil
	}
	inner := strings.TrimSuffix(op, "From")
	fix := func(s string) string { return strings.ReplaceAll(s, path, streamName) }
	var e *safe.Error
	if errors.As(err, &e) && error(e) == err {
		c := *e
		c.Op, c.Reason, c.Text = op, fix(c.Reason), fix(c.Text)
		return &c
	}
	var ae *safe.ArgError
	if errors.As(err, &ae) && error(ae) == err {
		c := *ae
		c.Op, c.Reason = op, fix(c.Reason)
		return &c
	}
	msg := fix(err.Error())
	if rest, ok := strings.CutPrefix(msg, inner+": "); ok {
		msg = op + ": " + rest
	}
	return &renamed{msg: msg, err: err}
}

// RenamePath rewrites err, op's error on a copy of the file name at
// copyPath, to name name instead; nil stays nil. An *safe.Error or
// *safe.ArgError stays one (a copy); any other error keeps its chain.
func RenamePath(op, copyPath, name string, err error) error {
	if err == nil {
		return nil
	}
	fix := func(s string) string { return strings.ReplaceAll(s, copyPath, name) }
	var e *safe.Error
	if errors.As(err, &e) && error(e) == err {
		c := *e
		c.Reason, c.Text = fix(c.Reason), fix(c.Text)
		return &c
	}
	var ae *safe.ArgError
	if errors.As(err, &ae) && error(ae) == err {
		c := *ae
		c.Reason = fix(c.Reason)
		return &c
	}
	return &renamed{msg: fix(err.Error()), err: err}
}

// renamed is an error with its message rewritten and its chain kept.
type renamed struct {
	msg string
	err error
}

func (e *renamed) Error() string { return e.msg }
func (e *renamed) Unwrap() error { return e.err }
