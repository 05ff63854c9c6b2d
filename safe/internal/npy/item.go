package npy

import (
	"bufio"
	"fmt"
	"io"
)

// AtItem reports whether r's next bytes start a .npy item (its magic).
func AtItem(r *bufio.Reader) bool {
	peek, _ := r.Peek(len(magic))
	return string(peek) == magic
}

// ReadItem reads one .npy item from r: a scalar's value into Item.Value, an
// array's data passed over by skip(n) (nil: read and discarded; a file's
// reader passes SkipIn, which seeks). An error wraps ErrFormat.
func ReadItem(r *bufio.Reader, skip func(n int64) error) (Item, error) {
	it, _, payload, err := itemHeader(r)
	if err != nil {
		return it, err
	}
	if !it.Scalar {
		if skip == nil {
			skip = func(n int64) error { _, err := io.CopyN(io.Discard, r, n); return err }
		}
		if err := skip(payload); err != nil {
			return it, fmt.Errorf("%w: %d bytes of data: %v", ErrFormat, payload, err)
		}
		return it, nil
	}
	b := make([]byte, payload)
	if _, err := io.ReadFull(r, b); err != nil {
		return it, fmt.Errorf("%w: short value", ErrFormat)
	}
	it.Value = scalarValue(it.Descr, b)
	return it, nil
}

// SkipIn returns a skip for ReadItem over r, a bufio.Reader of f: it
// passes n bytes by seeking f (what r holds buffered first), so an
// index's data is not read; past f's end is an error.
func SkipIn(f io.ReadSeeker, r *bufio.Reader) func(n int64) error {
	return func(n int64) error {
		if b := int64(r.Buffered()); n <= b {
			_, err := r.Discard(int(n))
			return err
		}
		cur, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return err
		}
		end, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return err
		}
		to := cur - int64(r.Buffered()) + n
		if to > end {
			return io.ErrUnexpectedEOF
		}
		if _, err := f.Seek(to, io.SeekStart); err != nil {
			return err
		}
		r.Reset(f)
		return nil
	}
}
