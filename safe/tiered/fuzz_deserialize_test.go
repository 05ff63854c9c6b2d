package tiered_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (serialtest.Fuzz), with rows deleted (the stream's id list), and the
// same without deletions: never a panic or a hang; a searchable index, or
// safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	res := serialtest.Resources(f)
	idx, err := tiered.Build(res, serialtest.Data(f, res), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { idx.Close() })
	plain := serialtest.Stream(f, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
	f.Add(plain)
	// the same without its checksum trailer (as written before it), and in
	// version 1: the magic's last byte 1, no ids-given field
	plain = unsealed(f, plain)
	f.Add(plain)
	const magicLen = 16
	hdr := len(plain) - magicLen - 8 - idx.Rows()*idx.Dim()*4
	v1 := append(bytes.Clone(plain[:magicLen+hdr]), plain[magicLen+hdr+8:]...)
	v1[magicLen-1] = 1
	f.Add(v1)
	if _, err := idx.Delete([]int64{0, int64(idx.Rows() / 2)}); err != nil {
		f.Fatal(err)
	}
	valid := serialtest.Stream(f, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
	serialtest.Fuzz(f, "tiered.DeserializeFrom", valid, func(r io.Reader, o ...safe.DeserializeOption) (*tiered.Index, error) {
		return tiered.DeserializeFrom(res, r, o...)
	}, func(idx *tiered.Index) error {
		q := serialtest.Query(idx.DType(), idx.Dim(), idx.Rows())
		if q == nil {
			return nil
		}
		_, err := tiered.SearchSlice(res, idx, nil, q, 1, nil)
		return err
	})
}
