// Package npy reads the small NumPy-format (.npy) scalars that cuVS writes
// at the start of its serialized indexes, so the safe layer can learn an
// index's size and dimension before handing the file to cuVS.
package npy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

const magic = "\x93NUMPY"

// MaxHeader bounds the header length we accept; real ones are ~128 bytes.
const MaxHeader = 4096

// ErrFormat is wrapped by every error about malformed input.
var ErrFormat = errors.New("npy: malformed")

// Scalar is one decoded 0-d array.
type Scalar struct {
	Descr string // NumPy dtype, e.g. "<i8"
	Bits  uint64 // the raw value, zero-extended
	Int   int64  // the value as a signed integer (sign-extended for signed kinds)
}

// ReadScalar reads one .npy 0-d integer or boolean array.
func ReadScalar(r *bufio.Reader) (Scalar, error) {
	var s Scalar
	head := make([]byte, len(magic)+2)
	if _, err := io.ReadFull(r, head); err != nil {
		return s, fmt.Errorf("%w: short magic: %v", ErrFormat, err)
	}
	if string(head[:len(magic)]) != magic {
		return s, fmt.Errorf("%w: bad magic %q", ErrFormat, head[:len(magic)])
	}
	var hlen int
	switch major := head[len(magic)]; major {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return s, fmt.Errorf("%w: short header length", ErrFormat)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return s, fmt.Errorf("%w: short header length", ErrFormat)
		}
		n := binary.LittleEndian.Uint32(b[:])
		if n > MaxHeader {
			return s, fmt.Errorf("%w: header of %d bytes", ErrFormat, n)
		}
		hlen = int(n)
	default:
		return s, fmt.Errorf("%w: version %d", ErrFormat, major)
	}
	if hlen > MaxHeader {
		return s, fmt.Errorf("%w: header of %d bytes", ErrFormat, hlen)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return s, fmt.Errorf("%w: short header", ErrFormat)
	}
	descr, shape, err := parseHeader(string(hdr))
	if err != nil {
		return s, err
	}
	if shape != "" {
		return s, fmt.Errorf("%w: shape (%s), want a scalar", ErrFormat, shape)
	}
	s.Descr = descr
	if len(descr) != 3 {
		return s, fmt.Errorf("%w: dtype %q", ErrFormat, descr)
	}
	order, kind, size := descr[0], descr[1], int(descr[2]-'0')
	if size != 1 && size != 2 && size != 4 && size != 8 {
		return s, fmt.Errorf("%w: dtype %q", ErrFormat, descr)
	}
	if kind != 'i' && kind != 'u' && kind != 'b' {
		return s, fmt.Errorf("%w: dtype %q is not an integer", ErrFormat, descr)
	}
	var le bool
	switch order {
	case '<', '|':
		le = true
	case '>':
	default:
		return s, fmt.Errorf("%w: dtype %q", ErrFormat, descr)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return s, fmt.Errorf("%w: short value", ErrFormat)
	}
	for i := 0; i < size; i++ {
		b := buf[i]
		if le {
			b = buf[size-1-i]
		}
		s.Bits = s.Bits<<8 | uint64(b)
	}
	s.Int = int64(s.Bits)
	if kind == 'i' && size < 8 && s.Bits>>(8*size-1)&1 == 1 {
		s.Int = int64(s.Bits | ^uint64(0)<<(8*size))
	}
	return s, nil
}

