package cagra_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// cgMemCase builds rows × d random vectors of T with p, from device memory
// the index may reference (kept until Close) or from a Go slice.
func cgMemCase[T float32 | int8](t *testing.T, name string, rows, d int, p cagra.IndexParams, host bool) safetest.MemoryCase {
	t.Helper()
	f := safetest.Random(13, rows, d)
	data := make([]T, len(f))
	for i, v := range f {
		data[i] = T(v * 100)
	}
	est, err := cagra.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.DataTypeOf[T](), HostDataset: host}, &p, nil)
	if err != nil {
		t.Fatal(err)
	}
	own := int64(0)
	if !host {
		own = (int64(len(data))*int64(dlpack.DataTypeOf[T]().ElemSize()) + 255) / 256 * 256
	}
	return safetest.MemoryCase{Name: name, Estimate: est, CFunc: "cuvsCagraBuild", Tol: 0.02, Own: own, OwnKept: !host,
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			if host {
				hm, err := dlpack.NewHostMatrix(data, rows, d)
				if err != nil {
					return nil, err
				}
				return cagra.Build(res, hm, &p)
			}
			dm, err := safe.DeviceMatrixFrom(res, data, rows, d)
			if err != nil {
				return nil, err
			}
			idx, err := cagra.Build(res, dm, &p)
			if err != nil {
				dm.Close()
				return nil, err
			}
			return closeAfter{idx, dm}, nil
		}}
}

// closeAfter closes an index, then the rows it may reference.
type closeAfter struct {
	idx  *cagra.Index
	rows interface{ Close() error }
}

func (c closeAfter) Close() error {
	if err := c.idx.Close(); err != nil {
		return err
	}
	return c.rows.Close()
}

func cgParams(t *testing.T, algo cagra.GraphBuildAlgo) cagra.IndexParams {
	t.Helper()
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.BuildAlgo = algo
	p.GraphDegree, p.IntermediateGraphDegree = 16, 32
	return p
}

func TestEstimateMemoryAgainstDouble(t *testing.T) {
	ivf := cgParams(t, cagra.IVFPQ)
	refine := ivf
	refine.IVFPQ = &cagra.IVFPQGraphParams{RefinementRate: 2}
	nnd := cgParams(t, cagra.NNDescent)
	for _, c := range []safetest.MemoryCase{
		cgMemCase[float32](t, "IVF-PQ, padded device rows", 3000, 32, ivf, false),
		cgMemCase[float32](t, "IVF-PQ, refined, host rows", 3000, 32, refine, true),
		cgMemCase[int8](t, "IVF-PQ, unpadded int8 rows", 3000, 20, ivf, false),
		cgMemCase[float32](t, "NN-Descent, host rows", 3000, 24, nnd, true),
	} {
		t.Run(c.Name, func(t *testing.T) { safetest.CheckMemoryEstimate(t, c) })
	}
}

func TestBuildRefusedOverMemoryLimit(t *testing.T) {
	safetest.CheckMemoryLimit(t, cgMemCase[float32](t, "IVF-PQ", 1000, 32, cgParams(t, cagra.IVFPQ), false))
}

func TestBuildRefusedOverPoolCap(t *testing.T) {
	// 3000 rows × 24 float32 from host memory: a kNN graph phase of some
	// MB (GNND's lists), in a pool of at most 512 KiB.
	safetest.CheckPoolCap(t, cgMemCase[float32](t, "NN-Descent", 3000, 24, cgParams(t, cagra.NNDescent), true), 1<<20, 50)
}

func TestEstimateMemoryNotEstimated(t *testing.T) {
	s := safe.MemoryShape{Rows: 1000, Dim: 16, DType: dlpack.Float32}
	p := cgParams(t, cagra.IterativeSearch)
	if _, err := cagra.EstimateMemory(s, &p, nil); !errors.Is(err, cagra.ErrNotEstimated) {
		t.Errorf("IterativeSearch: %v, want ErrNotEstimated", err)
	}
	p = cgParams(t, cagra.IVFPQ)
	e, err := cagra.EstimateMemory(safe.MemoryShape{Rows: 1_000_000, Dim: 128, DType: dlpack.Float32, Batch: 100, K: 10}, &p, nil)
	if err != nil {
		t.Fatal(err)
	}
	// a 16-wide uint32 graph; 128 float32 are 512 bytes a row, referenced
	if e.Index != 64_000_000 || e.BuildPeak < e.Index || e.Search <= 0 {
		t.Errorf("estimate %+v", e)
	}
}

// aceParams are ACE build parameters with n partitions, in memory or on
// disk (in a test directory).
func aceParams(t *testing.T, n int, disk bool) cagra.IndexParams {
	t.Helper()
	p := cgParams(t, cagra.ACE)
	a, err := cagra.DefaultACEParams()
	if err != nil {
		t.Fatal(err)
	}
	a.NPartitions, a.UseDisk = n, disk
	if disk {
		a.BuildDir = t.TempDir()
	}
	p.ACE = &a
	return p
}

