package allneighbors_test

import (
	"errors"
	"math"
	"sort"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/allneighbors"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows = 500
	dim  = 8
	k    = 8
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func defaults(t *testing.T) allneighbors.IndexParams {
	t.Helper()
	p, err := allneighbors.DefaultIndexParams()
	must(t, err)
	return p
}

type fixture struct {
	res  *safe.Resources
	data []float32
	dev  *safe.DeviceMatrix[float32]
	host *dlpack.HostMatrix[float32]
	ind  *safe.DeviceMatrix[int64]
	dist *safe.DeviceMatrix[float32]
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{res: safetest.Resources(t), data: safetest.Random(1, rows, dim)}
	var err error
	f.dev, err = safe.DeviceMatrixFrom(f.res, f.data, rows, dim)
	must(t, err)
	safetest.Close(t, f.dev)
	f.host, err = dlpack.NewHostMatrix(f.data, rows, dim)
	must(t, err)
	f.ind, err = safe.NewDeviceMatrix[int64](f.res, rows, k)
	must(t, err)
	safetest.Close(t, f.ind)
	f.dist, err = safe.NewDeviceMatrix[float32](f.res, rows, k)
	must(t, err)
	safetest.Close(t, f.dist)
	return f
}

func (f *fixture) read(t *testing.T) ([]int64, []float32) {
	t.Helper()
	ids, err := f.ind.ToHost(f.res)
	must(t, err)
	d, err := f.dist.ToHost(f.res)
	must(t, err)
	return ids, d
}

func near(a, b float32) bool {
	return math.Abs(float64(a-b)) <= 1e-2*math.Max(1, math.Abs(float64(b)))
}

// checkEdges: every reported distance is the metric's distance of its rows.
func checkEdges(t *testing.T, data []float32, ids []int64, d []float32, dist func(a, b []float32) float32) {
	t.Helper()
	bad := 0
	for i := 0; i < rows; i++ {
		for j := 0; j < k; j++ {
			id := ids[i*k+j]
			if id < 0 || id >= rows {
				t.Fatalf("row %d: id %d", i, id)
			}
			want := dist(data[i*dim:(i+1)*dim], data[id*dim:(id+1)*dim])
			if !near(d[i*k+j], want) {
				if bad++; bad < 5 {
					t.Errorf("row %d, slot %d (id %d): distance %v, want %v", i, j, id, d[i*k+j], want)
				}
			}
		}
	}
}

func selfFirst(t *testing.T, ids []int64, d []float32) {
	t.Helper()
	bad := 0
	for i := 0; i < rows; i++ {
		if ids[i*k] != int64(i) || math.Abs(float64(d[i*k])) > 1e-4 {
			if bad++; bad < 5 {
				t.Errorf("row %d starts with %d at %v, want itself at 0", i, ids[i*k], d[i*k])
			}
		}
	}
}

// Each builder gives a graph of the rows' nearest rows (recall against the
// exact graph in Go: brute force exact up to float rounding, IVF-PQ and
// NN-Descent approximate), each row first in its own list (NN-Descent
// shifted by cuVS), and the metric's distances.
func TestBuilders(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	for _, c := range []struct {
		name   string
		ds     dlpack.Tensor
		p      func(*allneighbors.IndexParams)
		recall float64
	}{
		{"brute force, device", f.dev, func(p *allneighbors.IndexParams) {}, 0.99},
		{"brute force, host", f.host, func(p *allneighbors.IndexParams) {}, 0.99},
		{"NN-Descent", f.dev, func(p *allneighbors.IndexParams) { p.Algo = allneighbors.NNDescent }, 0.9},
		{"NN-Descent, params", f.host, func(p *allneighbors.IndexParams) {
			p.Algo = allneighbors.NNDescent
			p.NNDescent = &allneighbors.NNDescentParams{GraphDegree: 16, IntermediateGraphDegree: 32}
		}, 0.9},
		{"IVF-PQ", f.host, func(p *allneighbors.IndexParams) {
			p.Algo = allneighbors.IVFPQ
			p.IVFPQ = &allneighbors.IVFPQParams{NLists: 8, PQDim: 8}
		}, 0.8},
		// Batches find only the neighbours inside a row's own clusters.
		{"brute force, batched", f.host, func(p *allneighbors.IndexParams) { p.NClusters, p.OverlapFactor = 4, 2 }, 0.7},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := defaults(t)
			c.p(&p)
			must(t, allneighbors.Build(f.res, c.ds, f.ind, f.dist, &p))
			ids, d := f.read(t)
			if r := safetest.GraphRecall(t, f.data, dim, ids, k, safetest.L2, true); r < c.recall {
				t.Errorf("recall %.3f, want at least %.2f", r, c.recall)
			}
			selfFirst(t, ids, d)
			checkEdges(t, f.data, ids, d, safetest.L2)
		})
	}
	t.Run("NN-Descent, inner product", func(t *testing.T) {
		p := defaults(t)
		p.Algo, p.Metric = allneighbors.NNDescent, safe.InnerProduct
		must(t, allneighbors.Build(f.res, f.dev, f.ind, f.dist, &p))
		ids, d := f.read(t)
		// Inner products are no metric: NN-Descent finds fewer of them.
		if r := safetest.GraphRecall(t, f.data, dim, ids, k, safetest.NegInner, false); r < 0.5 {
			t.Errorf("recall %.3f, want at least 0.5", r)
		}
		checkEdges(t, f.data, ids, d, func(a, b []float32) float32 { return -safetest.NegInner(a, b) })
	})
	t.Run("no distances", func(t *testing.T) {
		must(t, allneighbors.Build(f.res, f.dev, f.ind, nil, nil))
		ids, err := f.ind.ToHost(f.res)
		must(t, err)
		if r := safetest.GraphRecall(t, f.data, dim, ids, k, safetest.L2, true); r < 0.99 {
			t.Errorf("recall %.3f", r)
		}
	})
}

