package ivfsq_test

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows   = 2000
	dim    = 16
	nLists = 32
	nq     = 50
	k      = 10
)

type fixture struct {
	res       *safe.Resources
	data, qs  []float32
	dataset   *safe.DeviceMatrix[float32]
	queries   *safe.DeviceMatrix[float32]
	neighbors *safe.DeviceMatrix[int64]
	distances *safe.DeviceMatrix[float32]
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newFixture(t *testing.T, nRows, nQueries, kk int) *fixture {
	t.Helper()
	f := &fixture{res: safetest.Resources(t)}
	f.data = safetest.Random(1, nRows, dim)
	f.qs = safetest.Random(2, nQueries, dim)
	var err error
	f.dataset, err = safe.DeviceMatrixFrom(f.res, f.data, nRows, dim)
	must(t, err)
	safetest.Close(t, f.dataset)
	f.queries, err = safe.DeviceMatrixFrom(f.res, f.qs, nQueries, dim)
	must(t, err)
	safetest.Close(t, f.queries)
	f.neighbors, err = safe.NewDeviceMatrix[int64](f.res, nQueries, kk)
	must(t, err)
	safetest.Close(t, f.neighbors)
	f.distances, err = safe.NewDeviceMatrix[float32](f.res, nQueries, kk)
	must(t, err)
	safetest.Close(t, f.distances)
	return f
}

func params(t *testing.T) ivfsq.IndexParams {
	t.Helper()
	p, err := ivfsq.DefaultIndexParams()
	must(t, err)
	p.NLists = nLists
	return p
}

func (f *fixture) build(t *testing.T, p ivfsq.IndexParams) *ivfsq.Index {
	t.Helper()
	idx, err := ivfsq.Build(f.res, f.dataset, &p)
	must(t, err)
	safetest.Close(t, idx)
	return idx
}

func (f *fixture) search(t *testing.T, idx *ivfsq.Index, probes uint32, filter *safe.Filter) ([]int64, []float32) {
	t.Helper()
	must(t, idx.Search(f.res, &ivfsq.SearchParams{NProbes: probes}, f.queries, f.neighbors, f.distances, filter))
	nb, err := f.neighbors.ToHost(f.res)
	must(t, err)
	ds, err := f.distances.ToHost(f.res)
	must(t, err)
	return nb, ds
}

// recall is the fraction of the exact neighbours found.
func recall(got []int64, exact [][]int64, kk int) float64 {
	hit, total := 0, 0
	for q, want := range exact {
		set := map[int64]bool{}
		for _, id := range got[q*kk : (q+1)*kk] {
			set[id] = true
		}
		for _, id := range want {
			total++
			if set[id] {
				hit++
			}
		}
	}
	return float64(hit) / float64(total)
}

// checkInvariants: ids are rows (or math.MaxInt64 for empty slots, which
// come last), no id twice in a row, allowed by allow, distances ascending.
func checkInvariants(t *testing.T, nb []int64, ds []float32, kk int, n int64, allow func(int64) bool) {
	t.Helper()
	for q := 0; q < len(nb)/kk; q++ {
		seen := map[int64]bool{}
		empty := false
		for j := 0; j < kk; j++ {
			id := nb[q*kk+j]
			if id == math.MaxInt64 {
				empty = true
				continue
			}
			if empty {
				t.Fatalf("query %d: id %d after an empty slot", q, id)
			}
			if id < 0 || id >= n {
				t.Fatalf("query %d: id %d not a row", q, id)
			}
			if seen[id] {
				t.Fatalf("query %d: id %d twice", q, id)
			}
			seen[id] = true
			if allow != nil && !allow(id) {
				t.Fatalf("query %d: id %d not allowed", q, id)
			}
			if j > 0 && nb[q*kk+j-1] != math.MaxInt64 && ds[q*kk+j] < ds[q*kk+j-1] {
				t.Fatalf("query %d: distances not ascending: %v", q, ds[q*kk:(q+1)*kk])
			}
		}
	}
}

func TestDefaults(t *testing.T) {
	safetest.Check(t)
	p, err := ivfsq.DefaultIndexParams()
	must(t, err)
	want := ivfsq.IndexParams{Metric: safe.L2Expanded, MetricArg: 2, AddDataOnBuild: true, NLists: 1024, KMeansNIters: 20, MaxTrainPointsPerCluster: 256}
	if p != want {
		t.Errorf("DefaultIndexParams = %+v, want cuVS v26.06's %+v", p, want)
	}
	s, err := ivfsq.DefaultSearchParams()
	must(t, err)
	if s.NProbes != 20 {
		t.Errorf("DefaultSearchParams = %+v, want 20 probes", s)
	}
}

// Probing every list is exact: recall@10 ~1 (float rounding may swap
// near-ties), each dataset row finds itself.
func TestSearchAllProbes(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, rows, nq, k)
	idx := f.build(t, params(t))
	if idx.Rows() != rows || idx.Dim() != dim || idx.NLists() != nLists || idx.DType() != dlpack.Float32 {
		t.Fatalf("index %d×%d, %d lists, %s", idx.Rows(), idx.Dim(), idx.NLists(), idx.DType())
	}
	nb, ds := f.search(t, idx, nLists, nil)
	checkInvariants(t, nb, ds, k, rows, nil)
	// 8-bit codes: approximate even with every list probed
	if r := recall(nb, safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, nil), k); r < 0.85 {
		t.Errorf("recall@%d with every list probed = %.3f, want >= 0.85", k, r)
	}
	for q := 0; q < nq; q++ {
		got := nb[q*k]
		exact := safetest.L2(f.qs[q*dim:(q+1)*dim], f.data[got*dim:(got+1)*dim])
		if math.Abs(float64(ds[q*k]-exact)) > 0.05*float64(exact)+0.01 {
			t.Fatalf("query %d: distance %g of row %d, its exact squared L2 distance is %g", q, ds[q*k], got, exact)
		}
	}
}

