package hnsw_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows = 2000
	dim  = 16
	nq   = 50
	k    = 10
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func hostMatrix[T dlpack.DType](t *testing.T, data []T, r, c int) *dlpack.HostMatrix[T] {
	t.Helper()
	m, err := dlpack.NewHostMatrix(data, r, c)
	must(t, err)
	return m
}

func isArg(err error, arg string) bool {
	var ae *safe.ArgError
	return errors.As(err, &ae) && ae.Arg == arg
}

type fixture struct {
	res      *safe.Resources
	data, qs []float32
	exact    [][]int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{res: safetest.Resources(t)}
	f.data = safetest.Random(1, rows, dim)
	f.qs = safetest.Random(2, nq, dim)
	f.exact = safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, nil)
	return f
}

// cagraIndex builds a CAGRA index of f.data (host rows, degree 32).
func (f *fixture) cagraIndex(t *testing.T, metric safe.Metric) *cagra.Index {
	t.Helper()
	p, err := cagra.DefaultIndexParams()
	must(t, err)
	p.Metric = metric
	p.GraphDegree, p.IntermediateGraphDegree = 32, 64
	idx, err := cagra.Build(f.res, hostMatrix(t, f.data, rows, dim), &p)
	must(t, err)
	safetest.Close(t, idx)
	return idx
}

func indexParams(t *testing.T, h hnsw.Hierarchy) *hnsw.IndexParams {
	t.Helper()
	p, err := hnsw.DefaultIndexParams()
	must(t, err)
	p.Hierarchy = h
	return &p
}

// search runs Search over host tensors and returns the ids.
func (f *fixture) search(t *testing.T, idx *hnsw.Index, ef int32, queries []float32) ([]int64, []float32) {
	t.Helper()
	n := len(queries) / dim
	nb := make([]int64, n*k)
	ds := make([]float32, n*k)
	must(t, idx.Search(f.res, &hnsw.SearchParams{Ef: ef}, hostMatrix(t, queries, n, dim), hostMatrix(t, nb, n, k), hostMatrix(t, ds, n, k)))
	return nb, ds
}

func recall(got []int64, exact [][]int64) float64 {
	hit, all := 0, 0
	for q, want := range exact {
		row := got[q*k : (q+1)*k]
		for _, w := range want {
			all++
			if slices.Contains(row, w) {
				hit++
			}
		}
	}
	return float64(hit) / float64(all)
}

// The defaults are cuVS's, read from the library (c/src/neighbors/hnsw.cpp
// of both releases).
func TestDefaults(t *testing.T) {
	safetest.Check(t)
	p, err := hnsw.DefaultIndexParams()
	must(t, err)
	if p.Hierarchy != hnsw.HierarchyGPU || p.EfConstruction != 200 || p.NumThreads != 0 || p.M != 32 || p.Metric != safe.L2Expanded || p.ACE != nil {
		t.Errorf("index params %+v", p)
	}
	a, err := hnsw.DefaultACEParams()
	must(t, err)
	if a != (hnsw.ACEParams{BuildDir: "/tmp/hnsw_ace_build"}) {
		t.Errorf("ACE params %+v", a)
	}
	s, err := hnsw.DefaultSearchParams()
	must(t, err)
	if s != (hnsw.SearchParams{Ef: 200}) {
		t.Errorf("search params %+v", s)
	}
	e, err := hnsw.DefaultExtendParams()
	must(t, err)
	if e != (hnsw.ExtendParams{}) {
		t.Errorf("extend params %+v", e)
	}
}

// CAGRA → HNSW → CPU search, every hierarchy: recall against exact kNN, and
// recall grows with ef. The HNSW index references nothing of the CAGRA
// index: it is searched after the CAGRA index is closed.
func TestFromCagraRecall(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	for _, h := range []hnsw.Hierarchy{hnsw.HierarchyNone, hnsw.HierarchyCPU, hnsw.HierarchyGPU} {
		t.Run(h.String(), func(t *testing.T) {
			ci := f.cagraIndex(t, safe.L2Expanded)
			idx, err := hnsw.FromCagra(f.res, ci, indexParams(t, h))
			must(t, err)
			safetest.Close(t, idx)
			must(t, ci.Close())
			if idx.Rows() != rows || idx.Dim() != dim || idx.DType() != dlpack.Float32 || idx.Hierarchy() != h || idx.Metric() != safe.L2Expanded {
				t.Fatalf("rows %d dim %d dtype %s hierarchy %s metric %s", idx.Rows(), idx.Dim(), idx.DType(), idx.Hierarchy(), idx.Metric())
			}
			low, _ := f.search(t, idx, 1, f.qs)
			high, ds := f.search(t, idx, 256, f.qs)
			rl, rh := recall(low, f.exact), recall(high, f.exact)
			t.Logf("%s: recall %.3f at ef=k, %.3f at ef=256", h, rl, rh)
			if rh < 0.95 {
				t.Errorf("recall %.3f at ef=256, want >= 0.95", rh)
			}
			if rh < rl {
				t.Errorf("recall fell from %.3f to %.3f as ef grew", rl, rh)
			}
			for q := range nq {
				got := ds[q*k : (q+1)*k]
				if !slices.IsSorted(got) {
					t.Fatalf("query %d: distances not ascending: %v", q, got)
				}
				id := high[q*k]
				want := safetest.L2(f.qs[q*dim:(q+1)*dim], f.data[int(id)*dim:(int(id)+1)*dim])
				if !safetest.NearlyEqual(got[0], want) {
					t.Fatalf("query %d: distance %v to %d, squared L2 is %v", q, got[0], id, want)
				}
			}
		})
	}
}

