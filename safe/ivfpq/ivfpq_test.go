package ivfpq_test

import (
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// The tests hold on the real library too: IVF-PQ is approximate twice over
// (probed lists, compressed vectors), so results are checked by recall
// against an exact kNN computed in Go, above thresholds far below what the
// parameters give (the double's k-means and codebooks are its own), plus
// invariants. Exact equality is asked only of round trips (serialization,
// Prepared against Search).
func TestMain(m *testing.M) { safetest.Main(m) }

// Clustered data: pq_dim = dim/2 at 8 bits, every list probed.
const (
	rows, dim, nq, k = 2000, 16, 50, 10
	nLists           = 20
	minRecall        = 0.5
)

// clustered returns n×d points around 20 centres spread over [0, 10)^d,
// with unit-variance noise; the same seed gives the same centres, so
// queries from another seed come from the same mixture.
func clustered(seed uint64, n, d int) []float32 {
	cr := rand.New(rand.NewPCG(7, 11))
	centres := make([]float32, 20*d)
	for i := range centres {
		centres[i] = 10 * cr.Float32()
	}
	r := rand.New(rand.NewPCG(seed, seed*31+1))
	out := make([]float32, n*d)
	for i := 0; i < n; i++ {
		c := r.IntN(20)
		for j := 0; j < d; j++ {
			out[i*d+j] = centres[c*d+j] + float32(r.NormFloat64())
		}
	}
	return out
}

type fixture struct {
	res      *safe.Resources
	data, qs []float32
	dataset  *safe.DeviceMatrix[float32]
	queries  *safe.DeviceMatrix[float32]
	nb       *safe.DeviceMatrix[int64]
	dist     *safe.DeviceMatrix[float32]
	sp       ivfpq.SearchParams
}

func setup(t *testing.T) *fixture {
	t.Helper()
	safetest.Check(t)
	f := &fixture{res: safetest.Resources(t), data: clustered(1, rows, dim), qs: clustered(2, nq, dim)}
	f.dataset = deviceMatrix(t, f.res, f.data, rows, dim)
	f.queries = deviceMatrix(t, f.res, f.qs, nq, dim)
	f.nb = newDevice[int64](t, f.res, nq, k)
	f.dist = newDevice[float32](t, f.res, nq, k)
	var err error
	if f.sp, err = ivfpq.DefaultSearchParams(); err != nil {
		t.Fatal(err)
	}
	f.sp.NProbes = nLists
	return f
}

func deviceMatrix[T dlpack.DType](t *testing.T, res *safe.Resources, data []T, r, c int) *safe.DeviceMatrix[T] {
	t.Helper()
	m, err := safe.DeviceMatrixFrom(res, data, r, c)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, m)
	return m
}

func newDevice[T dlpack.DType](t *testing.T, res *safe.Resources, r, c int) *safe.DeviceMatrix[T] {
	t.Helper()
	m, err := safe.NewDeviceMatrix[T](res, r, c)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, m)
	return m
}

func hostMatrix[T dlpack.DType](t *testing.T, data []T, r, c int) *dlpack.HostMatrix[T] {
	t.Helper()
	m, err := dlpack.NewHostMatrix(data, r, c)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, m)
	return m
}

func params(t *testing.T) ivfpq.IndexParams {
	t.Helper()
	p, err := ivfpq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.NLists, p.PQDim, p.PQBits = nLists, dim/2, 8
	return p
}

func build(t *testing.T, res *safe.Resources, dataset dlpack.Tensor, p ivfpq.IndexParams) *ivfpq.Index {
	t.Helper()
	idx, err := ivfpq.Build(res, dataset, &p)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	return idx
}

func errOf[T any](_ T, err error) error { return err }

// results searches and returns the neighbors and distances on the host.
func results(t *testing.T, f *fixture, idx *ivfpq.Index, sp *ivfpq.SearchParams) ([]int64, []float32) {
	t.Helper()
	if err := idx.Search(f.res, sp, f.queries, f.nb, f.dist); err != nil {
		t.Fatal(err)
	}
	if err := f.res.Sync(); err != nil {
		t.Fatal(err)
	}
	nb, err := f.nb.ToHost(f.res)
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.dist.ToHost(f.res)
	if err != nil {
		t.Fatal(err)
	}
	return nb, d
}