// The ACE estimate's invariants (EstimateMemory's doc): in memory the
// index is the graph and the rows padded to 16 bytes, and the peak is the
// larger of the index and the partition phases, which are what the disk
// build (no device index) takes; more partitions take less; cuVS's bounds
// on the partition count (rows/1000 at most, 2 at least) apply.
func TestEstimateMemoryACE(t *testing.T) {
	for _, c := range []struct {
		rows, dim int
		dt        dlpack.DataType
	}{{3000, 24, dlpack.Float32}, {2_000_000, 100, dlpack.Int8}, {50_000_000, 96, dlpack.Float16}} {
		s := safe.MemoryShape{Rows: c.rows, Dim: c.dim, DType: c.dt}
		esz := int64(c.dt.ElemSize())
		mem := aceParams(t, 4, false)
		em, err := cagra.EstimateMemory(s, &mem, nil)
		if err != nil {
			t.Fatal(err)
		}
		disk := aceParams(t, 4, true)
		ed, err := cagra.EstimateMemory(s, &disk, nil)
		if err != nil {
			t.Fatal(err)
		}
		rows, deg := int64(c.rows), int64(mem.GraphDegree)
		graph := (rows*deg*4 + 255) / 256 * 256
		padded := (rows*((int64(c.dim)*esz+15)/16*16) + 255) / 256 * 256
		if em.Index != graph+padded || em.Dataset != 0 {
			t.Errorf("%v: in memory: index %d, dataset %d; want the graph %d and the padded rows %d, no upload", c, em.Index, em.Dataset, graph, padded)
		}
		if ed.Index != 0 || ed.BuildPeak <= 0 || em.BuildPeak != max(ed.BuildPeak, em.Index) {
			t.Errorf("%v: on disk %+v, in memory %+v: want no device index on disk and the in-memory peak max(disk peak, index)", c, ed, em)
		}
		if c.rows >= 1_000_000 {
			more := aceParams(t, 40, true)
			e40, err := cagra.EstimateMemory(s, &more, nil)
			if err != nil {
				t.Fatal(err)
			}
			if e40.BuildPeak >= ed.BuildPeak {
				t.Errorf("%v: 40 partitions peak at %d, 4 at %d: want less", c, e40.BuildPeak, ed.BuildPeak)
			}
		}
	}
	// 3000 rows make at most 3 partitions; 0 asks for cuVS's 2
	s := safe.MemoryShape{Rows: 3000, Dim: 64, DType: dlpack.Float32}
	at := func(n int) int64 {
		p := aceParams(t, n, true)
		e, err := cagra.EstimateMemory(s, &p, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e.BuildPeak
	}
	if at(100) != at(3) || at(0) != at(2) || at(3) == at(2) {
		t.Errorf("partitions: peaks %d (100), %d (3), %d (2), %d (0): want 100 lowered to 3, 0 as 2", at(100), at(3), at(2), at(0))
	}
}

// aceCase is an in-memory ACE build of rows × d float32 host rows.
func aceCase(t *testing.T, rows, d int) safetest.MemoryCase {
	t.Helper()
	data := safetest.Random(17, rows, d)
	p := aceParams(t, 2, false)
	est, err := cagra.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.Float32, HostDataset: true}, &p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return safetest.MemoryCase{Name: "ACE", Estimate: est, CFunc: "cuvsCagraBuild",
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			hm, err := dlpack.NewHostMatrix(data, rows, d)
			if err != nil {
				return nil, err
			}
			return cagra.Build(res, hm, &p)
		}}
}

// An ACE build is checked before cuVS. The double does not model ACE's
// device memory (dbl_cagra.c takes no blocks for it): its own accounting
// is not compared.
func TestBuildACERefusedOverMemoryLimit(t *testing.T) {
	safetest.CheckMemoryLimit(t, aceCase(t, 2500, 16))
}

// An in-memory ACE build's index is counted in DeviceMemory.InUse until
// Close.
func TestBuildACECounted(t *testing.T) {
	c := aceCase(t, 2500, 16)
	res := safetest.Resources(t)
	before, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := c.Build(res)
	if err != nil {
		t.Fatal(err)
	}
	after, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	if got := after.InUse - before.InUse; got != c.Estimate.Index {
		t.Errorf("DeviceMemory.InUse grew by %d over an ACE build, want its index's estimate %d", got, c.Estimate.Index)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if m, _ := res.DeviceMemory(); m.InUse != before.InUse {
		t.Errorf("DeviceMemory.InUse %d after Close, %d before", m.InUse, before.InUse)
	}
}