// parseHeader extracts 'descr' and the text inside the 'shape' tuple from
// the Python dict literal of a .npy header.
func parseHeader(h string) (descr, shape string, err error) {
	h = strings.TrimSpace(h)
	if !strings.HasPrefix(h, "{") || !strings.HasSuffix(h, "}") {
		return "", "", fmt.Errorf("%w: header is not a dict", ErrFormat)
	}
	d, ok := field(h, "'descr'")
	if !ok {
		return "", "", fmt.Errorf("%w: header has no descr", ErrFormat)
	}
	d = strings.TrimSpace(d)
	if len(d) < 2 || d[0] != '\'' {
		return "", "", fmt.Errorf("%w: descr %q", ErrFormat, d)
	}
	end := strings.IndexByte(d[1:], '\'')
	if end < 0 {
		return "", "", fmt.Errorf("%w: descr %q", ErrFormat, d)
	}
	descr = d[1 : 1+end]
	sh, ok := field(h, "'shape'")
	if !ok {
		return "", "", fmt.Errorf("%w: header has no shape", ErrFormat)
	}
	sh = strings.TrimSpace(sh)
	if !strings.HasPrefix(sh, "(") {
		return "", "", fmt.Errorf("%w: shape %q", ErrFormat, sh)
	}
	close := strings.IndexByte(sh, ')')
	if close < 0 {
		return "", "", fmt.Errorf("%w: shape %q", ErrFormat, sh)
	}
	shape = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(sh[1:close]), ","))
	return descr, shape, nil
}

// field returns the text after "key:" in a dict literal.
func field(h, key string) (string, bool) {
	i := strings.Index(h, key)
	if i < 0 {
		return "", false
	}
	rest := strings.TrimSpace(h[i+len(key):])
	if !strings.HasPrefix(rest, ":") {
		return "", false
	}
	return rest[1:], true
}

// AppendScalar appends v as a .npy 0-d array of dtype descr ("<i4", "<u8",
// "|b1", ...), the way cuVS writes one. It is the inverse of ReadScalar, for
// tests and test doubles.
func AppendScalar(b []byte, descr string, v uint64) []byte {
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (), }", descr)
	// Pad so that magic+version+len+header is a multiple of 64, ending in \n.
	total := len(magic) + 2 + 2 + len(hdr) + 1
	pad := (64 - total%64) % 64
	hdr += strings.Repeat(" ", pad) + "\n"
	b = append(b, magic...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(hdr)))
	b = append(b, hdr...)
	size := int(descr[2] - '0')
	for i := 0; i < size; i++ {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// ReadHeader reads the first n .npy integer scalars of the file at path,
// after a 4-byte dtype tag when tagged (the header cuVS's IVF serializers
// write), as signed integers. An error opening the file is os's
// (*os.PathError); a malformed header wraps ErrFormat and names what.
func ReadHeader(path, what string, tagged bool, n int) ([]int64, error) {
	_, v, err := readHeader(path, what, tagged, n)
	return v, err
}

// ReadTaggedHeader is ReadHeader of a file that starts with a 4-byte dtype
// tag (cuVS's brute-force, CAGRA, IVF-Flat and IVF-SQ files), which it
// also returns, as the bytes of one element of that type (TagBytes).
func ReadTaggedHeader(path, what string, n int) (elem int64, v []int64, err error) {
	tag, v, err := readHeader(path, what, true, n)
	if err != nil {
		return 0, nil, err
	}
	if elem, err = TagBytes(tag); err != nil {
		return 0, nil, fmt.Errorf("not %s: %w", what, err)
	}
	return elem, v, nil
}

func readHeader(path, what string, tagged bool, n int) (tag [4]byte, v []int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return tag, nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	if tagged {
		if _, err := io.ReadFull(r, tag[:]); err != nil {
			return tag, nil, fmt.Errorf("%w: not %s: %v", ErrFormat, what, err)
		}
	}
	v = make([]int64, n)
	for i := range v {
		s, err := ReadScalar(r)
		if err != nil {
			return tag, nil, fmt.Errorf("not %s: header scalar %d: %w", what, i, err)
		}
		v[i] = s.Int
	}
	return tag, v, nil
}

// TagBytes is the bytes of one element of the type a cuVS file's 4-byte
// dtype tag names: the NumPy dtype ("<f4", "<e2", "|i1", "|u1"), NUL
// padded (validate_serialized_dtype compares all four bytes). Any other
// tag is an error wrapping ErrFormat.
func TagBytes(tag [4]byte) (int64, error) {
	n, err := itemSize(string(tag[:3]))
	if err != nil || tag[3] != 0 {
		return 0, fmt.Errorf("%w: type tag %q", ErrFormat, tag[:])
	}
	return int64(n), nil
}
