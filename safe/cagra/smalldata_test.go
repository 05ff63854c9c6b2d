package cagra_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// smallDim is the dimension of the small-data tests (16-byte rows).
const smallDim = 4

// findsItself searches every row of data (n × smallDim) in idx with the
// default search params and checks that each row's own id is among its
// min(n, 4) results, every id a row or the sentinel, none repeated: what
// real cuVS 26.08.01 measured on such builds (issue 40).
func findsItself(t *testing.T, res *safe.Resources, idx *cagra.Index, data []float32, n int) {
	t.Helper()
	k := min(n, 4)
	q := deviceMatrix(t, res, data, n, smallDim)
	nb := newDevice[uint32](t, res, n, k)
	d := newDevice[float32](t, res, n, k)
	if err := idx.Search(res, nil, q, nb, d, nil); err != nil {
		t.Fatal(err)
	}
	ids, err := nb.ToHost(res)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		row := ids[i*k : (i+1)*k]
		found, seen := false, map[uint32]bool{}
		for _, id := range row {
			if id == cagra.SentinelID {
				continue
			}
			if int(id) >= n || seen[id] {
				t.Fatalf("row %d: neighbours %v", i, row)
			}
			seen[id] = true
			found = found || int(id) == i
		}
		if !found {
			t.Errorf("row %d is not among its neighbours %v", i, row)
		}
	}
}

// Build over few rows with cuVS's defaults (GraphDegree 64,
// IntermediateGraphDegree 128) lowers the degrees as cuVS does
// (check_graph_degree): the index reports degree rows-1, and every row
// finds itself; nil params (AutoSelect), IVFPQ and NNDescent.
func TestSmallDataBuild(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	def, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 4, 40, 50} {
		data := safetest.Random(uint64(100+n), n, smallDim)
		for _, algo := range []cagra.GraphBuildAlgo{cagra.AutoSelect, cagra.IVFPQ, cagra.NNDescent} {
			t.Run(fmt.Sprintf("%d rows %s", n, algo), func(t *testing.T) {
				var p *cagra.IndexParams // nil: the defaults
				if algo != cagra.AutoSelect {
					p = ptr(def)
					p.BuildAlgo = algo
				}
				if i, g := def.Degrees(n); i != n-1 || g != n-1 {
					t.Fatalf("Degrees(%d) = %d, %d", n, i, g)
				}
				idx, err := cagra.Build(res, hostMatrix(t, data, n, smallDim), p)
				if err != nil {
					t.Fatal(err)
				}
				safetest.Close(t, idx)
				if idx.Rows() != n || idx.GraphDegree() != n-1 {
					t.Fatalf("rows %d degree %d, want %d and %d", idx.Rows(), idx.GraphDegree(), n, n-1)
				}
				findsItself(t, res, idx, data, n)
			})
		}
	}
}

// Degrees: the intermediate degree is lowered to rows-1, then the graph
// degree to the intermediate one; IterativeSearch keeps them.
func TestDegrees(t *testing.T) {
	for _, c := range []struct {
		algo                       cagra.GraphBuildAlgo
		inter, graph, rows, wi, wg int
	}{
		{cagra.AutoSelect, 128, 64, 1000, 128, 64},
		{cagra.AutoSelect, 128, 64, 100, 99, 64},
		{cagra.AutoSelect, 128, 64, 50, 49, 49},
		{cagra.IVFPQ, 16, 32, 1000, 16, 16}, // intermediate below graph: graph lowered
		{cagra.NNDescent, 8, 8, 2, 1, 1},
		{cagra.IterativeSearch, 128, 64, 64, 128, 64},
	} {
		p := cagra.IndexParams{BuildAlgo: c.algo, IntermediateGraphDegree: c.inter, GraphDegree: c.graph}
		if i, g := p.Degrees(c.rows); i != c.wi || g != c.wg {
			t.Errorf("%+v: Degrees(%d) = %d, %d, want %d, %d", c, c.rows, i, g, c.wi, c.wg)
		}
	}
	// nil params are cuVS's defaults, as for Build
	def, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	var none *cagra.IndexParams
	if i, g := none.Degrees(50); i != 49 || g != min(49, def.GraphDegree) {
		t.Errorf("nil params: Degrees(50) = %d, %d, want 49, %d", i, g, min(49, def.GraphDegree))
	}
}

