package cagra_test

import (
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// The tests run against the ABI test double, never a real libcuvs_c. The
// double's CAGRA is exact (its graph is the exact kNN graph, its search an
// exact kNN over the dataset), so every result is checked against a kNN
// computed in Go. Its graph build is O(n²·d): datasets stay small.
func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows, dim, nq, k     = 200, 8, 10, 5
	degree, intermediate = 16, 32
)

type neighbor interface{ uint32 | int64 }

type fixture struct {
	res      *safe.Resources
	data, qs []float32
	dataset  *safe.DeviceMatrix[float32] // rows × dim: 32-byte rows, kept by reference
	queries  *safe.DeviceMatrix[float32]
	n32      *safe.DeviceMatrix[uint32]
	n64      *safe.DeviceMatrix[int64]
	dist     *safe.DeviceMatrix[float32]
	sp       cagra.SearchParams
}

func setup(t *testing.T) *fixture {
	t.Helper()
	safetest.Check(t)
	f := &fixture{res: safetest.Resources(t), data: safetest.Random(1, rows, dim), qs: safetest.Random(2, nq, dim)}
	f.dataset = deviceMatrix(t, f.res, f.data, rows, dim)
	f.queries = deviceMatrix(t, f.res, f.qs, nq, dim)
	f.n32 = newDevice[uint32](t, f.res, nq, k)
	f.n64 = newDevice[int64](t, f.res, nq, k)
	f.dist = newDevice[float32](t, f.res, nq, k)
	var err error
	if f.sp, err = cagra.DefaultSearchParams(); err != nil {
		t.Fatal(err)
	}
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

func params(t *testing.T) cagra.IndexParams {
	t.Helper()
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = degree, intermediate
	return p
}

func build(t *testing.T, res *safe.Resources, dataset dlpack.Tensor, p cagra.IndexParams) *cagra.Index {
	t.Helper()
	idx, err := cagra.Build(res, dataset, &p)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	return idx
}

// search runs a search into f's outputs (uint32 or int64 neighbors) and
// checks the results against an exact kNN of f.qs over data.
func search[N neighbor](t *testing.T, f *fixture, idx *cagra.Index, nb *safe.DeviceMatrix[N], data []float32, filter *safe.Filter, allowed func(int) bool) {
	t.Helper()
	if err := idx.Search(f.res, &f.sp, f.queries, nb, f.dist, filter); err != nil {
		t.Fatal(err)
	}
	checkResults(t, f.res, nb, f.dist, data, f.qs, dim, allowed)
}

// minRecall is the recall@k the approximate checks demand: the real
// library reached 1.000 at this package's test sizes (200 × 8, graph degree
// 16, itopk 32 to 128; CUVS_C_API.md), so 0.9 leaves room without hiding a
// broken search.
const minRecall = 0.9

// checkResults checks approximate results: every id a row of data (no
// sentinel), allowed, not repeated in its row; distances ascending and equal
// to the returned row's; recall@k against an exact kNN among the allowed
// rows at least minRecall.
func checkResults[N neighbor](t *testing.T, res *safe.Resources, nb *safe.DeviceMatrix[N], dist *safe.DeviceMatrix[float32], data, queries []float32, d int, allowed func(int) bool) {
	t.Helper()
	checkResultsAt(t, res, nb, dist, data, queries, d, allowed, minRecall)
}

// checkExactResults demands the exact kNN among the allowed rows, sentinels
// where fewer rows are allowed than k: for the exact path of selective
// filters.
func checkExactResults[N neighbor](t *testing.T, res *safe.Resources, nb *safe.DeviceMatrix[N], dist *safe.DeviceMatrix[float32], data, queries []float32, d int, allowed func(int) bool) {
	t.Helper()
	checkResultsAt(t, res, nb, dist, data, queries, d, allowed, 1)
}

func checkResultsAt[N neighbor](t *testing.T, res *safe.Resources, nb *safe.DeviceMatrix[N], dist *safe.DeviceMatrix[float32], data, queries []float32, d int, allowed func(int) bool, recall float64) {
	t.Helper()
	if err := res.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := nb.ToHost(res)
	if err != nil {
		t.Fatal(err)
	}
	dists, err := dist.ToHost(res)
	if err != nil {
		t.Fatal(err)
	}
	kk, n := nb.Cols(), len(data)/d
	want := safetest.ExactKNN(data, queries, d, kk, safetest.L2, allowed)
	hits, total := 0, 0
	for q := range want {
		row, rd := got[q*kk:(q+1)*kk], dists[q*kk:(q+1)*kk]
		ids, _ := cagra.Trim(row, rd)
		if recall == 1 {
			if len(ids) != len(want[q]) {
				t.Fatalf("query %d: neighbors %v, want %v", q, row, want[q])
			}
			for j := len(ids); j < kk; j++ {
				if row[j] != N(cagra.SentinelID) || rd[j] != cagra.SentinelDistance {
					t.Fatalf("query %d slot %d: %v / %v, want the sentinels", q, j, row[j], rd[j])
				}
			}
		}
		for j, id := range ids {
			if int64(id) >= int64(n) || (allowed != nil && !allowed(int(id))) || slices.Contains(ids[:j], id) {
				t.Fatalf("query %d: neighbors %v: %d is not an allowed row, or repeated", q, row, id)
			}
			dd := safetest.L2(queries[q*d:(q+1)*d], data[int(id)*d:(int(id)+1)*d])
			if !safetest.NearlyEqual(rd[j], dd) {
				t.Fatalf("query %d: distance %v to %d, want %v", q, rd[j], id, dd)
			}
			if j > 0 && rd[j] < rd[j-1] && !safetest.NearlyEqual(rd[j], rd[j-1]) {
				t.Fatalf("query %d: distances %v not ascending", q, rd)
			}
		}
		for _, w := range want[q] {
			total++
			if slices.Contains(ids, N(w)) {
				hits++
			}
		}
	}
	if total > 0 && float64(hits) < recall*float64(total) {
		t.Fatalf("recall@%d %d/%d, want at least %.2f", kk, hits, total, recall)
	}
}

// recallAtLeast checks that got (len(want) rows of k ids, host memory)
// finds at least recall of the exact neighbors want.
func recallAtLeast[N neighbor](t *testing.T, got []N, want [][]int64, recall float64) {
	t.Helper()
	hits, total := 0, 0
	for q, w := range want {
		row := got[q*len(w) : (q+1)*len(w)]
		for _, id := range w {
			total++
			if slices.Contains(row, N(id)) {
				hits++
			}
		}
	}
	if float64(hits) < recall*float64(total) {
		t.Fatalf("recall %d/%d, want at least %.2f", hits, total, recall)
	}
}

// toHost copies a (possibly strided) device view into a new slice.
func toHost[T dlpack.DType](t *testing.T, res *safe.Resources, v dlpack.View) []T {
	t.Helper()
	r, c := int(v.Dim(0)), int(v.Dim(1))
	out := make([]T, r*c)
	if r == 0 {
		return out
	}
	h, err := dlpack.NewHostMatrix(out, r, c)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	dst, err := h.ViewMut()
	if err != nil {
		t.Fatal(err)
	}
	if err := safe.Copy(res, &v, &dst); err != nil { // v is a copy: the caller's view stays usable
		t.Fatal(err)
	}
	return out
}

// checkGraph checks what a CAGRA graph promises on any library: n × deg
// ids, each a row. (Whether the real graph never lists a row itself or
// repeats an id was not measured; search quality is checked by recall.)
func checkGraph(t *testing.T, g []uint32, data []float32, d, deg int) {
	t.Helper()
	n := len(data) / d
	if len(g) != n*deg {
		t.Fatalf("graph holds %d ids, want %d×%d", len(g), n, deg)
	}
	for i, id := range g {
		if int(id) >= n {
			t.Fatalf("graph row %d: id %d is not a row", i/deg, id)
		}
	}
}

// exactGraph is the exact kNN graph of data (self excluded), deg per row.
func exactGraph(data []float32, d, deg int) []uint32 {
	n := len(data) / d
	g := make([]uint32, 0, n*deg)
	for i := 0; i < n; i++ {
		for _, id := range safetest.ExactKNN(data, data[i*d:(i+1)*d], d, deg, safetest.L2, func(j int) bool { return j != i })[0] {
			g = append(g, uint32(id))
		}
	}
	return g
}

// calls snapshots the double's call counts, to prove that a refusal made no
// C call.
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

func isArg(err error, arg string) bool {
	var ae *safe.ArgError
	return errors.As(err, &ae) && ae.Arg == arg && errors.Is(err, safe.ErrInvalidArgument)
}

func isCuvs(err error, fn, reason string) bool {
	var e *safe.Error
	return errors.As(err, &e) && e.Func == fn && e.Reason == reason && errors.Is(err, safe.ErrCuvs)
}

// The defaults are cuVS v26.06.00's: c/src/neighbors/cagra.cpp
// (cuvsCagraIndexParamsCreate, cuvsCagraSearchParamsCreate,
// cuvsCagraExtendParamsCreate, and the C++ structs cuvsAceParamsCreate and
// cuvsCagraCompressionParamsCreate copy: cagra::graph_build_params::
// ace_params, vpq_params) and c/src/neighbors/ivf_pq.cpp.
func TestDefaults(t *testing.T) {
	safetest.Check(t)
	ip, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	if want := (cagra.IndexParams{Metric: safe.L2Expanded, IntermediateGraphDegree: 128, GraphDegree: 64, BuildAlgo: cagra.IVFPQ, NNDescentIterations: 20}); !equalIndexParams(ip, want) {
		t.Errorf("DefaultIndexParams = %+v, want %+v", ip, want)
	}
	// The fields cuVS leaves out of its designated initializer are zero:
	// algo SINGLE_CTA and hashmap_mode HASH.
	sp, err := cagra.DefaultSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	if want := (cagra.SearchParams{ITopKSize: 64, Algo: cagra.SingleCTA, SearchWidth: 1, HashmapMode: cagra.HashFull,
		HashmapMaxFillRate: 0.5, NumRandomSamplings: 1, RandXORMask: 0x128394, PersistentLifetime: 2, PersistentDeviceUsage: 1}); sp != want {
		t.Errorf("DefaultSearchParams = %+v, want %+v", sp, want)
	}
	if ep, err := cagra.DefaultExtendParams(); err != nil || ep != (cagra.ExtendParams{}) {
		t.Errorf("DefaultExtendParams = %+v, %v", ep, err)
	}
	if cp, err := cagra.DefaultCompressionParams(); err != nil || cp != (cagra.CompressionParams{PQBits: 8, KMeansNIters: 25}) {
		t.Errorf("DefaultCompressionParams = %+v, %v", cp, err)
	}
	if ap, err := cagra.DefaultACEParams(); err != nil || ap != (cagra.ACEParams{EFConstruction: 120, BuildDir: "/tmp/ace_build"}) {
		t.Errorf("DefaultACEParams = %+v, %v", ap, err)
	}
	if bp, err := cagra.DefaultIVFPQBuildParams(); err != nil || bp != (cagra.IVFPQBuildParams{
		Metric: safe.L2Expanded, MetricArg: 2, AddDataOnBuild: true, NLists: 1024, KMeansNIters: 20, KMeansTrainsetFraction: 0.5,
		PQBits: 8, CodebookKind: 0, MaxTrainPointsPerPQCode: 256, CodesLayout: 1}) {
		t.Errorf("DefaultIVFPQBuildParams = %+v, %v", bp, err)
	}
	if sp, err := cagra.DefaultIVFPQSearchParams(); err != nil || sp != (cagra.IVFPQSearchParams{NProbes: 20, MaxInternalBatchSize: 4096, PreferredShmemCarveout: 1}) {
		t.Errorf("DefaultIVFPQSearchParams = %+v, %v", sp, err)
	}
}

func equalIndexParams(a, b cagra.IndexParams) bool {
	return a.Metric == b.Metric && a.IntermediateGraphDegree == b.IntermediateGraphDegree && a.GraphDegree == b.GraphDegree &&
		a.BuildAlgo == b.BuildAlgo && a.NNDescentIterations == b.NNDescentIterations &&
		(a.IVFPQ == nil) == (b.IVFPQ == nil) && (a.ACE == nil) == (b.ACE == nil) && (a.Compression == nil) == (b.Compression == nil)
}

func TestFromHNSWParams(t *testing.T) {
	safetest.Check(t)
	// Below 1e6 rows: NN-Descent, with cuVS's degree heuristics
	// (cagra::index_params::from_hnsw_params).
	p, err := cagra.FromHNSWParams(1000, 8, 16, 200, cagra.SameGraphFootprint, safe.InnerProduct)
	if err != nil {
		t.Fatal(err)
	}
	if want := (cagra.IndexParams{Metric: safe.InnerProduct, GraphDegree: 32, IntermediateGraphDegree: 48, BuildAlgo: cagra.NNDescent, NNDescentIterations: 17}); !equalIndexParams(p, want) {
		t.Errorf("same footprint: %+v, want %+v", p, want)
	}
	p, err = cagra.FromHNSWParams(1000, 8, 16, 200, cagra.SimilarSearchPerformance, safe.CosineExpanded)
	if err != nil {
		t.Fatal(err)
	}
	if want := (cagra.IndexParams{Metric: safe.CosineExpanded, GraphDegree: 12, IntermediateGraphDegree: 28, BuildAlgo: cagra.NNDescent, NNDescentIterations: 17}); !equalIndexParams(p, want) {
		t.Errorf("similar search: %+v, want %+v", p, want)
	}
	// From 1e6 rows: IVF-PQ, with cuVS writing through the IVF-PQ object's
	// build and search params (which the bindings must provide).
	p, err = cagra.FromHNSWParams(2_000_000, 128, 16, 200, cagra.SameGraphFootprint, safe.InnerProduct)
	if err != nil {
		t.Fatal(err)
	}
	if p.BuildAlgo != cagra.IVFPQ || p.Metric != safe.InnerProduct || p.GraphDegree != 32 || p.IVFPQ == nil || p.IVFPQ.Build == nil || p.IVFPQ.Search == nil {
		t.Fatalf("2e6 rows: %+v", p)
	}
	b, s := p.IVFPQ.Build, p.IVFPQ.Search
	if b.Metric != safe.InnerProduct || b.NLists != 1000 || b.PQDim != 64 || b.PQBits != 4 || b.KMeansNIters != 10 ||
		math.Abs(b.KMeansTrainsetFraction-1/math.Sqrt(20)) > 1e-9 || p.IVFPQ.RefinementRate != 1 {
		t.Errorf("IVF-PQ build params %+v", *b)
	}
	if s.NProbes != 16 || s.LUTDtype != 2 || s.InternalDistanceDtype != 2 {
		t.Errorf("IVF-PQ search params %+v", *s)
	}
	// The derived parameters build (with the graph degree the data allows).
	f := setup(t)
	p, err = cagra.FromHNSWParams(rows, dim, 8, 64, cagra.SimilarSearchPerformance, safe.L2Expanded)
	if err != nil {
		t.Fatal(err)
	}
	idx := build(t, f.res, f.dataset, p)
	search(t, f, idx, f.n64, f.data, nil, nil)

	for name, err := range map[string]error{
		"rows/dim/m/efConstruction": errOf(cagra.FromHNSWParams(0, 8, 16, 200, cagra.SameGraphFootprint, safe.L2Expanded)),
		"h":                         errOf(cagra.FromHNSWParams(10, 8, 16, 200, 7, safe.L2Expanded)),
		"metric":                    errOf(cagra.FromHNSWParams(10, 8, 16, 200, cagra.SameGraphFootprint, 99)),
	} {
		if !isArg(err, name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }

// Every graph build algorithm, from host and from device data, with and
// without compression: exact results, a dataset view equal to the data, the
// exact kNN graph, and no violation (the cuvsCagraIndexParamsDestroy trap
// among them) and no leak.
func TestBuildAlgorithms(t *testing.T) {
	f := setup(t)
	ivfpqBuild, err := cagra.DefaultIVFPQBuildParams()
	if err != nil {
		t.Fatal(err)
	}
	ivfpqBuild.NLists, ivfpqBuild.PQDim = 4, 4
	ivfpqSearch, err := cagra.DefaultIVFPQSearchParams()
	if err != nil {
		t.Fatal(err)
	}
	ivfpqSearch.NProbes = 2
	ace, err := cagra.DefaultACEParams()
	if err != nil {
		t.Fatal(err)
	}
	ace.BuildDir, ace.NPartitions, ace.UseDisk = t.TempDir(), 2, true
	compression, err := cagra.DefaultCompressionParams()
	if err != nil {
		t.Fatal(err)
	}
	hostData := hostMatrix(t, f.data, rows, dim)
	type variant struct {
		name string
		set  func(*cagra.IndexParams)
	}
	variants := []variant{
		{"AutoSelect", func(p *cagra.IndexParams) { p.BuildAlgo = cagra.AutoSelect }},
		{"IVFPQ", func(p *cagra.IndexParams) { p.BuildAlgo = cagra.IVFPQ }},
		{"IVFPQ custom", func(p *cagra.IndexParams) {
			p.BuildAlgo = cagra.IVFPQ
			p.IVFPQ = &cagra.IVFPQGraphParams{Build: &ivfpqBuild, Search: &ivfpqSearch, RefinementRate: 2}
		}},
		{"IVFPQ build only", func(p *cagra.IndexParams) {
			p.BuildAlgo = cagra.IVFPQ
			p.IVFPQ = &cagra.IVFPQGraphParams{Build: &ivfpqBuild}
		}},
		{"AutoSelect with IVFPQ", func(p *cagra.IndexParams) {
			p.BuildAlgo = cagra.AutoSelect
			p.IVFPQ = &cagra.IVFPQGraphParams{Search: &ivfpqSearch}
		}},
		{"NNDescent", func(p *cagra.IndexParams) { p.BuildAlgo, p.NNDescentIterations = cagra.NNDescent, 5 }},
		{"NNDescent with IVFPQ", func(p *cagra.IndexParams) {
			p.BuildAlgo = cagra.NNDescent
			p.IVFPQ = &cagra.IVFPQGraphParams{Build: &ivfpqBuild}
		}},
		{"IterativeSearch", func(p *cagra.IndexParams) { p.BuildAlgo = cagra.IterativeSearch }},
		{"ACE defaults", func(p *cagra.IndexParams) { p.BuildAlgo = cagra.ACE }},
		{"ACE", func(p *cagra.IndexParams) { p.BuildAlgo, p.ACE = cagra.ACE, &ace }},
		{"IVFPQ compressed", func(p *cagra.IndexParams) { p.BuildAlgo, p.Compression = cagra.IVFPQ, &compression }},
		{"ACE compressed", func(p *cagra.IndexParams) { p.BuildAlgo, p.ACE, p.Compression = cagra.ACE, &ace, &compression }},
	}
	for _, v := range variants {
		for _, src := range []string{"host", "device"} {
			p := params(t)
			v.set(&p)
			var dataset dlpack.Tensor = hostData
			if src == "device" {
				if p.BuildAlgo == cagra.ACE {
					continue // ACE needs host data: see TestValidation
				}
				dataset = f.dataset
			}
			t.Run(v.name+"/"+src, func(t *testing.T) {
				safetest.Check(t)
				idx, err := cagra.Build(f.res, dataset, &p)
				if p.Compression != nil && on2608() {
					wantCompressionRefused(t, err)
					return
				}
				if p.Compression != nil {
					// 200 rows cannot train 256 PQ centers: the real
					// library fails inside the build, Go refuses first.
					if !isArg(err, "params.Compression.PQBits") {
						t.Fatalf("compressed build on %d rows: %v, want a refusal naming PQBits", rows, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := idx.Close(); err != nil {
						t.Error(err)
					}
				}()
				if idx.Rows() != rows || idx.Dim() != dim || idx.GraphDegree() != degree || idx.DType() != dlpack.Float32 {
					t.Fatalf("index %d×%d degree %d %v", idx.Rows(), idx.Dim(), idx.GraphDegree(), idx.DType())
				}
				if p.ACE != nil && p.ACE.UseDisk {
					// ACE's disk mode: cuVS cannot search, extend or
					// serialize the index; Go refuses first.
					err := idx.Search(f.res, &f.sp, f.queries, f.n32, f.dist, nil)
					if !errors.Is(err, cagra.ErrOnDisk) || !isArg(err, "index") {
						t.Errorf("search of a disk-mode index: %v", err)
					}
					if err := idx.Serialize(f.res, filepath.Join(t.TempDir(), "x")); !errors.Is(err, cagra.ErrOnDisk) {
						t.Errorf("serialize of a disk-mode index: %v", err)
					}
					if err := idx.Extend(f.res, hostData, &cagra.ExtendParams{}); !errors.Is(err, cagra.ErrOnDisk) {
						t.Errorf("extend of a disk-mode index: %v", err)
					}
					return
				}
				search(t, f, idx, f.n32, f.data, nil, nil)
				search(t, f, idx, f.n64, f.data, nil, nil)
				ds, err := idx.Dataset()
				if err != nil {
					t.Fatal(err)
				}
				if p.Compression != nil {
					// cuVS shows no dataset for a compressed index.
					if ds.Dim(0) != 0 || ds.Dim(1) != dim {
						t.Errorf("compressed dataset view %v", ds)
					}
				} else if got := toHost[float32](t, f.res, ds); !slices.Equal(got, f.data) {
					t.Errorf("dataset view differs from the data")
				}
				g, err := idx.Graph()
				if err != nil {
					t.Fatal(err)
				}
				if g.DType() != dlpack.Uint32 || g.Dim(0) != rows || g.Dim(1) != degree || g.Device().Type != dlpack.CUDA {
					t.Fatalf("graph view %v", g)
				}
				checkGraph(t, toHost[uint32](t, f.res, g), f.data, dim, degree)
			})
		}
	}
}

func TestSearchFilter(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	var allowed []int64
	for i := int64(0); i < rows; i++ {
		if i%3 != 0 && i != 57 {
			allowed = append(allowed, i)
		}
	}
	ok := func(i int) bool { return i%3 != 0 && i != 57 }
	bs, err := safe.NewBitsetFilterAllowing(f.res, rows, allowed)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bs)
	search(t, f, idx, f.n32, f.data, bs, ok)
	search(t, f, idx, f.n64, f.data, bs, ok)
	// The filter is reusable, and no filter is no filter.
	search(t, f, idx, f.n64, f.data, bs, ok)
	search(t, f, idx, f.n64, f.data, nil, nil)
	// One allowed row: it is every query's nearest.
	one, err := safe.NewBitsetFilterAllowing(f.res, rows, []int64{123})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, one)
	n1 := newDevice[int64](t, f.res, nq, 1)
	d1 := newDevice[float32](t, f.res, nq, 1)
	if err := idx.Search(f.res, &f.sp, f.queries, n1, d1, one); err != nil {
		t.Fatal(err)
	}
	checkResults(t, f.res, n1, d1, f.data, f.qs, dim, func(i int) bool { return i == 123 })
}

func TestExtend(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	ds, err := idx.Dataset()
	if err != nil {
		t.Fatal(err)
	}
	g, err := idx.Graph()
	if err != nil {
		t.Fatal(err)
	}
	ep, err := cagra.DefaultExtendParams()
	if err != nil {
		t.Fatal(err)
	}
	// From host memory...
	more := safetest.Random(3, 50, dim)
	if err := idx.Extend(f.res, hostMatrix(t, more, 50, dim), &ep); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(f.data), more...)
	if idx.Rows() != rows+50 || idx.GraphDegree() != degree {
		t.Fatalf("after Extend: %d rows, degree %d", idx.Rows(), idx.GraphDegree())
	}
	// ... the views taken before have expired ...
	if !errors.Is(ds.Err(), dlpack.ErrExpired) || !errors.Is(g.Err(), dlpack.ErrExpired) {
		t.Errorf("views after Extend: %v, %v", ds.Err(), g.Err())
	}
	search(t, f, idx, f.n32, all, nil, nil)
	// ... and from device memory, in small chunks.
	more2 := safetest.Random(4, 30, dim)
	ep.MaxChunkSize = 7
	if err := idx.Extend(f.res, deviceMatrix(t, f.res, more2, 30, dim), &ep); err != nil {
		t.Fatal(err)
	}
	all = append(all, more2...)
	if idx.Rows() != rows+80 {
		t.Fatalf("after the second Extend: %d rows", idx.Rows())
	}
	search(t, f, idx, f.n64, all, nil, nil)
	// A filter is for the new row count.
	bs, err := safe.NewBitsetFilterAllowing(f.res, rows+80, []int64{0, 1, 2, 3, 4, 5, rows + 79})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bs)
	// 7 of 280 rows: too few for a graph search to reach (CUVS_C_API.md),
	// so the exact path answers.
	f.sp.FilterExactBelow = 0.05
	search(t, f, idx, f.n64, all, bs, func(i int) bool { return i < 6 || i == rows+79 })
	// New views show the new rows.
	ds, err = idx.Dataset()
	if err != nil {
		t.Fatal(err)
	}
	if got := toHost[float32](t, f.res, ds); !slices.Equal(got, all) {
		t.Errorf("dataset view after Extend differs")
	}
	g, err = idx.Graph()
	if err != nil {
		t.Fatal(err)
	}
	checkGraph(t, toHost[uint32](t, f.res, g), all, dim, degree)
	// A compressed index cannot be extended: cuVS says so.
	p := params(t)
	comp, _ := cagra.DefaultCompressionParams()
	comp.PQBits = 4 // 16 PQ centers: 200 rows cannot train the default 256
	p.Compression = &comp
	if on2608() {
		_, err := cagra.Build(f.res, f.dataset, &p)
		wantCompressionRefused(t, err)
		return
	}
	cidx := build(t, f.res, f.dataset, p)
	err = cidx.Extend(f.res, deviceMatrix(t, f.res, more2, 30, dim), &ep)
	if !isCuvs(err, "cuvsCagraExtend", "cagra::extend only supports an uncompressed dataset index") {
		t.Errorf("extending a compressed index: %v", err)
	}
}

// Extend needs the index alone: refused while a search is in flight, and a
// search is refused while Extend runs. The call delay holds the first
// operation in the library; an outcome only counts when the first operation
// was provably still in flight (it had not returned after the second did),
// so a machine too loaded to keep the window open retries rather than fails.
func TestExtendBusy(t *testing.T) {
	f := setup(t)
	ctl := safetest.Double(t, "its control surface")
	idx := build(t, f.res, f.dataset, params(t))
	all := slices.Clone(f.data)
	more := safetest.Random(3, 10, dim)
	moreDev := deviceMatrix(t, f.res, more, 10, dim)
	ep, _ := cagra.DefaultExtendParams()
	sres := safetest.Resources(t)
	t.Cleanup(func() { ctl.SetCallDelay(0) })
	ctl.SetCallDelay(200 * time.Millisecond)
	// hold starts op in a goroutine and returns once it is inside fn.
	hold := func(fn string, op func() error) chan error {
		done := make(chan error, 1)
		base := ctl.Calls(fn)
		go func() { done <- op() }()
		for ctl.Calls(fn) == base {
			time.Sleep(100 * time.Microsecond)
		}
		return done
	}

	// A search in flight: Extend waits for it, then succeeds.
	done := hold("cuvsCagraSearch", func() error { return idx.Search(sres, &f.sp, f.queries, f.n64, f.dist, nil) })
	if err := idx.Extend(f.res, moreDev, &ep); err != nil {
		t.Fatalf("Extend during a search: %v", err)
	}
	if serr := <-done; serr != nil {
		t.Fatalf("the search Extend waited for: %v", serr)
	}
	all = append(all, more...)

	// An Extend in flight: searches and serialization wait for it, then
	// succeed (none fails).
	done = hold("cuvsCagraExtend", func() error { return idx.Extend(sres, moreDev, &ep) })
	serr := idx.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil)
	werr := idx.Serialize(f.res, filepath.Join(t.TempDir(), "x"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	all = append(all, more...)
	if serr != nil || werr != nil {
		t.Fatalf("during Extend: search %v, serialize %v", serr, werr)
	}
	ctl.SetCallDelay(0)
	if idx.Rows() != int(len(all)/dim) {
		t.Errorf("rows %d, want %d", idx.Rows(), len(all)/dim)
	}
	search(t, f, idx, f.n64, all, nil, nil)
}

func TestSerialize(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	dir := t.TempDir()
	path := filepath.Join(dir, "cagra.idx")
	if err := idx.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	back, err := cagra.Deserialize(f.res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	if back.Rows() != rows || back.Dim() != dim || back.GraphDegree() != degree || back.DType() != dlpack.Float32 {
		t.Fatalf("deserialized %d×%d degree %d %v", back.Rows(), back.Dim(), back.GraphDegree(), back.DType())
	}
	search(t, f, back, f.n32, f.data, nil, nil)
	// A round trip: the deserialized index (whose dtype lanes the real
	// library leaves 0) answers exactly as the original.
	results := func(x *cagra.Index) ([]int64, []float32) {
		t.Helper()
		if err := x.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil); err != nil {
			t.Fatal(err)
		}
		ids, err := f.n64.ToHost(f.res)
		if err != nil {
			t.Fatal(err)
		}
		d, err := f.dist.ToHost(f.res)
		if err != nil {
			t.Fatal(err)
		}
		return ids, d
	}
	i1, d1 := results(idx)
	i2, d2 := results(back)
	if !slices.Equal(i1, i2) || !slices.Equal(d1, d2) {
		t.Errorf("results differ after the round trip: %v %v, then %v %v", i1, d1, i2, d2)
	}
	g1, _ := idx.Graph()
	g2, _ := back.Graph()
	if !slices.Equal(toHost[uint32](t, f.res, g1), toHost[uint32](t, f.res, g2)) {
		t.Error("the deserialized graph differs")
	}
	// The deserialized index owns its data: the original dataset can go.
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.dataset.Close(); err != nil {
		t.Fatal(err)
	}
	search(t, f, back, f.n64, f.data, nil, nil)

	// A nil option is refused naming opts, before cuVS writes anything.
	var ae *safe.ArgError
	if err := back.Serialize(f.res, filepath.Join(dir, "nil.idx"), nil); !errors.As(err, &ae) || ae.Arg != "opts" {
		t.Errorf("Serialize with a nil option: %v, want an ArgError naming opts", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nil.idx")); !os.IsNotExist(err) {
		t.Errorf("Serialize with a nil option wrote a file: %v", err)
	}
	if _, err := back.SerializeTo(f.res, io.Discard, nil); !errors.As(err, &ae) || ae.Arg != "opts" {
		t.Errorf("SerializeTo with a nil option: %v, want an ArgError naming opts", err)
	}

	// Without the dataset: the graph alone, which cannot be searched.
	lean := filepath.Join(dir, "lean.idx")
	if err := back.Serialize(f.res, lean, safe.WithoutDataset()); err != nil {
		t.Fatal(err)
	}
	graphOnly, err := cagra.Deserialize(f.res, lean)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, graphOnly)
	// cuVS keeps the empty dataset: its dimension, 0, is the index's; the
	// rows are the graph's.
	// On 26.08 the file's dimension may be kept (the double keeps it).
	if graphOnly.Rows() != rows || (graphOnly.Dim() != 0 && !(on2608() && graphOnly.Dim() == dim)) || graphOnly.GraphDegree() != degree {
		t.Errorf("graph-only index: %d×%d degree %d", graphOnly.Rows(), graphOnly.Dim(), graphOnly.GraphDegree())
	}
	noDataset := func(what string, err error) {
		t.Helper()
		var ae *safe.ArgError
		if !errors.Is(err, cagra.ErrNoDataset) || !errors.As(err, &ae) || ae.Arg != "index" || !strings.Contains(err.Error(), "IndexFromArgs") {
			t.Errorf("%s on a graph-only index: %v", what, err)
		}
	}
	noDataset("Search", graphOnly.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil))
	_, err = cagra.SearchSlice(f.res, graphOnly, nil, f.qs, k, nil)
	noDataset("SearchSlice", err)
	_, err = graphOnly.Prepare(nil, f.queries, f.n64, f.dist, nil)
	noDataset("Prepare", err)
	noDataset("Extend", graphOnly.Extend(f.res, hostMatrix(t, f.data[:dim], 1, dim), nil))
	// What the refusal says works: the graph with a dataset attached.
	g, err := graphOnly.Graph()
	if err != nil {
		t.Fatal(err)
	}
	attached, err := cagra.IndexFromArgs(f.res, safe.L2Expanded, g, hostMatrix(t, f.data, rows, dim))
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, attached)
	search(t, f, attached, f.n64, f.data, nil, nil)
	if err := attached.Close(); err != nil {
		t.Fatal(err)
	}

	// hnswlib's format.
	hnsw := filepath.Join(dir, "hnsw.bin")
	if err := back.SerializeToHnswlib(f.res, hnsw); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(hnsw); err != nil || st.Size() < rows*(4+degree*4+dim*4+8) {
		t.Errorf("hnswlib file: %v, %v", st, err)
	}

	// Files that are not indexes, or not there.
	if _, err := cagra.Deserialize(f.res, filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(dir, "missing")) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := cagra.Deserialize(f.res, hnsw); err == nil {
		t.Error("an hnswlib file deserialized as a CAGRA index")
	}
	if err := back.Serialize(f.res, filepath.Join(dir, "no", "such", "dir")); !errors.Is(err, safe.ErrCuvs) {
		t.Errorf("serializing into a missing directory: %v", err)
	}
}

// Dataset and Graph are views into the index's memory: they die with it.
func TestViews(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, hostMatrix(t, f.data, rows, dim), params(t))
	ds, err := idx.Dataset()
	if err != nil {
		t.Fatal(err)
	}
	g, err := idx.Graph()
	if err != nil {
		t.Fatal(err)
	}
	if ds.Device().Type != dlpack.CUDA || ds.DType() != dlpack.Float32 || ds.Dim(0) != rows || ds.Dim(1) != dim {
		t.Fatalf("dataset view %v", ds)
	}
	// An index made from the views borrows them: the first index cannot
	// close until it is gone.
	other, err := cagra.IndexFromArgs(f.res, safe.L2Expanded, g, ds)
	if err != nil {
		t.Fatal(err)
	}
	search(t, f, other, f.n64, f.data, nil, nil)
	err = idx.Close()
	if !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), "cagra.Index") {
		t.Fatalf("closing an index whose views are borrowed: %v", err)
	}
	search(t, f, idx, f.n64, f.data, nil, nil) // still open
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	// A view retained by hand blocks Close the same way.
	r, err := ds.Retain("a test")
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), "a test") {
		t.Fatalf("closing while a view is retained: %v", err)
	}
	r.End()
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ds.Err(), dlpack.ErrExpired) || !errors.Is(g.Err(), dlpack.ErrExpired) {
		t.Errorf("views after Close: %v, %v", ds.Err(), g.Err())
	}
	if _, err := ds.Data(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("data of an expired view: %v", err)
	}
	// Padded rows: dim 3 float32 is kept in 16-byte rows; the view is
	// strided and holds the data.
	data3 := safetest.Random(5, 40, 3)
	p := params(t)
	p.GraphDegree, p.IntermediateGraphDegree = 4, 8
	idx3 := build(t, f.res, deviceMatrix(t, f.res, data3, 40, 3), p)
	ds3, err := idx3.Dataset()
	if err != nil {
		t.Fatal(err)
	}
	if ds3.Stride(0) != 4 || ds3.Layout().IsRowMajor() {
		t.Errorf("padded dataset view %v strides %v", ds3, ds3.Strides())
	}
	if got := toHost[float32](t, f.res, ds3); !slices.Equal(got, data3) {
		t.Error("padded dataset view differs from the data")
	}
	g3, _ := idx3.Graph()
	checkGraph(t, toHost[uint32](t, f.res, g3), data3, 3, 4)
}

// A device dataset with 16-byte aligned rows is kept by reference: the
// index borrows it until Close. Others are copied.
func TestBuildBorrowsDataset(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	err := f.dataset.Close()
	if !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), "cagra.Index") {
		t.Fatalf("closing a dataset an index uses: %v", err)
	}
	err = f.dataset.CopyFromHost(f.res, f.data)
	if !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), "cagra.Index") {
		t.Fatalf("writing a dataset an index uses: %v", err)
	}
	search(t, f, idx, f.n64, f.data, nil, nil)
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := f.dataset.CopyFromHost(f.res, f.data); err != nil {
		t.Errorf("writing the dataset after the index closed: %v", err)
	}

	// Not kept: dim 3 float32 (12-byte rows), host memory, and a
	// compressed index; each dataset can go at once.
	data3 := safetest.Random(6, 60, 3)
	qs3 := safetest.Random(7, nq, 3)
	p := params(t)
	p.GraphDegree, p.IntermediateGraphDegree = 4, 8
	d3, err := safe.DeviceMatrixFrom(f.res, data3, 60, 3)
	if err != nil {
		t.Fatal(err)
	}
	idx3 := build(t, f.res, d3, p)
	if err := d3.Close(); err != nil {
		t.Fatalf("closing a copied dataset: %v", err)
	}
	q3 := deviceMatrix(t, f.res, qs3, nq, 3)
	if err := idx3.Search(f.res, &f.sp, q3, f.n64, f.dist, nil); err != nil {
		t.Fatal(err)
	}
	checkResults(t, f.res, f.n64, f.dist, data3, qs3, 3, nil)

	h, err := dlpack.NewHostMatrix(slices.Clone(f.data), rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	hidx := build(t, f.res, h, params(t))
	if err := h.Close(); err != nil {
		t.Fatalf("closing a host dataset: %v", err)
	}
	search(t, f, hidx, f.n64, f.data, nil, nil)

	// The default codebook (8 bits, pq_len 4 for dim 8): cuVS compiles VPQ
	// search descriptors for 8-bit codebooks of pq_len 2 or 4 only
	// (compute_distance_vpq_matrix.json), so a 4-bit one builds but no
	// search finds a descriptor. 256 PQ centers need more training rows
	// than the fixture's 200: a larger dataset, and the NN-Descent graph
	// build (IVF_PQ with compression failed on small data on the real
	// library; CUVS_C_API.md).
	comp, _ := cagra.DefaultCompressionParams()
	p = params(t)
	p.Compression, p.BuildAlgo = &comp, cagra.NNDescent
	if on2608() {
		_, err := cagra.Build(f.res, f.dataset, &p)
		wantCompressionRefused(t, err)
		return
	}
	const crows = 600
	cdata := safetest.Random(8, crows, dim)
	dc, err := safe.DeviceMatrixFrom(f.res, cdata, crows, dim)
	if err != nil {
		t.Fatal(err)
	}
	cidx := build(t, f.res, dc, p)
	if err := dc.Close(); err != nil {
		t.Fatalf("closing the dataset of a compressed index: %v", err)
	}
	if err := cidx.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil); err != nil {
		t.Fatal(err)
	}
	// Distances come from the codes, not the rows: check the ids only.
	if err := f.res.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := f.n64.ToHost(f.res)
	if err != nil {
		t.Fatal(err)
	}
	for q := 0; q < nq; q++ {
		row := got[q*k : (q+1)*k]
		for j, id := range row {
			if id < 0 || id >= crows || slices.Contains(row[:j], id) {
				t.Fatalf("compressed index, query %d: neighbors %v", q, row)
			}
		}
	}
}

func TestIndexFromArgs(t *testing.T) {
	f := setup(t)
	graph := exactGraph(f.data, dim, degree)

	// Device graph and device dataset with aligned rows: both borrowed.
	dg := deviceMatrix(t, f.res, graph, rows, degree)
	idx, err := cagra.IndexFromArgs(f.res, safe.L2Expanded, dg, f.dataset)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	if idx.Rows() != rows || idx.Dim() != dim || idx.GraphDegree() != degree {
		t.Fatalf("index %d×%d degree %d", idx.Rows(), idx.Dim(), idx.GraphDegree())
	}
	search(t, f, idx, f.n32, f.data, nil, nil)
	for name, err := range map[string]error{"graph": dg.Close(), "dataset": f.dataset.Close(), "dataset write": f.dataset.CopyFromHost(f.res, f.data)} {
		if !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), "cagra.Index") {
			t.Errorf("%s while the index lives: %v", name, err)
		}
	}
	g, _ := idx.Graph()
	if !slices.Equal(toHost[uint32](t, f.res, g), graph) {
		t.Error("the index's graph is not the one given")
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dg.Close(); err != nil {
		t.Errorf("graph after Close: %v", err)
	}
	if err := f.dataset.CopyFromHost(f.res, f.data); err != nil {
		t.Errorf("dataset after Close: %v", err)
	}

	// dim 3 float32 (12-byte rows) on the device: the dataset is copied,
	// the device graph still borrowed.
	data3 := safetest.Random(8, 40, 3)
	qs3 := safetest.Random(9, nq, 3)
	graph3 := exactGraph(data3, 3, 4)
	d3, err := safe.DeviceMatrixFrom(f.res, data3, 40, 3)
	if err != nil {
		t.Fatal(err)
	}
	g3 := deviceMatrix(t, f.res, graph3, 40, 4)
	idx3, err := cagra.IndexFromArgs(f.res, safe.L2Expanded, g3, d3)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx3)
	if err := d3.Close(); err != nil {
		t.Fatalf("closing a copied dataset: %v", err)
	}
	if err := g3.Close(); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("closing the graph: %v", err)
	}
	q3 := deviceMatrix(t, f.res, qs3, nq, 3)
	if err := idx3.Search(f.res, &f.sp, q3, f.n64, f.dist, nil); err != nil {
		t.Fatal(err)
	}
	checkResults(t, f.res, f.n64, f.dist, data3, qs3, 3, nil)

	// Host graph and host dataset: both copied.
	hd, err := dlpack.NewHostMatrix(slices.Clone(f.data), rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	hg, err := dlpack.NewHostMatrix(slices.Clone(graph), rows, degree)
	if err != nil {
		t.Fatal(err)
	}
	hidx, err := cagra.IndexFromArgs(f.res, safe.L2Expanded, hg, hd)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, hidx)
	if err := hd.Close(); err != nil {
		t.Errorf("closing a host dataset: %v", err)
	}
	if err := hg.Close(); err != nil {
		t.Errorf("closing a host graph: %v", err)
	}
	search(t, f, hidx, f.n64, f.data, nil, nil)
}

