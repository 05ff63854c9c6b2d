package vamana_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/vamana"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows = 2000
	dim  = 16
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDefaultIndexParams(t *testing.T) {
	p, err := vamana.DefaultIndexParams()
	must(t, err)
	want := vamana.IndexParams{Metric: safe.L2Expanded, GraphDegree: 32, VisitedSize: 64, VamanaIters: 1, Alpha: 1.2,
		MaxFraction: 0.06, BatchBase: 2, QueueSize: 127, ReverseBatchSize: 1000000}
	if p != want {
		t.Errorf("defaults %+v, want %+v", p, want)
	}
}

func readGraph(t *testing.T, path string) *vamana.Graph {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	g, err := vamana.ReadGraph(bytes.NewReader(b))
	must(t, err)
	if g.FileSize != uint64(len(b)) {
		t.Errorf("header file size %d, the file has %d bytes", g.FileSize, len(b))
	}
	return g
}

// greedy is DiskANN's search over g: a beam of l candidates from the
// medoid; it returns the k nearest expanded rows.
func greedy(g *vamana.Graph, data, q []float32, l, k int) []int64 {
	return greedyDim(g, data, q, dim, l, k)
}

// greedyDim is greedy over rows of d columns.
func greedyDim(g *vamana.Graph, data, q []float32, dim, l, k int) []int64 {
	type cand struct {
		id   uint32
		d    float32
		done bool
	}
	dist := func(id uint32) float32 { return safetest.L2(q, data[int(id)*dim:(int(id)+1)*dim]) }
	seen := map[uint32]bool{g.Medoid: true}
	beam := []cand{{g.Medoid, dist(g.Medoid), false}}
	for {
		i := -1
		for j := range beam {
			if !beam[j].done {
				i = j
				break
			}
		}
		if i < 0 {
			break
		}
		beam[i].done = true
		for _, nb := range g.Adjacency[beam[i].id] {
			if seen[nb] {
				continue
			}
			seen[nb] = true
			beam = append(beam, cand{nb, dist(nb), false})
		}
		sort.Slice(beam, func(a, b int) bool { return beam[a].d < beam[b].d })
		if len(beam) > l {
			beam = beam[:l]
		}
	}
	out := make([]int64, 0, k)
	for j := 0; j < k && j < len(beam); j++ {
		out = append(out, int64(beam[j].id))
	}
	return out
}

