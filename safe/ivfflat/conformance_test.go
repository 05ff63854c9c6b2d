package ivfflat_test

import (
	"fmt"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// conformance is IVF-Flat's side of the index packages' conformance suite
// (safetest.IndexSuite).
var conformance = &safetest.IndexSuite[*ivfflat.Index, ivfflat.SearchParams]{
	Name: "ivfflat",
	Rows: rows, Dim: dim, Queries: nq, K: k, Lists: nLists,
	Build: func(res *safe.Resources, dataset dlpack.Tensor, lists uint32, _ int) (*ivfflat.Index, error) {
		if lists == 0 {
			return ivfflat.Build(res, dataset, nil)
		}
		p, err := ivfflat.DefaultIndexParams()
		if err != nil {
			return nil, err
		}
		p.NLists = lists
		return ivfflat.Build(res, dataset, &p)
	},
	Search:          (*ivfflat.Index).Search,
	SearchSlice:     ivfflat.SearchSlice[float32],
	SearchSliceInto: ivfflat.SearchSliceInto[float32],
	SearchSlice64: func(res *safe.Resources, idx *ivfflat.Index, q []float64, k int) (*safe.Results, error) {
		return ivfflat.SearchSlice(res, idx, nil, q, k, nil)
	},
	Prepare: func(idx *ivfflat.Index, p *ivfflat.SearchParams, q, n, d dlpack.TensorMut) (safetest.IVFPrepared, error) {
		return idx.Prepare(p, q, n, d, nil)
	},
	Extend:    func(idx *ivfflat.Index, res *safe.Resources, v dlpack.Tensor) error { return idx.Extend(res, v, nil) },
	ExtendArg: "vectors",
	ExtendC:   "cuvsIvfFlatExtend",
	EstimateExtend: func(idx *ivfflat.Index, n int) (safe.MemoryEstimate, error) {
		return idx.EstimateExtend(safe.MemoryShape{Rows: n})
	},
	SerializeTo:     (*ivfflat.Index).SerializeTo,
	Serialize:       (*ivfflat.Index).Serialize,
	DeserializeFrom: ivfflat.DeserializeFrom,
	Deserialize:     ivfflat.Deserialize,
	SerializeCuVS:   ivfflat.SerializeCuVS,
	Filters:         true,
	Half:            true,
	FindsRows:       true,

	DefaultSearchParams: ivfflat.DefaultSearchParams,
	WithProbes:          func(p ivfflat.SearchParams, n uint32) ivfflat.SearchParams { p.NProbes = n; return p },
	NLists:              (*ivfflat.Index).NLists,
	DefaultNLists: func() (int, error) {
		p, err := ivfflat.DefaultIndexParams()
		return int(p.NLists), err
	},
	Describe: func(idx *ivfflat.Index) string { return fmt.Sprintf("in %d lists", idx.NLists()) },
}

func TestIndex(t *testing.T) { safetest.TestIndex(t, conformance) }

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (safetest.FuzzDeserialize): never a panic or a hang; a searchable index,
// or safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	safetest.FuzzDeserialize(f, conformance, serialtest.Data, serialtest.Fuzz)
}