// Each row is its own nearest neighbour, with distance 0 (HierarchyNone:
// the seeds and the base layer find it).
func TestSelfMatch(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, hnsw.HierarchyNone))
	must(t, err)
	safetest.Close(t, idx)
	nb, ds := f.search(t, idx, 64, f.data[:100*dim])
	found := 0
	for q := range 100 {
		if nb[q*k] == int64(q) && ds[q*k] == 0 {
			found++
		}
	}
	if found < 98 {
		t.Errorf("%d of 100 rows found themselves first", found)
	}
}

// InnerProduct: hnswlib's distance 1 - <q, x>.
func TestInnerProduct(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.InnerProduct), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	if idx.Metric() != safe.InnerProduct {
		t.Fatalf("metric %s", idx.Metric())
	}
	exact := safetest.ExactKNN(f.data, f.qs, dim, k, safetest.NegInner, nil)
	nb, ds := f.search(t, idx, 256, f.qs)
	if r := recall(nb, exact); r < 0.9 {
		t.Errorf("recall %.3f", r)
	}
	id := int(nb[0])
	if want := 1 - (-safetest.NegInner(f.qs[:dim], f.data[id*dim:(id+1)*dim])); !safetest.NearlyEqual(ds[0], want) {
		t.Errorf("distance %v, want 1 - <q, x> = %v", ds[0], want)
	}
}

// A CAGRA index of another metric has no hnswlib space: refused.
func TestFromCagraCosineRefused(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	_, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.CosineExpanded), nil)
	if !isArg(err, "cagraIdx") {
		t.Fatalf("got %v", err)
	}
}

// FromCagraWithDataset takes the rows from a host tensor; the rows must be
// the graph's, in the CAGRA index's element type, in host memory.
func TestFromCagraWithDataset(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	ci := f.cagraIndex(t, safe.L2Expanded)
	idx, err := hnsw.FromCagraWithDataset(f.res, ci, hostMatrix(t, f.data, rows, dim), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	nb, _ := f.search(t, idx, 256, f.qs)
	if r := recall(nb, f.exact); r < 0.95 {
		t.Errorf("recall %.3f", r)
	}
	dev, err := safe.DeviceMatrixFrom(f.res, f.data, rows, dim)
	must(t, err)
	safetest.Close(t, dev)
	half := make([]uint8, rows*dim)
	for name, c := range map[string]struct {
		arg string
		ds  dlpack.Tensor
	}{
		"nil":           {"dataset", nil},
		"device memory": {"dataset", dev},
		"fewer rows":    {"dataset", hostMatrix(t, f.data[:(rows-1)*dim], rows-1, dim)},
		"other dtype":   {"dataset", hostMatrix(t, half, rows, dim)},
	} {
		_, err := hnsw.FromCagraWithDataset(f.res, ci, c.ds, nil)
		if !isArg(err, c.arg) {
			t.Errorf("%s: got %v, want an ArgError naming %s", name, err, c.arg)
		}
	}
	wide := make([]float32, rows*(dim+1))
	if _, err := hnsw.FromCagraWithDataset(f.res, ci, hostMatrix(t, wide, rows, dim+1), nil); !isArg(err, "dataset") {
		t.Errorf("other columns: got %v", err)
	}
	if _, err := hnsw.FromCagra(f.res, nil, nil); !isArg(err, "cagraIdx") {
		t.Errorf("nil CAGRA index: %v", err)
	}
	closed := f.cagraIndex(t, safe.L2Expanded)
	must(t, closed.Close())
	if _, err := hnsw.FromCagra(f.res, closed, nil); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("closed CAGRA index: %v", err)
	}
}