func TestMerge(t *testing.T) {
	f := setup(t)
	p := params(t)
	p.GraphDegree, p.IntermediateGraphDegree = 8, 16
	// Three indexes over consecutive parts of the data, from device and
	// host memory.
	cuts := []int{0, 80, 150, rows}
	var parts []*cagra.Index
	for i := 0; i < 3; i++ {
		part := f.data[cuts[i]*dim : cuts[i+1]*dim]
		var src dlpack.Tensor = deviceMatrix(t, f.res, part, cuts[i+1]-cuts[i], dim)
		if i == 1 {
			src = hostMatrix(t, part, cuts[i+1]-cuts[i], dim)
		}
		parts = append(parts, build(t, f.res, src, p))
	}
	for _, n := range []int{2, 3} {
		merged, err := cagra.Merge(f.res, ptr(params(t)), parts[:n], nil)
		if err != nil {
			t.Fatal(err)
		}
		if merged.Rows() != cuts[n] || merged.GraphDegree() != degree {
			t.Fatalf("merged %d: %d rows, degree %d", n, merged.Rows(), merged.GraphDegree())
		}
		search(t, f, merged, f.n64, f.data[:cuts[n]*dim], nil, nil)
		g, _ := merged.Graph()
		checkGraph(t, toHost[uint32](t, f.res, g), f.data[:cuts[n]*dim], dim, degree)
		if err := merged.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// With a filter over the concatenated rows: only the rows it lets
	// through are kept, in order.
	keep := func(i int) bool { return i%2 == 0 || i > 190 }
	var allowed []int64
	var kept []float32
	for i := 0; i < rows; i++ {
		if keep(i) {
			allowed = append(allowed, int64(i))
			kept = append(kept, f.data[i*dim:(i+1)*dim]...)
		}
	}
	bs, err := safe.NewBitsetFilterAllowing(f.res, rows, allowed)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bs)
	merged, err := cagra.Merge(f.res, ptr(params(t)), parts, bs)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, merged)
	if merged.Rows() != len(allowed) {
		t.Fatalf("filtered merge: %d rows, want %d", merged.Rows(), len(allowed))
	}
	search(t, f, merged, f.n32, kept, nil, nil)
	// The parts are untouched.
	search(t, f, parts[2], f.n64, f.data[150*dim:], nil, nil)
}

