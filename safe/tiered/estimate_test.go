package tiered_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

// tdMemCase builds rows × d random float32 rows with p from device memory
// (host: a Go slice).
func tdMemCase(t *testing.T, name string, rows, d int, p *tiered.IndexParams, host bool) safetest.MemoryCase {
	t.Helper()
	data := safetest.Random(11, rows, d)
	est, err := tiered.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.Float32, HostDataset: host}, p, nil)
	must(t, err)
	own := int64(0)
	if !host {
		own = int64(len(data)) * 4
	}
	return safetest.MemoryCase{Name: name, Estimate: est, CFunc: "cuvsTieredIndexBuild", Tol: 0.02, Own: own,
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			if host {
				hm, err := dlpack.NewHostMatrix(data, rows, d)
				if err != nil {
					return nil, err
				}
				return tiered.Build(res, hm, p)
			}
			dm, err := safe.DeviceMatrixFrom(res, data, rows, d)
			if err != nil {
				return nil, err
			}
			defer dm.Close() // the index copies the rows
			return tiered.Build(res, dm, p)
		}}
}

func TestEstimateMemoryAgainstDouble(t *testing.T) {
	ip := params(t, tiered.IVFFlat, 100)
	ip.Metric = safe.InnerProduct
	cases := []safetest.MemoryCase{
		tdMemCase(t, "CAGRA", 3000, 16, params(t, tiered.CAGRA, 100), false),
		tdMemCase(t, "CAGRA, rows of 20 bytes", 3000, 5, params(t, tiered.CAGRA, 100), false),
		tdMemCase(t, "IVF-Flat", 4000, 16, params(t, tiered.IVFFlat, 100), false),
		tdMemCase(t, "IVF-Flat, inner product (no norms)", 4000, 16, ip, false),
		tdMemCase(t, "IVF-PQ", 4000, 16, params(t, tiered.IVFPQ, 100), false),
		tdMemCase(t, "IVF-PQ, host rows", 4000, 16, params(t, tiered.IVFPQ, 100), true),
		tdMemCase(t, "fresh tier only", 500, 16, params(t, tiered.CAGRA, 1000), false),
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { safetest.CheckMemoryEstimate(t, c) })
	}
}

// cuVS's storage takes four times the rows' bytes (and 16 bytes a norm):
// the estimate says so, whatever the backend.
func TestEstimateMemoryCountsCuVSStorage(t *testing.T) {
	const rows, d = 3200, 16
	p := params(t, tiered.IVFFlat, 100)
	with, err := tiered.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.Float32}, p, nil)
	must(t, err)
	ip := *p
	ip.Metric = safe.InnerProduct
	without, err := tiered.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.Float32}, &ip, nil)
	must(t, err)
	// the same IVF-Flat lists and centers but for the center norms (16
	// lists: one 256-byte block), and the storage's norms
	room := int64(rows + rows/16)
	if got, want := with.Index-without.Index, 256+(room*16+255)/256*256; got != want {
		t.Errorf("L2 over inner product: %d bytes more, want %d (the storage's norms, 16 bytes a row, and the center norms)", got, want)
	}
	if without.Index < int64(rows*d*4)+room*int64(d)*16 {
		t.Errorf("index estimate %d: under the copy (%d) and cuVS's storage (%d)", without.Index, rows*d*4, room*int64(d)*16)
	}
	if _, err := tiered.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.Int8}, p, nil); err == nil {
		t.Error("int8 rows estimated: the tiered index takes float32")
	}
	if _, err := tiered.EstimateMemory(safe.MemoryShape{Rows: 10, Dim: d, DType: dlpack.Float32}, params(t, tiered.IVFFlat, 5), nil); !isArg(err, "shape.Rows") {
		t.Errorf("10 rows for 16 lists: %v, want an *ArgError on shape.Rows", err)
	}
}

func TestBuildRefusedOverMemoryLimit(t *testing.T) {
	safetest.CheckMemoryLimit(t, tdMemCase(t, "CAGRA", 1000, 16, params(t, tiered.CAGRA, 100), false))
}

func TestBuildRefusedOverPoolCap(t *testing.T) {
	safetest.CheckPoolCap(t, tdMemCase(t, "IVF-PQ, host rows", 4000, 16, params(t, tiered.IVFPQ, 100), true), 1<<20, 50)
}

// allocated is what the double's memory resource has handed out on device 0.
func allocated(t *testing.T) int64 {
	return int64(safetest.Double(t, "device memory").DeviceMemory(0).Allocated)
}

func inUse(t *testing.T, res *safe.Resources) int64 {
	t.Helper()
	m, err := res.DeviceMemory()
	must(t, err)
	return m.InUse
}