// An IntermediateGraphDegree below GraphDegree lowers GraphDegree (cuVS
// warns and builds), over enough rows too.
func TestIntermediateBelowDegree(t *testing.T) {
	f := setup(t)
	p := params(t)
	p.GraphDegree, p.IntermediateGraphDegree = 16, 12
	idx := build(t, f.res, f.dataset, p)
	if idx.GraphDegree() != 12 {
		t.Fatalf("degree %d, want 12", idx.GraphDegree())
	}
	search(t, f, idx, f.n64, f.data, nil, nil)
}

// Merge builds over the merged rows as Build does: two indexes of 3 and 4
// rows (the C API suite's 7) merge with the defaults into degree 6; a
// filter keeping 3 rows gives degree 2; one kept row is refused.
func TestSmallDataMerge(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(7, 7, smallDim)
	a, err := cagra.Build(res, hostMatrix(t, data[:3*smallDim], 3, smallDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, a)
	b, err := cagra.Build(res, hostMatrix(t, data[3*smallDim:], 4, smallDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, b)
	if a.GraphDegree() != 2 || b.GraphDegree() != 3 {
		t.Fatalf("degrees %d and %d, want 2 and 3", a.GraphDegree(), b.GraphDegree())
	}
	m, err := cagra.Merge(res, nil, []*cagra.Index{a, b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, m)
	if m.Rows() != 7 || m.GraphDegree() != 6 {
		t.Fatalf("merged: rows %d degree %d, want 7 and 6", m.Rows(), m.GraphDegree())
	}
	findsItself(t, res, m, data, 7)

	keep3, err := safe.NewBitsetFilterAllowing(res, 7, []int64{0, 3, 6})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, keep3)
	m3, err := cagra.Merge(res, nil, []*cagra.Index{a, b}, keep3)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, m3)
	if m3.Rows() != 3 || m3.GraphDegree() != 2 {
		t.Fatalf("filtered merge: rows %d degree %d, want 3 and 2", m3.Rows(), m3.GraphDegree())
	}
	kept := append(append(append([]float32{}, data[0:smallDim]...), data[3*smallDim:4*smallDim]...), data[6*smallDim:]...)
	findsItself(t, res, m3, kept, 3)

	keep1, err := safe.NewBitsetFilterAllowing(res, 7, []int64{5})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, keep1)
	def, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	before := calls()
	if _, err := cagra.Merge(res, &def, []*cagra.Index{a, b}, keep1); !isArg(err, "filter") {
		t.Errorf("merge keeping one row: %v", err)
	}
	if fns := called(before); fns != nil {
		t.Errorf("refused after calling %v", fns)
	}
}

// What cuVS cannot build is refused before any C call: one row (the degree
// would be 0), and IterativeSearch over too few rows with cuVS's reason
// (iterative_build_graph keeps the degrees; measured on 26.08.01: 4 and 40
// rows fail with it).
func TestSmallDataRefused(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	def, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	iter := def
	iter.BuildAlgo = cagra.IterativeSearch
	data := safetest.Random(9, 64, smallDim)
	for _, c := range []struct {
		name string
		rows int
		p    *cagra.IndexParams
		arg  string
	}{
		{"one row", 1, nil, "dataset"},
		{"iterative 4 rows", 4, &iter, "params.BuildAlgo"},
		{"iterative 40 rows", 40, &iter, "params.BuildAlgo"},
		{"iterative 62 rows", 62, &iter, "params.BuildAlgo"}, // first round: 31 rows for 32 edges
		{"iterative 63 rows", 63, &iter, "params.BuildAlgo"}, // 63 rows for GraphDegree 64
	} {
		t.Run(c.name, func(t *testing.T) {
			ds := hostMatrix(t, data[:c.rows*smallDim], c.rows, smallDim)
			before := calls()
			_, err := cagra.Build(res, ds, c.p)
			if !isArg(err, c.arg) {
				t.Fatalf("want an error about %s, got %v", c.arg, err)
			}
			if c.p != nil && !strings.Contains(err.Error(), "Could not generate an intermediate CAGRA graph") {
				t.Errorf("not cuVS's reason: %v", err)
			}
			var ae *safe.ArgError
			if !errors.As(err, &ae) {
				t.Errorf("%T", err)
			}
			// The nil-params case reads cuVS's defaults first.
			if fns := called(before); c.p != nil && fns != nil {
				t.Errorf("refused after calling %v", fns)
			}
		})
	}
}