// Every refusal names the argument and makes no C call.
func TestValidation(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	hostQ := hostMatrix(t, f.qs, nq, dim)
	q64 := newDevice[float64](t, f.res, nq, dim)
	q8 := newDevice[int8](t, f.res, nq, dim)
	narrow := newDevice[float32](t, f.res, nq, dim-1)
	n32 := newDevice[int32](t, f.res, nq, k)
	hostN := hostMatrix(t, make([]int64, nq*k), nq, k)
	d64 := newDevice[float64](t, f.res, nq, k)
	wideD := newDevice[float32](t, f.res, nq, k+1)
	shortN := newDevice[int64](t, f.res, nq-1, k)
	bigN := newDevice[int64](t, f.res, nq, rows+1)
	bigD := newDevice[float32](t, f.res, nq, rows+1)
	f64 := newDevice[float64](t, f.res, rows, dim)
	oneRow := newDevice[float32](t, f.res, 1, dim)
	empty := newDevice[float32](t, f.res, 0, dim)
	colMajorData := make([]float32, rows*dim)
	colMajor, err := dlpack.FromRawParts(unsafe.Pointer(&colMajorData[0]), dlpack.HostDevice, []int64{rows, dim}, []int64{1, rows}, dlpack.Float32)
	if err != nil {
		t.Fatal(err)
	}
	graph := deviceMatrix(t, f.res, exactGraph(f.data, dim, degree), rows, degree)
	graphI32 := newDevice[int32](t, f.res, rows, degree)
	graphShort := newDevice[uint32](t, f.res, rows-1, degree)
	graphWide := newDevice[uint32](t, f.res, rows, rows)
	bitmap, err := safe.NewBitmapFilter(f.res, nq, rows, make([]uint32, kit.Words(nq*rows)))
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bitmap)
	otherRows, err := safe.NewBitsetFilterAllowing(f.res, rows+1, []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, otherRows)
	ep, _ := cagra.DefaultExtendParams()
	small := build(t, f.res, deviceMatrix(t, f.res, safetest.Random(9, 30, 4), 30, 4), func() cagra.IndexParams {
		p := params(t)
		p.GraphDegree, p.IntermediateGraphDegree = 4, 8
		return p
	}())

	sp := func(change func(*cagra.SearchParams)) *cagra.SearchParams {
		s := f.sp
		change(&s)
		return &s
	}
	base := params(t)
	ip := func(change func(*cagra.IndexParams)) cagra.IndexParams {
		p := base
		change(&p)
		return p
	}
	buildErr := func(ds dlpack.Tensor, p cagra.IndexParams) func() error {
		return func() error { return errOf(cagra.Build(f.res, ds, &p)) }
	}
	searchErr := func(s *cagra.SearchParams, q dlpack.Tensor, n, d dlpack.TensorMut, filter *safe.Filter) func() error {
		return func() error { return idx.Search(f.res, s, q, n, d, filter) }
	}
	cases := []struct {
		name, arg string
		err       func() error
	}{
		// Search: tensors.
		{"host queries", "queries", searchErr(&f.sp, hostQ, f.n64, f.dist, nil)},
		{"float64 queries", "queries", searchErr(&f.sp, q64, f.n64, f.dist, nil)},
		{"int8 queries, float32 index", "queries", searchErr(&f.sp, q8, f.n64, f.dist, nil)},
		{"queries of another dimension", "queries", searchErr(&f.sp, narrow, f.n64, f.dist, nil)},
		{"int32 neighbors", "neighbors", searchErr(&f.sp, f.queries, n32, f.dist, nil)},
		{"host neighbors", "neighbors", searchErr(&f.sp, f.queries, hostN, f.dist, nil)},
		{"float64 distances", "distances", searchErr(&f.sp, f.queries, f.n64, d64, nil)},
		{"distances of another k", "distances", searchErr(&f.sp, f.queries, f.n64, wideD, nil)},
		{"neighbors for fewer queries", "neighbors", searchErr(&f.sp, f.queries, shortN, f.dist, nil)},
		{"k > rows", "neighbors", searchErr(&f.sp, f.queries, bigN, bigD, nil)},
		{"nil queries", "queries/neighbors/distances", searchErr(&f.sp, nil, f.n64, f.dist, nil)},
		{"nil neighbors", "queries/neighbors/distances", searchErr(&f.sp, f.queries, nil, f.dist, nil)},
		{"bitmap filter", "filter", searchErr(&f.sp, f.queries, f.n64, f.dist, bitmap)},
		{"filter for other rows", "filter", searchErr(&f.sp, f.queries, f.n64, f.dist, otherRows)},
		{"expired view", "queries", func() error {
			v, _ := f.queries.View()
			c := dlpack.Begin("expire")
			_, _ = c.In(&v)
			c.End()
			return idx.Search(f.res, &f.sp, v, f.n64, f.dist, nil)
		}},
		// Search: parameters.
		{"search algo", "params.Algo", searchErr(sp(func(s *cagra.SearchParams) { s.Algo = 7 }), f.queries, f.n64, f.dist, nil)},
		{"hash mode", "params.HashmapMode", searchErr(sp(func(s *cagra.SearchParams) { s.HashmapMode = 9 }), f.queries, f.n64, f.dist, nil)},
		{"negative itopk", "params.ITopKSize", searchErr(sp(func(s *cagra.SearchParams) { s.ITopKSize = -1 }), f.queries, f.n64, f.dist, nil)},
		{"negative width", "params.SearchWidth", searchErr(sp(func(s *cagra.SearchParams) { s.SearchWidth = -2 }), f.queries, f.n64, f.dist, nil)},
		{"device usage", "params.PersistentDeviceUsage", searchErr(sp(func(s *cagra.SearchParams) { s.PersistentDeviceUsage = 1.5 }), f.queries, f.n64, f.dist, nil)},
		{"zero k", "neighbors", func() error {
			n, err := dlpack.FromRawPartsMut(nil, dlpack.Device{Type: dlpack.CUDA}, []int64{nq, 0}, nil, dlpack.Int64)
			if err != nil {
				return err
			}
			d, err := dlpack.FromRawPartsMut(nil, dlpack.Device{Type: dlpack.CUDA}, []int64{nq, 0}, nil, dlpack.Float32)
			if err != nil {
				return err
			}
			return idx.Search(f.res, &f.sp, f.queries, n, d, nil)
		}},
		// Build.
		{"nil dataset", "dataset", buildErr(nil, params(t))},
		{"float64 dataset", "dataset", buildErr(f64, params(t))},
		{"one row", "dataset", buildErr(oneRow, ip(func(p *cagra.IndexParams) { p.GraphDegree = 1 }))},
		{"empty dataset", "dataset", buildErr(empty, params(t))},
		{"column-major dataset", "dataset", buildErr(colMajor, params(t))},
		{"ACE on device data", "dataset", buildErr(f.dataset, ip(func(p *cagra.IndexParams) { p.BuildAlgo = cagra.ACE }))},
		// Degrees above the rows are lowered, as cuVS does (smalldata_test.go),
		// but cuVS's IterativeSearch build keeps them and fails.
		{"iterative degree > rows", "params.BuildAlgo", buildErr(f.dataset, ip(func(p *cagra.IndexParams) {
			p.BuildAlgo, p.GraphDegree, p.IntermediateGraphDegree = cagra.IterativeSearch, rows+1, rows+1
		}))},
		{"graph degree 0", "params.GraphDegree", buildErr(f.dataset, ip(func(p *cagra.IndexParams) { p.GraphDegree = 0 }))},
		{"intermediate 0", "params.IntermediateGraphDegree", buildErr(f.dataset, ip(func(p *cagra.IndexParams) { p.IntermediateGraphDegree = 0 }))},
		{"iterative intermediate < degree", "params.IntermediateGraphDegree", buildErr(f.dataset, ip(func(p *cagra.IndexParams) {
			p.BuildAlgo, p.IntermediateGraphDegree = cagra.IterativeSearch, degree-1
		}))},
		{"build algo", "params.BuildAlgo", buildErr(f.dataset, ip(func(p *cagra.IndexParams) { p.BuildAlgo = 9 }))},
		{"metric", "params.Metric", buildErr(f.dataset, ip(func(p *cagra.IndexParams) { p.Metric = 999 }))},
		{"negative NN-Descent iterations", "params.NNDescentIterations", buildErr(f.dataset, ip(func(p *cagra.IndexParams) { p.NNDescentIterations = -1 }))},
		{"negative ACE partitions", "params.ACE", buildErr(f.dataset, ip(func(p *cagra.IndexParams) {
			p.BuildAlgo, p.ACE = cagra.ACE, &cagra.ACEParams{NPartitions: -1}
		}))},
		{"negative ACE memory", "params.ACE", buildErr(f.dataset, ip(func(p *cagra.IndexParams) {
			p.BuildAlgo, p.ACE = cagra.ACE, &cagra.ACEParams{MaxGPUMemoryGB: -1}
		}))},
		{"NUL in BuildDir", "params.ACE.BuildDir", buildErr(f.dataset, ip(func(p *cagra.IndexParams) {
			p.BuildAlgo, p.ACE = cagra.ACE, &cagra.ACEParams{BuildDir: "/tmp/a\x00b"}
		}))},
		{"IVF-PQ metric", "params.IVFPQ.Build.Metric", buildErr(f.dataset, ip(func(p *cagra.IndexParams) {
			p.IVFPQ = &cagra.IVFPQGraphParams{Build: &cagra.IVFPQBuildParams{Metric: 999}}
		}))},
		{"IVF-PQ codebook", "params.IVFPQ.Build.CodebookKind", buildErr(f.dataset, ip(func(p *cagra.IndexParams) {
			p.IVFPQ = &cagra.IVFPQGraphParams{Build: &cagra.IVFPQBuildParams{CodebookKind: 2}}
		}))},
		{"IVF-PQ layout", "params.IVFPQ.Build.CodesLayout", buildErr(f.dataset, ip(func(p *cagra.IndexParams) {
			p.IVFPQ = &cagra.IVFPQGraphParams{Build: &cagra.IVFPQBuildParams{CodesLayout: -1}}
		}))},
		// Extend.
		{"nil additional", "additional", func() error { return idx.Extend(f.res, nil, &ep) }},
		{"float64 additional", "additional", func() error { return idx.Extend(f.res, f64, &ep) }},
		{"additional of another dimension", "additional", func() error { return idx.Extend(f.res, narrow, &ep) }},
		{"int8 additional", "additional", func() error { return idx.Extend(f.res, q8, &ep) }},
		{"no additional rows", "additional", func() error { return idx.Extend(f.res, empty, &ep) }},
		// Serialization.
		{"empty path", "path", func() error { return idx.Serialize(f.res, "") }},
		{"NUL in path", "path", func() error { return idx.Serialize(f.res, "a\x00b") }},
		{"NUL in hnswlib path", "path", func() error { return idx.SerializeToHnswlib(f.res, "a\x00b") }},
		{"empty deserialize path", "path", func() error { return errOf(cagra.Deserialize(f.res, "")) }},
		// IndexFromArgs.
		{"nil graph", "graph/dataset", func() error { return errOf(cagra.IndexFromArgs(f.res, safe.L2Expanded, nil, f.dataset)) }},
		{"nil args dataset", "graph/dataset", func() error { return errOf(cagra.IndexFromArgs(f.res, safe.L2Expanded, graph, nil)) }},
		{"int32 graph", "graph", func() error { return errOf(cagra.IndexFromArgs(f.res, safe.L2Expanded, graphI32, f.dataset)) }},
		{"graph rows", "graph", func() error { return errOf(cagra.IndexFromArgs(f.res, safe.L2Expanded, graphShort, f.dataset)) }},
		{"graph degree", "graph", func() error { return errOf(cagra.IndexFromArgs(f.res, safe.L2Expanded, graphWide, f.dataset)) }},
		{"float64 args dataset", "dataset", func() error { return errOf(cagra.IndexFromArgs(f.res, safe.L2Expanded, graph, f64)) }},
		{"args metric", "metric", func() error { return errOf(cagra.IndexFromArgs(f.res, 999, graph, f.dataset)) }},
		// Merge.
		{"one index", "indexes", func() error { return errOf(cagra.Merge(f.res, &base, []*cagra.Index{idx}, nil)) }},
		{"nil index", "indexes", func() error { return errOf(cagra.Merge(f.res, &base, []*cagra.Index{idx, nil}, nil)) }},
		{"dimensions differ", "indexes", func() error { return errOf(cagra.Merge(f.res, &base, []*cagra.Index{idx, small}, nil)) }},
		{"merge params", "params.IntermediateGraphDegree", func() error {
			return errOf(cagra.Merge(f.res, ptr(ip(func(p *cagra.IndexParams) { p.IntermediateGraphDegree = 0 })), []*cagra.Index{idx, idx}, nil))
		}},
		{"merge iterative degree", "params.BuildAlgo", func() error {
			return errOf(cagra.Merge(f.res, ptr(ip(func(p *cagra.IndexParams) {
				p.BuildAlgo, p.GraphDegree, p.IntermediateGraphDegree = cagra.IterativeSearch, 2*rows+1, 2*rows+1
			})), []*cagra.Index{idx, idx}, nil))
		}},
		{"merge bitmap", "filter", func() error { return errOf(cagra.Merge(f.res, &base, []*cagra.Index{idx, idx}, bitmap)) }},
		{"merge filter rows", "filter", func() error { return errOf(cagra.Merge(f.res, &base, []*cagra.Index{idx, idx}, otherRows)) }},
		// Resources.
		{"nil resources", "res", func() error { return idx.Search(nil, &f.sp, f.queries, f.n64, f.dist, nil) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := calls()
			err := c.err()
			if !isArg(err, c.arg) {
				t.Errorf("want an error about %s, got %v", c.arg, err)
			}
			if fns := called(before); fns != nil {
				t.Errorf("refused after calling %v", fns)
			}
		})
	}
	// Outputs that overlap are refused.
	nv, _ := f.n64.View()
	p, _ := nv.Data()
	overlap, err := dlpack.FromRawPartsMut(p, nv.Device(), []int64{nq, k}, nil, dlpack.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Search(f.res, &f.sp, f.queries, f.n64, overlap, nil); !isArg(err, "distances") || !strings.Contains(err.Error(), "overlaps") {
		t.Errorf("aliased outputs: %v", err)
	}
	// The index is intact after all that.
	search(t, f, idx, f.n64, f.data, nil, nil)
}

