package kmeans_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/kmeans"
)

// Two clusters of 1-D points, found and used to label new points.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	p, err := kmeans.DefaultParams()
	if err != nil {
		log.Fatal(err)
	}
	p.Clusters = 2
	p.Init = kmeans.Array // start from centroids of ours: a reproducible labelling
	data := []float32{0, 1, 2, 10, 11, 12}
	m, err := kmeans.FitSlice(res, &p, data, 1, nil, []float32{0, 10})
	if err != nil {
		log.Fatal(err)
	}
	labels, _, err := m.Predict(res, []float32{-5, 4, 7, 30}, nil, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Centroids, m.Inertia)
	fmt.Println(labels)
	// Output:
	// [1 11] 4
	// [0 0 1 1]
}