// A built graph, written and read back: every row has at most
// GraphDegree neighbours, all of them rows (ReadGraph checks the ids), the
// header agrees with the contents, and a greedy search over it (DiskANN's,
// in Go, beam 100) finds the exact 10 nearest rows of new queries with a
// recall of at least 0.9. The dataset file holds the rows.
//
// A row may name the same neighbour more than once (and cuVS's real graphs
// do): cuVS's RobustPrune drops a repeat only when the two merged lists
// meet it head to head, writes a merge no longer than the degree without
// pruning it, and writes only its result's entries, leaving a row's older
// tail behind a shorter one (robust_prune.cuh, vamana_structs.cuh's
// write_graph_edges_kernel). The test counts such rows and logs them.
func TestBuildAndSerialize(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(1, rows, dim)
	ds, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	must(t, err)
	safetest.Close(t, ds)
	p, err := vamana.DefaultIndexParams()
	must(t, err)
	idx, err := vamana.Build(res, ds, &p)
	must(t, err)
	safetest.Close(t, idx)
	if idx.Rows() != rows || idx.Dim() != dim || idx.GraphDegree() != 32 || idx.DType() != dlpack.Float32 {
		t.Fatalf("rows %d, dim %d, degree %d, dtype %v", idx.Rows(), idx.Dim(), idx.GraphDegree(), idx.DType())
	}
	path := filepath.Join(t.TempDir(), "vamana.index")
	must(t, idx.Serialize(res, path))
	g := readGraph(t, path)
	if len(g.Adjacency) != rows || g.Frozen != 0 || g.MaxDegree > 32 || g.MaxDegree == 0 {
		t.Fatalf("%d rows, frozen %d, largest degree %d", len(g.Adjacency), g.Frozen, g.MaxDegree)
	}
	repeats, selfs, empty, edges := 0, 0, 0, 0
	for i, row := range g.Adjacency {
		seen := map[uint32]bool{}
		for _, id := range row {
			if id == uint32(i) {
				selfs++
			}
			if seen[id] {
				repeats++
			}
			seen[id] = true
		}
		if len(row) > 32 {
			t.Fatalf("row %d has %d neighbours, the degree is 32", i, len(row))
		}
		if len(row) == 0 {
			empty++
		}
		edges += len(row)
	}
	t.Logf("%d edges, %d repeated, %d to the row itself; %d rows without neighbours", edges, repeats, selfs, empty)
	if edges < rows {
		t.Errorf("%d edges for %d rows", edges, rows)
	}
	const nq, k = 100, 10
	queries := safetest.Random(2, nq, dim)
	want := safetest.ExactKNN(data, queries, dim, k, safetest.L2, nil)
	hits := 0
	for q := 0; q < nq; q++ {
		got := greedy(g, data, queries[q*dim:(q+1)*dim], 100, k)
		in := map[int64]bool{}
		for _, w := range want[q] {
			in[w] = true
		}
		for _, id := range got {
			if in[id] {
				hits++
			}
		}
	}
	r := float64(hits) / (nq * k)
	t.Logf("greedy search recall %.3f, largest degree %d", r, g.MaxDegree)
	if r < 0.9 {
		t.Errorf("greedy search recall %.3f, want at least 0.9", r)
	}
	b, err := os.ReadFile(path + ".data")
	must(t, err)
	if len(b) != 8+rows*dim*4 || binary.LittleEndian.Uint32(b) != rows || binary.LittleEndian.Uint32(b[4:]) != dim {
		t.Fatalf("dataset file of %d bytes, header %v", len(b), b[:8])
	}
	if !bytes.Equal(b[8:], unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*4)) {
		t.Error("the dataset file does not hold the rows")
	}
	// Without the dataset: the same graph, no .data file.
	p2 := filepath.Join(t.TempDir(), "graph-only")
	must(t, idx.Serialize(res, p2, safe.WithoutDataset()))
	a, _ := os.ReadFile(path)
	c, _ := os.ReadFile(p2)
	if !bytes.Equal(a, c) {
		t.Error("the graph file differs without the dataset")
	}
	if _, err := os.Stat(p2 + ".data"); !os.IsNotExist(err) {
		t.Errorf("a dataset file with safe.WithoutDataset: %v", err)
	}
}

// cuVS keeps a view of a device dataset of 16-byte rows: the index borrows
// it until Close. Host datasets and other widths are copied.
func TestRetention(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	p, err := vamana.DefaultIndexParams()
	must(t, err)
	data := safetest.Random(3, 400, dim)
	ds, err := safe.DeviceMatrixFrom(res, data, 400, dim)
	must(t, err)
	idx, err := vamana.Build(res, ds, &p)
	must(t, err)
	if !idx.Borrows() {
		t.Error("a device dataset of 64-byte rows is not borrowed")
	}
	if err := ds.Close(); err == nil {
		t.Fatal("the borrowed dataset closed under the index")
	}
	must(t, idx.Close())
	must(t, ds.Close())

	odd := safetest.Random(4, 400, 3) // 12-byte rows: copied
	od, err := safe.DeviceMatrixFrom(res, odd, 400, 3)
	must(t, err)
	idx, err = vamana.Build(res, od, &p)
	must(t, err)
	safetest.Close(t, idx)
	if idx.Borrows() || idx.Dim() != 3 {
		t.Errorf("12-byte rows: borrowed %v, dim %d", idx.Borrows(), idx.Dim())
	}
	must(t, od.Close())

	i8 := make([]int8, 400*dim)
	for i := range i8 {
		i8[i] = int8(i*7919%255 - 127)
	}
	hm, err := dlpack.NewHostMatrix(i8, 400, dim)
	must(t, err)
	idx, err = vamana.Build(res, hm, &p)
	must(t, err)
	safetest.Close(t, idx)
	if idx.Borrows() || idx.DType() != dlpack.Int8 {
		t.Errorf("host int8: borrowed %v, dtype %v", idx.Borrows(), idx.DType())
	}
	path := filepath.Join(t.TempDir(), "i8")
	must(t, idx.Serialize(res, path))
	if st, err := os.Stat(path + ".data"); err != nil || st.Size() != 8+400*dim {
		t.Errorf("int8 dataset file: %v, %v", st, err)
	}
}

