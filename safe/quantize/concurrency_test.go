package quantize_test

import (
	"sync"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/quantize"
)

// Transforms of one Binary and one PQ from several goroutines, each with
// its own resources, agree with a transform made alone; Close after them
// frees both.
func TestConcurrentTransforms(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, dim, workers = 128, 16, 4
	data := safetest.Random(17, rows, dim)
	in := host(t, data, rows, dim)
	bq, err := quantize.TrainBinary(res, in, nil)
	must(t, err)
	pq, err := quantize.BuildPQ(res, in, &quantize.PQParams{PQBits: 4, PQDim: 4, UseSubspaces: true, KMeansNIters: 3,
		KMeansType: quantize.KMeansBalanced, MaxTrainPointsPerPQCode: 256})
	must(t, err)
	bcols := quantize.BinaryCols(dim)
	wantB := make([]uint8, rows*bcols)
	must(t, bq.Transform(res, in, host(t, wantB, rows, bcols)))
	wantP := devZero[uint8](t, res, rows, pq.EncodedDim())
	must(t, pq.Transform(res, in, wantP, nil))
	wp := toHost(t, res, wantP)

	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := safe.NewResources()
			if err != nil {
				errs <- err
				return
			}
			defer r.Close()
			for i := 0; i < 5; i++ {
				gotB := make([]uint8, rows*bcols)
				if err := bq.Transform(r, in, host(t, gotB, rows, bcols)); err != nil {
					errs <- err
					return
				}
				c, err := safe.NewDeviceMatrix[uint8](r, rows, pq.EncodedDim())
				if err != nil {
					errs <- err
					return
				}
				err = pq.Transform(r, in, c, nil)
				got, herr := c.ToHost(r)
				_ = c.Close()
				if err == nil {
					err = herr
				}
				if err != nil {
					errs <- err
					return
				}
				for j := range gotB {
					if gotB[j] != wantB[j] {
						t.Errorf("binary byte %d differs", j)
						return
					}
				}
				for j := range got {
					if got[j] != wp[j] {
						t.Errorf("PQ byte %d differs", j)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	must(t, bq.Close())
	must(t, pq.Close())
}
