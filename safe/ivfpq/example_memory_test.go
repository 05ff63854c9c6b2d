package ivfpq_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// Planning a build: what the device can give, what the build will take,
// and the refusal when it does not fit. (No Output: the sizes depend on
// the device.)
func ExampleEstimateMemory() {
	// A process that promised to stay under 4 GiB would load with
	// safe.Load(safe.WithMemoryLimit(4 << 30)).
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := safe.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	m, err := res.DeviceMemory()
	if err != nil {
		log.Fatal(err)
	}
	p, err := ivfpq.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	p.NLists = 4096
	// 50 M rows of 128 float32 in host memory: cuVS's IVF-PQ build reads
	// them in batches, the device holds the codes.
	est, err := ivfpq.EstimateMemory(safe.MemoryShape{Rows: 50_000_000, Dim: 128, DType: dlpack.Float32, HostDataset: true, Batch: 1000, K: 10}, &p, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("build peak %d MiB, index %d MiB, a search of 1000 queries %d MiB; the device can give %d MiB\n",
		est.BuildPeak>>20, est.Index>>20, est.Search>>20, m.Available>>20)
	// Build makes the same check before calling cuVS: when the estimate
	// does not fit, it returns a *safe.MemoryError (errors.Is
	// safe.ErrOutOfMemory) and nothing was allocated.
	rows := make([]float32, 1000*128) // a small dataset: it fits
	hm, err := dlpack.NewHostMatrix(rows, 1000, 128)
	if err != nil {
		log.Fatal(err)
	}
	p.NLists = 10
	idx, err := ivfpq.Build(res, hm, &p)
	var me *safe.MemoryError
	if errors.As(err, &me) {
		fmt.Printf("does not fit: needs %d MiB, %d MiB available\n", me.Need>>20, me.Available>>20)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	idx.Close()
}
