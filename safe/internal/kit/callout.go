package kit

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
)

// CallInOut is CallWith for a call that also writes tensors: the views in
// in are bound for reading and those in out for writing (nil ones of either
// passed as nil), f runs on res, and res's stream is waited for, so the
// outputs hold their results when CallInOut returns. The views are checked
// by the caller; a binding refusal (a borrowed or expired view) is an
// *ArgError naming "input" or "output".
func CallInOut(op string, res *safe.Resources, in []*dlpack.View, out []*dlpack.ViewMut, f func(generated.CuvsResources_t, []*generated.DLManagedTensor, []*generated.DLManagedTensor) error) error {
	c := dlpack.Begin(op)
	defer c.End()
	ti := make([]*generated.DLManagedTensor, len(in))
	for i, v := range in {
		if v == nil {
			continue
		}
		t, err := c.In(v)
		if err != nil {
			return Argf(op, "input", "%w", err)
		}
		ti[i] = t
	}
	to := make([]*generated.DLManagedTensor, len(out))
	for i, m := range out {
		if m == nil {
			continue
		}
		t, err := c.Out(m)
		if err != nil {
			return Argf(op, "output", "%w", err)
		}
		to[i] = t
	}
	h, err := Lock(res, op)
	if err != nil {
		return err
	}
	defer Unlock(res)
	if err := f(h, ti, to); err != nil {
		return Wrap(op, err)
	}
	return Wrap(op, generated.CuvsStreamSync(h))
}