// A host dataset (Go memory) is copied to the device before cuVS sees it:
// cuVS's own host path faults (cuVS issue #1380). 2,000 × 32 float32 with
// cuVS's defaults, the case that killed the CUDA context on the real
// library: the build succeeds, the index owns its copy (no borrow: the Go
// slice may change at once), and the graph searches like a device build's.
func TestBuildFromHost(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const n, d = 2000, 32
	data := safetest.Random(11, n, d)
	orig := append([]float32(nil), data...)
	hm, err := dlpack.NewHostMatrix(data, n, d)
	must(t, err)
	idx, err := vamana.Build(res, hm, nil)
	must(t, err)
	safetest.Close(t, idx)
	if idx.Borrows() || idx.Rows() != n || idx.Dim() != d || idx.DType() != dlpack.Float32 {
		t.Fatalf("borrows %v, rows %d, dim %d, dtype %v", idx.Borrows(), idx.Rows(), idx.Dim(), idx.DType())
	}
	for i := range data {
		data[i] = -1 // the index holds its own copy
	}
	path := filepath.Join(t.TempDir(), "host")
	must(t, idx.Serialize(res, path))
	b, err := os.ReadFile(path + ".data")
	must(t, err)
	if len(b) != 8+n*d*4 || !bytes.Equal(b[8:], unsafe.Slice((*byte)(unsafe.Pointer(&orig[0])), len(orig)*4)) {
		t.Error("the dataset file does not hold the rows given to Build")
	}
	g := readGraph(t, path)
	if len(g.Adjacency) != n || g.MaxDegree > 32 || g.MaxDegree == 0 {
		t.Fatalf("%d rows, largest degree %d", len(g.Adjacency), g.MaxDegree)
	}
	const nq, k = 50, 10
	queries := safetest.Random(12, nq, d)
	want := safetest.ExactKNN(orig, queries, d, k, safetest.L2, nil)
	hits := 0
	for q := 0; q < nq; q++ {
		in := map[int64]bool{}
		for _, w := range want[q] {
			in[w] = true
		}
		for _, id := range greedyDim(g, orig, queries[q*d:(q+1)*d], d, 100, k) {
			if in[id] {
				hits++
			}
		}
	}
	r := float64(hits) / (nq * k)
	t.Logf("greedy search recall %.3f", r)
	if r < 0.8 {
		t.Errorf("greedy search recall %.3f, want at least 0.8", r)
	}
	// 12-byte rows: cuVS copies Build's device copy, which Build frees.
	odd, err := dlpack.NewHostMatrix(safetest.Random(13, 400, 3), 400, 3)
	must(t, err)
	idx2, err := vamana.Build(res, odd, nil)
	must(t, err)
	safetest.Close(t, idx2)
	if idx2.Borrows() || idx2.Dim() != 3 {
		t.Errorf("12-byte host rows: borrows %v, dim %d", idx2.Borrows(), idx2.Dim())
	}
}