// Extend's ANN rebuilds (cuVS's own extend, and a compaction after a
// delete) and Merge are counted in DeviceMemory.InUse as the double holds
// them, and given back on Close.
func TestExtendAndMergeCounted(t *testing.T) {
	for _, b := range []tiered.Backend{tiered.CAGRA, tiered.IVFFlat, tiered.IVFPQ} {
		t.Run(b.String(), func(t *testing.T) {
			res := safetest.Resources(t)
			safetest.Check(t)
			a0, u0 := allocated(t), inUse(t, res)
			p := params(t, b, 200)
			p.CreateANNIndexOnExtend = true
			data := safetest.Random(5, 1500, dim)
			idx, err := tiered.Build(res, device(t, res, data[:300*dim], 300), p)
			must(t, err)
			held := func(what string) {
				t.Helper()
				a, u := allocated(t)-a0, inUse(t, res)-u0
				t.Logf("%s: the double holds %d, InUse %d", what, a, u)
				// the test's matrices count in both (exact), the index's
				// memory by the estimates
				if a != u {
					t.Errorf("%s: the double holds %d bytes, DeviceMemory.InUse counts %d", what, a, u)
				}
			}
			held("built")
			must(t, idx.Extend(res, device(t, res, data[300*dim:600*dim], 300))) // rebuild: cuVS's extend
			if idx.ANNRows() != 600 {
				t.Fatalf("ANN rows %d after the rebuild, want 600", idx.ANNRows())
			}
			held("extended in cuVS")
			if _, err := idx.Delete([]int64{3}); err != nil {
				t.Fatal(err)
			}
			must(t, idx.Extend(res, device(t, res, data[600*dim:900*dim], 300))) // rebuild: a compaction
			held("compacted")
			other, err := tiered.Build(res, device(t, res, data[900*dim:], 600), p)
			must(t, err)
			clean, err := tiered.Build(res, device(t, res, data[:600*dim], 600), p)
			must(t, err)
			m, err := tiered.Merge(res, nil, clean, other) // cuVS's merge
			must(t, err)
			held("merged")
			for _, x := range []*tiered.Index{m, idx, other, clean} {
				must(t, x.Close())
			}
			own := int64(300+300+300+600+600) * dim * 4 // the test's matrices, freed at its end
			if a, u := allocated(t)-a0, inUse(t, res)-u0; a != own || u != own {
				t.Errorf("after Close: the double holds %d bytes more, InUse %d more; want the test's %d", a, u, own)
			}
		})
	}
}

// An Extend whose ANN rebuild does not fit the limit is refused before
// cuVS's extend (or build) is called; the rows stay added.
func TestExtendRebuildRefusedOverMemoryLimit(t *testing.T) {
	ctl := safetest.Double(t, "call counts")
	res := safetest.Resources(t)
	safetest.Check(t)
	p := params(t, tiered.IVFFlat, 200)
	p.CreateANNIndexOnExtend = true
	data := safetest.Random(6, 600, dim)
	idx, err := tiered.Build(res, device(t, res, data[:300*dim], 300), p)
	must(t, err)
	defer idx.Close()
	more := device(t, res, data[300*dim:], 300)
	est, err := tiered.EstimateMemory(safe.MemoryShape{Rows: 600, Dim: dim, DType: dlpack.Float32}, p, nil)
	must(t, err)
	// room for the fresh tier's rows and the gathered copy, not for the
	// ANN rebuild
	must(t, safe.SetMemoryLimit(inUse(t, res)+est.BuildPeak/2))
	t.Cleanup(func() { _ = safe.SetMemoryLimit(0) })
	calls := ctl.Calls("cuvsTieredIndexExtend") + ctl.Calls("cuvsTieredIndexBuild")
	err = idx.Extend(res, more)
	var me *safe.MemoryError
	if !errors.Is(err, safe.ErrOutOfMemory) || !errors.As(err, &me) {
		t.Fatalf("Extend over the limit: %v, want a *safe.MemoryError", err)
	}
	if got := ctl.Calls("cuvsTieredIndexExtend") + ctl.Calls("cuvsTieredIndexBuild"); got != calls {
		t.Errorf("cuVS called %d times by a refused rebuild", got-calls)
	}
	if idx.Rows() != 600 || idx.ANNRows() != 300 {
		t.Errorf("after the refused rebuild: %d rows, %d under the ANN index; want 600 and 300", idx.Rows(), idx.ANNRows())
	}
	must(t, safe.SetMemoryLimit(0))
	ids := search(t, res, idx, nil, data[500*dim:501*dim], 1, nil)
	if ids[0] != 500 {
		t.Errorf("row 500 searched after the refusal: got id %d", ids[0])
	}
}
