package tiered_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	dim = 16
	nq  = 40
	k   = 10
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func isArg(err error, arg string) bool {
	var ae *safe.ArgError
	return errors.As(err, &ae) && ae.Arg == arg
}

func device(t *testing.T, res *safe.Resources, data []float32, rows int) *safe.DeviceMatrix[float32] {
	t.Helper()
	m, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	must(t, err)
	safetest.Close(t, m)
	return m
}

func params(t *testing.T, b tiered.Backend, minANN int64) *tiered.IndexParams {
	t.Helper()
	p, err := tiered.DefaultIndexParams()
	must(t, err)
	p.Backend, p.MinANNRows = b, minANN
	p.CAGRA = tiered.CAGRAParams{GraphDegree: 32, IntermediateGraphDegree: 64}
	p.IVFFlat.NLists = 16
	p.IVFPQ = tiered.IVFPQParams{NLists: 16, PQDim: 8}
	return &p
}

// search returns the ids of a search of queries (host slice) on idx.
func search(t *testing.T, res *safe.Resources, idx *tiered.Index, sp *tiered.SearchParams, queries []float32, kk int, f *safe.Filter) []int64 {
	t.Helper()
	n := len(queries) / dim
	q := device(t, res, queries, n)
	nb, err := safe.NewDeviceMatrix[int64](res, n, kk)
	must(t, err)
	defer nb.Close()
	ds, err := safe.NewDeviceMatrix[float32](res, n, kk)
	must(t, err)
	defer ds.Close()
	must(t, idx.Search(res, sp, q, nb, ds, f))
	out := make([]int64, n*kk)
	must(t, nb.CopyToHost(res, out))
	return out
}

func recall(got []int64, exact [][]int64, kk int) float64 {
	hit, all := 0, 0
	for q, want := range exact {
		for _, w := range want {
			all++
			if slices.Contains(got[q*kk:(q+1)*kk], w) {
				hit++
			}
		}
	}
	return float64(hit) / float64(all)
}

func TestDefaults(t *testing.T) {
	safetest.Check(t)
	p, err := tiered.DefaultIndexParams()
	must(t, err)
	if p.Backend != tiered.CAGRA || p.Metric != safe.L2Expanded || p.MinANNRows != 100000 || p.CreateANNIndexOnExtend {
		t.Errorf("defaults %+v", p)
	}
}

// Below MinANNRows every row is in the brute-force tier: exact results.
func TestBruteForceTierOnly(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows = 500
	data := safetest.Random(1, rows, dim)
	qs := safetest.Random(2, nq, dim)
	idx, err := tiered.Build(res, device(t, res, data, rows), nil)
	must(t, err)
	safetest.Close(t, idx)
	if idx.Rows() != rows || idx.ANNRows() != 0 || idx.Dim() != dim || idx.Backend() != tiered.CAGRA {
		t.Fatalf("rows %d ann %d dim %d", idx.Rows(), idx.ANNRows(), idx.Dim())
	}
	got := search(t, res, idx, nil, qs, k, nil)
	exact := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
	// exact search: at most a near tie swapped at the k-th place
	if r := recall(got, exact, k); r < 0.99 {
		t.Errorf("brute-force tier recall %.3f, want exact", r)
	}
}

// Every backend: an ANN index over the built rows plus a tier of fresh
// rows, searched together; the fresh rows are found with their ids.
func TestTiers(t *testing.T) {
	for _, b := range []tiered.Backend{tiered.CAGRA, tiered.IVFFlat, tiered.IVFPQ} {
		t.Run(b.String(), func(t *testing.T) {
			safetest.Check(t)
			res := safetest.Resources(t)
			const built, added = 1000, 200
			data := safetest.Random(3, built+added, dim)
			qs := safetest.Random(4, nq, dim)
			idx, err := tiered.Build(res, device(t, res, data[:built*dim], built), params(t, b, 500))
			must(t, err)
			safetest.Close(t, idx)
			if idx.ANNRows() != built {
				t.Fatalf("ANN rows %d", idx.ANNRows())
			}
			must(t, idx.Extend(res, device(t, res, data[built*dim:], added)))
			if idx.Rows() != built+added || idx.ANNRows() != built {
				t.Fatalf("rows %d, ANN rows %d after Extend", idx.Rows(), idx.ANNRows())
			}
			sp := &tiered.SearchParams{CAGRA: tiered.CAGRASearchParams{ITopKSize: 128}, IVFFlat: tiered.IVFSearchParams{NProbes: 16}, IVFPQ: tiered.IVFSearchParams{NProbes: 16}}
			got := search(t, res, idx, sp, qs, k, nil)
			exact := safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil)
			min := 0.9
			if b == tiered.IVFPQ {
				min = 0.5 // compressed distances
			}
			if r := recall(got, exact, k); r < min {
				t.Errorf("recall %.3f, want >= %.2f", r, min)
			}
			self := search(t, res, idx, sp, data[built*dim:(built+20)*dim], 1, nil)
			for j, id := range self {
				if id != int64(built+j) {
					t.Fatalf("fresh row %d found as %d", built+j, id)
				}
			}
		})
	}
}