// cuVS 26.08's multi-partition search over partitions of two rows (degree
// 1 each, the defaults lowered) finds every row; MULTI_KERNEL and
// partitions of different degrees are refused before the C call, as cuVS
// refuses them (search_multi_partition).
func TestSmallDataMultiPartition(t *testing.T) {
	safetest.Check(t)
	if !on2608() {
		t.Skip("cuvsCagraSearchMultiPartition is 26.08's")
	}
	res := safetest.Resources(t)
	data := safetest.Random(11, 8, smallDim)
	part := func(from, n int) *cagra.Index {
		x, err := cagra.Build(res, hostMatrix(t, data[from*smallDim:(from+n)*smallDim], n, smallDim), nil)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, x)
		return x
	}
	a, b, c := part(0, 2), part(2, 2), part(4, 4)
	const k = 2
	q := deviceMatrix(t, res, data[:4*smallDim], 4, smallDim)
	pids := newDevice[uint32](t, res, 4, k)
	nb := newDevice[int64](t, res, 4, k)
	d := newDevice[float32](t, res, 4, k)
	if err := cagra.SearchMultiPartition(res, nil, []*cagra.Index{a, b}, q, pids, nb, d, nil); err != nil {
		t.Fatal(err)
	}
	if err := res.Sync(); err != nil {
		t.Fatal(err)
	}
	p, _ := pids.ToHost(res)
	ids, _ := nb.ToHost(res)
	for i := 0; i < 4; i++ {
		found := false
		for j := 0; j < k; j++ {
			found = found || int64(p[i*k+j])*2+ids[i*k+j] == int64(i)
		}
		if !found {
			t.Errorf("row %d not found: partitions %v rows %v", i, p[i*k:(i+1)*k], ids[i*k:(i+1)*k])
		}
	}
	mk := cagra.SearchParams{Algo: cagra.MultiKernel}
	for _, c := range []struct {
		name  string
		sp    *cagra.SearchParams
		parts []*cagra.Index
		arg   string
		text  string
	}{
		{"MultiKernel", &mk, []*cagra.Index{a, b}, "params.Algo", "MULTI_KERNEL is not supported for multi-partition search"},
		{"degrees 1 and 3", nil, []*cagra.Index{a, c}, "partitions", "All partitions must use the same graph degree"},
	} {
		before := calls()
		err := cagra.SearchMultiPartition(res, c.sp, c.parts, q, pids, nb, d, nil)
		if !isArg(err, c.arg) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v", c.name, err)
		}
		if fns := called(before); fns != nil {
			t.Errorf("%s: refused after calling %v", c.name, fns)
		}
	}
}

// The smallest IterativeSearch builds the rule of checkRows lets through,
// with cuVS's defaults (GraphDegree 64), reach cuVS and build at the
// degree asked (iterative_build_graph keeps it), every row finding itself.
// The double builds them; on the real library this is where the rule,
// read from cuVS's sources, meets the kernels.
func TestIterativeSmallestBuilds(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	iter, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	iter.BuildAlgo = cagra.IterativeSearch
	for _, n := range []int{64, 65, 130} {
		t.Run(fmt.Sprintf("%d rows", n), func(t *testing.T) {
			data := safetest.Random(uint64(300+n), n, smallDim)
			idx, err := cagra.Build(res, hostMatrix(t, data, n, smallDim), &iter)
			if err != nil {
				t.Fatal(err)
			}
			safetest.Close(t, idx)
			if idx.Rows() != n || idx.GraphDegree() != iter.GraphDegree {
				t.Fatalf("rows %d degree %d, want %d and %d", idx.Rows(), idx.GraphDegree(), n, iter.GraphDegree)
			}
			findsItself(t, res, idx, data, n)
		})
	}
}
