package ivfpq_test

import (
	"fmt"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// conformance is IVF-PQ's side of the index packages' conformance suite
// (safetest.IndexSuite): clustered data, pq_dim dim/2 at 8 bits, every
// list probed; its searches take no filter (SearchSliceFiltered is its
// own).
var conformance = &safetest.IndexSuite[*ivfpq.Index, ivfpq.SearchParams]{
	Name: "ivfpq",
	Rows: rows, Dim: dim, Queries: nq, K: k, Data: clustered, Lists: nLists, Probes: nLists,
	Build: func(res *safe.Resources, dataset dlpack.Tensor, lists uint32, d int) (*ivfpq.Index, error) {
		if lists == 0 {
			return ivfpq.Build(res, dataset, nil)
		}
		p, err := ivfpq.DefaultIndexParams()
		if err != nil {
			return nil, err
		}
		p.NLists, p.PQDim, p.PQBits = lists, uint32(d/2), 8
		return ivfpq.Build(res, dataset, &p)
	},
	Search: func(idx *ivfpq.Index, res *safe.Resources, p *ivfpq.SearchParams, q dlpack.Tensor, n, d dlpack.TensorMut, _ *safe.Filter) error {
		return idx.Search(res, p, q, n, d)
	},
	SearchSlice: func(res *safe.Resources, idx *ivfpq.Index, p *ivfpq.SearchParams, q []float32, k int, _ *safe.Filter) (*safe.Results, error) {
		return ivfpq.SearchSlice(res, idx, p, q, k)
	},
	SearchSliceInto: func(res *safe.Resources, idx *ivfpq.Index, p *ivfpq.SearchParams, q []float32, k int, _ *safe.Filter, out *safe.Results) error {
		return ivfpq.SearchSliceInto(res, idx, p, q, k, out)
	},
	SearchSlice64: func(res *safe.Resources, idx *ivfpq.Index, q []float64, k int) (*safe.Results, error) {
		return ivfpq.SearchSlice(res, idx, nil, q, k)
	},
	Prepare: func(idx *ivfpq.Index, p *ivfpq.SearchParams, q, n, d dlpack.TensorMut) (safetest.IVFPrepared, error) {
		return idx.Prepare(p, q, n, d)
	},
	Extend:    func(idx *ivfpq.Index, res *safe.Resources, v dlpack.Tensor) error { return idx.Extend(res, v, nil) },
	ExtendArg: "vectors",
	ExtendC:   "cuvsIvfPqExtend",
	EstimateExtend: func(idx *ivfpq.Index, n int) (safe.MemoryEstimate, error) {
		return idx.EstimateExtend(safe.MemoryShape{Rows: n})
	},
	SerializeTo:     (*ivfpq.Index).SerializeTo,
	Serialize:       (*ivfpq.Index).Serialize,
	DeserializeFrom: ivfpq.DeserializeFrom,
	Deserialize:     ivfpq.Deserialize,
	SerializeCuVS:   ivfpq.SerializeCuVS,
	Half:            true,
	LosesDType:      true,

	DefaultSearchParams: ivfpq.DefaultSearchParams,
	WithProbes:          func(p ivfpq.SearchParams, n uint32) ivfpq.SearchParams { p.NProbes = n; return p },
	NLists:              (*ivfpq.Index).NLists,
	DefaultNLists: func() (int, error) {
		p, err := ivfpq.DefaultIndexParams()
		return int(p.NLists), err
	},
	BadParams: func(p *ivfpq.SearchParams) string { p.LUTDtype = 12345; return "params.LUTDtype" },
	Describe:  func(idx *ivfpq.Index) string { return fmt.Sprintf("in %d lists, pq dim %d", idx.NLists(), idx.PQDim()) },
}

func TestIndex(t *testing.T) { safetest.TestIndex(t, conformance) }

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (safetest.FuzzDeserialize): never a panic or a hang; a searchable index,
// or safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	safetest.FuzzDeserialize(f, conformance, serialtest.Data, serialtest.Fuzz)
}
