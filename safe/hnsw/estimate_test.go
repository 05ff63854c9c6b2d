package hnsw_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
)

// buildCase is hnsw.Build over n × d random float32 host rows with p.
func buildCase(t *testing.T, name string, n, d int, p hnsw.IndexParams) safetest.MemoryCase {
	t.Helper()
	data := safetest.Random(21, n, d)
	est, err := hnsw.EstimateMemory(safe.MemoryShape{Rows: n, Dim: d, DType: dlpack.Float32, HostDataset: true}, &p)
	if err != nil {
		t.Fatal(err)
	}
	return safetest.MemoryCase{Name: name, Estimate: est, CFunc: "cuvsHnswBuild", Tol: 0.02,
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			hm, err := dlpack.NewHostMatrix(data, n, d)
			if err != nil {
				return nil, err
			}
			return hnsw.Build(res, hm, &p)
		}}
}

// fromCagraCase is hnsw.FromCagra of ci (n × d float32, graph degree deg)
// with p; the CAGRA index is made beforehand, its memory not counted.
func fromCagraCase(t *testing.T, name string, ci *cagra.Index, n, d, deg int, p hnsw.IndexParams, tol float64) safetest.MemoryCase {
	t.Helper()
	est, err := hnsw.EstimateFromCagra(safe.MemoryShape{Rows: n, Dim: d, DType: dlpack.Float32}, deg, &p)
	if err != nil {
		t.Fatal(err)
	}
	return safetest.MemoryCase{Name: name, Estimate: est, CFunc: "cuvsHnswFromCagra", Tol: tol,
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			return hnsw.FromCagra(res, ci, &p)
		}}
}

func buildParams(t *testing.T, h hnsw.Hierarchy, m uint64, disk bool) hnsw.IndexParams {
	t.Helper()
	p := *indexParams(t, h)
	p.M = m
	a, err := hnsw.DefaultACEParams()
	must(t, err)
	if disk {
		a.UseDisk, a.BuildDir = true, filepath.Join(t.TempDir(), "ace")
	}
	p.ACE = &a
	return p
}

func tenPartitions(p hnsw.IndexParams) hnsw.IndexParams {
	a := *p.ACE
	a.NPartitions = 10
	p.ACE = &a
	return p
}

// cagraFor builds a CAGRA index of n × d random float32 rows (degree deg),
// closed at the test's end.
func cagraFor(t *testing.T, n, d, deg int) *cagra.Index {
	t.Helper()
	res := safetest.Resources(t)
	p, err := cagra.DefaultIndexParams()
	must(t, err)
	p.BuildAlgo, p.GraphDegree, p.IntermediateGraphDegree = cagra.NNDescent, deg, 2*deg
	data := safetest.Random(22, n, d)
	ci, err := cagra.Build(res, hostMatrix(t, data, n, d), &p)
	must(t, err)
	safetest.Close(t, ci)
	return ci
}

