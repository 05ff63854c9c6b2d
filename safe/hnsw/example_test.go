package hnsw_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
)

// Build on the GPU, serve on the CPU: a CAGRA index converted to HNSW and
// searched with host memory only.
func Example() {
	const rows, dim, k = 1000, 16, 5
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]float32, rows*dim)
	for i := range data {
		data[i] = rng.Float32()
	}
	res, err := safe.NewResources()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Close()

	// CAGRA on the GPU (here from host rows, which cuVS copies).
	dataset, _ := dlpack.NewHostMatrix(data, rows, dim)
	cagraIdx, err := cagra.Build(res, dataset, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// CAGRA → HNSW: the graph becomes the base layer, the upper layers are
	// built on the CPU. The HNSW index copies everything it needs.
	p, _ := hnsw.DefaultIndexParams()
	p.Hierarchy = hnsw.HierarchyCPU
	idx, err := hnsw.FromCagra(res, cagraIdx, &p)
	cagraIdx.Close()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer idx.Close()

	// CPU search: queries, neighbors and distances in Go memory.
	queries, _ := dlpack.NewHostMatrix(data[:3*dim], 3, dim) // three rows of the dataset
	ids := make([]uint64, 3*k)
	dists := make([]float32, 3*k)
	neighbors, _ := dlpack.NewHostMatrix(ids, 3, k)
	distances, _ := dlpack.NewHostMatrix(dists, 3, k)
	if err := idx.Search(res, &hnsw.SearchParams{Ef: 64}, queries, neighbors, distances); err != nil {
		fmt.Println(err)
		return
	}
	for q := range 3 {
		fmt.Printf("query %d: nearest row %d at distance %.1f\n", q, ids[q*k], dists[q*k])
	}
	// Output:
	// query 0: nearest row 0 at distance 0.0
	// query 1: nearest row 1 at distance 0.0
	// query 2: nearest row 2 at distance 0.0
}