// Everything refuses a closed index with safe.ErrClosed.
func TestClosed(t *testing.T) {
	f := setup(t)
	idx, err := cagra.Build(f.res, f.dataset, ptr(params(t)))
	if err != nil {
		t.Fatal(err)
	}
	live := build(t, f.res, f.dataset, params(t))
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ep, _ := cagra.DefaultExtendParams()
	path := filepath.Join(t.TempDir(), "x")
	for name, err := range map[string]error{
		"Search":             idx.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil),
		"Extend":             idx.Extend(f.res, f.queries, &ep),
		"Serialize":          idx.Serialize(f.res, path),
		"SerializeToHnswlib": idx.SerializeToHnswlib(f.res, path),
		"Dataset":            errOf(idx.Dataset()),
		"Graph":              errOf(idx.Graph()),
		"Merge":              errOf(cagra.Merge(f.res, ptr(params(t)), []*cagra.Index{live, idx}, nil)),
	} {
		if !errors.Is(err, safe.ErrClosed) {
			t.Errorf("%s on a closed index: %v", name, err)
		}
	}
	// Closed resources are refused too.
	res, err := safe.NewResources()
	if err != nil {
		t.Fatal(err)
	}
	res.Close()
	if err := live.Search(res, &f.sp, f.queries, f.n64, f.dist, nil); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("search with closed resources: %v", err)
	}
	if _, err := cagra.Build(res, f.dataset, ptr(params(t))); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("build with closed resources: %v", err)
	}
}

// A failure injected into each C call of each function comes back as a
// *safe.Error naming the call, and leaks nothing. The calls are found by
// running each operation once and listing what it called, so none is
// missed. Destroy calls are left out: a failed Destroy frees nothing by
// definition, and the safe layer ignores them where they only release
// scratch objects; Index.Close, which reports its own, is tested below.
func TestFaults(t *testing.T) {
	f := setup(t)
	dir := t.TempDir()
	hostData := hostMatrix(t, f.data, rows, dim)
	hostMore := hostMatrix(t, safetest.Random(3, 5, dim), 5, dim)
	devMore := deviceMatrix(t, f.res, safetest.Random(4, 5, dim), 5, dim)
	graph := exactGraph(f.data, dim, degree)
	hostGraph := hostMatrix(t, graph, rows, degree)
	devGraph := deviceMatrix(t, f.res, graph, rows, degree)
	bs, err := safe.NewBitsetFilterAllowing(f.res, rows, []int64{1, 5, 9, 13, 17, 21})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bs)
	mergeFilter, err := safe.NewBitsetFilterAllowing(f.res, 2*rows, []int64{0, 2, 4, 6, 8, 10, 300, 301, 302, 303})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, mergeFilter)
	ivfpqBuild, _ := cagra.DefaultIVFPQBuildParams()
	ivfpqSearch, _ := cagra.DefaultIVFPQSearchParams()
	comp, _ := cagra.DefaultCompressionParams()
	comp.PQBits = 4 // 16 PQ centers: 200 rows cannot train the default 256
	ace, _ := cagra.DefaultACEParams()
	ace.BuildDir = dir
	full := params(t)
	full.IVFPQ = &cagra.IVFPQGraphParams{Build: &ivfpqBuild, Search: &ivfpqSearch, RefinementRate: 2}
	full.Compression = &comp
	if on2608() {
		full.Compression = nil // refused on 26.08 (TestBuildAlgorithms)
	}
	aceParams := params(t)
	aceParams.BuildAlgo, aceParams.ACE = cagra.ACE, &ace
	plain := params(t)
	mergeParams := params(t)
	mergeParams.IVFPQ = &cagra.IVFPQGraphParams{Build: &ivfpqBuild, Search: &ivfpqSearch}
	mergeParams.GraphDegree, mergeParams.IntermediateGraphDegree = 4, 4

	idx := build(t, f.res, f.dataset, params(t))
	other := build(t, f.res, f.dataset, params(t))
	path := filepath.Join(dir, "cagra.idx")
	if err := idx.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	closeIndex := func(x *cagra.Index, err error) error {
		if err == nil {
			err = x.Close()
		}
		return err
	}
	// the graph path: the policy would send this filter to the exact path,
	// whose brute-force index, built once, has no faults to inject later
	graphSP := f.sp
	graphSP.FilterPath = safe.FilterIndex
	ops := []struct {
		name string
		op   func() error
	}{
		{"DefaultIndexParams", func() error { return errOf(cagra.DefaultIndexParams()) }},
		{"DefaultSearchParams", func() error { return errOf(cagra.DefaultSearchParams()) }},
		{"DefaultExtendParams", func() error { return errOf(cagra.DefaultExtendParams()) }},
		{"DefaultCompressionParams", func() error { return errOf(cagra.DefaultCompressionParams()) }},
		{"DefaultACEParams", func() error { return errOf(cagra.DefaultACEParams()) }},
		{"DefaultIVFPQBuildParams", func() error { return errOf(cagra.DefaultIVFPQBuildParams()) }},
		{"DefaultIVFPQSearchParams", func() error { return errOf(cagra.DefaultIVFPQSearchParams()) }},
		{"FromHNSWParams", func() error {
			return errOf(cagra.FromHNSWParams(2_000_000, 128, 16, 200, cagra.SimilarSearchPerformance, safe.L2Expanded))
		}},
		{"Build host IVF-PQ compressed", func() error { return closeIndex(cagra.Build(f.res, hostData, &full)) }},
		{"Build device IVF-PQ compressed", func() error { return closeIndex(cagra.Build(f.res, f.dataset, &full)) }},
		{"Build host ACE", func() error { return closeIndex(cagra.Build(f.res, hostData, &aceParams)) }},
		{"Build device", func() error { return closeIndex(cagra.Build(f.res, f.dataset, &plain)) }},
		{"Search uint32", func() error { return idx.Search(f.res, &f.sp, f.queries, f.n32, f.dist, nil) }},
		{"Search int64 filtered", func() error { return idx.Search(f.res, &graphSP, f.queries, f.n64, f.dist, bs) }},
		{"Extend host", func() error { return idx.Extend(f.res, hostMore, &cagra.ExtendParams{}) }},
		{"Extend device", func() error { return idx.Extend(f.res, devMore, &cagra.ExtendParams{}) }},
		{"Serialize", func() error { return idx.Serialize(f.res, filepath.Join(dir, "s.idx")) }},
		{"SerializeToHnswlib", func() error { return idx.SerializeToHnswlib(f.res, filepath.Join(dir, "h.bin")) }},
		{"Deserialize", func() error { return closeIndex(cagra.Deserialize(f.res, path)) }},
		{"IndexFromArgs host", func() error { return closeIndex(cagra.IndexFromArgs(f.res, safe.L2Expanded, hostGraph, hostData)) }},
		{"IndexFromArgs device", func() error { return closeIndex(cagra.IndexFromArgs(f.res, safe.L2Expanded, devGraph, f.dataset)) }},
		{"Merge", func() error {
			return closeIndex(cagra.Merge(f.res, &mergeParams, []*cagra.Index{other, other}, mergeFilter))
		}},
		{"Dataset", func() error { return errOf(idx.Dataset()) }},
		{"Graph", func() error { return errOf(idx.Graph()) }},
	}
	if on2608() {
		leanPath := filepath.Join(dir, "lean.idx")
		if err := idx.Serialize(f.res, leanPath, safe.WithoutDataset()); err != nil {
			t.Fatal(err)
		}
		pids := newDevice[uint32](t, f.res, nq, k)
		ops = append(ops, []struct {
			name string
			op   func() error
		}{
			{"IndexParamsFromDataset", func() error {
				return errOf(cagra.IndexParamsFromDataset(rows, dim, degree, safe.L2Expanded, 1))
			}},
			{"Deserialize graph-only, UpdateDataset host", func() error {
				g, err := cagra.Deserialize(f.res, leanPath)
				if err == nil {
					err = g.UpdateDataset(f.res, hostData)
					if cerr := g.Close(); err == nil {
						err = cerr
					}
				}
				return err
			}},
			{"UpdateDataset device", func() error { return other.UpdateDataset(f.res, f.dataset) }},
			{"SearchMultiPartition filtered", func() error {
				return cagra.SearchMultiPartition(f.res, &f.sp, []*cagra.Index{other, other}, f.queries, pids, f.n64, f.dist, []*safe.Filter{nil, bs})
			}},
		}...)
	}
	for _, o := range ops {
		injectEach(t, o.name, o.op)
	}
	// The indexes are intact after all that, and idx knows its row count
	// even after Extends whose stream sync failed: the library's count
	// (read back through a file) is the same.
	search(t, f, other, f.n64, f.data, nil, nil)
	if err := idx.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil); err != nil {
		t.Fatal(err)
	}
	if err := idx.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	back, err := cagra.Deserialize(f.res, path)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	if back.Rows() != idx.Rows() || idx.Rows() == rows {
		t.Errorf("the index counts %d rows, the library %d", idx.Rows(), back.Rows())
	}

	// Close reports a failed cuvsCagraIndexDestroy, keeps its borrow, and
	// a second Close finishes the job.
	xd := deviceMatrix(t, f.res, f.data, rows, dim)
	x := build(t, f.res, xd, params(t))
	safetest.Double(t, "fault injection").FailNext("cuvsCagraIndexDestroy", "injected")
	if err := x.Close(); !isCuvs(err, "cuvsCagraIndexDestroy", "injected") {
		t.Errorf("Close with cuvsCagraIndexDestroy failing: %v", err)
	}
	if err := x.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("search after a failed Close: %v", err)
	}
	if err := xd.CopyFromHost(f.res, f.data); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("the dataset of an index not yet freed: %v", err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := xd.CopyFromHost(f.res, f.data); err != nil {
		t.Errorf("the dataset of a freed index: %v", err)
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
	if len(fns) == 0 {
		t.Fatalf("%s called nothing", name)
	}
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
			// Byte counts may change: a failed stream sync after a
			// successful Extend leaves the index extended.
			if p.Live() != live[kind].Live() && !strings.HasSuffix(kind, "_bytes") {
				t.Errorf("%s with %s failing: %s went from %d to %d live", name, fn, kind, live[kind].Live(), p.Live())
			}
		}
	}
	if injected == 0 {
		t.Errorf("%s: no call to fail in %v", name, fns)
	}
}

