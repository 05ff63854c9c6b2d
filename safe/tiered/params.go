package tiered

import (
	"fmt"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/release"
)

// Backend is the ANN index under the tiered index (cuvsTieredIndexANNAlgo).
type Backend int32

// The backends.
const (
	CAGRA   Backend = Backend(generated.CuvsTieredIndexANNAlgo_CUVS_TIERED_INDEX_ALGO_CAGRA)
	IVFFlat Backend = Backend(generated.CuvsTieredIndexANNAlgo_CUVS_TIERED_INDEX_ALGO_IVF_FLAT)
	IVFPQ   Backend = Backend(generated.CuvsTieredIndexANNAlgo_CUVS_TIERED_INDEX_ALGO_IVF_PQ)
)

// String returns "CAGRA", "IVFFlat" or "IVFPQ".
func (b Backend) String() string {
	switch b {
	case CAGRA:
		return "CAGRA"
	case IVFFlat:
		return "IVFFlat"
	case IVFPQ:
		return "IVFPQ"
	}
	return fmt.Sprintf("Backend(%d)", int32(b))
}

func (b Backend) valid() bool { return b == CAGRA || b == IVFFlat || b == IVFPQ }

// CAGRAParams are the CAGRA backend's build parameters (a
// cuvsCagraIndexParams made by cuvsCagraIndexParamsCreate, then these
// fields). A zero field keeps cuVS's default. As cuVS's cagra::build does
// (check_graph_degree; see safe/cagra's IndexParams), the ANN index's build
// lowers IntermediateGraphDegree to rows-1 when it is not below the number
// of rows, and GraphDegree to the (lowered) IntermediateGraphDegree when
// above it: an IntermediateGraphDegree below GraphDegree is not refused, the
// graph is built with degree IntermediateGraphDegree.
type CAGRAParams struct {
	GraphDegree, IntermediateGraphDegree uint64
}

// IVFFlatParams are the IVF-Flat backend's build parameters (a
// cuvsIvfFlatIndexParams from cuvsIvfFlatIndexParamsCreate, then these
// fields). A zero field keeps cuVS's default (1024 lists: at least that
// many rows are needed when the ANN index is built).
type IVFFlatParams struct {
	NLists, KMeansNIters uint32
	AdaptiveCenters      bool
}

// IVFPQParams are the IVF-PQ backend's build parameters (a
// cuvsIvfPqIndexParams from cuvsIvfPqIndexParamsCreate, then these
// fields). A zero field keeps cuVS's default.
type IVFPQParams struct {
	NLists, KMeansNIters, PQBits, PQDim uint32
}

// IndexParams configures Build and Merge (cuvsTieredIndexParams). Start
// from DefaultIndexParams. Only the Backend's own parameters are read.
type IndexParams struct {
	// Backend is the ANN index: CAGRA (cuVS's default), IVFFlat or IVFPQ.
	Backend Backend
	// Metric: L2Expanded, L2SqrtExpanded, InnerProduct or CosineExpanded
	// (what the brute-force tier supports; CAGRA takes L2Expanded,
	// InnerProduct and CosineExpanded). It is set in the backend's
	// parameters too: cuVS keeps the backend's metric over the tiered one.
	Metric safe.Metric
	// MinANNRows: an ANN index is built only over more rows than this
	// (cuVS's default 100000); below it every row is searched by brute force.
	MinANNRows int64
	// CreateANNIndexOnExtend rebuilds the ANN index over every live row
	// when an Extend leaves more than MinANNRows rows in the brute-force
	// tier (dropping the deleted rows: a compaction).
	CreateANNIndexOnExtend bool
	CAGRA                  CAGRAParams
	IVFFlat                IVFFlatParams
	IVFPQ                  IVFPQParams
}

// CAGRASearchParams are the CAGRA backend's search parameters (a zero
// field keeps cuVS's default, read from cuvsCagraSearchParamsCreate).
type CAGRASearchParams struct {
	ITopKSize, SearchWidth, MaxIterations uint64
}

