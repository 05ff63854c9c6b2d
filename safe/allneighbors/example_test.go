package allneighbors_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/allneighbors"
)

// The 3-nearest-neighbour graph of ten points on a line, by brute force,
// from and into Go memory: each row lists itself first.
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
	// Default*Params return a value; the builders take a pointer (nil: the
	// defaults, brute force and L2Expanded).
	p, err := allneighbors.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.Algo, p.Metric = allneighbors.BruteForce, safe.L2Expanded
	g, err := allneighbors.BuildSlice(res, data, 10, 1, 3, &p)
	if err != nil {
		log.Fatal(err)
	}
	for _, row := range []int{0, 9} {
		ids, dist := g.Row(row)
		fmt.Println(row, ids, dist)
	}
	// Output:
	// 0 [0 1 2] [0 1 4]
	// 9 [9 8 7] [0 1 4]
}
