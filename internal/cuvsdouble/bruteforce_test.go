package cuvsdouble_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

func TestBruteForceExact(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	const n, dim, nq, k = 150, 7, 9, 10
	rng := newRand()
	data := randomMatrix(rng, n, dim)
	queries := randomMatrix(rng, nq, dim)
	ds := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer f.drop(ds)
	q := f.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	defer f.drop(q)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, nq, k)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
	defer f.drop(d)

	for _, metric := range []int{capi.L2Expanded, capi.L2SqrtExpanded, capi.InnerProduct, capi.CosineExpanded, capi.L1} {
		idx := capi.Must(f.lib.BFCreate())
		f.must(f.lib.BFBuild(f.res, ds.t, metric, 2, idx))
		f.must(f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{}))
		wantI, wantD := exactKNN(data, n, dim, queries, k, metric, nil, false)
		checkKNN(t, "metric", capi.CopyOut[int64](nb.b.p, nq*k), capi.CopyOut[float32](d.b.p, nq*k), k, wantI, wantD)
		f.must(f.lib.BFDestroy(idx))
	}
}

func TestBruteForceFilters(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	const n, dim, nq, k = 70, 5, 4, 6
	rng := newRand()
	data := randomMatrix(rng, n, dim)
	queries := randomMatrix(rng, nq, dim)
	ds := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer f.drop(ds)
	q := f.f32(capi.CUDA, capi.CUDA, nq, dim, queries)
	defer f.drop(q)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, nq, k)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, nq, k)
	defer f.drop(d)
	idx := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(idx)) }()
	f.must(f.lib.BFBuild(f.res, ds.t, capi.L2Expanded, 0, idx))

	// bitset: every third row
	allowed := func(_, i int) bool { return i%3 == 0 }
	bs := f.words(bitsetOf(n, func(i int) bool { return allowed(0, i) }))
	defer f.drop(bs)
	f.must(f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{Words: bs.t, Type: capi.Bitset}))
	wantI, wantD := exactKNN(data, n, dim, queries, k, capi.L2Expanded, allowed, false)
	checkKNN(t, "bitset", capi.CopyOut[int64](nb.b.p, nq*k), capi.CopyOut[float32](d.b.p, nq*k), k, wantI, wantD)

	// bitmap: query q may see rows i with (i+q)%4 == 0, and query 3 only two rows
	bm := func(qq, i int) bool {
		if qq == 3 {
			return i == 10 || i == 20
		}
		return (i+qq)%4 == 0
	}
	words := make([]uint32, (n*nq+31)/32)
	for qq := 0; qq < nq; qq++ {
		for i := 0; i < n; i++ {
			if bm(qq, i) {
				b := qq*n + i
				words[b/32] |= 1 << (b % 32)
			}
		}
	}
	bmt := f.words(words)
	defer f.drop(bmt)
	f.must(f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{Words: bmt.t, Type: capi.Bitmap}))
	gotI := capi.CopyOut[int64](nb.b.p, nq*k)
	gotD := capi.CopyOut[float32](d.b.p, nq*k)
	wantI, wantD = exactKNN(data, n, dim, queries, k, capi.L2Expanded, bm, false)
	checkKNN(t, "bitmap", gotI, gotD, k, wantI, wantD)
	if gotI[3*k+2] != -1 || gotD[3*k+2] != math.MaxFloat32 {
		t.Fatalf("missing results: %v %v", gotI[3*k:], gotD[3*k:])
	}

	// a bitset shorter than the index: the real library reads past its end
	short := f.words(make([]uint32, 2))
	defer f.drop(short)
	err := f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{Words: short.t, Type: capi.Bitset})
	if err == nil || !strings.Contains(err.Error(), "filter too short") {
		t.Fatalf("got %v", err)
	}
	f.expectViolations("reads past its end")
}

