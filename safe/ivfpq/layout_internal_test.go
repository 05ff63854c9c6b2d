package ivfpq

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// pqFile is laid out as cuVS v26.06.00 writes an IVF-PQ index (see
// pqLayout), with lists of the given sizes; the item ends are returned too.
func pqFile(sizes ...uint64) (b []byte, ends []int) {
	mark := func() { ends = append(ends, len(b)) }
	var total uint64
	for _, s := range sizes {
		total += s
	}
	for _, s := range []struct {
		d string
		v uint64
	}{{"<i4", 4}, {"<i8", total}, {"<u4", 8}, {"<u4", 8}, {"<u4", 4}, {"|b1", 0}, {"<i4", 0}, {"<i4", 0}, {"<i4", 1}, {"<u4", uint64(len(sizes))}} {
		b = npy.AppendScalar(b, s.d, s.v)
		mark()
	}
	for _, shape := range [][]int64{{4, 2, 256}, {int64(len(sizes)), 8}, {int64(len(sizes)), 8}, {8, 8}} {
		n := int64(4)
		for _, x := range shape {
			n *= x
		}
		b = npy.AppendArray(b, "<f4", shape, make([]byte, n))
		mark()
	}
	b = npy.AppendArray(b, "<u4", []int64{int64(len(sizes))}, make([]byte, 4*len(sizes)))
	mark()
	for _, s := range sizes {
		b = npy.AppendScalar(b, "<u4", s)
		mark()
		if s > 0 {
			b = npy.AppendArray(b, "|u1", []int64{int64(s), 4}, make([]byte, 4*s))
			mark()
			b = npy.AppendArray(b, "<i8", []int64{int64(s)}, make([]byte, 8*s))
			mark()
		}
	}
	return b, ends
}

func checkPQ(b []byte) error {
	_, _, err := npy.Walk(bytes.NewReader(b), int64(len(b)), false, new(pqLayout).visit)
	return err
}

// cuVS's IVF-PQ file has no tag: its layout is what tells where the index
// ends, so an index followed by another, or cut between two items, is
// refused.
func TestPQLayout(t *testing.T) {
	b, ends := pqFile(2, 0, 1)
	if err := checkPQ(b); err != nil {
		t.Fatalf("a whole file: %v", err)
	}
	if err := checkPQ(append(bytes.Clone(b), b...)); !errors.Is(err, npy.ErrFormat) {
		t.Errorf("an index twice: %v", err)
	}
	if err := checkPQ(npy.AppendScalar(bytes.Clone(b), "<u4", 0)); !errors.Is(err, npy.ErrFormat) {
		t.Errorf("an item after the last list: %v", err)
	}
	for _, k := range ends[:len(ends)-1] {
		if err := checkPQ(b[:k]); !errors.Is(err, npy.ErrFormat) {
			t.Errorf("cut after the item ending at %d of %d: %v", k, len(b), err)
		}
	}
	v5 := append(npy.AppendScalar(nil, "<i4", 5), b[ends[0]:]...)
	if err := checkPQ(v5); !errors.Is(err, npy.ErrFormat) {
		t.Errorf("format version 5: %v", err)
	}
	if err := checkPQ(pqFileEmpty()); err != nil {
		t.Errorf("an index with empty lists: %v", err)
	}
}

func pqFileEmpty() []byte { b, _ := pqFile(0, 0); return b }

// FuzzPQLayout: the layout check never panics and refuses only with
// npy.ErrFormat.
func FuzzPQLayout(f *testing.F) {
	b, _ := pqFile(2, 0, 1)
	f.Add(b)
	f.Add(pqFileEmpty())
	f.Add(append(bytes.Clone(b), b...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := checkPQ(b); err != nil && !errors.Is(err, npy.ErrFormat) {
			t.Fatalf("an error that is not ErrFormat: %v", err)
		}
	})
}
