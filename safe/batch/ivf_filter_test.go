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
	pf, err := pq.NewFiltered(res, &ivfpq.SearchParams{NProbes: 2}, filter, ds, nq, k)
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

// TestIVFPQTenants: IVF-PQ Filtered made without a filter (two, so that
// two batches search at once) serve requests of three filters and none
// through one Batcher: each request gets what the direct search of its
// query with its filter gives (ivfpq.Filtered.SearchWith), every id
// allowed; the options the Filtered fix are checked by New.
func TestIVFPQTenants(t *testing.T) {
	safetest.Check(t)
	const rows, d, nq, k = 1500, 16, 32, 6
	res := safetest.Resources(t)
	data := safetest.Random(23, rows, d)
	queries := safetest.Random(24, nq, d)
	ds, err := safe.DeviceMatrixFrom(res, data, rows, d)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
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
	sp := &ivfpq.SearchParams{NProbes: 2}
	mkF := func(filter *safe.Filter, n int) *ivfpq.Filtered {
		f, err := pq.NewFiltered(res, sp, filter, ds, n, k)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, f)
		return f
	}
	var ts []tenant
	for i, frac := range []float64{0.005, 0.1, 0.5} {
		ts = append(ts, tenants(t, res, rows, 1, frac, uint64(30+i))...)
	}
	f1, f2 := mkF(nil, nq), mkF(nil, nq)
	s, err := IVFPQFiltered(f1, f2)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(FilterSearcher); !ok {
		t.Fatal("a Searcher of Filtered made without a filter takes no filter per request")
	}
	b, err := New[float32, int64](s, Options{MaxK: k, Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	alone := mkF(nil, 1)
	direct := func(q []float32, filter *safe.Filter) ([]int64, []float32) {
		t.Helper()
		qd, err := safe.DeviceMatrixFrom(res, q, 1, d)
		if err != nil {
			t.Fatal(err)
		}
		defer qd.Close()
		n, err := safe.NewDeviceMatrix[int64](res, 1, k)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		dd, err := safe.NewDeviceMatrix[float32](res, 1, k)
		if err != nil {
			t.Fatal(err)
		}
		defer dd.Close()
		if err := alone.SearchWith(res, qd, n, dd, filter); err != nil {
			t.Fatal(err)
		}
		ids, err := n.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		dist, err := dd.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		return ids, dist
	}
	type got struct {
		ten  int
		ids  []int64
		dist []float32
	}
	out := make([]got, nq)
	var wg sync.WaitGroup
	for q := range nq {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ten := q%(len(ts)+1) - 1
			var filter *safe.Filter
			if ten >= 0 {
				filter = ts[ten].f
			}
			ids, dist := make([]int64, k), make([]float32, k)
			if err := b.SearchIntoFiltered(context.Background(), filter, queries[q*d:(q+1)*d], ids, dist); err != nil {
				t.Error(err)
				return
			}
			out[q] = got{ten, ids, dist}
		}()
	}
	wg.Wait()
	for q, g := range out {
		var filter *safe.Filter
		if g.ten >= 0 {
			filter = ts[g.ten].f
		}
		w, wd := direct(queries[q*d:(q+1)*d], filter)
		for j := range k {
			if g.ten >= 0 && safe.Valid(g.ids[j]) && !ts[g.ten].allow[g.ids[j]] {
				t.Fatalf("query %d (tenant %d): row %d, which its filter forbids", q, g.ten, g.ids[j])
			}
			if g.ids[j] != w[j] && !safetest.NearlyEqual(g.dist[j], wd[j]) {
				t.Errorf("query %d (tenant %d): %v at %v batched, %v at %v alone", q, g.ten, g.ids, g.dist, w, wd)
				break
			}
		}
	}
	if st := b.Stats(); st.Filtered == 0 {
		t.Error("no filtered batch")
	}
	if b.b.maxBatch != nq {
		t.Errorf("default MaxBatch %d, want the Filtered's %d", b.b.maxBatch, nq)
	}
	for _, c := range []struct {
		name, arg string
		o         Options
	}{{"MaxK", "MaxK", Options{MaxK: k - 1}}, {"MaxBatch", "MaxBatch", Options{MaxK: k, MaxBatch: nq + 1}}} {
		if _, err := New[float32, int64](s, c.o); !safetest.IsArg(err, c.arg) {
			t.Errorf("%s: %v, want an ArgError naming %s", c.name, err, c.arg)
		}
	}
	if _, err := IVFPQFiltered(f1, mkF(ts[0].f, nq)); !safetest.IsArg(err, "more") {
		t.Errorf("Filtered made unlike: %v, want an ArgError naming more", err)
	}
}
