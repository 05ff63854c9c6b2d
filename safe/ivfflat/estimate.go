package ivfflat

import (
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
)

// EstimateMemory estimates the device memory of a Build with p (nil: cuVS's
// defaults) over s.Rows × s.Dim vectors of s.DType, of the built index, and
// of a search of s.Batch queries for s.K neighbours with sp (nil:
// defaults). Build refuses, before calling cuVS, a build whose BuildPeak +
// Dataset exceeds what the device can still give (safe.MemoryError).
//
// From cuVS's sources (v26.06.00 and v26.08.01 alike):
// cpp/src/neighbors/ivf_flat/ivf_flat_build.cuh (build: a training set of
// memest.TrainRows rows of the element type; extend: a uint32 label per
// row, then the lists), cpp/src/neighbors/ivf_list.cuh (list capacity),
// cpp/src/neighbors/ivf_flat_index.cpp (centers: n_lists × dim float32,
// center norms for the L2 and cosine metrics, list sizes and two pointer
// arrays) and cpp/src/neighbors/ivf_flat/ivf_flat_search.cuh (the
// per-query workspace its batching heuristic counts, batches of at most
// 1 GiB of it, plus the uint32 neighbour buffer).
//
// An Extend is estimated by Index.EstimateExtend, and checked by Extend.
//
// Left out: balanced k-means' own scratch (its mesocluster and fine-tuning
// buffers, bounded by the workspace resource), the predict step's distance
// tiles, and uneven lists (the lists are sized as if balanced: a skewed
// dataset's lists take more). Index counts the lists holding rows only
// with p.AddDataOnBuild.
func EstimateMemory(s safe.MemoryShape, p *IndexParams, sp *SearchParams) (safe.MemoryEstimate, error) {
	const op = "ivfflat.EstimateMemory"
	if err := s.Check(op); err != nil {
		return safe.MemoryEstimate{}, err
	}
	pd, err := kit.Or(p, DefaultIndexParams)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	esz := memest.ElemSize(s.DType)
	if esz == 0 {
		return safe.MemoryEstimate{}, kit.Argf(op, "shape.DType", "%s: IVF-Flat takes float32, float16, int8 or uint8", s.DType)
	}
	rows, dim, nl := int64(s.Rows), int64(s.Dim), int64(pd.NLists)
	if nl < 1 || nl > rows {
		return safe.MemoryEstimate{}, kit.Argf(op, "params.NLists", "%d lists for %d rows", nl, rows)
	}
	fixed := fixedBytes(nl, dim, pd.Metric)
	train := memest.Round(memest.TrainRows(rows, pd.KMeansTrainsetFraction, nl) * dim * esz)
	var lists, extend int64
	if pd.AddDataOnBuild {
		lists = memest.Lists(rows, nl, dim*esz, pd.ConservativeMemoryAllocation, false)
		extend = memest.Sum(rows*4, nl*4) // new labels, old list sizes
	}
	e := safe.MemoryEstimate{Index: fixed + lists, BuildPeak: fixed + max(train, lists+extend)}
	if s.HostDataset {
		e.Dataset = memest.Round(rows * dim * esz) // cuVS's C build takes device rows only: Build uploads
	}
	if s.Batch > 0 {
		sd, err := kit.Or(sp, DefaultSearchParams)
		if err != nil {
			return safe.MemoryEstimate{}, err
		}
		e.Search = searchScratch(int64(s.Batch), int64(s.K), nl, dim, int64(min(sd.NProbes, uint32(nl))), esz)
	}
	return e, nil
}

// searchScratch is ivf_flat_search.cuh's workspace for a batch: the
// per-query size its heuristic counts (with the local top-k of k ≤ 256)
// times the queries it searches at once (batches of at most 1 GiB), plus
// float32 copies of non-float queries and the uint32 neighbour buffer.
func searchScratch(batch, k, nLists, dim, probes, esz int64) int64 {
	perQuery := 4*(2*probes+nLists+dim+1) + 12*probes*k + 4*k
	if esz != 4 {
		perQuery += 4 * dim
	}
	q := min(batch, max((int64(1)<<30)/perQuery, 1))
	return q * perQuery
}

