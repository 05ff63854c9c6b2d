package quantize

import (
	"fmt"
	"math"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

var (
	pqDataRule   = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true}
	pqCodesOut   = kit.Rule{Arg: "codes", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Uint8}, Rank: 2, RowMajor: true}
	pqCodesIn    = kit.Rule{Arg: "codes", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Uint8}, Rank: 2, RowMajor: true}
	pqLabelsOut  = kit.Rule{Arg: "labels", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Uint32}, Rank: 1, RowMajor: true}
	pqLabelsIn   = kit.Rule{Arg: "labels", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Uint32}, Rank: 1, RowMajor: true}
	pqInverseOut = kit.Rule{Arg: "out", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true}
)

var livePQ = live.New("quantize.PQ")

// KMeansType picks the k-means that trains the PQ codebooks (cuvsKMeansType).
type KMeansType int32

// The k-means kinds.
const (
	KMeans         = KMeansType(generated.CuvsKMeansType_CUVS_KMEANS_TYPE_KMEANS)
	KMeansBalanced = KMeansType(generated.CuvsKMeansType_CUVS_KMEANS_TYPE_KMEANS_BALANCED)
)

// String returns the kind's name.
func (k KMeansType) String() string {
	switch k {
	case KMeans:
		return "KMeans"
	case KMeansBalanced:
		return "KMeansBalanced"
	}
	return fmt.Sprintf("KMeansType(%d)", int32(k))
}

// PQParams configures BuildPQ (cuvsProductQuantizerParams).
type PQParams struct {
	// PQBits, in [4, 16], is the bits of one code: 2^PQBits centers per
	// codebook.
	PQBits uint32
	// PQDim is the number of codes per row (sub-vectors); 0 means
	// ceil(dim/4). dim must be a multiple of it.
	PQDim uint32
	// UseSubspaces trains one codebook per sub-vector position (cuVS's
	// default) rather than one for all.
	UseSubspaces bool
	// UseVQ subtracts the nearest of VQNCenters coarse centers (k-means)
	// before the product quantization; Transform and InverseTransform then
	// take each row's VQ label.
	UseVQ bool
	// VQNCenters is the number of VQ centers; 0 means sqrt(rows) rounded
	// up to a multiple of 8.
	VQNCenters uint32
	// KMeansNIters is the number of k-means iterations (VQ and PQ), at
	// least 1.
	KMeansNIters uint32
	// KMeansType: KMeansBalanced (cuVS's default) or KMeans.
	KMeansType KMeansType
	// MaxTrainPointsPerPQCode bounds each codebook's training set to
	// 2^PQBits × this many rows, which must be at least 2^PQBits (at least
	// 1, and the dataset at least 2^PQBits rows).
	MaxTrainPointsPerPQCode uint32
	// MaxTrainPointsPerVQCluster bounds the VQ training set to VQNCenters ×
	// this many rows (at least 1).
	MaxTrainPointsPerVQCluster uint32
}

// DefaultPQParams returns cuVS's defaults, read from the library
// (cuvsProductQuantizerParamsCreate/Destroy): 8 bits, PQDim 0, subspaces,
// no VQ, 25 iterations of balanced k-means, 256 training points per code,
// 1024 per VQ cluster.
func DefaultPQParams() (PQParams, error) {
	const op = "quantize.DefaultPQParams"
	var p generated.CuvsProductQuantizerParams_t
	if err := generated.CuvsProductQuantizerParamsCreate(&p); err != nil {
		return PQParams{}, kit.Wrap(op, err)
	}
	out := PQParams{
		PQBits: p.Ref().PqBits, PQDim: p.Ref().PqDim, UseSubspaces: p.Ref().UseSubspaces, UseVQ: p.Ref().UseVq,
		VQNCenters: p.Ref().VqNCenters, KMeansNIters: p.Ref().KmeansNIters, KMeansType: KMeansType(p.Ref().PqKmeansType),
		MaxTrainPointsPerPQCode: p.Ref().MaxTrainPointsPerPqCode, MaxTrainPointsPerVQCluster: p.Ref().MaxTrainPointsPerVqCluster,
	}
	return out, kit.Wrap(op, generated.CuvsProductQuantizerParamsDestroy(p))
}