// Mutual reachability: each core distance is the row's distance to its
// k-th neighbour (exactly the k-th nearest with brute force; no nearer with
// NN-Descent, which may miss some), and each reported distance is
// max(core[i], core[j], alpha·d(i, j)) of its rows under the reported core
// distances; with brute force they are row i's k smallest (compared as
// sorted values: ties are many).
func TestMutualReachability(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	core, err := safe.NewDeviceVector[float32](f.res, rows)
	must(t, err)
	safetest.Close(t, core)
	const alpha = 1.5
	want := make([]float32, rows) // exact k-th distances, the row itself first
	row := make([]float32, rows)
	for i := 0; i < rows; i++ {
		for j := 0; j < rows; j++ {
			row[j] = safetest.L2(f.data[i*dim:(i+1)*dim], f.data[j*dim:(j+1)*dim])
		}
		sort.Slice(row, func(a, b int) bool { return row[a] < row[b] })
		want[i] = row[k-1]
	}
	for _, algo := range []allneighbors.Algo{allneighbors.BruteForce, allneighbors.NNDescent} {
		t.Run(algo.String(), func(t *testing.T) {
			exact := algo == allneighbors.BruteForce
			p := defaults(t)
			p.Algo = algo
			must(t, allneighbors.BuildMutualReachability(f.res, f.dev, f.ind, f.dist, core, alpha, &p))
			ids, d := f.read(t)
			c := make([]float32, rows)
			must(t, core.CopyToHost(f.res, c))
			bad := 0
			for i := 0; i < rows; i++ {
				if (exact && !near(c[i], want[i])) || (!exact && c[i] < want[i]*(1-1e-2)) {
					if bad++; bad < 5 {
						t.Errorf("core[%d] = %v, the exact k-th distance is %v", i, c[i], want[i])
					}
				}
			}
			mrd := func(i, j int) float32 {
				v := float32(alpha) * safetest.L2(f.data[i*dim:(i+1)*dim], f.data[j*dim:(j+1)*dim])
				return max(v, c[i], c[j])
			}
			for i := 0; i < rows && bad < 5; i++ {
				for j := 0; j < rows; j++ {
					row[j] = mrd(i, j)
				}
				sort.Slice(row, func(a, b int) bool { return row[a] < row[b] })
				got := append([]float32(nil), d[i*k:(i+1)*k]...)
				sort.Slice(got, func(a, b int) bool { return got[a] < got[b] })
				for j := 0; j < k; j++ {
					if !near(d[i*k+j], mrd(i, int(ids[i*k+j]))) || (exact && !near(got[j], row[j])) {
						bad++
						t.Errorf("row %d: distances %v (ids %v), want the smallest of %v", i, d[i*k:(i+1)*k], ids[i*k:(i+1)*k], row[:k])
						break
					}
				}
			}
		})
	}
}

