package cagra

import (
	"errors"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
	"github.com/cuvs-go/cuvs/safe/internal/release"
)

// held is the device memory idx holds: the graph [rows, degree] uint32 and,
// when the index (or, on 26.08, its dataset) owns them, its rows padded to
// 16 bytes; 0 for an index ACE left on disk. Rows the caller owns (a
// borrowed DeviceMatrix, or on 26.08 Extend's concatenation) count as
// theirs.
func (idx *Index) held() int64 {
	if idx.onDisk {
		return 0
	}
	rows := idx.c.Rows.Load()
	b := memest.Round(rows * idx.degree.Load() * 4)
	if idx.ownsRows.Load() {
		b += paddedRows(rows, idx.c.Dim, memest.ElemSize(idx.dtype))
	}
	return b
}

// EstimateExtend estimates the device memory of an Extend of s.Rows rows
// (s.Dim and s.DType: 0 and the zero DataType, or the index's; host or
// device memory alike) with p (nil: DefaultExtendParams) now: what it
// takes beyond what the index holds (BuildPeak + Dataset, which Extend
// checks before calling cuVS), the device memory Extend allocates itself
// (Dataset: on 26.08 the old and new rows concatenated, counted in
// safe.DeviceMemory.InUse as a matrix), and the index it leaves (Index,
// which InUse counts after it).
//
// From cpp/src/neighbors/detail/cagra/add_nodes.cuh (extend_core,
// add_graph_nodes, add_node_core; v26.06.00 and v26.08.01):
//   - the rows: on 26.06 cuVS frees the rows the index owns and allocates
//     the old and new rows padded to 16 bytes (the index owns them after);
//     on 26.08 Extend concatenates them in a device matrix of its own and,
//     when a row is not a multiple of 16 bytes, cuvsDatasetMakePadded
//     copies that into a padded dataset (the matrix is freed after);
//   - the new rows' graph, the largest of: inserting them, chunk by chunk
//     (p.MaxChunkSize, 0: one chunk), through a CAGRA index over the rows
//     before the chunk whose graph is copied to the device, with the
//     in-edge counts of all rows and, per batch of new rows (at most a
//     chunk), their base_degree = 2·degree neighbours' ids and distances,
//     the rows themselves and a CAGRA search's ids and distances at
//     itopk max(2·base_degree, 256); and the new graph [rows + n, degree],
//     copied to the device (update_graph) while the old one is held.
//
// Left out: the CAGRA search's other buffers (hash tables), and the
// batches' shrinking to RAFT's workspace (cuVS searches fewer new rows at
// once when the workspace is short: that only lowers the peak).
func (idx *Index) EstimateExtend(s safe.MemoryShape, p *ExtendParams) (safe.MemoryEstimate, error) {
	op := "cagra.Index.EstimateExtend"
	c, err := kind.Of(idx, op)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	pd, err := kit.Or(p, DefaultExtendParams)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	if err := kit.ExtendShape(op, &s, c.Dim, idx.dtype); err != nil {
		return safe.MemoryEstimate{}, err
	}
	return idx.extendEstimate(int64(s.Rows), int64(pd.MaxChunkSize)), nil
}

// extendEstimate is EstimateExtend's estimate of n rows added in chunks of
// chunk rows (0: one).
func (idx *Index) extendEstimate(n, chunk int64) safe.MemoryEstimate {
	rows, dim, deg := idx.c.Rows.Load(), idx.c.Dim, idx.degree.Load()
	esz := memest.ElemSize(idx.dtype)
	if chunk <= 0 || chunk > n {
		chunk = n
	}
	last := n - chunk*((n-1)/chunk) // the last chunk's rows
	batch := chunk
	itopk := max(4*deg, 256)
	insert := memest.Sum((rows+n-last)*deg*4, (rows+n)*4, batch*2*deg*4, batch*2*deg*4, batch*dim*esz, batch*itopk*8)
	graph := memest.Round((rows + n) * deg * 4)
	grow := max(insert, graph)
	padded := paddedRows(rows+n, dim, esz)
	if !release.Has(release.CagraDataset) {
		var old int64
		if idx.ownsRows.Load() {
			old = paddedRows(rows, dim, esz)
		}
		return safe.MemoryEstimate{BuildPeak: padded - old + grow, Index: graph + padded}
	}
	m := memest.Round((rows + n) * dim * esz)
	if (dim*esz)%16 == 0 {
		// a padded view of Extend's matrix, which counts itself
		return safe.MemoryEstimate{BuildPeak: grow, Dataset: m, Index: graph}
	}
	peak := max(m+padded, padded+grow)
	return safe.MemoryEstimate{BuildPeak: peak - m, Dataset: m, Index: graph + padded}
}

// mergeEstimate is the device memory of a Merge of total rows of dim
// columns of dt, kept rows of them (filtered: a bitset chose them), with
// p: BuildPeak is its peak, Index the merged index; ok is false when the
// build is not estimated (EstimateMemory's ErrNotEstimated, ACE), then
// Merge calls cuVS unchecked.
//
// From cpp/src/neighbors/detail/cagra/cagra_merge.cuh (v26.06.00 and
// v26.08.01) and c/src/neighbors/cagra.cpp (v26.08.01: the merged dataset,
// padded rows in device memory, allocated before the merge): on 26.06 the
// rows concatenated in a device matrix, and with a filter the kept rows'
// indices and a second matrix of them, then Build over the kept rows
// (EstimateMemory: a copy padded to 16 bytes when a row is not a multiple
// of them), the index owning its rows; on 26.08 the merged dataset, and
// with a filter a padded staging copy of every row and the kept rows'
// indices, then the graph build over the padded rows (no copy). When the
// device allocation of the rows fails, cuVS falls back to host rows for an
// unfiltered merge: refused here instead, unless safe.WithoutMemoryCheck.
func mergeEstimate(p *IndexParams, total, kept, dim int64, dt dlpack.DataType, filtered bool) (e safe.MemoryEstimate, ok bool, err error) {
	if p.BuildAlgo == ACE {
		return e, false, nil
	}
	esz := memest.ElemSize(dt)
	ideg, deg := int64(p.IntermediateGraphDegree), int64(p.GraphDegree)
	if ideg >= kept {
		ideg = kept - 1
	}
	deg = min(deg, ideg)
	graph := memest.Round(kept * deg * 4)
	rowsKept := paddedRows(kept, dim, esz)
	e.Index = graph + rowsKept
	if !release.Has(release.CagraDataset) {
		be, err := EstimateMemory(safe.MemoryShape{Rows: int(kept), Dim: int(dim), DType: dt}, p, nil)
		if errors.Is(err, ErrNotEstimated) {
			return e, false, nil
		}
		if err != nil {
			return e, false, err
		}
		e.BuildPeak = memest.Round(total*dim*esz) + be.BuildPeak
		if filtered {
			e.BuildPeak += memest.Sum(kept*8, kept*dim*esz)
		}
		return e, true, nil
	}
	if p.BuildAlgo == IterativeSearch {
		return e, false, nil
	}
	knn, optimize, err := graphPhases(safe.MemoryShape{Rows: int(kept), Dim: int(dim), DType: dt}, p, ideg, deg)
	if err != nil {
		return e, false, err
	}
	e.BuildPeak = rowsKept + max(knn, optimize, graph)
	if filtered {
		e.BuildPeak += paddedRows(total, dim, esz) + memest.Round(kept*8)
	}
	return e, true, nil
}
