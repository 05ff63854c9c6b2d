package multigpu_test

import (
	"fmt"
	"log"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// A sharded IVF-Flat index over every GPU of the machine: the points 0, 1,
// ..., 99 on a line, split over the devices. With every list probed the
// search is exact, so the query 31.2 finds 31, 32 and 30, under their
// dataset row ids, on one GPU or several: it prints [31 32 30].
//
// It needs a libcuvs_c built with multi-GPU support (NCCL); on one built
// without, multigpu.NewResources returns an error wrapping
// generated.ErrMissingSymbol. The example is compiled, not run, by go test
// (TestShardedIVFFlatIsExact checks the same search where the library has
// the functions).
func Example() {
	if err := safe.Load(); err != nil {
		log.Fatal(err)
	}
	res, err := multigpu.NewResources()
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	var points []float32
	for i := range 100 {
		points = append(points, float32(i), 0)
	}
	data, err := dlpack.NewHostMatrix(points, 100, 2)
	if err != nil {
		log.Fatal(err)
	}
	base, err := ivfflat.DefaultIndexParams()
	if err != nil {
		log.Fatal(err)
	}
	base.NLists = 1
	idx, err := multigpu.BuildIVFFlat(res, data, &multigpu.IVFFlatIndexParams{Mode: multigpu.Sharded, Base: &base})
	if err != nil {
		log.Fatal(err)
	}
	defer idx.Close()
	queries, err := dlpack.NewHostMatrix([]float32{31.2, 0}, 1, 2)
	if err != nil {
		log.Fatal(err)
	}
	got, err := idx.SearchK(res, &multigpu.IVFFlatSearchParams{Base: &ivfflat.SearchParams{NProbes: 1}}, queries, 3)
	if err != nil {
		log.Fatal(err)
	}
	ids, _ := got.Row(0)
	fmt.Println(ids)
}