// Host outputs give the same graph as device outputs on both releases:
// 26.08 writes them, 26.06 writes device buffers the package copies to
// them. Core distances too. A device dataset with host outputs is refused
// on both. BuildSlice gives that graph in Go memory.
func TestHostOutputs(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	must(t, allneighbors.Build(f.res, f.host, f.ind, f.dist, nil))
	ids, d := f.read(t)
	hi := make([]int64, rows*k)
	hd := make([]float32, rows*k)
	him, err := dlpack.NewHostMatrix(hi, rows, k)
	must(t, err)
	hdm, err := dlpack.NewHostMatrix(hd, rows, k)
	must(t, err)
	must(t, allneighbors.Build(f.res, f.host, him, hdm, nil))
	for i := range ids {
		if hi[i] != ids[i] || hd[i] != d[i] {
			t.Fatalf("slot %d: host (%d, %v), device (%d, %v)", i, hi[i], hd[i], ids[i], d[i])
		}
	}
	// Indices alone.
	clear(hi)
	must(t, allneighbors.Build(f.res, f.host, him, nil, nil))
	for i := range ids {
		if hi[i] != ids[i] {
			t.Fatalf("slot %d, no distances: host %d, device %d", i, hi[i], ids[i])
		}
	}
	// Mutual reachability: core distances in host memory as well.
	dcore, err := safe.NewDeviceVector[float32](f.res, rows)
	must(t, err)
	safetest.Close(t, dcore)
	must(t, allneighbors.BuildMutualReachability(f.res, f.host, f.ind, f.dist, dcore, 1, nil))
	ids, d = f.read(t)
	wantCore := make([]float32, rows)
	must(t, dcore.CopyToHost(f.res, wantCore))
	hc := make([]float32, rows)
	hcv := dlpack.NewHostVector(hc)
	must(t, allneighbors.BuildMutualReachability(f.res, f.host, him, hdm, hcv, 1, nil))
	for i := range ids {
		if hi[i] != ids[i] || hd[i] != d[i] {
			t.Fatalf("mutual reachability, slot %d: host (%d, %v), device (%d, %v)", i, hi[i], hd[i], ids[i], d[i])
		}
	}
	for i := range hc {
		if hc[i] != wantCore[i] {
			t.Fatalf("core distance %d: host %v, device %v", i, hc[i], wantCore[i])
		}
	}
	safetest.Refused(t, "host outputs, device dataset", "indices", "host dataset", func() error {
		return allneighbors.Build(f.res, f.dev, him, hdm, nil)
	})
	must(t, allneighbors.Build(f.res, f.host, f.ind, f.dist, nil))
	ids, d = f.read(t)
	r, err := allneighbors.BuildSlice(f.res, f.data, rows, dim, k, nil)
	must(t, err)
	if r.K != k || r.Len() != rows {
		t.Fatalf("BuildSlice: %d rows of %d", r.Len(), r.K)
	}
	for i := range ids {
		if r.Neighbors[i] != ids[i] || r.Distances[i] != d[i] {
			t.Fatalf("slot %d: BuildSlice (%d, %v), Build (%d, %v)", i, r.Neighbors[i], r.Distances[i], ids[i], d[i])
		}
	}
}