func TestSelfMatch(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, rows, nq, k)
	must(t, f.queries.CopyFromHost(f.res, f.data[:nq*dim]))
	idx := f.build(t, params(t))
	nb, _ := f.search(t, idx, nLists, nil)
	found := 0
	for q := 0; q < nq; q++ {
		for j := 0; j < k; j++ {
			if nb[q*k+j] == int64(q) {
				found++
			}
		}
	}
	// the codes are lossy: a row is among its own 10 nearest codes
	if found < nq*95/100 {
		t.Errorf("%d of %d rows found themselves among %d neighbours", found, nq, k)
	}
}

// Few probes are approximate: only the invariants hold, and recall is a
// fraction (not compared with more probes: that is not guaranteed).
func TestSearchFewProbes(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, rows, nq, k)
	idx := f.build(t, params(t))
	for _, probes := range []uint32{1, 4} {
		nb, ds := f.search(t, idx, probes, nil)
		checkInvariants(t, nb, ds, k, rows, nil)
		r := recall(nb, safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, nil), k)
		if r < 0 || r > 1 {
			t.Errorf("recall %g", r)
		}
		t.Logf("n_probes %d of %d: recall@%d %.3f", probes, nLists, k, r)
	}
}

func TestInnerProduct(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, rows, nq, k)
	p := params(t)
	p.Metric = safe.InnerProduct
	idx := f.build(t, p)
	nb, _ := f.search(t, idx, nLists, nil)
	if r := recall(nb, safetest.ExactKNN(f.data, f.qs, dim, k, safetest.NegInner, nil), k); r < 0.85 {
		t.Errorf("inner product recall@%d with every list probed = %.3f", k, r)
	}
}

