package bench_test

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/bench"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// buildSizes are the dataset sizes of BenchmarkBuildFromGoSlice: rows of
// dim float32s, up to 1M × 128 (512 MB).
var buildSizes = []int{10_000, 100_000, 1_000_000}

// datasets caches each size's data, flat and as rows ([][]float32 whose
// rows alias the flat slice), across the benchmark's runs.
var datasets = map[int]struct {
	flat []float32
	rows [][]float32
}{}

func dataset(n int) ([]float32, [][]float32) {
	if d, ok := datasets[n]; ok {
		return d.flat, d.rows
	}
	flat := make([]float32, n*dim)
	for i := range flat {
		flat[i] = float32(i%1021) / 1021
	}
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
	}
	datasets[n] = struct {
		flat []float32
		rows [][]float32
	}{flat, rows}
	return flat, rows
}

// settle starts a build benchmark from a collected heap (the previous one
// may have left hundreds of megabytes of garbage) and reports allocations.
func settle(b *testing.B) {
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
}

// BenchmarkBuildFromGoSlice builds a CAGRA index from a Go dataset of
// growing size, with the double in instant mode: its build reads the
// dataset's shape and nothing else, so what is measured is the bindings'
// side of the host→C path.
//
//   - zero_copy: the flat []float32 lent as it is (dlpack.NewHostMatrix,
//     then cagra.Build). B/op must not grow with the dataset.
//   - flatten_go_upstream: what the upstream Go binding's NewTensor does
//     with a [][]float32: a new flat Go slice filled element by element,
//     then the same build.
//   - flatten_C: the [][]float32 copied row by row into malloc'd C memory
//     (reported as C-B/op, which the Go allocator does not see), then built
//     from a view of that memory.
func BenchmarkBuildFromGoSlice(b *testing.B) {
	needDouble(b)
	res := resources(b)
	p, err := cagra.DefaultIndexParams()
	must(b, err)
	build := func(b *testing.B, t dlpack.Tensor) {
		idx, err := cagra.Build(res, t, &p)
		must(b, err)
		must(b, idx.Close())
	}
	for _, n := range buildSizes {
		flat, rows := dataset(n)
		run := func(name string, op func(b *testing.B)) {
			b.Run(fmt.Sprintf("rows=%d/%s", n, name), func(b *testing.B) {
				instant(b)
				op(b) // once untimed: the first touch of fresh memory is not the steady state
				settle(b)
				for b.Loop() {
					op(b)
				}
			})
		}
		run("zero_copy", func(b *testing.B) {
			m, err := dlpack.NewHostMatrix(flat, n, dim)
			must(b, err)
			build(b, m)
		})
		run("flatten_go_upstream", func(b *testing.B) {
			dataFlat := make([]float32, len(rows)*len(rows[0]))
			for i := range rows {
				for j := range rows[i] {
					dataFlat[i*len(rows[0])+j] = rows[i][j]
				}
			}
			m, err := dlpack.NewHostMatrix(dataFlat, n, dim)
			must(b, err)
			build(b, m)
		})
		bytes := n * dim * 4
		run("flatten_C", func(b *testing.B) {
			c := bench.CAlloc(bytes)
			dst := unsafe.Slice((*float32)(c), n*dim)
			for i, r := range rows {
				copy(dst[i*dim:(i+1)*dim], r)
			}
			v, err := dlpack.FromRawParts(c, dlpack.HostDevice, []int64{int64(n), dim}, nil, dlpack.Float32)
			must(b, err)
			build(b, v)
			bench.CFree(c)
			b.ReportMetric(float64(bytes), "C-B/op")
		})
	}
}
