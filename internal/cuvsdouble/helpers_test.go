package cuvsdouble_test

import (
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

// fixture is one test's own instance of the double.
type fixture struct {
	t      testing.TB
	ctl    *cuvsdouble.Control
	lib    *capi.Lib
	res    capi.Res
	leaked map[string]int64 // leaks a test caused on purpose
}

// newFixture builds (or reuses) the double, loads a private copy of it and
// creates one resources handle.
func newFixture(t testing.TB, opts ...cuvsdouble.Option) *fixture {
	t.Helper()
	ctl := cuvsdouble.New(t, append(opts, cuvsdouble.Isolated())...)
	lib, err := capi.Open(ctl.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close) // runs before ctl.Close: last reference goes last
	f := &fixture{t: t, ctl: ctl, lib: lib}
	if lib.Has("cuvsResourcesCreate") {
		f.res = f.must1(lib.ResourcesCreate(false))
	}
	return f
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) must1(r capi.Res, err error) capi.Res {
	f.t.Helper()
	f.must(err)
	return r
}

// expectViolations takes the recorded violations and checks there is one
// per substring, in order.
func (f *fixture) expectViolations(subs ...string) {
	f.t.Helper()
	v := f.ctl.TakeViolations()
	if len(v) != len(subs) {
		f.t.Fatalf("violations %q, want %d", v, len(subs))
	}
	for i, s := range subs {
		if !strings.Contains(v[i], s) {
			f.t.Fatalf("violation %d: %q, want %q", i, v[i], s)
		}
	}
}

// allowLeak records a leak the test caused on purpose.
func (f *fixture) allowLeak(kind string, n int64) {
	if f.leaked == nil {
		f.leaked = map[string]int64{}
	}
	f.leaked[kind] += n
}

// close destroys the fixture's resources and asserts the double is balanced
// (but for the leaks allowed).
func (f *fixture) close() {
	f.t.Helper()
	if f.res != 0 {
		f.must(f.lib.ResourcesDestroy(f.res, false))
		f.res = 0
	}
	if f.leaked == nil {
		f.ctl.AssertBalanced(f.t)
		return
	}
	u := f.ctl.Counters().Unbalanced()
	for k, p := range u {
		if p.Live() == f.leaked[k] {
			delete(u, k)
		}
	}
	if len(u) > 0 {
		f.t.Errorf("unbalanced counters:\n%v", u)
	}
	if v := f.ctl.Violations(); len(v) > 0 {
		f.t.Errorf("violations %q", v)
	}
}

// buf is C memory from cuvsRMMAlloc (device) or cuvsRMMHostAlloc / malloc.
type buf struct {
	p    unsafe.Pointer
	n    int
	kind int // capi.CUDA (RMM), capi.CUDAHost (pinned), capi.CPU (malloc)
}

func (f *fixture) alloc(kind, bytes int) buf {
	f.t.Helper()
	var p unsafe.Pointer
	var err error
	switch kind {
	case capi.CUDA:
		p, err = f.lib.RMMAlloc(f.res, bytes)
	case capi.CUDAHost:
		p, err = f.lib.HostAlloc(bytes)
	default:
		p = capi.Malloc(bytes)
	}
	f.must(err)
	return buf{p, bytes, kind}
}

func (f *fixture) free(b buf) {
	f.t.Helper()
	switch b.kind {
	case capi.CUDA:
		f.must(f.lib.RMMFree(f.res, b.p, b.n))
	case capi.CUDAHost:
		f.must(f.lib.HostFree(b.p, b.n))
	default:
		capi.FreeC(b.p)
	}
}

// matrix holds a float32 matrix in C memory and its tensor.
type matrix struct {
	b    buf
	t    *capi.Tensor
	rows int
	cols int
}

func (f *fixture) f32(kind, device int, rows, cols int, vals []float32) matrix {
	f.t.Helper()
	b := f.alloc(kind, 4*rows*cols)
	capi.CopyIn(b.p, vals)
	return matrix{b, capi.NewTensor(b.p, device, capi.Float, 32, int64(rows), int64(cols)), rows, cols}
}

func (f *fixture) zeros(kind, device, code, bits, rows, cols int) matrix {
	f.t.Helper()
	b := f.alloc(kind, bits/8*rows*cols)
	return matrix{b, capi.NewTensor(b.p, device, code, bits, int64(rows), int64(cols)), rows, cols}
}

func (f *fixture) drop(m matrix) {
	f.t.Helper()
	m.t.Free()
	f.free(m.b)
}

// words puts a bitset/bitmap into device memory as a 1-D uint32 tensor.
func (f *fixture) words(w []uint32) matrix {
	f.t.Helper()
	b := f.alloc(capi.CUDA, 4*len(w))
	capi.CopyIn(b.p, w)
	return matrix{b, capi.NewTensor(b.p, capi.CUDA, capi.UInt, 32, int64(len(w))), len(w), 1}
}

func randomMatrix(rng *rand.Rand, rows, cols int) []float32 {
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	return v
}

// distance mirrors the double's arithmetic: float32, dimensions in order.
func distance(metric int, a, b []float32) float32 {
	var s float32
	switch metric {
	case capi.L2Expanded, capi.L2SqrtExpanded:
		for j := range a {
			d := a[j] - b[j]
			s += d * d
		}
		if metric == capi.L2SqrtExpanded {
			return float32(math.Sqrt(float64(s)))
		}
		return s
	case capi.InnerProduct:
		for j := range a {
			s += a[j] * b[j]
		}
		return s
	case capi.CosineExpanded:
		var dot, na, nb float32
		for j := range a {
			dot += a[j] * b[j]
			na += a[j] * a[j]
			nb += b[j] * b[j]
		}
		return 1 - dot/(float32(math.Sqrt(float64(na)))*float32(math.Sqrt(float64(nb))))
	case capi.L1:
		for j := range a {
			s += float32(math.Abs(float64(a[j] - b[j])))
		}
		return s
	}
	panic("metric")
}

// exactKNN is the reference: ordered by distance (descending for inner
// product), ties by the smaller id; -1 / worst distance past the last match.
func exactKNN(data []float32, n, dim int, queries []float32, k, metric int, allowed func(q, i int) bool, excludeSelf bool) ([][]int64, [][]float32) {
	nq := len(queries) / dim
	ids := make([][]int64, nq)
	dists := make([][]float32, nq)
	for q := 0; q < nq; q++ {
		type cand struct {
			id  int
			key float32
			d   float32
		}
		var cs []cand
		for i := 0; i < n; i++ {
			if excludeSelf && i == q {
				continue
			}
			if allowed != nil && !allowed(q, i) {
				continue
			}
			d := distance(metric, queries[q*dim:(q+1)*dim], data[i*dim:(i+1)*dim])
			key := d
			if metric == capi.InnerProduct {
				key = -d
			}
			cs = append(cs, cand{i, key, d})
		}
		sort.SliceStable(cs, func(a, b int) bool { return cs[a].key < cs[b].key })
		ids[q] = make([]int64, k)
		dists[q] = make([]float32, k)
		for j := 0; j < k; j++ {
			if j < len(cs) {
				ids[q][j], dists[q][j] = int64(cs[j].id), cs[j].d
			} else {
				ids[q][j] = -1
				dists[q][j] = math.MaxFloat32
				if metric == capi.InnerProduct {
					dists[q][j] = -math.MaxFloat32
				}
			}
		}
	}
	return ids, dists
}

func bitsetOf(n int, allowed func(i int) bool) []uint32 {
	w := make([]uint32, (n+31)/32)
	for i := 0; i < n; i++ {
		if allowed(i) {
			w[i/32] |= 1 << (i % 32)
		}
	}
	return w
}

func checkKNN(t *testing.T, what string, gotIDs []int64, gotD []float32, k int, wantIDs [][]int64, wantD [][]float32) {
	t.Helper()
	for q := range wantIDs {
		for j := 0; j < k; j++ {
			gi, gd := gotIDs[q*k+j], gotD[q*k+j]
			if gi != wantIDs[q][j] {
				t.Fatalf("%s: query %d rank %d: id %d, want %d (row %v, want %v)", what, q, j, gi, wantIDs[q][j], gotIDs[q*k:q*k+k], wantIDs[q])
			}
			if d, w := float64(gd), float64(wantD[q][j]); math.Abs(d-w) > 1e-5*math.Max(1, math.Abs(w)) {
				t.Fatalf("%s: query %d rank %d: distance %g, want %g", what, q, j, d, w)
			}
		}
	}
}

// cagraSentinel is the id CAGRA writes where it found nothing, in uint32 and
// int64 neighbors alike (the graph's invalid index with the top bit cleared).
const cagraSentinel = 0x7FFFFFFF

// recall is the fraction of want's valid ids found in got (k per query).
func recall(got []int64, want [][]int64, k int) float64 {
	hit, total := 0, 0
	for q := range want {
		set := map[int64]bool{}
		for _, id := range got[q*k : q*k+k] {
			set[id] = true
		}
		for _, id := range want[q][:k] {
			if id < 0 {
				continue
			}
			total++
			if set[id] {
				hit++
			}
		}
	}
	if total == 0 {
		return 1
	}
	return float64(hit) / float64(total)
}

// checkApprox checks what holds for any approximate search: ids in range
// (or the sentinel, only after the valid ones, with the sentinel distance),
// allowed by the filter, no repeats, distances ascending (descending for
// inner product) and equal to the distance of the id returned.
func checkApprox(t *testing.T, what string, data []float32, n, dim int, queries []float32, ids []int64, d []float32, k, metric int, allowed func(i int) bool) {
	t.Helper()
	nq := len(queries) / dim
	for q := 0; q < nq; q++ {
		seen := map[int64]bool{}
		done := false
		for j := 0; j < k; j++ {
			id, dist := ids[q*k+j], d[q*k+j]
			if id == cagraSentinel {
				done = true
				if dist != math.MaxFloat32 && !(metric == capi.InnerProduct && dist == -math.MaxFloat32) {
					t.Fatalf("%s: query %d rank %d: sentinel with distance %g", what, q, j, dist)
				}
				continue
			}
			if done || id < 0 || id >= int64(n) || seen[id] || (allowed != nil && !allowed(int(id))) {
				t.Fatalf("%s: query %d: bad id %d at rank %d: %v", what, q, id, j, ids[q*k:q*k+k])
			}
			seen[id] = true
			want := distance(metric, queries[q*dim:(q+1)*dim], data[int(id)*dim:(int(id)+1)*dim])
			if math.Abs(float64(dist-want)) > 1e-5*math.Max(1, math.Abs(float64(want))) {
				t.Fatalf("%s: query %d rank %d: distance %g for id %d, want %g", what, q, j, dist, id, want)
			}
			if j > 0 {
				prev := d[q*k+j-1]
				if metric == capi.InnerProduct && dist > prev || metric != capi.InnerProduct && dist < prev {
					t.Fatalf("%s: query %d: distances not ordered: %v", what, q, d[q*k:q*k+k])
				}
			}
		}
	}
}
