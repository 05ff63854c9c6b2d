package cagra_test

import (
	"io"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
)

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (serialtest.Fuzz): never a panic or a hang; a searchable index, or
// safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	res := serialtest.Resources(f)
	data := serialtest.Data(f, res)
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		f.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = 16, 32
	idx, err := cagra.Build(res, data, &p)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { idx.Close() })
	valid := serialtest.Stream(f, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w, true) })
	serialtest.Fuzz(f, "cagra.DeserializeFrom", valid, func(r io.Reader, o ...safe.DeserializeOption) (*cagra.Index, error) {
		return cagra.DeserializeFrom(res, r, o...)
	}, func(idx *cagra.Index) error {
		q := serialtest.Query(idx.DType(), idx.Dim(), idx.Rows())
		if q == nil {
			return nil
		}
		_, err := cagra.SearchSlice(res, idx, nil, q, 1, nil)
		return err
	})
}
