package distance_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/distance"
)

// The squared Euclidean and the L1 distances between two sets of 2-D points.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	x := []float32{0, 0, 3, 4}       // two points
	y := []float32{0, 0, 1, 1, 3, 0} // three points
	sq, err := distance.PairwiseSlice(res, x, y, 2, safe.L2Expanded, 0)
	if err != nil {
		log.Fatal(err)
	}
	l1, err := distance.PairwiseSlice(res, x, y, 2, safe.L1, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sq)
	fmt.Println(l1)
	// Output:
	// [0 2 9 25 13 16]
	// [0 2 3 7 5 4]
}
