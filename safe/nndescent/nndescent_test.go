package nndescent_test

import (
	"errors"
	"math"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/nndescent"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows   = 600
	dim    = 8
	degree = 10
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func params(t *testing.T) nndescent.IndexParams {
	t.Helper()
	p, err := nndescent.DefaultIndexParams()
	must(t, err)
	p.GraphDegree = degree
	p.IntermediateGraphDegree = 2 * degree
	return p
}

// cuVS's defaults, read from the library, are those of the C++
// index_params (graph degree 64, intermediate 1.5 × 64).
func TestDefaultIndexParams(t *testing.T) {
	p, err := nndescent.DefaultIndexParams()
	must(t, err)
	want := nndescent.IndexParams{Metric: safe.L2Expanded, MetricArg: 2, GraphDegree: 64, IntermediateGraphDegree: 96,
		MaxIterations: 20, TerminationThreshold: 0.0001, ReturnDistances: true, DistCompDType: nndescent.DistCompAuto}
	if p != want {
		t.Errorf("defaults %+v, want %+v", p, want)
	}
}

func checkDistances(t *testing.T, data []float32, graph []uint32, dist []float32, m safe.Metric) {
	t.Helper()
	bad := 0
	for i := 0; i < len(graph)/degree; i++ {
		for j := 0; j < degree; j++ {
			id := int(graph[i*degree+j])
			a, b := data[i*dim:(i+1)*dim], data[id*dim:(id+1)*dim]
			var want float32
			switch m {
			case safe.L2Expanded:
				want = safetest.L2(a, b)
			case safe.InnerProduct:
				want = -safetest.NegInner(a, b)
			}
			got := dist[i*degree+j]
			if math.Abs(float64(got-want)) > 1e-2*math.Max(1, math.Abs(float64(want))) {
				if bad++; bad < 5 {
					t.Errorf("row %d, neighbour %d (%d): distance %v, want %v", i, j, id, got, want)
				}
			}
		}
	}
}

// The graph from device and from host memory: each row's GraphDegree
// neighbours, never itself nor a repeat, with a recall against the exact
// kNN graph of at least 0.9 for L2 (cuVS's NN-Descent reaches that on such
// data; the double is exact), and each edge's distance that of its rows.
func TestBuildRecall(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(1, rows, dim)
	dev, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	must(t, err)
	safetest.Close(t, dev)
	host, err := dlpack.NewHostMatrix(data, rows, dim)
	must(t, err)
	for _, c := range []struct {
		name    string
		dataset dlpack.Tensor
		metric  safe.Metric
		dist    safetest.Metric
		recall  float64
	}{
		{"device L2", dev, safe.L2Expanded, safetest.L2, 0.9},
		{"host L2", host, safe.L2Expanded, safetest.L2, 0.9},
		// Inner products are no metric: NN-Descent's neighbours of
		// neighbours find fewer of the largest ones.
		{"device inner product", dev, safe.InnerProduct, safetest.NegInner, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := params(t)
			p.Metric = c.metric
			idx, err := nndescent.Build(res, c.dataset, &p)
			must(t, err)
			safetest.Close(t, idx)
			if idx.Rows() != rows || idx.GraphDegree() != degree || !idx.HasDistances() || idx.Metric() != c.metric {
				t.Fatalf("rows %d, degree %d, distances %v, metric %v", idx.Rows(), idx.GraphDegree(), idx.HasDistances(), idx.Metric())
			}
			g, err := idx.GraphSlice(res)
			must(t, err)
			if r := safetest.GraphRecall(t, data, dim, g, degree, c.dist, false); r < c.recall {
				t.Errorf("recall %.3f, want at least %.1f", r, c.recall)
			}
			d, err := idx.DistancesSlice(res)
			must(t, err)
			checkDistances(t, data, g, d, c.metric)
		})
	}
}

// Graph and Distances into device tensors give what the slices give.
func TestGraphIntoDevice(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(2, rows, dim)
	dev, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	must(t, err)
	safetest.Close(t, dev)
	p := params(t)
	idx, err := nndescent.Build(res, dev, &p)
	must(t, err)
	safetest.Close(t, idx)
	gd, err := safe.NewDeviceMatrix[uint32](res, rows, degree)
	must(t, err)
	safetest.Close(t, gd)
	dd, err := safe.NewDeviceMatrix[float32](res, rows, degree)
	must(t, err)
	safetest.Close(t, dd)
	must(t, idx.Graph(res, gd))
	must(t, idx.Distances(res, dd))
	g1, err := gd.ToHost(res)
	must(t, err)
	d1, err := dd.ToHost(res)
	must(t, err)
	g2, err := idx.GraphSlice(res)
	must(t, err)
	d2, err := idx.DistancesSlice(res)
	must(t, err)
	for i := range g1 {
		if g1[i] != g2[i] || d1[i] != d2[i] {
			t.Fatalf("slot %d: device (%d, %v), slices (%d, %v)", i, g1[i], d1[i], g2[i], d2[i])
		}
	}
}

