package ivfpq

import (
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
)

// EstimateMemory estimates the device memory of a Build with p (nil: cuVS's
// defaults) over s.Rows × s.Dim vectors of s.DType, of the built index, and
// of a search of s.Batch queries for s.K neighbours with sp (nil or zero
// fields: defaults). cuVS's IVF-PQ build reads host rows itself, in
// batches: Dataset is 0 and a host dataset only adds batch buffers, so a
// build can take more rows than the device holds. Build refuses, before
// calling cuVS, a build whose BuildPeak exceeds what the device can still
// give (safe.MemoryError).
//
// From cuVS's sources (the allocations are the same in v26.06.00 and
// v26.08.01): cpp/src/neighbors/ivf_pq_index.cu (owning_impl: PQ codebooks
// [pq_dim or n_lists, pq_len, 2^pq_bits], centers [n_lists,
// round_up(dim+1, 8)], rotated centers [n_lists, rot_dim], the rotation
// [rot_dim, dim], all float32; list sizes and pointers),
// cpp/include/cuvs/neighbors/ivf_pq.hpp (list_spec: interleaved lists of
// ceil(pq_dim / (128 / pq_bits)) 16-byte chunks per row, capacities as
// ivf_list.cuh; flat lists of ceil(pq_dim·pq_bits / 8) bytes per row,
// unpadded), cpp/src/neighbors/ivf_pq/ivf_pq_build.cuh (build: a float32
// training set of memest.TrainRows rows (and one of the element type while
// converting), the k-means centers and labels, and train_per_subset's
// codebook scratch, or train_per_cluster's; extend: a label per row and
// batches of at most 65536 rows of (dim + rot_dim) floats and an id,
// plus the rows themselves when in host memory) and
// cpp/src/neighbors/ivf_pq/ivf_pq_search.cuh (the outer batch's
// persistent and coarse-search buffers per query, batches of at most
// MaxInternalBatchSize and 1 GiB, and the fine search's 32·n_probes +
// 12·k·n_probes bytes per query).
//
// Left out: balanced k-means' own scratch, the predict step's distance
// tiles, uneven lists (sized as if balanced), the int8 coarse-search copies
// cuVS makes on demand, a look-up table too big for shared memory, and
// the fine batch's occupancy-driven shrinking (the estimate takes the
// outer batch). Per-cluster codebooks count each cluster's scratch as an
// average cluster's.
func EstimateMemory(s safe.MemoryShape, p *IndexParams, sp *SearchParams) (safe.MemoryEstimate, error) {
	const op = "ivfpq.EstimateMemory"
	if err := s.Check(op); err != nil {
		return safe.MemoryEstimate{}, err
	}
	pd, err := kit.Or(p, DefaultIndexParams)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	esz := memest.ElemSize(s.DType)
	if esz == 0 {
		return safe.MemoryEstimate{}, kit.Argf(op, "shape.DType", "%s: IVF-PQ takes float32, float16, int8 or uint8", s.DType)
	}
	rows, dim, nl := int64(s.Rows), int64(s.Dim), int64(pd.NLists)
	if nl < 1 || nl > rows {
		return safe.MemoryEstimate{}, kit.Argf(op, "params.NLists", "%d lists for %d rows", nl, rows)
	}
	if pd.PQBits < 4 || pd.PQBits > 8 {
		return safe.MemoryEstimate{}, kit.Argf(op, "params.PQBits", "%d is not in [4, 8]", pd.PQBits)
	}
	g := pqGeometry(dim, int64(pd.PQDim), int64(pd.PQBits))
	pqcRows := g.pqDim
	if pd.CodebookKind == PerCluster {
		pqcRows = nl
	}
	pqc := pqcRows * g.pqLen * g.book * 4
	fixed := memest.Sum(pqc, nl*g.dimExt*4, nl*g.rotDim*4, g.rotDim*dim*4, nl*4, nl*8, nl*8)

	// Training: the float32 training set (and, for other types, one of the
	// element type while converting), the centers and labels, then the
	// codebooks' scratch.
	nt := memest.TrainRows(rows, pd.KMeansTrainsetFraction, nl)
	trainset := memest.Round(nt * dim * 4)
	convert := int64(0)
	if esz != 4 {
		convert = memest.Round(nt * dim * esz)
	}
	kmeans := memest.Sum(nl*dim*4, nt*4)
	var codebook int64
	if pd.CodebookKind == PerCluster {
		cluster := max(nt/nl, 1)
		codebook = memest.Sum(pqc, nt*8, cluster*g.pqDim*4, g.book*4, cluster*g.rotDim*4)
	} else {
		pqRows := min(int64(pd.MaxTrainPointsPerPQCode)*g.book, nt)
		codebook = memest.Sum(pqc, pqRows*g.pqLen*4, pqRows*4, g.book*4)
	}
	train := trainset + max(convert, kmeans+codebook)

	var lists, extend int64
	if pd.AddDataOnBuild {
		lists = listsBytes(rows, nl, g, pd.CodesLayout, pd.ConservativeMemoryAllocation)
		batch := min(rows, 65536)
		factor := (dim+g.rotDim)*4 + 8
		if s.HostDataset {
			factor += dim * esz
		}
		extend = memest.Sum(rows*4, batch*factor)
	}
	e := safe.MemoryEstimate{Index: fixed + lists, BuildPeak: fixed + max(train, lists+extend)}
	if s.Batch > 0 {
		sd, err := kit.Or(sp, DefaultSearchParams)
		if err != nil {
			return safe.MemoryEstimate{}, err
		}
		e.Search = searchScratch(sd, int64(s.Batch), int64(s.K), nl, g)
	}
	return e, nil
}