// check asserts the invariants of an IVF-PQ result (ids among valid,
// distances ascending up to rounding) and recall@k against the exact kNN
// of queries over data (ids mapped through ids when not nil), and returns
// the recall.
func check(t *testing.T, nb []int64, d []float32, data, queries []float32, valid func(int64) bool, ids []int64, min float64) float64 {
	t.Helper()
	want := safetest.ExactKNN(data, queries, dim, k, safetest.L2, nil)
	hits := 0
	for q := range want {
		row, dr := nb[q*k:(q+1)*k], d[q*k:(q+1)*k]
		for j, id := range row {
			if !valid(id) {
				t.Fatalf("query %d: id %d out of range (%v)", q, id, row)
			}
			if j > 0 && float64(dr[j]) < float64(dr[j-1])-1e-3*math.Max(1, math.Abs(float64(dr[j-1]))) {
				t.Fatalf("query %d: distances not ascending: %v", q, dr)
			}
		}
		for _, w := range want[q] {
			if ids != nil {
				w = ids[w]
			}
			if slices.Contains(row, w) {
				hits++
			}
		}
	}
	recall := float64(hits) / float64(len(want)*k)
	if recall < min {
		t.Errorf("recall@%d %.3f, want at least %.2f", k, recall, min)
	}
	return recall
}

func inRange(n int64) func(int64) bool { return func(id int64) bool { return id >= 0 && id < n } }

func isArg(err error, arg string) bool {
	var ae *safe.ArgError
	return errors.As(err, &ae) && ae.Arg == arg && errors.Is(err, safe.ErrInvalidArgument)
}

func isCuvs(err error, fn, reason string) bool {
	var e *safe.Error
	return errors.As(err, &e) && e.Func == fn && e.Reason == reason && errors.Is(err, safe.ErrCuvs)
}

