package batch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

func cagraDefaults(t *testing.T) *cagra.SearchParams {
	t.Helper()
	sp, err := cagra.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	sp.ITopKSize = 64
	return &sp
}

// TestCAGRA searches a CAGRA index through a Batcher from many goroutines,
// one dataset row per request, with uint32 and int64 ids and with a bitset
// filter, and checks what holds on any GPU: ids in range and allowed,
// distances ascending, each row finds itself first, recall@k against an
// exact kNN. (CAGRA is approximate: results are not compared one by one.)
func TestCAGRA(t *testing.T) {
	safetest.Check(t)
	const rows, d, k = 1000, 16, 8
	res := safetest.Resources(t)
	data := safetest.Random(11, rows, d)
	ds, err := safe.DeviceMatrixFrom(res, data, rows, d)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = 32, 64
	idx, err := cagra.Build(res, ds, &p)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	var even []int64
	for i := int64(0); i < rows; i += 2 {
		even = append(even, i)
	}
	filter, err := safe.NewBitsetFilterAllowing(res, rows, even)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, filter)

	for _, c := range []struct {
		name   string
		filter *safe.Filter
	}{{"int64", nil}, {"uint32", nil}, {"uint32 filtered", filter}} {
		t.Run(c.name, func(t *testing.T) {
			s, err := CAGRA(idx, cagraDefaults(t), c.filter)
			if err != nil {
				t.Fatal(err)
			}
			allowed := func(i int) bool { return c.filter == nil || i%2 == 0 }
			var got [][]int64
			var dists [][]float32
			if c.name == "int64" {
				got, dists = cagraRequests[int64](t, s, data, d, k, allowed)
			} else {
				got, dists = cagraRequests[uint32](t, s, data, d, k, allowed)
			}
			var queries []int
			for i := 0; i < 200; i++ {
				if allowed(i) {
					queries = append(queries, i)
				}
			}
			var qs []float32
			for _, i := range queries {
				qs = append(qs, data[i*d:(i+1)*d]...)
			}
			exact := safetest.ExactKNN(data, qs, d, k, safetest.L2, func(i int) bool { return allowed(i) })
			hits := 0
			for j, i := range queries {
				ids := got[i]
				if ids[0] != int64(i) {
					t.Errorf("row %d: nearest %d, want itself", i, ids[0])
				}
				for x, id := range ids {
					if id < 0 || id >= rows || !allowed(int(id)) {
						t.Fatalf("row %d: id %d out of range or filtered out", i, id)
					}
					if x > 0 && dists[i][x] < dists[i][x-1] {
						t.Errorf("row %d: distances not ascending: %v", i, dists[i])
					}
					if slices.Contains(exact[j], id) {
						hits++
					}
				}
			}
			if r := float64(hits) / float64(len(queries)*k); r < 0.95 {
				t.Errorf("recall@%d %.3f, want at least 0.95", k, r)
			}
		})
	}
}

// cagraRequests searches rows [0, 200) of data, those allowed, one request
// each from 20 goroutines, and returns each row's ids and distances.
func cagraRequests[N Neighbor](t *testing.T, s Searcher, data []float32, d, k int, allowed func(int) bool) ([][]int64, [][]float32) {
	t.Helper()
	b, err := New[float32, N](s, Options{MaxK: k, MaxBatch: 32, Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := b.WarmUp(); err != nil {
		t.Fatal(err)
	}
	ids, dists := make([][]int64, 200), make([][]float32, 200)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < 200; i += 20 {
				if !allowed(i) {
					continue
				}
				res, err := b.Search(context.Background(), data[i*d:(i+1)*d], k)
				if err != nil {
					errs <- fmt.Errorf("row %d: %w", i, err)
					return
				}
				ids[i], dists[i] = res.Row(0)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids, dists
}
