package pca_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/pca"
)

// Points on the line y = 2x: one component explains all the variance.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	p, err := pca.DefaultParams()
	if err != nil {
		log.Fatal(err)
	}
	data := []float32{1, 2, 2, 4, 3, 6, 4, 8}
	m, t, err := pca.FitTransform(res, &p, data, 2)
	if err != nil {
		log.Fatal(err)
	}
	back, err := m.InverseTransform(res, t)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("mean %.1f, ratio %.2f\n", m.Mean, m.ExplainedVarianceRatio)
	fmt.Printf("component %.3f\n", m.Components)
	fmt.Printf("reconstructed %.1f\n", back)
	// Output:
	// mean [2.5 5.0], ratio [1.00]
	// component [0.447 0.894]
	// reconstructed [1.0 2.0 2.0 4.0 3.0 6.0 4.0 8.0]
}
