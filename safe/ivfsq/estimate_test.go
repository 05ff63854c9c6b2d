package ivfsq_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

// sqMemCase builds rows × d random float32 vectors with p, from device
// memory (host: from a Go slice, which cuVS's IVF-SQ build reads itself).
func sqMemCase(t *testing.T, name string, rows, d int, p ivfsq.IndexParams, host bool) safetest.MemoryCase {
	t.Helper()
	data := safetest.Random(17, rows, d)
	est, err := ivfsq.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.Float32, HostDataset: host}, &p, nil)
	if err != nil {
		t.Fatal(err)
	}
	own := int64(0)
	if !host {
		own = int64(rows * d * 4)
	}
	return safetest.MemoryCase{Name: name, Estimate: est, CFunc: "cuvsIvfSqBuild", Tol: 0.15, Own: own,
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			if host {
				hm, err := dlpack.NewHostMatrix(data, rows, d)
				if err != nil {
					return nil, err
				}
				return ivfsq.Build(res, hm, &p)
			}
			dm, err := safe.DeviceMatrixFrom(res, data, rows, d)
			if err != nil {
				return nil, err
			}
			defer dm.Close() // IVF-SQ encodes the rows
			return ivfsq.Build(res, dm, &p)
		}}
}

func sqParams(t *testing.T) ivfsq.IndexParams {
	t.Helper()
	p, err := ivfsq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.NLists = 16
	return p
}

func TestEstimateMemoryAgainstDouble(t *testing.T) {
	p := sqParams(t)
	ip := p
	ip.Metric = safe.InnerProduct
	for _, c := range []safetest.MemoryCase{
		sqMemCase(t, "device rows", 40000, 16, p, false),
		sqMemCase(t, "host rows", 40000, 16, p, true),
		sqMemCase(t, "inner product", 40000, 16, ip, false),
	} {
		t.Run(c.Name, func(t *testing.T) { safetest.CheckMemoryEstimate(t, c) })
	}
}

func TestBuildRefusedOverMemoryLimit(t *testing.T) {
	safetest.CheckMemoryLimit(t, sqMemCase(t, "device rows", 4000, 16, sqParams(t), false))
}

func TestBuildRefusedOverPoolCap(t *testing.T) {
	safetest.CheckPoolCap(t, sqMemCase(t, "host rows", 100000, 32, sqParams(t), true), 8<<20, 50)
}
