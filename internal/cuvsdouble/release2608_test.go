package cuvsdouble_test

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

// The 26.08 build of the double: its functions, version, Dataset API and
// CAGRA on datasets, as c/src of v26.08.01 has them.

func newFixture2608(t *testing.T) *fixture {
	return newFixture(t, cuvsdouble.Release(cuvsdouble.Release2608))
}

func newCagra2608(t *testing.T) *cagraFixture {
	f := newFixture2608(t)
	c := &cagraFixture{fixture: f}
	c.params = capi.Must(f.lib.ParamsCreate("CagraIndexParams"))
	c.search = capi.Must(f.lib.ParamsCreate("CagraSearchParams"))
	c.idx = capi.Must(f.lib.CagraCreate())
	return c
}

func (c *cagraFixture) setDegrees2608(intermediate, degree int) {
	v := capi.GetCagraIndexParams2608(c.params)
	v.IntermediateGraphDegree, v.GraphDegree = intermediate, degree
	capi.SetCagraIndexParams2608(c.params, v)
}

// expectErr checks err is a failure whose text holds sub.
func expectErr(t *testing.T, err error, sub string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), sub) {
		t.Fatalf("error %v, want one with %q", err, sub)
	}
}

var only2606 = []string{"cuvsCagraSerialize", "cuvsCagraDeserialize",
	"cuvsKMeansParamsCreate_v2", "cuvsKMeansParamsDestroy_v2", "cuvsKMeansFit_v2", "cuvsKMeansPredict_v2"}
var only2608 = []string{
	"cuvsResourcesCreateWithMemoryTracking", "cuvsResourcesSetWorkspacePool",
	"cuvsRMMAsyncMemoryResourceEnable", "cuvsDatasetCreate", "cuvsDatasetMakePadded",
	"cuvsDatasetMakePaddedView", "cuvsDatasetMakeStandardView", "cuvsDatasetDestroy",
	"cuvsDatasetGetMemType", "cuvsDatasetGetLayout", "cuvsDatasetGetIsOwning", "cuvsDatasetGetDtype",
	"cuvsCagraIndexParamsFromDataset", "cuvsCagraUpdateDataset", "cuvsCagraSearchMultiPartition",
	"cuvsCagraSerializeGraph", "cuvsCagraSerializeGraphAndDataset", "cuvsCagraDeserializeGraph",
	"cuvsCagraDeserializeGraphAndDataset", "cuvsSelectK",
	"cuvsMultiGpuCagraUpdateDataset", "cuvsMultiGpuKMeansFit", // multi-GPU (dbl_mg.c)
}

func TestReleaseFunctions(t *testing.T) {
	f6 := newFixture(t, cuvsdouble.Release(cuvsdouble.Release2606))
	defer f6.close()
	f8 := newFixture2608(t)
	defer f8.close()
	fns6, fns8 := f6.ctl.Functions(), f8.ctl.Functions()
	if want := len(fns6) - len(only2606) + len(only2608); len(fns8) != want {
		t.Fatalf("26.08: %d functions, want %d", len(fns8), want)
	}
	for _, fn := range fns8 {
		if !f8.ctl.Has(fn) {
			t.Errorf("26.08: %s not exported", fn)
		}
	}
	for _, fn := range only2606 {
		if !f6.ctl.Has(fn) || f8.ctl.Has(fn) || slices.Contains(fns8, fn) {
			t.Errorf("%s: in 26.06 %v, in 26.08 %v", fn, f6.ctl.Has(fn), f8.ctl.Has(fn))
		}
	}
	for _, fn := range only2608 {
		if f6.ctl.Has(fn) || !f8.ctl.Has(fn) || !f8.ctl.CanFail(fn) {
			t.Errorf("%s: in 26.06 %v, in 26.08 %v", fn, f6.ctl.Has(fn), f8.ctl.Has(fn))
		}
	}
	// the functions both have, by the same names (signatures differ for some)
	for _, fn := range []string{"cuvsCagraBuild", "cuvsCagraExtend", "cuvsCagraMerge", "cuvsCagraSearch", "cuvsCagraIndexParamsCreate"} {
		if !f6.ctl.Has(fn) || !f8.ctl.Has(fn) {
			t.Errorf("%s missing", fn)
		}
	}
	// multi-GPU CAGRA in both (dbl_mg.c), multi-GPU k-means in 26.08 only
	if !f6.ctl.Has("cuvsMultiGpuCagraBuild") || !f8.ctl.Has("cuvsMultiGpuCagraBuild") || f6.ctl.Has("cuvsMultiGpuKMeansFit") || !f8.ctl.Has("cuvsMultiGpuKMeansFit") {
		t.Error("multi-GPU functions: wrong releases")
	}
	// k-means in both (dbl_kmeans_api.c)
	if !f6.ctl.Has("cuvsKMeansFit") || !f8.ctl.Has("cuvsKMeansFit") {
		t.Error("cuvsKMeansFit missing")
	}
}

func TestReleaseVersion(t *testing.T) {
	for _, r := range cuvsdouble.Releases() {
		f := newFixture(t, cuvsdouble.Release(r))
		ma, mi, pa, _ := cuvsdouble.ReleaseVersion(r)
		if a, b, c, err := f.lib.Version(); err != nil || a != ma || b != mi || c != pa {
			t.Fatalf("%s: version %d.%d.%d, %v; want %d.%d.%d", r, a, b, c, err, ma, mi, pa)
		}
		f.ctl.SetVersion(27, 2, 0)
		if a, b, c, _ := f.lib.Version(); a != 27 || b != 2 || c != 0 {
			t.Fatalf("%s: version %d.%d.%d after SetVersion", r, a, b, c)
		}
		f.must(f.lib.ResourcesDestroy(f.res, false))
		f.res = 0
		f.ctl.Reset()
		if a, b, c, _ := f.lib.Version(); a != ma || b != mi || c != pa {
			t.Fatalf("%s: version %d.%d.%d after Reset", r, a, b, c)
		}
		f.close()
	}
	if _, _, _, ok := cuvsdouble.ReleaseVersion("26.10"); ok {
		t.Fatal("26.10 known")
	}
	if _, _, err := cuvsdouble.BuildFile(cuvsdouble.Release("26.10")); err == nil || !strings.Contains(err.Error(), "26.06, 26.08") {
		t.Fatalf("BuildFile(26.10): %v", err)
	}
	if ma, mi, pa, _ := cuvsdouble.ReleaseVersion(cuvsdouble.Release2608); ma != 26 || mi != 8 || pa != 1 {
		t.Fatalf("26.08 reports %d.%d.%d", ma, mi, pa)
	}
}