// resolve checks p against a rows × dim float32 training set and returns
// it with cuVS's heuristics applied (PQDim, VQNCenters).
func (p PQParams) resolve(op string, rows, dim int64) (PQParams, error) {
	if p.PQBits < 4 || p.PQBits > 16 {
		return p, kit.Argf(op, "params.PQBits", "%d, want 4..16", p.PQBits)
	}
	if p.PQDim == 0 {
		p.PQDim = uint32((dim + 3) / 4)
	}
	if int64(p.PQDim) > dim || dim%int64(p.PQDim) != 0 {
		return p, kit.Argf(op, "params.PQDim", "%d, the dimension %d must be a multiple of it", p.PQDim, dim)
	}
	if p.KMeansNIters < 1 {
		return p, kit.Argf(op, "params.KMeansNIters", "0, want at least 1")
	}
	if p.KMeansType != KMeans && p.KMeansType != KMeansBalanced {
		return p, kit.Argf(op, "params.KMeansType", "%s, want KMeans or KMeansBalanced", p.KMeansType)
	}
	book := int64(1) << p.PQBits
	if p.MaxTrainPointsPerPQCode < 1 {
		return p, kit.Argf(op, "params.MaxTrainPointsPerPQCode", "0, want at least 1")
	}
	if rows < book {
		return p, kit.Argf(op, "dataset", "%d rows, a %d-bit codebook needs at least %d", rows, p.PQBits, book)
	}
	if p.UseVQ {
		if p.VQNCenters == 0 {
			p.VQNCenters = (uint32(math.Sqrt(float64(rows))) + 7) / 8 * 8
		}
		if p.MaxTrainPointsPerVQCluster < 1 {
			return p, kit.Argf(op, "params.MaxTrainPointsPerVQCluster", "0, want at least 1")
		}
		if rows < int64(p.VQNCenters) {
			return p, kit.Argf(op, "params.VQNCenters", "%d, the dataset has only %d rows", p.VQNCenters, rows)
		}
	}
	return p, nil
}

// PQ is a trained product quantizer: each row (optionally less its
// nearest VQ center) cut into PQDim sub-vectors, each replaced by the
// PQBits-bit index of its nearest codebook entry. Transforms may run from
// any number of goroutines, each with its own safe.Resources; Close waits
// for them and expires the codebook views.
type PQ struct {
	h          generated.CuvsProductQuantizer_t // C memory
	params     PQParams                         // resolved
	dim        int64
	encodedDim int64
	life       kit.Life
}

// BuildPQ trains a product quantizer on dataset (rows × dim float32,
// row-major, host or device memory; host data must be finite). Nil params
// means cuVS's defaults (DefaultPQParams). The codebooks are the
// library's: PQCodebook and VQCodebook view them.
//
// cuVS 26.06 and 26.08 never free a trained product quantizer's codebooks
// (device memory): cuvsProductQuantizerDestroy, which Close calls, frees
// the handle only.
//
// C calls: cuvsProductQuantizerCreate, cuvsProductQuantizerBuild,
// cuvsStreamSync, cuvsProductQuantizerGetPqBits/GetPqDim/GetEncodedDim/
// GetUseVq (cuvsProductQuantizerDestroy on failure).
func BuildPQ(res *safe.Resources, dataset dlpack.Tensor, params *PQParams) (*PQ, error) {
	const op = "quantize.BuildPQ"
	pp, err := kit.Or(params, DefaultPQParams)
	if err != nil {
		return nil, err
	}
	dv, err := input(op, res, pqDataRule, dataset)
	if err != nil {
		return nil, err
	}
	p, err := pp.resolve(op, dv.Dim(0), dv.Dim(1))
	if err != nil {
		return nil, err
	}
	var h generated.CuvsProductQuantizer_t
	if err := generated.CuvsProductQuantizerCreate(&h); err != nil {
		return nil, kit.Wrap(op, err)
	}
	q := &PQ{h: h, params: p, dim: dv.Dim(1)}
	kit.Start(&q.life, q, "quantize.PQ(%p)", livePQ, func() error { return generated.CuvsProductQuantizerDestroy(h) })
	_ = q.life.Keep(res, op) // the build that follows refuses res as Keep would
	cp := generated.CuvsProductQuantizerParams{
		PqBits: pp.PQBits, PqDim: pp.PQDim, UseSubspaces: pp.UseSubspaces, UseVq: pp.UseVQ,
		VqNCenters: pp.VQNCenters, KmeansNIters: pp.KMeansNIters, PqKmeansType: generated.CuvsKMeansType(pp.KMeansType),
		MaxTrainPointsPerPqCode: pp.MaxTrainPointsPerPQCode, MaxTrainPointsPerVqCluster: pp.MaxTrainPointsPerVQCluster,
	}
	if err := call(op, res, []*dlpack.View{&dv}, nil, func(r generated.CuvsResources_t, in, _ []*generated.DLManagedTensor) error {
		return generated.CuvsProductQuantizerBuild(r, kit.Params[generated.CuvsProductQuantizerParams_t](res, &cp), in[0], h)
	}); err != nil {
		q.life.Fail()
		return nil, err
	}
	if err := q.read(op); err != nil {
		q.life.Fail()
		return nil, err
	}
	return q, nil
}

// read takes what the library made of the params from its getters.
func (q *PQ) read(op string) error {
	var bits, pqDim, enc uint32
	var vq bool
	if err := generated.CuvsProductQuantizerGetPqBits(q.h, &bits); err != nil {
		return kit.Wrap(op, err)
	}
	if err := generated.CuvsProductQuantizerGetPqDim(q.h, &pqDim); err != nil {
		return kit.Wrap(op, err)
	}
	if err := generated.CuvsProductQuantizerGetEncodedDim(q.h, &enc); err != nil {
		return kit.Wrap(op, err)
	}
	if err := generated.CuvsProductQuantizerGetUseVq(q.h, &vq); err != nil {
		return kit.Wrap(op, err)
	}
	q.params.PQBits, q.params.PQDim, q.params.UseVQ = bits, pqDim, vq
	q.encodedDim = int64(enc)
	return nil
}

// Params returns the parameters the quantizer was built with, PQDim and
// (with UseVQ) VQNCenters resolved; PQBits, PQDim and UseVQ as the library
// reports them.
func (q *PQ) Params() PQParams {
	if q == nil {
		return PQParams{}
	}
	return q.params
}

// Dim returns the dimension of the rows it quantizes.
func (q *PQ) Dim() int {
	if q == nil {
		return 0
	}
	return int(q.dim)
}

// PQLen returns the length of one sub-vector, Dim()/PQDim.
func (q *PQ) PQLen() int {
	if q == nil || q.params.PQDim == 0 {
		return 0
	}
	return int(q.dim) / int(q.params.PQDim)
}

// EncodedDim returns the bytes of one row's codes, ceil(PQDim × PQBits /
// 8) (cuvsProductQuantizerGetEncodedDim): code j occupies bits j×PQBits ..
// (j+1)×PQBits-1 of the row, least significant bit first.
func (q *PQ) EncodedDim() int {
	if q == nil {
		return 0
	}
	return int(q.encodedDim)
}

// UseVQ reports whether rows lose their nearest VQ center first
// (cuvsProductQuantizerGetUseVq).
func (q *PQ) UseVQ() bool { return q != nil && q.params.UseVQ }

func (q *PQ) labelsFor(op string, res *safe.Resources, rows int64, mut dlpack.TensorMut, in dlpack.Tensor) (*dlpack.View, *dlpack.ViewMut, error) {
	has := mut != nil || in != nil
	if !q.params.UseVQ {
		if has {
			return nil, nil, kit.Argf(op, "labels", "given, the quantizer has no VQ stage (UseVQ false): pass nil")
		}
		return nil, nil, nil
	}
	if !has {
		return nil, nil, kit.Argf(op, "labels", "nil: with UseVQ cuVS would use VQ center 0 for every row")
	}
	if mut != nil {
		m, err := output(op, res, pqLabelsOut, mut)
		if err != nil {
			return nil, nil, err
		}
		if m.Dim(0) != rows {
			return nil, nil, kit.Argf(op, "labels", "%d labels for %d rows", m.Dim(0), rows)
		}
		return nil, &m, nil
	}
	v, err := in.View()
	if err != nil {
		return nil, nil, kit.Argf(op, "labels", "%w", err)
	}
	if err := pqLabelsIn.CheckOn(op, res, &v); err != nil {
		return nil, nil, err
	}
	if v.Dim(0) != rows {
		return nil, nil, kit.Argf(op, "labels", "%d labels for %d rows", v.Dim(0), rows)
	}
	return &v, nil, nil
}

// Transform encodes dataset (rows × Dim() float32, row-major, host or
// device memory; host data must be finite) into codes (rows × EncodedDim()
// uint8, device memory): each sub-vector's nearest codebook entry. With
// UseVQ, labels (rows uint32, device memory) receives each row's nearest VQ
// center, which InverseTransform needs; without it, labels must be nil.
// It waits for res's stream.
//
// A VQ label is the nearest center by cuVS's balanced k-means predict,
// whose distances on some GPUs (compute capability 9.x below 4096 rows and
// centers, 10 and later always) are ‖x‖² + ‖c‖² − 2x·c with x·c from a
// TF32 product: a label may name a center nearest only within that
// rounding (on an H200, 1.73454 where another center was at 1.73373). The
// codes are the nearest entries of the residual against the label's
// center.
//
// C calls: cuvsProductQuantizerTransform, cuvsStreamSync.
func (q *PQ) Transform(res *safe.Resources, dataset dlpack.Tensor, codes dlpack.TensorMut, labels dlpack.TensorMut) error {
	if q == nil {
		return kit.Argf("quantize.PQ.Transform", "quantizer", "nil *PQ")
	}
	const op = "quantize.PQ.Transform"
	if err := q.life.Enter(op); err != nil {
		return err
	}
	defer q.life.Leave()
	dv, err := input(op, res, pqDataRule, dataset)
	if err != nil {
		return err
	}
	if dv.Dim(1) != q.dim {
		return kit.Argf(op, "dataset", "%d columns, the quantizer has dimension %d", dv.Dim(1), q.dim)
	}
	cm, err := output(op, res, pqCodesOut, codes)
	if err != nil {
		return err
	}
	if err := shape(op, "codes", &cm, dv.Dim(0), q.encodedDim); err != nil {
		return err
	}
	_, lm, err := q.labelsFor(op, res, dv.Dim(0), labels, nil)
	if err != nil {
		return err
	}
	return call(op, res, []*dlpack.View{&dv}, []*dlpack.ViewMut{&cm, lm}, func(r generated.CuvsResources_t, in, o []*generated.DLManagedTensor) error {
		return generated.CuvsProductQuantizerTransform(r, q.h, in[0], o[0], o[1])
	})
}

