package nndescent_test

import (
	"fmt"
	"log"
	"math/rand/v2"
	"slices"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/nndescent"
)

// Build the 10-nearest-neighbour graph of 600 random points from Go
// memory, read it back into Go memory and compare it with the exact kNN
// graph. NN-Descent is approximate: which ids a row gets may differ
// between libraries and GPUs, so the example prints what holds for any
// good approximation (the same data reach a recall above 0.9 on a GPU).
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	const rows, dim, k = 600, 8, 10
	r := rand.New(rand.NewPCG(1, 1^0x9e3779b97f4a7c15))
	data := make([]float32, rows*dim)
	for i := range data {
		data[i] = r.Float32()
	}
	dataset, err := dlpack.NewHostMatrix(data, rows, dim)
	if err != nil {
		log.Fatal(err)
	}
	p, err := nndescent.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = k, 2*k
	idx, err := nndescent.Build(res, dataset, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()
	graph, err := idx.GraphSlice(res)
	if err != nil {
		log.Fatal(err)
	}

	// Each row's ids: in range, not the row itself, no repeats; and how
	// many of them are among its k exact nearest neighbours.
	wellFormed, hits := true, 0
	for i := range rows {
		dist := func(j int) float32 {
			var s float32
			for c := range dim {
				d := data[i*dim+c] - data[j*dim+c]
				s += d * d
			}
			return s
		}
		others := make([]int, 0, rows-1)
		for j := range rows {
			if j != i {
				others = append(others, j)
			}
		}
		slices.SortFunc(others, func(a, b int) int {
			if da, db := dist(a), dist(b); da != db {
				if da < db {
					return -1
				}
				return 1
			}
			return a - b
		})
		exact := others[:k]
		nb := slices.Clone(graph[i*k : (i+1)*k])
		slices.Sort(nb)
		for s, id := range nb {
			if int(id) >= rows || int(id) == i || (s > 0 && nb[s-1] == id) {
				wellFormed = false
			}
			if slices.Contains(exact, int(id)) {
				hits++
			}
		}
	}
	fmt.Println(idx.Rows(), "rows of", idx.GraphDegree(), "neighbours")
	fmt.Println("well formed:", wellFormed)
	fmt.Println("recall at least 0.9:", float64(hits)/(rows*k) >= 0.9)
	// Output:
	// 600 rows of 10 neighbours
	// well formed: true
	// recall at least 0.9: true
}