// toHost copies a (possibly strided) device view of rank 1 or 2 into a new
// slice.
func toHost[T dlpack.DType](t *testing.T, res *safe.Resources, v dlpack.View) []T {
	t.Helper()
	out := make([]T, v.Len())
	var dst dlpack.ViewMut
	var err error
	if v.NDim() == 1 {
		dst, err = dlpack.NewHostVector(out).ViewMut()
	} else {
		var h *dlpack.HostMatrix[T]
		if h, err = dlpack.NewHostMatrix(out, int(v.Dim(0)), int(v.Dim(1))); err == nil {
			dst, err = h.ViewMut()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		return out
	}
	if err := safe.Copy(res, &v, &dst); err != nil {
		t.Fatal(err)
	}
	return out
}

// The defaults are cuVS v26.06.00's (c/src/neighbors/ivf_pq.cpp,
// cuvsIvfPqIndexParamsCreate and cuvsIvfPqSearchParamsCreate).
func TestDefaults(t *testing.T) {
	safetest.Check(t)
	p, err := ivfpq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	want := ivfpq.IndexParams{
		Metric: safe.L2Expanded, MetricArg: 2, AddDataOnBuild: true, NLists: 1024, KMeansNIters: 20,
		KMeansTrainsetFraction: 0.5, PQBits: 8, PQDim: 0, CodebookKind: ivfpq.PerSubspace,
		MaxTrainPointsPerPQCode: 256, CodesLayout: ivfpq.Interleaved,
	}
	if p != want {
		t.Errorf("DefaultIndexParams: %+v, want %+v", p, want)
	}
	s, err := ivfpq.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	ws := ivfpq.SearchParams{NProbes: 20, LUTDtype: ivfpq.CUDAFloat32, InternalDistanceDtype: ivfpq.CUDAFloat32,
		CoarseSearchDtype: ivfpq.CUDAFloat32, MaxInternalBatchSize: 4096, PreferredShmemCarveout: 1}
	if s != ws {
		t.Errorf("DefaultSearchParams: %+v, want %+v", s, ws)
	}
	for v, name := range map[interface{ String() string }]string{
		ivfpq.PerSubspace: "PerSubspace", ivfpq.PerCluster: "PerCluster", ivfpq.CodebookKind(7): "CodebookKind(7)",
		ivfpq.Flat: "Flat", ivfpq.Interleaved: "Interleaved", ivfpq.CodesLayout(-1): "CodesLayout(-1)",
		ivfpq.CUDAFloat32: "CUDA_R_32F", ivfpq.CUDAFloat16: "CUDA_R_16F", ivfpq.CUDAInt8: "CUDA_R_8I",
		ivfpq.CUDAUint8: "CUDA_R_8U", ivfpq.CUDAType(14): "cudaDataType_t(14)",
	} {
		if v.String() != name {
			t.Errorf("%#v.String() = %q, want %q", v, v.String(), name)
		}
	}
}

// Build from host and device data; recall above the threshold with every
// list probed; the getters report the shape asked for.
func TestBuildSearch(t *testing.T) {
	f := setup(t)
	for name, ds := range map[string]dlpack.Tensor{
		"device": f.dataset,
		"host":   hostMatrix(t, slices.Clone(f.data), rows, dim),
	} {
		t.Run(name, func(t *testing.T) {
			idx := build(t, f.res, ds, params(t))
			got := []int{idx.Rows(), idx.Dim(), idx.NLists(), idx.PQDim(), idx.PQBits(), idx.PQLen(), idx.RotDim(), idx.CodeBytes()}
			if want := []int{rows, dim, nLists, dim / 2, 8, 2, dim, dim / 2}; !slices.Equal(got, want) {
				t.Errorf("size, dim, lists, pq dim, pq bits, pq len, rot dim, code bytes: %v, want %v", got, want)
			}
			if idx.DType() != dlpack.Float32 {
				t.Errorf("DType %v", idx.DType())
			}
			nb, d := results(t, f, idx, &f.sp)
			r := check(t, nb, d, f.data, f.qs, inRange(rows), nil, minRecall)
			t.Logf("recall@%d %.3f", k, r)
			// one probe: fewer candidates, still valid ids
			one := f.sp
			one.NProbes = 1
			nb, d = results(t, f, idx, &one)
			check(t, nb, d, f.data, f.qs, inRange(rows), nil, 0)
		})
	}
	// Built from a host dataset, the index does not borrow it.
	h, err := dlpack.NewHostMatrix(slices.Clone(f.data), rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	idx := build(t, f.res, h, params(t))
	if err := h.Close(); err != nil {
		t.Fatalf("closing a dataset the index copied: %v", err)
	}
	d2, err := safe.DeviceMatrixFrom(f.res, f.data, rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	idx2 := build(t, f.res, d2, params(t))
	if err := d2.Close(); err != nil {
		t.Fatalf("closing a device dataset the index copied: %v", err)
	}
	for _, x := range []*ivfpq.Index{idx, idx2} {
		nb, d := results(t, f, x, &f.sp)
		check(t, nb, d, f.data, f.qs, inRange(rows), nil, minRecall)
	}
}

// Other element types and metrics build and search; half-precision LUTs
// and distances too.
func TestVariants(t *testing.T) {
	f := setup(t)
	p := params(t)
	// Per-cluster codebooks train on each list's rows alone: 4 bits (16
	// centres) leave them enough points.
	p.CodebookKind = ivfpq.PerCluster
	p.PQBits = 4
	idx := build(t, f.res, f.dataset, p)
	if v, err := idx.PQCenters(); err != nil || v.Dim(0) != nLists || v.Dim(1) != 2 || v.Dim(2) != 16 {
		t.Errorf("per-cluster codebooks %v, %v", v, err)
	}
	nb, d := results(t, f, idx, &f.sp)
	check(t, nb, d, f.data, f.qs, inRange(rows), nil, 0.3)
	half := f.sp
	half.LUTDtype, half.InternalDistanceDtype, half.CoarseSearchDtype = ivfpq.CUDAFloat16, ivfpq.CUDAFloat16, ivfpq.CUDAFloat16
	nb, d = results(t, f, idx, &half)
	check(t, nb, d, f.data, f.qs, inRange(rows), nil, 0.3)

	// int8 data: rows in [-128, 127], queries of the same type
	i8 := make([]int8, len(f.data))
	for i, v := range f.data {
		i8[i] = int8(v*10 - 50)
	}
	q8 := make([]int8, len(f.qs))
	for i, v := range f.qs {
		q8[i] = int8(v*10 - 50)
	}
	i8idx := build(t, f.res, hostMatrix(t, i8, rows, dim), params(t))
	if i8idx.DType() != dlpack.Int8 {
		t.Errorf("int8 index DType %v", i8idx.DType())
	}
	if err := i8idx.Search(f.res, &f.sp, deviceMatrix(t, f.res, q8, nq, dim), f.nb, f.dist); err != nil {
		t.Fatal(err)
	}
	if err := i8idx.Search(f.res, &f.sp, f.queries, f.nb, f.dist); !isArg(err, "queries") {
		t.Errorf("float32 queries to an int8 index: %v", err)
	}
	ip := params(t)
	ip.Metric = safe.InnerProduct
	ipIdx := build(t, f.res, f.dataset, ip)
	if err := ipIdx.Search(f.res, &f.sp, f.queries, f.nb, f.dist); err != nil {
		t.Fatal(err)
	}
	if err := f.res.Sync(); err != nil {
		t.Fatal(err)
	}
	got, _ := f.nb.ToHost(f.res)
	for _, id := range got {
		if id < 0 || id >= rows {
			t.Fatalf("inner product: id %d", id)
		}
	}
}

// The views into the index: shapes, contents that must agree, expiry
// with Extend and Close, and Close refused while one is in use.
func TestViews(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	dimExt := int64((dim + 1 + 7) / 8 * 8)
	centers := make([]float32, nLists*dim)
	if err := idx.Centers(f.res, hostMatrix(t, centers, nLists, dim)); err != nil {
		t.Fatal(err)
	}
	padded, err := idx.CentersPadded()
	if err != nil {
		t.Fatal(err)
	}
	pqc, err := idx.PQCenters()
	if err != nil {
		t.Fatal(err)
	}
	crot, err := idx.CentersRot()
	if err != nil {
		t.Fatal(err)
	}
	rot, err := idx.RotationMatrix()
	if err != nil {
		t.Fatal(err)
	}
	sizes, err := idx.ListSizes()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		v     dlpack.View
		dt    dlpack.DataType
		shape []int64
	}{
		{"CentersPadded", padded, dlpack.Float32, []int64{nLists, dimExt}},
		{"PQCenters", pqc, dlpack.Float32, []int64{dim / 2, 2, 256}},
		{"CentersRot", crot, dlpack.Float32, []int64{nLists, dim}},
		{"RotationMatrix", rot, dlpack.Float32, []int64{dim, dim}},
		{"ListSizes", sizes, dlpack.Uint32, []int64{nLists}},
	} {
		if c.v.DType() != c.dt || !slices.Equal(c.v.Shape(), c.shape) || c.v.Device().Type != dlpack.CUDA {
			t.Errorf("%s: %v, want %s %v on CUDA", c.name, c.v, c.dt, c.shape)
		}
	}
	cv, pv := centers, toHost[float32](t, f.res, padded)
	for l := 0; l < nLists; l++ {
		if !slices.Equal(cv[l*dim:(l+1)*dim], pv[l*int(dimExt):l*int(dimExt)+dim]) {
			t.Fatalf("list %d: Centers and CentersPadded differ", l)
		}
	}
	sv := toHost[uint32](t, f.res, sizes)
	host, err := idx.ListSizesToHost(f.res)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sv, host) {
		t.Errorf("ListSizes view %v, ListSizesToHost %v", sv, host)
	}
	var seen []int64
	for l := uint32(0); l < nLists; l++ {
		li, err := idx.ListIndices(l)
		if err != nil {
			t.Fatal(err)
		}
		if li.DType() != dlpack.Int64 || li.NDim() != 1 || li.Dim(0) < int64(sv[l]) {
			t.Fatalf("ListIndices(%d): %v for %d rows", l, li, sv[l])
		}
		seen = append(seen, toHost[int64](t, f.res, li)[:sv[l]]...)
	}
	slices.Sort(seen)
	for i, id := range seen {
		if id != int64(i) {
			t.Fatalf("the lists hold ids %v..., want each of 0..%d once", seen[:min(len(seen), 20)], rows-1)
		}
	}
	if len(seen) != rows {
		t.Fatalf("the lists hold %d ids, want %d", len(seen), rows)
	}

	// A retained view blocks Close and Extend.
	r, err := pqc.Retain("a test")
	if err != nil {
		t.Fatal(err)
	}
	var be *dlpack.BorrowedError
	if err := idx.Close(); !errors.As(err, &be) || !strings.Contains(err.Error(), "a test") {
		t.Fatalf("Close while a view is retained: %v", err)
	}
	if err := idx.Extend(f.res, f.queries, nil); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Fatalf("Extend while a view is retained: %v", err)
	}
	r.End()
	// Extend expires the views.
	if err := idx.Extend(f.res, f.queries, nil); err != nil {
		t.Fatal(err)
	}
	for _, v := range []dlpack.View{padded, pqc, crot, rot, sizes} {
		if !errors.Is(v.Err(), dlpack.ErrExpired) {
			t.Errorf("a view after Extend: %v", v.Err())
		}
	}
	if idx.Rows() != rows+nq {
		t.Errorf("size %d after Extend", idx.Rows())
	}
	// Close expires them too; Centers' copy stays.
	c2, err := idx.CentersPadded()
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Data(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("a view after Close: %v", err)
	}
	if err := idx.Centers(f.res, hostMatrix(t, make([]float32, nLists*dim), nLists, dim)); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Centers after Close: %v", err)
	}
}