// InverseTransform decodes codes (rows × EncodedDim() uint8, device
// memory) into out (rows × Dim() float32, device memory): each sub-vector
// its codebook entry, plus, with UseVQ, the VQ center labels (rows uint32,
// device memory, as Transform wrote them) names; without UseVQ labels must
// be nil. It waits for res's stream.
//
// C calls: cuvsProductQuantizerInverseTransform, cuvsStreamSync.
func (q *PQ) InverseTransform(res *safe.Resources, codes dlpack.Tensor, out dlpack.TensorMut, labels dlpack.Tensor) error {
	if q == nil {
		return kit.Argf("quantize.PQ.InverseTransform", "quantizer", "nil *PQ")
	}
	const op = "quantize.PQ.InverseTransform"
	if err := q.life.Enter(op); err != nil {
		return err
	}
	defer q.life.Leave()
	if codes == nil {
		return kit.Argf(op, "codes", "nil")
	}
	cv, err := codes.View()
	if err != nil {
		return kit.Argf(op, "codes", "%w", err)
	}
	if err := pqCodesIn.CheckOn(op, res, &cv); err != nil {
		return err
	}
	if cv.Dim(0) < 1 || cv.Dim(1) != q.encodedDim {
		return kit.Argf(op, "codes", "shape %v, want at least one row of %d bytes", cv.Shape(), q.encodedDim)
	}
	om, err := output(op, res, pqInverseOut, out)
	if err != nil {
		return err
	}
	if err := shape(op, "out", &om, cv.Dim(0), q.dim); err != nil {
		return err
	}
	lv, _, err := q.labelsFor(op, res, cv.Dim(0), nil, labels)
	if err != nil {
		return err
	}
	return call(op, res, []*dlpack.View{&cv, lv}, []*dlpack.ViewMut{&om}, func(r generated.CuvsResources_t, in, o []*generated.DLManagedTensor) error {
		return generated.CuvsProductQuantizerInverseTransform(r, q.h, in[0], o[0], in[1])
	})
}

// PQCodebook returns a view of the PQ codebook(s) in the library's device
// memory, float32 [PQDim × 2^PQBits, PQLen] with UseSubspaces (sub-vector
// j's entries are rows j×2^PQBits ...), else [2^PQBits, PQLen]
// (cuvsProductQuantizerGetPqCodebook). The view expires when the quantizer
// is closed; Close refuses while it is bound to a call.
func (q *PQ) PQCodebook() (dlpack.View, error) {
	if q == nil {
		return dlpack.View{}, kit.Argf("quantize.PQ.PQCodebook", "quantizer", "nil *PQ")
	}
	return q.life.View("quantize.PQ.PQCodebook", func(mt *generated.DLManagedTensor) error {
		return generated.CuvsProductQuantizerGetPqCodebook(q.h, mt)
	})
}

// VQCodebook returns a view of the VQ centers, float32 [VQNCenters, Dim()]
// in the library's device memory ([0, 0] without UseVQ)
// (cuvsProductQuantizerGetVqCodebook); it expires as PQCodebook's does.
func (q *PQ) VQCodebook() (dlpack.View, error) {
	if q == nil {
		return dlpack.View{}, kit.Argf("quantize.PQ.VQCodebook", "quantizer", "nil *PQ")
	}
	return q.life.View("quantize.PQ.VQCodebook", func(mt *generated.DLManagedTensor) error {
		return generated.CuvsProductQuantizerGetVqCodebook(q.h, mt)
	})
}

// Close frees the quantizer's handle (cuvsProductQuantizerDestroy) after
// the transforms in flight, and expires its codebook views; it refuses
// while one is bound to a call. Closing twice, or the zero PQ, is harmless.
// cuVS keeps the codebooks allocated (see BuildPQ).
func (q *PQ) Close() error {
	if q == nil {
		return nil
	}
	return q.life.Close("quantize.PQ.Close")
}
