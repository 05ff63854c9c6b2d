package ivfpq_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// calls snapshots the double's call counts, to prove that a refusal made
// no C call.
func calls() map[string]int64 {
	ctl := safetest.Control()
	if ctl == nil {
		return nil // another library: no call counts
	}
	m := map[string]int64{}
	for _, fn := range ctl.Functions() {
		m[fn] = ctl.Calls(fn)
	}
	return m
}

// called lists the functions called since before.
func called(before map[string]int64) []string {
	var out []string
	for fn, n := range calls() {
		if n != before[fn] {
			out = append(out, fn)
		}
	}
	slices.Sort(out)
	return out
}

// Every documented range and tensor rule is checked in Go, before any C
// call, with an *safe.ArgError naming the argument.
func TestValidation(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	flatP := params(t)
	flatP.CodesLayout = ivfpq.Flat
	flat := build(t, f.res, f.dataset, flatP)
	hostQ := hostMatrix(t, slices.Clone(f.qs), nq, dim)
	q64 := newDevice[float64](t, f.res, nq, dim)
	q16 := newDevice[uint16](t, f.res, nq, dim)
	narrow := newDevice[float32](t, f.res, nq, dim-1)
	n32 := newDevice[uint32](t, f.res, nq, k)
	d64 := newDevice[float64](t, f.res, nq, k)
	wideD := newDevice[float32](t, f.res, nq, k+1)
	bigN := newDevice[int64](t, f.res, nq, rows+1)
	bigD := newDevice[float32](t, f.res, nq, rows+1)
	f64 := newDevice[float64](t, f.res, rows, dim)
	few := newDevice[float32](t, f.res, nLists-1, dim)
	empty := newDevice[float32](t, f.res, 0, dim)
	ids := deviceMatrixVec(t, f.res, make([]int64, nq))
	shortIDs := deviceMatrixVec(t, f.res, make([]int64, nq-1))
	hostIDs := dlpack.NewHostVector(make([]int64, nq))
	idsI32 := newDevice[int32](t, f.res, nq, 1)
	labels := vector(t, newDevice[uint32](t, f.res, nq, 1))
	labels64 := vector(t, newDevice[int64](t, f.res, nq, 1))
	codes := newDevice[uint8](t, f.res, nq, int(idx.CodeBytes()))
	wideCodes := newDevice[uint8](t, f.res, nq, int(idx.CodeBytes())+1)
	rowsCodes := newDevice[uint8](t, f.res, rows, int(idx.CodeBytes()))
	pqc, _ := idx.PQCenters()
	cen, _ := idx.CentersPadded()
	crot, _ := idx.CentersRot()
	rot, _ := idx.RotationMatrix()
	centers := newDevice[float32](t, f.res, nLists, dim) // NLists × Dim: not padded

	sp := func(change func(*ivfpq.SearchParams)) *ivfpq.SearchParams {
		s := f.sp
		change(&s)
		return &s
	}
	ip := func(change func(*ivfpq.IndexParams)) ivfpq.IndexParams {
		p := params(t)
		change(&p)
		return p
	}
	buildErr := func(ds dlpack.Tensor, p ivfpq.IndexParams) func() error {
		return func() error { return errOf(ivfpq.Build(f.res, ds, &p)) }
	}
	search := func(x *ivfpq.Index, p *ivfpq.SearchParams, q dlpack.Tensor, n, d dlpack.TensorMut) func() error {
		return func() error { return x.Search(f.res, p, q, n, d) }
	}
	pre := func(p ivfpq.IndexParams, d int, a, b, c, e dlpack.Tensor) func() error {
		return func() error { return errOf(ivfpq.BuildPrecomputed(f.res, &p, d, a, b, c, e)) }
	}
	cases := []struct {
		name, arg string
		op        func() error
	}{
		{"Build nil", "dataset", buildErr(nil, params(t))},
		{"Build float64", "dataset", buildErr(f64, params(t))},
		{"Build empty", "dataset", buildErr(empty, params(t))},
		{"Build fewer rows than lists", "params.NLists", buildErr(few, params(t))},
		{"Build metric L1", "params.Metric", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.Metric = safe.L1 }))},
		{"Build 0 lists", "params.NLists", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.NLists = 0 }))},
		{"Build 3 bits", "params.PQBits", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.PQBits = 3 }))},
		{"Build 9 bits", "params.PQBits", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.PQBits = 9 }))},
		{"Build pq dim × bits", "params.PQDim", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.PQBits, p.PQDim = 5, 3 }))},
		{"Build chosen pq dim × bits", "params.PQDim", buildErr(newDevice[float32](t, f.res, rows, 3), ip(func(p *ivfpq.IndexParams) { p.PQBits, p.PQDim = 5, 0 }))},
		{"Build 0 iterations", "params.KMeansNIters", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.KMeansNIters = 0 }))},
		{"Build fraction 0", "params.KMeansTrainsetFraction", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.KMeansTrainsetFraction = 0 }))},
		{"Build fraction 2", "params.KMeansTrainsetFraction", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.KMeansTrainsetFraction = 2 }))},
		{"Build codebook kind", "params.CodebookKind", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.CodebookKind = 2 }))},
		{"Build layout", "params.CodesLayout", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.CodesLayout = 2 }))},
		{"Build 0 train points", "params.MaxTrainPointsPerPQCode", buildErr(f.dataset, ip(func(p *ivfpq.IndexParams) { p.MaxTrainPointsPerPQCode = 0 }))},
		{"Build zero params", "params.NLists", buildErr(f.dataset, ivfpq.IndexParams{})},
		{"Search LUT int8", "params.LUTDtype", search(idx, sp(func(s *ivfpq.SearchParams) { s.LUTDtype = ivfpq.CUDAInt8 }), f.queries, f.nb, f.dist)},
		{"Search LUT wider than distances", "params.LUTDtype", search(idx, sp(func(s *ivfpq.SearchParams) { s.InternalDistanceDtype = ivfpq.CUDAFloat16 }), f.queries, f.nb, f.dist)},
		{"Search distances uint8", "params.InternalDistanceDtype", search(idx, sp(func(s *ivfpq.SearchParams) { s.InternalDistanceDtype = ivfpq.CUDAUint8 }), f.queries, f.nb, f.dist)},
		{"Search coarse uint8", "params.CoarseSearchDtype", search(idx, sp(func(s *ivfpq.SearchParams) { s.CoarseSearchDtype = ivfpq.CUDAUint8 }), f.queries, f.nb, f.dist)},
		{"Search carveout", "params.PreferredShmemCarveout", search(idx, sp(func(s *ivfpq.SearchParams) { s.PreferredShmemCarveout = 1.5 }), f.queries, f.nb, f.dist)},
		{"Search flat layout", "index", search(flat, &f.sp, f.queries, f.nb, f.dist)},
		{"Search host queries", "queries", search(idx, &f.sp, hostQ, f.nb, f.dist)},
		{"Search float64 queries", "queries", search(idx, &f.sp, q64, f.nb, f.dist)},
		{"Search uint16 queries", "queries", search(idx, &f.sp, q16, f.nb, f.dist)},
		{"Search narrow queries", "queries", search(idx, &f.sp, narrow, f.nb, f.dist)},
		{"Search uint32 neighbors", "neighbors", search(idx, &f.sp, f.queries, n32, f.dist)},
		{"Search float64 distances", "distances", search(idx, &f.sp, f.queries, f.nb, d64)},
		{"Search k mismatch", "distances", search(idx, &f.sp, f.queries, f.nb, wideD)},
		{"Search k above size", "neighbors", search(idx, &f.sp, f.queries, bigN, bigD)},
		{"Extend nil", "vectors", func() error { return idx.Extend(f.res, nil, nil) }},
		{"Extend float64", "vectors", func() error { return idx.Extend(f.res, q64, nil) }},
		{"Extend narrow", "vectors", func() error { return idx.Extend(f.res, narrow, nil) }},
		{"Extend no rows", "vectors", func() error { return idx.Extend(f.res, empty, nil) }},
		{"Extend ids count", "ids", func() error { return idx.Extend(f.res, f.queries, shortIDs) }},
		{"Extend ids int32", "ids", func() error { return idx.Extend(f.res, f.queries, idsI32) }},
		{"Extend host ids, device rows", "ids", func() error { return idx.Extend(f.res, f.queries, hostIDs) }},
		{"Extend device ids, host rows", "ids", func() error { return idx.Extend(f.res, hostQ, ids) }},
		{"Transform nil", "input/labels/codes", func() error { return idx.Transform(f.res, nil, labels, codes) }},
		{"Transform host input", "input", func() error { return idx.Transform(f.res, hostQ, labels, codes) }},
		{"Transform narrow input", "input", func() error { return idx.Transform(f.res, narrow, labels, codes) }},
		{"Transform int64 labels", "labels", func() error { return idx.Transform(f.res, f.queries, labels64, codes) }},
		{"Transform wide codes", "codes", func() error { return idx.Transform(f.res, f.queries, labels, wideCodes) }},
		{"Transform label count", "labels", func() error { return idx.Transform(f.res, f.dataset, labels, rowsCodes) }},
		{"Unpack label", "label", func() error { return idx.UnpackListCodes(f.res, nLists, 0, codes) }},
		{"Unpack wide codes", "codes", func() error { return idx.UnpackListCodes(f.res, 0, 0, wideCodes) }},
		{"Unpack flat", "index", func() error { return flat.UnpackListCodes(f.res, 0, 0, codes) }},
		{"ListIndices label", "label", func() error { return errOf(idx.ListIndices(nLists)) }},
		{"Precomputed dim", "dim", pre(params(t), 0, pqc, cen, crot, rot)},
		{"Precomputed nil", "pqCenters", pre(params(t), dim, nil, cen, crot, rot)},
		{"Precomputed pq centers shape", "pqCenters", pre(ip(func(p *ivfpq.IndexParams) { p.PQDim = dim / 4 }), dim, pqc, cen, crot, rot)},
		{"Precomputed centers not padded", "centers", pre(params(t), dim, pqc, crot, crot, rot)},
		{"Precomputed centers of Dim columns", "centers", pre(params(t), dim, pqc, centers, crot, rot)},
		{"Precomputed rotation shape", "rotation", pre(params(t), dim, pqc, cen, crot, cen)},
		{"Precomputed lists", "centers", pre(ip(func(p *ivfpq.IndexParams) { p.NLists = nLists + 1 }), dim, pqc, cen, crot, rot)},
		{"Precomputed host", "rotation", pre(params(t), dim, pqc, cen, crot, hostMatrix(t, make([]float32, dim*dim), dim, dim))},
		{"Serialize empty path", "path", func() error { return idx.Serialize(f.res, "") }},
		{"Deserialize NUL", "path", func() error { return errOf(ivfpq.Deserialize(f.res, "a\x00b")) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := calls()
			err := c.op()
			if !isArg(err, c.arg) {
				t.Fatalf("got %v, want an ArgError for %s", err, c.arg)
			}
			if fns := called(before); len(fns) > 0 {
				t.Errorf("C calls before the refusal: %v", fns)
			}
		})
	}
	// ids and vectors are both checked: a borrowed ids vector is refused.
	r, err := ids.Owner().LendMut("a test")
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Extend(f.res, f.queries, ids); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("Extend with ids lent for writing: %v", err)
	}
	r.End()
}