// Other element types: uint8 rows through CAGRA to HNSW.
func TestUint8(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	const n = 800
	u := make([]uint8, n*dim)
	fl := make([]float32, n*dim)
	for i := range u {
		u[i] = uint8(f.data[i] * 255)
		fl[i] = float32(u[i])
	}
	p, err := cagra.DefaultIndexParams()
	must(t, err)
	p.GraphDegree, p.IntermediateGraphDegree = 32, 64
	ci, err := cagra.Build(f.res, hostMatrix(t, u, n, dim), &p)
	must(t, err)
	safetest.Close(t, ci)
	idx, err := hnsw.FromCagra(f.res, ci, indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	if idx.DType() != dlpack.Uint8 {
		t.Fatalf("dtype %s", idx.DType())
	}
	const q = 20
	nb := make([]int64, q*k)
	ds := make([]float32, q*k)
	must(t, idx.Search(f.res, nil, hostMatrix(t, u[:q*dim], q, dim), hostMatrix(t, nb, q, k), hostMatrix(t, ds, q, k)))
	exact := safetest.ExactKNN(fl, fl[:q*dim], dim, k, safetest.L2, nil)
	if r := recall(nb, exact); r < 0.9 {
		t.Errorf("recall %.3f", r)
	}
	// float32 queries for a uint8 index
	if err := idx.Search(f.res, nil, hostMatrix(t, f.qs[:q*dim], q, dim), hostMatrix(t, nb, q, k), hostMatrix(t, ds, q, k)); !isArg(err, "queries") {
		t.Errorf("float32 queries: %v", err)
	}
}

// Build (ACE) from host rows: recall; with UseDisk the index is left in
// build_dir/hnsw_index.bin and still searched.
func TestBuild(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	p := indexParams(t, hnsw.HierarchyCPU)
	p.M = 16
	idx, err := hnsw.Build(f.res, hostMatrix(t, f.data, rows, dim), p)
	must(t, err)
	safetest.Close(t, idx)
	nb, _ := f.search(t, idx, 256, f.qs)
	if r := recall(nb, f.exact); r < 0.95 {
		t.Errorf("recall %.3f", r)
	}
	dir := filepath.Join(t.TempDir(), "ace")
	disk := *p
	disk.ACE = &hnsw.ACEParams{BuildDir: dir, UseDisk: true}
	// cuVS converts a graph on disk for the GPU (or no) hierarchy only.
	if _, err := hnsw.Build(f.res, hostMatrix(t, f.data, rows, dim), &disk); !isArg(err, "params.Hierarchy") {
		t.Fatalf("disk mode with HierarchyCPU: %v, want an ArgError naming params.Hierarchy", err)
	}
	disk.Hierarchy = hnsw.HierarchyGPU
	idx2, err := hnsw.Build(f.res, hostMatrix(t, f.data, rows, dim), &disk)
	must(t, err)
	safetest.Close(t, idx2)
	if _, err := os.Stat(filepath.Join(dir, "hnsw_index.bin")); err != nil {
		t.Errorf("disk mode: %v", err)
	}
	nb, _ = f.search(t, idx2, 256, f.qs)
	if r := recall(nb, f.exact); r < 0.95 {
		t.Errorf("disk mode: recall %.3f", r)
	}
}

// Build's refusals, before any C call.
func TestBuildBadInput(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	host := hostMatrix(t, f.data, rows, dim)
	dev, err := safe.DeviceMatrixFrom(f.res, f.data, rows, dim)
	must(t, err)
	safetest.Close(t, dev)
	bad := func(mut func(p *hnsw.IndexParams)) *hnsw.IndexParams {
		p := indexParams(t, hnsw.HierarchyCPU)
		mut(p)
		return p
	}
	nan := make([]float32, rows*dim)
	nan[5] = float32(math.NaN())
	for name, c := range map[string]struct {
		arg string
		ds  dlpack.Tensor
		p   *hnsw.IndexParams
	}{
		"device memory":  {"dataset", dev, nil},
		"nil dataset":    {"dataset", nil, nil},
		"one row":        {"dataset", hostMatrix(t, f.data[:dim], 1, dim), nil},
		"NaN":            {"dataset", hostMatrix(t, nan, rows, dim), nil},
		"cosine":         {"params.Metric", host, bad(func(p *hnsw.IndexParams) { p.Metric = safe.CosineExpanded })},
		"M 0":            {"params.M", host, bad(func(p *hnsw.IndexParams) { p.M = 0 })},
		"ef 0":           {"params.EfConstruction", host, bad(func(p *hnsw.IndexParams) { p.EfConstruction = 0 })},
		"threads":        {"params.NumThreads", host, bad(func(p *hnsw.IndexParams) { p.NumThreads = -1 })},
		"hierarchy":      {"params.Hierarchy", host, bad(func(p *hnsw.IndexParams) { p.Hierarchy = 7 })},
		"host memory GB": {"params.ACE.MaxHostMemoryGB", host, bad(func(p *hnsw.IndexParams) { p.ACE = &hnsw.ACEParams{MaxHostMemoryGB: -1} })},
		"NUL dir":        {"params.ACE.BuildDir", host, bad(func(p *hnsw.IndexParams) { p.ACE = &hnsw.ACEParams{BuildDir: "a\x00b"} })},
		"CPU on disk":    {"params.Hierarchy", host, bad(func(p *hnsw.IndexParams) { p.ACE = &hnsw.ACEParams{UseDisk: true} })},
		"zero params":    {"params.EfConstruction", host, &hnsw.IndexParams{}},
	} {
		if _, err := hnsw.Build(f.res, c.ds, c.p); !isArg(err, c.arg) {
			t.Errorf("%s: got %v, want an ArgError naming %s", name, err, c.arg)
		}
	}
}

// Serialize then Deserialize gives an index that answers exactly as the
// original (hnswlib's format holds the whole graph); the streams too.
func TestSerializeRoundTrip(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	for _, h := range []hnsw.Hierarchy{hnsw.HierarchyNone, hnsw.HierarchyCPU} {
		t.Run(h.String(), func(t *testing.T) {
			idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, h))
			must(t, err)
			safetest.Close(t, idx)
			path := filepath.Join(t.TempDir(), "x.hnsw")
			must(t, idx.Serialize(f.res, path))
			back, err := hnsw.Deserialize(f.res, path, dlpack.Float32, safe.L2Expanded, indexParams(t, h))
			must(t, err)
			safetest.Close(t, back)
			if back.Rows() != rows || back.Dim() != dim || back.Hierarchy() != h {
				t.Fatalf("rows %d dim %d hierarchy %s", back.Rows(), back.Dim(), back.Hierarchy())
			}
			a, ad := f.search(t, idx, 64, f.qs)
			b, bd := f.search(t, back, 64, f.qs)
			if !slices.Equal(a, b) || !slices.Equal(ad, bd) {
				t.Errorf("results differ after the round trip")
			}
			var buf bytes.Buffer
			n, err := idx.SerializeTo(f.res, &buf)
			must(t, err)
			// the stream: the file, then its checksum (the file's sidecar)
			file, _ := os.ReadFile(path)
			side, _ := os.ReadFile(path + ".crc32c")
			if n != int64(len(file)+len(side)) || !bytes.Equal(buf.Bytes(), append(file, side...)) {
				t.Errorf("SerializeTo wrote %d bytes, the file has %d and its sidecar %d", n, len(file), len(side))
			}
			back2, err := hnsw.DeserializeFrom(f.res, &buf, dlpack.Float32, safe.L2Expanded, indexParams(t, h))
			must(t, err)
			safetest.Close(t, back2)
			c, _ := f.search(t, back2, 64, f.qs)
			if !slices.Equal(a, c) {
				t.Errorf("results differ after DeserializeFrom")
			}
			if h == hnsw.HierarchyNone {
				// a base-layer-only file searched through upper layers it lacks
				_, err := hnsw.Deserialize(f.res, path, dlpack.Float32, safe.L2Expanded, indexParams(t, hnsw.HierarchyGPU))
				if !errors.Is(err, safe.ErrCorruptIndex) {
					t.Errorf("base-layer file with a hierarchy: %v", err)
				}
			}
			// nil params: the hierarchy the file holds, searched as the original
			inferred, err := hnsw.Deserialize(f.res, path, dlpack.Float32, safe.L2Expanded, nil)
			must(t, err)
			safetest.Close(t, inferred)
			want := h
			if h != hnsw.HierarchyNone {
				want = hnsw.HierarchyGPU // DefaultIndexParams'
			}
			if got := inferred.Hierarchy(); got != want {
				t.Errorf("nil params: hierarchy %s, want %s", got, want)
			}
			d, _ := f.search(t, inferred, 64, f.qs)
			if !slices.Equal(a, d) {
				t.Errorf("nil params: results differ from the original's")
			}
		})
	}
}

