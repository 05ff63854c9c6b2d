package good_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/dlpack"
	cuvs "github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

func Example() {
	if err := cuvs.Load(); err != nil {
		log.Fatal(err)
	}
	p, err := cagra.DefaultIndexParams()
	fmt.Println(p, err)
}

// Only package dlpack: pure Go, no Load.
func ExampleTensor() {
	m, err := dlpack.NewHostMatrix([]float32{1, 2}, 1, 2)
	fmt.Println(m, err)
}

// Statements before the first use are fine.
func ExampleIndex() {
	data := []float32{1, 2}
	err := cuvs.Load()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(data, grid())
}

func grid() []float32 { return nil }
