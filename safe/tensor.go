package safe

import (
	"github.com/cuvs-go/cuvs/dlpack"
)

// Memory says where an argument's memory may live, in cuVS's terms.
type Memory uint8

// Memory kinds. Device memory is CUDA, CUDA-pinned host or managed memory;
// host memory is CPU, CUDA-pinned host or managed memory.
const (
	DeviceMemory Memory = 1 << iota
	HostMemory
	AnyMemory = DeviceMemory | HostMemory
)

func (m Memory) String() string {
	switch m {
	case DeviceMemory:
		return "device"
	case HostMemory:
		return "host"
	}
	return "host or device"
}

// accepts reports whether memory on device type t is of kind m.
func (m Memory) accepts(t dlpack.DeviceType) bool {
	switch t {
	case dlpack.CUDA:
		return m&DeviceMemory != 0
	case dlpack.CPU:
		return m&HostMemory != 0
	case dlpack.CUDAHost, dlpack.CUDAManaged:
		return true
	}
	return false
}

// Rule is what one tensor argument of one cuVS function must be. The
// algorithm packages keep one table of Rules each; Check applies one.
type Rule struct {
	Arg      string            // the argument's name, for errors
	Memory   Memory            // where it may live
	DTypes   []dlpack.DataType // accepted element types
	Rank     int               // required rank
	RowMajor bool              // must be row-major contiguous
	ColMajor bool              // column-major contiguous is accepted too
}

// Check validates v against r for operation op, returning an *ArgError that
// names the argument and what is wrong.
func (r *Rule) Check(op string, v *dlpack.View) error {
	if err := v.Err(); err != nil {
		return Argf(op, r.Arg, "%v", err)
	}
	if !r.Memory.accepts(v.Device().Type) {
		return Argf(op, r.Arg, "%s memory is needed, got %s", r.Memory, v.Device())
	}
	ok := false
	for _, dt := range r.DTypes {
		if v.DType() == dt {
			ok = true
			break
		}
	}
	if !ok {
		return Argf(op, r.Arg, "dtype %s is not one of %v", v.DType(), r.DTypes)
	}
	if r.Rank != 0 && v.NDim() != r.Rank {
		return Argf(op, r.Arg, "rank %d, want %d", v.NDim(), r.Rank)
	}
	if r.RowMajor && !v.Layout().IsRowMajor() && !(r.ColMajor && v.Layout().IsColMajor()) {
		if r.ColMajor {
			return Argf(op, r.Arg, "layout %s, want row-major or column-major contiguous", v.Layout())
		}
		return Argf(op, r.Arg, "layout %s, want row-major contiguous", v.Layout())
	}
	return nil
}

// SearchShapes checks the shapes of a k-nearest-neighbour search: queries
// [n, dim], neighbors and distances [n, k] with 0 < k <= rows.
func SearchShapes(op string, queries, neighbors, distances *dlpack.View, dim, rows int64) (k int64, err error) {
	n := queries.Dim(0)
	if queries.Dim(1) != dim {
		return 0, Argf(op, "queries", "%d columns, the index has dimension %d", queries.Dim(1), dim)
	}
	if neighbors.Dim(0) != n {
		return 0, Argf(op, "neighbors", "%d rows for %d queries", neighbors.Dim(0), n)
	}
	if distances.Dim(0) != n {
		return 0, Argf(op, "distances", "%d rows for %d queries", distances.Dim(0), n)
	}
	k = neighbors.Dim(1)
	if distances.Dim(1) != k {
		return 0, Argf(op, "distances", "%d columns, neighbors has %d (k)", distances.Dim(1), k)
	}
	if k < 1 {
		return 0, Argf(op, "neighbors", "k = %d, want at least 1", k)
	}
	if k > rows {
		return 0, Argf(op, "neighbors", "k = %d exceeds the %d rows of the index", k, rows)
	}
	return k, nil
}
