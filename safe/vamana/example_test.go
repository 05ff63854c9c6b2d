package vamana_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/vamana"
)

// Build a Vamana graph over Go memory, write it in DiskANN's format and
// read the graph file back.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	const rows, dim = 500, 16
	data := make([]float32, rows*dim)
	for i := range data {
		data[i] = float32((i*7919)%1000) / 1000
	}
	dataset, err := dlpack.NewHostMatrix(data, rows, dim)
	if err != nil {
		log.Fatal(err)
	}
	// Default*Params return a value; Build takes a pointer (nil: the
	// defaults).
	p, err := vamana.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.Metric = safe.L2Expanded // the only metric cuVS's Vamana has
	idx, err := vamana.Build(res, dataset, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()

	dir, err := os.MkdirTemp("", "vamana")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "index")
	if err := idx.Serialize(res, path); err != nil { // writes index and index.data
		log.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	g, err := vamana.ReadGraph(f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(idx.Dim(), len(g.Adjacency), g.MaxDegree <= 32, g.Medoid < rows)
	// Output: 16 500 true true
}
