package cuvsdouble_test

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/safe"
)

// The IVF-PQ tests drive the double through the generated bindings (the
// C calls themselves, with no safe-layer checks in front), loaded once for
// the process from a shared build.

var (
	pqOnce sync.Once
	pqCtl  *cuvsdouble.Control
	pqErr  error
)

type pqFixture struct {
	t   *testing.T
	ctl *cuvsdouble.Control
	res *safe.Resources
	h   generated.CuvsResources_t
}

func newPQ(t *testing.T) *pqFixture {
	t.Helper()
	pqOnce.Do(func() {
		path, _, err := cuvsdouble.BuildFile() // a shared build: nothing to remove
		if err != nil {
			pqErr = err
			return
		}
		if pqErr = safe.Load(safe.WithLibrary(path)); pqErr != nil {
			return
		}
		pqCtl, pqErr = cuvsdouble.Open(path)
	})
	if pqErr != nil {
		t.Fatal(pqErr)
	}
	before := pqCtl.Counters()
	res, err := safe.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	// Raw calls use a handle of their own (safe hands out none).
	var h generated.CuvsResources_t
	if err := generated.CuvsResourcesCreate(&h); err != nil {
		t.Fatal(err)
	}
	f := &pqFixture{t: t, ctl: pqCtl, res: res, h: h}
	t.Cleanup(func() {
		if err := res.Close(); err != nil {
			t.Error(err)
		}
		if err := generated.CuvsResourcesDestroy(h); err != nil {
			t.Error(err)
		}
		for kind, p := range pqCtl.Counters() {
			if p.Live() != before[kind].Live() {
				t.Errorf("%s: %d live before, %d after", kind, before[kind].Live(), p.Live())
			}
		}
		if v := pqCtl.TakeViolations(); len(v) > 0 {
			t.Errorf("violations: %q", v)
		}
	})
	return f
}

// dev copies data into device memory (the double's RMM) as rows × cols.
func dev[T dlpack.DType](f *pqFixture, data []T, rows, cols int) dlpack.View {
	f.t.Helper()
	m, err := safe.DeviceMatrixFrom(f.res, data, rows, cols)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		if err := m.Close(); err != nil {
			f.t.Error(err)
		}
	})
	v, _ := m.View()
	return v
}

// bind materializes views for one C call that lasts until the test ends.
func (f *pqFixture) bind(vs ...dlpack.View) []*generated.DLManagedTensor {
	f.t.Helper()
	c := dlpack.Begin("test")
	f.t.Cleanup(c.End)
	out := make([]*generated.DLManagedTensor, len(vs))
	for i := range vs {
		t, err := c.In(&vs[i])
		if err != nil {
			f.t.Fatal(err)
		}
		out[i] = t
	}
	return out
}

func (f *pqFixture) params() generated.CuvsIvfPqIndexParams_t {
	f.t.Helper()
	var p generated.CuvsIvfPqIndexParams_t
	if err := generated.CuvsIvfPqIndexParamsCreate(&p); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = generated.CuvsIvfPqIndexParamsDestroy(p) })
	p.Ref().NLists, p.Ref().PqDim, p.Ref().PqBits, p.Ref().KmeansNIters = 4, 4, 8, 5
	return p
}

func (f *pqFixture) index() generated.CuvsIvfPqIndex_t {
	f.t.Helper()
	var x generated.CuvsIvfPqIndex_t
	if err := generated.CuvsIvfPqIndexCreate(&x); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		if err := generated.CuvsIvfPqIndexDestroy(x); err != nil {
			f.t.Error(err)
		}
	})
	return x
}

func pqData(rows, dim int) []float32 {
	out := make([]float32, rows*dim)
	s := uint32(3)
	for i := range out {
		s = s*1664525 + 1013904223
		out[i] = float32(s>>8) / float32(1<<24)
	}
	return out
}

// raftReason checks err is a cuVS failure with RAFT's text format and the
// given reason.
func raftReason(t *testing.T, what string, err error, reason string) {
	t.Helper()
	var ge *generated.Error
	if !errors.As(err, &ge) {
		t.Errorf("%s: %v, want a cuVS error", what, err)
		return
	}
	if !strings.HasPrefix(ge.Text, "RAFT failure at file=") || !strings.Contains(ge.Text, "Obtained") {
		t.Errorf("%s: text %q is not in RAFT's format", what, ge.Text)
	}
	if got := firstReason(ge.Text); got != reason {
		t.Errorf("%s: reason %q, want %q", what, got, reason)
	}
}

