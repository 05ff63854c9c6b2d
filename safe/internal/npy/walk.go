package npy

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// doubleMagics start the bodies the ABI test double (internal/cuvsdouble)
// writes in formats of its own (alone, or after a cuVS-like prefix): Walk
// stops there and leaves the rest to the double's reader, which checks it.
var doubleMagics = []string{"CVDBL", "DBLIVFPQ"}

func doubleBody(r *bufio.Reader) bool {
	for _, m := range doubleMagics {
		if peek, _ := r.Peek(len(m)); string(peek) == m {
			return true
		}
	}
	return false
}

// Walk checks that the size bytes of r, from its start (after a 4-byte
// dtype tag when tagged, as cuVS's brute-force, CAGRA, IVF-Flat and IVF-SQ
// files begin), are whole .npy items to the very end, as every cuVS
// serializer writes them (serialize_scalar and serialize_mdspan): each
// item's header well formed, its data (the shape's product times the
// item size) within the file, and no bytes after the last. It reads the
// headers only, seeking past the data. It returns the items seen; an error
// wraps ErrFormat. A file cut between two items passes (Walk knows no
// format's item count; visit may, and cuVS's reader refuses what it
// cannot read). Reaching the test double's magic where an item should start ends
// the walk without error (done false), as does a file that starts with
// one: the test double's own formats.
//
// visit, if not nil, sees each item in turn (its index from 0) and may
// refuse it: a format's own rules on the items' sequence; it is called
// once more, with i = -1, when the file's end is reached after whole
// items (so that it can refuse a sequence cut short). Its error is
// returned as it is.
func Walk(r io.ReadSeeker, size int64, tagged bool, visit func(i int, it Item) error) (items int, done bool, err error) {
	br := bufio.NewReaderSize(r, 512)
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return 0, false, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if doubleBody(br) {
		return 0, false, nil
	}
	off := int64(0)
	if tagged {
		if size < 4 {
			return 0, false, fmt.Errorf("%w: %d bytes, shorter than the type tag", ErrFormat, size)
		}
		off = 4
		var tag [4]byte
		if _, err := io.ReadFull(br, tag[:]); err != nil {
			return 0, false, fmt.Errorf("%w: %v", ErrFormat, err)
		}
		// cuVS compares all four bytes with the NumPy dtype, NUL-padded
		// (validate_serialized_dtype).
		if _, err := itemSize(string(tag[:3])); err != nil || tag[3] != 0 {
			return 0, false, fmt.Errorf("%w: type tag %q", ErrFormat, tag[:])
		}
	}
	if size == 0 {
		return 0, false, fmt.Errorf("%w: empty file", ErrFormat)
	}
	for off < size {
		if doubleBody(br) {
			return items, false, nil
		}
		it, hlen, payload, err := itemHeader(br)
		if err != nil {
			return items, false, fmt.Errorf("%w (item %d, at byte %d%s)", err, items, off, after(items))
		}
		data := hlen
		if payload > size-off-data {
			return items, false, fmt.Errorf("%w: item %d, at byte %d, holds %d bytes of data, the file only %d more (truncated)", ErrFormat, items, off, payload, size-off-data)
		}
		if visit != nil {
			if it.Scalar {
				b := make([]byte, payload)
				if _, err := io.ReadFull(br, b); err != nil {
					return items, false, fmt.Errorf("%w: short value", ErrFormat)
				}
				it.Value = scalarValue(it.Descr, b)
			}
			if err := visit(items, it); err != nil {
				return items, false, err
			}
		}
		off += data + payload
		if _, err := r.Seek(off, io.SeekStart); err != nil {
			return items, false, fmt.Errorf("%w: %v", ErrFormat, err)
		}
		br.Reset(r)
		items++
	}
	if items == 0 {
		return 0, false, fmt.Errorf("%w: no items after the type tag", ErrFormat)
	}
	if visit != nil {
		if err := visit(-1, Item{}); err != nil {
			return items, false, err
		}
	}
	return items, true, nil
}

