package kit

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
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

// String returns "device", "host" or "host or device".
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
	return r.check(op, v.Err(), v.Device(), v.DType(), v.NDim(), v.Layout())
}

// CheckOn is Check for an argument of a call made on res: it also refuses
// memory of another CUDA device than res's (CheckDevice).
func (r *Rule) CheckOn(op string, res *safe.Resources, v *dlpack.View) error {
	if err := r.Check(op, v); err != nil {
		return err
	}
	return CheckDevice(res, op, r.Arg, v.Device())
}

// CheckMut is Check for a writable view (an output), without making a
// read-only copy of it first.
func (r *Rule) CheckMut(op string, m *dlpack.ViewMut) error {
	return r.check(op, m.Err(), m.Device(), m.DType(), m.NDim(), m.Layout())
}

func (r *Rule) check(op string, err error, dev dlpack.Device, dt dlpack.DataType, ndim int, layout dlpack.Layout) error {
	if err != nil {
		return Argf(op, r.Arg, "%w", err)
	}
	if !r.Memory.accepts(dev.Type) {
		return Argf(op, r.Arg, "%s memory is needed, got %s", r.Memory, dev)
	}
	ok := false
	for _, t := range r.DTypes {
		if dt == t {
			ok = true
			break
		}
	}
	if !ok {
		return Argf(op, r.Arg, "dtype %s is not one of %v", dt, r.DTypes)
	}
	if r.Rank != 0 && ndim != r.Rank {
		return Argf(op, r.Arg, "rank %d, want %d", ndim, r.Rank)
	}
	if r.RowMajor && !layout.IsRowMajor() && !(r.ColMajor && layout.IsColMajor()) {
		if r.ColMajor {
			return Argf(op, r.Arg, "layout %s, want row-major or column-major contiguous", layout)
		}
		return Argf(op, r.Arg, "layout %s, want row-major contiguous", layout)
	}
	return nil
}

// searchShapes checks the shapes of a k-nearest-neighbour search: queries
// [n, dim], neighbors and distances [n, k] with 0 < k <= rows.
func searchShapes(op string, n, qCols, nRows, nCols, dRows, dCols, dim, rows int64) (k int64, err error) {
	if qCols != dim {
		return 0, Argf(op, "queries", "%d columns, the index has dimension %d", qCols, dim)
	}
	if nRows != n {
		return 0, Argf(op, "neighbors", "%d rows for %d queries", nRows, n)
	}
	if dRows != n {
		return 0, Argf(op, "distances", "%d rows for %d queries", dRows, n)
	}
	k = nCols
	if dCols != k {
		return 0, Argf(op, "distances", "%d columns, neighbors has %d (k)", dCols, k)
	}
	if k < 1 {
		return 0, Argf(op, "neighbors", "k = %d, want at least 1", k)
	}
	if k > rows {
		return 0, Argf(op, "neighbors", "k = %d exceeds the %d rows of the index", k, rows)
	}
	return k, nil
}

// Take returns t's view checked against r for a call on res: the
// argument's nil check, its view, CheckOn and, for float data in host
// memory, CheckFinite (no NaN or infinity) in one step, every refusal an
// *ArgError naming r.Arg. Take is for the inputs of Build and Extend, which
// cuVS copies: the one pass over host memory costs less than that copy.
func (r *Rule) Take(op string, res *safe.Resources, t dlpack.Tensor) (dlpack.View, error) {
	if t == nil {
		return dlpack.View{}, Argf(op, r.Arg, "nil")
	}
	v, err := t.View()
	if err != nil {
		return dlpack.View{}, Argf(op, r.Arg, "%w", err)
	}
	if err := r.CheckOn(op, res, &v); err != nil {
		return v, err
	}
	return v, CheckFinite(op, r.Arg, &v)
}