// CreateANNIndexOnExtend folds the tier into a new ANN index once it holds
// more than MinANNRows rows.
func TestExtendRebuilds(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(5, 400, dim)
	p := params(t, tiered.CAGRA, 100)
	p.CreateANNIndexOnExtend = true
	idx, err := tiered.Build(res, device(t, res, data[:150*dim], 150), p)
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[150*dim:200*dim], 50)))
	if idx.ANNRows() != 150 {
		t.Fatalf("ANN rows %d with 50 fresh", idx.ANNRows())
	}
	must(t, idx.Extend(res, device(t, res, data[200*dim:], 200)))
	if idx.ANNRows() != 400 || idx.Rows() != 400 {
		t.Fatalf("ANN rows %d, rows %d after the tier passed MinANNRows", idx.ANNRows(), idx.Rows())
	}
	got := search(t, res, idx, nil, data[:nq*dim], 1, nil)
	for q, id := range got {
		if id != int64(q) {
			t.Fatalf("row %d found as %d", q, id)
		}
	}
	// The rows the rebuild took from the tier (cuVS's extend appended them
	// after the ANN rows, in order): found under their ids.
	got = search(t, res, idx, nil, data[300*dim:(300+nq)*dim], 1, nil)
	for q, id := range got {
		if id != int64(300+q) {
			t.Fatalf("row %d found as %d after the rebuild", 300+q, id)
		}
	}
}

// Merge of indexes whose rows are all under their ANN index, past
// MinANNRows: cuVS's own merge (cuvsTieredIndexMerge, which rebuilds), ids
// in the inputs' order.
func TestMergeInC(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(16, 1000, dim)
	p := params(t, tiered.CAGRA, 300)
	a, err := tiered.Build(res, device(t, res, data[:600*dim], 600), p)
	must(t, err)
	safetest.Close(t, a)
	b, err := tiered.Build(res, device(t, res, data[600*dim:], 400), p)
	must(t, err)
	safetest.Close(t, b)
	m, err := tiered.Merge(res, p, a, b)
	must(t, err)
	safetest.Close(t, m)
	if m.Rows() != 1000 || m.ANNRows() != 1000 {
		t.Fatalf("merged rows %d, ANN rows %d", m.Rows(), m.ANNRows())
	}
	for _, at := range []int{0, 600, 1000 - nq} {
		for q, id := range search(t, res, m, nil, data[at*dim:(at+nq)*dim], 1, nil) {
			if id != int64(at+q) {
				t.Fatalf("row %d found as %d in the merged index", at+q, id)
			}
		}
	}
	if a.Rows() != 600 || b.Rows() != 400 {
		t.Fatalf("inputs changed: %d, %d rows", a.Rows(), b.Rows())
	}
}