func TestDatasetAPI(t *testing.T) {
	f := newFixture2608(t)
	defer f.close()
	l := f.lib
	const n = 10
	rng := newRand()

	// an empty handle, as cuvsDatasetCreate makes it
	d := capi.Must(l.DatasetCreate())
	if d.Addr() != 0 || capi.Must(l.DatasetGetMemType(d)) != capi.DatasetDevice ||
		capi.Must(l.DatasetGetLayout(d)) != capi.LayoutStandard || !capi.Must(l.DatasetGetIsOwning(d)) {
		t.Fatalf("empty dataset: addr %#x mem %d layout %d owning %v", d.Addr(), d.MemType(), d.Layout(), d.Owning())
	}
	f.must(l.DatasetDestroy(d))
	expectErr(t, l.DatasetCreateNullOut(), "cuvsDatasetCreate: output handle must not be null")
	f.must(l.DatasetDestroy(capi.Dataset{})) // NULL: nothing to do

	type tc struct {
		name       string
		kind, dev  int // memory and DLPack device
		dim        int
		call       func(*capi.Tensor) (capi.Dataset, error)
		err        string
		mem, lay   int
		owning     bool
		sameMemory bool // the dataset views the tensor's memory
	}
	padded := func(mem int) func(*capi.Tensor) (capi.Dataset, error) {
		return func(t *capi.Tensor) (capi.Dataset, error) { return l.DatasetMakePadded(f.res, t, mem) }
	}
	pview := func(t *capi.Tensor) (capi.Dataset, error) { return l.DatasetMakePaddedView(f.res, t) }
	sview := func(t *capi.Tensor) (capi.Dataset, error) { return l.DatasetMakeStandardView(f.res, t) }
	cases := []tc{
		{"padded device from host dim 7", capi.CPU, capi.CPU, 7, padded(capi.DatasetDevice), "", capi.DatasetDevice, capi.LayoutPadded, true, false},
		{"padded device from device dim 7", capi.CUDA, capi.CUDA, 7, padded(capi.DatasetDevice), "", capi.DatasetDevice, capi.LayoutPadded, true, false},
		{"padded device from pinned dim 8", capi.CUDAHost, capi.CUDAHost, 8, padded(capi.DatasetDevice), "", capi.DatasetDevice, capi.LayoutPadded, true, false},
		{"padded device from device dim 8", capi.CUDA, capi.CUDA, 8, padded(capi.DatasetDevice), "source is device and stride is already correct. Use make_device_padded_dataset_view()", 0, 0, false, false},
		{"padded host from host dim 8", capi.CPU, capi.CPU, 8, padded(capi.DatasetHost), "source stride is already correct. Use make_host_padded_dataset_view()", 0, 0, false, false},
		{"padded host from device dim 8", capi.CUDA, capi.CUDA, 8, padded(capi.DatasetHost), "", capi.DatasetHost, capi.LayoutPadded, true, false},
		{"padded, bad target", capi.CPU, capi.CPU, 7, padded(5), "cuvsDatasetMakePadded: invalid target memory type", 0, 0, false, false},
		{"padded view device dim 8", capi.CUDA, capi.CUDA, 8, pview, "", capi.DatasetDevice, capi.LayoutPadded, false, true},
		{"padded view host dim 4", capi.CPU, capi.CPU, 4, pview, "", capi.DatasetHost, capi.LayoutPadded, false, true},
		{"padded view device dim 7", capi.CUDA, capi.CUDA, 7, pview, "make_device_padded_dataset_view: stride is incorrect (required stride for alignment). Use make_device_padded_dataset()", 0, 0, false, false},
		{"padded view host dim 7", capi.CPU, capi.CPU, 7, pview, "make_host_padded_dataset_view: stride is incorrect", 0, 0, false, false},
		{"standard view device dim 7", capi.CUDA, capi.CUDA, 7, sview, "", capi.DatasetDevice, capi.LayoutStandard, false, true},
		{"standard view host dim 7", capi.CPU, capi.CPU, 7, sview, "", capi.DatasetHost, capi.LayoutStandard, false, true},
		{"standard view, unknown device", capi.CPU, 7 /* kDLOpenCL */, 7, sview, "cuvsDatasetMakeStandardView: unsupported tensor memory type", 0, 0, false, false},
	}
	for _, c := range cases {
		m := f.f32(c.kind, c.dev, n, c.dim, randomMatrix(rng, n, c.dim))
		ds, err := c.call(m.t)
		if c.err != "" {
			expectErr(t, err, c.err)
			if !ds.Nil() {
				t.Fatalf("%s: a dataset on failure", c.name)
			}
			f.drop(m)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		code, bits := capi.Must2(l.DatasetGetDtype(ds))
		if capi.Must(l.DatasetGetMemType(ds)) != c.mem || capi.Must(l.DatasetGetLayout(ds)) != c.lay ||
			capi.Must(l.DatasetGetIsOwning(ds)) != c.owning || code != capi.Float || bits != 32 || ds.Addr() == 0 {
			t.Fatalf("%s: mem %d layout %d owning %v dtype %d/%d", c.name, ds.MemType(), ds.Layout(), ds.Owning(), code, bits)
		}
		f.must(l.DatasetDestroy(ds))
		f.drop(m)
	}

	// dtype, nulls
	i32 := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 32, n, 4)
	_, err := l.DatasetMakePaddedView(f.res, i32.t)
	expectErr(t, err, "Unsupported dataset DLtensor dtype: 0 and bits: 32")
	_, err = l.DatasetMakePadded(f.res, i32.t, capi.DatasetDevice)
	expectErr(t, err, "Unsupported dataset DLtensor dtype: 0 and bits: 32")
	f.drop(i32)
	_, err = l.DatasetMakePadded(f.res, nil, capi.DatasetDevice)
	expectErr(t, err, "cuvsDatasetMakePadded: null input tensor")
	_, err = l.DatasetMakeStandardView(f.res, nil)
	expectErr(t, err, "cuvsDatasetMakeStandardView: null input tensor")
	_, err = l.DatasetGetMemType(capi.Dataset{})
	expectErr(t, err, "cuvsDatasetGetMemType: null dataset")

	// a padded copy holds the rows in rows of 8 floats, padding zeroed
	vals := randomMatrix(rng, n, 7)
	src := f.f32(capi.CPU, capi.CPU, n, 7, vals)
	pd := capi.Must(l.DatasetMakePadded(f.res, src.t, capi.DatasetDevice))
	f.drop(src) // copied: may go at once
	c := newCagraOn(f)
	f.must(l.CagraBuildDataset(f.res, c.params, pd, c.idx))
	view := capi.Must(l.CagraDataset(c.idx))
	// cuVS 26.08 describes the storage, [rows, row width] with no strides
	// (to_dlpack of the padded view's row_major matrix), not [rows, dim].
	if sh, st := view.Shape(), view.Strides(); !slices.Equal(sh, []int64{n, 8}) || len(st) != 0 {
		t.Fatalf("dataset view %v %v", sh, st)
	}
	rows := capi.CopyOut[float32](view.Data(), n*8)
	for i := 0; i < n; i++ {
		if !slices.Equal(rows[i*8:i*8+7], vals[i*7:i*7+7]) || rows[i*8+7] != 0 {
			t.Fatalf("row %d: %v", i, rows[i*8:i*8+8])
		}
	}
	view.CallDeleter()
	view.Free()
	c.closeIndex()
	f.must(l.DatasetDestroy(pd))
}

