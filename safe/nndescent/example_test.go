package nndescent_test

import (
	"fmt"
	"log"
	"slices"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/nndescent"
)

// Build the 2-nearest-neighbour graph of ten points on a line, from Go
// memory, and read it back into Go memory.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	data := make([]float32, 10)
	for i := range data {
		data[i] = float32(i)
	}
	dataset, err := dlpack.NewHostMatrix(data, 10, 1)
	if err != nil {
		log.Fatal(err)
	}
	p, err := nndescent.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = 2, 4
	idx, err := nndescent.Build(res, dataset, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()
	graph, err := idx.GraphSlice(res)
	if err != nil {
		log.Fatal(err)
	}
	for _, row := range []int{0, 5} {
		nb := slices.Clone(graph[row*2 : row*2+2])
		slices.Sort(nb)
		fmt.Println(row, nb)
	}
	// Output:
	// 0 [1 2]
	// 5 [4 6]
}