// IVFSearchParams are an IVF backend's search parameters (a zero NProbes
// keeps cuVS's default).
type IVFSearchParams struct {
	NProbes uint32
}

// SearchParams configures Search: the backend's search parameters (the
// C API's void* search_params), only the index's backend's being read.
// The zero SearchParams, like nil, is cuVS's defaults.
type SearchParams struct {
	CAGRA   CAGRASearchParams
	IVFFlat IVFSearchParams
	IVFPQ   IVFSearchParams
}

// DefaultIndexParams returns cuVS's defaults, read from the library
// (cuvsTieredIndexParamsCreate/Destroy): CAGRA, L2Expanded, 100000
// minimum ANN rows, no ANN rebuild on Extend, the backend's own defaults.
func DefaultIndexParams() (IndexParams, error) {
	const op = "tiered.DefaultIndexParams"
	var out IndexParams
	if release.Has(release.TieredParams2608) {
		var p generated.CuvsTieredIndexParams_t_v2608
		if err := generated.CuvsTieredIndexParamsCreate_v2608(&p); err != nil {
			return IndexParams{}, kit.Wrap(op, err)
		}
		out = IndexParams{Backend: Backend(p.Ref().Algo), Metric: safe.Metric(p.Ref().Metric), MinANNRows: p.Ref().MinAnnRows, CreateANNIndexOnExtend: p.Ref().CreateAnnIndexOnExtend}
		return out, kit.Wrap(op, generated.CuvsTieredIndexParamsDestroy_v2608(p))
	}
	var p generated.CuvsTieredIndexParams_t
	if err := generated.CuvsTieredIndexParamsCreate(&p); err != nil {
		return IndexParams{}, kit.Wrap(op, err)
	}
	out = IndexParams{Backend: Backend(p.Ref().Algo), Metric: safe.Metric(p.Ref().Metric), MinANNRows: p.Ref().MinAnnRows, CreateANNIndexOnExtend: p.Ref().CreateAnnIndexOnExtend}
	return out, kit.Wrap(op, generated.CuvsTieredIndexParamsDestroy(p))
}

func (p *IndexParams) validate(op string) error {
	if !p.Backend.valid() {
		return kit.Argf(op, "params.Backend", "%s, want CAGRA, IVFFlat or IVFPQ", p.Backend)
	}
	switch p.Metric {
	case safe.L2Expanded, safe.InnerProduct, safe.CosineExpanded:
	case safe.L2SqrtExpanded:
		if p.Backend == CAGRA {
			return kit.Argf(op, "params.Metric", "%s is not supported by CAGRA (L2Expanded, InnerProduct, CosineExpanded)", p.Metric)
		}
	default:
		return kit.Argf(op, "params.Metric", "%s is not supported by the tiered index (L2Expanded, L2SqrtExpanded, InnerProduct, CosineExpanded)", p.Metric)
	}
	if p.MinANNRows < 0 {
		return kit.Argf(op, "params.MinANNRows", "%d, want 0 or more", p.MinANNRows)
	}
	if p.Backend == IVFPQ && p.IVFPQ.PQBits != 0 && (p.IVFPQ.PQBits < 4 || p.IVFPQ.PQBits > 8) {
		return kit.Argf(op, "params.IVFPQ.PQBits", "%d, want 4 to 8", p.IVFPQ.PQBits)
	}
	return nil
}

// annLists is the number of lists an IVF backend's build needs rows for
// (0 for CAGRA), with cuVS's default for a zero field.
func (p *IndexParams) annLists() int64 {
	switch p.Backend {
	case IVFFlat:
		if p.IVFFlat.NLists != 0 {
			return int64(p.IVFFlat.NLists)
		}
		return 1024
	case IVFPQ:
		if p.IVFPQ.NLists != 0 {
			return int64(p.IVFPQ.NLists)
		}
		return 1024
	}
	return 0
}