func TestBruteForceValidation(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	data := randomMatrix(newRand(), 20, 4)
	ds := f.f32(capi.CUDA, capi.CUDA, 20, 4, data)
	defer f.drop(ds)
	host := f.f32(capi.CPU, capi.CPU, 20, 4, data)
	defer f.drop(host)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, 20, 3)
	defer f.drop(nb)
	nb32 := f.zeros(capi.CUDA, capi.CUDA, capi.UInt, 32, 20, 3)
	defer f.drop(nb32)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 20, 3)
	defer f.drop(d)
	idx := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(idx)) }()

	// the header says host datasets are fine; the code wants device memory
	err := f.lib.BFBuild(f.res, host.t, capi.L2Expanded, 0, idx)
	expectRAFT(t, err, "device_type mismatch between return mdspan and DLTensor")
	f.must(f.lib.BFBuild(f.res, ds.t, capi.L2Expanded, 0, idx))
	expectRAFT(t, f.lib.BFSearch(f.res, idx, host.t, nb.t, d.t, capi.Filter{}), "queries should have device compatible memory")
	expectRAFT(t, f.lib.BFSearch(f.res, idx, ds.t, nb32.t, d.t, capi.Filter{}), "neighbors should be of type int64_t")
	expectRAFT(t, f.lib.BFSearch(f.res, idx, ds.t, nb.t, nb.t, capi.Filter{}), "distances should be of type float32")
	expectRAFT(t, f.lib.BFSearch(f.res, idx, ds.t, nb.t, d.t, capi.Filter{Type: 7}), "Unsupported prefilter type")

	// column-major dataset and queries are accepted
	col := make([]float32, 20*4)
	for i := 0; i < 20; i++ {
		for j := 0; j < 4; j++ {
			col[j*20+i] = data[i*4+j]
		}
	}
	cm := f.f32(capi.CUDA, capi.CUDA, 20, 4, col)
	defer f.drop(cm)
	cm.t.SetStrides(1, 20)
	colIdx := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(colIdx)) }() // before cm goes: it references cm
	f.must(f.lib.BFBuild(f.res, cm.t, capi.L2Expanded, 0, colIdx))
	f.must(f.lib.BFSearch(f.res, colIdx, ds.t, nb.t, d.t, capi.Filter{}))
	wantI, wantD := exactKNN(data, 20, 4, data, 3, capi.L2Expanded, nil, false)
	checkKNN(t, "col-major", capi.CopyOut[int64](nb.b.p, 60), capi.CopyOut[float32](d.b.p, 60), 3, wantI, wantD)
	f.must(f.lib.BFSearch(f.res, idx, cm.t, nb.t, d.t, capi.Filter{}))
	checkKNN(t, "col-major queries", capi.CopyOut[int64](nb.b.p, 60), capi.CopyOut[float32](d.b.p, 60), 3, wantI, wantD)
}

func TestBruteForceSerialize(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	const n, dim, k = 30, 3, 4
	data := randomMatrix(newRand(), n, dim)
	ds := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, n, k)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, n, k)
	defer f.drop(d)
	idx := capi.Must(f.lib.BFCreate())
	f.must(f.lib.BFBuild(f.res, ds.t, capi.InnerProduct, 0, idx))
	path := filepath.Join(t.TempDir(), "bf.idx")
	f.must(f.lib.BFSerialize(f.res, path, idx))
	f.must(f.lib.BFDestroy(idx))

	// the loaded index owns its data: the original may go
	f.drop(ds)
	idx2 := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(idx2)) }()
	f.must(f.lib.BFDeserialize(f.res, path, idx2))
	q := f.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer f.drop(q)
	f.must(f.lib.BFSearch(f.res, idx2, q.t, nb.t, d.t, capi.Filter{}))
	wantI, wantD := exactKNN(data, n, dim, data, k, capi.InnerProduct, nil, false)
	checkKNN(t, "deserialized", capi.CopyOut[int64](nb.b.p, n*k), capi.CopyOut[float32](d.b.p, n*k), k, wantI, wantD)

	idx3 := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(idx3)) }()
	expectRAFT(t, f.lib.BFDeserialize(f.res, filepath.Join(t.TempDir(), "none"), idx3), "Cannot open file")
}

// The brute-force index references its dataset: freeing it first is caught.
func TestBruteForceBorrow(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	data := randomMatrix(newRand(), 10, 2)
	ds := f.f32(capi.CUDA, capi.CUDA, 10, 2, data)
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, 10, 1)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 10, 1)
	defer f.drop(d)
	q := f.f32(capi.CUDA, capi.CUDA, 10, 2, data)
	defer f.drop(q)
	idx := capi.Must(f.lib.BFCreate())
	f.must(f.lib.BFBuild(f.res, ds.t, capi.L2Expanded, 0, idx))
	f.drop(ds) // too early
	err := f.lib.BFSearch(f.res, idx, q.t, nb.t, d.t, capi.Filter{})
	if err == nil || !strings.Contains(err.Error(), "dataset memory was freed") {
		t.Fatalf("got %v", err)
	}
	f.must(f.lib.BFDestroy(idx))
	f.expectViolations("still reference that memory", "was freed")
}

func expectRAFT(t *testing.T, err error, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", reason)
	}
	msg := err.Error()
	if !strings.Contains(msg, "RAFT failure at file=") || !strings.Contains(msg, ": "+reason) || !strings.Contains(msg, "\nObtained ") {
		t.Fatalf("error %q, want a RAFT failure %q", msg, reason)
	}
}