// Merge: index 0's rows, then index 1's; the inputs stay usable.
func TestMerge(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(6, 900, dim)
	p := params(t, tiered.CAGRA, 300)
	a, err := tiered.Build(res, device(t, res, data[:600*dim], 600), p)
	must(t, err)
	safetest.Close(t, a)
	b, err := tiered.Build(res, device(t, res, data[600*dim:], 300), p)
	must(t, err)
	safetest.Close(t, b)
	m, err := tiered.Merge(res, p, a, b)
	must(t, err)
	safetest.Close(t, m)
	if m.Rows() != 900 || m.ANNRows() != 900 { // Merge builds over every row
		t.Fatalf("merged rows %d, ANN rows %d", m.Rows(), m.ANNRows())
	}
	got := search(t, res, m, nil, data[590*dim:610*dim], 1, nil)
	for j, id := range got {
		if id != int64(590+j) {
			t.Fatalf("row %d found as %d", 590+j, id)
		}
	}
	if a.Rows() != 600 || b.Rows() != 300 {
		t.Error("inputs changed")
	}
	search(t, res, b, nil, data[:dim], 1, nil)
	small := *p
	small.MinANNRows = 100
	m2, err := tiered.Merge(res, &small, a, b)
	must(t, err)
	safetest.Close(t, m2)
	if m2.ANNRows() != 900 {
		t.Errorf("merge with a tier past MinANNRows: ANN rows %d", m2.ANNRows())
	}
	for name, err := range map[string]error{
		"one":       errOf(tiered.Merge(res, nil, a)),
		"nil":       errOf(tiered.Merge(res, nil, a, nil)),
		"backend":   errOf(tiered.Merge(res, params(t, tiered.IVFFlat, 10), a, b)),
		"other dim": errOf(tiered.Merge(res, nil, a, otherDim(t, res))),
	} {
		if err == nil {
			t.Errorf("%s: merged", name)
		}
	}
}

func errOf(_ *tiered.Index, err error) error { return err }

func otherDim(t *testing.T, res *safe.Resources) *tiered.Index {
	t.Helper()
	d := safetest.Random(7, 50, 8)
	m, err := safe.DeviceMatrixFrom(res, d, 50, 8)
	must(t, err)
	safetest.Close(t, m)
	idx, err := tiered.Build(res, m, nil)
	must(t, err)
	safetest.Close(t, idx)
	return idx
}

// The prefilter: honoured while one tier is empty, refused with both.
func TestFilter(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows = 600
	data := safetest.Random(8, rows, dim)
	qs := safetest.Random(9, nq, dim)
	allow := func(i int) bool { return i%3 == 0 }
	var ids []int64
	for i := range rows {
		if allow(i) {
			ids = append(ids, int64(i))
		}
	}
	f, err := safe.NewBitsetFilterAllowing(res, rows, ids)
	must(t, err)
	safetest.Close(t, f)
	for _, minANN := range []int64{1000, 100} { // brute force only; ANN only
		idx, err := tiered.Build(res, device(t, res, data, rows), params(t, tiered.CAGRA, minANN))
		must(t, err)
		safetest.Close(t, idx)
		got := search(t, res, idx, &tiered.SearchParams{CAGRA: tiered.CAGRASearchParams{ITopKSize: 128}}, qs, k, f)
		for _, id := range got {
			if !allow(int(id)) {
				t.Fatalf("MinANNRows %d: id %d not allowed", minANN, id)
			}
		}
		exact := safetest.ExactKNN(data, qs, dim, k, safetest.L2, allow)
		if r := recall(got, exact, k); r < 0.9 {
			t.Errorf("MinANNRows %d: filtered recall %.3f", minANN, r)
		}
	}
}

