package ivfsq_test

import (
	"fmt"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

// conformance is IVF-SQ's side of the index packages' conformance suite
// (safetest.IndexSuite).
var conformance = &safetest.IndexSuite[*ivfsq.Index, ivfsq.SearchParams]{
	Name: "ivfsq",
	Rows: rows, Dim: dim, Queries: nq, K: k, Lists: nLists,
	Build: func(res *safe.Resources, dataset dlpack.Tensor, lists uint32, _ int) (*ivfsq.Index, error) {
		if lists == 0 {
			return ivfsq.Build(res, dataset, nil)
		}
		p, err := ivfsq.DefaultIndexParams()
		if err != nil {
			return nil, err
		}
		p.NLists = lists
		return ivfsq.Build(res, dataset, &p)
	},
	Search:          (*ivfsq.Index).Search,
	SearchSlice:     ivfsq.SearchSlice[float32],
	SearchSliceInto: ivfsq.SearchSliceInto[float32],
	SearchSlice64: func(res *safe.Resources, idx *ivfsq.Index, q []float64, k int) (*safe.Results, error) {
		return ivfsq.SearchSlice(res, idx, nil, q, k, nil)
	},
	Prepare: func(idx *ivfsq.Index, p *ivfsq.SearchParams, q, n, d dlpack.TensorMut) (safetest.IVFPrepared, error) {
		return idx.Prepare(p, q, n, d, nil)
	},
	Extend:    func(idx *ivfsq.Index, res *safe.Resources, v dlpack.Tensor) error { return idx.Extend(res, v, nil) },
	ExtendArg: "vectors",
	ExtendC:   "cuvsIvfSqExtend",
	EstimateExtend: func(idx *ivfsq.Index, n int) (safe.MemoryEstimate, error) {
		return idx.EstimateExtend(safe.MemoryShape{Rows: n})
	},
	SerializeTo:     (*ivfsq.Index).SerializeTo,
	Serialize:       (*ivfsq.Index).Serialize,
	DeserializeFrom: ivfsq.DeserializeFrom,
	Deserialize:     ivfsq.Deserialize,
	SerializeCuVS:   ivfsq.SerializeCuVS,
	Filters:         true,
	Half:            true,
	LosesDType:      true,

	DefaultSearchParams: ivfsq.DefaultSearchParams,
	WithProbes:          func(p ivfsq.SearchParams, n uint32) ivfsq.SearchParams { p.NProbes = n; return p },
	NLists:              (*ivfsq.Index).NLists,
	DefaultNLists: func() (int, error) {
		p, err := ivfsq.DefaultIndexParams()
		return int(p.NLists), err
	},
	Describe: func(idx *ivfsq.Index) string { return fmt.Sprintf("in %d lists", idx.NLists()) },
}

func TestIndex(t *testing.T) { safetest.TestIndex(t, conformance) }

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (safetest.FuzzDeserialize): never a panic or a hang; a searchable index,
// or safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	safetest.FuzzDeserialize(f, conformance, serialtest.Data, serialtest.Fuzz)
}