func TestIvfPqRefusals(t *testing.T) {
	f := newPQ(t)
	const rows, dim = 300, 8
	data := dev(f, pqData(rows, dim), rows, dim)
	q := dev(f, pqData(5, dim), 5, dim)
	nb := dev(f, make([]int64, 5*3), 5, 3)
	dist := dev(f, make([]float32, 5*3), 5, 3)
	host := dlpack.View{}
	if hm, err := dlpack.NewHostMatrix(pqData(rows, dim), rows, dim); err == nil {
		host, _ = hm.View()
	}
	hostIDs, _ := dlpack.NewHostVector(make([]int64, rows)).View()
	ts := f.bind(data, q, nb, dist, host, hostIDs)
	td, tq, tn, tdist, th, thIDs := ts[0], ts[1], ts[2], ts[3], ts[4], ts[5]

	p := f.params()
	x := f.index()
	p.Ref().PqBits = 3
	raftReason(t, "pq_bits 3", generated.CuvsIvfPqBuild(f.h, p, td, x), "`pq_bits` must be within closed range [4,8], but got 3.")
	p.Ref().PqBits, p.Ref().PqDim = 5, 3
	raftReason(t, "pq_dim × pq_bits", generated.CuvsIvfPqBuild(f.h, p, td, x), "`pq_bits * pq_dim` must be a multiple of 8, but got 5 * 3 = 15.")
	p.Ref().PqBits, p.Ref().PqDim, p.Ref().NLists = 8, 4, rows+1
	raftReason(t, "rows < n_lists", generated.CuvsIvfPqBuild(f.h, p, td, x), "number of rows can't be less than n_lists")
	p.Ref().NLists = 4
	// cuvsIvfPqBuild writes code and bits, never lanes.
	if err := generated.CuvsIvfPqBuild(f.h, p, td, x); err != nil {
		t.Fatal(err)
	}
	if d := x.Ref().Dtype; d.Code != 2 || d.Bits != 32 || d.Lanes != 0 {
		t.Errorf("dtype after build: %+v, want code 2 (float), bits 32, lanes 0", d)
	}

	sp := generated.CuvsIvfPqSearchParams{NProbes: 4, MaxInternalBatchSize: 4096, PreferredShmemCarveout: 1}
	var pin runtime.Pinner
	defer pin.Unpin()
	bad := sp
	bad.LutDtype = 3 // CUDA_R_8I
	raftReason(t, "lut int8", generated.CuvsIvfPqSearch(f.h, bad.Pin(&pin), x, tq, tn, tdist), "lut_dtype must be CUDA_R_16F, CUDA_R_32F or CUDA_R_8U")
	bad = sp
	bad.InternalDistanceDtype = 2 // 16F with a 32F LUT
	raftReason(t, "lut wider", generated.CuvsIvfPqSearch(f.h, bad.Pin(&pin), x, tq, tn, tdist),
		"Unexpected lut_dtype / internal_distance_dtype combination (0, 2). Size of the internal_distance_dtype should be not smaller than the size of the lut_dtype.")
	bad = sp
	bad.NProbes = 0
	raftReason(t, "no probes", generated.CuvsIvfPqSearch(f.h, bad.Pin(&pin), x, tq, tn, tdist), "n_probes (number of clusters to probe in the search) must be positive.")
	raftReason(t, "int32 neighbors", generated.CuvsIvfPqSearch(f.h, sp.Pin(&pin), x, tq, tdist, tdist), "neighbors should be of type int64_t")
	if err := generated.CuvsIvfPqSearch(f.h, sp.Pin(&pin), x, tq, tn, tdist); err != nil {
		t.Fatal(err)
	}
	// Search params from Create, destroyed, then searched with: a use after
	// free, refused. The double keeps destroyed params in quarantine, so no
	// live allocation (the safe layer's params memory) can take the address
	// while it is listed and be refused in its place.
	var gone generated.CuvsIvfPqSearchParams_t
	if err := generated.CuvsIvfPqSearchParamsCreate(&gone); err != nil {
		t.Fatal(err)
	}
	if err := generated.CuvsIvfPqSearchParamsDestroy(gone); err != nil {
		t.Fatal(err)
	}
	if err := generated.CuvsIvfPqSearch(f.h, gone, x, tq, tn, tdist); err == nil || !strings.Contains(err.Error(), "destroyed") {
		t.Errorf("search with destroyed params: %v", err)
	}
	if v := f.ctl.TakeViolations(); len(v) != 1 || !strings.Contains(v[0], "used after cuvs...Destroy freed it") {
		t.Errorf("violations %q", v)
	}

	// Extend: ids on the other side; a NULL ids pointer means "number them"
	// and is refused on a non-empty index.
	raftReason(t, "mixed memory", generated.CuvsIvfPqExtend(f.h, td, thIDs, x), "extend inputs must both either be on device memory or host memory")
	nullIDs := f.nullVector(dlpack.CPU, rows)
	raftReason(t, "no ids", generated.CuvsIvfPqExtend(f.h, th, nullIDs, x), "You must pass data indices when the index is non-empty.")
	p.Ref().AddDataOnBuild = false
	empty := f.index()
	if err := generated.CuvsIvfPqBuild(f.h, p, td, empty); err != nil {
		t.Fatal(err)
	}
	if err := generated.CuvsIvfPqExtend(f.h, th, nullIDs, empty); err != nil {
		t.Fatalf("numbering the rows of an empty index: %v", err)
	}
	var size int64
	if err := generated.CuvsIvfPqIndexGetSize(empty, &size); err != nil || size != rows {
		t.Errorf("size %d, %v", size, err)
	}

	// A flat index cannot be searched.
	p.Ref().CodesLayout = generated.CuvsIvfPqListLayout_CUVS_IVF_PQ_LIST_LAYOUT_FLAT
	p.Ref().AddDataOnBuild = true
	flat := f.index()
	if err := generated.CuvsIvfPqBuild(f.h, p, td, flat); err != nil {
		t.Fatal(err)
	}
	raftReason(t, "flat", generated.CuvsIvfPqSearch(f.h, sp.Pin(&pin), flat, tq, tn, tdist),
		"IVF-PQ search requires INTERLEAVED codes layout. FLAT layout is not supported for GPU search.")
}

