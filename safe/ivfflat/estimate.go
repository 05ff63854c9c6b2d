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
	fixed := memest.Sum(nl*dim*4, nl*4, nl*8, nl*8) // centers, list sizes, data and index pointers
	switch pd.Metric {
	case safe.L2Expanded, safe.L2SqrtExpanded, safe.L2Unexpanded, safe.L2SqrtUnexpanded, safe.CosineExpanded:
		fixed += memest.Round(nl * 4) // center norms
	}
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
