package bruteforce_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// Build an index over six 2-d points, find the two nearest of each query,
// and read the results. (The outputs shown are those of the test binary,
// which runs on the ABI test double; brute force is exact, so a GPU gives
// the same.)
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	points := []float32{
		0, 0,
		1, 0,
		0, 1,
		5, 5,
		6, 5,
		5, 6,
	}
	dataset, err := safe.DeviceMatrixFrom(res, points, 6, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer dataset.Close() // after the index's Close: the index borrows it

	// Default*Params return a value; Build takes a pointer (nil: the
	// defaults).
	p, err := bruteforce.DefaultBuildParams()
	if err != nil {
		log.Fatal(err)
	}
	p.Metric = safe.L2Expanded
	idx, err := bruteforce.Build(res, dataset, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()
	fmt.Println(dataset.Close()) // refused while the index lives

	const k = 2
	queries, err := safe.DeviceMatrixFrom(res, []float32{0.9, 0.1, 5.2, 5.9}, 2, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer queries.Close()
	neighbors, err := safe.NewDeviceMatrix[int64](res, 2, k)
	if err != nil {
		log.Fatal(err)
	}
	defer neighbors.Close()
	distances, err := safe.NewDeviceMatrix[float32](res, 2, k)
	if err != nil {
		log.Fatal(err)
	}
	defer distances.Close()

	if err := idx.Search(res, queries, neighbors, distances, nil); err != nil {
		log.Fatal(err)
	}
	if err := res.Sync(); err != nil { // the search is queued on res's stream
		log.Fatal(err)
	}
	ids, err := neighbors.ToHost(res)
	if err != nil {
		log.Fatal(err)
	}
	d, err := distances.ToHost(res)
	if err != nil {
		log.Fatal(err)
	}
	for q := 0; q < 2; q++ {
		fmt.Printf("query %d: rows %v, squared distances %.2f\n", q, ids[q*k:(q+1)*k], d[q*k:(q+1)*k])
	}
	// Output:
	// dlpack: cannot close DeviceMatrix[float32] 6×2: still borrowed by "bruteforce.Index(6×2)" (retained)
	// query 0: rows [1 0], squared distances [0.02 0.82]
	// query 1: rows [5 3], squared distances [0.05 0.85]
}

// A bitset filter restricts the search to some rows: here the three points
// near (5, 5) are excluded, so the second query finds the others.
func ExampleIndex_Search_filtered() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	points := []float32{0, 0, 1, 0, 0, 1, 5, 5, 6, 5, 5, 6}
	dataset, err := safe.DeviceMatrixFrom(res, points, 6, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer dataset.Close()
	idx, err := bruteforce.Build(res, dataset, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()

	// Sized for the index's rows, uploaded once, reusable.
	filter, err := safe.NewBitsetFilterAllowing(res, idx.Rows(), []int64{0, 1, 2})
	if err != nil {
		log.Fatal(err)
	}
	defer filter.Close()

	queries, _ := safe.DeviceMatrixFrom(res, []float32{0.9, 0.1, 5.2, 5.9}, 2, 2)
	defer queries.Close()
	neighbors, _ := safe.NewDeviceMatrix[int64](res, 2, 1)
	defer neighbors.Close()
	distances, _ := safe.NewDeviceMatrix[float32](res, 2, 1)
	defer distances.Close()
	if err := idx.Search(res, queries, neighbors, distances, filter); err != nil {
		log.Fatal(err)
	}
	if err := res.Sync(); err != nil {
		log.Fatal(err)
	}
	ids, _ := neighbors.ToHost(res)
	fmt.Println(ids)
	// Output:
	// [1 2]
}
