package ivfflat_test

import (
	"io"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (serialtest.Fuzz): never a panic or a hang; a searchable index, or
// safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	res := serialtest.Resources(f)
	data := serialtest.Data(f, res)
	p, err := ivfflat.DefaultIndexParams()
	if err != nil {
		f.Fatal(err)
	}
	p.NLists = 4
	idx, err := ivfflat.Build(res, data, &p)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { idx.Close() })
	valid := serialtest.Stream(f, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
	serialtest.Fuzz(f, "ivfflat.DeserializeFrom", valid, func(r io.Reader, o ...safe.DeserializeOption) (*ivfflat.Index, error) {
		return ivfflat.DeserializeFrom(res, r, o...)
	}, func(idx *ivfflat.Index) error {
		q := serialtest.Query(idx.DType(), idx.Dim(), idx.Rows())
		if q == nil {
			return nil
		}
		_, err := ivfflat.SearchSlice(res, idx, nil, q, 1, nil)
		return err
	})
}
