package kit

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/integrity"
)

// Limits reads a deserializer's options for op: a nil option is an
// *ArgError naming opts, and so is a negative MaxBytes.
func Limits(op string, opts []safe.DeserializeOption) (safe.DeserializeLimits, error) {
	var lim safe.DeserializeLimits
	for _, o := range opts {
		if o == nil {
			return lim, Argf(op, "opts", "nil DeserializeOption")
		}
		o(&lim)
	}
	if lim.MaxBytes < 0 {
		return lim, Argf(op, "opts", "MaxBytes(%d): want a positive limit, or 0 for none", lim.MaxBytes)
	}
	return lim, nil
}

// SerializeSettings reads a serializer's options for op: a nil option is
// an *ArgError naming opts.
func SerializeSettings(op string, opts []safe.SerializeOption) (safe.SerializeSettings, error) {
	var s safe.SerializeSettings
	for _, o := range opts {
		if o == nil {
			return s, Argf(op, "opts", "nil SerializeOption")
		}
		o(&s)
	}
	return s, nil
}

// checked turns integrity's verdict on a file or stream into op's: a
// damaged one (an *integrity.Error), or one without a trailer where lim
// requires it, is safe.ErrCorruptIndex; lim.Verified is set.
func checked(op string, info integrity.Info, err error, lim safe.DeserializeLimits) (integrity.Info, error) {
	var ie *integrity.Error
	switch {
	case errors.As(err, &ie):
		return info, Corrupt(op, err)
	case err != nil:
		return info, fmt.Errorf("%s: %w", op, err)
	}
	if err := integrity.Require(info, lim.RequireChecksum); err != nil {
		return info, Corrupt(op, err)
	}
	if lim.Verified != nil {
		*lim.Verified = info.Verified
	}
	return info, nil
}

// VerifyFile checks the file path's checksum for op, before any C call
// (integrity.CheckFile: its sidecar first where sidecar is true, else an
// appended trailer). It returns what it found; DataLen is the length the
// format's own checks must see.
func VerifyFile(op, path string, sidecar bool, lim safe.DeserializeLimits) (integrity.Info, error) {
	info, err := integrity.CheckFile(path, sidecar)
	return checked(op, info, err, lim)
}

// Seal proves the file path, just written by a serializer, for op: its
// trailer appended, or written to its sidecar (path+".crc32c") where
// sidecar is true.
func Seal(op, path string, sidecar bool) error {
	var err error
	if sidecar {
		err = integrity.WriteSidecar(path)
	} else {
		err = integrity.Append(path)
	}
	if err != nil {
		return fmt.Errorf("%s: writing the checksum: %w", op, err)
	}
	return nil
}

// SerializeSealed is SerializeTo with the checksum trailer after what
// serialize wrote: the bytes written to w, trailer included.
func SerializeSealed(op string, w io.Writer, serialize func(path string) error) (int64, error) {
	if w == nil {
		return 0, Argf(op, "w", "nil io.Writer")
	}
	sum := integrity.NewSum()
	n, err := SerializeTo(op, integrity.Writer(w, sum), serialize)
	if err != nil {
		return n, err
	}
	m, err := w.Write(sum.Trailer())
	if err != nil {
		return n + int64(m), fmt.Errorf("%s: %w", op, err)
	}
	return n + int64(m), nil
}

// checkStream checks the stream DeserializeFrom copied into f for op and
// cuts its trailer off, so that the format's reader, and the checks that
// refuse bytes after the data, see the data alone.
func checkStream(op string, f *os.File, lim safe.DeserializeLimits) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	info, err := integrity.Check(f, st.Size())
	if info, err = checked(op, info, err, lim); err != nil {
		return err
	}
	if info.Appended {
		if err := f.Truncate(info.DataLen); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return nil
}
