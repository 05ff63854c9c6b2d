package hnsw

import (
	"math"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
	"github.com/cuvs-go/cuvs/safe/nndescent"
)

// EstimateMemory estimates the device memory of a Build with p (nil:
// DefaultIndexParams; p.ACE nil: DefaultACEParams) over s.Rows × s.Dim
// host vectors of s.DType. The index lives in host memory (hnswlib's) and
// is searched on the CPU: Index and Search are 0, and Dataset too (cuVS
// reads the host rows itself); EstimateHostMemory gives the index's host
// size. Build refuses, before calling cuVS, a build whose BuildPeak
// exceeds what the device can still give (safe.MemoryError).
//
// Both releases build through CAGRA's ACE (c/src/neighbors/hnsw.cpp,
// cpp/src/neighbors/detail/hnsw.hpp build): a CAGRA graph of degree 2·M
// (intermediate 3·M; from_hnsw_params with SAME_GRAPH_FOOTPRINT in
// v26.08.01, set directly in v26.06.00), then the conversion. BuildPeak is
// the largest of:
//
//   - ACE's partition phases: cagra.EstimateMemory of that ACE build on
//     disk, which counts them alone (its doc says what they are and leave
//     out);
//   - in memory (not p.ACE.UseDisk), the graph ACE copies to the device
//     at its end ([rows, 2·M] uint32), held through the conversion, with
//     the conversion's own peak (EstimateFromCagra).
//
// v26.06.00's ACE also copies the rows to the device beside the graph
// (update_dataset, which cuVS skips when they do not fit, as its own
// cagra_build_mem_usage omits them): not counted. ACE's own switch to disk
// and to more partitions when its model finds memory short is not
// foreseen (see cagra.EstimateMemory): set p.ACE.UseDisk to have the disk
// build checked.
func EstimateMemory(s safe.MemoryShape, p *IndexParams) (safe.MemoryEstimate, error) {
	const op = "hnsw.EstimateMemory"
	pd, err := estimateArgs(op, s, p, true)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	ace := pd.ACE
	if ace == nil {
		d, err := DefaultACEParams()
		if err != nil {
			return safe.MemoryEstimate{}, err
		}
		ace = &d
	}
	rows, m := int64(s.Rows), int64(pd.M)
	cp := cagra.IndexParams{
		Metric: pd.Metric, GraphDegree: int(2 * m), IntermediateGraphDegree: int(3 * m), BuildAlgo: cagra.ACE,
		ACE: &cagra.ACEParams{NPartitions: int(min(ace.NPartitions, math.MaxInt32)), EFConstruction: int(pd.EfConstruction), UseDisk: true},
	}
	ae, err := cagra.EstimateMemory(safe.MemoryShape{Rows: s.Rows, Dim: s.Dim, DType: s.DType, HostDataset: true}, &cp, nil)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	deg := min(2*m, 3*m, rows-1) // check_graph_degree
	h, err := hierarchyPeak(s, deg, pd)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	var graph int64
	if !ace.UseDisk {
		graph = memest.Round(rows * deg * 4)
	}
	return safe.MemoryEstimate{BuildPeak: max(ae.BuildPeak, graph+h)}, nil
}

// EstimateFromCagra estimates the device memory of FromCagra (or
// FromCagraWithDataset) with p (nil: DefaultIndexParams) of a CAGRA index
// of s.Rows × s.Dim vectors of s.DType and graph degree graphDegree, on
// top of what the CAGRA index holds. Index, Search and Dataset are 0.
// FromCagra refuses, before calling cuVS, a conversion whose BuildPeak
// exceeds what the device can still give (safe.MemoryError).
//
// HierarchyNone and HierarchyCPU convert on the host: 0. HierarchyGPU
// builds each upper layer's links on the GPU (cpp/src/neighbors/detail/
// hnsw.hpp, from_cagra<GPU> and serialize_to_hnswlib_batched, both
// releases): the rows of level 1 and up, about rows/M' of them (hnswlib's
// random levels: M' = (graphDegree+1)/2, at least 2; the count is
// binomial, within a few sqrt(rows/M') of that), get a kNN graph of M'
// neighbours from all_neighbors_graph. Under 10^7 neighbour entries that
// is NN-Descent (nndescent.EstimateMemory: GNND's working set, the rows
// being in host memory); above, CAGRA's IVF-PQ kNN graph, counted as
// cagra.EstimateMemory of an IVF-PQ CAGRA build of those rows (an upper
// bound: its pruning and index are not made). The higher levels are
// smaller and come after.
func EstimateFromCagra(s safe.MemoryShape, graphDegree int, p *IndexParams) (safe.MemoryEstimate, error) {
	const op = "hnsw.EstimateFromCagra"
	pd, err := estimateArgs(op, s, p, false)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	if graphDegree < 1 {
		return safe.MemoryEstimate{}, kit.Argf(op, "graphDegree", "%d, want at least 1", graphDegree)
	}
	h, err := hierarchyPeak(s, int64(graphDegree), pd)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	return safe.MemoryEstimate{BuildPeak: h}, nil
}

