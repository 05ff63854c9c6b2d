package kit

import (
	"math"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
)

// The one check of Go-memory inputs for values cuVS cannot search: every
// float input the safe layer reads from host memory (SearchSlice's queries,
// the datasets and vectors of Build and Extend given in host memory) goes
// through FirstNonFinite once, before it is copied. Device memory is not
// read: checking it would cost a pass on the GPU and a sync.

// FirstNonFinite returns the index of the first NaN, +Inf or -Inf among n
// elements of type dt at p (float32, float64 or float16; other types hold
// none), and the value's name; -1 if there is none.
func FirstNonFinite(p unsafe.Pointer, n int, dt dlpack.DataType) (int, string) {
	if n == 0 || p == nil {
		return -1, ""
	}
	switch dt {
	case dlpack.Float32:
		for i, x := range unsafe.Slice((*uint32)(p), n) {
			if x&0x7f800000 == 0x7f800000 {
				return i, nonFinite(x&0x007fffff != 0, x>>31 != 0)
			}
		}
	case dlpack.Float64:
		for i, x := range unsafe.Slice((*uint64)(p), n) {
			if x&0x7ff0000000000000 == 0x7ff0000000000000 {
				return i, nonFinite(x&0x000fffffffffffff != 0, x>>63 != 0)
			}
		}
	case dlpack.Float16:
		for i, x := range unsafe.Slice((*uint16)(p), n) {
			if x&0x7c00 == 0x7c00 {
				return i, nonFinite(x&0x03ff != 0, x>>15 != 0)
			}
		}
	}
	return -1, ""
}

func nonFinite(nan, neg bool) string {
	switch {
	case nan:
		return "NaN"
	case neg:
		return "-Inf"
	}
	return "+Inf"
}

// CheckFiniteSlice refuses, with an *ArgError naming arg and the row, data
// (rows of dim values of T, in Go memory) holding a NaN or an infinity.
func CheckFiniteSlice[T dlpack.DType](op, arg string, data []T, dim int) error {
	i, what := FirstNonFinite(unsafe.Pointer(unsafe.SliceData(data)), len(data), dlpack.DataTypeOf[T]())
	if i < 0 {
		return nil
	}
	return Argf(op, arg, "row %d holds %s (column %d)", i/max(dim, 1), what, i%max(dim, 1))
}

// hostReadable reports whether the safe layer reads memory on d without a
// device pass: Go or C host memory, and CUDA-pinned host memory. Managed
// memory is left alone (reading it from the CPU would migrate it).
func hostReadable(d dlpack.Device) bool {
	return d.Type == dlpack.CPU || d.Type == dlpack.CUDAHost
}

// CheckFinite refuses, with an *ArgError naming arg and the first bad row,
// a float tensor in host memory (v, rank 1 or 2, any strides) holding a
// NaN or an infinity. Device memory passes unread.
func CheckFinite(op, arg string, v *dlpack.View) error {
	if !hostReadable(v.Device()) {
		return nil
	}
	dt := v.DType()
	if dt != dlpack.Float32 && dt != dlpack.Float64 && dt != dlpack.Float16 {
		return nil
	}
	p, err := v.Data()
	if err != nil || p == nil || v.Len() == 0 {
		return nil // refused elsewhere, or nothing to read
	}
	rows, cols := v.Dim(0), int64(1)
	rs, cs := v.Stride(0), int64(0)
	if v.NDim() == 2 {
		cols, cs = v.Dim(1), v.Stride(1)
	} else if v.NDim() != 1 {
		return nil
	}
	esz := dt.ElemSize()
	if v.Layout().IsRowMajor() {
		i, what := FirstNonFinite(p, int(rows*cols), dt)
		if i >= 0 {
			return Argf(op, arg, "row %d holds %s (column %d)", int64(i)/cols, what, int64(i)%cols)
		}
		return nil
	}
	for r := int64(0); r < rows; r++ {
		for c := int64(0); c < cols; c++ {
			e := unsafe.Add(p, (r*rs+c*cs)*esz)
			if _, what := FirstNonFinite(e, 1, dt); what != "" {
				return Argf(op, arg, "row %d holds %s (column %d)", r, what, c)
			}
		}
	}
	return nil
}

// Unfilled normalizes one search's results in Go memory: every slot the
// algorithm could not fill gets safe.Sentinel[N]() and distance +Inf. A
// slot is unfilled when its distance is ±Inf (IVF-Flat, IVF-SQ, IVF-PQ:
// cuVS's top-k dummy), its id is math.MaxInt64 (the IVF indexes'
// kOutOfBoundsRecord), or its id is 2^31-1 with distance math.MaxFloat32
// (CAGRA's). Every path that delivers results in host memory calls it,
// whatever the algorithm: the rule needs no knowledge of which one ran.
func Unfilled[N safe.NeighborID](neighbors []N, distances []float32) {
	inf := float32(math.Inf(1))
	sentinel := safe.Sentinel[N]()
	n := min(len(neighbors), len(distances))
	for i, d := range distances[:n] {
		id := uint64(neighbors[i])
		if math.IsInf(float64(d), 0) || id == math.MaxInt64 || id == math.MaxInt32 && d == math.MaxFloat32 {
			neighbors[i], distances[i] = sentinel, inf
		}
	}
}