// newCagraOn adds CAGRA handles to a fixture.
func newCagraOn(f *fixture) *cagraFixture {
	c := &cagraFixture{fixture: f}
	c.params = capi.Must(f.lib.ParamsCreate("CagraIndexParams"))
	c.search = capi.Must(f.lib.ParamsCreate("CagraSearchParams"))
	c.idx = capi.Must(f.lib.CagraCreate())
	c.setDegrees2608(24, 12)
	return c
}

func (c *cagraFixture) closeIndex() {
	c.t.Helper()
	c.must(c.lib.CagraDestroy(c.idx))
	c.must(c.lib.ParamsDestroy("CagraSearchParams", c.search))
	c.must(c.lib.ParamsDestroy("CagraIndexParams", c.params))
}

func TestCagraIndexParams2608(t *testing.T) {
	f := newFixture2608(t)
	defer f.close()
	if capi.CagraIndexParams2608Size != 48 {
		t.Fatalf("26.08 params are %d bytes", capi.CagraIndexParams2608Size)
	}
	p := capi.Must(f.lib.ParamsCreate("CagraIndexParams"))
	v := capi.GetCagraIndexParams2608(p)
	if v.Metric != capi.L2Expanded || v.IntermediateGraphDegree != 128 || v.GraphDegree != 64 || v.BuildAlgo != capi.IvfPq || v.NNDescentNiter != 20 || v.GraphBuildParams == nil {
		t.Fatalf("defaults %+v", v)
	}
	// from_dataset: the degree given, 3/2 of it as intermediate, the metric
	// given, NN-Descent below 10^6 rows with 5 + build_quality iterations
	f.must(f.lib.FromDataset(p, 5000, 16, 32, capi.InnerProduct, 7))
	v = capi.GetCagraIndexParams2608(p)
	if v.Metric != capi.InnerProduct || v.IntermediateGraphDegree != 48 || v.GraphDegree != 32 || v.BuildAlgo != capi.NNDescent || v.NNDescentNiter != 12 || v.GraphBuildParams == nil {
		t.Fatalf("from dataset %+v", v)
	}
	// NN-Descent leaves graph_build_params (the IVF-PQ params) for Destroy to free
	v.BuildAlgo = capi.IvfPq
	capi.SetCagraIndexParams2608(p, v)
	expectErr(t, f.lib.FromDataset(nil, 10, 4, 8, capi.L2Expanded, 1), "invalid cuvsCagraIndexParams")
	f.expectViolations("invalid or destroyed cuvsCagraIndexParams")
	f.must(f.lib.ParamsDestroy("CagraIndexParams", p))
}

// build2608 builds c.idx on a padded device copy of data and returns the
// dataset (the index references it).
func (c *cagraFixture) build2608(data []float32, n, dim int) capi.Dataset {
	c.t.Helper()
	m := c.f32(capi.CPU, capi.CPU, n, dim, data)
	defer c.drop(m)
	ds := capi.Must(c.lib.DatasetMakePadded(c.res, m.t, capi.DatasetDevice))
	c.must(c.lib.CagraBuildDataset(c.res, c.params, ds, c.idx))
	return ds
}

func TestCagra2608BuildExtendSearch(t *testing.T) {
	c := newCagra2608(t)
	defer c.closeAll()
	const n, m, dim, nq, k = 150, 50, 7, 12, 8
	rng := newRand()
	data := randomMatrix(rng, n+m, dim)
	queries := randomMatrix(rng, nq, dim)
	c.setDegrees2608(24, 12)

	ds := c.build2608(data[:n*dim], n, dim)
	if size, _ := c.lib.CagraSize(c.idx); size != n {
		t.Fatalf("size %d", size)
	}
	q := c.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	defer c.drop(q)
	ids, d, err := c.searchInto(c.idx, q, k, 64, capi.Filter{})
	c.must(err)
	checkApprox(t, "built", data[:n*dim], n, dim, queries, ids, d, k, capi.L2Expanded, nil)
	want, _ := exactKNN(data[:n*dim], n, dim, queries, k, capi.L2Expanded, nil, false)
	if r := recall(ids, want, k); r < 0.9 {
		t.Fatalf("recall %.2f", r)
	}

	// extend: old and new rows concatenated in one device-padded dataset
	all := c.f32(capi.CPU, capi.CPU, n+m, dim, data)
	ext := capi.Must(c.lib.DatasetMakePadded(c.res, all.t, capi.DatasetDevice))
	c.drop(all)
	ep := capi.Must(c.lib.ParamsCreate("CagraExtendParams"))
	defer func() { c.must(c.lib.ParamsDestroy("CagraExtendParams", ep)) }()
	expectErr(t, c.lib.CagraExtendDataset(c.res, ep, ext, n-1, c.idx), "cagra::extend: new_start_row (149) must equal the current index size (150)")
	expectErr(t, c.lib.CagraExtendDataset(c.res, ep, ds, n, c.idx), "cagra::extend: extended_dataset (150 rows) must be larger than the current index size (150)")
	hostAll := c.f32(capi.CPU, capi.CPU, n+m, dim, data)
	hostExt := capi.Must(c.lib.DatasetMakePadded(c.res, hostAll.t, capi.DatasetHost))
	c.drop(hostAll)
	expectErr(t, c.lib.CagraExtendDataset(c.res, ep, hostExt, n, c.idx), "cuvsCagraExtend: extended dataset must be a device-padded dataset view")
	c.must(c.lib.DatasetDestroy(hostExt))
	c.must(c.lib.CagraExtendDataset(c.res, ep, ext, n, c.idx))
	c.must(c.lib.DatasetDestroy(ds)) // the index now references ext only
	if size, _ := c.lib.CagraSize(c.idx); size != n+m {
		t.Fatalf("size after extend %d", size)
	}
	ids, d, err = c.searchInto(c.idx, q, k, 32, capi.Filter{})
	c.must(err)
	checkApprox(t, "extended", data, n+m, dim, queries, ids, d, k, capi.L2Expanded, nil)
	want, _ = exactKNN(data, n+m, dim, queries, k, capi.L2Expanded, nil, false)
	if r := recall(ids, want, k); r < 0.9 {
		t.Fatalf("recall after extend %.2f", r)
	}

	// a dataset freed under the index: using it is a violation
	c.must(c.lib.DatasetDestroy(ext))
	c.expectViolations("cuvsDatasetDestroy of a dataset whose rows 1 CAGRA index(es) still reference")
	_, _, err = c.searchInto(c.idx, q, k, 32, capi.Filter{})
	expectErr(t, err, "the index's dataset memory was freed")
	c.expectViolations("CAGRA index used after the memory holding its dataset was freed")
}

func TestCagra2608ExtendWithOtherOldRows(t *testing.T) {
	c := newCagra2608(t)
	defer c.closeAll()
	const n, m, dim = 60, 20, 8
	rng := newRand()
	data := randomMatrix(rng, n+m, dim)
	ds := c.build2608(data[:n*dim], n, dim)
	defer func() { c.must(c.lib.DatasetDestroy(ds)) }()
	// the caller forgot the old rows: zeros where they belong
	wrong := append(make([]float32, n*dim), data[n*dim:]...)
	all := c.f32(capi.CPU, capi.CPU, n+m, dim, wrong)
	ext := capi.Must(c.lib.DatasetMakePadded(c.res, all.t, capi.DatasetDevice))
	c.drop(all)
	ep := capi.Must(c.lib.ParamsCreate("CagraExtendParams"))
	c.must(c.lib.CagraExtendDataset(c.res, ep, ext, n, c.idx))
	c.expectViolations("row 0 of extended_dataset differs from the index's row 0")
	c.must(c.lib.ParamsDestroy("CagraExtendParams", ep))
	c.must(c.lib.CagraDestroy(c.idx))
	c.idx = capi.Must(c.lib.CagraCreate())
	c.must(c.lib.DatasetDestroy(ext))
}

func TestCagra2608Layouts(t *testing.T) {
	c := newCagra2608(t)
	defer c.closeAll()
	const n, dim, nq, k = 80, 8, 5, 4
	rng := newRand()
	data := randomMatrix(rng, n, dim)
	queries := randomMatrix(rng, nq, dim)
	q := c.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	defer c.drop(q)

	// a host view: a host index, which search refuses until a device
	// padded dataset is attached
	host := c.f32(capi.CPU, capi.CPU, n, dim, data)
	defer c.drop(host)
	hv := capi.Must(c.lib.DatasetMakeStandardView(c.res, host.t))
	c.must(c.lib.CagraBuildDataset(c.res, c.params, hv, c.idx))
	view := capi.Must(c.lib.CagraDataset(c.idx))
	if view.Device() != capi.CPU || view.Data() != host.b.p {
		t.Fatalf("a host index's dataset: device %d, data %p (rows at %p)", view.Device(), view.Data(), host.b.p)
	}
	view.CallDeleter()
	view.Free()
	gview := capi.Must(c.lib.CagraGraph(c.idx))
	if gview.Device() != capi.CUDA {
		t.Fatalf("graph on device %d", gview.Device())
	}
	gview.CallDeleter()
	gview.Free()
	_, _, err := c.searchInto(c.idx, q, k, 64, capi.Filter{})
	expectErr(t, err, "cuvsCagraSearch: index must be device-padded. For standard indices, call cuvsCagraUpdateDataset first.")
	ep := capi.Must(c.lib.ParamsCreate("CagraExtendParams"))
	expectErr(t, c.lib.CagraExtendDataset(c.res, ep, hv, n, c.idx), "cuvsCagraExtend: only device_padded indices are extendable")
	c.must(c.lib.ParamsDestroy("CagraExtendParams", ep))
	expectErr(t, c.lib.CagraUpdateDataset(c.res, hv, c.idx), "cuvsCagraUpdateDataset: dataset view must be device padded")
	few := c.f32(capi.CUDA, capi.CUDA, n-1, dim, data[:(n-1)*dim])
	fv := capi.Must(c.lib.DatasetMakePaddedView(c.res, few.t))
	expectErr(t, c.lib.CagraUpdateDataset(c.res, fv, c.idx), "Padded dataset row count must match the index size")
	c.must(c.lib.DatasetDestroy(fv))
	c.drop(few)

	dev := c.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer c.drop(dev)
	dv := capi.Must(c.lib.DatasetMakePaddedView(c.res, dev.t))
	c.must(c.lib.CagraUpdateDataset(c.res, dv, c.idx))
	ids, d, err := c.searchInto(c.idx, q, k, 64, capi.Filter{})
	c.must(err)
	checkApprox(t, "after update", data, n, dim, queries, ids, d, k, capi.L2Expanded, nil)
	c.must(c.lib.DatasetDestroy(hv))

	// a view references the caller's memory: freeing it under the index is
	// the 26.06 rule (cuvsRMMFree while referenced)
	short := c.f32(capi.CUDA, capi.CUDA, n-1, dim, data[:(n-1)*dim])
	sv := capi.Must(c.lib.DatasetMakePaddedView(c.res, short.t))
	expectErr(t, c.lib.CagraUpdateDataset(c.res, sv, c.idx), "the dataset has 79 rows, the index 80")
	c.expectViolations("cuvsCagraUpdateDataset with 79 rows on an index of 80")
	c.must(c.lib.DatasetDestroy(sv))
	c.drop(short)

	// a build replaces the index the handle held (26.06 leaked it)
	c.must(c.lib.CagraBuildDataset(c.res, c.params, dv, c.idx))
	c.must(c.lib.CagraBuildDataset(c.res, c.params, dv, c.idx))
	if got := c.ctl.Counters()["cagra_index_data"]; got.Live() != 1 {
		t.Fatalf("index data %+v", got)
	}
	c.must(c.lib.CagraDestroy(c.idx))
	c.idx = capi.Must(c.lib.CagraCreate())
	c.must(c.lib.DatasetDestroy(dv))

	// refusals of Build
	expectErr(t, c.lib.CagraBuildDataset(c.res, c.params, capi.Dataset{}, c.idx), "cuvsCagraBuild: null dataset view")
	empty := capi.Must(c.lib.DatasetCreate())
	expectErr(t, c.lib.CagraBuildDataset(c.res, c.params, empty, c.idx), "cuvsCagraBuild: null dataset view storage")
	c.must(c.lib.DatasetDestroy(empty))
}

func TestCagra2608MergeSerialize(t *testing.T) {
	c := newCagra2608(t)
	defer c.closeAll()
	const n1, n2, dim, nq, k = 70, 50, 7, 10, 6
	rng := newRand()
	data := randomMatrix(rng, n1+n2, dim)
	queries := randomMatrix(rng, nq, dim)
	q := c.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	defer c.drop(q)
	ds1 := c.build2608(data[:n1*dim], n1, dim)
	idx1 := c.idx
	c.idx = capi.Must(c.lib.CagraCreate())
	ds2 := c.build2608(data[n1*dim:], n2, dim)
	idx2 := c.idx
	c.idx = capi.Must(c.lib.CagraCreate())

	// merge into an empty dataset handle, which gets the merged rows
	merged := capi.Must(c.lib.DatasetCreate())
	notEmpty := ds1
	expectErr(t, c.lib.CagraMergeDataset(c.res, c.params, []capi.Index{idx1, idx2}, capi.Filter{}, notEmpty, c.idx), "Merged dataset handle must be empty")
	c.must(c.lib.CagraMergeDataset(c.res, c.params, []capi.Index{idx1, idx2}, capi.Filter{}, merged, c.idx))
	if merged.Addr() == 0 || !merged.Owning() || merged.MemType() != capi.DatasetDevice || merged.Layout() != capi.LayoutPadded {
		t.Fatalf("merged dataset: addr %#x owning %v mem %d layout %d", merged.Addr(), merged.Owning(), merged.MemType(), merged.Layout())
	}
	for _, x := range []capi.Index{idx1, idx2} {
		c.must(c.lib.CagraDestroy(x))
	}
	c.must(c.lib.DatasetDestroy(ds1))
	c.must(c.lib.DatasetDestroy(ds2))
	ids, d, err := c.searchInto(c.idx, q, k, 64, capi.Filter{})
	c.must(err)
	checkApprox(t, "merged", data, n1+n2, dim, queries, ids, d, k, capi.L2Expanded, nil)
	want, _ := exactKNN(data, n1+n2, dim, queries, k, capi.L2Expanded, nil, false)
	if r := recall(ids, want, k); r < 0.9 {
		t.Fatalf("merged recall %.2f", r)
	}

	// graph and dataset round trip: the same results
	dir := t.TempDir()
	full, graph := filepath.Join(dir, "full.cagra"), filepath.Join(dir, "graph.cagra")
	c.must(c.lib.CagraSerializeGraph(c.res, full, c.idx, true))
	c.must(c.lib.CagraSerializeGraph(c.res, graph, c.idx, false))
	back := capi.Must(c.lib.CagraCreate())
	bds := capi.Must(c.lib.CagraDeserializeGraphAndDataset(c.res, full, back))
	if bds.Nil() || !bds.Owning() || bds.MemType() != capi.DatasetDevice || bds.Layout() != capi.LayoutPadded {
		t.Fatal("deserialized dataset")
	}
	ids2, d2, err := c.searchInto(back, q, k, 64, capi.Filter{})
	c.must(err)
	if !slices.Equal(ids, ids2) || !slices.Equal(d, d2) {
		t.Fatalf("round trip: %v %v, want %v %v", ids2, d2, ids, d)
	}
	// the graph alone: no dataset until one is attached
	g := capi.Must(c.lib.CagraCreate())
	c.must(c.lib.CagraDeserializeGraph(c.res, graph, g))
	if dims, _ := c.lib.CagraDims(g); dims != 0 { // index(res)'s empty dataset
		t.Fatalf("graph-only index of dimension %d", dims)
	}
	_, _, err = c.searchInto(g, q, k, 64, capi.Filter{})
	expectErr(t, err, "Number of query dimensions should equal number of dimensions in the index.")
	_, err = c.lib.CagraDeserializeGraphAndDataset(c.res, graph, capi.Must(c.lib.CagraCreate()))
	expectErr(t, err, "cuvsCagraDeserializeGraphAndDataset: serialized index has no dataset")
	c.allowLeak("cagra_index", 1) // the handle above, never destroyed
	c.must(c.lib.CagraUpdateDataset(c.res, bds, g))
	ids3, d3, err := c.searchInto(g, q, k, 64, capi.Filter{})
	c.must(err)
	if !slices.Equal(ids, ids3) || !slices.Equal(d, d3) {
		t.Fatal("graph + attached dataset: other results")
	}
	c.must(c.lib.CagraDestroy(g))
	c.must(c.lib.CagraDestroy(back))
	c.must(c.lib.DatasetDestroy(bds))
	c.must(c.lib.CagraDestroy(c.idx)) // before the dataset it references
	c.idx = capi.Must(c.lib.CagraCreate())
	c.must(c.lib.DatasetDestroy(merged))
	// an index never built: cuVS dispatches on its dtype first
	expectErr(t, c.lib.CagraSerializeGraph(c.res, filepath.Join(dir, "x"), capi.Must(c.lib.CagraCreate()), true), "Unsupported index dtype: 0 and bits: 0")
	c.allowLeak("cagra_index", 1)

	// a file of 26.06 is refused as cuVS 26.08 refuses version 5
	f6 := newCagra(t)
	defer f6.closeAll()
	h := f6.f32(capi.CPU, capi.CPU, n1, dim, data[:n1*dim])
	f6.setDegrees(24, 12)
	f6.must(f6.lib.CagraBuild(f6.res, f6.params, h.t, f6.idx))
	f6.drop(h)
	old := filepath.Join(dir, "v5.cagra")
	f6.must(f6.lib.CagraSerialize(f6.res, old, f6.idx, true))
	x := capi.Must(c.lib.CagraCreate())
	_, err = c.lib.CagraDeserializeGraphAndDataset(c.res, old, x)
	expectErr(t, err, "serialization version mismatch, expected 6, got 5")
	// and 26.06 refuses 26.08's (version 6)
	back6 := capi.Must(f6.lib.CagraCreate())
	expectErr(t, f6.lib.CagraDeserialize(f6.res, full, back6), "serialization version mismatch, expected 5, got 6")
	f6.must(f6.lib.CagraDestroy(back6))
	expectErr(t, c.lib.CagraDeserializeGraph(c.res, filepath.Join(dir, "missing"), x), "Cannot open file")
	if err := os.WriteFile(filepath.Join(dir, "junk"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	expectErr(t, c.lib.CagraDeserializeGraph(c.res, filepath.Join(dir, "junk"), x), "Invalid or truncated index header")
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(b)
	bad[12] = 77 // the metric
	if err := os.WriteFile(filepath.Join(dir, "metric"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	expectErr(t, c.lib.CagraDeserializeGraph(c.res, filepath.Join(dir, "metric"), x), "cagra::deserialize: invalid metric value 77")
	if err := os.WriteFile(filepath.Join(dir, "long"), append(b, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	expectErr(t, c.lib.CagraDeserializeGraph(c.res, filepath.Join(dir, "long"), x), "has bytes after the index")
	if err := os.WriteFile(filepath.Join(dir, "short"), b[:len(b)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	expectErr(t, c.lib.CagraDeserializeGraph(c.res, filepath.Join(dir, "short"), x), "is truncated")
	c.must(c.lib.CagraDestroy(x))
}

func TestCagra2608MultiPartition(t *testing.T) {
	c := newCagra2608(t)
	defer c.closeAll()
	const n1, n2, dim, nq, k = 90, 60, 8, 10, 6
	rng := newRand()
	data := randomMatrix(rng, n1+n2, dim)
	queries := randomMatrix(rng, nq, dim)
	q := c.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	defer c.drop(q)
	// one graph degree for both partitions: cuVS refuses different ones
	// (the defaults would give 64 and 59)
	c.setDegrees2608(32, 16)
	ds1 := c.build2608(data[:n1*dim], n1, dim)
	p1 := c.idx
	c.idx = capi.Must(c.lib.CagraCreate())
	ds2 := c.build2608(data[n1*dim:], n2, dim)
	p2 := c.idx
	c.idx = capi.Must(c.lib.CagraCreate())
	defer func() {
		c.must(c.lib.CagraDestroy(p1))
		c.must(c.lib.CagraDestroy(p2))
		c.must(c.lib.DatasetDestroy(ds1))
		c.must(c.lib.DatasetDestroy(ds2))
	}()
	pids := c.zeros(capi.CUDA, capi.CUDA, capi.UInt, 32, nq, k)
	defer c.drop(pids)
	nb := c.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, nq, k)
	defer c.drop(nb)
	dist := c.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
	defer c.drop(dist)

	// partition 1 filtered to its even rows
	bits := c.words(bitsetOf(n2, func(i int) bool { return i%2 == 0 }))
	defer c.drop(bits)
	filters := []capi.Filter{{}, {Words: bits.t, Type: capi.Bitset}}
	c.must(c.lib.CagraSearchMultiPartition(c.res, c.search, []capi.Index{p1, p2}, q.t, pids.t, nb.t, dist.t, filters))
	gotP := capi.CopyOut[uint32](pids.b.p, nq*k)
	gotN := capi.CopyOut[int64](nb.b.p, nq*k)
	global := make([]int64, nq*k)
	for i := range gotN {
		if gotP[i] > 1 {
			t.Fatalf("partition id %d", gotP[i])
		}
		global[i] = gotN[i] + int64(gotP[i])*n1
		if gotP[i] == 1 && gotN[i]%2 != 0 {
			t.Fatalf("filtered row %d of partition 1 returned", gotN[i])
		}
	}
	allowed := func(q, i int) bool { return i < n1 || (i-n1)%2 == 0 }
	want, _ := exactKNN(data, n1+n2, dim, queries, k, capi.L2Expanded, allowed, false)
	checkApprox(t, "multi-partition", data, n1+n2, dim, queries, global, capi.CopyOut[float32](dist.b.p, nq*k), k, capi.L2Expanded, func(i int) bool { return allowed(0, i) })
	if r := recall(global, want, k); r < 0.9 {
		t.Fatalf("multi-partition recall %.2f", r)
	}

	// refusals
	expectErr(t, c.lib.CagraSearchMultiPartitionN(c.res, c.search, 0, []capi.Index{p1}, q.t, pids.t, nb.t, dist.t), "num_partitions must be > 0")
	expectErr(t, c.lib.CagraSearchMultiPartitionN(c.res, c.search, 1, nil, q.t, pids.t, nb.t, dist.t), "All pointer arguments must be non-null")
	expectErr(t, c.lib.CagraSearchMultiPartition(c.res, c.search, []capi.Index{p1, c.idx}, q.t, pids.t, nb.t, dist.t, nil), "Index at position 1 is null or not built")
	bm := []capi.Filter{{Words: bits.t, Type: capi.Bitmap}, {}}
	expectErr(t, c.lib.CagraSearchMultiPartition(c.res, c.search, []capi.Index{p1, p2}, q.t, pids.t, nb.t, dist.t, bm), "Unsupported filter type for multi-partition search (partition 0): 2")
	host := c.f32(capi.CPU, capi.CPU, n1, dim, data[:n1*dim])
	defer c.drop(host)
	hv := capi.Must(c.lib.DatasetMakeStandardView(c.res, host.t))
	c.must(c.lib.CagraBuildDataset(c.res, c.params, hv, c.idx))
	expectErr(t, c.lib.CagraSearchMultiPartition(c.res, c.search, []capi.Index{p1, c.idx}, q.t, pids.t, nb.t, dist.t, nil), "every partition must hold a device padded dataset; attach one via cuvsCagraUpdateDataset (partition 1)")
	c.must(c.lib.CagraDestroy(c.idx))
	c.idx = capi.Must(c.lib.CagraCreate())
	c.must(c.lib.DatasetDestroy(hv))
}

func TestSelectK(t *testing.T) {
	f := newFixture2608(t)
	defer f.close()
	const n, k = 40, 7
	rng := newRand()
	vals := randomMatrix(rng, 1, n)
	in := f.f32(capi.CUDA, capi.CUDA, 1, n, vals)
	defer f.drop(in)
	ov := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 1, k)
	defer f.drop(ov)
	oi := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, 1, k)
	defer f.drop(oi)
	f.must(f.lib.SelectK(f.res, in.t, ov.t, oi.t))
	gotV, gotI := capi.CopyOut[float32](ov.b.p, k), capi.CopyOut[int64](oi.b.p, k)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return vals[order[a]] < vals[order[b]] })
	want := map[int64]bool{}
	for _, i := range order[:k] {
		want[int64(i)] = true
	}
	for j := range gotI { // a set: cuVS does not sort the k it selects
		if !want[gotI[j]] || gotV[j] != vals[gotI[j]] {
			t.Fatalf("selected %v %v, want the positions %v", gotI, gotV, order[:k])
		}
		delete(want, gotI[j])
	}
	big := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 1, n+1)
	defer f.drop(big)
	bigI := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, 1, n+1)
	defer f.drop(bigI)
	expectErr(t, f.lib.SelectK(f.res, in.t, big.t, bigI.t), "k passed to cuvsSelectK must not exceed the input length")
	expectErr(t, f.lib.SelectK(f.res, in.t, ov.t, bigI.t), "out_val and out_idx passed to cuvsSelectK must have the same length")
	two := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 2, n)
	defer f.drop(two)
	expectErr(t, f.lib.SelectK(f.res, two.t, ov.t, oi.t), "cuvsSelectK only supports a single row (batch_size == 1)")
	expectErr(t, f.lib.SelectK(f.res, in.t, ov.t, ov.t), "code mismatch")
	expectErr(t, f.lib.SelectK(f.res, nil, ov.t, oi.t), "Tensors passed to cuvsSelectK must not be null")
	host := f.f32(capi.CPU, capi.CPU, 1, n, vals)
	defer f.drop(host)
	expectErr(t, f.lib.SelectK(f.res, host.t, ov.t, oi.t), "device_type mismatch")
}