// Bad input is refused before any C call, naming the argument: what cuVS
// refuses, and what would make its build loop forever.
func TestRefused(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(5, 100, dim)
	ds, err := safe.DeviceMatrixFrom(res, data, 100, dim)
	must(t, err)
	safetest.Close(t, ds)
	f16, err := dlpack.NewHostMatrix(make([]uint16, 100*dim), 100, dim)
	must(t, err)
	one, err := dlpack.NewHostMatrix(data[:dim], 1, dim)
	must(t, err)
	nan := append([]float32(nil), data...)
	nan[5] = float32(math.NaN())
	hn, err := dlpack.NewHostMatrix(nan, 100, dim)
	must(t, err)
	def, err := vamana.DefaultIndexParams()
	must(t, err)
	with := func(f func(*vamana.IndexParams)) *vamana.IndexParams {
		p := def
		f(&p)
		return &p
	}
	for _, c := range []struct {
		name, arg string
		ds        dlpack.Tensor
		p         *vamana.IndexParams
	}{
		{"nil dataset", "dataset", nil, nil},
		{"uint16 dataset", "dataset", f16, nil},
		{"one row", "dataset", one, nil},
		{"NaN", "dataset", hn, nil},
		{"cosine", "params.Metric", ds, with(func(p *vamana.IndexParams) { p.Metric = safe.CosineExpanded })},
		{"degree 48", "params.GraphDegree", ds, with(func(p *vamana.IndexParams) { p.GraphDegree = 48 })},
		{"visited = degree", "params.VisitedSize", ds, with(func(p *vamana.IndexParams) { p.VisitedSize = 32 })},
		{"visited 600", "params.VisitedSize", ds, with(func(p *vamana.IndexParams) { p.VisitedSize = 600 })},
		{"half an iteration", "params.VamanaIters", ds, with(func(p *vamana.IndexParams) { p.VamanaIters = 0.5 })},
		{"NaN alpha", "params.Alpha", ds, with(func(p *vamana.IndexParams) { p.Alpha = float32(math.NaN()) })},
		{"batch of no rows", "params.MaxFraction", ds, with(func(p *vamana.IndexParams) { p.MaxFraction = 0.005 })},
		{"max fraction 2", "params.MaxFraction", ds, with(func(p *vamana.IndexParams) { p.MaxFraction = 2 })},
		{"batch base 0.5", "params.BatchBase", ds, with(func(p *vamana.IndexParams) { p.BatchBase = 0.5 })},
		{"queue 0", "params.QueueSize", ds, with(func(p *vamana.IndexParams) { p.QueueSize = 0 })},
		{"reverse batch 0", "params.ReverseBatchSize", ds, with(func(p *vamana.IndexParams) { p.ReverseBatchSize = 0 })},
		{"queue over shared memory", "params.QueueSize", ds, with(func(p *vamana.IndexParams) { p.QueueSize = 3071 })},
	} {
		safetest.Refused(t, c.name, c.arg, "", func() error {
			idx, err := vamana.Build(res, c.ds, c.p)
			if idx != nil {
				t.Errorf("%s: an index with error %v", c.name, err)
				idx.Close()
			}
			return err
		})
	}
	idx, err := vamana.Build(res, ds, nil)
	must(t, err)
	safetest.Close(t, idx)
	safetest.Refused(t, "NUL in the path", "path", "", func() error { return idx.Serialize(res, "a\x00b", safe.WithoutDataset()) })
	var ce *safe.Error
	if err := idx.Serialize(res, filepath.Join(t.TempDir(), "no", "such", "dir"), safe.WithoutDataset()); !errors.As(err, &ce) || ce.Func != "cuvsVamanaSerialize" {
		t.Errorf("Serialize into a missing directory: %v", err)
	}
	// cuVS swallows a failure to write the .data file: Serialize does not.
	path := filepath.Join(t.TempDir(), "x")
	must(t, os.Mkdir(path+".data", 0o755))
	if err := idx.Serialize(res, path); !errors.As(err, &ce) || ce.Func != "cuvsVamanaSerialize" {
		t.Errorf("Serialize with an unwritable dataset file: %v", err)
	}
	must(t, idx.Close())
	if err := idx.Serialize(res, path, safe.WithoutDataset()); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Serialize after Close: %v", err)
	}
	var nilIdx *vamana.Index
	if err := nilIdx.Serialize(res, path, safe.WithoutDataset()); !safetest.IsArg(err, "index") {
		t.Errorf("nil index: %v", err)
	}
}

