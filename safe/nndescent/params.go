package nndescent

import (
	"math"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// DistCompDType is the precision NN-Descent computes distances in
// (cuvsNNDescentDistCompDtype).
type DistCompDType int32

// The distance precisions.
const (
	// DistCompAuto lets cuVS choose: float32 for float32 data of at most
	// 16 dimensions, float16 otherwise (every float16, int8 and uint8
	// dataset computes in float16 whatever the setting).
	DistCompAuto = DistCompDType(generated.CuvsNNDescentDistCompDtype_NND_DIST_COMP_AUTO)
	// DistCompFP32 computes in float32.
	DistCompFP32 = DistCompDType(generated.CuvsNNDescentDistCompDtype_NND_DIST_COMP_FP32)
	// DistCompFP16 computes in float16.
	DistCompFP16 = DistCompDType(generated.CuvsNNDescentDistCompDtype_NND_DIST_COMP_FP16)
)

// IndexParams configures Build and BuildInto (cuvsNNDescentIndexParams).
// Start from DefaultIndexParams, which reads cuVS's defaults from the
// library.
//
// The zero IndexParams is refused: GraphDegree and IntermediateGraphDegree
// must be at least 1.
type IndexParams struct {
	// Metric: L2Expanded (squared distances), L2SqrtExpanded,
	// CosineExpanded, InnerProduct, L1, or BitwiseHamming (int8 and uint8
	// data only).
	Metric safe.Metric
	// MetricArg is handed to cuVS as is; none of the metrics above reads it.
	MetricArg float32
	// GraphDegree is the number of neighbours per row in the output graph,
	// at least 1 and below the dataset's rows.
	GraphDegree int
	// IntermediateGraphDegree is the degree NN-Descent works with, at least
	// GraphDegree (cuVS would otherwise lower GraphDegree to it silently);
	// cuVS lowers it to rows-1 itself.
	IntermediateGraphDegree int
	// MaxIterations bounds the NN-Descent iterations.
	MaxIterations int
	// TerminationThreshold stops the iterations early once an iteration
	// changes fewer than this fraction of the graph; 0 or more.
	TerminationThreshold float32
	// ReturnDistances keeps each edge's distance in the index (device
	// memory), for Distances. BuildInto ignores it (cuVS refuses it with a
	// caller's graph).
	ReturnDistances bool
	// DistCompDType is the precision of the distance computations.
	DistCompDType DistCompDType
}

// DefaultIndexParams returns cuVS's defaults, read from the loaded library
// (cuvsNNDescentIndexParamsCreate/Destroy): L2Expanded, GraphDegree 64,
// IntermediateGraphDegree 96, 20 iterations, threshold 0.0001, distances
// returned, automatic precision, in v26.06 and v26.08.
//
// The automatic precision (DistCompAuto) computes in float16 for float32
// data of more than 16 dimensions (GNND::local_join in cuVS's
// nn_descent.cuh, both releases): distances to about 2% only, and
// neighbours whose distances differ by less may come in either order.
// For float32 distances set DistCompDType to DistCompFP32:
//
//	p, _ := nndescent.DefaultIndexParams()
//	p.DistCompDType = nndescent.DistCompFP32
//	idx, err := nndescent.Build(res, dataset, &p)
//
// (The test double computes in float32 whatever the setting.)
func DefaultIndexParams() (IndexParams, error) {
	const op = "nndescent.DefaultIndexParams"
	var p generated.CuvsNNDescentIndexParams_t
	if err := generated.CuvsNNDescentIndexParamsCreate(&p); err != nil {
		return IndexParams{}, kit.Wrap(op, err)
	}
	out := IndexParams{
		Metric: safe.Metric(p.Ref().Metric), MetricArg: p.Ref().MetricArg,
		GraphDegree: int(p.Ref().GraphDegree), IntermediateGraphDegree: int(p.Ref().IntermediateGraphDegree),
		MaxIterations: int(p.Ref().MaxIterations), TerminationThreshold: p.Ref().TerminationThreshold,
		ReturnDistances: p.Ref().ReturnDistances, DistCompDType: DistCompDType(p.Ref().DistCompDtype),
	}
	return out, kit.Wrap(op, generated.CuvsNNDescentIndexParamsDestroy(p))
}

// maxRows is get_build_config's bound: rows < INT_MAX - 1.
const maxRows = math.MaxInt32 - 1

// validate checks p for a dataset of rows rows of element type dt, as
// cuVS's get_build_config and GNND do, and refuses what cuVS would change
// silently.
func (p *IndexParams) validate(op string, rows int64, dt dlpack.DataType) error {
	switch p.Metric {
	case safe.L2Expanded, safe.L2SqrtExpanded, safe.CosineExpanded, safe.InnerProduct, safe.L1:
	case safe.BitwiseHamming:
		if dt != dlpack.Int8 && dt != dlpack.Uint8 {
			return kit.Argf(op, "params.Metric", "BitwiseHamming needs int8 or uint8 data, got %s", dt)
		}
	default:
		return kit.Argf(op, "params.Metric", "%s is not supported by NN-Descent (L2Expanded, L2SqrtExpanded, CosineExpanded, InnerProduct, L1, BitwiseHamming)", p.Metric)
	}
	if rows >= maxRows {
		return kit.Argf(op, "dataset", "%d rows, NN-Descent takes fewer than %d", rows, maxRows)
	}
	if p.GraphDegree < 1 {
		return kit.Argf(op, "params.GraphDegree", "%d, want at least 1", p.GraphDegree)
	}
	if int64(p.GraphDegree) >= rows {
		return kit.Argf(op, "params.GraphDegree", "%d, the dataset has only %d rows (at most rows-1 neighbours)", p.GraphDegree, rows)
	}
	if p.IntermediateGraphDegree < p.GraphDegree {
		return kit.Argf(op, "params.IntermediateGraphDegree", "%d is below GraphDegree %d (cuVS would lower GraphDegree)", p.IntermediateGraphDegree, p.GraphDegree)
	}
	if p.MaxIterations < 0 {
		return kit.Argf(op, "params.MaxIterations", "%d is negative", p.MaxIterations)
	}
	if t := float64(p.TerminationThreshold); math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
		return kit.Argf(op, "params.TerminationThreshold", "%v, want a finite value of 0 or more", p.TerminationThreshold)
	}
	switch p.DistCompDType {
	case DistCompAuto, DistCompFP32, DistCompFP16:
	default:
		return kit.Argf(op, "params.DistCompDType", "%d is not a distance precision", p.DistCompDType)
	}
	return nil
}

func (p *IndexParams) cValue() generated.CuvsNNDescentIndexParams {
	return generated.CuvsNNDescentIndexParams{
		Metric: kit.CMetric(p.Metric), MetricArg: p.MetricArg,
		GraphDegree: uint64(p.GraphDegree), IntermediateGraphDegree: uint64(p.IntermediateGraphDegree),
		MaxIterations: uint64(p.MaxIterations), TerminationThreshold: p.TerminationThreshold,
		ReturnDistances: p.ReturnDistances, DistCompDtype: generated.CuvsNNDescentDistCompDtype(p.DistCompDType),
	}
}
