package vamana

import (
	"math"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// IndexParams configures Build (cuvsVamanaIndexParams). Start from
// DefaultIndexParams, which reads cuVS's defaults from the library.
//
// The zero IndexParams is refused (GraphDegree must be 32, 64, 128 or 256).
type IndexParams struct {
	// Metric: L2Expanded only (cuVS's Vamana supports no other).
	Metric safe.Metric
	// GraphDegree is the most neighbours a row keeps (Vamana's R): 32, 64,
	// 128 or 256.
	GraphDegree int
	// VisitedSize is the candidate list of the greedy search that inserts a
	// row (Vamana's L), above GraphDegree; cuVS rounds it up to a power of
	// two, which must be at most 512 (1024 for GraphDegree 256).
	VisitedSize int
	// VamanaIters is how many times every row is inserted, at least 1.
	VamanaIters float32
	// Alpha is RobustPrune's distance factor (1.2 by default): a candidate
	// is dropped when Alpha times its distance to a kept neighbour is at
	// most its distance to the row. Positive and finite.
	Alpha float32
	// MaxFraction bounds an insertion batch to this fraction of the rows,
	// in (0, 1]; it must make a batch of at least one row
	// (MaxFraction × rows >= 1).
	MaxFraction float32
	// BatchBase is the growth factor of the batch sizes, at least 1.
	BatchBase float32
	// QueueSize is the size of the search's candidate queue (cuVS suggests
	// 2^x - 1), at least 1. The queue, the row and the neighbour ids share
	// the search kernel's 48 KiB of shared memory: Build refuses a queue
	// that does not fit (16 × QueueSize + 4 × GraphDegree + the row padded
	// to 16 elements, in bytes).
	QueueSize int
	// ReverseBatchSize bounds the batches of reverse-edge processing (it
	// saves memory), 1 to math.MaxInt32.
	ReverseBatchSize int
}

// DefaultIndexParams returns cuVS's defaults, read from the loaded library
// (cuvsVamanaIndexParamsCreate/Destroy): L2Expanded, degree 32, visited
// size 64, one iteration, alpha 1.2, max fraction 0.06, batch base 2,
// queue size 127, reverse batches of 1,000,000, in v26.06 and v26.08.
func DefaultIndexParams() (IndexParams, error) {
	const op = "vamana.DefaultIndexParams"
	var p generated.CuvsVamanaIndexParams_t
	if err := generated.CuvsVamanaIndexParamsCreate(&p); err != nil {
		return IndexParams{}, kit.Wrap(op, err)
	}
	out := IndexParams{
		Metric: safe.Metric(p.Ref().Metric), GraphDegree: int(p.Ref().GraphDegree), VisitedSize: int(p.Ref().VisitedSize),
		VamanaIters: p.Ref().VamanaIters, Alpha: p.Ref().Alpha, MaxFraction: p.Ref().MaxFraction, BatchBase: p.Ref().BatchBase,
		QueueSize: int(p.Ref().QueueSize), ReverseBatchSize: int(p.Ref().ReverseBatchsize),
	}
	return out, kit.Wrap(op, generated.CuvsVamanaIndexParamsDestroy(p))
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// searchSharedLimit is the dynamic shared memory GreedySearchKernel may
// ask for: the 48 KiB a kernel gets without opting in (cuVS never raises
// it), less 64 bytes for the kernel's static __shared__ variables.
const searchSharedLimit = 48<<10 - 64

// searchShared is the dynamic shared memory of cuVS's GreedySearchKernel
// launch (vamana_build.cuh, search_smem_total_size): the row padded to a
// multiple of 16 elements, an int per neighbour and a 16-byte DistPair per
// queue slot.
func searchShared(dim int64, elemSize, degree, queue int) int64 {
	return (dim+15)/16*16*int64(elemSize) + 4*int64(degree) + 16*int64(queue)
}

// validate checks p for a rows × dim dataset of elemSize-byte elements as
// cuVS's build does, and refuses what makes cuVS's batched insertion loop
// forever (a batch of no rows) or its search kernel's launch fail (too
// much shared memory).
func (p *IndexParams) validate(op string, rows, dim int64, elemSize int) error {
	if p.Metric != safe.L2Expanded {
		return kit.Argf(op, "params.Metric", "%s: cuVS's Vamana supports L2Expanded only", p.Metric)
	}
	switch p.GraphDegree {
	case 32, 64, 128, 256:
	default:
		return kit.Argf(op, "params.GraphDegree", "%d, want 32, 64, 128 or 256", p.GraphDegree)
	}
	if p.VisitedSize <= p.GraphDegree {
		return kit.Argf(op, "params.VisitedSize", "%d, want more than GraphDegree %d", p.VisitedSize, p.GraphDegree)
	}
	l := p.GraphDegree
	for l < p.VisitedSize {
		l <<= 1
	}
	if top := map[bool]int{true: 1024, false: 512}[p.GraphDegree == 256]; l > top {
		return kit.Argf(op, "params.VisitedSize", "%d (%d as a power of two), cuVS sorts at most %d candidates for degree %d", p.VisitedSize, l, top, p.GraphDegree)
	}
	if !finite(p.VamanaIters) || p.VamanaIters < 1 {
		return kit.Argf(op, "params.VamanaIters", "%v, want at least 1", p.VamanaIters)
	}
	if float64(p.VamanaIters)*float64(rows) >= math.MaxInt32 {
		return kit.Argf(op, "params.VamanaIters", "%v × %d rows inserts exceed cuVS's int counter", p.VamanaIters, rows)
	}
	if !finite(p.Alpha) || p.Alpha <= 0 {
		return kit.Argf(op, "params.Alpha", "%v, want a positive finite number", p.Alpha)
	}
	if !finite(p.MaxFraction) || p.MaxFraction <= 0 || p.MaxFraction > 1 {
		return kit.Argf(op, "params.MaxFraction", "%v, want (0, 1]", p.MaxFraction)
	}
	if int(p.MaxFraction*float32(rows)) < 1 {
		return kit.Argf(op, "params.MaxFraction", "%v of %d rows is a batch of no rows (cuVS would never finish)", p.MaxFraction, rows)
	}
	if !finite(p.BatchBase) || p.BatchBase < 1 {
		return kit.Argf(op, "params.BatchBase", "%v, want at least 1 (smaller bases make batches of no rows)", p.BatchBase)
	}
	if p.QueueSize < 1 || p.QueueSize > math.MaxUint32 {
		return kit.Argf(op, "params.QueueSize", "%d, want at least 1", p.QueueSize)
	}
	if p.ReverseBatchSize < 1 || p.ReverseBatchSize > math.MaxInt32 {
		return kit.Argf(op, "params.ReverseBatchSize", "%d, want 1 to %d", p.ReverseBatchSize, math.MaxInt32)
	}
	if sm := searchShared(dim, elemSize, p.GraphDegree, p.QueueSize); sm > searchSharedLimit {
		return kit.Argf(op, "params.QueueSize", "%d with %d columns and degree %d: cuVS's greedy search kernel would need %d bytes of shared memory, more than the %d it can launch with", p.QueueSize, dim, p.GraphDegree, sm, searchSharedLimit)
	}
	return nil
}

func (p *IndexParams) cValue() generated.CuvsVamanaIndexParams {
	return generated.CuvsVamanaIndexParams{
		Metric: kit.CMetric(p.Metric), GraphDegree: uint32(p.GraphDegree), VisitedSize: uint32(p.VisitedSize),
		VamanaIters: p.VamanaIters, Alpha: p.Alpha, MaxFraction: p.MaxFraction, BatchBase: p.BatchBase,
		QueueSize: uint32(p.QueueSize), ReverseBatchsize: uint32(p.ReverseBatchSize),
	}
}
