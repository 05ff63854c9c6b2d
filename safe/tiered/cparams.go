package tiered

/*
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/release"
)

// cParams are the C parameters of one Build or Merge: the tiered struct
// and the backend's (each made by its cuVS ...Create, so that its other
// fields hold cuVS's defaults), for the loaded release's layout.
type cParams struct {
	p06  generated.CuvsTieredIndexParams_t
	p08  generated.CuvsTieredIndexParams_t_v2608
	cg06 generated.CuvsCagraIndexParams_t
	cg08 generated.CuvsCagraIndexParams_t_v2608
	fl   generated.CuvsIvfFlatIndexParams_t
	pq   generated.CuvsIvfPqIndexParams_t
}

func newCParams(op string, p *IndexParams) (*cParams, error) {
	c := &cParams{}
	fail := func(err error) (*cParams, error) {
		c.free()
		return nil, kit.Wrap(op, err)
	}
	m := kit.CMetric(p.Metric)
	if release.Has(release.TieredParams2608) {
		if err := generated.CuvsTieredIndexParamsCreate_v2608(&c.p08); err != nil {
			return fail(err)
		}
		c.p08.Ref().Metric, c.p08.Ref().Algo = m, generated.CuvsTieredIndexANNAlgo(p.Backend)
		c.p08.Ref().MinAnnRows, c.p08.Ref().CreateAnnIndexOnExtend = p.MinANNRows, p.CreateANNIndexOnExtend
	} else {
		if err := generated.CuvsTieredIndexParamsCreate(&c.p06); err != nil {
			return fail(err)
		}
		c.p06.Ref().Metric, c.p06.Ref().Algo = m, generated.CuvsTieredIndexANNAlgo(p.Backend)
		c.p06.Ref().MinAnnRows, c.p06.Ref().CreateAnnIndexOnExtend = p.MinANNRows, p.CreateANNIndexOnExtend
	}
	switch p.Backend {
	case CAGRA:
		deg, inter := p.CAGRA.GraphDegree, p.CAGRA.IntermediateGraphDegree
		if release.Has(release.TieredParams2608) {
			if err := generated.CuvsCagraIndexParamsCreate_v2608(&c.cg08); err != nil {
				return fail(err)
			}
			c.cg08.Ref().Metric = m
			if deg != 0 {
				c.cg08.Ref().GraphDegree = deg
			}
			if inter != 0 {
				c.cg08.Ref().IntermediateGraphDegree = inter
			}
			c.p08.Ref().CagraParams = c.cg08
		} else {
			if err := generated.CuvsCagraIndexParamsCreate(&c.cg06); err != nil {
				return fail(err)
			}
			c.cg06.Ref().Metric = m
			if deg != 0 {
				c.cg06.Ref().GraphDegree = deg
			}
			if inter != 0 {
				c.cg06.Ref().IntermediateGraphDegree = inter
			}
			c.p06.Ref().CagraParams = c.cg06
		}
	case IVFFlat:
		if err := generated.CuvsIvfFlatIndexParamsCreate(&c.fl); err != nil {
			return fail(err)
		}
		c.fl.Ref().Metric = m
		if p.IVFFlat.NLists != 0 {
			c.fl.Ref().NLists = p.IVFFlat.NLists
		}
		if p.IVFFlat.KMeansNIters != 0 {
			c.fl.Ref().KmeansNIters = p.IVFFlat.KMeansNIters
		}
		c.fl.Ref().AdaptiveCenters = p.IVFFlat.AdaptiveCenters
		if c.p06 != 0 {
			c.p06.Ref().IvfFlatParams = c.fl
		}
		if c.p08 != 0 {
			c.p08.Ref().IvfFlatParams = c.fl
		}
	case IVFPQ:
		if err := generated.CuvsIvfPqIndexParamsCreate(&c.pq); err != nil {
			return fail(err)
		}
		c.pq.Ref().Metric = m
		if p.IVFPQ.NLists != 0 {
			c.pq.Ref().NLists = p.IVFPQ.NLists
		}
		if p.IVFPQ.KMeansNIters != 0 {
			c.pq.Ref().KmeansNIters = p.IVFPQ.KMeansNIters
		}
		if p.IVFPQ.PQBits != 0 {
			c.pq.Ref().PqBits = p.IVFPQ.PQBits
		}
		if p.IVFPQ.PQDim != 0 {
			c.pq.Ref().PqDim = p.IVFPQ.PQDim
		}
		if c.p06 != 0 {
			c.p06.Ref().IvfPqParams = c.pq
		}
		if c.p08 != 0 {
			c.p08.Ref().IvfPqParams = c.pq
		}
	}
	return c, nil
}

func (c *cParams) free() {
	if c.cg06 != 0 {
		_ = generated.CuvsCagraIndexParamsDestroy(c.cg06)
	}
	if c.cg08 != 0 {
		_ = generated.CuvsCagraIndexParamsDestroy_v2608(c.cg08)
	}
	if c.fl != 0 {
		_ = generated.CuvsIvfFlatIndexParamsDestroy(c.fl)
	}
	if c.pq != 0 {
		_ = generated.CuvsIvfPqIndexParamsDestroy(c.pq)
	}
	if c.p06 != 0 {
		_ = generated.CuvsTieredIndexParamsDestroy(c.p06)
	}
	if c.p08 != 0 {
		_ = generated.CuvsTieredIndexParamsDestroy_v2608(c.p08)
	}
}

// cAlloc allocates n zeroed bytes of C memory (freed with cFree).
func cAlloc(n uintptr) unsafe.Pointer { return C.calloc(1, C.size_t(n)) }

func cFree(p unsafe.Pointer) { C.free(p) }
