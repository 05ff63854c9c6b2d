package ivfflat_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// Build an IVF-Flat index over eight points on a line, in two lists, and
// search with every list probed: each point finds itself first, at
// distance 0, whatever the k-means made of the lists.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	points := []float32{0, 1, 2, 3, 10, 11, 12, 13}
	dataset, err := safe.DeviceMatrixFrom(res, points, 8, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer dataset.Close()
	p, err := ivfflat.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.NLists = 2
	idx, err := ivfflat.Build(res, dataset, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()

	neighbors, _ := safe.NewDeviceMatrix[int64](res, 8, 1)
	defer neighbors.Close()
	distances, _ := safe.NewDeviceMatrix[float32](res, 8, 1)
	defer distances.Close()
	sp := &ivfflat.SearchParams{NProbes: 2} // every list: exact
	if err := idx.Search(res, sp, dataset, neighbors, distances, nil); err != nil {
		log.Fatal(err)
	}
	ids, _ := neighbors.ToHost(res)
	ds, _ := distances.ToHost(res)
	fmt.Println(idx.Rows(), idx.NLists(), ids, ds)
	// Output: 8 2 [0 1 2 3 4 5 6 7] [0 0 0 0 0 0 0 0]
}
