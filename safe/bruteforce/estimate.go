package bruteforce

import (
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
)

// EstimateMemory estimates the device memory of a Build with p (nil:
// L2Expanded) over s.Rows × s.Dim vectors of s.DType (float32 or float16,
// row-major), of the built index, and of a search of s.Batch queries for
// s.K neighbours. Build refuses, before calling cuVS, a build whose
// BuildPeak + Dataset exceeds what the device can still give
// (safe.MemoryError).
//
// From cuVS's sources (v26.06.00 and v26.08.01 alike):
// cpp/src/neighbors/detail/knn_brute_force.cuh (build: a float norm per
// row for L2Expanded, L2SqrtExpanded and CosineExpanded, the dataset
// referenced, not copied; search: for k ≤ 64 under the L2 metrics the
// fused L2 kNN, with no scratch counted here, else tiled_brute_force_knn's
// distance tile, query norms and per-tile top-k buffers) and
// cpp/src/neighbors/detail/faiss_distance_utils.h (chooseTileSize: tiles of
// 512 query rows, 1024 at dim ≤ 32, and as many index rows as keep a tile
// within 512 MiB, else 1 GiB on a device over 8 GB).
//
// A dataset in host memory is uploaded by the bindings and kept with the
// index (Dataset, held until Close). Left out: select-k's workspace, the
// fused kNN's small buffers, the bitmap/bitset filtered paths (their CSR
// or dense masks), and a column-major dataset (cuVS copies it row-major).
func EstimateMemory(s safe.MemoryShape, p *BuildParams) (safe.MemoryEstimate, error) {
	const op = "bruteforce.EstimateMemory"
	if err := s.Check(op); err != nil {
		return safe.MemoryEstimate{}, err
	}
	pd, err := kit.Or(p, DefaultBuildParams)
	if err != nil {
		return safe.MemoryEstimate{}, err
	}
	esz := memest.ElemSize(s.DType)
	if esz != 4 && esz != 2 {
		return safe.MemoryEstimate{}, kit.Argf(op, "shape.DType", "%s: brute force takes float32 or float16", s.DType)
	}
	rows, dim := int64(s.Rows), int64(s.Dim)
	var e safe.MemoryEstimate
	if expanded(pd.Metric) {
		e.Index = memest.Round(rows * 4)
	}
	e.BuildPeak = e.Index
	if s.HostDataset {
		e.Dataset = memest.Round(rows * dim * esz)
	}
	if s.Batch > 0 {
		e.Search = searchScratch(int64(s.Batch), rows, dim, int64(s.K), pd.Metric)
	}
	return e, nil
}

func expanded(m safe.Metric) bool {
	return m == safe.L2Expanded || m == safe.L2SqrtExpanded || m == safe.CosineExpanded
}

// searchScratch is knn_brute_force.cuh's scratch for m queries over n rows.
func searchScratch(m, n, dim, k int64, metric safe.Metric) int64 {
	switch metric {
	case safe.L2Expanded, safe.L2SqrtExpanded, safe.L2Unexpanded, safe.L2SqrtUnexpanded:
		if k <= 64 {
			return 0 // fusedL2Knn
		}
	}
	tileRows := min(int64(512), m)
	if dim <= 32 {
		tileRows = min(int64(1024), m)
	}
	tileCols := n
	if tileRows*n*4*2 > 512<<20 {
		tileCols = min((int64(1)<<30)/(2*4*tileRows), n)
	}
	tileCols = max(tileCols, k)
	colTiles := (n + tileCols - 1) / tileCols
	outCols := k * colTiles
	if last := n % tileCols; last != 0 && last < k {
		outCols -= k - last
	}
	var norms int64
	if expanded(metric) {
		norms = m * 4
	}
	return memest.Sum(tileRows*tileCols*4, norms, tileRows*outCols*4, tileRows*outCols*8)
}