func TestResources2608(t *testing.T) {
	f := newFixture2608(t)
	defer f.close()
	path := filepath.Join(t.TempDir(), "mem.csv")
	r := capi.Must(f.lib.ResourcesCreateWithMemoryTracking(path, 10))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("tracking file: %v", err)
	}
	f.must(f.lib.SetWorkspacePool(r, 1<<20))
	f.must(f.lib.ResourcesDestroy(r, false))
	_, err := f.lib.ResourcesCreateWithMemoryTracking("", 10)
	expectErr(t, err, "csv_path must be a non-empty string")
	_, err = f.lib.ResourcesCreateWithMemoryTracking(path, -1)
	expectErr(t, err, "sample_interval_ms must be >= 0")
	expectErr(t, f.lib.SetWorkspacePool(capi.Res(12345), 1), "invalid cuvsResources_t")
	f.expectViolations("")

	// the async resource replaces the current one: memory of the previous
	// one freed after is a violation, as after PoolMemoryResourceEnable
	p := capi.Must(f.lib.RMMAlloc(f.res, 64))
	f.must(f.lib.AsyncMemoryResourceEnable())
	f.must(f.lib.RMMFree(f.res, p, 64))
	f.expectViolations("after the memory resource was changed")
	f.must(f.lib.PoolReset())
}

