package ivfpq_test

import (
	"fmt"
	"log"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/refine"
)

// IVF-PQ ranks by compressed vectors; asking it for more candidates than
// needed and re-ranking them exactly against the original vectors
// (package refine) recovers the neighbours the compression blurred. Here
// the compression is heavy (16 dimensions in 4 codes of 4 bits: 2 bytes a
// row). The output holds on a GPU too: the 40 candidates include IVF-PQ's
// own 10 best, and refine keeps the exact 10 best of them, so it finds
// every true neighbour IVF-PQ found, and usually more.
func Example_refine() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	const rows, dim, nq, k, candidates = 4000, 16, 100, 10, 40
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]float32, rows*dim)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	qs := make([]float32, nq*dim)
	for i := range qs {
		qs[i] = float32(r.NormFloat64())
	}
	dataset, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	if err != nil {
		log.Fatal(err)
	}
	defer dataset.Close()
	queries, err := safe.DeviceMatrixFrom(res, qs, nq, dim)
	if err != nil {
		log.Fatal(err)
	}
	defer queries.Close()

	p, err := ivfpq.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.NLists, p.PQDim, p.PQBits = 16, 4, 4
	idx, err := ivfpq.Build(res, dataset, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()
	sp, err := ivfpq.DefaultSearchParams()
	if err != nil {
		log.Fatal(err)
	}
	sp.NProbes = 16

	search := func(kk int) *safe.DeviceMatrix[int64] {
		nb, err := safe.NewDeviceMatrix[int64](res, nq, kk)
		if err != nil {
			log.Fatal(err)
		}
		dist, err := safe.NewDeviceMatrix[float32](res, nq, kk)
		if err != nil {
			log.Fatal(err)
		}
		defer dist.Close()
		if err := idx.Search(res, &sp, queries, nb, dist); err != nil {
			log.Fatal(err)
		}
		return nb
	}
	plain := search(k)
	defer plain.Close()
	cands := search(candidates)
	defer cands.Close()

	refined, err := safe.NewDeviceMatrix[int64](res, nq, k)
	if err != nil {
		log.Fatal(err)
	}
	defer refined.Close()
	refinedDist, err := safe.NewDeviceMatrix[float32](res, nq, k)
	if err != nil {
		log.Fatal(err)
	}
	defer refinedDist.Close()
	if err := refine.Refine(res, dataset, queries, cands, refined, refinedDist, safe.L2Expanded); err != nil {
		log.Fatal(err)
	}

	// the exact k nearest rows of each query, computed in Go
	exact := make([][]int64, nq)
	for q := range exact {
		ids := make([]int64, rows)
		d := make([]float32, rows)
		for i := range ids {
			ids[i] = int64(i)
			for j := 0; j < dim; j++ {
				x := qs[q*dim+j] - data[i*dim+j]
				d[i] += x * x
			}
		}
		sort.Slice(ids, func(a, b int) bool { return d[ids[a]] < d[ids[b]] })
		exact[q] = ids[:k]
	}
	recall := func(m *safe.DeviceMatrix[int64]) float64 {
		got, err := m.ToHost(res) // waits for the searches
		if err != nil {
			log.Fatal(err)
		}
		hits := 0
		for q, want := range exact {
			for _, id := range want {
				if slices.Contains(got[q*k:(q+1)*k], id) {
					hits++
				}
			}
		}
		return float64(hits) / float64(nq*k)
	}
	before, after := recall(plain), recall(refined)
	fmt.Println("refined recall at least IVF-PQ's:", after >= before)
	// Output:
	// refined recall at least IVF-PQ's: true
}