// Refusals by cuVS itself come back as *safe.Error with cuVS's reason.
func TestLibraryRefusal(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	path := filepath.Join(t.TempDir(), "not-an-index")
	if err := writeFile(path, "garbage"); err != nil {
		t.Fatal(err)
	}
	// A garbage file is refused before cuVS sees it (its layout).
	_, err := ivfpq.Deserialize(f.res, path)
	if !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("a garbage file: %v", err)
	}
	var e *safe.Error
	if err := idx.Serialize(f.res, filepath.Join(t.TempDir(), "no", "such", "dir")); !errors.As(err, &e) || !strings.Contains(e.Reason, "Cannot open file") {
		t.Errorf("serializing into a missing directory: %v", err)
	}
}

func TestClosed(t *testing.T) {
	f := setup(t)
	idx, err := ivfpq.Build(f.res, f.dataset, ptr(params(t)))
	if err != nil {
		t.Fatal(err)
	}
	codeBytes := idx.CodeBytes() // 0 once closed, as every getter's value
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	labels := vector(t, newDevice[uint32](t, f.res, nq, 1))
	codes := newDevice[uint8](t, f.res, nq, codeBytes)
	for name, err := range map[string]error{
		"Search":          idx.Search(f.res, &f.sp, f.queries, f.nb, f.dist),
		"Prepare":         errOf(idx.Prepare(&f.sp, f.queries, f.nb, f.dist)),
		"Extend":          idx.Extend(f.res, f.queries, nil),
		"Transform":       idx.Transform(f.res, f.queries, labels, codes),
		"UnpackListCodes": idx.UnpackListCodes(f.res, 0, 0, codes),
		"ListSizesToHost": errOf(idx.ListSizesToHost(f.res)),
		"Serialize":       idx.Serialize(f.res, filepath.Join(t.TempDir(), "x")),
		"Centers":         idx.Centers(f.res, hostMatrix(t, make([]float32, nLists*dim), nLists, dim)),
		"CentersPadded":   errOf(idx.CentersPadded()),
		"PQCenters":       errOf(idx.PQCenters()),
		"CentersRot":      errOf(idx.CentersRot()),
		"RotationMatrix":  errOf(idx.RotationMatrix()),
		"ListSizes":       errOf(idx.ListSizes()),
		"ListIndices":     errOf(idx.ListIndices(0)),
	} {
		if !errors.Is(err, safe.ErrClosed) {
			t.Errorf("%s on a closed index: %v", name, err)
		}
	}
	res, err := safe.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	res.Close()
	if _, err := ivfpq.Build(res, f.dataset, ptr(params(t))); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("build with closed resources: %v", err)
	}
}