// The 26.06 build keeps 26.06's functions (and the 26.08 functions are not
// there): existing tests run against it.
func TestDefaultReleaseIs2606(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	if a, b, _, _ := f.lib.Version(); a != 26 || b != 6 {
		t.Fatalf("default build is %d.%d", a, b)
	}
	if f.ctl.Has("cuvsDatasetCreate") || !f.ctl.Has("cuvsCagraSerialize") {
		t.Fatal("default build is not 26.06")
	}
}

func TestCagra2608FromArgs(t *testing.T) {
	c := newCagra2608(t)
	defer c.closeAll()
	const n, deg, nq, k = 40, 6, 4, 3
	rng := newRand()
	g := make([]uint32, n*deg)
	for i := range g {
		g[i] = uint32((i/deg + 1 + i%deg) % n)
	}
	graph := c.zeros(capi.CUDA, capi.CUDA, capi.UInt, 32, n, deg)
	defer c.drop(graph)
	capi.CopyIn(graph.b.p, g)
	for _, dim := range []int{8, 7} {
		data := randomMatrix(rng, n, dim)
		host := c.f32(capi.CPU, capi.CPU, n, dim, data)
		expectErr(t, c.lib.CagraFromArgs(c.res, capi.L2Expanded, graph.t, host.t, c.idx), "cuvsCagraIndexFromArgs: host dataset is unsupported")
		c.drop(host)
		dev := c.f32(capi.CUDA, capi.CUDA, n, dim, data)
		c.must(c.lib.CagraFromArgs(c.res, capi.L2Expanded, graph.t, dev.t, c.idx))
		q := c.f32(capi.CUDA, capi.CUDA, nq, dim, randomMatrix(rng, nq, dim))
		_, _, err := c.searchInto(c.idx, q, k, 64, capi.Filter{})
		if dim == 8 {
			c.must(err) // rows of 32 bytes: a device-padded index on the caller's rows
		} else {
			expectErr(t, err, "cuvsCagraSearch: index must be device-padded")
		}
		c.drop(q)
		c.must(c.lib.CagraDestroy(c.idx)) // before the rows it references
		c.idx = capi.Must(c.lib.CagraCreate())
		c.drop(dev)
	}
}

// In strict device mode an owning dataset's rows are device memory of the
// library's: a view of them (cuvsCagraIndexGetDataset) passes as a device
// tensor.
func TestCagra2608StrictDatasetStorage(t *testing.T) {
	c := newCagra2608(t)
	defer c.closeAll()
	const n, dim, k = 30, 8, 3
	data := randomMatrix(newRand(), n, dim)
	ds := c.build2608(data, n, dim)
	c.ctl.SetStrictDevice(true)
	defer c.ctl.SetStrictDevice(false)
	view := capi.Must(c.lib.CagraDataset(c.idx))
	q := matrix{t: view, rows: n, cols: dim}
	ids, _, err := c.searchInto(c.idx, q, k, 64, capi.Filter{})
	c.must(err)
	for i := 0; i < n; i++ {
		if ids[i*k] != int64(i) {
			t.Fatalf("row %d finds %v first", i, ids[i*k:i*k+k])
		}
	}
	view.CallDeleter()
	view.Free()
	c.must(c.lib.CagraDestroy(c.idx))
	c.idx = capi.Must(c.lib.CagraCreate())
	c.must(c.lib.DatasetDestroy(ds))
}