// Bad input is refused before any C call, naming the argument.
func TestRefused(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	short, err := safe.NewDeviceMatrix[int64](f.res, rows-1, k)
	must(t, err)
	safetest.Close(t, short)
	i32, err := safe.NewDeviceMatrix[int32](f.res, rows, k)
	must(t, err)
	safetest.Close(t, i32)
	wide, err := safe.NewDeviceMatrix[float32](f.res, rows, k+1)
	must(t, err)
	safetest.Close(t, wide)
	all, err := safe.NewDeviceMatrix[int64](f.res, rows, rows)
	must(t, err)
	safetest.Close(t, all)
	hostDist, err := dlpack.NewHostMatrix(make([]float32, rows*k), rows, k)
	must(t, err)
	f64, err := dlpack.NewHostMatrix(make([]float64, rows*dim), rows, dim)
	must(t, err)
	nan := append([]float32(nil), f.data...)
	nan[3] = float32(math.Inf(-1))
	hnan, err := dlpack.NewHostMatrix(nan, rows, dim)
	must(t, err)
	with := func(fn func(*allneighbors.IndexParams)) *allneighbors.IndexParams {
		p := defaults(t)
		fn(&p)
		return &p
	}
	for _, c := range []struct {
		name, arg string
		ds        dlpack.Tensor
		ind       dlpack.TensorMut
		dist      dlpack.TensorMut
		p         *allneighbors.IndexParams
	}{
		{"nil dataset", "dataset", nil, f.ind, f.dist, nil},
		{"float64 dataset", "dataset", f64, f.ind, f.dist, nil},
		{"-Inf in the dataset", "dataset", hnan, f.ind, f.dist, nil},
		{"nil indices", "indices", f.dev, nil, f.dist, nil},
		{"int32 indices", "indices", f.dev, i32, f.dist, nil},
		{"short indices", "indices", f.dev, short, f.dist, nil},
		{"distances of another shape", "distances", f.dev, f.ind, wide, nil},
		{"host distances, device indices", "distances", f.host, f.ind, hostDist, nil},
		{"k = rows with NN-Descent", "indices", f.dev, all, nil, with(func(p *allneighbors.IndexParams) { p.Algo = allneighbors.NNDescent })},
		{"bad algo", "params.Algo", f.dev, f.ind, f.dist, with(func(p *allneighbors.IndexParams) { p.Algo = 9 })},
		{"Linf with NN-Descent", "params.Metric", f.dev, f.ind, f.dist, with(func(p *allneighbors.IndexParams) { p.Algo, p.Metric = allneighbors.NNDescent, safe.Linf })},
		{"cosine with IVF-PQ", "params.Metric", f.host, f.ind, f.dist, with(func(p *allneighbors.IndexParams) { p.Algo, p.Metric = allneighbors.IVFPQ, safe.CosineExpanded })},
		{"IVF-PQ default lists for 500 rows", "params.IVFPQ.NLists", f.host, f.ind, f.dist, with(func(p *allneighbors.IndexParams) {
			p.Algo, p.IVFPQ = allneighbors.IVFPQ, &allneighbors.IVFPQParams{}
		})},
		{"IVF-PQ 3 bits", "params.IVFPQ.PQBits", f.host, f.ind, f.dist, with(func(p *allneighbors.IndexParams) {
			p.Algo, p.IVFPQ = allneighbors.IVFPQ, &allneighbors.IVFPQParams{NLists: 8, PQBits: 3}
		})},
		{"zero clusters", "params.NClusters", f.dev, f.ind, f.dist, with(func(p *allneighbors.IndexParams) { p.NClusters = 0 })},
		{"batching a device dataset", "dataset", f.dev, f.ind, f.dist, with(func(p *allneighbors.IndexParams) { p.NClusters, p.OverlapFactor = 4, 2 })},
		{"overlap = clusters", "params.OverlapFactor", f.host, f.ind, f.dist, with(func(p *allneighbors.IndexParams) { p.NClusters, p.OverlapFactor = 4, 4 })},
		{"NaN NN-Descent threshold", "params.NNDescent.TerminationThreshold", f.dev, f.ind, f.dist, with(func(p *allneighbors.IndexParams) {
			p.Algo, p.NNDescent = allneighbors.NNDescent, &allneighbors.NNDescentParams{TerminationThreshold: float32(math.NaN())}
		})},
	} {
		safetest.Refused(t, c.name, c.arg, "", func() error { return allneighbors.Build(f.res, c.ds, c.ind, c.dist, c.p) })
	}
	core, err := safe.NewDeviceVector[float32](f.res, rows)
	must(t, err)
	safetest.Close(t, core)
	safetest.Refused(t, "mrd without distances", "distances", "", func() error {
		return allneighbors.BuildMutualReachability(f.res, f.dev, f.ind, nil, core, 1, nil)
	})
	safetest.Refused(t, "mrd alpha 0", "alpha", "", func() error {
		return allneighbors.BuildMutualReachability(f.res, f.dev, f.ind, f.dist, core, 0, nil)
	})
	safetest.Refused(t, "mrd inner product", "params.Metric", "", func() error {
		return allneighbors.BuildMutualReachability(f.res, f.dev, f.ind, f.dist, core, 1, with(func(p *allneighbors.IndexParams) { p.Metric = safe.InnerProduct }))
	})
	safetest.Refused(t, "mrd with IVF-PQ", "params.Algo", "", func() error {
		return allneighbors.BuildMutualReachability(f.res, f.host, f.ind, f.dist, core, 1, with(func(p *allneighbors.IndexParams) {
			p.Algo, p.IVFPQ = allneighbors.IVFPQ, &allneighbors.IVFPQParams{NLists: 8}
		}))
	})
	safetest.Refused(t, "BuildSlice k 0", "k", "", func() error { _, err := allneighbors.BuildSlice(f.res, f.data, rows, dim, 0, nil); return err })
	safetest.Refused(t, "BuildSlice short data", "data", "", func() error { _, err := allneighbors.BuildSlice(f.res, f.data[1:], rows, dim, k, nil); return err })
	safetest.Refused(t, "BuildSlice NaN", "data", "", func() error { _, err := allneighbors.BuildSlice(f.res, nan, rows, dim, k, nil); return err })
}