// The estimates against the double's accounting of device memory (its
// model of ACE's phases and of the GPU hierarchy's kNN graph, dbl_hnsw.c):
// the build's peak, nothing held after (the index is host memory), nothing
// counted in DeviceMemory.InUse. The GPU hierarchy's rows are drawn at
// random (about rows/M' of them): 20000 rows at M' 8 draw 2500 ± 47,
// within the 8% allowed.
func TestEstimateMemoryAgainstDouble(t *testing.T) {
	for _, c := range []safetest.MemoryCase{
		buildCase(t, "Build, GPU hierarchy, in memory", 3000, 24, buildParams(t, hnsw.HierarchyGPU, 8, false)),
		buildCase(t, "Build, CPU hierarchy", 3000, 24, buildParams(t, hnsw.HierarchyCPU, 8, false)),
		buildCase(t, "Build, GPU hierarchy, on disk", 3000, 24, buildParams(t, hnsw.HierarchyGPU, 8, true)),
		// 10 partitions of 20000 rows: ACE's graph (2.6 MB) and the
		// hierarchy's kNN graph beside it outweigh the partition phases
		buildCase(t, "Build, GPU hierarchy, the graph's phase", 20000, 4, tenPartitions(buildParams(t, hnsw.HierarchyGPU, 16, false))),
	} {
		t.Run(c.Name, func(t *testing.T) { safetest.CheckMemoryEstimate(t, c) })
	}
	const n, d, deg = 20000, 16, 16
	ci := cagraFor(t, n, d, deg)
	for _, c := range []safetest.MemoryCase{
		fromCagraCase(t, "FromCagra, GPU hierarchy", ci, n, d, deg, *indexParams(t, hnsw.HierarchyGPU), 0.08),
		fromCagraCase(t, "FromCagra, CPU hierarchy", ci, n, d, deg, *indexParams(t, hnsw.HierarchyCPU), 0),
		fromCagraCase(t, "FromCagra, no hierarchy", ci, n, d, deg, *indexParams(t, hnsw.HierarchyNone), 0),
	} {
		t.Run(c.Name, func(t *testing.T) {
			if c.Name == "FromCagra, GPU hierarchy" && c.Estimate.BuildPeak == 0 {
				t.Fatal("no device memory estimated for the GPU hierarchy")
			}
			safetest.CheckMemoryEstimate(t, c)
		})
	}
}

// Over SetMemoryLimit, Build and a GPU-hierarchy FromCagra are refused
// before cuVS (and called WithoutMemoryCheck).
func TestRefusedOverMemoryLimit(t *testing.T) {
	t.Run("Build", func(t *testing.T) {
		safetest.CheckMemoryLimit(t, buildCase(t, "Build", 3000, 24, buildParams(t, hnsw.HierarchyGPU, 8, false)))
	})
	t.Run("FromCagra", func(t *testing.T) {
		const n, d, deg = 6000, 16, 16
		ci := cagraFor(t, n, d, deg)
		safetest.CheckMemoryLimit(t, fromCagraCase(t, "FromCagra", ci, n, d, deg, *indexParams(t, hnsw.HierarchyGPU), 0))
	})
}

func TestBuildRefusedOverPoolCap(t *testing.T) {
	// ACE's partition labelling takes 32 Ki-row chunks: some MB, in a pool
	// of at most 512 KiB.
	safetest.CheckPoolCap(t, buildCase(t, "Build", 3000, 24, buildParams(t, hnsw.HierarchyGPU, 8, false)), 1<<20, 50)
}

// The estimates' shape: no device index or search, the in-memory build
// at least the disk build (which holds no graph), the GPU hierarchy the
// only conversion on the device, more rows more memory; the arguments are
// checked as the calls check theirs.
func TestEstimateMemoryShape(t *testing.T) {
	for _, s := range []safe.MemoryShape{
		{Rows: 5000, Dim: 32, DType: dlpack.Float32},
		{Rows: 3_000_000, Dim: 128, DType: dlpack.Uint8},
		{Rows: 40_000_000, Dim: 96, DType: dlpack.Float16},
	} {
		mem := buildParams(t, hnsw.HierarchyGPU, 16, false)
		disk := buildParams(t, hnsw.HierarchyGPU, 16, true)
		em, err := hnsw.EstimateMemory(s, &mem)
		must(t, err)
		ed, err := hnsw.EstimateMemory(s, &disk)
		must(t, err)
		if em.Index != 0 || em.Search != 0 || em.Dataset != 0 || ed.BuildPeak <= 0 || em.BuildPeak < ed.BuildPeak {
			t.Errorf("%+v: in memory %+v, on disk %+v", s, em, ed)
		}
		graph := int64(s.Rows) * 32 * 4 // [rows, 2·M] uint32, held in memory
		if em.BuildPeak < graph {
			t.Errorf("%+v: in-memory peak %d under ACE's graph %d", s, em.BuildPeak, graph)
		}
		g, err := hnsw.EstimateFromCagra(s, 32, indexParams(t, hnsw.HierarchyGPU))
		must(t, err)
		c, err := hnsw.EstimateFromCagra(s, 32, indexParams(t, hnsw.HierarchyCPU))
		must(t, err)
		if g.BuildPeak <= 0 || g.Index != 0 || c != (safe.MemoryEstimate{}) {
			t.Errorf("%+v: FromCagra GPU %+v, CPU %+v", s, g, c)
		}
		bigger := s
		bigger.Rows *= 2
		g2, err := hnsw.EstimateFromCagra(bigger, 32, indexParams(t, hnsw.HierarchyGPU))
		must(t, err)
		if g2.BuildPeak <= g.BuildPeak {
			t.Errorf("%+v: FromCagra GPU at twice the rows %d, not above %d", s, g2.BuildPeak, g.BuildPeak)
		}
	}
	s := safe.MemoryShape{Rows: 100, Dim: 8, DType: dlpack.Float32}
	bad := buildParams(t, hnsw.HierarchyCPU, 8, true)
	if _, err := hnsw.EstimateMemory(s, &bad); !isArg(err, "params.Hierarchy") {
		t.Errorf("UseDisk with HierarchyCPU: %v", err)
	}
	if _, err := hnsw.EstimateMemory(safe.MemoryShape{Rows: 100, Dim: 8, DType: dlpack.Int64}, nil); !isArg(err, "shape.DType") {
		t.Errorf("int64 rows: %v", err)
	}
	if _, err := hnsw.EstimateFromCagra(s, 0, nil); !isArg(err, "graphDegree") {
		t.Errorf("graph degree 0: %v", err)
	}
}