// TestWildcardFaults2608 makes each call of a 26.08 round trip through the
// Dataset API fail in turn (build, extend, search, serialize, deserialize):
// whatever fails, the handles the sequence made are released.
func TestWildcardFaults2608(t *testing.T) {
	f := newFixture2608(t)
	defer f.close()
	const n, m, dim = 40, 10, 8
	data := randomMatrix(newRand(), n+m, dim)
	old := f.f32(capi.CPU, capi.CPU, n, dim, data[:n*dim])
	defer f.drop(old)
	all := f.f32(capi.CUDA, capi.CUDA, n+m, dim, data)
	defer f.drop(all)
	q := f.f32(capi.CUDA, capi.CUDA, 2, dim, data[:2*dim])
	defer f.drop(q)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.UInt, 32, 2, 4)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 2, 4)
	defer f.drop(d)
	path := filepath.Join(t.TempDir(), "idx")

	retry := func(fn func() error) {
		if fn() != nil {
			_ = fn()
		}
	}
	sequence := func() error {
		p, err := f.lib.ParamsCreate("CagraIndexParams")
		if err != nil {
			return err
		}
		defer retry(func() error { return f.lib.ParamsDestroy("CagraIndexParams", p) })
		v := capi.GetCagraIndexParams2608(p)
		v.IntermediateGraphDegree, v.GraphDegree = 16, 8
		capi.SetCagraIndexParams2608(p, v)
		sp, err := f.lib.ParamsCreate("CagraSearchParams")
		if err != nil {
			return err
		}
		defer retry(func() error { return f.lib.ParamsDestroy("CagraSearchParams", sp) })
		ep, err := f.lib.ParamsCreate("CagraExtendParams")
		if err != nil {
			return err
		}
		defer retry(func() error { return f.lib.ParamsDestroy("CagraExtendParams", ep) })
		ds, err := f.lib.DatasetMakePadded(f.res, old.t, capi.DatasetDevice)
		if err != nil {
			return err
		}
		defer retry(func() error { return f.lib.DatasetDestroy(ds) })
		ext, err := f.lib.DatasetMakePaddedView(f.res, all.t)
		if err != nil {
			return err
		}
		defer retry(func() error { return f.lib.DatasetDestroy(ext) })
		idx, err := f.lib.CagraCreate()
		if err != nil {
			return err
		}
		defer retry(func() error { return f.lib.CagraDestroy(idx) }) // before the datasets
		if err := f.lib.CagraBuildDataset(f.res, p, ds, idx); err != nil {
			return err
		}
		if err := f.lib.CagraExtendDataset(f.res, ep, ext, n, idx); err != nil {
			return err
		}
		if err := f.lib.CagraSearch(f.res, sp, idx, q.t, nb.t, d.t, capi.Filter{}); err != nil {
			return err
		}
		if err := f.lib.CagraSerializeGraph(f.res, path, idx, true); err != nil {
			return err
		}
		back, err := f.lib.CagraCreate()
		if err != nil {
			return err
		}
		bds, err := f.lib.CagraDeserializeGraphAndDataset(f.res, path, back)
		if err == nil {
			defer retry(func() error { return f.lib.DatasetDestroy(bds) })
		}
		defer retry(func() error { return f.lib.CagraDestroy(back) })
		return err
	}
	base := f.ctl.Counters()
	for i := 0; ; i++ {
		f.must(f.ctl.Fail(cuvsdouble.Fault{Func: cuvsdouble.AnyFunction, Skip: i, Text: "injected"}))
		err := sequence()
		hit := f.ctl.PendingFaults() == 0
		f.ctl.ClearFaults()
		if got := f.ctl.Counters(); !equalLive(got, base) {
			t.Fatalf("failing call %d: counters\n%v\nwant\n%v", i, got, base)
		}
		if !hit {
			if err != nil {
				t.Fatalf("sequence failed without a fault: %v", err)
			}
			if i < 12 {
				t.Fatalf("only %d calls", i)
			}
			break
		}
		if err != nil && !strings.Contains(err.Error(), "injected") {
			t.Fatalf("failing call %d: %v", i, err)
		}
	}
	if v := f.ctl.Violations(); len(v) > 0 {
		t.Fatal(v)
	}
}

// Inner product: the partitions' results merge larger first.
func TestCagra2608MultiPartitionInnerProduct(t *testing.T) {
	c := newCagra2608(t)
	defer c.closeAll()
	const n, dim, nq, k = 60, 8, 6, 5
	rng := newRand()
	data := randomMatrix(rng, 2*n, dim)
	queries := randomMatrix(rng, nq, dim)
	v := capi.GetCagraIndexParams2608(c.params)
	v.Metric, v.IntermediateGraphDegree, v.GraphDegree = capi.InnerProduct, 24, 12
	capi.SetCagraIndexParams2608(c.params, v)
	ds1 := c.build2608(data[:n*dim], n, dim)
	p1 := c.idx
	c.idx = capi.Must(c.lib.CagraCreate())
	ds2 := c.build2608(data[n*dim:], n, dim)
	p2 := c.idx
	c.idx = capi.Must(c.lib.CagraCreate())
	q := c.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	pids := c.zeros(capi.CUDA, capi.CUDA, capi.UInt, 32, nq, k)
	nb := c.zeros(capi.CUDA, capi.CUDA, capi.UInt, 32, nq, k)
	dist := c.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
	c.must(c.lib.CagraSearchMultiPartition(c.res, c.search, []capi.Index{p1, p2}, q.t, pids.t, nb.t, dist.t, nil))
	gotP, gotN := capi.CopyOut[uint32](pids.b.p, nq*k), capi.CopyOut[uint32](nb.b.p, nq*k)
	global := make([]int64, nq*k)
	for i := range global {
		global[i] = int64(gotN[i]) + int64(gotP[i])*n
	}
	checkApprox(t, "inner product", data, 2*n, dim, queries, global, capi.CopyOut[float32](dist.b.p, nq*k), k, capi.InnerProduct, nil)
	want, _ := exactKNN(data, 2*n, dim, queries, k, capi.InnerProduct, nil, false)
	if r := recall(global, want, k); r < 0.8 {
		t.Fatalf("recall %.2f", r)
	}
	for _, m := range []matrix{q, pids, nb, dist} {
		c.drop(m)
	}
	c.must(c.lib.CagraDestroy(p1))
	c.must(c.lib.CagraDestroy(p2))
	c.must(c.lib.DatasetDestroy(ds1))
	c.must(c.lib.DatasetDestroy(ds2))
}