// WarmUp searches once, for each element type and neighbor type, and
// frees what it allocated; WithPersistentKernel sets the persistent search.
func TestWarmUp(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	for _, nt := range []dlpack.DataType{dlpack.Uint32, dlpack.Int64} {
		before := calls()
		if err := idx.WarmUp(f.res, &f.sp, 3, k, nt); err != nil {
			t.Fatal(err)
		}
		if c := called(before); safetest.Control() != nil && !slices.Contains(c, "cuvsCagraSearch") {
			t.Errorf("WarmUp(%v) called %v", nt, c)
		}
	}
	p := params(t)
	p.GraphDegree, p.IntermediateGraphDegree = 4, 8
	u8 := make([]uint8, 40*16)
	f16 := make([]float16.Float16, 40*16)
	for i := range u8 {
		u8[i] = uint8(i * 7)
		f16[i] = float16.Fromfloat32(float32(i%13) / 4)
	}
	for _, x := range []*cagra.Index{
		build(t, f.res, deviceMatrix(t, f.res, u8, 40, 16), p),
		build(t, f.res, deviceMatrix(t, f.res, f16, 40, 16), p),
		build(t, f.res, deviceMatrix(t, f.res, func() []int8 { s := make([]int8, 40*16); s[3] = 1; return s }(), 40, 16), p),
	} {
		if err := x.WarmUp(f.res, &f.sp, 2, 3, dlpack.Int64); err != nil {
			t.Errorf("WarmUp of a %v index: %v", x.DType(), err)
		}
	}
	for name, err := range map[string]error{
		"batch":     idx.WarmUp(f.res, &f.sp, 0, k, dlpack.Uint32),
		"k":         idx.WarmUp(f.res, &f.sp, 1, 0, dlpack.Uint32),
		"neighbors": idx.WarmUp(f.res, &f.sp, 1, k, dlpack.Int32),
	} {
		if !isArg(err, name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := idx.WarmUp(f.res, &f.sp, 1, rows+1, dlpack.Uint32); !isArg(err, "neighbors") {
		t.Errorf("k > rows: %v", err)
	}
	if safetest.Control() != nil { // fault injection needs the double
		injectEach(t, "WarmUp", func() error { return idx.WarmUp(f.res, &f.sp, 2, k, dlpack.Uint32) })
	}

	def, _ := cagra.DefaultSearchParams()
	def.Algo = cagra.MultiCTA
	ps := def.WithPersistentKernel(0, 0)
	if !ps.Persistent || ps.Algo != cagra.SingleCTA || ps.PersistentLifetime != 2 || ps.PersistentDeviceUsage != 1 || def.Persistent {
		t.Errorf("WithPersistentKernel(0, 0) = %+v", ps)
	}
	ps = def.WithPersistentKernel(5, 0.9)
	if ps.PersistentLifetime != 5 || ps.PersistentDeviceUsage != 0.9 {
		t.Errorf("WithPersistentKernel(5, 0.9) = %+v", ps)
	}
	// A persistent search is refused (TestPersistentRefused).
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.WarmUp(f.res, &f.sp, 1, k, dlpack.Uint32); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("WarmUp of a closed index: %v", err)
	}
}

// blockingTensor's View blocks until release is closed, so that a search
// can be held inside the index (after it entered, before any C call).
type blockingTensor struct {
	dlpack.Tensor
	entered chan struct{}
	release chan struct{}
}

func (b *blockingTensor) View() (dlpack.View, error) {
	close(b.entered)
	<-b.release
	return b.Tensor.View()
}

// Many goroutines search one index, each with its own Resources (and two
// sharing one), while another goroutine tries Extend (refused); Close then
// waits for the searches in flight, and later searches are refused.
func TestConcurrentSearch(t *testing.T) {
	f := setup(t)
	ctl := safetest.Double(t, "its control surface")
	idx, err := cagra.Build(f.res, f.dataset, ptr(params(t)))
	if err != nil {
		t.Fatal(err)
	}
	want := safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, nil)
	t.Cleanup(func() { ctl.SetCallDelay(0) })
	ctl.SetCallDelay(200 * time.Microsecond) // searches linger in the library

	// One search held inside the index for as long as the test needs.
	hold := &blockingTensor{Tensor: f.queries, entered: make(chan struct{}), release: make(chan struct{})}
	held := make(chan error, 1)
	hres := safetest.Resources(t)
	hn := newDevice[uint32](t, hres, nq, k)
	hd := newDevice[float32](t, hres, nq, k)
	go func() { held <- idx.Search(hres, &f.sp, hold, hn, hd, nil) }()
	<-hold.entered

	const searchers = 10
	shared := safetest.Resources(t)
	var ok, refused atomic.Int64
	var started sync.WaitGroup
	var wg sync.WaitGroup
	for g := 0; g < searchers; g++ {
		started.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			signal := sync.OnceFunc(started.Done) // after two searches, or on leaving
			defer signal()
			res := shared // the last two share one Resources
			if g < searchers-2 {
				r, err := safe.NewResources()
				if err != nil {
					t.Error(err)
					return
				}
				defer r.Close()
				res = r
			}
			n, _ := safe.NewDeviceMatrix[int64](res, nq, k)
			d, _ := safe.NewDeviceMatrix[float32](res, nq, k)
			defer n.Close()
			defer d.Close()
			sp := f.sp
			for i := 0; ; i++ {
				err := idx.Search(res, &sp, f.queries, n, d, nil)
				if i == 1 {
					signal()
				}
				if errors.Is(err, safe.ErrClosed) {
					refused.Add(1)
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if err := res.Sync(); err != nil {
					t.Error(err)
					return
				}
				got, _ := n.ToHost(res)
				for q := range want {
					if !slices.Equal(got[q*k:(q+1)*k], want[q]) {
						t.Errorf("query %d: %v, want %v", q, got[q*k:(q+1)*k], want[q])
						return
					}
				}
				ok.Add(1)
			}
		}()
	}
	started.Wait() // every searcher has searched twice

	// Extend waits for the searches in flight (the held one at least).
	ep, _ := cagra.DefaultExtendParams()
	extended := make(chan error, 1)
	go func() { extended <- idx.Extend(f.res, f.queries, &ep) }()
	select {
	case err := <-extended:
		t.Fatalf("Extend returned (%v) while a search was in flight", err)
	case <-time.After(20 * time.Millisecond):
	}
	// Close waits for the searches in flight: not done while one is held;
	// and it wins over the waiting Extend.
	closed := make(chan error, 1)
	go func() { closed <- idx.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a search was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(hold.release)
	if err := <-held; err != nil {
		t.Errorf("the held search: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := <-extended; !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Extend waiting when Close came: %v, want ErrClosed", err)
	}
	wg.Wait()
	if refused.Load() != searchers || ok.Load() < 2*searchers {
		t.Errorf("%d searches succeeded, %d searchers refused", ok.Load(), refused.Load())
	}
	checkResults(t, hres, hn, hd, f.data, f.qs, dim, nil)
	if err := idx.Search(f.res, &f.sp, f.queries, f.n64, f.dist, nil); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("search after Close: %v", err)
	}
}

// ptr returns a pointer to a copy of v (params for a call from a helper).
func ptr[T any](v T) *T { return &v }

func on2608() bool { return safe.Release() == "26.08" }

// wantCompressionRefused checks the refusal of CompressionParams on cuVS
// 26.08, whose index params have no compression member: an *safe.ArgError
// naming the field and the release.
func wantCompressionRefused(t *testing.T, err error) {
	t.Helper()
	if !isArg(err, "params.Compression") || !strings.Contains(err.Error(), "26.08") {
		t.Errorf("compressed build on 26.08: %v, want an *safe.ArgError naming params.Compression and 26.08", err)
	}
}
