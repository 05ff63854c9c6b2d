package bruteforce_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// bfMemCase builds rows × d random float32 vectors with metric m, from
// device memory the index borrows (host: from a Go slice, uploaded and
// kept by the index).
func bfMemCase(t *testing.T, name string, rows, d int, m safe.Metric, host bool) safetest.MemoryCase {
	t.Helper()
	data := safetest.Random(9, rows, d)
	p := bruteforce.BuildParams{Metric: m}
	est, err := bruteforce.EstimateMemory(safe.MemoryShape{Rows: rows, Dim: d, DType: dlpack.Float32, HostDataset: host}, &p)
	if err != nil {
		t.Fatal(err)
	}
	own := int64(0)
	if !host {
		own = int64(rows * d * 4)
	}
	return safetest.MemoryCase{Name: name, Estimate: est, CFunc: "cuvsBruteForceBuild", Tol: 0, Own: own, OwnKept: true,
		Build: func(res *safe.Resources) (interface{ Close() error }, error) {
			if host {
				hm, err := dlpack.NewHostMatrix(data, rows, d)
				if err != nil {
					return nil, err
				}
				return bruteforce.Build(res, hm, &p)
			}
			dm, err := safe.DeviceMatrixFrom(res, data, rows, d)
			if err != nil {
				return nil, err
			}
			idx, err := bruteforce.Build(res, dm, &p)
			if err != nil {
				dm.Close()
				return nil, err
			}
			return closeBoth{idx, dm}, nil
		}}
}

// closeBoth closes an index, then the dataset it borrows.
type closeBoth struct {
	idx *bruteforce.Index
	dm  *safe.DeviceMatrix[float32]
}

func (c closeBoth) Close() error {
	if err := c.idx.Close(); err != nil {
		return err
	}
	return c.dm.Close()
}

func TestEstimateMemoryAgainstDouble(t *testing.T) {
	for _, c := range []safetest.MemoryCase{
		bfMemCase(t, "L2 device", 5000, 16, safe.L2Expanded, false),
		bfMemCase(t, "cosine host", 5000, 16, safe.CosineExpanded, true),
		bfMemCase(t, "inner product", 5000, 16, safe.InnerProduct, false),
	} {
		t.Run(c.Name, func(t *testing.T) { safetest.CheckMemoryEstimate(t, c) })
	}
}

func TestBuildRefusedOverMemoryLimit(t *testing.T) {
	// Device rows: the upload of host rows would itself be refused by the
	// limit, WithoutMemoryCheck or not (the limit binds exact allocations).
	safetest.CheckMemoryLimit(t, bfMemCase(t, "device rows", 5000, 16, safe.L2Expanded, false))
}

func TestBuildRefusedOverPoolCap(t *testing.T) {
	// 1M rows × 16 float32: a 64 MB upload and 4 MB of norms, in a pool of
	// at most 40 MiB.
	safetest.CheckPoolCap(t, bfMemCase(t, "host rows", 1<<20, 16, safe.L2Expanded, true), 80<<20, 50)
}

func TestEstimateSearchTiles(t *testing.T) {
	p := bruteforce.BuildParams{Metric: safe.InnerProduct}
	small, err := bruteforce.EstimateMemory(safe.MemoryShape{Rows: 1000, Dim: 64, DType: dlpack.Float32, Batch: 10, K: 10}, &p)
	if err != nil {
		t.Fatal(err)
	}
	big, err := bruteforce.EstimateMemory(safe.MemoryShape{Rows: 10_000_000, Dim: 64, DType: dlpack.Float32, Batch: 10_000, K: 10}, &p)
	if err != nil {
		t.Fatal(err)
	}
	// 10 queries × 1000 rows: one tile of 10 × 1000 floats and its top-k.
	if want := int64(40192 + 512 + 1024); small.Search != want {
		t.Errorf("small search scratch %d, want %d", small.Search, want)
	}
	// A large batch tiles: 512 query rows × (1 GiB / (8 × 512)) index rows.
	if big.Search < 512<<20 || big.Search > 2<<30 {
		t.Errorf("large search scratch %d, want about 1 GiB of tiles", big.Search)
	}
	l2 := bruteforce.BuildParams{Metric: safe.L2Expanded}
	fused, err := bruteforce.EstimateMemory(safe.MemoryShape{Rows: 1000, Dim: 64, DType: dlpack.Float32, Batch: 10, K: 10}, &l2)
	if err != nil || fused.Search != 0 || fused.Index != 4096 {
		t.Errorf("L2 k=10: %+v, %v; want the fused kNN (no scratch counted) and 4000 bytes of norms rounded up", fused, err)
	}
}