// A failure injected into each C call of each function comes back as a
// *safe.Error naming the call, and leaks nothing (Destroy and Free calls
// are left out: see package cagra's TestFaults).
func TestFaults(t *testing.T) {
	f := setup(t)
	dir := t.TempDir()
	idx := build(t, f.res, f.dataset, params(t))
	path := filepath.Join(dir, "ivfpq.idx")
	if err := idx.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	hostData := hostMatrix(t, slices.Clone(f.data), rows, dim)
	hostMore := hostMatrix(t, slices.Clone(f.qs), nq, dim)
	labels := vector(t, newDevice[uint32](t, f.res, nq, 1))
	codes := newDevice[uint8](t, f.res, nq, int(idx.CodeBytes()))
	one := newDevice[uint8](t, f.res, 1, int(idx.CodeBytes()))
	ids := deviceMatrixVec(t, f.res, make([]int64, nq))
	pqc, _ := idx.PQCenters()
	cen, _ := idx.CentersPadded()
	crot, _ := idx.CentersRot()
	rot, _ := idx.RotationMatrix()
	p := params(t)
	closeIndex := func(x *ivfpq.Index, err error) error {
		if err == nil {
			err = x.Close()
		}
		return err
	}
	// The views are taken by fresh indexes, so that idx's stay valid.
	view := func(get func(*ivfpq.Index) (dlpack.View, error)) func() error {
		return func() error {
			x, err := ivfpq.Deserialize(f.res, path)
			if err != nil {
				return err
			}
			_, err = get(x)
			if cerr := x.Close(); err == nil {
				err = cerr
			}
			return err
		}
	}
	ops := []struct {
		name string
		op   func() error
	}{
		{"DefaultIndexParams", func() error { return errOf(ivfpq.DefaultIndexParams()) }},
		{"DefaultSearchParams", func() error { return errOf(ivfpq.DefaultSearchParams()) }},
		{"Build host", func() error { return closeIndex(ivfpq.Build(f.res, hostData, &p)) }},
		{"Build device", func() error { return closeIndex(ivfpq.Build(f.res, f.dataset, &p)) }},
		{"BuildPrecomputed", func() error { return closeIndex(ivfpq.BuildPrecomputed(f.res, &p, dim, pqc, cen, crot, rot)) }},
		{"Search", func() error { return idx.Search(f.res, &f.sp, f.queries, f.nb, f.dist) }},
		{"Extend host", func() error { return idx.Extend(f.res, hostMore, nil) }},
		{"Extend device", func() error { return idx.Extend(f.res, f.queries, nil) }},
		{"Extend device ids", func() error { return idx.Extend(f.res, f.queries, ids) }},
		{"Transform", func() error { return idx.Transform(f.res, f.queries, labels, codes) }},
		{"UnpackListCodes", func() error { return idx.UnpackListCodes(f.res, 0, 0, one) }},
		{"ListSizesToHost", func() error { return errOf(idx.ListSizesToHost(f.res)) }},
		{"Serialize", func() error { return idx.Serialize(f.res, filepath.Join(dir, "s.idx")) }},
		{"Deserialize", func() error { return closeIndex(ivfpq.Deserialize(f.res, path)) }},
		{"Centers", func() error {
			return idx.Centers(f.res, hostMatrix(t, make([]float32, nLists*dim), nLists, dim))
		}},
		{"CentersPadded", view((*ivfpq.Index).CentersPadded)},
		{"PQCenters", view((*ivfpq.Index).PQCenters)},
		{"CentersRot", view((*ivfpq.Index).CentersRot)},
		{"RotationMatrix", view((*ivfpq.Index).RotationMatrix)},
		{"ListSizes", view((*ivfpq.Index).ListSizes)},
		{"ListIndices", view(func(x *ivfpq.Index) (dlpack.View, error) { return x.ListIndices(0) })},
	}
	for _, o := range ops {
		injectEach(t, o.name, o.op)
	}
	// The index is intact, and knows its row count after Extends whose
	// stream sync failed: the library's count is the same.
	if err := idx.Search(f.res, &f.sp, f.queries, f.nb, f.dist); err != nil {
		t.Fatal(err)
	}
	if err := idx.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	back, err := ivfpq.Deserialize(f.res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	if back.Rows() != idx.Rows() || idx.Rows() == rows {
		t.Errorf("the index counts %d rows, the library %d", idx.Rows(), back.Rows())
	}
	// Close reports a failed cuvsIvfPqIndexDestroy and a second Close
	// finishes the job.
	x := build(t, f.res, f.dataset, params(t))
	safetest.Double(t, "fault injection").FailNext("cuvsIvfPqIndexDestroy", "injected")
	if err := x.Close(); !isCuvs(err, "cuvsIvfPqIndexDestroy", "injected") {
		t.Errorf("Close with cuvsIvfPqIndexDestroy failing: %v", err)
	}
	if err := x.Search(f.res, &f.sp, f.queries, f.nb, f.dist); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("search after a failed Close: %v", err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
}

// injectEach runs op once, lists the C functions it called, then makes
// each of them (but the Destroy and Free calls) fail in turn: op must
// return a *safe.Error naming it, and leave as many objects alive as before.
func injectEach(t *testing.T, name string, op func() error) {
	t.Helper()
	ctl := safetest.Double(t, "its control surface")
	before := calls()
	if err := op(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	fns := called(before)
	injected := 0
	for _, fn := range fns {
		if strings.HasSuffix(fn, "Destroy") || strings.HasSuffix(fn, "Free") {
			continue
		}
		injected++
		live := ctl.Counters()
		ctl.FailNext(fn, "injected")
		err := op()
		if ctl.PendingFaults() != 0 {
			ctl.ClearFaults()
			t.Errorf("%s: the fault in %s did not fire", name, fn)
		}
		if !isCuvs(err, fn, "injected") {
			t.Errorf("%s with %s failing: %v", name, fn, err)
		}
		for kind, p := range ctl.Counters() {
			if p.Live() != live[kind].Live() && !strings.HasSuffix(kind, "_bytes") {
				t.Errorf("%s with %s failing: %s went from %d to %d live", name, fn, kind, live[kind].Live(), p.Live())
			}
		}
	}
	if injected == 0 {
		t.Errorf("%s: no call to fail in %v", name, fns)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

// ptr returns a pointer to a copy of v (params for a call from a helper).
func ptr[T any](v T) *T { return &v }