// nullVector is a rank-1 int64 tensor of n elements with a NULL data
// pointer, in C memory for the test's life.
func (f *pqFixture) nullVector(dev dlpack.DeviceType, n int64) *generated.DLManagedTensor {
	f.t.Helper()
	mt := f.newTensor()
	shape := (*int64)(f.calloc(8))
	*shape = n
	mt.DlTensor.Device = generated.DLDevice{DeviceType: generated.DLDeviceType(dev)}
	mt.DlTensor.Ndim = 1
	mt.DlTensor.Dtype = generated.DLDataType{Code: 0, Bits: 64, Lanes: 1}
	mt.DlTensor.Shape = shape
	return mt
}

// calloc returns n zeroed bytes of C memory (the double's cuvsRMMAlloc),
// freed when the test ends.
func (f *pqFixture) calloc(n uintptr) unsafe.Pointer {
	f.t.Helper()
	var p unsafe.Pointer
	if err := generated.CuvsRMMAlloc(f.h, &p, uint64(n)); err != nil {
		f.t.Fatal(err)
	}
	clear(unsafe.Slice((*byte)(p), n))
	f.t.Cleanup(func() {
		if err := generated.CuvsRMMFree(f.h, p, uint64(n)); err != nil {
			f.t.Error(err)
		}
	})
	return p
}

func (f *pqFixture) newTensor() *generated.DLManagedTensor {
	return (*generated.DLManagedTensor)(f.calloc(unsafe.Sizeof(generated.DLManagedTensor{})))
}

func cPath(s string) *byte { return &append([]byte(s), 0)[0] }