// EstimateHostMemory against the bytes of hnswlib's file of the same index
// (saveIndex: a 96-byte header, then per row the level-0 block and a
// 4-byte size of its upper links, then those links): without a hierarchy
// the estimate is the file's level-0 part and 108 bytes a row of what
// hnswlib keeps beside it (pointer, level, mutex, label map entry) less
// the size; with one, the upper links are random: within 5 standard
// deviations of the mean the estimate counts.
func TestEstimateHostMemory(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	ci := f.cagraIndex(t, safe.L2Expanded) // degree 32: M' 16
	const deg, m = 32, 16
	s := safe.MemoryShape{Rows: rows, Dim: dim, DType: dlpack.Float32}
	size := func(h hnsw.Hierarchy) (file, est int64) {
		idx, err := hnsw.FromCagra(f.res, ci, indexParams(t, h))
		must(t, err)
		path := filepath.Join(t.TempDir(), "index.bin")
		must(t, idx.Serialize(f.res, path))
		must(t, idx.Close())
		fi, err := os.Stat(path)
		must(t, err)
		est, err = hnsw.EstimateHostMemory(s, deg, indexParams(t, h))
		must(t, err)
		return fi.Size(), est
	}
	file, est := size(hnsw.HierarchyNone)
	if want := file - 96 + rows*(108-4); est != want {
		t.Errorf("no hierarchy: estimate %d, file %d bytes: want %d", est, file, want)
	}
	fileCPU, estCPU := size(hnsw.HierarchyCPU)
	links := float64(m*4 + 4)
	upper := float64(fileCPU - file)                              // the upper link lists' bytes
	mean := float64(rows) * links / (m - 1)                       // P(level >= l) = m^-l
	sd := links * math.Sqrt(float64(rows)*m/float64((m-1)*(m-1))) // levels: geometric, variance m/(m-1)^2
	if got := float64(estCPU - est); math.Abs(got-mean) > 1 || math.Abs(upper-mean) > 5*sd {
		t.Errorf("CPU hierarchy: estimate adds %.0f bytes (mean %.0f), the file %.0f (sd %.0f)", got, mean, upper, sd)
	}
	b, err := hnsw.EstimateHostMemory(s, 0, &hnsw.IndexParams{Hierarchy: hnsw.HierarchyNone, EfConstruction: 1, M: m, Metric: safe.L2Expanded})
	must(t, err)
	if b != est {
		t.Errorf("Build's graph degree (2·M = %d): %d bytes, FromCagra's of degree %d: %d", 2*m, b, deg, est)
	}
}
