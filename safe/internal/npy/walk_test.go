package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// cuvsLike is a file laid out as cuVS's serializers write one: a dtype
// tag, scalars, and arrays (one of them empty).
func cuvsLike() []byte {
	b := []byte("<f4\x00")
	b = AppendScalar(b, "<i4", 4)
	b = AppendScalar(b, "<i8", 3)
	b = AppendScalar(b, "<u4", 2)
	b = AppendScalar(b, "|b1", 1)
	data := make([]byte, 3*2*4)
	for i := range data {
		data[i] = byte(i)
	}
	b = AppendArray(b, "<f4", []int64{3, 2}, data)
	b = AppendArray(b, "<u4", []int64{0}, nil)
	b = AppendArray(b, "<i8", []int64{2}, make([]byte, 16))
	return b
}

func walk(b []byte, tagged bool, visit func(int, Item) error) (int, bool, error) {
	return Walk(bytes.NewReader(b), int64(len(b)), tagged, visit)
}

// A whole file passes; cut anywhere but between items, or followed by any
// bytes, it is refused.
func TestWalk(t *testing.T) {
	b := cuvsLike()
	var scalars []uint64
	ends := map[int]bool{}
	n, done, err := walk(b, true, func(i int, it Item) error {
		if it.Scalar {
			scalars = append(scalars, it.Value)
		}
		return nil
	})
	for k := 5; k <= len(b); k++ { // the item boundaries: where a walk of b[:k] ends cleanly
		if _, d, err := walk(b[:k], true, nil); err == nil && d {
			ends[k] = true
		}
	}
	if err != nil || !done || n != 7 || len(scalars) != 4 || scalars[0] != 4 || scalars[1] != 3 || scalars[3] != 1 {
		t.Fatalf("whole file: %d items, done %v, scalars %v, %v", n, done, scalars, err)
	}
	if len(ends) != 7 || !ends[len(b)] {
		t.Errorf("item ends %v, want 7 ending at %d", ends, len(b))
	}
	for k := 0; k < len(b); k++ {
		if _, _, err := walk(b[:k], true, nil); !ends[k] && !errors.Is(err, ErrFormat) {
			t.Errorf("cut to %d of %d bytes: %v", k, len(b), err)
		}
	}
	for _, extra := range []string{"\x00", "x", "\x93NUMPY", "<f4\x00"} {
		if _, _, err := walk(append(bytes.Clone(b), extra...), true, nil); !errors.Is(err, ErrFormat) {
			t.Errorf("followed by %q: %v", extra, err)
		}
	}
	// A tag that cuVS would not take: its fourth byte is not NUL, or it
	// is no dtype; and data in Fortran order, which RAFT never writes.
	for _, tag := range []string{"<f4x", "xf4\x00", "<q4\x00"} {
		if _, _, err := walk(append([]byte(tag), b[4:]...), true, nil); !errors.Is(err, ErrFormat) {
			t.Errorf("tag %q: %v", tag, err)
		}
	}
	fortran := bytes.Replace(bytes.Clone(b), []byte("'fortran_order': False"), []byte("'fortran_order': True "), 1)
	if _, _, err := walk(fortran, true, nil); !errors.Is(err, ErrFormat) {
		t.Errorf("Fortran order: %v", err)
	}
	// An array whose header claims more data than the file holds.
	big := AppendArray([]byte("<f4\x00"), "<f4", []int64{1 << 40, 1 << 30}, nil)
	if _, _, err := walk(big, true, nil); !errors.Is(err, ErrFormat) {
		t.Errorf("an array larger than the file: %v", err)
	}
	// The test double's own bodies end the walk, unchecked.
	for _, d := range [][]byte{[]byte("CVDBLCG1..."), []byte("DBLIVFPQ..."), append(AppendScalar([]byte("<f4\x00"), "<i4", 0), "CVDBLBF1"...)} {
		if _, done, err := walk(d, true, nil); err != nil || done {
			t.Errorf("a double's file %q: done %v, %v", d, done, err)
		}
	}
	// The visitor's refusals come back, and it sees the end.
	sentinel := errors.New("refused")
	if _, _, err := walk(b, true, func(i int, _ Item) error {
		if i < 0 {
			return sentinel
		}
		return nil
	}); err != sentinel {
		t.Errorf("the end refused: %v", err)
	}
}

// FuzzWalk: Walk never panics; what it accepts is whole items to the end
// (cutting its last byte is refused).
func FuzzWalk(f *testing.F) {
	f.Add(cuvsLike(), true)
	f.Add(cuvsLike()[4:], false)
	f.Add(AppendScalar(nil, "<u8", 7), false)
	f.Add([]byte("CVDBLIVF"), false)
	f.Add([]byte{}, true)
	long := append([]byte("\x93NUMPY\x02\x00"), binary.LittleEndian.AppendUint32(nil, 50)...)
	f.Add(append(long, "{'descr': '<u1', 'fortran_order': False, 'shape': (3,), }"...), false)
	f.Fuzz(func(t *testing.T, b []byte, tagged bool) {
		n, done, err := walk(b, tagged, func(int, Item) error { return nil })
		if err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("an error that is not ErrFormat: %v", err)
		}
		if err == nil && done && len(b) > 0 {
			if n == 0 {
				t.Fatalf("accepted %d bytes as no items", len(b))
			}
			if _, _, err := walk(b[:len(b)-1], tagged, nil); err == nil && n > 0 {
				t.Fatalf("accepted %q, and also without its last byte", b)
			}
		}
	})
}