// geometry is an index's PQ shape as ivf_pq_index.cu derives it.
type geometry struct {
	pqDim, pqBits, pqLen, rotDim, dimExt, book int64
}

func pqGeometry(dim, pqDim, pqBits int64) geometry {
	if pqDim == 0 {
		pqDim = memest.PQDim(dim)
	}
	pqLen := (dim + pqDim - 1) / pqDim
	return geometry{pqDim: pqDim, pqBits: pqBits, pqLen: pqLen, rotDim: pqLen * pqDim, dimExt: (dim + 1 + 7) / 8 * 8, book: 1 << pqBits}
}

// listsBytes is the lists' device memory for rows rows in nLists balanced
// lists: codes and int64 ids at the lists' capacity.
func listsBytes(rows, nLists int64, g geometry, layout CodesLayout, conservative bool) int64 {
	if layout == Flat {
		// list_spec_flat: capacity = size, ceil(pq_dim·pq_bits/8) bytes a row
		return memest.Lists(rows, nLists, (g.pqDim*g.pqBits+7)/8, conservative, true)
	}
	chunks := (g.pqDim + 128/g.pqBits - 1) / (128 / g.pqBits)
	return memest.Lists(rows, nLists, chunks*16, conservative, false)
}

// searchScratch is ivf_pq_search.cuh's workspace for a batch.
func searchScratch(sp *SearchParams, batch, k, nLists int64, g geometry) int64 {
	probes := int64(sp.NProbes)
	if probes == 0 {
		probes = 20
	}
	probes = min(probes, nLists)
	maxBatch := int64(sp.MaxInternalBatchSize)
	if maxBatch == 0 {
		maxBatch = 4096
	}
	gemm, qc := int64(4), int64(4)
	switch sp.CoarseSearchDtype {
	case CUDAFloat16:
		gemm, qc = 2, 2
	case CUDAInt8:
		gemm = 1
	}
	outer := g.dimExt*gemm + g.rotDim*4 + probes*4 + (nLists+probes)*qc
	bo := max(min(batch, maxBatch, (int64(1)<<30)/outer), 1)
	inner := 32*probes + 12*k*probes
	return bo*outer + bo*inner
}