// The views: shape and strides allocated by the library, a deleter that
// frees only those; Deserialize leaves the dtype alone; BuildPrecomputed
// zeroes code and bits and keeps references to its tensors.
func TestIvfPqViewsAndDtype(t *testing.T) {
	f := newPQ(t)
	const rows, dim = 300, 8
	td := f.bind(dev(f, pqData(rows, dim), rows, dim))[0]
	p := f.params()
	x := f.index()
	if err := generated.CuvsIvfPqBuild(f.h, p, td, x); err != nil {
		t.Fatal(err)
	}
	meta := f.ctl.Counters()["tensor_metadata"].Live()
	type getter func(generated.CuvsIvfPqIndex_t, *generated.DLManagedTensor) error
	for _, c := range []struct {
		name    string
		get     getter
		shape   []int64
		strided bool
	}{
		{"centers", generated.CuvsIvfPqIndexGetCenters, []int64{4, dim}, true},
		{"padded", generated.CuvsIvfPqIndexGetCentersPadded, []int64{4, 16}, false},
		{"pq centers", generated.CuvsIvfPqIndexGetPqCenters, []int64{4, 2, 256}, false},
		{"centers rot", generated.CuvsIvfPqIndexGetCentersRot, []int64{4, dim}, false},
		{"rotation", generated.CuvsIvfPqIndexGetRotationMatrix, []int64{dim, dim}, false},
		{"list sizes", generated.CuvsIvfPqIndexGetListSizes, []int64{4}, false},
		{"list 0", func(x generated.CuvsIvfPqIndex_t, mt *generated.DLManagedTensor) error {
			return generated.CuvsIvfPqIndexGetListIndices(x, 0, mt)
		}, nil, false},
	} {
		mt := f.newTensor()
		if err := c.get(x, mt); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		dt := &mt.DlTensor
		shape := unsafe.Slice(dt.Shape, dt.Ndim)
		if c.shape != nil && !slicesEqual(shape, c.shape) {
			t.Errorf("%s: shape %v, want %v", c.name, shape, c.shape)
		}
		if (dt.Strides != nil) != c.strided || dt.Device.DeviceType != generated.DLDeviceType(dlpack.CUDA) || mt.Deleter == nil || dt.Data == nil {
			t.Errorf("%s: strides %v, device %d, deleter %v, data %v", c.name, dt.Strides, dt.Device.DeviceType, mt.Deleter, dt.Data)
		}
		if c.strided && unsafe.Slice(dt.Strides, 2)[0] != 16 {
			t.Errorf("%s: strides %v", c.name, unsafe.Slice(dt.Strides, 2))
		}
		im, err := dlpack.Import(mt)
		if err != nil {
			t.Fatal(err)
		}
		if err := im.Close(); err != nil { // calls the library's deleter
			t.Fatal(err)
		}
	}
	if got := f.ctl.Counters()["tensor_metadata"].Live(); got != meta {
		t.Errorf("tensor metadata: %d live after the deleters, %d before", got, meta)
	}

	// Deserialize writes no dtype.
	path := filepath.Join(t.TempDir(), "pq")
	if err := generated.CuvsIvfPqSerialize(f.h, cPath(path), x); err != nil {
		t.Fatal(err)
	}
	back := f.index()
	back.Ref().Dtype = generated.DLDataType{Code: 5, Bits: 7, Lanes: 3}
	if err := generated.CuvsIvfPqDeserialize(f.h, cPath(path), back); err != nil {
		t.Fatal(err)
	}
	if d := back.Ref().Dtype; d.Code != 5 || d.Bits != 7 || d.Lanes != 3 {
		t.Errorf("Deserialize changed the dtype to %+v", d)
	}

	// BuildPrecomputed zeroes code and bits (not lanes) and borrows.
	views := make([]dlpack.View, 4)
	for i, get := range []getter{generated.CuvsIvfPqIndexGetPqCenters, generated.CuvsIvfPqIndexGetCentersPadded,
		generated.CuvsIvfPqIndexGetCentersRot, generated.CuvsIvfPqIndexGetRotationMatrix} {
		mt := f.newTensor()
		if err := get(x, mt); err != nil {
			t.Fatal(err)
		}
		im, err := dlpack.Import(mt)
		if err != nil {
			t.Fatal(err)
		}
		views[i], _ = im.View()
		t.Cleanup(func() { im.Close() })
	}
	ts := f.bind(views...)
	pre := f.index()
	pre.Ref().Dtype.Lanes = 9
	if err := generated.CuvsIvfPqBuildPrecomputed(f.h, p, dim, ts[0], ts[1], ts[2], ts[3], pre); err != nil {
		t.Fatal(err)
	}
	if d := pre.Ref().Dtype; d.Code != 0 || d.Bits != 0 || d.Lanes != 9 {
		t.Errorf("dtype after BuildPrecomputed: %+v", d)
	}
	if err := generated.CuvsIvfPqBuildPrecomputed(f.h, p, dim+1, ts[0], ts[1], ts[2], ts[3], f.index()); err == nil {
		t.Error("precomputed tensors for another dimension accepted")
	} else {
		raftReason(t, "wrong dim", err, "pq_centers must have extent [4, 3, 256]. Got [4, 2, 256]")
	}
	if err := generated.CuvsIvfPqExtend(f.h, td, f.nullVector(dlpack.CUDA, rows), pre); err != nil {
		t.Fatal(err)
	}
	if d := pre.Ref().Dtype; d.Code != 2 || d.Bits != 32 {
		t.Errorf("dtype after the first Extend: %+v", d)
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// firstReason is the first line of a RAFT error text after its
// "file=... line=N: " location.
func firstReason(text string) string {
	line, _, _ := strings.Cut(text, "\n")
	if i := strings.Index(line, " line="); i >= 0 {
		if j := strings.Index(line[i:], ": "); j >= 0 {
			return strings.TrimSpace(line[i+j+2:])
		}
	}
	return strings.TrimSpace(line)
}