// cagra's SerializeToHnswlib writes a file hnsw.Deserialize reads
// (base layer only).
func TestReadsCagraHnswlibFile(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	ci := f.cagraIndex(t, safe.L2Expanded)
	path := filepath.Join(t.TempDir(), "cagra.hnsw")
	must(t, ci.SerializeToHnswlib(f.res, path))
	idx, err := hnsw.Deserialize(f.res, path, dlpack.Float32, safe.L2Expanded, indexParams(t, hnsw.HierarchyNone))
	must(t, err)
	safetest.Close(t, idx)
	nb, _ := f.search(t, idx, 256, f.qs)
	if r := recall(nb, f.exact); r < 0.95 {
		t.Errorf("recall %.3f", r)
	}
}

// Files that do not fit what Deserialize is told, or are damaged, are
// refused as corrupt before cuVS reads them.
func TestDeserializeBadFiles(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.hnsw")
	must(t, idx.Serialize(f.res, path))
	file, _ := os.ReadFile(path)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, b, 0o600))
		return p
	}
	cpu := indexParams(t, hnsw.HierarchyCPU)
	// the file's bytes with the 8-byte field at off set to v
	patch := func(off int, v uint64) []byte {
		b := slices.Clone(file)
		binary.LittleEndian.PutUint64(b[off:], v)
		return b
	}
	perElement := binary.LittleEndian.Uint64(file[24:])
	labelOffset := binary.LittleEndian.Uint64(file[32:])
	for name, c := range map[string]struct {
		path  string
		dtype dlpack.DataType
	}{
		"wrong dtype": {path, dlpack.Float16}, // float32 bytes read as float16 hold NaN/Inf patterns
		"truncated":   {write("trunc", file[:len(file)-3]), dlpack.Float32},
		"appended":    {write("long", append(slices.Clone(file), 0)), dlpack.Float32},
		"header only": {write("short", file[:50]), dlpack.Float32},
		// vectors of 4*dim+2 bytes: not a whole number of float32s
		"odd vector": {write("odd", patch(32, labelOffset+2)), dlpack.Float32},
		// the label no longer ends the element
		"label inside": {write("label", patch(24, perElement+8)), dlpack.Float32},
		// element 0's label: an id beyond int64's, which searches cannot return
		"huge label": {write("huge", patch(96+int(labelOffset), math.MaxUint64-5)), dlpack.Float32},
	} {
		if _, err := hnsw.Deserialize(f.res, c.path, c.dtype, safe.L2Expanded, cpu); !errors.Is(err, safe.ErrCorruptIndex) {
			t.Errorf("%s: got %v, want ErrCorruptIndex", name, err)
		}
	}
	if _, err := hnsw.Deserialize(f.res, filepath.Join(dir, "missing"), dlpack.Float32, safe.L2Expanded, cpu); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("missing file: %v", err)
	}
	for name, c := range map[string]struct {
		arg    string
		dtype  dlpack.DataType
		metric safe.Metric
	}{
		"int64":   {"dtype", dlpack.Int64, safe.L2Expanded},
		"cosine":  {"metric", dlpack.Float32, safe.CosineExpanded},
		"L2Sqrt ": {"metric", dlpack.Float32, safe.L2SqrtExpanded},
	} {
		if _, err := hnsw.Deserialize(f.res, path, c.dtype, c.metric, cpu); !isArg(err, c.arg) {
			t.Errorf("%s: got %v, want an ArgError naming %s", name, err, c.arg)
		}
	}
	if _, err := hnsw.Deserialize(f.res, "a\x00b", dlpack.Float32, safe.L2Expanded, cpu); !isArg(err, "path") {
		t.Errorf("NUL path: %v", err)
	}
}

