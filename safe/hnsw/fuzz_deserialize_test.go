package hnsw_test

import (
	"io"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
)

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (serialtest.Fuzz): never a panic or a hang; a searchable index, or
// safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	res := serialtest.Resources(f)
	cp, err := cagra.DefaultIndexParams()
	if err != nil {
		f.Fatal(err)
	}
	cp.GraphDegree, cp.IntermediateGraphDegree = 16, 32
	c, err := cagra.Build(res, serialtest.Data(f, res), &cp)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	p, err := hnsw.DefaultIndexParams()
	if err != nil {
		f.Fatal(err)
	}
	p.Hierarchy = hnsw.HierarchyCPU
	idx, err := hnsw.FromCagra(res, c, &p)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { idx.Close() })
	valid := serialtest.Stream(f, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
	serialtest.Fuzz(f, "hnsw.DeserializeFrom", valid, func(r io.Reader, o ...safe.DeserializeOption) (*hnsw.Index, error) {
		return hnsw.DeserializeFrom(res, r, dlpack.Float32, safe.L2Expanded, &p, o...)
	}, func(idx *hnsw.Index) error {
		q := serialtest.Query(idx.DType(), idx.Dim(), idx.Rows())
		if q == nil {
			return nil
		}
		qm, err := dlpack.NewHostMatrix(q, 1, len(q))
		if err != nil {
			return err
		}
		nb, err := dlpack.NewHostMatrix(make([]int64, 1), 1, 1)
		if err != nil {
			return err
		}
		ds, err := dlpack.NewHostMatrix(make([]float32, 1), 1, 1)
		if err != nil {
			return err
		}
		return idx.Search(res, nil, qm, nb, ds)
	})
}
