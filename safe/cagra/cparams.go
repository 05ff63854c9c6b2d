package cagra

/*
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"math"
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/release"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// cIndexParams is IndexParams materialized for one C call.
//
// The top-level struct comes from cuvsCagraIndexParamsCreate, like every
// params object this package hands to cuVS (the library may check that its
// params are its own). Create also allocates an IVF-PQ object
// (cuvsIvfPqParams) into graph_build_params, and cuvsCagraIndexParamsDestroy
// frees graph_build_params according to the build_algo it finds then: a
// cuvsIvfPqParams freed as ACE params, or an ACE object of ours freed by the
// library, is undefined behaviour, and a switch to NN_DESCENT leaks it. So
// release always hands Destroy back exactly what Create made, with
// build_algo IVF_PQ, whatever build used meanwhile: that trap cannot be
// reached from Go.
type cIndexParams struct {
	p           cParams                  // C memory, from cuvsCagraIndexParamsCreate of the loaded release
	created     unsafe.Pointer           // the cuvsIvfPqParams Create put in graph_build_params
	ace         *generated.CuvsAceParams // C memory of ours, freed by release
	compression generated.CuvsCagraCompressionParams_t
}

func cAlloc[T any]() *T {
	var zero T
	return (*T)(C.calloc(1, C.size_t(unsafe.Sizeof(zero))))
}

func (p *IndexParams) validate(op string) error {
	if p.Compression != nil && release.Has(release.CagraDataset) {
		return compressionNotInRelease(op)
	}
	if !p.Metric.Valid() {
		return kit.Argf(op, "params.Metric", "%d is not a metric", p.Metric)
	}
	if p.GraphDegree < 1 {
		return kit.Argf(op, "params.GraphDegree", "%d, want at least 1", p.GraphDegree)
	}
	if p.IntermediateGraphDegree < 1 {
		return kit.Argf(op, "params.IntermediateGraphDegree", "%d, want at least 1 (cuVS would lower GraphDegree to it)", p.IntermediateGraphDegree)
	}
	switch p.BuildAlgo {
	case AutoSelect, IVFPQ, NNDescent, IterativeSearch, ACE:
	default:
		return kit.Argf(op, "params.BuildAlgo", "%d is not a graph build algorithm", p.BuildAlgo)
	}
	if p.BuildAlgo == IterativeSearch && p.IntermediateGraphDegree < p.GraphDegree {
		// cagra_build.cuh's iterative_build_graph reads both degrees from
		// the params, not check_graph_degree's adjusted ones: its rounds
		// search GraphDegree+1 neighbours into buffers sized for
		// IntermediateGraphDegree+1, and its last round prunes
		// IntermediateGraphDegree+1 to GraphDegree ("output graph cannot
		// have more columns than input graph").
		return kit.Argf(op, "params.IntermediateGraphDegree", "%d is below GraphDegree %d: cuVS's IterativeSearch build does not lower GraphDegree (its search buffers hold IntermediateGraphDegree+1 neighbours)", p.IntermediateGraphDegree, p.GraphDegree)
	}
	if p.NNDescentIterations < 0 {
		return kit.Argf(op, "params.NNDescentIterations", "%d is negative", p.NNDescentIterations)
	}
	if g := p.IVFPQ; g != nil && g.Build != nil {
		switch b := g.Build; {
		case !b.Metric.Valid():
			return kit.Argf(op, "params.IVFPQ.Build.Metric", "%d is not a metric", b.Metric)
		case b.CodebookKind != ivfpq.PerSubspace && b.CodebookKind != ivfpq.PerCluster:
			return kit.Argf(op, "params.IVFPQ.Build.CodebookKind", "%d is neither PerSubspace nor PerCluster", b.CodebookKind)
		case b.CodesLayout != ivfpq.Flat && b.CodesLayout != ivfpq.Interleaved:
			return kit.Argf(op, "params.IVFPQ.Build.CodesLayout", "%d is neither Flat nor Interleaved", b.CodesLayout)
		}
	}
	if p.ACE != nil {
		for i := 0; i < len(p.ACE.BuildDir); i++ {
			if p.ACE.BuildDir[i] == 0 {
				return kit.Argf(op, "params.ACE.BuildDir", "contains a NUL byte")
			}
		}
		if p.ACE.NPartitions < 0 || p.ACE.EFConstruction < 0 || p.ACE.MaxHostMemoryGB < 0 || p.ACE.MaxGPUMemoryGB < 0 {
			return kit.Argf(op, "params.ACE", "negative size in %+v", *p.ACE)
		}
	}
	return nil
}

// iterativeRefusal is cuVS's reason (graph_core.cuh, prune_graph_gpu) for
// an IterativeSearch build over too few rows.
const iterativeRefusal = "Could not generate an intermediate CAGRA graph because the initial kNN graph contains too many invalid or duplicated neighbor nodes."

// Degrees returns the graph degrees cuVS builds with over rows rows (at
// least 2): check_graph_degree in cagra_build.cuh lowers
// IntermediateGraphDegree to rows-1 when it is not below rows, then
// GraphDegree to IntermediateGraphDegree when it is above it (each with a
// warning). Index.GraphDegree reports the degree built. IterativeSearch
// builds with the degrees unadjusted (iterative_build_graph reads them from
// the params; Build refuses rows it cannot build over), so they are
// returned as they are. A nil p stands for cuVS's defaults
// (DefaultIndexParams), as for Build; 0, 0 when they cannot be read (no
// library loaded).
func (p *IndexParams) Degrees(rows int) (intermediate, graph int) {
	if p == nil {
		d, err := DefaultIndexParams()
		if err != nil {
			return 0, 0
		}
		p = &d
	}
	intermediate, graph = p.IntermediateGraphDegree, p.GraphDegree
	if p.BuildAlgo == IterativeSearch {
		return intermediate, graph
	}
	if intermediate >= rows {
		intermediate = rows - 1
	}
	if intermediate < graph {
		graph = intermediate
	}
	return intermediate, graph
}

// checkRows checks p against the rows the graph is built over, refusing
// only what cuVS's build cannot do with them (arg names the argument that
// holds the rows).
//
// One row: check_graph_degree would lower both degrees to 0, and the prune
// kernel (graph_core.cuh, kern_fused_prune) then loops over
// knn_graph_degree - 1 = 2^32 - 1 entries of an empty shared array.
//
// IterativeSearch: iterative_build_graph (cagra_build.cuh) takes the degrees
// unadjusted. It starts from the first initial_graph_size rows (rows halved,
// rounding up, until at most GraphDegree × 64) with small_graph_degree =
// max(GraphDegree/2, min(GraphDegree, 24)) edges a row, searches that graph
// and prunes the results to small_graph_degree distinct neighbours, then
// doubles the rows until all of them are in, pruning the last rounds to
// GraphDegree. A round whose graph has fewer rows than the edges it keeps
// finds too few distinct neighbours, and cuVS fails with iterativeRefusal
// (measured on 26.08.01 with the defaults over 4 and 40 rows).
func (p *IndexParams) checkRows(op, arg string, rows int64) error {
	if rows < 2 {
		return kit.Argf(op, arg, "%d row(s), want at least two: cuVS would lower the graph degree to rows-1 = 0", rows)
	}
	if p.BuildAlgo != IterativeSearch {
		return nil
	}
	gd := uint64(p.GraphDegree)
	initial := (uint64(rows) + 1) / 2
	for initial > gd*64 {
		initial = (initial + 1) / 2
	}
	small := max(gd/2, min(gd, 24))
	switch {
	case initial < uint64(rows) && initial < small:
		return kit.Argf(op, "params.BuildAlgo", "IterativeSearch over %d rows: its first round keeps %d edges a row in a graph of %d rows; cuVS: %s", rows, small, initial, iterativeRefusal)
	case uint64(rows) < gd:
		return kit.Argf(op, "params.BuildAlgo", "IterativeSearch over %d rows: its last rounds keep GraphDegree %d edges a row; cuVS: %s", rows, gd, iterativeRefusal)
	}
	return nil
}

// toC materializes p; release must follow, whatever happens.
func (p *IndexParams) toC(op string) (*cIndexParams, error) {
	c := &cIndexParams{}
	var err error
	if c.p, err = createParams(); err != nil {
		return c, kit.Wrap(op, err)
	}
	d := c.p.fields()
	c.created = *d.gbp
	*d.metric = kit.CMetric(p.Metric)
	*d.igd = uint64(p.IntermediateGraphDegree)
	*d.gd = uint64(p.GraphDegree)
	*d.algo = generated.CuvsCagraGraphBuildAlgo(p.BuildAlgo)
	*d.niter = uint64(p.NNDescentIterations)
	switch {
	case p.BuildAlgo == ACE:
		// NULL graph_build_params: cuVS uses its own ACE defaults.
		*d.gbp = nil
		if a := p.ACE; a != nil {
			c.ace = cAlloc[generated.CuvsAceParams]()
			c.ace.Npartitions, c.ace.EfConstruction = uint64(a.NPartitions), uint64(a.EFConstruction)
			c.ace.UseDisk, c.ace.MaxHostMemoryGb, c.ace.MaxGpuMemoryGb = a.UseDisk, a.MaxHostMemoryGB, a.MaxGPUMemoryGB
			c.ace.BuildDir = (*byte)(unsafe.Pointer(C.CString(a.BuildDir))) // malloc'd, as cuVS expects
			*d.gbp = unsafe.Pointer(c.ace)
		}
	case p.IVFPQ != nil && c.created != nil:
		// Fill the IVF-PQ object Create made ({NULL, NULL, 1}); cuVS reads
		// it for IVF_PQ.
		ip := (*generated.CuvsIvfPqParams)(c.created)
		g := p.IVFPQ
		ip.RefinementRate = g.RefinementRate
		if g.Build != nil {
			if err := generated.CuvsIvfPqIndexParamsCreate(&ip.IvfPqBuildParams); err != nil {
				ip.IvfPqBuildParams = 0
				return c, kit.Wrap(op, err)
			}
			b, bp := g.Build, ip.IvfPqBuildParams
			bp.Ref().Metric, bp.Ref().MetricArg, bp.Ref().AddDataOnBuild = kit.CMetric(b.Metric), b.MetricArg, b.AddDataOnBuild
			bp.Ref().NLists, bp.Ref().KmeansNIters, bp.Ref().KmeansTrainsetFraction = b.NLists, b.KMeansNIters, b.KMeansTrainsetFraction
			bp.Ref().PqBits, bp.Ref().PqDim, bp.Ref().CodebookKind = b.PQBits, b.PQDim, generated.CuvsIvfPqCodebookGen(b.CodebookKind)
			bp.Ref().ForceRandomRotation, bp.Ref().ConservativeMemoryAllocation = b.ForceRandomRotation, b.ConservativeMemoryAllocation
			bp.Ref().MaxTrainPointsPerPqCode, bp.Ref().CodesLayout = b.MaxTrainPointsPerPQCode, generated.CuvsIvfPqListLayout(b.CodesLayout)
		}
		if g.Search != nil {
			if err := generated.CuvsIvfPqSearchParamsCreate(&ip.IvfPqSearchParams); err != nil {
				ip.IvfPqSearchParams = 0
				return c, kit.Wrap(op, err)
			}
			s, sp := g.Search, ip.IvfPqSearchParams
			sp.Ref().NProbes, sp.Ref().MaxInternalBatchSize, sp.Ref().PreferredShmemCarveout = s.NProbes, s.MaxInternalBatchSize, s.PreferredShmemCarveout
			sp.Ref().LutDtype = generated.CudaDataType_t(s.LUTDtype)
			sp.Ref().InternalDistanceDtype = generated.CudaDataType_t(s.InternalDistanceDtype)
			sp.Ref().CoarseSearchDtype = generated.CudaDataType_t(s.CoarseSearchDtype)
		}
	}
	if cp := p.Compression; cp != nil {
		if c.p.p08 != 0 {
			return c, compressionNotInRelease(op)
		}
		if err := generated.CuvsCagraCompressionParamsCreate(&c.compression); err != nil {
			c.compression = 0
			return c, kit.Wrap(op, err)
		}
		cc := c.compression
		cc.Ref().PqBits, cc.Ref().PqDim, cc.Ref().VqNCenters, cc.Ref().KmeansNIters = cp.PQBits, cp.PQDim, cp.VQNCenters, cp.KMeansNIters
		cc.Ref().VqKmeansTrainsetFraction, cc.Ref().PqKmeansTrainsetFraction = cp.VQKMeansTrainsetFraction, cp.PQKMeansTrainsetFraction
		c.p.p06.Ref().Compression = cc
	}
	return c, nil
}

// release frees what toC allocated.
func (c *cIndexParams) release() {
	if c.p.p06 != 0 {
		c.p.p06.Ref().Compression = 0 // ours: destroyed below
	}
	if !c.p.isNil() {
		destroyIndexParams(c.p, c.created)
	}
	if c.ace != nil {
		C.free(unsafe.Pointer(c.ace.BuildDir))
		C.free(unsafe.Pointer(c.ace))
	}
	if c.compression != 0 {
		_ = generated.CuvsCagraCompressionParamsDestroy(c.compression)
	}
	*c = cIndexParams{}
}

// destroyIndexParams destroys params made by cuvsCagraIndexParamsCreate,
// which put created (a cuvsIvfPqParams) in graph_build_params. Whatever
// graph_build_params and build_algo hold now, Destroy gets back created as
// IVF_PQ, so it frees exactly what Create allocated (it does not free the
// IVF-PQ build and search params created may point to: they are destroyed
// here first). A graph_build_params that is not created belongs to the
// caller, who frees it.
func destroyIndexParams(p cParams, created unsafe.Pointer) {
	if ip := (*generated.CuvsIvfPqParams)(created); ip != nil {
		if ip.IvfPqBuildParams != 0 {
			_ = generated.CuvsIvfPqIndexParamsDestroy(ip.IvfPqBuildParams)
			ip.IvfPqBuildParams = 0
		}
		if ip.IvfPqSearchParams != 0 {
			_ = generated.CuvsIvfPqSearchParamsDestroy(ip.IvfPqSearchParams)
			ip.IvfPqSearchParams = 0
		}
	}
	d := p.fields()
	*d.gbp = created
	*d.algo = generated.CuvsCagraGraphBuildAlgo_IVF_PQ
	_ = p.destroy()
}

// cParams is one C cuvsCagraIndexParams of the loaded release: 26.06's
// (56 bytes, with compression) or 26.08's (48 bytes, without), exactly one
// of them set.
type cParams struct {
	p06 generated.CuvsCagraIndexParams_t
	p08 generated.CuvsCagraIndexParams_t_v2608
}

// paramsFields points at the members both layouts share.
type paramsFields struct {
	metric  *generated.CuvsDistanceType
	igd, gd *uint64
	algo    *generated.CuvsCagraGraphBuildAlgo
	niter   *uint64
	gbp     *unsafe.Pointer
}

// createParams calls the loaded release's cuvsCagraIndexParamsCreate.
func createParams() (cParams, error) {
	var c cParams
	if release.Has(release.CagraDataset) {
		if err := generated.CuvsCagraIndexParamsCreate_v2608(&c.p08); err != nil {
			return cParams{}, err
		}
		return c, nil
	}
	if err := generated.CuvsCagraIndexParamsCreate(&c.p06); err != nil {
		return cParams{}, err
	}
	return c, nil
}

func (c cParams) isNil() bool { return c.p06 == 0 && c.p08 == 0 }

func (c cParams) fields() paramsFields {
	if d := c.p08; d != 0 {
		return paramsFields{&d.Ref().Metric, &d.Ref().IntermediateGraphDegree, &d.Ref().GraphDegree, &d.Ref().BuildAlgo, &d.Ref().NnDescentNiter, &d.Ref().GraphBuildParams}
	}
	d := c.p06
	return paramsFields{&d.Ref().Metric, &d.Ref().IntermediateGraphDegree, &d.Ref().GraphDegree, &d.Ref().BuildAlgo, &d.Ref().NnDescentNiter, &d.Ref().GraphBuildParams}
}

// destroy calls the loaded release's cuvsCagraIndexParamsDestroy.
func (c cParams) destroy() error {
	if c.p08 != 0 {
		return generated.CuvsCagraIndexParamsDestroy_v2608(c.p08)
	}
	return generated.CuvsCagraIndexParamsDestroy(c.p06)
}

// fromC reads the shared members back.
func (c cParams) fromC() IndexParams {
	d := c.fields()
	return IndexParams{
		Metric:                  safe.Metric(*d.metric),
		IntermediateGraphDegree: int(*d.igd),
		GraphDegree:             int(*d.gd),
		BuildAlgo:               GraphBuildAlgo(*d.algo),
		NNDescentIterations:     int(*d.niter),
	}
}

// compressionNotInRelease refuses CompressionParams on 26.08: its
// cuvsCagraIndexParams lost the compression member and no call of its C
// API takes cuvsCagraCompressionParams (cuvsCagraCompressionParamsCreate
// stays, unused).
func compressionNotInRelease(op string) error {
	return kit.Argf(op, "params.Compression", "cuVS %s takes no compression parameters (its cuvsCagraIndexParams has no compression member, and no C call takes them; VPQ compression is cuVS 26.06's)", generated.Release())
}

func aceFromC(a *generated.CuvsAceParams) *ACEParams {
	out := &ACEParams{
		NPartitions: int(a.Npartitions), EFConstruction: int(a.EfConstruction), UseDisk: a.UseDisk,
		MaxHostMemoryGB: a.MaxHostMemoryGb, MaxGPUMemoryGB: a.MaxGpuMemoryGb,
	}
	if a.BuildDir != nil {
		out.BuildDir = C.GoString((*C.char)(unsafe.Pointer(a.BuildDir)))
	}
	return out
}

// cDLManaged allocates a zeroed DLManagedTensor in C memory, for functions
// that fill one in (the dataset and graph getters).
func cDLManaged() *generated.DLManagedTensor { return cAlloc[generated.DLManagedTensor]() }

func cFree(p unsafe.Pointer) { C.free(p) }

// checkCompression refuses, for a rows × dim dataset, the compression
// parameters cuVS v26.06 would fail on inside the build (vpq_dataset.cuh):
// zeros are first replaced as cuVS replaces them (PQBits 8, PQDim
// ceil(dim/4), VQNCenters sqrt(rows) rounded up to 8, the VQ training
// fraction min(1, 100·VQNCenters/rows), the PQ one min(1,
// 1000·2^PQBits/rows)).
func (p *IndexParams) checkCompression(op string, rows, dim int64) error {
	c := p.Compression
	if c == nil {
		return nil
	}
	if p.Metric != safe.L2Expanded {
		return kit.Argf(op, "params.Compression", "compression supports L2Expanded only, Metric is %s", p.Metric)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"VQKMeansTrainsetFraction", c.VQKMeansTrainsetFraction}, {"PQKMeansTrainsetFraction", c.PQKMeansTrainsetFraction}} {
		if !(f.v >= 0 && f.v <= 1) {
			return kit.Argf(op, "params.Compression."+f.name, "%g is not a fraction in [0, 1] (0: cuVS chooses)", f.v)
		}
	}
	bits := int64(c.PQBits)
	if bits == 0 {
		bits = 8
	}
	if bits < 4 || bits > 16 {
		return kit.Argf(op, "params.Compression.PQBits", "%d, want 4 to 16 (0: 8)", c.PQBits)
	}
	if centers := int64(1) << bits; rows < centers {
		return kit.Argf(op, "params.Compression.PQBits", "%d bits make %d PQ centers, but the dataset has only %d rows to train them: compress a larger dataset (or lower PQBits, at least 4, though cuVS searches only 8-bit codes)", bits, centers, rows)
	}
	// The PQ codebooks train on floor(rows·fraction / 2^bits) rows per
	// center (vpq_dataset.cuh, pq.cuh): fewer than one fails.
	pqFrac := c.PQKMeansTrainsetFraction
	if pqFrac == 0 {
		pqFrac = min(1, 1000*float64(int64(1)<<bits)/float64(rows))
	}
	if per := int64(float64(rows) * pqFrac / float64(int64(1)<<bits)); per < 1 {
		return kit.Argf(op, "params.Compression.PQKMeansTrainsetFraction", "%g of %d rows trains fewer rows than the %d PQ centers of %d bits: raise the fraction or lower PQBits", pqFrac, rows, int64(1)<<bits, bits)
	}
	pqDim := int64(c.PQDim)
	if pqDim == 0 {
		pqDim = (dim + 3) / 4
	}
	if pqDim > dim || dim%pqDim != 0 {
		return kit.Argf(op, "params.Compression.PQDim", "%d does not divide the dimension %d: choose a divisor of %d (0: ceil(dim/4), which must divide it too)", pqDim, dim, dim)
	}
	vq := int64(c.VQNCenters)
	if vq == 0 {
		vq = (int64(math.Ceil(math.Sqrt(float64(rows)))) + 7) / 8 * 8
	}
	frac := c.VQKMeansTrainsetFraction
	if frac == 0 {
		frac = min(1, 100*float64(vq)/float64(rows))
	}
	if train := int64(float64(rows) * frac); train < vq {
		return kit.Argf(op, "params.Compression.VQNCenters", "%d VQ centers, but only %d rows train them (%d rows × VQKMeansTrainsetFraction %g): lower VQNCenters or raise the fraction", vq, train, rows, frac)
	}
	return nil
}
