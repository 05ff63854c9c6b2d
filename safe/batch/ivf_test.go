package batch

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

// TestIVF searches an IVF-Flat, an IVF-SQ and an IVF-PQ index through a Batcher from
// many goroutines, one query per request, and checks each caller's ids
// against a search of all the queries at once with the same parameters
// (ties apart): an IVF search treats each query alone, so its results do
// not depend on the batch it is in.
func TestIVF(t *testing.T) {
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

	fp, err := ivfflat.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	fp.NLists = 16
	flat, err := ivfflat.Build(res, ds, &fp)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, flat)
	fsp, err := ivfflat.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	fsp.NProbes = 4
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
	psp, err := ivfpq.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	psp.NProbes = 4
	sqp, err := ivfsq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	sqp.NLists = 16
	sq, err := ivfsq.Build(res, ds, &sqp)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, sq)
	ssp, err := ivfsq.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	ssp.NProbes = 4

	for _, c := range []struct {
		name   string
		make   func() (Searcher, error)
		direct func() (*safe.Results, error)
	}{
		{"IVFFlat", func() (Searcher, error) { return IVFFlat(flat, &fsp, nil) },
			func() (*safe.Results, error) { return ivfflat.SearchSlice(res, flat, &fsp, queries, k, nil) }},
		{"IVFSQ", func() (Searcher, error) { return IVFSQ(sq, &ssp, nil) },
			func() (*safe.Results, error) { return ivfsq.SearchSlice(res, sq, &ssp, queries, k, nil) }},
		{"IVFPQ", func() (Searcher, error) { return IVFPQ(pq, &psp) },
			func() (*safe.Results, error) { return ivfpq.SearchSlice(res, pq, &psp, queries, k) }},
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
			b, err := New[float32, int64](s, Options{MaxK: k})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			// IVF-PQ's batches search device buffers (its search refused
			// the pinned staging now and then on the real library).
			if dev := b.b.slots[0].devQ != nil; dev != (c.name == "IVFPQ") {
				t.Errorf("%s: device buffers %v", c.name, dev)
			}
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
					// Equal ids, but for rows at equal distances (PQ codes
					// tie), which a GPU's top-k may order either way.
					w, wd := want.Row(q)
					for j := range k {
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
	for name, err := range map[string]error{"IVFFlat": errOf(IVFFlat(nil, nil, nil)), "IVFSQ": errOf(IVFSQ(nil, nil, nil)), "IVFPQ": errOf(IVFPQ(nil, nil))} {
		var ae *safe.ArgError
		if !errors.As(err, &ae) || ae.Arg != "idx" {
			t.Errorf("%s(nil): %v", name, err)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }
