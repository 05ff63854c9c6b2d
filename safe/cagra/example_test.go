package cagra_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// grid returns n×n 2-d points (i, j), row i*n+j.
func grid(n int) []float32 {
	out := make([]float32, 0, 2*n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			out = append(out, float32(i), float32(j))
		}
	}
	return out
}

// Build a CAGRA index from a Go slice, search it, and read the results.
// (The outputs shown are those of the test binary, which runs on the ABI
// test double, whose CAGRA is exact; on a GPU, CAGRA is approximate, though
// on data this small it finds the same neighbours.)
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	// 64 points on an 8×8 grid, lent from Go memory: cuVS copies host data.
	points, err := dlpack.NewHostMatrix(grid(8), 64, 2)
	if err != nil {
		log.Fatal(err)
	}
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.BuildAlgo = cagra.NNDescent
	p.GraphDegree, p.IntermediateGraphDegree = 8, 16
	idx, err := cagra.Build(res, points, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()
	fmt.Println(idx.Rows(), idx.Dim(), idx.GraphDegree(), idx.DType())

	// Queries and results live in device memory; neighbors may be uint32
	// or int64.
	const k = 3
	queries, err := safe.DeviceMatrixFrom(res, []float32{0.1, 0.2, 6.8, 4.1}, 2, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer queries.Close()
	neighbors, err := safe.NewDeviceMatrix[uint32](res, 2, k)
	if err != nil {
		log.Fatal(err)
	}
	defer neighbors.Close()
	distances, err := safe.NewDeviceMatrix[float32](res, 2, k)
	if err != nil {
		log.Fatal(err)
	}
	defer distances.Close()

	sp, err := cagra.DefaultSearchParams()
	if err != nil {
		log.Fatal(err)
	}
	if err := idx.Search(res, &sp, queries, neighbors, distances, nil); err != nil {
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
	// 64 2 8 float32
	// query 0: rows [0 1 8], squared distances [0.05 0.65 0.85]
	// query 1: rows [60 52 61], squared distances [0.05 0.65 0.85]
}

// A bitset filter keeps a search to some rows: here, the grid's rows with
// an even first coordinate. The filter is sized for the index's row count,
// uploaded once, and reusable by any number of searches.
func ExampleIndex_Search_filtered() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	// Device data with 8-byte rows: copied by cuVS (rows of a multiple of
	// 16 bytes would be kept by reference, and borrowed until Close).
	data, err := safe.DeviceMatrixFrom(res, grid(8), 64, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer data.Close()
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = 8, 16
	idx, err := cagra.Build(res, data, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()

	var allowed []int64
	for row := int64(0); row < int64(idx.Rows()); row++ {
		if (row/8)%2 == 0 { // point (row/8, row%8)
			allowed = append(allowed, row)
		}
	}
	filter, err := safe.NewBitsetFilterAllowing(res, idx.Rows(), allowed)
	if err != nil {
		log.Fatal(err)
	}
	defer filter.Close()

	// A query with no ties among its nearest allowed rows, so the order
	// is certain on any library.
	queries, _ := safe.DeviceMatrixFrom(res, []float32{1.3, 2.8}, 1, 2)
	defer queries.Close()
	neighbors, _ := safe.NewDeviceMatrix[int64](res, 1, 4)
	defer neighbors.Close()
	distances, _ := safe.NewDeviceMatrix[float32](res, 1, 4)
	defer distances.Close()
	sp, _ := cagra.DefaultSearchParams()
	if err := idx.Search(res, &sp, queries, neighbors, distances, filter); err != nil {
		log.Fatal(err)
	}
	if err := res.Sync(); err != nil {
		log.Fatal(err)
	}
	ids, _ := neighbors.ToHost(res)
	for _, id := range ids {
		fmt.Printf("row %d = (%d, %d)\n", id, id/8, id%8)
	}
	// Output:
	// row 19 = (2, 3)
	// row 18 = (2, 2)
	// row 3 = (0, 3)
	// row 20 = (2, 4)
}

// Serialize an index to a file and read it back.
func ExampleDeserialize() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	points, _ := dlpack.NewHostMatrix(grid(8), 64, 2)
	p, _ := cagra.DefaultIndexParams()
	p.GraphDegree, p.IntermediateGraphDegree = 8, 16
	idx, err := cagra.Build(res, points, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()

	dir, err := os.MkdirTemp("", "cagra")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "grid.cagra")
	if err := idx.Serialize(res, path); err != nil { // with the dataset
		log.Fatal(err)
	}
	back, err := cagra.Deserialize(res, path)
	if err != nil {
		log.Fatal(err)
	}
	defer back.Close()
	fmt.Println(back.Rows(), back.Dim(), back.GraphDegree())
	// Output:
	// 64 2 8
}
