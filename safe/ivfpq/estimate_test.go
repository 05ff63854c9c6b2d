package ivfpq_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// pqMemCase builds rows × d random vectors of T with p, from device memory
// (host: from a Go slice, which cuVS's IVF-PQ build reads itself).
func pqMemCase[T float32 | int8](t *testing.T, name string, rows, d int, p ivfpq.IndexParams, host bool) safetest.MemoryCase {
	t.Helper()
	f := safetest.Random(11, rows, d)
	data := make([]T, len(f))
	for i, v := range f {
		data[i] = T(v * 100)
	}
	est, err := ivfpq.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.DataTypeOf[T](), HostDataset: host}, &p, nil)
	must(t, err)
	own := int64(0)
	if !host {
		own = int64(len(data)) * int64(dlpack.DataTypeOf[T]().ElemSize())
	}
	return safetest.MemoryCase{Name: name, Estimate: est, CFunc: "cuvsIvfPqBuild", Tol: 0.10, Own: own,
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			if host {
				hm, err := dlpack.NewHostMatrix(data, rows, d)
				if err != nil {
					return nil, err
				}
				return ivfpq.Build(res, hm, &p)
			}
			dm, err := safe.DeviceMatrixFrom(res, data, rows, d)
			if err != nil {
				return nil, err
			}
			defer dm.Close() // IVF-PQ encodes the rows
			return ivfpq.Build(res, dm, &p)
		}}
}

func pqParams(t *testing.T) ivfpq.IndexParams {
	t.Helper()
	p, err := ivfpq.DefaultIndexParams()
	must(t, err)
	p.NLists = 16
	p.KMeansNIters = 5
	return p
}

func TestEstimateMemoryAgainstDouble(t *testing.T) {
	p := pqParams(t)
	cluster := p
	cluster.CodebookKind = ivfpq.PerCluster
	flat := p
	flat.CodesLayout = ivfpq.Flat
	bits := p
	bits.PQBits, bits.PQDim = 4, 8
	for _, c := range []safetest.MemoryCase{
		pqMemCase[float32](t, "float32", 20000, 16, p, false),
		pqMemCase[int8](t, "int8", 20000, 16, p, false),
		pqMemCase[float32](t, "host rows", 20000, 16, p, true),
		pqMemCase[float32](t, "per-cluster codebooks", 20000, 16, cluster, false),
		pqMemCase[float32](t, "flat codes", 20000, 16, flat, false),
		pqMemCase[float32](t, "4 bits", 20000, 16, bits, false),
	} {
		t.Run(c.Name, func(t *testing.T) { safetest.CheckMemoryEstimate(t, c) })
	}
}

func TestBuildRefusedOverMemoryLimit(t *testing.T) {
	safetest.CheckMemoryLimit(t, pqMemCase[float32](t, "float32", 4000, 32, pqParams(t), false))
}

// More rows than the pool may hold, from host memory: IVF-PQ's build reads
// them in batches, so the estimate (the codes, not the rows) fits and the
// build runs within the cap.
func TestHostBuildLargerThanPool(t *testing.T) {
	ctl := safetest.Double(t, "a small device")
	p := pqParams(t)
	p.PQDim, p.PQBits = 8, 4   // cheap to encode on the double
	const rows, d = 400000, 64 // 102 MB of float32 rows
	data := safetest.Random(12, rows, d)
	hm, err := dlpack.NewHostMatrix(data, rows, d)
	must(t, err)
	est, err := ivfpq.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.Float32, HostDataset: true}, &p, nil)
	must(t, err)
	must(t, safe.ResetMemoryResource())
	ctl.SetDeviceBytes(160 << 20)
	t.Cleanup(func() {
		_ = safe.ResetMemoryResource()
		ctl.SetDeviceBytes(0)
		must(t, safe.EnableMemoryPool(safe.DefaultPoolInitialPercent, safe.DefaultPoolMaxPercent, false))
	})
	must(t, safe.EnableMemoryPool(1, 50, false)) // a cap of 80 MiB: under the rows' 102 MB
	res := safetest.Resources(t)
	m, err := res.DeviceMemory()
	must(t, err)
	if est.BuildPeak >= m.Pool.Max || int64(rows*d*4) <= m.Pool.Max {
		t.Fatalf("estimate %+v, pool cap %d: want rows over the cap and a build under it", est, m.Pool.Max)
	}
	ctl.ResetDevicePeak(0)
	idx, err := ivfpq.Build(res, hm, &p)
	must(t, err)
	defer idx.Close()
	if peak := ctl.DeviceMemory(0).Peak; int64(peak) > m.Pool.Max || int64(peak) > est.BuildPeak*11/10 {
		t.Errorf("peak %d bytes: want at most the pool cap %d and the estimate %d (+10%%)", peak, m.Pool.Max, est.BuildPeak)
	}
	if idx.Rows() != rows {
		t.Errorf("%d rows indexed, want %d", idx.Rows(), rows)
	}
}

func TestEstimateMemoryShapes(t *testing.T) {
	p := pqParams(t)
	e, err := ivfpq.EstimateMemory(safe.MemoryShape{Rows: 1_000_000, Dim: 128, DType: dlpack.Float32, Batch: 1000, K: 10}, &p, nil)
	must(t, err)
	// 1M rows × (64 one-byte codes + an 8-byte id) with lists rounded up.
	if e.Index < 72_000_000 || e.Index > 80_000_000 || e.BuildPeak <= e.Index || e.Search <= 0 || e.Dataset != 0 {
		t.Errorf("estimate %+v", e)
	}
	for _, s := range []safe.MemoryShape{
		{Rows: 10, Dim: 4, DType: dlpack.Float32},
		{Rows: 100, Dim: 4, DType: dlpack.Float64},
		{Rows: 100, Dim: -1, DType: dlpack.Float32},
	} {
		if _, err := ivfpq.EstimateMemory(s, &p, nil); err == nil {
			t.Errorf("EstimateMemory(%+v) succeeded", s)
		}
	}
}
