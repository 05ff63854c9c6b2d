package hnsw_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
)

// Build on the GPU, serve on the CPU: a CAGRA index converted to HNSW and
// searched from Go slices, as cagra.SearchSlice searches the GPU index.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	const rows, dim, k = 1000, 16, 5
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]float32, rows*dim)
	for i := range data {
		data[i] = rng.Float32()
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	// CAGRA on the GPU (here from host rows, which cuVS copies).
	dataset, err := dlpack.NewHostMatrix(data, rows, dim)
	if err != nil {
		log.Fatal(err)
	}
	cagraIdx, err := cagra.Build(res, dataset, nil)
	if err != nil {
		log.Fatal(err)
	}
	// CAGRA → HNSW: the graph becomes the base layer, the upper layers are
	// built on the CPU. The HNSW index copies everything it needs.
	p, err := hnsw.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.Hierarchy = hnsw.HierarchyCPU
	idx, err := hnsw.FromCagra(res, cagraIdx, &p)
	cagraIdx.Close()
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()

	// CPU search of three rows of the dataset: int64 ids, nearest first.
	r, err := hnsw.SearchSlice(res, idx, &hnsw.SearchParams{Ef: 64}, data[:3*dim], k, nil)
	if err != nil {
		log.Fatal(err)
	}
	for q := range r.Len() {
		ids, dists := r.Row(q)
		fmt.Printf("query %d: nearest row %d at distance %.1f\n", q, ids[0], dists[0])
	}
	// Output:
	// query 0: nearest row 0 at distance 0.0
	// query 1: nearest row 1 at distance 0.0
	// query 2: nearest row 2 at distance 0.0
}