// An index trained without data is empty; Extend fills it with ids of its
// own or numbered from Rows().
func TestExtend(t *testing.T) {
	f := setup(t)
	p := params(t)
	p.AddDataOnBuild = false
	idx := build(t, f.res, f.dataset, p)
	if idx.Rows() != 0 {
		t.Fatalf("size %d without data", idx.Rows())
	}
	if err := idx.Search(f.res, &f.sp, f.queries, f.nb, f.dist); !isArg(err, "neighbors") {
		t.Errorf("search of an empty index: %v", err)
	}
	if _, err := idx.ListIndices(0); !isArg(err, "label") {
		t.Errorf("ListIndices of an empty index: %v", err)
	}
	// the first half from the host, numbered 0..999
	half := rows / 2
	if err := idx.Extend(f.res, hostMatrix(t, slices.Clone(f.data[:half*dim]), half, dim), nil); err != nil {
		t.Fatal(err)
	}
	if idx.Rows() != int(half) {
		t.Fatalf("size %d", idx.Rows())
	}
	// the second half from the device, numbered 1000..1999 by Extend
	second, err := f.dataset.RowsView(half, rows)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Extend(f.res, second, nil); err != nil {
		t.Fatal(err)
	}
	nb, d := results(t, f, idx, &f.sp)
	check(t, nb, d, f.data, f.qs, inRange(rows), nil, minRecall)

	// Ids of our own: rows 0..1999 again as ids 10000+i, from the device.
	ids := make([]int64, rows)
	for i := range ids {
		ids[i] = 10000 + int64(i)
	}
	other := build(t, f.res, f.dataset, p)
	if err := other.Extend(f.res, f.dataset, deviceMatrixVec(t, f.res, ids)); err != nil {
		t.Fatal(err)
	}
	nb, d = results(t, f, other, &f.sp)
	check(t, nb, d, f.data, f.qs, func(id int64) bool { return id >= 10000 && id < 10000+rows }, ids, minRecall)
	// from the host, into the index that holds 0..1999: ids 20000+i
	for i := range ids {
		ids[i] = 20000 + int64(i)
	}
	if err := idx.Extend(f.res, hostMatrix(t, slices.Clone(f.data), rows, dim), dlpack.NewHostVector(slices.Clone(ids))); err != nil {
		t.Fatal(err)
	}
	if idx.Rows() != 2*rows {
		t.Errorf("size %d", idx.Rows())
	}
	nb, _ = results(t, f, idx, &f.sp)
	for _, id := range nb {
		if !(id >= 0 && id < rows) && !(id >= 20000 && id < 20000+rows) {
			t.Fatalf("id %d", id)
		}
	}
}

