package cagra_test

import (
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
)

// conformance is CAGRA's side of the index packages' conformance suite
// (safetest.IndexSuite): graph degree 16 (32 intermediate) whatever the
// sizes, default search params, files with their dataset; a round trip
// keeps the graph, and a deserialized index's search is checked by
// checkResults (recall against the exact kNN).
var conformance = &safetest.IndexSuite[*cagra.Index, cagra.SearchParams]{
	Name: "cagra",
	Rows: rows, Dim: dim, Queries: nq, K: k,
	Build: func(res *safe.Resources, dataset dlpack.Tensor, _ uint32, _ int) (*cagra.Index, error) {
		p, err := cagra.DefaultIndexParams()
		if err != nil {
			return nil, err
		}
		p.GraphDegree, p.IntermediateGraphDegree = degree, intermediate
		return cagra.Build(res, dataset, &p)
	},
	Search:          (*cagra.Index).Search,
	SearchSlice:     cagra.SearchSlice[float32],
	SearchSliceInto: cagra.SearchSliceInto[float32],
	SearchSlice64: func(res *safe.Resources, idx *cagra.Index, q []float64, k int) (*safe.Results, error) {
		return cagra.SearchSlice(res, idx, nil, q, k, nil)
	},
	Prepare: func(idx *cagra.Index, p *cagra.SearchParams, q, n, d dlpack.TensorMut) (safetest.IVFPrepared, error) {
		return idx.Prepare(p, q, n, d, nil)
	},
	Extend:    func(idx *cagra.Index, res *safe.Resources, v dlpack.Tensor) error { return idx.Extend(res, v, nil) },
	ExtendArg: "additional",
	ExtendC:   "cuvsCagraExtend",
	EstimateExtend: func(idx *cagra.Index, n int) (safe.MemoryEstimate, error) {
		return idx.EstimateExtend(safe.MemoryShape{Rows: n}, nil)
	},
	SerializeTo: func(idx *cagra.Index, res *safe.Resources, w io.Writer) (int64, error) {
		return idx.SerializeTo(res, w)
	},
	Serialize:       func(idx *cagra.Index, res *safe.Resources, path string) error { return idx.Serialize(res, path) },
	DeserializeFrom: cagra.DeserializeFrom,
	Deserialize:     cagra.Deserialize,
	SerializeCuVS:   cagra.SerializeCuVS,
	Filters:         true,
	Half:            true,
	FindsRows:       true,

	DefaultSearchParams: cagra.DefaultSearchParams,
	BadParams:           func(p *cagra.SearchParams) string { p.Algo = 99; return "params.Algo" },
	Describe:            func(idx *cagra.Index) string { return fmt.Sprintf("degree %d", idx.GraphDegree()) },
	Deserialized: func(t *testing.T, res *safe.Resources, built, back *cagra.Index) {
		g1, _ := built.Graph()
		g2, _ := back.Graph()
		if !slices.Equal(toHost[uint32](t, res, g1), toHost[uint32](t, res, g2)) {
			t.Error("the deserialized graph differs")
		}
	},
	Check: func(t *testing.T, res *safe.Resources, data, queries []float32, n *safe.DeviceMatrix[int64], d *safe.DeviceMatrix[float32]) {
		checkResults(t, res, n, d, data, queries, dim, nil)
	},
}

func TestIndex(t *testing.T) { safetest.TestIndex(t, conformance) }

// FuzzDeserializeFrom reads damaged and mutated streams of a small index
// (safetest.FuzzDeserialize): never a panic or a hang; a searchable index,
// or safe.ErrCorruptIndex. Its corpus is kept in testdata/fuzz.
func FuzzDeserializeFrom(f *testing.F) {
	safetest.FuzzDeserialize(f, conformance, serialtest.Data, serialtest.Fuzz)
}
