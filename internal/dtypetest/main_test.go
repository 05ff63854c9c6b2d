// Package dtypetest checks the int8 and uint8 paths of the safe layer as a
// user relies on them (issue 40): recall of every index type that takes
// 8-bit integers against an exact kNN computed here with the metric's own
// integer arithmetic, with filters, after a serialize round trip that keeps
// the element type, BitwiseHamming where cuVS has it, and the refusals of
// the combinations cuVS does not take, with cuVS's reasons.
//
// Its tests import internal/safetest, so they run against the double by
// default and against $CUVS_TEST_LIBRARY (the real libcuvs_c on a GPU
// machine) in conformance mode; the subtests are named by element type
// (.../int8, .../uint8), which the GPU runner counts.
//
// Thresholds: exact paths (IVF-Flat with every list probed, refine, HNSW's
// distances, every distance a search returns for a row it names) are held
// to the exact answer, compared by distance since integer distances tie;
// approximate ones to a recall floor well under what both the double and a
// GPU give on this small clustered data. Recall counts a returned row as a
// hit when its exact distance is at least as near as the exact k-th
// nearest's, so ties between rows never cost recall.
package dtypetest

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows = 2000
	dim  = 32
	nq   = 50
	k    = 10
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// elem is the element type under test.
type elem interface{ int8 | uint8 }

// data is a clustered data set of one element type: rows × dim rows and
// nq × dim queries drawn from the same 16 clusters (queries are not rows),
// scaled into the type's range: int8 around 0, uint8 around 128.
type data[T elem] struct {
	name          string
	dtype         dlpack.DataType
	rows, queries []T
}

func makeData[T elem](seed uint64) *data[T] {
	r := rand.New(rand.NewPCG(seed, seed*7+1))
	const clusters = 16
	centers := make([]float64, clusters*dim)
	for i := range centers {
		centers[i] = r.Float64()*2 - 1
	}
	var zero T
	d := &data[T]{name: "int8", dtype: dlpack.Int8}
	off, lo, hi := 0.0, -128.0, 127.0
	if _, ok := any(zero).(uint8); ok {
		d.name, d.dtype = "uint8", dlpack.Uint8
		off, lo, hi = 128, 0, 255
	}
	gen := func(n int) []T {
		out := make([]T, n*dim)
		for i := 0; i < n; i++ {
			c := centers[r.IntN(clusters)*dim:]
			for j := 0; j < dim; j++ {
				v := math.Round((c[j]+r.NormFloat64()*0.6)*45 + off)
				out[i*dim+j] = T(math.Max(lo, math.Min(hi, v)))
			}
		}
		return out
	}
	d.rows, d.queries = gen(rows), gen(nq)
	return d
}

var (
	int8Data  = makeData[int8](40)
	uint8Data = makeData[uint8](41)
)

// dist is metric m of query q to row x in the metric's integer arithmetic:
// L2Expanded the squared distance, InnerProduct the product (larger is
// nearer), BitwiseHamming the popcount of q xor x.
func dist[T elem](m safe.Metric, q, x []T) float64 {
	var s int64
	for j := range q {
		a, b := int64(q[j]), int64(x[j])
		switch m {
		case safe.L2Expanded:
			s += (a - b) * (a - b)
		case safe.InnerProduct:
			s += a * b
		case safe.BitwiseHamming:
			s += int64(bits.OnesCount8(uint8(q[j]) ^ uint8(x[j])))
		default:
			panic("dtypetest: metric " + m.String())
		}
	}
	return float64(s)
}

// nearer reports whether distance a is nearer than b under m.
func nearer(m safe.Metric, a, b float64) bool {
	if m == safe.InnerProduct {
		return a > b
	}
	return a < b
}

// exact is each query's exact k nearest among the allowed rows (nil: all):
// ids and distances, nearest first, ties to the smaller id.
type exact struct {
	m     safe.Metric
	ids   [][]int64
	dists [][]float64
}

func exactKNN[T elem](m safe.Metric, rowsData, queries []T, k int, allowed []bool) *exact {
	n, q := len(rowsData)/dim, len(queries)/dim
	e := &exact{m: m, ids: make([][]int64, q), dists: make([][]float64, q)}
	type cand struct {
		id int64
		d  float64
	}
	cs := make([]cand, 0, n)
	for i := 0; i < q; i++ {
		cs = cs[:0]
		qv := queries[i*dim : (i+1)*dim]
		for j := 0; j < n; j++ {
			if allowed == nil || allowed[j] {
				cs = append(cs, cand{int64(j), dist(m, qv, rowsData[j*dim:(j+1)*dim])})
			}
		}
		sort.Slice(cs, func(a, b int) bool {
			if cs[a].d != cs[b].d {
				return nearer(m, cs[a].d, cs[b].d)
			}
			return cs[a].id < cs[b].id
		})
		for j := 0; j < k && j < len(cs); j++ {
			e.ids[i] = append(e.ids[i], cs[j].id)
			e.dists[i] = append(e.dists[i], cs[j].d)
		}
	}
	return e
}

