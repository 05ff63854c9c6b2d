package kit

import (
	"fmt"
	"io"

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

// DeserializeFrom copies r to its end into a private temporary file
// (stream.FromReader: cuVS's deserializers read a path, some twice) and
// runs deserialize on it. deserialize's own error comes back as it is; a
// failure of r or of the copy is wrapped with op.
func DeserializeFrom[I any](op string, r io.Reader, deserialize func(path string) (I, error)) (I, error) {
	var idx, zero I
	if r == nil {
		return zero, Argf(op, "r", "nil io.Reader")
	}
	var derr error
	_, err := stream.FromReader(r, func(path string) error {
		idx, derr = deserialize(path)
		return derr
	})
	if err != nil {
		if derr == nil {
			err = fmt.Errorf("%s: %w", op, err)
		}
		return zero, err
	}
	return idx, nil
}