// BuildInto writes the graph into the caller's host matrix (even with
// DefaultIndexParams' ReturnDistances) and keeps nothing.
func TestBuildInto(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(3, rows, dim)
	dev, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	must(t, err)
	safetest.Close(t, dev)
	out := make([]uint32, rows*degree)
	for i := range out {
		out[i] = math.MaxUint32
	}
	g, err := dlpack.NewHostMatrix(out, rows, degree)
	must(t, err)
	p := params(t)
	p.ReturnDistances = true
	must(t, nndescent.BuildInto(res, dev, g, &p))
	if r := safetest.GraphRecall(t, data, dim, out, degree, safetest.L2, false); r < 0.9 {
		t.Errorf("recall %.3f, want at least 0.9", r)
	}
	pinned, err := safe.NewPinnedMatrix[uint32](rows, degree)
	must(t, err)
	safetest.Close(t, pinned)
	must(t, nndescent.BuildInto(res, dev, pinned, &p))
	// NN-Descent on a GPU is not deterministic (its joins race): the
	// second graph is checked as the first, not compared slot by slot (on
	// the real library, 26.06, slot 5149 of two builds differed).
	if r := safetest.GraphRecall(t, data, dim, pinned.Data(), degree, safetest.L2, false); r < 0.9 {
		t.Errorf("pinned: recall %.3f, want at least 0.9", r)
	}
}

// With GraphDegree = rows-1 and no distances every other row is a
// neighbour (cuVS writes the complete graph without NN-Descent).
func TestCompleteGraph(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const n = 12
	data := safetest.Random(4, n, dim)
	ds, err := dlpack.NewHostMatrix(data, n, dim)
	must(t, err)
	p := params(t)
	p.GraphDegree, p.IntermediateGraphDegree, p.ReturnDistances = n-1, n-1, false
	idx, err := nndescent.Build(res, ds, &p)
	must(t, err)
	safetest.Close(t, idx)
	g, err := idx.GraphSlice(res)
	must(t, err)
	if r := safetest.GraphRecall(t, data, dim, g, n-1, safetest.L2, false); r != 1 {
		t.Errorf("recall %v of the complete graph, want 1", r)
	}
	if _, err := idx.DistancesSlice(res); !safetest.IsArg(err, "index") {
		t.Errorf("DistancesSlice without ReturnDistances: %v", err)
	}
}

// Bad input is refused before any C call, naming the argument.
func TestRefused(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(5, rows, dim)
	dev, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	must(t, err)
	safetest.Close(t, dev)
	f64, err := dlpack.NewHostMatrix(make([]float64, rows*dim), rows, dim)
	must(t, err)
	one, err := dlpack.NewHostMatrix(data[:dim], 1, dim)
	must(t, err)
	nan := append([]float32(nil), data...)
	nan[7*dim] = float32(math.NaN())
	hnan, err := dlpack.NewHostMatrix(nan, rows, dim)
	must(t, err)
	with := func(f func(*nndescent.IndexParams)) *nndescent.IndexParams {
		p := params(t)
		f(&p)
		return &p
	}
	for _, c := range []struct {
		name, arg string
		ds        dlpack.Tensor
		p         *nndescent.IndexParams
	}{
		{"nil dataset", "dataset", nil, nil},
		{"float64 dataset", "dataset", f64, nil},
		{"one row", "dataset", one, nil},
		{"NaN row", "dataset", hnan, nil},
		{"degree 0", "params.GraphDegree", dev, with(func(p *nndescent.IndexParams) { p.GraphDegree = 0 })},
		{"degree = rows", "params.GraphDegree", dev, with(func(p *nndescent.IndexParams) { p.GraphDegree, p.IntermediateGraphDegree = rows, rows })},
		{"intermediate below degree", "params.IntermediateGraphDegree", dev, with(func(p *nndescent.IndexParams) { p.IntermediateGraphDegree = degree - 1 })},
		{"Linf", "params.Metric", dev, with(func(p *nndescent.IndexParams) { p.Metric = safe.Linf })},
		{"BitwiseHamming on floats", "params.Metric", dev, with(func(p *nndescent.IndexParams) { p.Metric = safe.BitwiseHamming })},
		{"negative iterations", "params.MaxIterations", dev, with(func(p *nndescent.IndexParams) { p.MaxIterations = -1 })},
		{"NaN threshold", "params.TerminationThreshold", dev, with(func(p *nndescent.IndexParams) { p.TerminationThreshold = float32(math.NaN()) })},
		{"bad precision", "params.DistCompDType", dev, with(func(p *nndescent.IndexParams) { p.DistCompDType = 7 })},
	} {
		safetest.Refused(t, c.name, c.arg, "", func() error {
			idx, err := nndescent.Build(res, c.ds, c.p)
			if idx != nil {
				t.Errorf("%s: an index with error %v", c.name, err)
				idx.Close()
			}
			return err
		})
	}
	devGraph, err := safe.NewDeviceMatrix[uint32](res, rows, degree)
	must(t, err)
	safetest.Close(t, devGraph)
	narrow, err := dlpack.NewHostMatrix(make([]uint32, rows*(degree-1)), rows, degree-1)
	must(t, err)
	i64, err := dlpack.NewHostMatrix(make([]int64, rows*degree), rows, degree)
	must(t, err)
	for _, c := range []struct {
		name string
		g    dlpack.TensorMut
	}{{"nil graph", nil}, {"device graph", devGraph}, {"narrow graph", narrow}, {"int64 graph", i64}} {
		safetest.Refused(t, c.name, "graph", "", func() error { return nndescent.BuildInto(res, dev, c.g, nil) })
	}
	idx, err := nndescent.Build(res, dev, with(func(p *nndescent.IndexParams) {}))
	must(t, err)
	safetest.Close(t, idx)
	short, err := safe.NewDeviceMatrix[uint32](res, rows-1, degree)
	must(t, err)
	safetest.Close(t, short)
	fdst, err := safe.NewDeviceMatrix[float32](res, rows, degree)
	must(t, err)
	safetest.Close(t, fdst)
	safetest.Refused(t, "short dst", "dst", "shape", func() error { return idx.Graph(res, short) })
	safetest.Refused(t, "float dst for the graph", "dst", "dtype", func() error { return idx.Graph(res, fdst) })
	safetest.Refused(t, "uint32 dst for distances", "dst", "dtype", func() error { return idx.Distances(res, devGraph) })
	safetest.Refused(t, "nil dst", "dst", "", func() error { return idx.Graph(res, nil) })
	must(t, idx.Close())
	if err := idx.Graph(res, devGraph); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Graph after Close: %v", err)
	}
	var nilIdx *nndescent.Index
	if err := nilIdx.Graph(res, devGraph); !safetest.IsArg(err, "index") {
		t.Errorf("nil index: %v", err)
	}
}

