package multigpu_test

import (
	"io"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// fuzzRes returns multi-GPU resources on device 0 for a fuzzer, or skips
// on a library without multi-GPU.
func fuzzRes(f *testing.F) *multigpu.Resources {
	needMG(f)
	res, err := multigpu.NewResources(multigpu.WithDevices(0))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { res.Close() })
	return res
}

// fuzzSearch searches a deserialized index with one query of the seed's
// dimension (the index does not know its own after Deserialize): it must
// not panic; an index of another dimension may refuse it.
func fuzzSearch(search func(q dlpack.Tensor) (*safe.Results, error)) error {
	q, err := dlpack.NewHostMatrix(safetest.Random(1, 1, serialtest.Dim), 1, serialtest.Dim)
	if err != nil {
		return err
	}
	_, _ = search(q)
	return nil
}

// FuzzDeserializeFrom reads damaged and mutated streams of a small
// multi-GPU IVF-Flat index (serialtest.Fuzz): never a panic or a hang; an
// index, or safe.ErrCorruptIndex.
func FuzzDeserializeFrom(f *testing.F) {
	res := fuzzRes(f)
	ip, sp := allProbes(4)
	idx, err := multigpu.BuildIVFFlat(res, host(f, safetest.Random(7, serialtest.Rows, serialtest.Dim), serialtest.Rows), &multigpu.IVFFlatIndexParams{Mode: multigpu.Replicated, Base: ip})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { idx.Close() })
	valid := serialtest.Stream(f, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
	serialtest.Fuzz(f, "multigpu.DeserializeIVFFlatFrom", valid, func(r io.Reader, o ...safe.DeserializeOption) (*multigpu.IVFFlatIndex, error) {
		return multigpu.DeserializeIVFFlatFrom(res, r, o...)
	}, func(idx *multigpu.IVFFlatIndex) error {
		return fuzzSearch(func(q dlpack.Tensor) (*safe.Results, error) {
			return idx.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, q, 1)
		})
	})
}

// FuzzDistributeCagraFrom is FuzzDeserializeFrom for DistributeCagraFrom,
// seeded with a single-GPU CAGRA index.
func FuzzDistributeCagraFrom(f *testing.F) {
	res := fuzzRes(f)
	sres := serialtest.Resources(f)
	cp, err := cagra.DefaultIndexParams()
	if err != nil {
		f.Fatal(err)
	}
	cp.GraphDegree, cp.IntermediateGraphDegree = 16, 32
	single, err := cagra.Build(sres, serialtest.Data(f, sres), &cp)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { single.Close() })
	valid := serialtest.Stream(f, func(w io.Writer) (int64, error) { return single.SerializeTo(sres, w) })
	serialtest.Fuzz(f, "multigpu.DistributeCagraFrom", valid, func(r io.Reader, o ...safe.DeserializeOption) (*multigpu.CagraIndex, error) {
		return multigpu.DistributeCagraFrom(res, r, o...)
	}, func(idx *multigpu.CagraIndex) error {
		return fuzzSearch(func(q dlpack.Tensor) (*safe.Results, error) { return idx.SearchK(res, nil, q, 1) })
	})
}