// ReadGraph refuses files that do not hold what their header says.
func TestReadGraphCorrupt(t *testing.T) {
	good := []byte{}
	le := binary.LittleEndian
	good = le.AppendUint64(good, 24+8+8)
	good = le.AppendUint32(good, 1)
	good = le.AppendUint32(good, 0)
	good = le.AppendUint64(good, 0)
	good = le.AppendUint32(good, 1)
	good = le.AppendUint32(good, 1)
	good = le.AppendUint32(good, 1)
	good = le.AppendUint32(good, 0)
	if g, err := vamana.ReadGraph(bytes.NewReader(good)); err != nil || len(g.Adjacency) != 2 {
		t.Fatalf("a good file: %v, %v", g, err)
	}
	bad := func(name string, b []byte) {
		if _, err := vamana.ReadGraph(bytes.NewReader(b)); !errors.Is(err, safe.ErrCorruptIndex) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad("truncated", good[:len(good)-2])
	bad("header only", good[:20])
	bad("trailing bytes", append(append([]byte(nil), good...), 0))
	wrongMax := append([]byte(nil), good...)
	le.PutUint32(wrongMax[8:], 2)
	bad("largest degree", wrongMax)
	outOfRange := append([]byte(nil), good...)
	le.PutUint32(outOfRange[28:], 5)
	bad("id out of range", outOfRange)
}

// A failure of each C call is a *safe.Error naming it, leaving nothing
// behind (a failed destroy keeps the index for the next Close).
func TestFaults(t *testing.T) {
	safetest.Check(t)
	ctl := safetest.Double(t, "fault injection")
	res := safetest.Resources(t)
	data := safetest.Random(6, 200, dim)
	ds, err := safe.DeviceMatrixFrom(res, data, 200, dim)
	must(t, err)
	safetest.Close(t, ds)
	idx, err := vamana.Build(res, ds, nil)
	must(t, err)
	safetest.Close(t, idx)
	path := filepath.Join(t.TempDir(), "f")
	for _, s := range []struct {
		fn  string
		run func() error
	}{
		{"cuvsVamanaIndexParamsCreate", func() error { _, err := vamana.DefaultIndexParams(); return err }},
		{"cuvsVamanaIndexCreate", func() error { _, err := vamana.Build(res, ds, nil); return err }},
		{"cuvsVamanaBuild", func() error { _, err := vamana.Build(res, ds, nil); return err }},
		{"cuvsStreamSync", func() error { _, err := vamana.Build(res, ds, nil); return err }},
		{"cuvsVamanaIndexGetDims", func() error { _, err := vamana.Build(res, ds, nil); return err }},
		{"cuvsVamanaSerialize", func() error { return idx.Serialize(res, path) }},
	} {
		ctl.FailNext(s.fn, "injected")
		err := s.run()
		var ce *safe.Error
		if !errors.As(err, &ce) || ce.Func != s.fn {
			t.Errorf("%s: got %v, want its failure", s.fn, err)
		}
		ctl.ClearFaults()
	}
	other, err := vamana.Build(res, ds, nil)
	must(t, err)
	ctl.FailNext("cuvsVamanaIndexDestroy", "injected")
	if err := other.Close(); err == nil {
		t.Error("Close with a failing destroy: no error")
	}
	must(t, other.Close())
	if other.Borrows() && len(ds.Owner().Borrowers()) != 1 {
		t.Errorf("borrowers after the failed builds and closes: %v", ds.Owner().Borrowers())
	}
}

// Serializations run in parallel (shared uses of the index) and write the
// same file.
func TestConcurrentSerialize(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(8, 300, dim)
	ds, err := safe.DeviceMatrixFrom(res, data, 300, dim)
	must(t, err)
	safetest.Close(t, ds)
	idx, err := vamana.Build(res, ds, nil)
	must(t, err)
	safetest.Close(t, idx)
	dir := t.TempDir()
	errs := make(chan error, 4)
	for i := range 4 {
		r := safetest.Resources(t)
		var opts []safe.SerializeOption
		if i%2 != 0 {
			opts = append(opts, safe.WithoutDataset())
		}
		go func() { errs <- idx.Serialize(r, filepath.Join(dir, string(rune('a'+i))), opts...) }()
	}
	for range 4 {
		must(t, <-errs)
	}
	a, err := os.ReadFile(filepath.Join(dir, "a"))
	must(t, err)
	for _, n := range []string{"b", "c", "d"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		must(t, err)
		if !bytes.Equal(a, b) {
			t.Errorf("file %s differs", n)
		}
	}
}
