// Package memest holds the arithmetic the index packages' EstimateMemory
// functions share: cuVS's allocation rounding, its IVF list capacities and
// its k-means training-set size, each from cuVS's C++ sources of v26.06.00
// and v26.08.01 (identical in both where cited).
package memest

import "github.com/cuvs-go/cuvs/dlpack"

// Align is RMM's allocation alignment (rmm::CUDA_ALLOCATION_ALIGNMENT):
// every allocation is rounded up to it.
const Align = 256

// Round rounds n bytes up to Align (0 stays 0).
func Round(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return (n + Align - 1) / Align * Align
}

// Sum rounds each allocation and adds them up.
func Sum(allocs ...int64) int64 {
	var s int64
	for _, a := range allocs {
		s += Round(a)
	}
	return s
}

// ElemSize is the bytes of one element of dt, 0 for a type cuVS indexes do
// not take.
func ElemSize(dt dlpack.DataType) int64 {
	switch dt {
	case dlpack.Float32:
		return 4
	case dlpack.Float16:
		return 2
	case dlpack.Int8, dlpack.Uint8:
		return 1
	}
	return 0
}

// ListCapacity is the rows cuVS allocates for an IVF list of n rows
// (cpp/src/neighbors/ivf_list.cuh, list::list): n rounded up to align_max,
// or, under align_max, to a power of two at least align_min (32, the
// interleaved group) and at most align_max (1024, or 32 with
// conservative_memory_allocation: ivf_flat.hpp and ivf_pq.hpp, list_spec).
func ListCapacity(n int64, conservative bool) int64 {
	const alignMin = 32
	alignMax := int64(1024)
	if conservative {
		alignMax = 32
	}
	if n >= alignMax {
		return (n + alignMax - 1) / alignMax * alignMax
	}
	c := int64(1)
	for c < max(n, alignMin) {
		c <<= 1
	}
	return min(c, alignMax)
}

// Lists is the device memory of rows rows spread over nLists lists,
// assuming balanced lists (what balanced k-means aims for): nLists lists of
// the average size's capacity (ListCapacity; with flat, capacity = size),
// each list's rowBytes a row and its int64 ids allocated apart, rounded.
// Lists of uneven sizes that straddle a rounding boundary take more, or
// less.
func Lists(rows, nLists, rowBytes int64, conservative, flat bool) int64 {
	if nLists < 1 || rows < 1 {
		return 0
	}
	avg := (rows + nLists - 1) / nLists
	c := avg
	if !flat {
		c = ListCapacity(avg, conservative)
	}
	return nLists * (Round(c*rowBytes) + Round(c*8))
}

// TrainRows is the size of the k-means training set cuVS samples from rows
// rows (ivf_flat_build.cuh and ivf_pq_build.cuh, build): rows divided by
// max(1, rows / max(fraction·rows, nLists)), integer divisions.
func TrainRows(rows int64, fraction float64, nLists int64) int64 {
	want := max(int64(fraction*float64(rows)), nLists)
	ratio := max(rows/max(want, 1), 1)
	return rows / ratio
}

// PQDim is cuVS's choice of pq_dim for dim when the params leave it 0
// (ivf_pq.hpp, index::calculate_pq_dim): dim (halved from 128 up) rounded
// down to a multiple of 32, or, below 32, the largest power of two not
// above it.
func PQDim(dim int64) int64 {
	if dim >= 128 {
		dim /= 2
	}
	if r := dim / 32 * 32; r > 0 {
		return r
	}
	r := int64(1)
	for r*2 <= dim {
		r *= 2
	}
	return r
}