// A failure of each C call is a *safe.Error naming it, and leaves nothing
// behind: the params (and the IVF-PQ / NN-Descent params they point to,
// destroyed by cuvsAllNeighborsIndexParamsDestroy) are freed once.
func TestFaults(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "fault injection")
	f := newFixture(t)
	ivf := &allneighbors.IndexParams{Algo: allneighbors.IVFPQ, Metric: safe.L2Expanded, NClusters: 1, OverlapFactor: 1, IVFPQ: &allneighbors.IVFPQParams{NLists: 8}}
	nnd := &allneighbors.IndexParams{Algo: allneighbors.NNDescent, Metric: safe.L2Expanded, NClusters: 1, OverlapFactor: 1, NNDescent: &allneighbors.NNDescentParams{}}
	for _, s := range []struct {
		fn string
		p  *allneighbors.IndexParams
	}{
		{"cuvsAllNeighborsIndexParamsCreate", nil},
		{"cuvsAllNeighborsBuild", nil},
		{"cuvsStreamSync", nil},
		{"cuvsIvfPqIndexParamsCreate", ivf},
		{"cuvsAllNeighborsBuild", ivf},
		{"cuvsNNDescentIndexParamsCreate", nnd},
		{"cuvsAllNeighborsBuild", nnd},
	} {
		ctl.FailNext(s.fn, "injected")
		err := allneighbors.Build(f.res, f.host, f.ind, f.dist, s.p)
		var ce *safe.Error
		if !errors.As(err, &ce) || ce.Func != s.fn {
			t.Errorf("%s: got %v, want its failure", s.fn, err)
		}
		ctl.ClearFaults()
	}
	must(t, allneighbors.Build(f.res, f.host, f.ind, f.dist, ivf))
	must(t, allneighbors.Build(f.res, f.host, f.ind, f.dist, nnd))
}