// A failure of each C call is reported as a *safe.Error naming it, and
// leaves nothing behind (safetest.Check: handles and the double's counters
// balanced). A failed destroy keeps the index: the next Close frees it.
func TestFaults(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "fault injection")
	res := safetest.Resources(t)
	data := safetest.Random(6, rows, dim)
	dev, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	must(t, err)
	safetest.Close(t, dev)
	p := params(t)
	idx, err := nndescent.Build(res, dev, &p)
	must(t, err)
	safetest.Close(t, idx)
	g, err := dlpack.NewHostMatrix(make([]uint32, rows*degree), rows, degree)
	must(t, err)
	for _, s := range []struct {
		fn  string
		run func() error
	}{
		{"cuvsNNDescentIndexParamsCreate", func() error { _, err := nndescent.DefaultIndexParams(); return err }},
		{"cuvsNNDescentIndexCreate", func() error { _, err := nndescent.Build(res, dev, &p); return err }},
		{"cuvsNNDescentBuild", func() error { _, err := nndescent.Build(res, dev, &p); return err }},
		{"cuvsStreamSync", func() error { _, err := nndescent.Build(res, dev, &p); return err }},
		{"cuvsNNDescentBuild", func() error { return nndescent.BuildInto(res, dev, g, &p) }},
		{"cuvsNNDescentIndexDestroy", func() error { return nndescent.BuildInto(res, dev, g, &p) }},
		{"cuvsNNDescentIndexGetGraph", func() error { _, err := idx.GraphSlice(res); return err }},
		{"cuvsNNDescentIndexGetDistances", func() error { _, err := idx.DistancesSlice(res); return err }},
	} {
		ctl.FailNext(s.fn, "injected")
		err := s.run()
		var ce *safe.Error
		if !errors.As(err, &ce) || ce.Func != s.fn {
			t.Errorf("%s: got %v, want its failure", s.fn, err)
		}
		ctl.ClearFaults()
	}
	// Build one and fail its Close.
	other, err := nndescent.Build(res, dev, &p)
	must(t, err)
	ctl.FailNext("cuvsNNDescentIndexDestroy", "injected")
	if err := other.Close(); err == nil {
		t.Error("Close with a failing destroy: no error")
	}
	must(t, other.Close())
	if _, err := other.GraphSlice(res); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("GraphSlice after Close: %v", err)
	}
}

// Reads run in parallel, each goroutine with its own Resources, and give
// the same graph.
func TestConcurrentReads(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(7, rows, dim)
	dev, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	must(t, err)
	safetest.Close(t, dev)
	p := params(t)
	idx, err := nndescent.Build(res, dev, &p)
	must(t, err)
	safetest.Close(t, idx)
	want, err := idx.GraphSlice(res)
	must(t, err)
	errs := make(chan error, 4)
	for range 4 {
		r := safetest.Resources(t)
		go func() {
			for range 5 {
				g, err := idx.GraphSlice(r)
				if err == nil {
					for i := range g {
						if g[i] != want[i] {
							err = errors.New("a different graph")
							break
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