// fixedBytes is what an index of nLists lists holds whatever its rows
// (ivf_flat_index.cpp): the centers, the list sizes, the data and index
// pointers, and the center norms of the L2 and cosine metrics.
func fixedBytes(nLists, dim int64, m safe.Metric) int64 {
	fixed := memest.Sum(nLists*dim*4, nLists*4, nLists*8, nLists*8)
	switch m {
	case safe.L2Expanded, safe.L2SqrtExpanded, safe.L2Unexpanded, safe.L2SqrtUnexpanded, safe.CosineExpanded:
		fixed += memest.Round(nLists * 4)
	}
	return fixed
}

// held is the device memory of idx as it is now: its fixed part and its
// rows in balanced lists (what EstimateMemory's Index counts after a
// build; a deserialized index's lists are allocated at the same
// capacities, ivf_list.cuh deserialize_list).
func (idx *Index) held() int64 {
	nl, dim := idx.ivf.NLists, idx.c.Dim
	return fixedBytes(nl, dim, idx.metric) + memest.Lists(idx.c.Rows.Load(), nl, dim*memest.ElemSize(idx.dtype), idx.cma, false)
}

// EstimateExtend estimates the device memory of an Extend of s.Rows rows
// (s.Dim and s.DType: 0 and the zero DataType, or the index's) now: what
// it takes beyond what the index holds (BuildPeak, which Extend checks
// before calling cuVS), the ids Extend makes when given none (Dataset:
// n int64 in device memory), and the index it leaves (Index, which
// safe.DeviceMemory.InUse counts after it).
//
// cuVS's C extend replaces the index by an extended copy
// (cpp/src/neighbors/ivf_flat/ivf_flat_build.cuh, v26.06.00 and v26.08.01:
// the extend that takes an index pointer assigns it extend(handle, *index,
// ...), which clones it and extends the clone): the clone's fixed part
// (centers, sizes, pointers, norms) beside the original's, a uint32 label
// per new row and the old list sizes, and each list that outgrows its
// capacity allocated anew (ivf_list.cuh resize_list) while the original
// still holds the old one; the original is freed after. With balanced
// lists either every list grows out of its capacity or none does.
//
// Left out: k-means predict's distance tiles (bounded by RAFT's workspace),
// and uneven lists: a list that outgrows its capacity while the average
// does not is not counted.
func (idx *Index) EstimateExtend(s safe.MemoryShape) (safe.MemoryEstimate, error) {
	op := "ivfflat.Index.EstimateExtend"
	c, err := kind.Of(idx, op)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	if err := kit.ExtendShape(op, &s, c.Dim, idx.dtype); err != nil {
		return safe.MemoryEstimate{}, err
	}
	return idx.extendEstimate(int64(s.Rows), true), nil
}

// extendEstimate is EstimateExtend's estimate of n rows, with the ids
// made by Extend when madeIDs.
func (idx *Index) extendEstimate(n int64, madeIDs bool) safe.MemoryEstimate {
	nl, dim, rows := idx.ivf.NLists, idx.c.Dim, idx.c.Rows.Load()
	rowBytes := dim * memest.ElemSize(idx.dtype)
	before := memest.Lists(rows, nl, rowBytes, idx.cma, false)
	after := memest.Lists(rows+n, nl, rowBytes, idx.cma, false)
	var grown int64
	if after != before {
		grown = after
	}
	e := safe.MemoryEstimate{
		BuildPeak: fixedBytes(nl, dim, idx.metric) + grown + memest.Sum(n*4, nl*4),
		Index:     fixedBytes(nl, dim, idx.metric) + after,
	}
	if madeIDs {
		e.Dataset = memest.Round(n * 8)
	}
	return e
}
