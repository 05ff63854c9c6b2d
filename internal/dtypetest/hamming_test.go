package dtypetest

import (
	"math/rand/v2"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/nndescent"
)

// bitData returns rows and queries of dim bytes (256 bits) in 16 clusters of
// bit patterns, each bit of a row flipped from its cluster's with
// probability 0.15: near rows in Hamming distance share a cluster.
func bitData[T elem](seed uint64) *data[T] {
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	const clusters = 16
	centers := make([]uint8, clusters*dim)
	for i := range centers {
		centers[i] = uint8(r.Uint32())
	}
	d := makeData[T](seed) // for name and dtype
	gen := func(n int) []T {
		out := make([]T, n*dim)
		for i := 0; i < n; i++ {
			c := centers[r.IntN(clusters)*dim:]
			for j := 0; j < dim; j++ {
				v := c[j]
				for b := 0; b < 8; b++ {
					if r.Float64() < 0.15 {
						v ^= 1 << b
					}
				}
				out[i*dim+j] = T(v)
			}
		}
		return out
	}
	d.rows, d.queries = gen(rows), gen(nq)
	return d
}

// CAGRA with BitwiseHamming over uint8 rows: cuVS instantiates the
// Hamming distance for uint8 data only (compute_distance_standard_matrix
// .json, both releases; its graph build checks int8 or uint8), with an
// NN-Descent or iterative graph build. The distances are popcounts,
// unscaled (postprocess_distances leaves BitwiseHamming as it is).
func TestCagraHamming(t *testing.T) {
	t.Run("uint8", func(t *testing.T) {
		safetest.Check(t)
		res := safetest.Resources(t)
		d := bitData[uint8](50)
		p := cagraParams(t, safe.BitwiseHamming)
		p.BuildAlgo = cagra.NNDescent
		idx, err := cagra.Build(res, hostMatrix(t, d.rows, rows, dim), p)
		must(t, err)
		safetest.Close(t, idx)
		got, err := cagra.SearchSlice(res, idx, &cagra.SearchParams{ITopKSize: 64}, d.queries, k, nil)
		must(t, err)
		c := &check[uint8]{t: t, what: "cagra BitwiseHamming", d: d, queries: d.queries, e: exactKNN(safe.BitwiseHamming, d.rows, d.queries, k, nil)}
		floor(t, c.what, c.recall(got.Neighbors, got.Distances, k, 0, nil), 0.8)
	})
}

// NN-Descent with BitwiseHamming over int8 and uint8 rows (cuVS: "when T
// == int8, uint8"): the graph against the exact Hamming kNN graph.
func TestNNDescentHamming(t *testing.T) {
	forTypes(t, func(t *testing.T, _ *data[int8]) { testNNDescentHamming(t, bitData[int8](51)) },
		func(t *testing.T, _ *data[uint8]) { testNNDescentHamming(t, bitData[uint8](52)) })
}

func testNNDescentHamming[T elem](t *testing.T, d *data[T]) {
	safetest.Check(t)
	res := safetest.Resources(t)
	p, err := nndescent.DefaultIndexParams()
	must(t, err)
	p.Metric, p.GraphDegree, p.IntermediateGraphDegree = safe.BitwiseHamming, 16, 32
	const n = rows / 2 // the double's NN-Descent is slow on popcounts
	idx, err := nndescent.Build(res, hostMatrix(t, d.rows[:n*dim], n, dim), &p)
	must(t, err)
	safetest.Close(t, idx)
	g, err := idx.GraphSlice(res)
	must(t, err)
	floor(t, "nndescent BitwiseHamming", graphRecall(t, d.rows[:n*dim], g, idx.GraphDegree(), safe.BitwiseHamming), 0.8)
}