func TestFilter(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, rows, nq, k)
	idx := f.build(t, params(t))
	var allowed []int64
	for i := int64(0); i < rows; i += 2 {
		allowed = append(allowed, i)
	}
	filter, err := safe.NewBitsetFilterAllowing(f.res, rows, allowed)
	must(t, err)
	safetest.Close(t, filter)
	even := func(id int64) bool { return id%2 == 0 }
	nb, ds := f.search(t, idx, nLists, filter)
	checkInvariants(t, nb, ds, k, rows, even)
	exact := safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, func(i int) bool { return i%2 == 0 })
	if r := recall(nb, exact, k); r < 0.85 {
		t.Errorf("filtered recall@%d = %.3f", k, r)
	}
}

func TestExtend(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, rows, nq, k)
	p := params(t)
	p.AddDataOnBuild = false
	idx := f.build(t, p)
	if idx.Rows() != 0 {
		t.Fatalf("Size %d without data added", idx.Rows())
	}
	half := rows / 2
	first, err := f.dataset.RowsView(0, half)
	must(t, err)
	must(t, idx.Extend(f.res, first, nil)) // ids 0..half-1
	second, err := f.dataset.RowsView(half, rows)
	must(t, err)
	ids := make([]int64, rows-half)
	for i := range ids {
		ids[i] = int64(half + i)
	}
	dev, err := safe.DeviceVectorFrom(f.res, ids)
	must(t, err)
	safetest.Close(t, dev)
	must(t, idx.Extend(f.res, second, dev))
	if idx.Rows() != rows {
		t.Fatalf("Size %d after extending to %d rows", idx.Rows(), rows)
	}
	must(t, f.queries.CopyFromHost(f.res, append(append([]float32{}, f.data[:(nq/2)*dim]...), f.data[(rows-nq/2)*dim:]...)))
	nb, _ := f.search(t, idx, nLists, nil)
	for q := 0; q < nq; q++ {
		want := int64(q)
		if q >= nq/2 {
			want = int64(rows - nq + q)
		}
		hit := false
		for j := 0; j < k; j++ {
			hit = hit || nb[q*k+j] == want
		}
		if !hit {
			t.Fatalf("query %d: %v, want %d among them (lossy codes: not necessarily first)", q, nb[q*k:(q+1)*k], want)
		}
	}
}

