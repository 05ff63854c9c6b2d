package cagra

import (
	"fmt"
	"math"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
	"github.com/cuvs-go/cuvs/safe/internal/release"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// ErrNotEstimated is wrapped by EstimateMemory's error for the builds it
// does not estimate: IterativeSearch and Compression. Build then calls cuVS
// unchecked.
var ErrNotEstimated = fmt.Errorf("cagra: not estimated")

// EstimateMemory estimates the device memory of a Build with p (nil: cuVS's
// defaults) over s.Rows × s.Dim vectors of s.DType, of the built index, and
// of a search of s.Batch queries for s.K neighbours (sp's ITopKSize; nil:
// defaults). Build refuses, before calling cuVS, a build whose BuildPeak
// exceeds what the device can still give (safe.MemoryError).
//
// The build is the largest of its phases (cpp/src/neighbors/detail/cagra/
// cagra_build.cuh, build, in v26.06.00 and v26.08.01):
//
//   - the kNN graph, kept in host memory. IVFPQ: an IVF-PQ index over the
//     rows (ivfpq.EstimateMemory with the parameters cuVS takes:
//     graph_build_params::ivf_pq_params in cpp/include/cuvs/neighbors/
//     ivf_pq.hpp, p.IVFPQ's fields where c/src/neighbors/cagra.cpp copies
//     them), then searched by batches of at most 128 Ki rows for
//     IntermediateGraphDegree·max(1, RefinementRate) candidates
//     (build_knn_graph: distances, neighbours and refined copies, and the
//     batch's rows when they are in host memory). NNDescent (and AutoSelect,
//     which cuVS resolves to it when it fits): GNND's device working set
//     as cpp/src/neighbors/nn_descent.cu's build_mem_usage counts it (an
//     fp16 copy of the rows, norms, 32-wide id and distance lists, locks and
//     list sizes);
//   - the pruning (cpp/src/neighbors/detail/cagra/graph_core.cuh,
//     optimize): the kNN graph on the device and an output batch of at
//     most 256 Ki rows, then the reverse graph and its counts with the
//     merge's batches;
//   - the index: the graph [rows, GraphDegree] uint32 on the device, and
//     the rows themselves, referenced where cuVS can (device rows whose
//     width is a multiple of 16 bytes) and otherwise copied into rows padded
//     to 16 bytes (on 26.08 the copy is made before the build, by
//     cuvsDatasetMakePadded, and held through it).
//
// ACE (cagra_build.cuh, build_ace, both releases; host rows, s.HostDataset
// is not read) is the largest of: the partition labelling
// (ace_get_partition_labels: a float32 sample of max(1%, 100 per
// partition) of the rows, the centroids, and 32 Ki-row chunks of rows and
// of distances to the centroids); one partition's CAGRA build, a partition
// counted at its average size, min(rows, 2·ceil(rows/partitions)) (each row
// joins its nearest partition and its second: "core" and "augmented"),
// over NPartitions (0: 2; at most rows/1000, at least 2) with the
// parameters build_ace gives it (v26.08.01: index_params::from_dataset,
// degree GraphDegree, intermediate 1.5·GraphDegree, rows copied padded to
// the device first; v26.06.00: from_hnsw_params with M = GraphDegree/2, from
// host rows; NN-Descent under 10^6 rows, else IVF-PQ with n_probes
// 2 + sqrt(n_lists)/20 + EFConstruction/16: cpp/src/neighbors/cagra.cpp);
// and, in memory, the index (the graph, copied to the device by
// update_graph, and the rows copied padded: by cuVS on 26.06, by Build's
// cuvsDatasetMakePadded on 26.08). With UseDisk the index stays in
// BuildDir: Index is 0.
//
// The search estimate is the single-CTA search's per-query buffers
// (ITopKSize candidates' ids and distances, and the queries' result ids
// and distances): a rough figure.
//
// Left out: the IVF-PQ search's look-up tables and the refinement's
// scratch, the workspace-driven shrinking of the batches (on a small
// device cuVS searches fewer rows at once than counted here), the
// 26.08 kNN graph sort's device copy of the rows, and the multi-CTA
// search's hash tables. For ACE: balanced k-means' scratch, partitions
// larger than the average (k-means leaves them uneven: cuVS's own model
// allows 3 times it), and ACE's own choices at run time: it goes to disk
// when its model (cagra_build.cuh, ace_check_use_disk_mode) finds the free
// host memory or the device's total memory (or MaxGPUMemoryGB) short, and
// then raises the partitions until they fit: the estimate is the in-memory
// build's with the partitions asked for, which Build checks (set UseDisk
// to have the disk build's checked); and 26.06's index without its rows
// when they do not fit (update_dataset's fallback). IterativeSearch and
// Compression are not estimated: the error wraps ErrNotEstimated.
func EstimateMemory(s safe.MemoryShape, p *IndexParams, sp *SearchParams) (safe.MemoryEstimate, error) {
	const op = "cagra.EstimateMemory"
	if err := s.Check(op); err != nil {
		return safe.MemoryEstimate{}, err
	}
	pd, err := kit.Or(p, DefaultIndexParams)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	esz := memest.ElemSize(s.DType)
	if esz == 0 {
		return safe.MemoryEstimate{}, kit.Argf(op, "shape.DType", "%s: CAGRA takes float32, float16, int8 or uint8", s.DType)
	}
	switch {
	case pd.BuildAlgo == IterativeSearch:
		return safe.MemoryEstimate{}, fmt.Errorf("%s: the %v graph build: %w", op, pd.BuildAlgo, ErrNotEstimated)
	case pd.Compression != nil:
		return safe.MemoryEstimate{}, fmt.Errorf("%s: a compressed dataset: %w", op, ErrNotEstimated)
	}
	rows, dim := int64(s.Rows), int64(s.Dim)
	if rows < 2 {
		return safe.MemoryEstimate{}, kit.Argf(op, "shape.Rows", "%d: CAGRA needs at least two rows", rows)
	}
	ideg, deg := int64(pd.IntermediateGraphDegree), int64(pd.GraphDegree)
	if ideg >= rows {
		ideg = rows - 1 // check_graph_degree
	}
	deg = min(deg, ideg)

	v2608 := release.Has(release.CagraDataset)
	var e safe.MemoryEstimate
	if pd.BuildAlgo == ACE {
		if e, err = aceEstimate(s, pd, deg, v2608); err != nil {
			return safe.MemoryEstimate{}, err
		}
	} else {
		ks := s
		if v2608 {
			ks.HostDataset = false // cuVS builds from the padded device copy
		}
		knn, optimize, err := graphPhases(ks, pd, ideg, deg)
		if err != nil {
			return safe.MemoryEstimate{}, err
		}
		graph := memest.Round(rows * deg * 4)
		var rowsCopy int64
		if s.HostDataset || (dim*esz)%16 != 0 {
			rowsCopy = paddedRows(rows, dim, esz)
		}
		e.Index = graph + rowsCopy
		if v2608 {
			e.BuildPeak = rowsCopy + max(knn, optimize, graph)
		} else {
			e.BuildPeak = max(knn, optimize, graph+rowsCopy)
		}
	}
	if s.Batch > 0 {
		sd := SearchParams{}
		if sp != nil {
			sd = *sp
		}
		itopk := int64(sd.ITopKSize)
		if itopk == 0 {
			itopk = 64
		}
		itopk = max(itopk, int64(s.K))
		q := int64(s.Batch)
		e.Search = memest.Sum(q*itopk*8, q*int64(s.K)*4, q*int64(s.K)*4)
	}
	return e, nil
}

// paddedRows is a device copy of rows × dim elements of esz bytes, each row
// padded to 16 bytes (make_aligned_dataset, make_device_padded_dataset).
func paddedRows(rows, dim, esz int64) int64 {
	return memest.Round(rows * ((dim*esz + 15) / 16 * 16))
}

// graphPhases are a build's kNN graph phase (p.BuildAlgo: IVFPQ, else
// NN-Descent) and its pruning, at degrees ideg and deg (already lowered as
// check_graph_degree lowers them), over s (s.HostDataset: the rows cuVS
// reads are in host memory).
func graphPhases(s safe.MemoryShape, p *IndexParams, ideg, deg int64) (knn, optimize int64, err error) {
	rows, dim := int64(s.Rows), int64(s.Dim)
	if p.BuildAlgo == IVFPQ {
		if knn, err = ivfpqGraphPeak(s, p, ideg); err != nil {
			return 0, 0, err
		}
	} else { // NNDescent, AutoSelect
		knn = memest.Sum(rows*dim*2, rows*4, rows*32*4, rows*32*4, rows*4, 2*rows*8)
	}
	batch := min(rows, 256*1024)
	optimize = max(memest.Sum(rows*ideg*4, batch*deg*4), memest.Sum(rows*deg*4, rows*4, 2*batch*deg*4))
	return knn, optimize, nil
}

// aceEstimate is an ACE build's estimate (EstimateMemory's doc), deg the
// graph degree lowered as build_ace's check_graph_degree lowers it.
func aceEstimate(s safe.MemoryShape, p *IndexParams, deg int64, v2608 bool) (safe.MemoryEstimate, error) {
	ap := p.ACE
	if ap == nil {
		d, err := DefaultACEParams()
		if err != nil {
			return safe.MemoryEstimate{}, err
		}
		ap = &d
	}
	rows, dim, esz := int64(s.Rows), int64(s.Dim), memest.ElemSize(s.DType)
	np := int64(ap.NPartitions)
	if np <= 0 {
		np = 2
	}
	if np > rows/1000 {
		np = max(rows/1000, 2) // min_required_per_partition
	}
	// ace_get_partition_labels: the sample, the centroids, a chunk of rows
	// and one of their distances to the centroids, all float32
	const chunk = 32 * 1024
	samples := min(max(int64(float64(rows)*0.01), 100*np), rows)
	labels := memest.Sum(samples*dim*4, np*dim*4, chunk*dim*4, chunk*np*4)

	// one partition's build, as build_ace sets it up
	n := min(rows, 2*((rows+np-1)/np))
	sub := IndexParams{Metric: p.Metric, BuildAlgo: NNDescent}
	if v2608 {
		sub.GraphDegree, sub.IntermediateGraphDegree = int(deg), int(deg*3/2)
	} else {
		m := max(deg/2, 1)
		sub.GraphDegree, sub.IntermediateGraphDegree = int(2*m), int(3*m)
	}
	if n >= 1_000_000 {
		nl := max(1, n/2000)
		probes := math.Round(2 + math.Sqrt(float64(nl))/20 + float64(ap.EFConstruction/16))
		sub.BuildAlgo = IVFPQ
		sub.IVFPQ = &IVFPQGraphParams{Search: &IVFPQSearchParams{NProbes: uint32(probes)}}
	}
	sideg := min(int64(sub.IntermediateGraphDegree), n-1)
	sdeg := min(int64(sub.GraphDegree), sideg)
	knn, optimize, err := graphPhases(safe.MemoryShape{Rows: int(n), Dim: s.Dim, DType: s.DType, HostDataset: !v2608}, &sub, sideg, sdeg)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	part := max(knn, optimize, memest.Round(n*sdeg*4))
	if v2608 {
		part += paddedRows(n, dim, esz) // make_device_padded_dataset, before the build
	}

	var e safe.MemoryEstimate
	if !ap.UseDisk {
		e.Index = memest.Round(rows*deg*4) + paddedRows(rows, dim, esz)
	}
	e.BuildPeak = max(labels, part, e.Index)
	return e, nil
}

// ivfpqGraphPeak is the IVF-PQ kNN graph phase's peak: the IVF-PQ build,
// or its index with the search batches, whichever is larger.
func ivfpqGraphPeak(s safe.MemoryShape, p *IndexParams, ideg int64) (int64, error) {
	rows, dim := int64(s.Rows), int64(s.Dim)
	bp, err := graphIVFPQParams(rows, dim, p)
	if err != nil {
		return 0, err
	}
	rate := float64(1)
	probes := uint32(math.Round(math.Sqrt(float64(bp.NLists))/20 + 4))
	if p.IVFPQ != nil {
		if p.IVFPQ.RefinementRate > 1 {
			rate = float64(p.IVFPQ.RefinementRate)
		}
		if p.IVFPQ.Search != nil && p.IVFPQ.Search.NProbes != 0 {
			probes = p.IVFPQ.Search.NProbes
		}
	}
	topK := ideg + 1
	gpuTopK := min(max(int64(float64(ideg)*rate), topK), rows)
	maxQ := min(rows, 128*1024)
	sp := ivfpq.SearchParams{NProbes: probes, CoarseSearchDtype: ivfpq.CUDAFloat16, MaxInternalBatchSize: uint32(maxQ)}
	pe, err := ivfpq.EstimateMemory(safe.MemoryShape{Rows: s.Rows, Dim: s.Dim, DType: s.DType, HostDataset: s.HostDataset, Batch: int(maxQ), K: int(gpuTopK)}, &bp, &sp)
	if err != nil {
		return 0, err
	}
	buffers := memest.Sum(maxQ*gpuTopK*4, maxQ*gpuTopK*8, maxQ*topK*4, maxQ*topK*8)
	if s.HostDataset {
		buffers += memest.Round(maxQ * dim * memest.ElemSize(s.DType))
	}
	return max(pe.BuildPeak, pe.Index+buffers+pe.Search), nil
}

// graphIVFPQParams are the IVF-PQ parameters cuVS's CAGRA build uses for
// rows × dim: graph_build_params::ivf_pq_params (ivf_pq.hpp), with the
// fields c/src/neighbors/cagra.cpp copies from p.IVFPQ.Build.
func graphIVFPQParams(rows, dim int64, p *IndexParams) (ivfpq.IndexParams, error) {
	bp, err := ivfpq.DefaultIndexParams()
	if err != nil {
		return bp, err
	}
	bp.Metric = p.Metric
	if dim <= 32 {
		bp.PQDim, bp.PQBits = 16, 8
	} else {
		bp.PQBits = 4
		switch {
		case dim <= 64:
			bp.PQDim = 32
		case dim <= 128:
			bp.PQDim = 64
		case dim <= 192:
			bp.PQDim = 96
		default:
			bp.PQDim = uint32((dim/2 + 127) / 128 * 128)
		}
	}
	bp.NLists = uint32(max(1, rows/2000))
	bp.KMeansNIters = 10
	minFrac := min(1, 32*float64(bp.NLists)/float64(rows))
	bp.KMeansTrainsetFraction = min(max(1/math.Sqrt(float64(rows)*1e-5), minFrac), 1)
	bp.CodebookKind = ivfpq.PerSubspace
	if p.IVFPQ != nil && p.IVFPQ.Build != nil {
		b := p.IVFPQ.Build
		bp.AddDataOnBuild, bp.NLists, bp.KMeansNIters, bp.KMeansTrainsetFraction = b.AddDataOnBuild, b.NLists, b.KMeansNIters, b.KMeansTrainsetFraction
		bp.PQBits, bp.PQDim, bp.CodebookKind, bp.ForceRandomRotation = b.PQBits, b.PQDim, b.CodebookKind, b.ForceRandomRotation
		bp.ConservativeMemoryAllocation, bp.MaxTrainPointsPerPQCode = b.ConservativeMemoryAllocation, b.MaxTrainPointsPerPQCode
	}
	bp.NLists = uint32(min(int64(bp.NLists), rows))
	return bp, nil
}