// EstimateHostMemory estimates the host memory of the index Build (with
// graphDegree 0: 2·p.M, or rows-1 if fewer) or FromCagra (graphDegree: the
// CAGRA graph's) makes of s.Rows × s.Dim vectors of s.DType with p (nil:
// DefaultIndexParams), in bytes. Per row, as cuVS models hnswlib's index
// (v26.08.01 cpp/src/neighbors/detail/hnsw.hpp, from_cagra): the level-0
// block of 2·M'+1 links (M' = (graphDegree+1)/2), the vector and its label,
// a pointer, a level, a mutex and a label-map entry; with a hierarchy, the
// upper links hnswlib's random levels give on average, (M'+1)·4 bytes over
// M'-1 (cuVS divides by ln M', the mean of the level before it is rounded
// down: more). Left out: hnswlib's visited lists (2 bytes a row for each
// concurrent search) and its fixed per-index parts.
func EstimateHostMemory(s safe.MemoryShape, graphDegree int, p *IndexParams) (int64, error) {
	const op = "hnsw.EstimateHostMemory"
	pd, err := estimateArgs(op, s, p, graphDegree == 0)
	if err != nil {
		return 0, err
	}
	rows, dim := int64(s.Rows), int64(s.Dim)
	deg := int64(graphDegree)
	switch {
	case deg == 0:
		m := int64(pd.M)
		deg = min(2*m, 3*m, rows-1)
	case deg < 0:
		return 0, kit.Argf(op, "graphDegree", "%d, want 0 (Build's) or more", graphDegree)
	}
	m := (deg + 1) / 2
	const ptr, level, mutex, labelMap = 8, 4, 40, 56
	per := (2*m*4 + 4) + dim*memest.ElemSize(s.DType) + 8 + ptr + level + mutex + labelMap
	total := rows * per
	if pd.Hierarchy != HierarchyNone {
		mu := max(m, 2) // P(level >= l) = mu^-l: mean level 1/(mu-1)
		total += int64(float64(rows) * float64(mu*4+4) / float64(mu-1))
	}
	return total, nil
}

// estimateArgs checks the estimates' arguments as the calls they estimate
// check theirs (build: Build's, else FromCagra's) and returns the params.
func estimateArgs(op string, s safe.MemoryShape, p *IndexParams, build bool) (*IndexParams, error) {
	if err := s.Check(op); err != nil {
		return nil, err
	}
	pd, err := kit.Or(p, DefaultIndexParams)
	if err != nil {
		return nil, err
	}
	if err := pd.validate(op, build); err != nil {
		return nil, err
	}
	if memest.ElemSize(s.DType) == 0 {
		return nil, kit.Argf(op, "shape.DType", "%s: HNSW takes float32, float16, int8 or uint8", s.DType)
	}
	if build && s.Rows < 2 {
		return nil, kit.Argf(op, "shape.Rows", "%d: Build needs at least two rows (a graph)", s.Rows)
	}
	return pd, nil
}

// hierarchyPeak is the GPU hierarchy's device peak for s with a base
// graph of degree deg (EstimateFromCagra's doc); 0 for the other
// hierarchies.
func hierarchyPeak(s safe.MemoryShape, deg int64, p *IndexParams) (int64, error) {
	if p.Hierarchy != HierarchyGPU {
		return 0, nil
	}
	m := max((deg+1)/2, 2)
	n := int64(s.Rows) / m // level 1 and up: P(level >= 1) = 1/M
	if n <= 1 {
		return 0, nil
	}
	ns := m
	if n <= m {
		ns = n - 1
	}
	up := safe.MemoryShape{Rows: int(n), Dim: s.Dim, DType: s.DType, HostDataset: true}
	if n*ns < 10_000_000 {
		e, err := nndescent.EstimateMemory(up, &nndescent.IndexParams{Metric: p.Metric, GraphDegree: int(ns), IntermediateGraphDegree: int(2 * ns)})
		return e.BuildPeak, err
	}
	e, err := cagra.EstimateMemory(up, &cagra.IndexParams{Metric: p.Metric, BuildAlgo: cagra.IVFPQ, GraphDegree: int(ns), IntermediateGraphDegree: int(ns)}, nil)
	return e.BuildPeak, err
}
