package npy

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func read(b []byte) (Scalar, error) { return ReadScalar(bufio.NewReader(bytes.NewReader(b))) }

func TestRoundTrip(t *testing.T) {
	for _, c := range []struct {
		descr string
		v     uint64
		want  int64
	}{
		{"<i4", 3, 3}, {"<i4", 0xFFFFFFFF, -1}, {"<i8", 1 << 40, 1 << 40}, {"<u8", 100000, 100000},
		{"<u4", 128, 128}, {"|b1", 1, 1}, {"<i2", 0x8000, -32768}, {"|u1", 255, 255},
	} {
		s, err := read(AppendScalar(nil, c.descr, c.v))
		if err != nil {
			t.Fatalf("%s %d: %v", c.descr, c.v, err)
		}
		if s.Int != c.want || s.Descr != c.descr {
			t.Errorf("%s %d: got %+v, want %d", c.descr, c.v, s, c.want)
		}
	}
}

func TestSequence(t *testing.T) {
	b := AppendScalar(nil, "<i4", 1)
	b = AppendScalar(b, "<i8", 1000)
	b = AppendScalar(b, "<u4", 128)
	r := bufio.NewReader(bytes.NewReader(b))
	for _, want := range []int64{1, 1000, 128} {
		s, err := ReadScalar(r)
		if err != nil || s.Int != want {
			t.Fatalf("got %+v, %v; want %d", s, err, want)
		}
	}
}

func TestMalformed(t *testing.T) {
	good := AppendScalar(nil, "<i8", 7)
	for name, b := range map[string][]byte{
		"empty":       nil,
		"bad magic":   append([]byte("\x93NUMPX"), good[6:]...),
		"version 9":   append(append([]byte{}, good[:6]...), append([]byte{9}, good[7:]...)...),
		"short":       good[:20],
		"no value":    good[:len(good)-1],
		"float":       AppendScalar(nil, "<f8", 0),
		"array":       bytes.Replace(good, []byte("'shape': ()"), []byte("'shape': (3,)"), 1),
		"not a dict":  bytes.Replace(good, []byte("{'descr'"), []byte("['descr'"), 1),
		"no descr":    bytes.Replace(good, []byte("'descr'"), []byte("'dtype'"), 1),
		"bad size":    bytes.Replace(good, []byte("<i8"), []byte("<i3"), 1),
		"huge header": append(append([]byte{}, good[:6]...), 2, 0, 0xff, 0xff, 0xff, 0x7f),
	} {
		if _, err := read(b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: got %v, want ErrFormat", name, err)
		}
	}
}

func FuzzReadScalar(f *testing.F) {
	f.Add(AppendScalar(nil, "<i4", 1))
	f.Add(AppendScalar(nil, "<u8", 1<<50))
	f.Add(AppendScalar(nil, "|b1", 1))
	f.Add([]byte("\x93NUMPY\x01\x00\x10\x00{'descr': '<i4'}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := read(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		// Whatever parsed must re-encode to a scalar with the same value.
		again, err := read(AppendScalar(nil, s.Descr, s.Bits))
		if err != nil || again.Int != s.Int {
			t.Fatalf("%+v re-read as %+v, %v", s, again, err)
		}
	})
}

// ReadTaggedHeader returns the element size of a cuVS file's dtype tag
// with its scalars, and refuses a tag that is not a NUL-padded NumPy dtype.
func TestReadTaggedHeader(t *testing.T) {
	for _, c := range []struct {
		tag  string
		elem int64
		ok   bool
	}{{"<f4\x00", 4, true}, {"<e2\x00", 2, true}, {"|i1\x00", 1, true}, {"|u1\x00", 1, true}, {"<f4 ", 0, false}, {"xyz\x00", 0, false}} {
		b := AppendScalar([]byte(c.tag), "<i8", 42)
		path := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		elem, v, err := ReadTaggedHeader(path, "a test file", 1)
		if c.ok && (err != nil || elem != c.elem || len(v) != 1 || v[0] != 42) {
			t.Errorf("tag %q: %d, %v, %v; want %d, [42]", c.tag, elem, v, err, c.elem)
		}
		if !c.ok && !errors.Is(err, ErrFormat) {
			t.Errorf("tag %q: %v, want ErrFormat", c.tag, err)
		}
	}
}