// Refusals before any C call.
func TestBadInput(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(10, 300, dim)
	dev := device(t, res, data, 300)
	host, err := dlpack.NewHostMatrix(data, 300, dim)
	must(t, err)
	half, err := safe.NewDeviceMatrix[uint16](res, 300, dim)
	must(t, err)
	safetest.Close(t, half)
	for name, c := range map[string]struct {
		arg string
		ds  dlpack.Tensor
		p   *tiered.IndexParams
	}{
		"nil":       {"dataset", nil, nil},
		"dtype":     {"dataset", half, nil},
		"backend":   {"params.Backend", dev, &tiered.IndexParams{Backend: 9}},
		"metric":    {"params.Metric", dev, &tiered.IndexParams{Metric: safe.BitwiseHamming}},
		"min rows":  {"params.MinANNRows", dev, &tiered.IndexParams{MinANNRows: -1}},
		"lists":     {"dataset", dev, &tiered.IndexParams{Backend: tiered.IVFFlat, MinANNRows: 10}},
		"pq bits":   {"params.IVFPQ.PQBits", dev, &tiered.IndexParams{Backend: tiered.IVFPQ, IVFPQ: tiered.IVFPQParams{PQBits: 12}}},
		"L2Sqrt CG": {"params.Metric", dev, &tiered.IndexParams{Metric: safe.L2SqrtExpanded}},
	} {
		if _, err := tiered.Build(res, c.ds, c.p); !isArg(err, c.arg) {
			t.Errorf("%s: got %v, want an ArgError naming %s", name, err, c.arg)
		}
	}
	// an IntermediateGraphDegree below GraphDegree is not refused: cuVS's
	// cagra::build lowers GraphDegree to it (check_graph_degree)
	low := params(t, tiered.CAGRA, 200)
	low.CAGRA = tiered.CAGRAParams{GraphDegree: 64, IntermediateGraphDegree: 32}
	lowIdx, err := tiered.Build(res, dev, low)
	must(t, err)
	safetest.Close(t, lowIdx)
	if lowIdx.ANNRows() != 300 {
		t.Fatalf("lowered degrees: ANN rows %d, want 300", lowIdx.ANNRows())
	}
	qs := safetest.Random(11, nq, dim)
	sp := &tiered.SearchParams{CAGRA: tiered.CAGRASearchParams{ITopKSize: 128}}
	if r := recall(search(t, res, lowIdx, sp, qs, k, nil), safetest.ExactKNN(data, qs, dim, k, safetest.L2, nil), k); r < 0.9 {
		t.Errorf("lowered degrees: recall %.3f, want >= 0.90", r)
	}
	must(t, lowIdx.Close())
	idx, err := tiered.Build(res, dev, params(t, tiered.CAGRA, 200))
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[:5*dim], 5)))
	q := device(t, res, data[:dim], 1)
	nb, _ := safe.NewDeviceMatrix[int64](res, 1, 6)
	safetest.Close(t, nb)
	ds, _ := safe.NewDeviceMatrix[float32](res, 1, 6)
	safetest.Close(t, ds)
	if err := idx.Extend(res, host); !isArg(err, "vectors") { // 300 rows of 16, index dim 16: accepted
		must(t, err)
	}
	big, _ := safe.NewDeviceMatrix[int64](res, 1, idx.Rows()+1)
	safetest.Close(t, big)
	bigD, _ := safe.NewDeviceMatrix[float32](res, 1, idx.Rows()+1)
	safetest.Close(t, bigD)
	if err := idx.Search(res, nil, q, big, bigD, nil); !isArg(err, "neighbors") {
		t.Errorf("k = Rows()+1: %v", err)
	}
	must(t, idx.Close())
	if err := idx.Extend(res, dev); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("closed Extend: %v", err)
	}
	var none *tiered.Index
	if err := none.Search(res, nil, q, nb, ds, nil); !isArg(err, "index") {
		t.Errorf("nil index: %v", err)
	}
}

// Every C call made to fail gives its *safe.Error and leaks nothing.
func TestFaults(t *testing.T) {
	ctl := safetest.Double(t, "fault injection")
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(11, 300, dim)
	dev := device(t, res, data, 300)
	p := params(t, tiered.CAGRA, 200)
	idx, err := tiered.Build(res, dev, p)
	must(t, err)
	safetest.Close(t, idx)
	other, err := tiered.Build(res, dev, p)
	must(t, err)
	safetest.Close(t, other)
	q := device(t, res, data[:dim], 1)
	nb, _ := safe.NewDeviceMatrix[int64](res, 1, k)
	safetest.Close(t, nb)
	ds, _ := safe.NewDeviceMatrix[float32](res, 1, k)
	safetest.Close(t, ds)
	create, build := "cuvsTieredIndexParamsCreate", "cuvsTieredIndexBuild"
	cagraCreate := "cuvsCagraIndexParamsCreate"
	steps := []struct {
		fn  string
		run func() error
	}{
		{create, func() error { _, err := tiered.DefaultIndexParams(); return err }},
		{cagraCreate, func() error { _, err := tiered.Build(res, dev, p); return err }},
		{"cuvsTieredIndexCreate", func() error { _, err := tiered.Build(res, dev, p); return err }},
		{build, func() error { _, err := tiered.Build(res, dev, p); return err }},
		{"cuvsBruteForceBuild", func() error { return idx.Extend(res, q) }},
		{"cuvsTieredIndexSearch", func() error { return idx.Search(res, nil, q, nb, ds, nil) }},
		{"cuvsTieredIndexMerge", func() error { _, err := tiered.Merge(res, p, idx, other); return err }}, // both all-ANN: cuVS merges
		{"cuvsIvfFlatIndexParamsCreate", func() error { _, err := tiered.Build(res, dev, params(t, tiered.IVFFlat, 100)); return err }},
		{"cuvsIvfPqIndexParamsCreate", func() error { _, err := tiered.Build(res, dev, params(t, tiered.IVFPQ, 100)); return err }},
	}
	for _, s := range steps {
		t.Run(s.fn, func(t *testing.T) {
			ctl.FailNext(s.fn, "injected")
			err := s.run()
			var ce *safe.Error
			if !errors.As(err, &ce) || ce.Func != s.fn {
				t.Fatalf("got %v, want the failure of %s", err, s.fn)
			}
		})
	}
	if idx.Rows() != 300 {
		t.Errorf("rows %d after a failed Extend", idx.Rows())
	}
	// cuvsTieredIndexDestroy failing: Close reports it, a later Close frees.
	x, err := tiered.Build(res, dev, p)
	must(t, err)
	ctl.FailNext("cuvsTieredIndexDestroy", "injected")
	if err := x.Close(); err == nil {
		t.Error("Close hid the failure of cuvsTieredIndexDestroy")
	}
	must(t, x.Close())
}

