package ivfsq_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

// Build an IVF-SQ index over random rows and search for a few of them.
// There is no Output: the 8-bit codes make distances approximate, so which
// row comes first for a query may differ between machines and releases.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	const rows, dim = 1000, 8
	data := make([]float32, rows*dim)
	for i := range data {
		data[i] = float32((i*7919)%1000) / 1000
	}
	dataset, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	if err != nil {
		log.Fatal(err)
	}
	defer dataset.Close()
	p, err := ivfsq.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.NLists = 16
	idx, err := ivfsq.Build(res, dataset, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()

	queries, _ := dataset.RowsView(0, 4)
	neighbors, _ := safe.NewDeviceMatrix[int64](res, 4, 5)
	defer neighbors.Close()
	distances, _ := safe.NewDeviceMatrix[float32](res, 4, 5)
	defer distances.Close()
	if err := idx.Search(res, &ivfsq.SearchParams{NProbes: 16}, queries, neighbors, distances, nil); err != nil {
		log.Fatal(err)
	}
	ids, _ := neighbors.ToHost(res)
	fmt.Println(idx.Rows(), ids)
}