func TestCenters(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, rows, 1, 1)
	p := params(t)
	p.NLists = 1
	p.MaxTrainPointsPerCluster = rows
	idx := f.build(t, p)
	dst, err := dlpack.NewHostMatrix(make([]float32, dim), 1, dim)
	must(t, err)
	must(t, idx.Centers(f.res, dst))
	for j := 0; j < dim; j++ {
		var mean float64
		for i := 0; i < rows; i++ {
			mean += float64(f.data[i*dim+j])
		}
		mean /= rows
		if math.Abs(float64(dst.Data()[j])-mean) > 1e-3 {
			t.Fatalf("center[%d] = %g, the mean is %g", j, dst.Data()[j], mean)
		}
	}
	bad, err := dlpack.NewHostMatrix(make([]float32, 2*dim), 2, dim)
	must(t, err)
	if err := idx.Centers(f.res, bad); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("Centers into 2 rows for 1 list: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, 100, 4, 5)
	p := params(t)
	p.NLists = 4
	idx := f.build(t, p)
	host, err := dlpack.NewHostMatrix(f.data, 100, dim)
	must(t, err)
	u32, err := safe.NewDeviceMatrix[uint32](f.res, 100, dim)
	must(t, err)
	safetest.Close(t, u32)
	nb32, err := safe.NewDeviceMatrix[uint32](f.res, 4, 5)
	must(t, err)
	safetest.Close(t, nb32)
	narrow, err := safe.NewDeviceMatrix[float32](f.res, 4, dim-1)
	must(t, err)
	safetest.Close(t, narrow)
	hostQ, err := dlpack.NewHostMatrix(f.qs, 4, dim)
	must(t, err)
	filter99, err := safe.NewBitsetFilterAllowing(f.res, 99, []int64{1})
	must(t, err)
	safetest.Close(t, filter99)
	bitmap, err := safe.NewBitmapFilter(f.res, 4, 100, make([]uint32, kit.Words(400)))
	must(t, err)
	safetest.Close(t, bitmap)
	big, err := safe.NewDeviceMatrix[int64](f.res, 4, 101)
	must(t, err)
	safetest.Close(t, big)
	bigD, err := safe.NewDeviceMatrix[float32](f.res, 4, 101)
	must(t, err)
	safetest.Close(t, bigD)
	shortIDs, err := safe.NewDeviceVector[int64](f.res, 3)
	must(t, err)
	safetest.Close(t, shortIDs)
	ids100, err := safe.NewDeviceVector[int64](f.res, 100)
	must(t, err)
	safetest.Close(t, ids100)
	i8, err := safe.NewDeviceMatrix[int8](f.res, 100, dim)
	must(t, err)
	safetest.Close(t, i8)

	with := func(mod func(*ivfsq.IndexParams)) ivfsq.IndexParams {
		q := p
		mod(&q)
		return q
	}
	builds := []struct {
		name    string
		dataset dlpack.Tensor
		p       ivfsq.IndexParams
	}{
		{"nil dataset", nil, p},
		{"uint32 dataset", u32, p},
		{"zero params", f.dataset, ivfsq.IndexParams{}},
		{"more lists than rows", f.dataset, with(func(q *ivfsq.IndexParams) { q.NLists = 101 })},
		{"no iterations", f.dataset, with(func(q *ivfsq.IndexParams) { q.KMeansNIters = 0 })},
		{"no training rows", f.dataset, with(func(q *ivfsq.IndexParams) { q.MaxTrainPointsPerCluster = 0 })},
		{"int8 dataset", i8, p},
		{"L1", f.dataset, with(func(q *ivfsq.IndexParams) { q.Metric = safe.L1 })},
	}
	for _, c := range builds {
		t.Run("Build/"+c.name, func(t *testing.T) {
			idx, err := ivfsq.Build(f.res, c.dataset, &c.p)
			if !errors.Is(err, safe.ErrInvalidArgument) {
				if idx != nil {
					idx.Close()
				}
				t.Fatalf("got %v, want an invalid-argument error", err)
			}
		})
	}
	searches := []struct {
		name   string
		sp     *ivfsq.SearchParams
		q      dlpack.Tensor
		n      dlpack.TensorMut
		d      dlpack.TensorMut
		filter *safe.Filter
	}{
		{"host queries", &ivfsq.SearchParams{NProbes: 1}, hostQ, f.neighbors, f.distances, nil},
		{"narrow queries", &ivfsq.SearchParams{NProbes: 1}, narrow, f.neighbors, f.distances, nil},
		{"uint32 neighbors", &ivfsq.SearchParams{NProbes: 1}, f.queries, nb32, f.distances, nil},
		{"k past size", &ivfsq.SearchParams{NProbes: 1}, f.queries, big, bigD, nil},
		{"filter for 99 rows", &ivfsq.SearchParams{NProbes: 1}, f.queries, f.neighbors, f.distances, filter99},
		{"bitmap", &ivfsq.SearchParams{NProbes: 1}, f.queries, f.neighbors, f.distances, bitmap},
	}
	for _, c := range searches {
		t.Run("Search/"+c.name, func(t *testing.T) {
			if err := idx.Search(f.res, c.sp, c.q, c.n, c.d, c.filter); !errors.Is(err, safe.ErrInvalidArgument) {
				t.Fatalf("got %v, want an invalid-argument error", err)
			}
		})
	}
	extends := []struct {
		name    string
		vectors dlpack.Tensor
		ids     dlpack.Tensor
	}{
		{"nil", nil, nil},
		{"uint32", u32, nil},
		{"ids on the other side", host, ids100},
		{"narrow", narrow, nil},
		{"ids short", f.queries, shortIDs},
	}
	for _, c := range extends {
		t.Run("Extend/"+c.name, func(t *testing.T) {
			if err := idx.Extend(f.res, c.vectors, c.ids); !errors.Is(err, safe.ErrInvalidArgument) {
				t.Fatalf("got %v, want an invalid-argument error", err)
			}
		})
	}
	if idx.Rows() != 100 {
		t.Errorf("Size %d after refused extends", idx.Rows())
	}
}

