package ivfsq

import (
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
)

// EstimateMemory estimates the device memory of a Build with p (nil: cuVS's
// defaults) over s.Rows × s.Dim vectors of s.DType (float32 or float16), of
// the built index, and of a search of s.Batch queries for s.K neighbours
// with sp (nil: defaults). cuVS's IVF-SQ build reads host rows itself, in
// batches (Dataset is 0). Build refuses, before calling cuVS, a build whose
// BuildPeak exceeds what the device can still give (safe.MemoryError).
//
// From cuVS's sources (the same in v26.06.00 and v26.08.01):
// cpp/src/neighbors/ivf_sq_index.cpp (centers [n_lists, dim] float32, the
// quantizer's vmin and delta [dim], list sizes and pointers, center norms
// for the L2 and cosine metrics once rows are added),
// cpp/include/cuvs/neighbors/ivf_sq.hpp (lists of one uint8 code a
// dimension and an int64 id a row, capacities as ivf_list.cuh) and
// cpp/src/neighbors/ivf_sq/ivf_sq_build.cuh (training: n_lists ×
// MaxTrainPointsPerCluster rows at most, of the element type, their labels
// and the quantizer's vmax; extend: a label per row, batches of at most
// 65536 host rows, then the lists). The search estimate is IVF-Flat's
// workspace shape (ivf_sq_search.cuh follows ivf_flat_search.cuh's
// coarse search and per-probe top-k), a rough figure.
//
// Left out: balanced k-means' own scratch, the predict step's distance
// tiles, uneven lists (sized as if balanced).
func EstimateMemory(s safe.MemoryShape, p *IndexParams, sp *SearchParams) (safe.MemoryEstimate, error) {
	const op = "ivfsq.EstimateMemory"
	if err := s.Check(op); err != nil {
		return safe.MemoryEstimate{}, err
	}
	pd, err := kit.Or(p, DefaultIndexParams)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	esz := memest.ElemSize(s.DType)
	if esz != 4 && esz != 2 {
		return safe.MemoryEstimate{}, kit.Argf(op, "shape.DType", "%s: IVF-SQ takes float32 or float16", s.DType)
	}
	rows, dim, nl := int64(s.Rows), int64(s.Dim), int64(pd.NLists)
	if nl < 1 || nl > rows {
		return safe.MemoryEstimate{}, kit.Argf(op, "params.NLists", "%d lists for %d rows", nl, rows)
	}
	fixed := memest.Sum(nl*4, nl*dim*4, dim*4, dim*4, nl*8, nl*8)
	nt := min(rows, nl*int64(pd.MaxTrainPointsPerCluster))
	train := memest.Sum(nt*dim*esz, nt*4, dim*4)
	var lists, extend int64
	if pd.AddDataOnBuild {
		lists = memest.Lists(rows, nl, dim, pd.ConservativeMemoryAllocation, false)
		switch pd.Metric {
		case safe.L2Expanded, safe.L2SqrtExpanded, safe.L2Unexpanded, safe.L2SqrtUnexpanded, safe.CosineExpanded:
			lists += memest.Round(nl * 4) // center norms
		}
		extend = memest.Sum(rows*4, nl*4)
		if s.HostDataset {
			extend += memest.Round(min(rows, 65536) * dim * esz)
		}
	}
	e := safe.MemoryEstimate{Index: fixed + lists, BuildPeak: fixed + max(train, lists+extend)}
	if s.Batch > 0 {
		sd, err := kit.Or(sp, DefaultSearchParams)
		if err != nil {
			return safe.MemoryEstimate{}, err
		}
		probes := min(int64(sd.NProbes), nl)
		perQuery := 4*(2*probes+nl+dim+1) + 12*probes*int64(s.K) + 4*int64(s.K)
		q := min(int64(s.Batch), max((int64(1)<<30)/perQuery, 1))
		e.Search = q * perQuery
	}
	return e, nil
}