// Extend adds rows with ids Rows().., found by their own queries; a
// HierarchyNone index is refused.
func TestExtend(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	const first = 1500
	p, err := cagra.DefaultIndexParams()
	must(t, err)
	p.GraphDegree, p.IntermediateGraphDegree = 32, 64
	ci, err := cagra.Build(f.res, hostMatrix(t, f.data[:first*dim], first, dim), &p)
	must(t, err)
	safetest.Close(t, ci)
	idx, err := hnsw.FromCagra(f.res, ci, indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	must(t, idx.Extend(f.res, hostMatrix(t, f.data[first*dim:], rows-first, dim), nil))
	if idx.Rows() != rows {
		t.Fatalf("rows %d after Extend", idx.Rows())
	}
	nb, _ := f.search(t, idx, 128, f.data[first*dim:(first+100)*dim])
	found := 0
	for q := range 100 {
		if nb[q*k] == int64(first+q) {
			found++
		}
	}
	if found < 95 {
		t.Errorf("%d of 100 added rows found themselves first", found)
	}
	nb, _ = f.search(t, idx, 256, f.qs)
	if r := recall(nb, f.exact); r < 0.9 {
		t.Errorf("recall %.3f after Extend", r)
	}

	flat, err := hnsw.FromCagra(f.res, ci, indexParams(t, hnsw.HierarchyNone))
	must(t, err)
	safetest.Close(t, flat)
	add := hostMatrix(t, f.data[:dim], 1, dim)
	if err := flat.Extend(f.res, add, nil); !isArg(err, "index") {
		t.Errorf("HierarchyNone: %v", err)
	}
	dev, err := safe.DeviceMatrixFrom(f.res, f.data[:dim], 1, dim)
	must(t, err)
	safetest.Close(t, dev)
	for name, c := range map[string]struct {
		arg string
		v   dlpack.Tensor
		p   *hnsw.ExtendParams
	}{
		"device memory": {"vectors", dev, nil},
		"nil":           {"vectors", nil, nil},
		"other dim":     {"vectors", hostMatrix(t, f.data[:dim], 2, dim/2), nil},
		"other dtype":   {"vectors", hostMatrix(t, make([]int8, dim), 1, dim), nil},
		"threads":       {"params.NumThreads", add, &hnsw.ExtendParams{NumThreads: -2}},
	} {
		if err := idx.Extend(f.res, c.v, c.p); !isArg(err, c.arg) {
			t.Errorf("%s: got %v, want an ArgError naming %s", name, err, c.arg)
		}
	}
	if idx.Rows() != rows {
		t.Errorf("rows %d after refused extends", idx.Rows())
	}
}

// Search's tensor rules (cuvsHnswSearch's checks and hnswlib's k <= rows),
// refused before the C call.
func TestSearchBadInput(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	q := hostMatrix(t, f.qs, nq, dim)
	nb := hostMatrix(t, make([]int64, nq*k), nq, k)
	ds := hostMatrix(t, make([]float32, nq*k), nq, k)
	dq, err := safe.DeviceMatrixFrom(f.res, f.qs, nq, dim)
	must(t, err)
	safetest.Close(t, dq)
	dn, err := safe.NewDeviceMatrix[uint64](f.res, nq, k)
	must(t, err)
	safetest.Close(t, dn)
	big := rows + 1
	for name, c := range map[string]struct {
		arg  string
		p    *hnsw.SearchParams
		q    dlpack.Tensor
		n, d dlpack.TensorMut
	}{
		"device queries":   {"queries", nil, dq, nb, ds},
		"device neighbors": {"neighbors", nil, q, dn, ds},
		"uint32 neighbors": {"neighbors", nil, q, hostMatrix(t, make([]uint32, nq*k), nq, k), ds},
		"float64 dist":     {"distances", nil, q, nb, hostMatrix(t, make([]float64, nq*k), nq, k)},
		"other dim":        {"queries", nil, hostMatrix(t, f.qs, nq*2, dim/2), nb, ds},
		"k > rows":         {"neighbors", nil, hostMatrix(t, f.qs[:dim], 1, dim), hostMatrix(t, make([]int64, big), 1, big), hostMatrix(t, make([]float32, big), 1, big)},
		"rows mismatch":    {"neighbors", nil, q, hostMatrix(t, make([]int64, k), 1, k), ds},
		"negative ef":      {"params.Ef", &hnsw.SearchParams{Ef: -1}, q, nb, ds},
		"threads":          {"params.NumThreads", &hnsw.SearchParams{NumThreads: -1}, q, nb, ds},
	} {
		if err := idx.Search(f.res, c.p, c.q, c.n, c.d); !isArg(err, c.arg) {
			t.Errorf("%s: got %v, want an ArgError naming %s", name, err, c.arg)
		}
	}
	if err := idx.Search(f.res, nil, nil, nb, ds); err == nil {
		t.Error("nil queries accepted")
	}
}

// The zero SearchParams, nil and the defaults search alike; NumThreads
// changes nothing in the results.
func TestZeroSearchParamsAreDefaults(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	def, err := hnsw.DefaultSearchParams()
	must(t, err)
	run := func(p *hnsw.SearchParams) []int64 {
		nb := make([]int64, nq*k)
		must(t, idx.Search(f.res, p, hostMatrix(t, f.qs, nq, dim), hostMatrix(t, nb, nq, k), hostMatrix(t, make([]float32, nq*k), nq, k)))
		return nb
	}
	want := run(&def)
	if !slices.Equal(run(nil), want) || !slices.Equal(run(&hnsw.SearchParams{}), want) || !slices.Equal(run(&hnsw.SearchParams{NumThreads: 2}), want) {
		t.Error("zero/nil/threaded params search differently from the defaults")
	}
}

// SearchSlice is the family's one-call search (int64 ids, *safe.Results,
// safe.SentinelID64 for unfilled slots): unfiltered, it gives Search's
// rows exactly, and as cagra.SearchSlice's results (same call, same
// Results) with the recall of the graph it came from; filtered, it keeps
// allowed rows only, with recall against the exact filtered kNN, and too
// few allowed rows leave sentinels.
func TestSearchSlice(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	ci := f.cagraIndex(t, safe.L2Expanded)
	idx, err := hnsw.FromCagra(f.res, ci, indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	sp := &hnsw.SearchParams{Ef: 128}

	want, wantD := f.search(t, idx, 128, f.qs)
	got, err := hnsw.SearchSlice(f.res, idx, sp, f.qs, k, nil)
	must(t, err)
	if got.K != k || got.Len() != nq || !slices.Equal(got.Neighbors, want) || !slices.Equal(got.Distances, wantD) {
		t.Fatalf("SearchSlice: k %d, %d queries; differs from Search", got.K, got.Len())
	}
	// the CAGRA index it was made from, through the same call shape
	cr, err := cagra.SearchSlice(f.res, ci, nil, f.qs, k, nil)
	must(t, err)
	if rc, rh := recall(cr.Neighbors, f.exact), recall(got.Neighbors, f.exact); rc < 0.9 || rh < 0.9 {
		t.Errorf("recall: cagra %.3f, hnsw %.3f", rc, rh)
	}
	// Search's uint64 ids (cuVS's own type) are the same ids
	nb64 := make([]uint64, nq*k)
	must(t, idx.Search(f.res, sp, hostMatrix(t, f.qs, nq, dim), hostMatrix(t, nb64, nq, k), hostMatrix(t, make([]float32, nq*k), nq, k)))
	for i, id := range nb64 {
		if int64(id) != want[i] {
			t.Fatalf("slot %d: uint64 id %d, int64 id %d", i, id, want[i])
		}
	}

	words := make([]uint32, (rows+31)/32)
	allow := func(i int) bool { return i%10 == 3 }
	for i := range rows {
		if allow(i) {
			words[i/32] |= 1 << (i % 32)
		}
	}
	filter, err := safe.NewBitsetFilter(f.res, rows, words)
	must(t, err)
	safetest.Close(t, filter)
	res, err := hnsw.SearchSlice(f.res, idx, sp, f.qs, k, filter)
	must(t, err)
	for _, id := range res.Neighbors {
		if !safe.Valid(id) || !allow(int(id)) {
			t.Fatalf("id %d is not allowed", id)
		}
	}
	exact := safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, allow)
	if r := recall(res.Neighbors, exact); r < 0.9 {
		t.Errorf("filtered recall %.3f", r)
	}
	fewFilter, err := safe.NewBitsetFilterAllowing(f.res, rows, []int64{7, 900, 1999})
	must(t, err)
	safetest.Close(t, fewFilter)
	must(t, hnsw.SearchSliceInto(f.res, idx, nil, f.qs[:dim], k, fewFilter, res))
	if res.Len() != 1 {
		t.Fatalf("%d results for one query", res.Len())
	}
	three := slices.Clone(res.Neighbors[:3])
	slices.Sort(three)
	if !slices.Equal(three, []int64{7, 900, 1999}) {
		t.Errorf("three allowed rows: %v", res.Neighbors)
	}
	for j := 3; j < k; j++ {
		if res.Neighbors[j] != safe.SentinelID64 || safe.Valid(res.Neighbors[j]) || !math.IsInf(float64(res.Distances[j]), 1) {
			t.Errorf("slot %d: %d %v, want safe.SentinelID64 and +Inf", j, res.Neighbors[j], res.Distances[j])
		}
	}

	other, err := safe.NewBitsetFilter(f.res, 96, words[:3])
	must(t, err)
	safetest.Close(t, other)
	bm, err := safe.NewBitmapFilter(f.res, nq, rows, make([]uint32, (nq*rows+31)/32))
	must(t, err)
	safetest.Close(t, bm)
	for name, c := range map[string]struct {
		arg string
		err error
	}{
		"96-row filter": {"filter", second(hnsw.SearchSlice(f.res, idx, nil, f.qs, k, other))},
		"bitmap":        {"filter", second(hnsw.SearchSlice(f.res, idx, nil, f.qs, k, bm))},
		"int8 queries":  {"queries", second(hnsw.SearchSlice(f.res, idx, nil, make([]int8, dim), k, filter))},
		"ragged":        {"queries", second(hnsw.SearchSlice(f.res, idx, nil, f.qs[:dim+1], k, nil))},
		"no queries":    {"queries", second(hnsw.SearchSlice(f.res, idx, nil, f.qs[:0], k, nil))},
		"k > rows":      {"k", second(hnsw.SearchSlice(f.res, idx, nil, f.qs, rows+1, filter))},
		"k 0":           {"k", second(hnsw.SearchSlice(f.res, idx, nil, f.qs, 0, nil))},
		"ef":            {"params.Ef", second(hnsw.SearchSlice(f.res, idx, &hnsw.SearchParams{Ef: -1}, f.qs, k, nil))},
		"nil index":     {"idx", second(hnsw.SearchSlice[float32](f.res, nil, nil, f.qs, k, filter))},
		"nil out":       {"out", hnsw.SearchSliceInto(f.res, idx, nil, f.qs, k, nil, nil)},
	} {
		if !isArg(c.err, c.arg) {
			t.Errorf("%s: got %v, want an ArgError naming %s", name, c.err, c.arg)
		}
	}
	if _, err := hnsw.SearchSlice(f.res, &hnsw.Index{}, nil, f.qs, k, nil); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("zero index: %v", err)
	}

	// a loop of unfiltered searches into one Results allocates nothing
	if race.Enabled {
		return
	}
	out := new(safe.Results)
	q := f.qs[:dim]
	must(t, hnsw.SearchSliceInto(f.res, idx, sp, q, k, nil, out))
	if a := testing.AllocsPerRun(20, func() {
		if err := hnsw.SearchSliceInto(f.res, idx, sp, q, k, nil, out); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("SearchSliceInto: %v allocations per call", a)
	}
}

func second[T any](_ T, err error) error { return err }

// Closed and nil indexes refuse; Close twice is harmless.
func TestClosed(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	must(t, idx.Close())
	must(t, idx.Close())
	q := hostMatrix(t, f.qs, nq, dim)
	nb := hostMatrix(t, make([]int64, nq*k), nq, k)
	ds := hostMatrix(t, make([]float32, nq*k), nq, k)
	if err := idx.Search(f.res, nil, q, nb, ds); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Search: %v", err)
	}
	if err := idx.Extend(f.res, hostMatrix(t, f.data[:dim], 1, dim), nil); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Extend: %v", err)
	}
	if err := idx.Serialize(f.res, filepath.Join(t.TempDir(), "x")); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Serialize: %v", err)
	}
	var none *hnsw.Index
	if err := none.Search(f.res, nil, q, nb, ds); !isArg(err, "index") {
		t.Errorf("nil Search: %v", err)
	}
	if none.Rows() != 0 || none.Close() != nil {
		t.Error("nil index")
	}
}

