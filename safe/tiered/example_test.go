package tiered_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

// A growable index: a CAGRA index over the first rows, fresh rows in a
// brute-force tier, both searched by one call.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	const dim = 4
	res, err := safe.NewResources()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Close()
	rows := make([]float32, 0, 300*dim)
	for i := range 300 {
		rows = append(rows, float32(i), float32(i%7), float32(i%11), 1)
	}
	first, _ := safe.DeviceMatrixFrom(res, rows[:250*dim], 250, dim)
	defer first.Close()
	p, _ := tiered.DefaultIndexParams()
	p.MinANNRows = 200 // an ANN index over more than 200 rows
	p.CAGRA = tiered.CAGRAParams{GraphDegree: 16, IntermediateGraphDegree: 32}
	idx, err := tiered.Build(res, first, &p)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer idx.Close()
	fresh, _ := safe.DeviceMatrixFrom(res, rows[250*dim:], 50, dim)
	defer fresh.Close()
	if err := idx.Extend(res, fresh); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d rows, %d under CAGRA\n", idx.Rows(), idx.ANNRows())

	queries, _ := safe.DeviceMatrixFrom(res, append(append([]float32{}, rows[10*dim:11*dim]...), rows[260*dim:261*dim]...), 2, dim)
	defer queries.Close()
	neighbors, _ := safe.NewDeviceMatrix[int64](res, 2, 1)
	defer neighbors.Close()
	distances, _ := safe.NewDeviceMatrix[float32](res, 2, 1)
	defer distances.Close()
	if err := idx.Search(res, nil, queries, neighbors, distances, nil); err != nil {
		fmt.Println(err)
		return
	}
	ids := make([]int64, 2)
	if err := neighbors.CopyToHost(res, ids); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("nearest:", ids)
	// Output:
	// 300 rows, 250 under CAGRA
	// nearest: [10 260]
}

// Deleting rows by id: they are never returned again, and ids do not
// change, neither at the deletion nor when Compact frees their storage.
func ExampleIndex_Delete() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	const dim = 4
	res, err := safe.NewResources()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Close()
	rows := make([]float32, 0, 100*dim)
	for i := range 100 {
		rows = append(rows, float32(i), float32(i%7), float32(i%11), 1)
	}
	data, _ := safe.DeviceMatrixFrom(res, rows, 100, dim)
	defer data.Close()
	idx, err := tiered.Build(res, data, nil) // below MinANNRows: exact search
	if err != nil {
		fmt.Println(err)
		return
	}
	defer idx.Close()
	n, err := idx.Delete([]int64{10, 11})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("deleted %d: %d ids, %d live, %d stored\n", n, idx.Rows(), idx.Live(), idx.Stored())
	if err := idx.Compact(res); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("compacted: %d ids, %d live, %d stored\n", idx.Rows(), idx.Live(), idx.Stored())
	got, err := tiered.SearchSlice(res, idx, nil, rows[10*dim:11*dim], 2, nil) // row 10's vector
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("nearest to row 10:", got.Neighbors)
	// Output:
	// deleted 2: 100 ids, 98 live, 100 stored
	// compacted: 100 ids, 98 live, 98 stored
	// nearest to row 10: [9 8]
}
