package multigpu_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// A Batcher in front of a sharded multi-GPU IVF-Flat index (all probes:
// exact): concurrent one-query requests get exactly their own query's
// nearest rows.
func TestBatcher(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	data, qs := safetest.Random(40, rows, dim), safetest.Random(41, nq, dim)
	ip, sp := allProbes(4)
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	s, err := idx.Searcher(res, &multigpu.IVFFlatSearchParams{Base: sp})
	if err != nil {
		t.Fatal(err)
	}
	b, err := batch.New[float32, int64](s, batch.Options{MaxK: k, MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, b)
	want := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
	var wg sync.WaitGroup
	errs := make(chan error, nq)
	for q := 0; q < nq; q++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := b.Search(context.Background(), qs[q*dim:(q+1)*dim], k)
			if err != nil {
				errs <- err
				return
			}
			ids := got.Neighbors
			if !slices.Equal(ids, want[q]) {
				t.Errorf("query %d: %v, exact %v", q, ids, want[q])
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := (*multigpu.IVFFlatIndex)(nil).Searcher(res, nil); err == nil {
		t.Fatal("nil index adapted")
	}
	if _, err := idx.Searcher(nil, nil); !safetest.IsArg(err, "mres") {
		t.Fatalf("nil mres: %v", err)
	}
}