// Every C call fails once; the error names it and nothing leaks.
func TestFaults(t *testing.T) {
	ctl := safetest.Double(t, "fault injection")
	safetest.Check(t)
	f := newFixture(t, 100, 4, 5)
	p := params(t)
	p.NLists = 4
	path := filepath.Join(t.TempDir(), "x.bin")
	idx := f.build(t, p)
	must(t, idx.Serialize(f.res, path))
	sp := &ivfsq.SearchParams{NProbes: 2}
	steps := []struct {
		fn  string
		run func() error
	}{
		{"cuvsIvfSqIndexParamsCreate", func() error { _, err := ivfsq.DefaultIndexParams(); return err }},
		{"cuvsIvfSqSearchParamsCreate", func() error { _, err := ivfsq.DefaultSearchParams(); return err }},
		{"cuvsIvfSqIndexCreate", func() error { _, err := ivfsq.Build(f.res, f.dataset, &p); return err }},
		{"cuvsIvfSqBuild", func() error { _, err := ivfsq.Build(f.res, f.dataset, &p); return err }},
		{"cuvsIvfSqIndexGetNLists", func() error { _, err := ivfsq.Build(f.res, f.dataset, &p); return err }},
		{"cuvsIvfSqIndexGetDim", func() error { _, err := ivfsq.Deserialize(f.res, path); return err }},
		{"cuvsIvfSqIndexGetSize", func() error { _, err := ivfsq.Build(f.res, f.dataset, &p); return err }},
		{"cuvsIvfSqDeserialize", func() error { _, err := ivfsq.Deserialize(f.res, path); return err }},
		{"cuvsIvfSqSearch", func() error { return idx.Search(f.res, sp, f.queries, f.neighbors, f.distances, nil) }},
		{"cuvsIvfSqSerialize", func() error { return idx.Serialize(f.res, path) }},
		{"cuvsIvfSqExtend", func() error { return idx.Extend(f.res, f.queries, nil) }},
		{"cuvsIvfSqIndexGetCenters", func() error {
			dst, _ := dlpack.NewHostMatrix(make([]float32, 4*dim), 4, dim)
			return idx.Centers(f.res, dst)
		}},
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
	if idx.Rows() != 100 {
		t.Errorf("Size %d after a failed extend", idx.Rows())
	}
}

// Build from host memory (a Go slice) and extend with host rows, ids
// numbered by the package.
func TestHostMemory(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, rows, nq, k)
	host, err := dlpack.NewHostMatrix(f.data[:(rows/2)*dim], rows/2, dim)
	must(t, err)
	idx, err := ivfsq.Build(f.res, host, ptr(params(t)))
	must(t, err)
	safetest.Close(t, idx)
	rest, err := dlpack.NewHostMatrix(f.data[(rows/2)*dim:], rows-rows/2, dim)
	must(t, err)
	must(t, idx.Extend(f.res, rest, nil))
	if idx.Rows() != rows {
		t.Fatalf("Size %d, want %d", idx.Rows(), rows)
	}
	nb, ds := f.search(t, idx, nLists, nil)
	checkInvariants(t, nb, ds, k, rows, nil)
	if r := recall(nb, safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, nil), k); r < 0.85 {
		t.Errorf("recall@%d = %.3f", k, r)
	}
}

// ptr returns a pointer to a copy of v (params for a call from a helper).
func ptr[T any](v T) *T { return &v }
