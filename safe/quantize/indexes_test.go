package quantize_test

import (
	"errors"
	"math/bits"
	"sort"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/quantize"
)

func recall(got *safe.Results, want [][]int64, k int) float64 {
	hit := 0
	for q, w := range want {
		row := got.Neighbors[q*got.K : q*got.K+k]
		for _, id := range w {
			for _, g := range row {
				if g == id {
					hit++
					break
				}
			}
		}
	}
	return float64(hit) / float64(len(want)*k)
}

func hamming(a, b []uint8) int {
	n := 0
	for i := range a {
		n += bits.OnesCount8(a[i] ^ b[i])
	}
	return n
}

func asFloats[T int8 | uint8](x []T) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func smallCagra(t *testing.T) *cagra.IndexParams {
	p, err := cagra.DefaultIndexParams()
	must(t, err)
	p.GraphDegree, p.IntermediateGraphDegree = 16, 32
	return &p
}

// The quantized datasets build the indexes that take them: scalar codes
// (int8) and binary codes (uint8) a CAGRA index, searched with the codes
// of queries, the binary codes also with BitwiseHamming; the rows decoded
// from PQ codes (float32) a brute-force index, which refuses the int8
// codes. (internal/dtypetest checks every index over int8/uint8 rows.)
func TestQuantizedDatasetsBuildIndexes(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim, nq, k = 400, 16, 20, 10
	data := safetest.Random(31, rows, dim)
	ddata := dev(t, res, data, rows, dim)

	// scalar int8 -> CAGRA
	sq, err := quantize.TrainScalar(res, ddata, nil)
	must(t, err)
	scodes := devZero[int8](t, res, rows, dim)
	must(t, sq.Transform(res, ddata, scodes))
	ci, err := cagra.Build(res, scodes, smallCagra(t))
	must(t, err)
	safetest.Close(t, ci)
	hc := toHost(t, res, scodes)
	got, err := cagra.SearchSlice(res, ci, nil, hc[:nq*dim], k, nil)
	must(t, err)
	if r := recall(got, safetest.ExactKNN(asFloats(hc), asFloats(hc[:nq*dim]), dim, k, safetest.L2, nil), k); r < 0.8 {
		t.Errorf("CAGRA over int8 codes: recall@%d %.2f against exact search of the codes", k, r)
	}
	if r := recall(got, safetest.ExactKNN(data, data[:nq*dim], dim, k, safetest.L2, nil), k); r < 0.7 {
		t.Errorf("CAGRA over int8 codes: recall@%d %.2f against exact search of the rows", k, r)
	}

	// binary uint8 -> CAGRA: each query's own code is at distance 0
	bq, err := quantize.TrainBinary(res, ddata, nil)
	must(t, err)
	safetest.Close(t, bq)
	bcols := quantize.BinaryCols(dim)
	bcodes := devZero[uint8](t, res, rows, bcols)
	must(t, bq.Transform(res, ddata, bcodes))
	bi, err := cagra.Build(res, bcodes, smallCagra(t))
	must(t, err)
	safetest.Close(t, bi)
	hb := toHost(t, res, bcodes)
	bres, err := cagra.SearchSlice(res, bi, nil, hb[:nq*bcols], k, nil)
	must(t, err)
	for q := 0; q < nq; q++ {
		if bres.Distances[q*k] != 0 {
			t.Errorf("binary query %d: nearest at distance %v, its own code is at 0", q, bres.Distances[q*k])
		}
	}

	// binary uint8 -> CAGRA with BitwiseHamming (cuVS's Hamming search is
	// instantiated for uint8 rows): each returned distance is the popcount
	// of the codes' xor, and the k returned are as near as the exact k
	// nearest (by distance: 16-bit codes tie a lot)
	hp := smallCagra(t)
	hp.Metric, hp.BuildAlgo = safe.BitwiseHamming, cagra.NNDescent
	hi, err := cagra.Build(res, bcodes, hp)
	must(t, err)
	safetest.Close(t, hi)
	hres, err := cagra.SearchSlice(res, hi, &cagra.SearchParams{ITopKSize: 64}, hb[:nq*bcols], k, nil)
	must(t, err)
	hits := 0
	for q := 0; q < nq; q++ {
		qc := hb[q*bcols : (q+1)*bcols]
		all := make([]int, rows)
		for i := range all {
			all[i] = hamming(qc, hb[i*bcols:(i+1)*bcols])
		}
		sort.Ints(all)
		for j := 0; j < k; j++ {
			id := hres.Neighbors[q*k+j]
			if !safe.Valid(id) || id < 0 || id >= rows {
				t.Errorf("Hamming query %d slot %d: id %d", q, j, id)
				continue
			}
			d := hamming(qc, hb[int(id)*bcols:(int(id)+1)*bcols])
			if float32(d) != hres.Distances[q*k+j] {
				t.Errorf("Hamming query %d slot %d: distance %v, the codes differ in %d bits", q, j, hres.Distances[q*k+j], d)
			}
			if d <= all[k-1] {
				hits++
			}
		}
	}
	if r := float64(hits) / float64(nq*k); r < 0.8 {
		t.Errorf("CAGRA BitwiseHamming over binary codes: recall@%d %.2f by distance", k, r)
	}

	// the int8 codes are not brute force's (float32 and float16 only)
	if _, err := bruteforce.Build(res, scodes, nil); !errors.Is(err, safe.ErrInvalidArgument) || !strings.Contains(err.Error(), "dtype int8") {
		t.Errorf("brute force over int8 codes: %v, want the dtype refused", err)
	}

	// PQ decoded float32 -> brute force (exact over the decoded rows)
	pq, err := quantize.BuildPQ(res, ddata, &quantize.PQParams{PQBits: 6, PQDim: 8, UseSubspaces: true,
		KMeansNIters: 5, KMeansType: quantize.KMeansBalanced, MaxTrainPointsPerPQCode: 256})
	must(t, err)
	safetest.Close(t, pq)
	pcodes := devZero[uint8](t, res, rows, pq.EncodedDim())
	must(t, pq.Transform(res, ddata, pcodes, nil))
	decoded := devZero[float32](t, res, rows, dim)
	must(t, pq.InverseTransform(res, pcodes, decoded, nil))
	bf, err := bruteforce.Build(res, decoded, nil)
	must(t, err)
	safetest.Close(t, bf)
	pres, err := bruteforce.SearchSlice(res, bf, data[:nq*dim], k, nil)
	must(t, err)
	hd := toHost(t, res, decoded)
	if r := recall(pres, safetest.ExactKNN(hd, data[:nq*dim], dim, k, safetest.L2, nil), k); r < 0.99 {
		t.Errorf("brute force over PQ-decoded rows: recall@%d %.2f against exact search of them", k, r)
	}
}
