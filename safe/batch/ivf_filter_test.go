package batch

import (
	"context"
	"sync"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// The batcher carries the filter policy: a filtered IVF-Flat Searcher
// (10% allowed, few probes: the raised probes and the second pass) and a
// filtered IVF-PQ one (ivfpq.Filtered, with the dataset) give each query
// what the direct filtered search gives it, every id allowed.
func TestIVFFiltered(t *testing.T) {
	safetest.Check(t)
	const rows, d, nq, k = 1500, 16, 48, 6
	res := safetest.Resources(t)
	data := safetest.Random(21, rows, d)
	queries := safetest.Random(22, nq, d)
	ds, err := safe.DeviceMatrixFrom(res, data, rows, d)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	ok := make([]bool, rows)
	var allowed []int64
	for i := 0; i < rows; i += 10 {
		allowed = append(allowed, int64(i))
		ok[i] = true
	}
	filter, err := safe.NewBitsetFilterAllowing(res, rows, allowed)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, filter)
	fp, err := ivfflat.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	fp.NLists = 32
	flat, err := ivfflat.Build(res, ds, &fp)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, flat)
	fsp := ivfflat.SearchParams{NProbes: 1}
	pp, err := ivfpq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	pp.NLists, pp.PQDim, pp.PQBits = 16, 8, 8
	pq, err := ivfpq.Build(res, ds, &pp)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, pq)
	pf, err := pq.NewFiltered(res, &ivfpq.SearchParams{NProbes: 2}, filter, ds, safe.L2Expanded, nq, k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, pf)
	for _, c := range []struct {
		name   string
		make   func() (Searcher, error)
		direct func() (*safe.Results, error)
	}{
		{"IVFFlat", func() (Searcher, error) { return IVFFlat(flat, &fsp, filter) },
			func() (*safe.Results, error) { return ivfflat.SearchSlice(res, flat, &fsp, queries, k, filter) }},
		{"IVFPQFiltered", func() (Searcher, error) { return IVFPQFiltered(pf) },
			func() (*safe.Results, error) {
				out := new(safe.Results)
				return out, ivfpq.SearchSliceFiltered(res, pf, queries, out)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := c.direct()
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.make()
			if err != nil {
				t.Fatal(err)
			}
			b, err := New[float32, int64](s, Options{MaxK: k, MaxBatch: nq})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var wg sync.WaitGroup
			for q := range nq {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := b.Search(context.Background(), queries[q*d:(q+1)*d], k)
					if err != nil {
						t.Error(err)
						return
					}
					ids, dist := res.Row(0)
					w, wd := want.Row(q)
					for j := range k {
						if !safe.Valid(ids[j]) || !ok[ids[j]] {
							t.Errorf("query %d: slot %d holds %d, not an allowed row: %v", q, j, ids[j], ids)
							return
						}
						if ids[j] != w[j] && !safetest.NearlyEqual(dist[j], wd[j]) {
							t.Errorf("query %d: %v at %v through the batcher, %v at %v searched with the others", q, ids, dist, w, wd)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
	if _, err := IVFPQFiltered(nil); !safetest.IsArg(err, "f") {
		t.Errorf("IVFPQFiltered(nil): %v", err)
	}
}
