package bruteforce_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
)

// noParams stands for the search params brute force has none of.
type noParams = struct{}

// conformance is brute force's side of the index packages' conformance
// suite (safetest.IndexSuite): no lists, no params, no Extend; a
// deserialized index's search is checked against the exact kNN.
var conformance = &safetest.IndexSuite[*bruteforce.Index, noParams]{
	Name: "bruteforce",
	Rows: rows, Dim: dim, Queries: nq, K: k,
	Build: func(res *safe.Resources, dataset dlpack.Tensor, _ uint32, _ int) (*bruteforce.Index, error) {
		return bruteforce.Build(res, dataset, nil)
	},
	Search: func(idx *bruteforce.Index, res *safe.Resources, _ *noParams, q dlpack.Tensor, n, d dlpack.TensorMut, filter *safe.Filter) error {
		return idx.Search(res, q, n, d, filter)
	},
	SearchSlice: func(res *safe.Resources, idx *bruteforce.Index, _ *noParams, q []float32, k int, filter *safe.Filter) (*safe.Results, error) {
		return bruteforce.SearchSlice(res, idx, q, k, filter)
	},
	SearchSliceInto: func(res *safe.Resources, idx *bruteforce.Index, _ *noParams, q []float32, k int, filter *safe.Filter, out *safe.Results) error {
		return bruteforce.SearchSliceInto(res, idx, q, k, filter, out)
	},
	SearchSlice64: func(res *safe.Resources, idx *bruteforce.Index, q []float64, k int) (*safe.Results, error) {
		return bruteforce.SearchSlice(res, idx, q, k, nil)
	},
	Prepare: func(idx *bruteforce.Index, _ *noParams, q, n, d dlpack.TensorMut) (safetest.IVFPrepared, error) {
		return idx.Prepare(q, n, d, nil)
	},
	SerializeTo:     (*bruteforce.Index).SerializeTo,
	Serialize:       (*bruteforce.Index).Serialize,
	DeserializeFrom: bruteforce.DeserializeFrom,
	Deserialize:     bruteforce.Deserialize,
	SerializeCuVS:   bruteforce.SerializeCuVS,
	Filters:         true,
	Half:            true,
	Check: func(t *testing.T, res *safe.Resources, data, queries []float32, n *safe.DeviceMatrix[int64], d *safe.DeviceMatrix[float32]) {
		got, err := n.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		dist, err := d.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		checkExact(t, data, queries, got, dist, k, nil)
	},
}

func TestIndex(t *testing.T) { safetest.TestIndex(t, conformance) }

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (safetest.FuzzDeserialize): never a panic or a hang; a searchable index,
// or safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	safetest.FuzzDeserialize(f, conformance, serialtest.Data, serialtest.Fuzz)
}
