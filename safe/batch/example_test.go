package batch_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// Four goroutines each search one query at a time through one Batcher,
// which searches concurrent requests together. The index holds the points
// 0, 1, ..., 9 on a line, and the query x.2 finds x, then x+1, then x-1 (a
// brute-force search is exact, so a GPU gives these very results).
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	var points []float32
	for i := range 10 {
		points = append(points, float32(i), 0)
	}
	dataset, err := safe.DeviceMatrixFrom(res, points, 10, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer dataset.Close()
	idx, err := bruteforce.Build(res, dataset, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()

	s, err := batch.BruteForce(idx, nil)
	if err != nil {
		log.Fatal(err)
	}
	b, err := batch.New[float32, int64](s, batch.Options{MaxK: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close() // before the index's Close

	found := make([][]int64, 8)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			neighbors, distances := make([]int64, 3), make([]float32, 3) // reused: no allocation per search
			for x := g + 1; x < 9; x += 4 {
				query := []float32{float32(x) + 0.2, 0}
				if err := b.SearchInto(context.Background(), query, neighbors, distances); err != nil {
					log.Fatal(err)
				}
				found[x-1] = append([]int64(nil), neighbors...)
			}
		}()
	}
	wg.Wait()
	for x, ids := range found {
		fmt.Printf("%d.2: %v\n", x+1, ids)
	}
	got, err := b.Search(context.Background(), []float32{0.2, 0}, 2) // fewer than MaxK
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Neighbors)
	// Output:
	// 1.2: [1 2 0]
	// 2.2: [2 3 1]
	// 3.2: [3 4 2]
	// 4.2: [4 5 3]
	// 5.2: [5 6 4]
	// 6.2: [6 7 5]
	// 7.2: [7 8 6]
	// 8.2: [8 9 7]
	// [0 1]
}
