package cagra

/*
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
)

// cIndexParams is IndexParams materialized for one C call. The top-level
// struct is a Go value (it holds only C pointers); what it points to is C
// memory this package allocated and frees in release. cuVS's
// cuvsCagraIndexParamsCreate/Destroy pair is never used here, so its Destroy,
// which frees graph_build_params by the current build_algo, cannot be handed
// an object of another type.
type cIndexParams struct {
	p           generated.CuvsCagraIndexParams
	ivfpq       *generated.CuvsIvfPqParams // C memory
	ace         *generated.CuvsAceParams   // C memory
	compression generated.CuvsCagraCompressionParams_t
}

func cAlloc[T any]() *T {
	var zero T
	return (*T)(C.calloc(1, C.size_t(unsafe.Sizeof(zero))))
}

func (p *IndexParams) validate(op string) error {
	if !p.Metric.Valid() {
		return safe.Argf(op, "params.Metric", "%d is not a metric", p.Metric)
	}
	if p.GraphDegree < 1 {
		return safe.Argf(op, "params.GraphDegree", "%d, want at least 1", p.GraphDegree)
	}
	if p.IntermediateGraphDegree < p.GraphDegree {
		return safe.Argf(op, "params.IntermediateGraphDegree", "%d is below GraphDegree %d", p.IntermediateGraphDegree, p.GraphDegree)
	}
	switch p.BuildAlgo {
	case AutoSelect, IVFPQ, NNDescent, IterativeSearch, ACE:
	default:
		return safe.Argf(op, "params.BuildAlgo", "%d is not a graph build algorithm", p.BuildAlgo)
	}
	if p.NNDescentIterations < 0 {
		return safe.Argf(op, "params.NNDescentIterations", "%d is negative", p.NNDescentIterations)
	}
	if p.ACE != nil {
		for i := 0; i < len(p.ACE.BuildDir); i++ {
			if p.ACE.BuildDir[i] == 0 {
				return safe.Argf(op, "params.ACE.BuildDir", "contains a NUL byte")
			}
		}
		if p.ACE.NPartitions < 0 || p.ACE.EFConstruction < 0 {
			return safe.Argf(op, "params.ACE", "negative size in %+v", *p.ACE)
		}
	}
	return nil
}

// toC materializes p; release must follow, whatever happens.
func (p *IndexParams) toC(op string) (*cIndexParams, error) {
	c := &cIndexParams{}
	c.p = generated.CuvsCagraIndexParams{
		Metric:                  p.Metric.C(),
		IntermediateGraphDegree: uint64(p.IntermediateGraphDegree),
		GraphDegree:             uint64(p.GraphDegree),
		BuildAlgo:               generated.CuvsCagraGraphBuildAlgo(p.BuildAlgo),
		NnDescentNiter:          uint64(p.NNDescentIterations),
	}
	switch {
	case p.BuildAlgo == IVFPQ || (p.BuildAlgo == AutoSelect && p.IVFPQ != nil):
		c.ivfpq = cAlloc[generated.CuvsIvfPqParams]()
		c.ivfpq.RefinementRate = 1
		if g := p.IVFPQ; g != nil {
			c.ivfpq.RefinementRate = g.RefinementRate
			if g.Build != nil {
				if err := generated.CuvsIvfPqIndexParamsCreate(&c.ivfpq.IvfPqBuildParams); err != nil {
					return c, safe.Wrap(op, err)
				}
				b, d := g.Build, c.ivfpq.IvfPqBuildParams
				d.Metric, d.MetricArg, d.AddDataOnBuild = b.Metric.C(), b.MetricArg, b.AddDataOnBuild
				d.NLists, d.KmeansNIters, d.KmeansTrainsetFraction = b.NLists, b.KMeansNIters, b.KMeansTrainsetFraction
				d.PqBits, d.PqDim, d.CodebookKind = b.PQBits, b.PQDim, generated.CuvsIvfPqCodebookGen(b.CodebookKind)
				d.ForceRandomRotation, d.ConservativeMemoryAllocation = b.ForceRandomRotation, b.ConservativeMemoryAllocation
				d.MaxTrainPointsPerPqCode, d.CodesLayout = b.MaxTrainPointsPerPQCode, generated.CuvsIvfPqListLayout(b.CodesLayout)
			}
			if g.Search != nil {
				if err := generated.CuvsIvfPqSearchParamsCreate(&c.ivfpq.IvfPqSearchParams); err != nil {
					return c, safe.Wrap(op, err)
				}
				s, d := g.Search, c.ivfpq.IvfPqSearchParams
				d.NProbes, d.MaxInternalBatchSize, d.PreferredShmemCarveout = s.NProbes, s.MaxInternalBatchSize, s.PreferredShmemCarveout
				d.LutDtype = generated.CudaDataType_t(s.LUTDtype)
				d.InternalDistanceDtype = generated.CudaDataType_t(s.InternalDistanceDtype)
				d.CoarseSearchDtype = generated.CudaDataType_t(s.CoarseSearchDtype)
			}
		}
		c.p.GraphBuildParams = unsafe.Pointer(c.ivfpq)
	case p.BuildAlgo == ACE:
		a := p.ACE
		if a == nil {
			a = &ACEParams{}
		}
		c.ace = cAlloc[generated.CuvsAceParams]()
		c.ace.Npartitions, c.ace.EfConstruction = uint64(a.NPartitions), uint64(a.EFConstruction)
		c.ace.UseDisk, c.ace.MaxHostMemoryGb, c.ace.MaxGpuMemoryGb = a.UseDisk, a.MaxHostMemoryGB, a.MaxGPUMemoryGB
		cs := C.CString(a.BuildDir) // malloc'd, as cuVS expects
		c.ace.BuildDir = (*byte)(unsafe.Pointer(cs))
		c.p.GraphBuildParams = unsafe.Pointer(c.ace)
	}
	if cp := p.Compression; cp != nil {
		if err := generated.CuvsCagraCompressionParamsCreate(&c.compression); err != nil {
			return c, safe.Wrap(op, err)
		}
		d := c.compression
		d.PqBits, d.PqDim, d.VqNCenters, d.KmeansNIters = cp.PQBits, cp.PQDim, cp.VQNCenters, cp.KMeansNIters
		d.VqKmeansTrainsetFraction, d.PqKmeansTrainsetFraction = cp.VQKMeansTrainsetFraction, cp.PQKMeansTrainsetFraction
		c.p.Compression = c.compression
	}
	return c, nil
}

// release frees what toC allocated.
func (c *cIndexParams) release() {
	if c.ivfpq != nil {
		if c.ivfpq.IvfPqBuildParams != nil {
			_ = generated.CuvsIvfPqIndexParamsDestroy(c.ivfpq.IvfPqBuildParams)
		}
		if c.ivfpq.IvfPqSearchParams != nil {
			_ = generated.CuvsIvfPqSearchParamsDestroy(c.ivfpq.IvfPqSearchParams)
		}
		C.free(unsafe.Pointer(c.ivfpq))
	}
	if c.ace != nil {
		C.free(unsafe.Pointer(c.ace.BuildDir))
		C.free(unsafe.Pointer(c.ace))
	}
	if c.compression != nil {
		_ = generated.CuvsCagraCompressionParamsDestroy(c.compression)
	}
	*c = cIndexParams{}
}

func aceFromC(a *generated.CuvsAceParams) *ACEParams {
	out := &ACEParams{
		NPartitions: int(a.Npartitions), EFConstruction: int(a.EfConstruction), UseDisk: a.UseDisk,
		MaxHostMemoryGB: a.MaxHostMemoryGb, MaxGPUMemoryGB: a.MaxGpuMemoryGb,
	}
	if a.BuildDir != nil {
		out.BuildDir = C.GoString((*C.char)(unsafe.Pointer(a.BuildDir)))
	}
	return out
}

// cDLManaged allocates a zeroed DLManagedTensor in C memory, for functions
// that fill one in (the dataset and graph getters).
func cDLManaged() *generated.DLManagedTensor { return cAlloc[generated.DLManagedTensor]() }

func cFree(p unsafe.Pointer) { C.free(p) }