// check is what one search returned, checked against the exact answer.
type check[T elem] struct {
	t       testing.TB
	what    string
	d       *data[T]
	queries []T
	e       *exact
	allowed []bool // nil: every row
}

// recall is the fraction of the exact k nearest a search found, by
// distance: a returned row counts when its exact distance is at least as
// near as the exact k-th's (ties cost nothing). It fails t on ids out of
// range, repeated in a row, or rejected by the filter, and on a distance
// that is not the row's exact distance under m, when distTol ≥ 0 (a
// relative tolerance; distScale maps the exact distance to what the index
// reports, e.g. hnswlib's 1 − ⟨q,x⟩).
func (c *check[T]) recall(ids []int64, dists []float32, k int, distTol float64, distScale func(float64) float64) float64 {
	c.t.Helper()
	hits, total, bad := 0, 0, 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 5 {
			c.t.Errorf(c.what+": "+format, args...)
		}
	}
	for q := range c.e.ids {
		want := len(c.e.ids[q])
		total += want
		if want == 0 {
			continue
		}
		kth := c.e.dists[q][want-1]
		seen := map[int64]bool{}
		qh := 0
		qv := c.queries[q*dim : (q+1)*dim]
		for j := 0; j < k; j++ {
			id := ids[q*k+j]
			if !safe.Valid(id) {
				continue
			}
			switch {
			case id < 0 || id >= int64(len(c.d.rows)/dim):
				fail("query %d slot %d: id %d out of range", q, j, id)
				continue
			case seen[id]:
				fail("query %d slot %d: id %d twice", q, j, id)
				continue
			case c.allowed != nil && !c.allowed[id]:
				fail("query %d slot %d: id %d is filtered out", q, j, id)
				continue
			}
			seen[id] = true
			xd := dist(c.e.m, qv, c.d.rows[id*dim:(id+1)*dim])
			if distTol >= 0 && dists != nil {
				want := xd
				if distScale != nil {
					want = distScale(xd)
				}
				if got := float64(dists[q*k+j]); math.Abs(got-want) > distTol*math.Max(1, math.Abs(want)) {
					fail("query %d slot %d: id %d at distance %g, its exact distance is %g", q, j, id, got, want)
				}
			}
			if !nearer(c.e.m, kth, xd) && qh < want {
				qh++
			}
		}
		hits += qh
	}
	if total == 0 {
		return 1
	}
	return float64(hits) / float64(total)
}

// exactly fails t unless every query's returned distances, sorted, are the
// exact k nearest distances (ids may differ where distances tie).
func (c *check[T]) exactly(ids []int64, k int) {
	c.t.Helper()
	bad := 0
	for q := range c.e.ids {
		qv := c.queries[q*dim : (q+1)*dim]
		var got []float64
		for _, id := range ids[q*k : (q+1)*k] {
			if safe.Valid(id) && id >= 0 && id < int64(len(c.d.rows)/dim) {
				got = append(got, dist(c.e.m, qv, c.d.rows[id*dim:(id+1)*dim]))
			}
		}
		sort.Slice(got, func(a, b int) bool { return nearer(c.e.m, got[a], got[b]) })
		want := c.e.dists[q]
		same := len(got) == len(want)
		for j := 0; same && j < len(want); j++ {
			same = got[j] == want[j]
		}
		if !same {
			if bad++; bad <= 3 {
				c.t.Errorf("%s: query %d: distances of the rows returned %v, exact %v", c.what, q, got, want)
			}
		}
	}
}

// devMatrix uploads host rows to the device, freed at the end of t.
func devMatrix[T dlpack.DType](t *testing.T, res *safe.Resources, v []T, r, c int) *safe.DeviceMatrix[T] {
	t.Helper()
	m, err := safe.DeviceMatrixFrom(res, v, r, c)
	must(t, err)
	safetest.Close(t, m)
	return m
}

func hostMatrix[T dlpack.DType](t testing.TB, v []T, r, c int) *dlpack.HostMatrix[T] {
	t.Helper()
	m, err := dlpack.NewHostMatrix(v, r, c)
	must(t, err)
	return m
}

// allowEvery returns the filter of every step-th row (from offset), as
// allowed flags and ids.
func allowEvery(step, offset int) ([]bool, []int64) {
	ok := make([]bool, rows)
	var ids []int64
	for i := offset; i < rows; i += step {
		ok[i] = true
		ids = append(ids, int64(i))
	}
	return ok, ids
}

// forTypes runs f as the subtests int8 and uint8.
func forTypes(t *testing.T, f8 func(t *testing.T, d *data[int8]), fu8 func(t *testing.T, d *data[uint8])) {
	t.Run("int8", func(t *testing.T) { f8(t, int8Data) })
	t.Run("uint8", func(t *testing.T) { fu8(t, uint8Data) })
}
