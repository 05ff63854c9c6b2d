package ivfsq

import (
	"github.com/cuvs-go/cuvs/dlpack"
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
// An Extend is estimated by Index.EstimateExtend, and checked by Extend.
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
	fixed := fixedBytes(nl, dim)
	nt := min(rows, nl*int64(pd.MaxTrainPointsPerCluster))
	train := memest.Sum(nt*dim*esz, nt*4, dim*4)
	var lists, extend int64
	if pd.AddDataOnBuild {
		lists = listsBytes(rows, nl, dim, pd.Metric, pd.ConservativeMemoryAllocation)
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

// fixedBytes is what an index of nLists lists holds whatever its rows
// (ivf_sq_index.cpp): the list sizes, the centers, the quantizer's vmin
// and delta, the data and index pointers.
func fixedBytes(nLists, dim int64) int64 {
	return memest.Sum(nLists*4, nLists*dim*4, dim*4, dim*4, nLists*8, nLists*8)
}

// listsBytes is the lists of rows rows (one uint8 code a dimension and an
// int64 id a row, balanced, at capacity) and, once there are rows, the
// center norms of the L2 and cosine metrics.
func listsBytes(rows, nLists, dim int64, m safe.Metric, conservative bool) int64 {
	if rows == 0 {
		return 0
	}
	b := memest.Lists(rows, nLists, dim, conservative, false)
	switch m {
	case safe.L2Expanded, safe.L2SqrtExpanded, safe.L2Unexpanded, safe.L2SqrtUnexpanded, safe.CosineExpanded:
		b += memest.Round(nLists * 4)
	}
	return b
}

// held is the device memory of idx as it is now: what EstimateMemory's
// Index counts for its rows (a deserialized index's lists are allocated
// at the same capacities, ivf_list.cuh deserialize_list).
func (idx *Index) held() int64 {
	nl, dim := idx.ivf.NLists, idx.c.Dim
	return fixedBytes(nl, dim) + listsBytes(idx.c.Rows.Load(), nl, dim, idx.metric, idx.cma)
}

// EstimateExtend estimates the device memory of an Extend of s.Rows rows
// of s.DType (float32 when zero) from host memory when s.HostDataset
// (s.Dim 0 or the index's) now: what it takes beyond what the index
// holds (BuildPeak, which Extend checks before calling cuVS), the device
// ids Extend makes when given none for a non-empty index (Dataset), and
// the index it leaves (Index, which safe.DeviceMemory.InUse counts after
// it).
//
// cuVS extends the index in place (cpp/src/neighbors/ivf_sq/
// ivf_sq_build.cuh, extend_inplace, v26.06.00 and v26.08.01): a uint32
// label per new row, batches of at most 65536 host rows, the old list
// sizes, and each list that outgrows its capacity allocated anew and
// filled before the old one is freed (ivf_list.cuh resize_list): the
// lists' growth plus one old list; the center norms on the first rows.
// With balanced lists either every list grows out of its capacity or none
// does.
//
// Left out: k-means predict's distance tiles (bounded by RAFT's
// workspace), and uneven lists: a list that outgrows its capacity while
// the average does not is not counted.
func (idx *Index) EstimateExtend(s safe.MemoryShape) (safe.MemoryEstimate, error) {
	op := "ivfsq.Index.EstimateExtend"
	c, err := kind.Of(idx, op)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	if s.DType == (dlpack.DataType{}) {
		s.DType = dlpack.Float32 // IVF-SQ takes either type whatever it was built with
	}
	if err := kit.ExtendShape(op, &s, c.Dim, dlpack.DataType{}); err != nil {
		return safe.MemoryEstimate{}, err
	}
	esz := memest.ElemSize(s.DType)
	if esz != 4 && esz != 2 {
		return safe.MemoryEstimate{}, kit.Argf(op, "shape.DType", "%s: IVF-SQ takes float32 or float16", s.DType)
	}
	return idx.extendEstimate(int64(s.Rows), esz, s.HostDataset, !s.HostDataset), nil
}

// extendEstimate is EstimateExtend's estimate of n rows of esz bytes an
// element, from host memory when host, with device ids made by Extend
// when madeIDs (and the index is not empty).
func (idx *Index) extendEstimate(n, esz int64, host, madeIDs bool) safe.MemoryEstimate {
	nl, dim, rows := idx.ivf.NLists, idx.c.Dim, idx.c.Rows.Load()
	before := listsBytes(rows, nl, dim, idx.metric, idx.cma)
	after := listsBytes(rows+n, nl, dim, idx.metric, idx.cma)
	peak := memest.Sum(n*4, nl*4)
	if host {
		peak += memest.Round(min(n, 65536) * dim * esz)
	}
	if after != before {
		peak += after - before + memest.Lists(rows, nl, dim, idx.cma, false)/nl
	}
	e := safe.MemoryEstimate{BuildPeak: peak, Index: fixedBytes(nl, dim) + after}
	if madeIDs && rows > 0 {
		e.Dataset = memest.Round(n * 8)
	}
	return e
}
