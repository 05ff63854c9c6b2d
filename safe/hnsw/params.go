package hnsw

import (
	"fmt"
	"math"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Hierarchy says which layers an HNSW index has (cuvsHnswHierarchy).
type Hierarchy int32

// The hierarchies.
const (
	// HierarchyNone keeps the base layer only: a search starts from the
	// nearest of 32 evenly spaced rows (cuVS's hnswlib patch,
	// base_layer_only). Such an index cannot be extended.
	HierarchyNone Hierarchy = Hierarchy(generated.CuvsHnswHierarchy_NONE)
	// HierarchyCPU builds the upper layers on the CPU (hnswlib's
	// insertion over the rows given a level above 0). The only hierarchy
	// cuVS documents as extendable.
	HierarchyCPU Hierarchy = Hierarchy(generated.CuvsHnswHierarchy_CPU)
	// HierarchyGPU builds the upper layers on the GPU. cuVS's default.
	HierarchyGPU Hierarchy = Hierarchy(generated.CuvsHnswHierarchy_GPU)
)

// String returns "None", "CPU" or "GPU".
func (h Hierarchy) String() string {
	switch h {
	case HierarchyNone:
		return "None"
	case HierarchyCPU:
		return "CPU"
	case HierarchyGPU:
		return "GPU"
	}
	return fmt.Sprintf("Hierarchy(%d)", int32(h))
}

func (h Hierarchy) valid() bool { return h == HierarchyNone || h == HierarchyCPU || h == HierarchyGPU }

// ACEParams configures the ACE graph build of Build (cuvsHnswAceParams):
// the dataset split into partitions built one at a time, optionally
// through files in BuildDir. Start from DefaultACEParams.
type ACEParams struct {
	// NPartitions is the number of partitions (0: chosen by cuVS).
	NPartitions uint64
	// BuildDir is where ACE writes its files when UseDisk is set (cuVS's
	// default "/tmp/hnsw_ace_build"; "" means that default). With UseDisk,
	// cuVS leaves the HNSW index there as hnsw_index.bin and the index is
	// loaded from it at its first use.
	BuildDir string
	// UseDisk builds through files in BuildDir instead of host memory.
	// cuVS converts a graph on disk for HierarchyNone and HierarchyGPU
	// only: Build refuses UseDisk with HierarchyCPU.
	UseDisk bool
	// MaxHostMemoryGB and MaxGPUMemoryGB bound the memory ACE may use (0:
	// what is available); below its needs ACE falls back to disk, where
	// cuVS then refuses HierarchyCPU (an error after the build: Build
	// cannot foresee ACE's estimate).
	MaxHostMemoryGB, MaxGPUMemoryGB float64
}

// IndexParams configures Build, FromCagra and Deserialize
// (cuvsHnswIndexParams). Start from DefaultIndexParams.
//
// Which fields each call reads (c/src/neighbors/hnsw.cpp): Build all of
// them; FromCagra Hierarchy, EfConstruction and NumThreads (the metric and
// the graph are the CAGRA index's); Deserialize Hierarchy only. The zero
// IndexParams is refused by Build and FromCagra (EfConstruction must be at
// least 1; Build needs M and a metric too).
type IndexParams struct {
	// Hierarchy: HierarchyNone, HierarchyCPU or HierarchyGPU (cuVS's
	// default).
	Hierarchy Hierarchy
	// EfConstruction is the candidate list size of the upper layers'
	// insertion (and of Extend), at least 1.
	EfConstruction int32
	// NumThreads is the number of CPU threads (0: all).
	NumThreads int32
	// M is Build's graph parameter: the CAGRA graph built has degree 2*M;
	// at least 1.
	M uint64
	// Metric is Build's metric: L2Expanded (squared distances) or
	// InnerProduct (distance 1 - <q, x>, hnswlib's).
	Metric safe.Metric
	// ACE configures Build's graph build; nil means DefaultACEParams (cuVS
	// refuses a build without ACE parameters).
	ACE *ACEParams
}

// SearchParams configures Search (cuvsHnswSearchParams). A zero Ef means
// cuVS's default; the zero SearchParams, like nil, is cuVS's defaults.
//
// Serving: keep one Ef per index (a search with another Ef waits for the
// searches in flight: see Index) and NumThreads 1 for one-query searches
// (cuVS starts an OpenMP team of NumThreads per call, all cores for 0).
// Copies of the index (DeserializeFrom) buy nothing more and cost the
// memory again.
type SearchParams struct {
	// Ef is the candidate list size; hnswlib searches with max(Ef, k)
	// candidates, so recall grows with it (0: cuVS's default, 200).
	Ef int32
	// NumThreads is the number of CPU threads the queries are spread over
	// (0: all of OpenMP's).
	NumThreads int32
}

// ExtendParams configures Extend (cuvsHnswExtendParams).
type ExtendParams struct {
	// NumThreads is the number of CPU threads (0: all).
	NumThreads int32
}

// DefaultIndexParams returns cuVS's defaults, read from the loaded library
// (cuvsHnswIndexParamsCreate/Destroy): hierarchy GPU, ef_construction 200,
// all threads, M 32, L2Expanded, no ACE parameters (ACE nil, which Build
// fills with DefaultACEParams), in v26.06 and v26.08.
func DefaultIndexParams() (IndexParams, error) {
	const op = "hnsw.DefaultIndexParams"
	var p generated.CuvsHnswIndexParams_t
	if err := generated.CuvsHnswIndexParamsCreate(&p); err != nil {
		return IndexParams{}, wrap(op, err)
	}
	out := IndexParams{
		Hierarchy: Hierarchy(p.Ref().Hierarchy), EfConstruction: p.Ref().EfConstruction, NumThreads: p.Ref().NumThreads,
		M: p.Ref().M, Metric: safe.Metric(p.Ref().Metric),
	}
	return out, wrap(op, generated.CuvsHnswIndexParamsDestroy(p))
}

// DefaultACEParams returns cuVS's ACE defaults, read from the library
// (cuvsHnswAceParamsCreate/Destroy): partitions chosen by cuVS, build
// directory /tmp/hnsw_ace_build, in memory, no memory limits.
func DefaultACEParams() (ACEParams, error) {
	const op = "hnsw.DefaultACEParams"
	var p generated.CuvsHnswAceParams_t
	if err := generated.CuvsHnswAceParamsCreate(&p); err != nil {
		return ACEParams{}, wrap(op, err)
	}
	out := ACEParams{
		NPartitions: p.Ref().Npartitions, BuildDir: goString(p.Ref().BuildDir), UseDisk: p.Ref().UseDisk,
		MaxHostMemoryGB: p.Ref().MaxHostMemoryGb, MaxGPUMemoryGB: p.Ref().MaxGpuMemoryGb,
	}
	return out, wrap(op, generated.CuvsHnswAceParamsDestroy(p))
}

// DefaultSearchParams returns cuVS's search defaults, read from the library
// (cuvsHnswSearchParamsCreate/Destroy): ef 200, all threads.
func DefaultSearchParams() (SearchParams, error) {
	const op = "hnsw.DefaultSearchParams"
	var p generated.CuvsHnswSearchParams_t
	if err := generated.CuvsHnswSearchParamsCreate(&p); err != nil {
		return SearchParams{}, wrap(op, err)
	}
	out := SearchParams{Ef: p.Ref().Ef, NumThreads: p.Ref().NumThreads}
	return out, wrap(op, generated.CuvsHnswSearchParamsDestroy(p))
}

// DefaultExtendParams returns cuVS's extend defaults, read from the library
// (cuvsHnswExtendParamsCreate/Destroy): all threads.
func DefaultExtendParams() (ExtendParams, error) {
	const op = "hnsw.DefaultExtendParams"
	var p generated.CuvsHnswExtendParams_t
	if err := generated.CuvsHnswExtendParamsCreate(&p); err != nil {
		return ExtendParams{}, wrap(op, err)
	}
	out := ExtendParams{NumThreads: p.Ref().NumThreads}
	return out, wrap(op, generated.CuvsHnswExtendParamsDestroy(p))
}

// validate checks what the calls read (build: every field).
func (p *IndexParams) validate(op string, build bool) error {
	if !p.Hierarchy.valid() {
		return kit.Argf(op, "params.Hierarchy", "%s, want HierarchyNone, HierarchyCPU or HierarchyGPU", p.Hierarchy)
	}
	if p.EfConstruction < 1 {
		return kit.Argf(op, "params.EfConstruction", "%d, want at least 1", p.EfConstruction)
	}
	if p.NumThreads < 0 {
		return kit.Argf(op, "params.NumThreads", "%d, want 0 (all) or more", p.NumThreads)
	}
	if !build {
		return nil
	}
	if p.M < 1 || p.M > math.MaxInt32/3 {
		return kit.Argf(op, "params.M", "%d, want 1 to %d", p.M, math.MaxInt32/3)
	}
	if err := checkMetric(op, "params.Metric", p.Metric); err != nil {
		return err
	}
	if a := p.ACE; a != nil {
		if a.MaxHostMemoryGB < 0 || math.IsNaN(a.MaxHostMemoryGB) || math.IsInf(a.MaxHostMemoryGB, 0) {
			return kit.Argf(op, "params.ACE.MaxHostMemoryGB", "%v, want 0 (no limit) or a positive size", a.MaxHostMemoryGB)
		}
		if a.MaxGPUMemoryGB < 0 || math.IsNaN(a.MaxGPUMemoryGB) || math.IsInf(a.MaxGPUMemoryGB, 0) {
			return kit.Argf(op, "params.ACE.MaxGPUMemoryGB", "%v, want 0 (no limit) or a positive size", a.MaxGPUMemoryGB)
		}
		if a.UseDisk && p.Hierarchy == HierarchyCPU {
			return errDiskCPU(op)
		}
	}
	return nil
}

// errDiskCPU is the refusal of the CPU hierarchy for a CAGRA graph on
// disk: cuVS converts such a graph by streaming the files into
// hnsw_index.bin, and that path refuses the CPU hierarchy (detail/hnsw.hpp:
// "Disk2disk serialization not supported for CPU hierarchy." in
// serialize_to_hnswlib_from_disk, v26.06; "Disk serialization not
// supported for CPU hierarchy." in serialize_to_hnswlib_batched, v26.08),
// after the whole ACE build.
func errDiskCPU(op string) error {
	return kit.Argf(op, "params.Hierarchy", "HierarchyCPU with a graph on disk: cuVS converts an on-disk CAGRA graph for HierarchyNone or HierarchyGPU only (use HierarchyGPU, the default)")
}

// checkMetric refuses what hnswlib has no space for: index_impl's
// constructor takes L2Expanded and InnerProduct only.
func checkMetric(op, arg string, m safe.Metric) error {
	if m != safe.L2Expanded && m != safe.InnerProduct {
		return kit.Argf(op, arg, "%s is not supported by HNSW (L2Expanded, InnerProduct)", m)
	}
	return nil
}

func (p *IndexParams) cValue() generated.CuvsHnswIndexParams {
	return generated.CuvsHnswIndexParams{
		Hierarchy: generated.CuvsHnswHierarchy(p.Hierarchy), EfConstruction: p.EfConstruction,
		NumThreads: p.NumThreads, M: p.M, Metric: kit.CMetric(p.Metric),
	}
}

// resolve returns the parameters a search uses: s with a zero Ef replaced
// by cuVS's default (read once), or the defaults for a nil s.
func (s *SearchParams) resolve(op string) (SearchParams, error) {
	d, err := searchDefaults.Get()
	if err != nil {
		return SearchParams{}, err
	}
	if s == nil {
		return *d, nil
	}
	r := *s
	if r.Ef == 0 {
		r.Ef = d.Ef
	}
	if r.Ef < 0 {
		return r, kit.Argf(op, "params.Ef", "%d, want 0 (the default) or more", r.Ef)
	}
	if r.NumThreads < 0 {
		return r, kit.Argf(op, "params.NumThreads", "%d, want 0 (all) or more", r.NumThreads)
	}
	return r, nil
}

var searchDefaults = kit.Defaults[SearchParams]{Read: DefaultSearchParams}
