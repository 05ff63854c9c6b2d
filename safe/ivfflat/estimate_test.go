package ivfflat_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// memCase builds rows × d random vectors of T with p, from device memory
// (host: from a Go slice, uploaded by Build).
func memCase[T float32 | int8](t *testing.T, name string, rows, d int, p ivfflat.IndexParams, host bool) safetest.MemoryCase {
	t.Helper()
	f := safetest.Random(7, rows, d)
	data := make([]T, len(f))
	for i, v := range f {
		data[i] = T(v * 100)
	}
	est, err := ivfflat.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.DataTypeOf[T](), HostDataset: host}, &p, nil)
	must(t, err)
	own := int64(0)
	if !host {
		own = int64(len(data)) * int64(dlpack.DataTypeOf[T]().ElemSize())
	}
	return safetest.MemoryCase{Name: name, Estimate: est, CFunc: "cuvsIvfFlatBuild", Tol: 0.15, Own: own,
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			if host {
				hm, err := dlpack.NewHostMatrix(data, rows, d)
				if err != nil {
					return nil, err
				}
				return ivfflat.Build(res, hm, &p)
			}
			dm, err := safe.DeviceMatrixFrom(res, data, rows, d)
			if err != nil {
				return nil, err
			}
			defer dm.Close() // IVF-Flat copies the rows
			return ivfflat.Build(res, dm, &p)
		}}
}

func TestEstimateMemoryAgainstDouble(t *testing.T) {
	p := params(t)
	p.NLists = 16
	ip := p
	ip.Metric = safe.InnerProduct
	cons := p
	cons.ConservativeMemoryAllocation = true
	noData := p
	noData.AddDataOnBuild = false
	for _, c := range []safetest.MemoryCase{
		memCase[float32](t, "float32 L2", 40000, 16, p, false),
		memCase[int8](t, "int8 L2", 40000, 32, p, false),
		memCase[float32](t, "float32 inner product", 40000, 16, ip, false),
		memCase[float32](t, "conservative lists", 20000, 16, cons, false),
		memCase[float32](t, "no data on build", 20000, 16, noData, false),
		memCase[float32](t, "host dataset", 40000, 16, p, true),
	} {
		t.Run(c.Name, func(t *testing.T) { safetest.CheckMemoryEstimate(t, c) })
	}
}

func TestBuildRefusedOverMemoryLimit(t *testing.T) {
	p := params(t)
	safetest.CheckMemoryLimit(t, memCase[float32](t, "float32", 4000, 16, p, false))
}

func TestBuildRefusedOverPoolCap(t *testing.T) {
	p := params(t)
	p.NLists = 16
	safetest.CheckPoolCap(t, memCase[float32](t, "host rows", 100000, 16, p, true), 16<<20, 50)
}

func TestEstimateMemoryRefusesBadShapes(t *testing.T) {
	p := params(t)
	for _, s := range []safe.MemoryShape{
		{Rows: 0, Dim: 4, DType: dlpack.Float32},
		{Rows: 100, Dim: 4, DType: dlpack.Int64},
		{Rows: 10, Dim: 4, DType: dlpack.Float32}, // fewer rows than lists
		{Rows: 100, Dim: 4, DType: dlpack.Float32, Batch: 5},
	} {
		if _, err := ivfflat.EstimateMemory(s, &p, nil); err == nil {
			t.Errorf("EstimateMemory(%+v) succeeded", s)
		}
	}
	e, err := ivfflat.EstimateMemory(safe.MemoryShape{Rows: 1 << 20, Dim: 128, DType: dlpack.Float32, Batch: 1000, K: 10}, &p, nil)
	must(t, err)
	if e.Index < (1<<20)*128*4 || e.BuildPeak < e.Index || e.Search <= 0 || e.Dataset != 0 {
		t.Errorf("estimate %+v: want an index of at least the rows, a peak at least the index, some search scratch", e)
	}
}
