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
// array's data read past (discarded). An error wraps ErrFormat.
func ReadItem(r *bufio.Reader) (Item, error) {
	it, _, payload, err := itemHeader(r)
	if err != nil {
		return it, err
	}
	if !it.Scalar {
		if n, err := io.CopyN(io.Discard, r, payload); err != nil {
			return it, fmt.Errorf("%w: %d bytes of data, %d in the file", ErrFormat, payload, n)
		}
		return it, nil
	}
	b := make([]byte, payload)
	if _, err := io.ReadFull(r, b); err != nil {
		return it, fmt.Errorf("%w: short value", ErrFormat)
	}
	if it.Descr[0] == '>' {
		for _, x := range b {
			it.Value = it.Value<<8 | uint64(x)
		}
	} else {
		for i := len(b) - 1; i >= 0; i-- {
			it.Value = it.Value<<8 | uint64(b[i])
		}
	}
	return it, nil
}
