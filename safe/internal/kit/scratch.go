package kit

import (
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
)

// DeviceScratch returns device scratch of at least bytes bytes in *m, made
// on res, grown as needed (the smaller one freed), and its address. The
// owner of *m closes it.
func DeviceScratch(res *safe.Resources, m **safe.DeviceMatrix[uint8], bytes int64) (unsafe.Pointer, error) {
	bytes = max(bytes, 8)
	if *m != nil && int64((*m).Cols()) < bytes {
		_ = (*m).Close()
		*m = nil
	}
	if *m == nil {
		d, err := safe.NewDeviceMatrix[uint8](res, 1, int(bytes))
		if err != nil {
			return nil, err
		}
		*m = d
	}
	v, err := (*m).ViewMut()
	if err != nil {
		return nil, err
	}
	return v.Data()
}

// OutRaw binds memory p on dev as a shape[0] × shape[1] tensor of dt to
// call, as an output. shape is a pointer so that a caller can keep it in
// state it already has (a slice of it escapes into the view).
func OutRaw(call dlpack.Call, p unsafe.Pointer, dev dlpack.Device, shape *[2]int64, dt dlpack.DataType) (*generated.DLManagedTensor, error) {
	mv, err := dlpack.FromRawPartsMut(p, dev, shape[:], nil, dt)
	if err != nil {
		return nil, err
	}
	return call.Out(&mv)
}

// RewritesInputs reports which inputs cuVS rewrites in place while it
// computes distances with metric m, undoing it on the stream afterwards, up
// to rounding (distance/detail/distance.cuh's distance_impl, both
// releases): HellingerExpanded takes square roots of x and y (of their
// union, once, when they overlap), KLDivergence logarithms of y (unless x
// is y; an element equal to 1 comes back as 0). A brute-force search is
// such a computation with the queries as x and the index's dataset as y.
func RewritesInputs(m safe.Metric) (x, y bool) {
	switch m {
	case safe.HellingerExpanded:
		return true, true
	case safe.KLDivergence:
		return false, true
	}
	return false, false
}
