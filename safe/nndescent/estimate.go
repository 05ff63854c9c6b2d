package nndescent

import (
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
)

// EstimateMemory estimates the device memory of a Build with p (nil: cuVS's
// defaults) over s.Rows × s.Dim vectors of s.DType, and of the built index
// (NN-Descent has no search: s.Batch is ignored). Build refuses, before
// calling cuVS, a build whose BuildPeak exceeds what the device can still
// give (safe.MemoryError).
//
// The build's device memory is GNND's working set, as cuVS counts it in
// cpp/src/neighbors/nn_descent.cu (build_mem_usage, v26.08.01; the same
// buffers in v26.06.00's cpp/src/neighbors/detail/nn_descent.cuh, GNND):
// an fp16 copy of the rows, a float norm a row, 32-wide (DEGREE_ON_DEVICE)
// id and distance lists, a lock and two list sizes a row; plus the
// distances, which the index keeps on the device with p.ReturnDistances
// (cpp/include/cuvs/neighbors/nn_descent.hpp: the graph itself is host
// memory). A complete graph (GraphDegree = rows - 1, no distances) is
// written without NN-Descent: no device memory.
//
// Left out: the 26.08 build's direct use of device rows in place of the
// fp16 copy (counted anyway, as cuVS's own estimate does), and cuBLAS or
// kernel workspaces.
func EstimateMemory(s safe.MemoryShape, p *IndexParams) (safe.MemoryEstimate, error) {
	const op = "nndescent.EstimateMemory"
	if err := s.Check(op); err != nil {
		return safe.MemoryEstimate{}, err
	}
	pd, err := kit.Or(p, DefaultIndexParams)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	if memest.ElemSize(s.DType) == 0 {
		return safe.MemoryEstimate{}, kit.Argf(op, "shape.DType", "%s: NN-Descent takes float32, float16, int8 or uint8", s.DType)
	}
	rows, dim := int64(s.Rows), int64(s.Dim)
	deg := int64(min(pd.GraphDegree, pd.IntermediateGraphDegree))
	var e safe.MemoryEstimate
	if pd.ReturnDistances {
		e.Index = memest.Round(rows * deg * 4)
	}
	if rows-1 == deg && !pd.ReturnDistances {
		return e, nil // complete: no GNND
	}
	e.BuildPeak = memest.Sum(rows*dim*2, rows*4, rows*32*4, rows*32*4, rows*4, 2*rows*8) + e.Index
	return e, nil
}
