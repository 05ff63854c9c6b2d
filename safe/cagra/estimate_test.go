package cagra_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// cgMemCase builds rows × d random vectors of T with p, from device memory
// the index may reference (kept until Close) or from a Go slice.
func cgMemCase[T float32 | int8](t *testing.T, name string, rows, d int, p cagra.IndexParams, host bool) safetest.MemoryCase {
	t.Helper()
	f := safetest.Random(13, rows, d)
	data := make([]T, len(f))
	for i, v := range f {
		data[i] = T(v * 100)
	}
	est, err := cagra.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.DataTypeOf[T](), HostDataset: host}, &p, nil)
	if err != nil {
		t.Fatal(err)
	}
	own := int64(0)
	if !host {
		own = (int64(len(data))*int64(dlpack.DataTypeOf[T]().ElemSize()) + 255) / 256 * 256
	}
	return safetest.MemoryCase{Name: name, Estimate: est, CFunc: "cuvsCagraBuild", Tol: 0.02, Own: own, OwnKept: !host,
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			if host {
				hm, err := dlpack.NewHostMatrix(data, rows, d)
				if err != nil {
					return nil, err
				}
				return cagra.Build(res, hm, &p)
			}
			dm, err := safe.DeviceMatrixFrom(res, data, rows, d)
			if err != nil {
				return nil, err
			}
			idx, err := cagra.Build(res, dm, &p)
			if err != nil {
				dm.Close()
				return nil, err
			}
			return closeAfter{idx, dm}, nil
		}}
}

// closeAfter closes an index, then the rows it may reference.
type closeAfter struct {
	idx  *cagra.Index
	rows interface{ Close() error }
}

func (c closeAfter) Close() error {
	if err := c.idx.Close(); err != nil {
		return err
	}
	return c.rows.Close()
}

func cgParams(t *testing.T, algo cagra.GraphBuildAlgo) cagra.IndexParams {
	t.Helper()
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.BuildAlgo = algo
	p.GraphDegree, p.IntermediateGraphDegree = 16, 32
	return p
}

func TestEstimateMemoryAgainstDouble(t *testing.T) {
	ivf := cgParams(t, cagra.IVFPQ)
	refine := ivf
	refine.IVFPQ = &cagra.IVFPQGraphParams{RefinementRate: 2}
	nnd := cgParams(t, cagra.NNDescent)
	for _, c := range []safetest.MemoryCase{
		cgMemCase[float32](t, "IVF-PQ, padded device rows", 3000, 32, ivf, false),
		cgMemCase[float32](t, "IVF-PQ, refined, host rows", 3000, 32, refine, true),
		cgMemCase[int8](t, "IVF-PQ, unpadded int8 rows", 3000, 20, ivf, false),
		cgMemCase[float32](t, "NN-Descent, host rows", 3000, 24, nnd, true),
	} {
		t.Run(c.Name, func(t *testing.T) { safetest.CheckMemoryEstimate(t, c) })
	}
}

func TestBuildRefusedOverMemoryLimit(t *testing.T) {
	safetest.CheckMemoryLimit(t, cgMemCase[float32](t, "IVF-PQ", 1000, 32, cgParams(t, cagra.IVFPQ), false))
}

func TestBuildRefusedOverPoolCap(t *testing.T) {
	// 3000 rows × 24 float32 from host memory: a kNN graph phase of some
	// MB (GNND's lists), in a pool of at most 512 KiB.
	safetest.CheckPoolCap(t, cgMemCase[float32](t, "NN-Descent", 3000, 24, cgParams(t, cagra.NNDescent), true), 1<<20, 50)
}

func TestEstimateMemoryNotEstimated(t *testing.T) {
	s := safe.MemoryShape{Rows: 1000, Dim: 16, DType: dlpack.Float32}
	for _, algo := range []cagra.GraphBuildAlgo{cagra.ACE, cagra.IterativeSearch} {
		p := cgParams(t, algo)
		if _, err := cagra.EstimateMemory(s, &p, nil); !errors.Is(err, cagra.ErrNotEstimated) {
			t.Errorf("%v: %v, want ErrNotEstimated", algo, err)
		}
	}
	p := cgParams(t, cagra.IVFPQ)
	e, err := cagra.EstimateMemory(safe.MemoryShape{Rows: 1_000_000, Dim: 128, DType: dlpack.Float32, Batch: 100, K: 10}, &p, nil)
	if err != nil {
		t.Fatal(err)
	}
	// a 16-wide uint32 graph; 128 float32 are 512 bytes a row, referenced
	if e.Index != 64_000_000 || e.BuildPeak < e.Index || e.Search <= 0 {
		t.Errorf("estimate %+v", e)
	}
}