// scalarValue is a scalar item's raw value, zero-extended, in the byte
// order its descr says ('>' big-endian, else little).
func scalarValue(descr string, b []byte) uint64 {
	var v uint64
	if descr[0] == '>' {
		for _, x := range b {
			v = v<<8 | uint64(x)
		}
		return v
	}
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func after(items int) string {
	if items == 0 {
		return ""
	}
	return "; bytes after the index, or a damaged file"
}

// Item is one .npy item Walk passed.
type Item struct {
	Descr  string // the NumPy dtype, e.g. "<u4"
	Shape  string // the text inside the shape tuple: "" for a scalar
	Scalar bool   // a 0-d item of at most 8 bytes
	Value  uint64 // a scalar's raw value, zero-extended
}

// itemHeader reads one .npy header and returns the item, the header's
// length in bytes (magic to the end of the dict) and the size of the data
// that follows.
func itemHeader(r *bufio.Reader) (it Item, hlen, payload int64, err error) {
	head := make([]byte, len(magic)+2)
	if _, err := io.ReadFull(r, head); err != nil {
		return it, 0, 0, fmt.Errorf("%w: short magic", ErrFormat)
	}
	if string(head[:len(magic)]) != magic {
		return it, 0, 0, fmt.Errorf("%w: bad magic %q", ErrFormat, head[:len(magic)])
	}
	var n int64
	switch major := head[len(magic)]; major {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return it, 0, 0, fmt.Errorf("%w: short header length", ErrFormat)
		}
		n = int64(binary.LittleEndian.Uint16(b[:]))
		hlen = int64(len(head)) + 2 + n
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return it, 0, 0, fmt.Errorf("%w: short header length", ErrFormat)
		}
		n = int64(binary.LittleEndian.Uint32(b[:]))
		hlen = int64(len(head)) + 4 + n
	default:
		return it, 0, 0, fmt.Errorf("%w: version %d", ErrFormat, major)
	}
	if n > MaxHeader {
		return it, 0, 0, fmt.Errorf("%w: header of %d bytes", ErrFormat, n)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return it, 0, 0, fmt.Errorf("%w: short header", ErrFormat)
	}
	descr, shape, err := parseHeader(string(hdr))
	if err != nil {
		return it, 0, 0, err
	}
	// RAFT writes row-major data only, and reads it back as such.
	if fo, ok := field(string(hdr), "'fortran_order'"); !ok || !strings.HasPrefix(strings.TrimSpace(fo), "False") {
		return it, 0, 0, fmt.Errorf("%w: header %q is not of C-ordered data", ErrFormat, hdr)
	}
	item, err := itemSize(descr)
	if err != nil {
		return it, 0, 0, err
	}
	count, err := elements(shape)
	if err != nil {
		return it, 0, 0, err
	}
	hi, lo := bits.Mul64(count, uint64(item))
	if hi != 0 || lo > math.MaxInt64 {
		return it, 0, 0, fmt.Errorf("%w: shape (%s) of %q overflows", ErrFormat, shape, descr)
	}
	it = Item{Descr: descr, Shape: shape, Scalar: shape == "" && lo <= 8}
	return it, hlen, int64(lo), nil
}

// itemSize reads the size from a NumPy dtype string such as "<f4".
func itemSize(descr string) (int, error) {
	if len(descr) < 3 || !strings.ContainsRune("<>|=", rune(descr[0])) || !strings.ContainsRune("biufce", rune(descr[1])) {
		return 0, fmt.Errorf("%w: dtype %q", ErrFormat, descr)
	}
	n, err := strconv.Atoi(descr[2:])
	if err != nil || n < 1 || n > 16 {
		return 0, fmt.Errorf("%w: dtype %q", ErrFormat, descr)
	}
	return n, nil
}

// elements is the product of a shape's extents ("" is a scalar: 1).
func elements(shape string) (uint64, error) {
	count := uint64(1)
	if shape == "" {
		return 1, nil
	}
	for _, f := range strings.Split(shape, ",") {
		f = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "L"))
		x, err := strconv.ParseUint(f, 10, 63)
		if err != nil {
			return 0, fmt.Errorf("%w: shape (%s)", ErrFormat, shape)
		}
		hi, lo := bits.Mul64(count, x)
		if hi != 0 {
			return 0, fmt.Errorf("%w: shape (%s) overflows", ErrFormat, shape)
		}
		count = lo
	}
	return count, nil
}

// AppendArray appends a .npy array of dtype descr with the given shape and
// data (len(data) must be the shape's product times the item size), the
// way RAFT's serialize_mdspan writes one: for tests and test doubles.
func AppendArray(b []byte, descr string, shape []int64, data []byte) []byte {
	parts := make([]string, len(shape))
	for i, x := range shape {
		parts[i] = strconv.FormatInt(x, 10)
	}
	sh := strings.Join(parts, ", ")
	if len(shape) == 1 {
		sh += ","
	}
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, sh)
	total := len(magic) + 2 + 2 + len(hdr) + 1
	pad := (64 - total%64) % 64
	hdr += strings.Repeat(" ", pad) + "\n"
	b = append(b, magic...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(hdr)))
	b = append(b, hdr...)
	return append(b, data...)
}
