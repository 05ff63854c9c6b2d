// Command quickstart is the README's first program: it builds a CAGRA index
// over vectors held in a Go slice and searches it with a few of them.
//
// Run it on a machine with an NVIDIA GPU and libcuvs_c (see the README for
// conda and pip installs; CUVS_LIBRARY points at the library if the loader
// cannot find it):
//
//	go run github.com/cuvs-go/cuvs/examples/quickstart
//
// Without a GPU, against the project's ABI test double (a CPU stand-in for
// trying the API, never for serving):
//
//	go run ./internal/cuvsdouble/cmd/cuvsdouble-build -o /tmp/double/libcuvs_c.so
//	CUVS_LIBRARY=/tmp/double/libcuvs_c.so go run ./examples/quickstart
//
// Each query is a row of the dataset, so its nearest neighbour is itself, on
// a GPU as on the double: the program prints
//
//	query 0: nearest row 0
//	query 1: nearest row 1
//	query 2: nearest row 2
package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	// Once per process: open libcuvs_c, check its version, enable the
	// device memory pool.
	if err := safe.Load(); err != nil {
		return err
	}
	// A CUDA stream and cuVS's scratch state: one per goroutine that calls
	// cuVS.
	res, err := safe.NewResources()
	if err != nil {
		return err
	}
	defer res.Close()

	const rows, dim, k = 2000, 16, 5
	r := rand.New(rand.NewPCG(1, 2))
	vectors := make([]float32, rows*dim) // your data, row-major
	for i := range vectors {
		vectors[i] = r.Float32()
	}
	// Lend the Go slice to cuVS for the build (no copy on the Go side; cuVS
	// copies host data to the device).
	dataset, err := dlpack.NewHostMatrix(vectors, rows, dim)
	if err != nil {
		return err
	}
	// nil params: cuVS's defaults (start from cagra.DefaultIndexParams to
	// change some).
	index, err := cagra.Build(res, dataset, nil)
	if err != nil {
		return err
	}
	defer index.Close()

	// Three queries: the first three rows. nil params: cuVS's defaults.
	results, err := cagra.SearchSlice(res, index, nil, vectors[:3*dim], k, nil)
	if err != nil {
		return err
	}
	for q := range results.Len() {
		ids, _ := results.Row(q) // and the distances, nearest first
		fmt.Fprintf(w, "query %d: nearest row %d\n", q, ids[0])
	}
	return nil
}