func deviceMatrixVec(t *testing.T, res *safe.Resources, v []int64) *safe.DeviceVector[int64] {
	t.Helper()
	d, err := safe.DeviceVectorFrom(res, v)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, d)
	return d
}

// Serialize and Deserialize round-trip: identical results; the element type
// is not in the file, and the first Extend records it.
func TestSerialize(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	path := filepath.Join(t.TempDir(), "ivfpq.idx")
	if err := idx.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	back, err := ivfpq.Deserialize(f.res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	got := []int{back.Rows(), back.Dim(), back.NLists(), back.PQDim(), back.PQBits(), back.PQLen()}
	if want := []int{rows, dim, nLists, dim / 2, 8, 2}; !slices.Equal(got, want) {
		t.Errorf("deserialized shape %v, want %v", got, want)
	}
	if back.DType() != (dlpack.DataType{}) {
		t.Errorf("deserialized DType %v, want unknown", back.DType())
	}
	n1, d1 := results(t, f, idx, &f.sp)
	n2, d2 := results(t, f, back, &f.sp)
	if !slices.Equal(n1, n2) || !slices.Equal(d1, d2) {
		t.Errorf("deserialized index: %v %v, original %v %v", n2[:k], d2[:k], n1[:k], d1[:k])
	}
	if err := back.Extend(f.res, f.queries, nil); err != nil {
		t.Fatal(err)
	}
	if back.DType() != dlpack.Float32 || back.Rows() != rows+nq {
		t.Errorf("after Extend: %v, %d rows", back.DType(), back.Rows())
	}
	if _, err := ivfpq.Deserialize(f.res, filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, safe.ErrCuvs) {
		t.Errorf("a missing file: %v", err)
	}
}

// BuildPrecomputed from another index's model: the new index borrows the
// tensors (their owners refuse to go) and, extended with the same rows,
// searches as well.
func TestBuildPrecomputed(t *testing.T) {
	f := setup(t)
	p := params(t)
	src := build(t, f.res, f.dataset, p)
	get := func(v dlpack.View, err error) dlpack.View {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	pqc := get(src.PQCenters())
	cen := get(src.CentersPadded())
	crot := get(src.CentersRot())
	rot := get(src.RotationMatrix())
	// Copies in matrices of our own.
	pqcHost := toHost[float32](t, f.res, as2D(t, pqc))
	pqcDev := deviceMatrix(t, f.res, pqcHost, len(pqcHost), 1)
	pqcView, err := dlpack.FromRawParts(mustData(t, pqcDev), dlpack.Device{Type: dlpack.CUDA}, pqc.Shape(), nil, dlpack.Float32)
	if err != nil {
		t.Fatal(err)
	}
	pqcView = pqcView.WithOwner(pqcDev.Owner())
	cenDev := deviceMatrix(t, f.res, toHost[float32](t, f.res, cen), nLists, int(cen.Dim(1)))
	crotDev := deviceMatrix(t, f.res, toHost[float32](t, f.res, crot), nLists, dim)
	rotDev := deviceMatrix(t, f.res, toHost[float32](t, f.res, rot), dim, dim)

	idx, err := ivfpq.BuildPrecomputed(f.res, &p, dim, pqcView, cenDev, crotDev, rotDev)
	if err != nil {
		t.Fatal(err)
	}
	if idx.Rows() != 0 || idx.DType() != (dlpack.DataType{}) || idx.NLists() != nLists || idx.PQDim() != dim/2 {
		t.Errorf("precomputed index: %d rows, %v, %d lists, pq dim %d", idx.Rows(), idx.DType(), idx.NLists(), idx.PQDim())
	}
	for _, o := range []interface{ Close() error }{pqcDev, cenDev, crotDev, rotDev} {
		var be *dlpack.BorrowedError
		if err := o.Close(); !errors.As(err, &be) || !strings.Contains(err.Error(), "ivfpq.Index") {
			t.Fatalf("closing a tensor the index borrows: %v", err)
		}
	}
	if err := idx.Extend(f.res, f.dataset, nil); err != nil {
		t.Fatal(err)
	}
	if idx.DType() != dlpack.Float32 || idx.Rows() != rows {
		t.Errorf("after Extend: %v, %d rows", idx.DType(), idx.Rows())
	}
	n2, d2 := results(t, f, idx, &f.sp)
	check(t, n2, d2, f.data, f.qs, inRange(rows), nil, minRecall)
	if safetest.Control() != nil {
		// the same model and rows: the double encodes them identically
		n1, d1 := results(t, f, src, &f.sp)
		if !slices.Equal(n1, n2) || !slices.Equal(d1, d2) {
			t.Error("the precomputed index searches differently from its source")
		}
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []interface{ Close() error }{pqcDev, cenDev, crotDev, rotDev} {
		if err := o.Close(); err != nil {
			t.Errorf("closing a tensor after the index: %v", err)
		}
	}

	// Straight from the source's views: the source cannot close first.
	view, err := ivfpq.BuildPrecomputed(f.res, &p, dim, pqc, cen, crot, rot)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Fatalf("closing an index whose views another borrows: %v", err)
	}
	if err := view.Close(); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustData(t *testing.T, m *safe.DeviceMatrix[float32]) (p unsafe.Pointer) {
	t.Helper()
	v, err := m.View()
	if err != nil {
		t.Fatal(err)
	}
	if p, err = v.Data(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Transform encodes as the index does: labels name lists, codes are
// CodeBytes wide; on the double, what Transform gives a row is what the
// list holds for it (UnpackListCodes).
func TestTransform(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	labels := newDevice[uint32](t, f.res, rows, 1)
	lv := vector(t, labels)
	codes := newDevice[uint8](t, f.res, rows, int(idx.CodeBytes()))
	if err := idx.Transform(f.res, f.dataset, lv, codes); err != nil {
		t.Fatal(err)
	}
	if err := f.res.Sync(); err != nil {
		t.Fatal(err)
	}
	lab, _ := labels.ToHost(f.res)
	for i, l := range lab {
		if l >= nLists {
			t.Fatalf("row %d: label %d", i, l)
		}
	}
	all, _ := codes.ToHost(f.res)
	sizes, err := idx.ListSizesToHost(f.res)
	if err != nil {
		t.Fatal(err)
	}
	for l := uint32(0); l < nLists; l++ {
		if sizes[l] == 0 {
			continue
		}
		out := newDevice[uint8](t, f.res, int(sizes[l]), int(idx.CodeBytes()))
		if err := idx.UnpackListCodes(f.res, l, 0, out); err != nil {
			t.Fatal(err)
		}
		if safetest.Control() == nil {
			continue
		}
		li, err := idx.ListIndices(l)
		if err != nil {
			t.Fatal(err)
		}
		ids := toHost[int64](t, f.res, li)[:sizes[l]]
		got, _ := out.ToHost(f.res)
		cb := int(idx.CodeBytes())
		for j, id := range ids {
			if lab[id] != l || !slices.Equal(got[j*cb:(j+1)*cb], all[int(id)*cb:int(id+1)*cb]) {
				t.Fatalf("list %d row %d (id %d): label %d, codes %v, Transform %v", l, j, id, lab[id], got[j*cb:(j+1)*cb], all[int(id)*cb:int(id+1)*cb])
			}
		}
	}
	// a range beyond the list is refused
	tooMany := newDevice[uint8](t, f.res, int(sizes[0])+1, int(idx.CodeBytes()))
	if err := idx.UnpackListCodes(f.res, 0, 0, tooMany); !isArg(err, "offset") {
		t.Errorf("unpacking beyond the list: %v", err)
	}
}

// as2D is a rank-3 row-major view seen as [d0, d1*d2].
func as2D(t *testing.T, v dlpack.View) dlpack.View {
	t.Helper()
	p, err := v.Data()
	if err != nil {
		t.Fatal(err)
	}
	w, err := dlpack.FromRawParts(p, v.Device(), []int64{v.Dim(0), v.Dim(1) * v.Dim(2)}, nil, v.DType())
	if err != nil {
		t.Fatal(err)
	}
	return w.WithOwner(v.Owner())
}

// vector is a rank-1 view of a one-column matrix.
func vector[T dlpack.DType](t *testing.T, m *safe.DeviceMatrix[T]) dlpack.TensorMut {
	t.Helper()
	mv, err := m.ViewMut()
	if err != nil {
		t.Fatal(err)
	}
	p, err := mv.Data()
	if err != nil {
		t.Fatal(err)
	}
	v, err := dlpack.FromRawPartsMut(p, mv.Device(), []int64{mv.Dim(0)}, nil, mv.DType())
	if err != nil {
		t.Fatal(err)
	}
	return v.WithOwner(m.Owner())
}