// Searches from many goroutines while rows are added: no race, no error.
func TestConcurrentSearchExtend(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := safe.NewResources()
			if err != nil {
				errs <- err
				return
			}
			defer res.Close()
			nb := make([]int64, k)
			ds := make([]float32, k)
			for i := range 20 {
				q := f.qs[((g+i)%nq)*dim : ((g+i)%nq+1)*dim]
				qm, _ := dlpack.NewHostMatrix(q, 1, dim)
				nm, _ := dlpack.NewHostMatrix(nb, 1, k)
				dm, _ := dlpack.NewHostMatrix(ds, 1, k)
				if err := idx.Search(res, nil, qm, nm, dm); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 5 {
		must(t, idx.Extend(f.res, hostMatrix(t, f.qs[i*dim:(i+1)*dim], 1, dim), nil))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if idx.Rows() != rows+5 {
		t.Errorf("rows %d", idx.Rows())
	}
}

// Every C call made to fail in turn gives the *safe.Error of that call
// and leaks nothing.
func TestFaults(t *testing.T) {
	ctl := safetest.Double(t, "fault injection")
	safetest.Check(t)
	f := newFixture(t)
	ci := f.cagraIndex(t, safe.L2Expanded)
	p := indexParams(t, hnsw.HierarchyCPU)
	idx, err := hnsw.FromCagra(f.res, ci, p)
	must(t, err)
	safetest.Close(t, idx)
	path := filepath.Join(t.TempDir(), "x.hnsw")
	must(t, idx.Serialize(f.res, path))
	host := hostMatrix(t, f.data, rows, dim)
	q := hostMatrix(t, f.qs, nq, dim)
	nb := hostMatrix(t, make([]int64, nq*k), nq, k)
	ds := hostMatrix(t, make([]float32, nq*k), nq, k)
	bp := *p
	bp.M = 8
	steps := []struct {
		fn  string
		run func() error
	}{
		{"cuvsHnswIndexParamsCreate", func() error { _, err := hnsw.DefaultIndexParams(); return err }},
		{"cuvsHnswAceParamsCreate", func() error { _, err := hnsw.DefaultACEParams(); return err }},
		{"cuvsHnswSearchParamsCreate", func() error { _, err := hnsw.DefaultSearchParams(); return err }},
		{"cuvsHnswExtendParamsCreate", func() error { _, err := hnsw.DefaultExtendParams(); return err }},
		{"cuvsHnswIndexCreate", func() error { _, err := hnsw.FromCagra(f.res, ci, p); return err }},
		{"cuvsHnswFromCagra", func() error { _, err := hnsw.FromCagra(f.res, ci, p); return err }},
		{"cuvsHnswFromCagraWithDataset", func() error { _, err := hnsw.FromCagraWithDataset(f.res, ci, host, p); return err }},
		{"cuvsHnswBuild", func() error { _, err := hnsw.Build(f.res, host, &bp); return err }},
		{"cuvsHnswSearch", func() error { return idx.Search(f.res, nil, q, nb, ds) }},
		{"cuvsHnswExtend", func() error { return idx.Extend(f.res, hostMatrix(t, f.qs[:dim], 1, dim), &hnsw.ExtendParams{}) }},
		{"cuvsHnswSerialize", func() error { return idx.Serialize(f.res, path+"2") }},
		{"cuvsHnswDeserialize", func() error {
			_, err := hnsw.Deserialize(f.res, path, dlpack.Float32, safe.L2Expanded, p)
			return err
		}},
	}
	for _, s := range steps {
		t.Run(s.fn, func(t *testing.T) {
			ctl.FailNext(s.fn, "injected")
			err := s.run()
			var ce *safe.Error
			if !errors.As(err, &ce) || ce.Func != s.fn {
				t.Fatalf("got %v, want the failure of %s", err, s.fn)
			}
		})
	}
	if idx.Rows() != rows {
		t.Errorf("rows %d after a failed extend", idx.Rows())
	}
	// cuvsHnswIndexDestroy failing: Close reports it, a later Close frees.
	x, err := hnsw.FromCagra(f.res, ci, p)
	must(t, err)
	ctl.FailNext("cuvsHnswIndexDestroy", "injected")
	if err := x.Close(); err == nil {
		t.Error("Close hid the failure of cuvsHnswIndexDestroy")
	}
	must(t, x.Close())
}

// Search allocates nothing on the Go heap.
func TestSearchAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	q := hostMatrix(t, f.qs, nq, dim)
	nb := hostMatrix(t, make([]int64, nq*k), nq, k)
	ds := hostMatrix(t, make([]float32, nq*k), nq, k)
	sp := &hnsw.SearchParams{Ef: 32}
	must(t, idx.Search(f.res, sp, q, nb, ds))
	if a := testing.AllocsPerRun(20, func() {
		if err := idx.Search(f.res, sp, q, nb, ds); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Search: %v allocations per call", a)
	}
}

// The error of a libcuvs_c built without HNSW.
func TestNotBuiltError(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestMissingSymbols in a process of its own")
	}
	_, err := hnsw.DefaultIndexParams()
	if !errors.Is(err, hnsw.ErrNotBuilt) || !errors.Is(err, safe.ErrMissingSymbol) || !strings.Contains(err.Error(), "not built into this libcuvs") {
		t.Fatalf("DefaultIndexParams: %v", err)
	}
	res, err := safe.NewResources()
	must(t, err)
	defer res.Close()
	data := safetest.Random(1, 100, 4)
	p := hnsw.IndexParams{Hierarchy: hnsw.HierarchyCPU, EfConstruction: 10, M: 4, Metric: safe.L2Expanded, ACE: &hnsw.ACEParams{}}
	m, _ := dlpack.NewHostMatrix(data, 100, 4)
	if _, err := hnsw.Build(res, m, &p); !errors.Is(err, hnsw.ErrNotBuilt) {
		t.Fatalf("Build: %v", err)
	}
	// an empty hnswlib index of dimension 4: a file Deserialize's own
	// checks pass, so that the missing C call is what fails
	path := filepath.Join(t.TempDir(), "empty.hnsw")
	const maxM0 = 8
	links0 := uint64(4 + maxM0*4)
	var hdr bytes.Buffer
	for _, v := range []any{uint64(0), uint64(0), uint64(0), links0 + 16 + 8, links0 + 16, links0, int32(0), int32(-1), uint64(4), uint64(maxM0), uint64(4), 1 / math.Log(4), uint64(100)} {
		must(t, binary.Write(&hdr, binary.LittleEndian, v))
	}
	must(t, os.WriteFile(path, hdr.Bytes(), 0o600))
	if _, err := hnsw.Deserialize(res, path, dlpack.Float32, safe.L2Expanded, &p); !errors.Is(err, hnsw.ErrNotBuilt) {
		t.Fatalf("Deserialize: %v", err)
	}
}

// A CAGRA index that an ACE build left on disk (cagra.ErrOnDisk) is served
// by converting it: cuVS writes hnsw_index.bin next to the graph, in the
// build directory, and the HNSW index searches it.
func TestFromCagraOnDisk(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	p, err := cagra.DefaultIndexParams()
	must(t, err)
	p.GraphDegree, p.IntermediateGraphDegree = 32, 64
	dir := filepath.Join(t.TempDir(), "ace")
	p.BuildAlgo = cagra.ACE
	p.ACE = &cagra.ACEParams{BuildDir: dir, UseDisk: true}
	ci, err := cagra.Build(f.res, hostMatrix(t, f.data, rows, dim), &p)
	must(t, err)
	safetest.Close(t, ci)
	q := hostMatrix(t, f.qs, nq, dim)
	if err := ci.Search(f.res, nil, q, nil, nil, nil); !errors.Is(err, cagra.ErrOnDisk) {
		t.Fatalf("search of the disk-mode CAGRA index: %v", err)
	}
	if _, err := hnsw.FromCagra(f.res, ci, indexParams(t, hnsw.HierarchyCPU)); !isArg(err, "params.Hierarchy") {
		t.Fatalf("FromCagra of the disk-mode index with HierarchyCPU: %v, want an ArgError naming params.Hierarchy", err)
	}
	idx, err := hnsw.FromCagra(f.res, ci, indexParams(t, hnsw.HierarchyGPU))
	must(t, err)
	safetest.Close(t, idx)
	if _, err := os.Stat(filepath.Join(dir, "hnsw_index.bin")); err != nil {
		t.Errorf("hnsw_index.bin: %v", err)
	}
	nb, _ := f.search(t, idx, 256, f.qs)
	if r := recall(nb, f.exact); r < 0.95 {
		t.Errorf("recall %.3f", r)
	}
}
