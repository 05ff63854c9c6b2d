package npy

import (
	"bufio"
	"bytes"
	"errors"
	"testing"
)

// ReadItem reads cuvsLike's items in order, scalars' values in their byte
// order and arrays' data skipped, AtItem telling where items stop; a cut
// item is ErrFormat.
func TestReadItem(t *testing.T) {
	// AppendScalar writes little-endian bytes: 01 02 03 04, which a
	// big-endian descr reads as 0x01020304.
	b := AppendScalar(nil, ">u4", 0x04030201)
	b = append(b, cuvsLike()[4:]...)
	b = append(b, "tail"...)
	f := bytes.NewReader(b)
	r := bufio.NewReaderSize(f, 16) // smaller than the items: SkipIn seeks
	want := []struct {
		descr string
		value uint64
	}{{">u4", 0x01020304}, {"<i4", 4}, {"<i8", 3}, {"<u4", 2}, {"|b1", 1}, {"<f4", 0}, {"<u4", 0}, {"<i8", 0}}
	for i, w := range want {
		if !AtItem(r) {
			t.Fatalf("item %d: AtItem false", i)
		}
		it, err := ReadItem(r, SkipIn(f, r))
		if err != nil || it.Descr != w.descr || it.Value != w.value {
			t.Fatalf("item %d: %+v, %v; want %s = %#x", i, it, err, w.descr, w.value)
		}
	}
	if AtItem(r) {
		t.Fatal("AtItem true at the bytes after the items")
	}
	cut := cuvsLike()[4:]
	for _, seek := range []bool{false, true} {
		f := bytes.NewReader(cut[:len(cut)-3])
		r := bufio.NewReaderSize(f, 16)
		var skip func(int64) error
		if seek {
			skip = SkipIn(f, r)
		}
		var err error
		for err == nil && AtItem(r) {
			_, err = ReadItem(r, skip)
		}
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("cut item (seeking %v): %v", seek, err)
		}
	}
}
