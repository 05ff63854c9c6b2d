package tiered_test

import (
	"io"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (serialtest.Fuzz): never a panic or a hang; a searchable index, or
// safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	res := serialtest.Resources(f)
	idx, err := tiered.Build(res, serialtest.Data(f, res), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { idx.Close() })
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