// The batch adapter: single queries through a Batcher find their rows.
func TestBatcher(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(12, 400, dim)
	idx, err := tiered.Build(res, device(t, res, data[:300*dim], 300), params(t, tiered.CAGRA, 200))
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[300*dim:], 100)))
	b, err := batch.New[float32, int64](tiered.NewSearcher(idx, nil), batch.Options{MaxK: 5})
	must(t, err)
	defer b.Close()
	for _, row := range []int{3, 299, 300, 399} {
		got, err := b.Search(context.Background(), data[row*dim:(row+1)*dim], 5)
		must(t, err)
		nb := got.Neighbors
		if nb[0] != int64(row) {
			t.Errorf("row %d found as %v", row, nb)
		}
	}
}

// Search allocates nothing on the Go heap.
func TestSearchAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(13, 300, dim)
	idx, err := tiered.Build(res, device(t, res, data, 300), params(t, tiered.CAGRA, 200))
	must(t, err)
	safetest.Close(t, idx)
	q := device(t, res, data[:4*dim], 4)
	nb, _ := safe.NewDeviceMatrix[int64](res, 4, k)
	safetest.Close(t, nb)
	ds, _ := safe.NewDeviceMatrix[float32](res, 4, k)
	safetest.Close(t, ds)
	must(t, idx.Search(res, nil, q, nb, ds, nil))
	if a := testing.AllocsPerRun(20, func() { must(t, idx.Search(res, nil, q, nb, ds, nil)) }); a != 0 {
		t.Errorf("Search: %v allocations", a)
	}
}

// Searches from several goroutines while rows are added: no race, no
// error, and the rows all arrive.
func TestConcurrentSearchExtend(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(14, 400, dim)
	idx, err := tiered.Build(res, device(t, res, data[:300*dim], 300), params(t, tiered.CAGRA, 200))
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(res, device(t, res, data[300*dim:310*dim], 10)))
	added := device(t, res, data[310*dim:], 90)
	done := make(chan error, 4)
	for g := range 4 {
		go func() {
			r, err := safe.NewResources()
			if err != nil {
				done <- err
				return
			}
			defer r.Close()
			q, err := safe.DeviceMatrixFrom(r, data[g*dim:(g+1)*dim], 1, dim)
			if err != nil {
				done <- err
				return
			}
			defer q.Close()
			nb, _ := safe.NewDeviceMatrix[int64](r, 1, 5)
			defer nb.Close()
			ds, _ := safe.NewDeviceMatrix[float32](r, 1, 5)
			defer ds.Close()
			for range 10 {
				if err := idx.Search(r, nil, q, nb, ds, nil); err != nil {
					done <- err
					return
				}
			}
			done <- r.Sync()
		}()
	}
	must(t, idx.Extend(res, added))
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if idx.Rows() != 400 {
		t.Errorf("rows %d", idx.Rows())
	}
}
