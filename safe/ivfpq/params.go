package ivfpq

import (
	"strconv"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// CodebookKind is how Build trains the PQ codebooks
// (cuvsIvfPqCodebookGen).
type CodebookKind int32

// Codebook kinds. The zero value is PerSubspace.
const (
	// PerSubspace trains one codebook per PQ sub-space, shared by all lists.
	PerSubspace = CodebookKind(generated.CuvsIvfPqCodebookGen_CUVS_IVF_PQ_CODEBOOK_GEN_PER_SUBSPACE)
	// PerCluster trains one codebook per list, shared by its sub-spaces.
	PerCluster = CodebookKind(generated.CuvsIvfPqCodebookGen_CUVS_IVF_PQ_CODEBOOK_GEN_PER_CLUSTER)
)

// String returns "PerSubspace" or "PerCluster".
func (k CodebookKind) String() string {
	switch k {
	case PerSubspace:
		return "PerSubspace"
	case PerCluster:
		return "PerCluster"
	}
	return "CodebookKind(" + strconv.Itoa(int(k)) + ")"
}

// CodesLayout is how the lists store the PQ codes (cuvsIvfPqListLayout).
type CodesLayout int32

// Code layouts. The zero value is Flat, which cuVS cannot search: start
// from DefaultIndexParams (Interleaved).
const (
	// Flat stores each vector's codes one after another. cuVS v26.06
	// refuses to search (and to unpack) an index with this layout; it is
	// for indexes whose codes are read out (Transform-style use).
	Flat = CodesLayout(generated.CuvsIvfPqListLayout_CUVS_IVF_PQ_LIST_LAYOUT_FLAT)
	// Interleaved interleaves the codes for the search kernels: cuVS's
	// default, and the layout Search needs.
	Interleaved = CodesLayout(generated.CuvsIvfPqListLayout_CUVS_IVF_PQ_LIST_LAYOUT_INTERLEAVED)
)

// String returns "Flat" or "Interleaved".
func (l CodesLayout) String() string {
	switch l {
	case Flat:
		return "Flat"
	case Interleaved:
		return "Interleaved"
	}
	return "CodesLayout(" + strconv.Itoa(int(l)) + ")"
}

// CUDAType is a CUDA data type (cudaDataType_t), for the search's internal
// precision. Its values are CUDA's (library_types.h): CUDA_R_32F is 0, so
// the zero value is CUDAFloat32.
type CUDAType int32

// The CUDA data types cuVS's IVF-PQ search accepts somewhere.
const (
	CUDAFloat32 CUDAType = 0 // CUDA_R_32F
	CUDAFloat16 CUDAType = 2 // CUDA_R_16F
	CUDAInt8    CUDAType = 3 // CUDA_R_8I
	CUDAUint8   CUDAType = 8 // CUDA_R_8U
)

// String returns CUDA's name, e.g. "CUDA_R_32F".
func (t CUDAType) String() string {
	switch t {
	case CUDAFloat32:
		return "CUDA_R_32F"
	case CUDAFloat16:
		return "CUDA_R_16F"
	case CUDAInt8:
		return "CUDA_R_8I"
	case CUDAUint8:
		return "CUDA_R_8U"
	}
	return "cudaDataType_t(" + strconv.Itoa(int(t)) + ")"
}

// size is the element size search uses for t (a LUT of CUDA_R_8U holds
// one byte per entry).
func (t CUDAType) size() int {
	switch t {
	case CUDAFloat16:
		return 2
	case CUDAInt8, CUDAUint8:
		return 1
	}
	return 4
}

// IndexParams configures Build and BuildPrecomputed
// (cuvsIvfPqIndexParams). Start from DefaultIndexParams, which holds
// cuVS's defaults read from the library, and change what you need; Build
// checks every field before any C call.
//
// The zero value is refused (NLists, PQBits, KMeansNIters,
// KMeansTrainsetFraction and MaxTrainPointsPerPQCode must be set): there is
// no useful IVF-PQ index without them.
type IndexParams struct {
	// Metric is the distance: IVF-PQ supports L2Expanded, L2SqrtExpanded,
	// InnerProduct and CosineExpanded.
	Metric safe.Metric
	// MetricArg is passed to cuVS (unused by the supported metrics).
	MetricArg float32
	// AddDataOnBuild adds the dataset's rows to the index (ids 0..n-1);
	// false only trains the coarse centres and codebooks, and Extend fills
	// the index later.
	AddDataOnBuild bool
	// NLists is the number of inverted lists (coarse clusters), at least 1
	// and at most the dataset's rows. cuVS suggests 1,000 to 10,000 rows per
	// list.
	NLists uint32
	// KMeansNIters is the number of k-means iterations while training, at
	// least 1.
	KMeansNIters uint32
	// KMeansTrainsetFraction is the fraction of the rows that trains the
	// coarse k-means, in (0, 1].
	KMeansTrainsetFraction float64
	// PQBits is the bit length of one PQ code, 4 to 8: each sub-space's
	// codebook has 2^PQBits centres. Fewer bits, smaller index, lower recall.
	PQBits uint32
	// PQDim is the number of PQ sub-spaces (codes per vector); 0 lets cuVS
	// choose from the dimension. PQDim × PQBits must be a multiple of 8
	// (with PQDim 0, for the dimension cuVS would choose).
	PQDim uint32
	// CodebookKind says how codebooks are trained.
	CodebookKind CodebookKind
	// ForceRandomRotation rotates the data randomly even when the dimension
	// is a multiple of PQDim (otherwise the rotation is the identity then).
	ForceRandomRotation bool
	// ConservativeMemoryAllocation sizes the lists exactly rather than
	// with room to grow (Extend then reallocates more often).
	ConservativeMemoryAllocation bool
	// MaxTrainPointsPerPQCode bounds the training points per codebook
	// entry, at least 1.
	MaxTrainPointsPerPQCode uint32
	// CodesLayout is how the lists store codes; Search needs Interleaved.
	CodesLayout CodesLayout
}

// SearchParams configures Search (cuvsIvfPqSearchParams). A zero field
// means cuVS's default (DefaultSearchParams): the zero SearchParams, like
// nil params, is cuVS's defaults (its CUDA types, CUDAFloat32, are cuVS's
// defaults too).
type SearchParams struct {
	// NProbes is the number of lists searched per query (0: cuVS's
	// default); more than NLists searches them all.
	NProbes uint32
	// LUTDtype is the type of the look-up table built per query:
	// CUDAFloat32, CUDAFloat16 or CUDAUint8 (smaller is faster, with lower
	// recall). It may not be larger than InternalDistanceDtype.
	LUTDtype CUDAType
	// InternalDistanceDtype stores the distances while searching:
	// CUDAFloat32 or CUDAFloat16.
	InternalDistanceDtype CUDAType
	// CoarseSearchDtype is the element type of the GEMM that picks the
	// lists to probe: CUDAFloat32, CUDAFloat16 or CUDAInt8 (cuVS warns
	// that int8 loses recall unless the data are normalized and of low
	// dimension).
	CoarseSearchDtype CUDAType
	// MaxInternalBatchSize is the number of queries cuVS searches at once
	// (0: cuVS's default).
	MaxInternalBatchSize uint32
	// PreferredShmemCarveout is the preferred fraction of the unified L1 /
	// shared memory used as shared memory, in (0, 1] (a hint; 0: cuVS's
	// default, 1 in v26.06; ask for a small positive value for little
	// shared memory).
	PreferredShmemCarveout float64
	// FilterPath chooses how a filtered search (Index.NewFiltered) runs;
	// unfiltered searches ignore it. The zero value is safe.FilterAuto.
	// cuVS's IVF-PQ search takes no filter (v26.06 and v26.08: its C
	// search has no filter argument; cuVS PR #1478 would add one): the
	// package filters the candidates itself.
	//
	// safe.FilterAuto (the zero value): exact brute force over the dataset
	// (when one was given) for selective filters, the over-fetch path
	// otherwise; see Index.NewFiltered.
	//
	// safe.FilterIndex always takes the over-fetch path (with refine when a
	// dataset was given) with the caller's NProbes, not raised: it costs
	// what the unfiltered search does and loses recall as the filter gets
	// selective (allowed rows in unprobed lists are never seen). On the
	// double (20,000 × 64 uniform, 1,024 lists, 20 probes, 100 queries,
	// k 10) recall@10 at 50% allowed was 0.381 against the unfiltered
	// 0.450; safe.FilterAuto's 29 probes gave 0.429 (1.3 times the cost).
	//
	// safe.FilterExact always takes the exact path: brute force with the
	// filter over the dataset, which must be given.
	FilterPath safe.FilterPath
}

// DefaultIndexParams returns cuVS's defaults, read from the loaded library
// (cuvsIvfPqIndexParamsCreate, cuvsIvfPqIndexParamsDestroy): in cuVS
// v26.06 L2Expanded, 1024 lists, 20 k-means iterations on half the rows, 8
// bits, PQDim 0 (cuVS chooses), codebooks per sub-space, 256 training points
// per code, the interleaved layout, data added on build.
func DefaultIndexParams() (IndexParams, error) {
	const op = "ivfpq.DefaultIndexParams"
	var p generated.CuvsIvfPqIndexParams_t
	if err := generated.CuvsIvfPqIndexParamsCreate(&p); err != nil {
		return IndexParams{}, kit.Wrap(op, err)
	}
	out := IndexParams{
		Metric: safe.Metric(p.Ref().Metric), MetricArg: p.Ref().MetricArg, AddDataOnBuild: p.Ref().AddDataOnBuild,
		NLists: p.Ref().NLists, KMeansNIters: p.Ref().KmeansNIters, KMeansTrainsetFraction: p.Ref().KmeansTrainsetFraction,
		PQBits: p.Ref().PqBits, PQDim: p.Ref().PqDim, CodebookKind: CodebookKind(p.Ref().CodebookKind),
		ForceRandomRotation: p.Ref().ForceRandomRotation, ConservativeMemoryAllocation: p.Ref().ConservativeMemoryAllocation,
		MaxTrainPointsPerPQCode: p.Ref().MaxTrainPointsPerPqCode, CodesLayout: CodesLayout(p.Ref().CodesLayout),
	}
	return out, kit.Wrap(op, generated.CuvsIvfPqIndexParamsDestroy(p))
}

// DefaultSearchParams returns cuVS's defaults, read from the loaded
// library (cuvsIvfPqSearchParamsCreate, cuvsIvfPqSearchParamsDestroy): in
// cuVS v26.06 20 probes, float32 everywhere, batches of 4096 queries, a
// shared-memory carveout of 1.
func DefaultSearchParams() (SearchParams, error) {
	const op = "ivfpq.DefaultSearchParams"
	var p generated.CuvsIvfPqSearchParams_t
	if err := generated.CuvsIvfPqSearchParamsCreate(&p); err != nil {
		return SearchParams{}, kit.Wrap(op, err)
	}
	out := SearchParams{
		NProbes: p.Ref().NProbes, LUTDtype: CUDAType(p.Ref().LutDtype), InternalDistanceDtype: CUDAType(p.Ref().InternalDistanceDtype),
		CoarseSearchDtype: CUDAType(p.Ref().CoarseSearchDtype), MaxInternalBatchSize: p.Ref().MaxInternalBatchSize,
		PreferredShmemCarveout: p.Ref().PreferredShmemCarveout,
	}
	return out, kit.Wrap(op, generated.CuvsIvfPqSearchParamsDestroy(p))
}

// metricOK reports whether IVF-PQ supports m (its search kernels do
// L2Expanded, L2SqrtExpanded, InnerProduct and CosineExpanded).
func metricOK(m safe.Metric) bool {
	switch m {
	case safe.L2Expanded, safe.L2SqrtExpanded, safe.InnerProduct, safe.CosineExpanded:
		return true
	}
	return false
}

// calcPQDim is cuVS's choice of PQDim for a dimension when PQDim is 0
// (ivf_pq::index::calculate_pq_dim).
func calcPQDim(dim uint32) uint32 {
	if dim >= 128 {
		dim /= 2
	}
	if r := dim / 32 * 32; r > 0 {
		return r
	}
	r := uint32(1)
	for r<<1 <= dim {
		r <<= 1
	}
	return r
}

// validate checks p for an index of dimension dim (0: not known yet).
func (p *IndexParams) validate(op string, dim int64) error {
	switch {
	case !metricOK(p.Metric):
		return kit.Argf(op, "params.Metric", "%s: IVF-PQ supports L2Expanded, L2SqrtExpanded, InnerProduct and CosineExpanded", p.Metric)
	case p.NLists < 1:
		return kit.Argf(op, "params.NLists", "0, want at least 1")
	case p.NLists > 1<<24:
		return kit.Argf(op, "params.NLists", "%d exceeds cuVS's limit of %d lists", p.NLists, 1<<24)
	case p.KMeansNIters < 1:
		return kit.Argf(op, "params.KMeansNIters", "0, want at least 1")
	case !(p.KMeansTrainsetFraction > 0 && p.KMeansTrainsetFraction <= 1):
		return kit.Argf(op, "params.KMeansTrainsetFraction", "%g is not in (0, 1]", p.KMeansTrainsetFraction)
	case p.PQBits < 4 || p.PQBits > 8:
		return kit.Argf(op, "params.PQBits", "%d is not in [4, 8]", p.PQBits)
	case p.CodebookKind != PerSubspace && p.CodebookKind != PerCluster:
		return kit.Argf(op, "params.CodebookKind", "%d is not a codebook kind", p.CodebookKind)
	case p.CodesLayout != Flat && p.CodesLayout != Interleaved:
		return kit.Argf(op, "params.CodesLayout", "%d is not a codes layout", p.CodesLayout)
	case p.MaxTrainPointsPerPQCode < 1:
		return kit.Argf(op, "params.MaxTrainPointsPerPQCode", "0, want at least 1")
	}
	if dim > 0 {
		pqDim := p.PQDim
		if pqDim == 0 {
			pqDim = calcPQDim(uint32(dim))
		}
		if pqDim*p.PQBits%8 != 0 {
			if p.PQDim == 0 {
				return kit.Argf(op, "params.PQDim", "0 makes cuVS choose %d for dimension %d, and %d × PQBits %d is not a multiple of 8: set PQDim", pqDim, dim, pqDim, p.PQBits)
			}
			return kit.Argf(op, "params.PQDim", "%d × PQBits %d is not a multiple of 8", pqDim, p.PQBits)
		}
	}
	return nil
}

// toC makes the C params (cuvsIvfPqIndexParamsCreate); the caller destroys
// them with cuvsIvfPqIndexParamsDestroy.
func (p *IndexParams) toC(op string) (generated.CuvsIvfPqIndexParams_t, error) {
	var c generated.CuvsIvfPqIndexParams_t
	if err := generated.CuvsIvfPqIndexParamsCreate(&c); err != nil {
		return 0, kit.Wrap(op, err)
	}
	c.Ref().Metric, c.Ref().MetricArg, c.Ref().AddDataOnBuild = kit.CMetric(p.Metric), p.MetricArg, p.AddDataOnBuild
	c.Ref().NLists, c.Ref().KmeansNIters, c.Ref().KmeansTrainsetFraction = p.NLists, p.KMeansNIters, p.KMeansTrainsetFraction
	c.Ref().PqBits, c.Ref().PqDim, c.Ref().CodebookKind = p.PQBits, p.PQDim, generated.CuvsIvfPqCodebookGen(p.CodebookKind)
	c.Ref().ForceRandomRotation, c.Ref().ConservativeMemoryAllocation = p.ForceRandomRotation, p.ConservativeMemoryAllocation
	c.Ref().MaxTrainPointsPerPqCode, c.Ref().CodesLayout = p.MaxTrainPointsPerPQCode, generated.CuvsIvfPqListLayout(p.CodesLayout)
	return c, nil
}

func (s *SearchParams) validate(op string) error {
	if err := kit.CheckFilterPath(op, s.FilterPath); err != nil {
		return err
	}
	switch {
	case s.NProbes < 1:
		return kit.Argf(op, "params.NProbes", "0, want at least 1")
	case s.LUTDtype != CUDAFloat32 && s.LUTDtype != CUDAFloat16 && s.LUTDtype != CUDAUint8:
		return kit.Argf(op, "params.LUTDtype", "%s: want CUDAFloat32, CUDAFloat16 or CUDAUint8", s.LUTDtype)
	case s.InternalDistanceDtype != CUDAFloat32 && s.InternalDistanceDtype != CUDAFloat16:
		return kit.Argf(op, "params.InternalDistanceDtype", "%s: want CUDAFloat32 or CUDAFloat16", s.InternalDistanceDtype)
	case s.LUTDtype.size() > s.InternalDistanceDtype.size():
		return kit.Argf(op, "params.LUTDtype", "%s is larger than InternalDistanceDtype %s", s.LUTDtype, s.InternalDistanceDtype)
	case s.CoarseSearchDtype != CUDAFloat32 && s.CoarseSearchDtype != CUDAFloat16 && s.CoarseSearchDtype != CUDAInt8:
		return kit.Argf(op, "params.CoarseSearchDtype", "%s: want CUDAFloat32, CUDAFloat16 or CUDAInt8", s.CoarseSearchDtype)
	case s.MaxInternalBatchSize < 1:
		return kit.Argf(op, "params.MaxInternalBatchSize", "0, want at least 1")
	case !(s.PreferredShmemCarveout >= 0 && s.PreferredShmemCarveout <= 1):
		return kit.Argf(op, "params.PreferredShmemCarveout", "%g is not in [0, 1]", s.PreferredShmemCarveout)
	}
	return nil
}

// resolve returns the parameters a search uses: s with each zero field
// replaced by cuVS's default (DefaultSearchParams, read once), or all the
// defaults for a nil s, checked against cuVS's ranges.
func (s *SearchParams) resolve(op string) (SearchParams, error) {
	d, err := searchDefaults.Get()
	if err != nil {
		return SearchParams{}, err
	}
	if s == nil {
		return *d, nil
	}
	r := *s
	if r.NProbes == 0 {
		r.NProbes = d.NProbes
	}
	if r.MaxInternalBatchSize == 0 {
		r.MaxInternalBatchSize = d.MaxInternalBatchSize
	}
	if r.PreferredShmemCarveout == 0 {
		r.PreferredShmemCarveout = d.PreferredShmemCarveout
	}
	return r, r.validate(op)
}

// cValue is the C search parameters: a plain struct that cuVS copies at the
// start of the call (cuvsIvfPqSearch reads *params), so a Go value can be
// handed to C.
func (s *SearchParams) cValue() generated.CuvsIvfPqSearchParams {
	return generated.CuvsIvfPqSearchParams{
		NProbes: s.NProbes, LutDtype: generated.CudaDataType_t(s.LUTDtype),
		InternalDistanceDtype: generated.CudaDataType_t(s.InternalDistanceDtype),
		CoarseSearchDtype:     generated.CudaDataType_t(s.CoarseSearchDtype),
		MaxInternalBatchSize:  s.MaxInternalBatchSize, PreferredShmemCarveout: s.PreferredShmemCarveout,
	}
}

// searchDefaults are DefaultSearchParams, read once: what a nil
// *SearchParams means.
var searchDefaults = kit.Defaults[SearchParams]{Read: DefaultSearchParams}
