package ivfpq_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// blobs returns 16 blobs of 128 points each in 8 dimensions, blob b (rows
// b*128 .. b*128+127) within 1 of (100·b, 0, ..., 0): far apart, so that
// the nearest rows of a blob's centre are certainly its own, however lossy
// the compression.
func blobs() []float32 {
	const d = 8
	out := make([]float32, 0, 16*128*d)
	seed := uint32(1)
	for b := 0; b < 16; b++ {
		for i := 0; i < 128; i++ {
			for j := 0; j < d; j++ {
				seed = seed*1664525 + 1013904223
				x := float32(seed>>8)/float32(1<<24)*2 - 1
				if j == 0 {
					x += 100 * float32(b)
				}
				out = append(out, x)
			}
		}
	}
	return out
}

// Build an IVF-PQ index from a Go slice and search it. The outputs hold on
// a GPU too: the neighbours' ids are approximate, but here every candidate
// near a blob's centre belongs to that blob.
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	// 2048 rows of 8 float32 from Go memory: cuVS copies and compresses them.
	data, err := dlpack.NewHostMatrix(blobs(), 16*128, 8)
	if err != nil {
		log.Fatal(err)
	}
	p, err := ivfpq.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.NLists, p.PQDim, p.PQBits = 16, 4, 8 // 4 codes of 8 bits: 4 bytes a row instead of 32
	idx, err := ivfpq.Build(res, data, &p)
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()
	fmt.Println(idx.Rows(), idx.Dim(), idx.NLists(), idx.PQDim(), idx.PQBits(), idx.PQLen(), idx.DType())

	// Queries and results live in device memory; neighbors are int64.
	const k = 5
	queries, err := safe.DeviceMatrixFrom(res, []float32{300, 0, 0, 0, 0, 0, 0, 0, 1100, 0, 0, 0, 0, 0, 0, 0}, 2, 8)
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

	sp, err := ivfpq.DefaultSearchParams()
	if err != nil {
		log.Fatal(err)
	}
	sp.NProbes = 4 // the 4 lists nearest each query
	if err := idx.Search(res, &sp, queries, neighbors, distances); err != nil {
		log.Fatal(err)
	}
	ids, err := neighbors.ToHost(res) // waits for the search
	if err != nil {
		log.Fatal(err)
	}
	for q := 0; q < 2; q++ {
		blobsFound := map[int64]bool{}
		for _, id := range ids[q*k : (q+1)*k] {
			blobsFound[id/128] = true
		}
		fmt.Printf("query %d: %d neighbours, from blobs %v\n", q, k, blobsFound)
	}
	// Output:
	// 2048 8 16 4 8 2 float32
	// query 0: 5 neighbours, from blobs map[3:true]
	// query 1: 5 neighbours, from blobs map[11:true]
}
