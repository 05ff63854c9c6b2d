package quantize

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

var floatTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16, dlpack.Float64}

// deviceCompatible is cuVS's is_dlpack_device_compatible: the C code takes
// its device path for CUDA, pinned and managed memory, its host path
// otherwise.
func deviceCompatible(d dlpack.Device) bool {
	return d.Type == dlpack.CUDA || d.Type == dlpack.CUDAHost || d.Type == dlpack.CUDAManaged
}

// hostCompatible is cuVS's is_dlpack_host_compatible.
func hostCompatible(d dlpack.Device) bool {
	return d.Type == dlpack.CPU || d.Type == dlpack.CUDAHost || d.Type == dlpack.CUDAManaged
}

// input returns t's view checked against r (and, for host floats, finite).
func input(op string, res *safe.Resources, r kit.Rule, t dlpack.Tensor) (dlpack.View, error) {
	v, err := r.Take(op, res, t)
	if err != nil {
		return v, err
	}
	if v.Dim(0) < 1 || v.Dim(1) < 1 {
		return v, kit.Argf(op, r.Arg, "shape %v, want at least one row and one column", v.Shape())
	}
	return v, nil
}

// output returns t's writable view checked against r, on res's device.
func output(op string, res *safe.Resources, r kit.Rule, t dlpack.TensorMut) (dlpack.ViewMut, error) {
	if t == nil {
		return dlpack.ViewMut{}, kit.Argf(op, r.Arg, "nil")
	}
	m, err := t.ViewMut()
	if err != nil {
		return m, kit.Argf(op, r.Arg, "%w", err)
	}
	if err := r.CheckMut(op, &m); err != nil {
		return m, err
	}
	return m, kit.CheckDevice(res, op, r.Arg, m.Device())
}

// sameSide refuses an output the C code would read with the other path's
// view: cuVS picks the device or host path from the input and wants the
// output on the same side.
func sameSide(op, arg string, in dlpack.Device, out dlpack.Device) error {
	if deviceCompatible(in) && !deviceCompatible(out) {
		return kit.Argf(op, arg, "%s memory, the input is in device-accessible %s memory: both must be device-accessible", out, in)
	}
	if !deviceCompatible(in) && !hostCompatible(out) {
		return kit.Argf(op, arg, "%s memory, the input is in host memory: both must be host-accessible", out)
	}
	return nil
}

// shape refuses m unless it is rows × cols.
func shape(op, arg string, m *dlpack.ViewMut, rows, cols int64) error {
	if m.Dim(0) != rows || m.Dim(1) != cols {
		return kit.Argf(op, arg, "shape %v, want [%d %d]", m.Shape(), rows, cols)
	}
	return nil
}

// call binds ins (nil ones passed as nil) and outs to one C call on res,
// makes it, and waits for res's stream: the outputs are ready when it
// returns.
func call(op string, res *safe.Resources, ins []*dlpack.View, outs []*dlpack.ViewMut, f func(h generated.CuvsResources_t, in, out []*generated.DLManagedTensor) error) error {
	c := dlpack.Begin(op)
	defer c.End()
	ti := make([]*generated.DLManagedTensor, len(ins))
	for i, v := range ins {
		if v == nil {
			continue
		}
		t, err := c.In(v)
		if err != nil {
			return kit.Argf(op, "input", "%w", err)
		}
		ti[i] = t
	}
	to := make([]*generated.DLManagedTensor, len(outs))
	for i, m := range outs {
		if m == nil {
			continue
		}
		t, err := c.Out(m)
		if err != nil {
			return kit.Argf(op, "output", "%w", err)
		}
		to[i] = t
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(res)
	if err := f(h, ti, to); err != nil {
		return kit.Wrap(op, err)
	}
	return kit.Wrap(op, generated.CuvsStreamSync(h))
}
