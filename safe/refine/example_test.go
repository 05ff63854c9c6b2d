package refine_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/refine"
)

// Re-rank the candidates an approximate search returned: here four points
// on a line, and candidates for the query 2.9 in no particular order. The
// tensors are Go slices, so cuVS re-ranks on the CPU; the squared
// distances of these small integers are exact on any machine.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	dataset, _ := dlpack.NewHostMatrix([]float32{0, 1, 2, 3}, 4, 1)
	query, _ := dlpack.NewHostMatrix([]float32{3}, 1, 1)
	candidates, _ := dlpack.NewHostMatrix([]int64{0, 2, 1, 3}, 1, 4)
	neighbors := make([]int64, 2)
	distances := make([]float32, 2)
	n, _ := dlpack.NewHostMatrix(neighbors, 1, 2)
	d, _ := dlpack.NewHostMatrix(distances, 1, 2)
	if err := refine.Refine(res, dataset, query, candidates, n, d, safe.L2Expanded); err != nil {
		log.Fatal(err)
	}
	fmt.Println(neighbors, distances)
	// Output: [3 2] [0 1]
}
