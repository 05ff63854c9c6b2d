package bruteforce_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// Write an index to any io.Writer (an object store's upload, an HTTP
// response; here a buffer) and read it back from an io.Reader. (Brute force
// is exact: a GPU prints the same.)
func ExampleIndex_SerializeTo() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	dataset, err := safe.DeviceMatrixFrom(res, []float32{0, 0, 1, 0, 0, 1, 5, 5}, 4, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer dataset.Close()
	idx, err := bruteforce.Build(res, dataset, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()

	var buf bytes.Buffer
	if _, err := idx.SerializeTo(res, &buf); err != nil {
		log.Fatal(err)
	}
	back, err := bruteforce.DeserializeFrom(res, &buf)
	if err != nil {
		log.Fatal(err)
	}
	defer back.Close()

	queries, err := safe.DeviceMatrixFrom(res, []float32{4.8, 5.1}, 1, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer queries.Close()
	neighbors, err := safe.NewDeviceMatrix[int64](res, 1, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer neighbors.Close()
	distances, err := safe.NewDeviceMatrix[float32](res, 1, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer distances.Close()
	if err := back.Search(res, queries, neighbors, distances, nil); err != nil {
		log.Fatal(err)
	}
	ids, err := neighbors.ToHost(res)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(back.Rows(), ids[0])
	// Output: 4 3
}
