package ivfpq

import (
	"github.com/cuvs-go/cuvs/dlpack"
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
// An Extend is estimated by Index.EstimateExtend, and checked by Extend.
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
	pqc := codebookBytes(g, nl, pd.CodebookKind)
	fixed := fixedBytes(g, nl, dim, pd.CodebookKind)

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

// codebookBytes is the PQ codebooks: [pq_dim or n_lists, pq_len,
// 2^pq_bits] float32.
func codebookBytes(g geometry, nLists int64, k CodebookKind) int64 {
	rows := g.pqDim
	if k == PerCluster {
		rows = nLists
	}
	return rows * g.pqLen * g.book * 4
}

// fixedBytes is what an index of nLists lists holds whatever its rows
// (ivf_pq_index.cu, owning_impl): the codebooks, the centers, the rotated
// centers, the rotation, the list sizes and pointers.
func fixedBytes(g geometry, nLists, dim int64, k CodebookKind) int64 {
	return memest.Sum(codebookBytes(g, nLists, k), nLists*g.dimExt*4, nLists*g.rotDim*4, g.rotDim*dim*4, nLists*4, nLists*8, nLists*8)
}

// geometry is idx's PQ shape.
func (idx *Index) geometry() geometry {
	return pqGeometry(idx.c.Dim, idx.pqDim, idx.pqBits)
}

// held is the device memory of idx as it is now: what EstimateMemory's
// Index counts for its rows (a deserialized index's lists are allocated
// at the same capacities, ivf_list.cuh deserialize_list). An index of
// BuildPrecomputed references the caller's codebooks, centers and
// rotation (their owners count them): it holds its list bookkeeping and
// lists.
func (idx *Index) held() int64 {
	g, nl := idx.geometry(), idx.nLists
	fixed := fixedBytes(g, nl, idx.c.Dim, idx.codebook)
	if idx.precomputed {
		fixed = memest.Sum(nl*4, nl*8, nl*8)
	}
	return fixed + listsBytes(idx.c.Rows.Load(), nl, g, idx.layout, idx.cma)
}

// EstimateExtend estimates the device memory of an Extend of s.Rows rows
// of s.DType (the index's when zero; float32 while the index's is not
// known) from host memory when s.HostDataset (s.Dim 0 or the index's)
// now: what it takes beyond what the index holds (BuildPeak, which Extend
// checks before calling cuVS), the device ids Extend makes when given
// none (Dataset), and the index it leaves (Index, which
// safe.DeviceMemory.InUse counts after it).
//
// cuVS extends the index in place (cpp/src/neighbors/ivf_pq/
// ivf_pq_build.cuh, extend, v26.06.00 and v26.08.01; the C API calls the
// in-place overload), through the largest of its phases, each with a
// uint32 label per new row and, for host rows, a batch of at most 65536 of
// them on the device: a placeholder list of the new rows (interleaved:
// n + 31·min(n_lists, n) rows at list capacity; flat: n rows), allocated
// first so that an extend too big fails before it changes anything; the
// centers unpadded for k-means predict; the old list sizes and each list
// that outgrows its capacity allocated anew and filled before the old one
// is freed (ivf_list.cuh resize_list: the lists' growth plus one old
// list); the encoding batches of at most 65536 rows of (dim + rot_dim)
// floats and an id. With balanced lists either every list grows out of
// its capacity or none does.
//
// Left out: k-means predict's distance tiles, the batches' shrinking to
// RAFT's workspace (it only lowers the peak), and uneven lists: a list
// that outgrows its capacity while the average does not is not counted.
func (idx *Index) EstimateExtend(s safe.MemoryShape) (safe.MemoryEstimate, error) {
	op := "ivfpq.Index.EstimateExtend"
	c, err := kind.Of(idx, op)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	dt := idx.elemType()
	if s.DType == (dlpack.DataType{}) && dt == (dlpack.DataType{}) {
		s.DType = dlpack.Float32
	}
	if err := kit.ExtendShape(op, &s, c.Dim, dt); err != nil {
		return safe.MemoryEstimate{}, err
	}
	esz := memest.ElemSize(s.DType)
	if esz == 0 {
		return safe.MemoryEstimate{}, kit.Argf(op, "shape.DType", "%s: IVF-PQ takes float32, float16, int8 or uint8", s.DType)
	}
	return idx.extendEstimate(int64(s.Rows), esz, s.HostDataset, !s.HostDataset), nil
}

// extendEstimate is EstimateExtend's estimate of n rows of esz bytes an
// element, from host memory when host, with device ids made by Extend
// when madeIDs.
func (idx *Index) extendEstimate(n, esz int64, host, madeIDs bool) safe.MemoryEstimate {
	g, nl, dim, rows := idx.geometry(), idx.nLists, idx.c.Dim, idx.c.Rows.Load()
	before := listsBytes(rows, nl, g, idx.layout, idx.cma)
	after := listsBytes(rows+n, nl, g, idx.layout, idx.cma)
	base := memest.Round(n * 4) // the labels
	batch := min(n, 65536)
	if host {
		base += memest.Round(batch * dim * esz)
	}
	var placeholder int64
	if idx.layout == Flat {
		placeholder = memest.Round(n * ((g.pqDim*g.pqBits + 7) / 8))
	} else {
		m := n + 31*min(nl, n)
		c := memest.ListCapacity(m, idx.cma)
		chunks := (g.pqDim + 128/g.pqBits - 1) / (128 / g.pqBits)
		placeholder = memest.Sum(c*chunks*16, c*8)
	}
	var grown int64
	if after != before {
		grown = after - before + before/nl
	}
	encode := memest.Round(batch * ((dim+g.rotDim)*4 + 8))
	if host {
		encode += memest.Round(batch * 8) // the ids' batch
	}
	peak := base + max(placeholder, memest.Round(nl*dim*4), memest.Round(nl*4)+max(grown, encode))
	e := safe.MemoryEstimate{BuildPeak: peak, Index: idx.held() - before + after}
	if madeIDs {
		e.Dataset = memest.Round(n * 8)
	}
	return e
}
