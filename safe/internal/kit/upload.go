package kit

import (
	"fmt"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/x448/float16"
)

// IsHost reports whether v is in CPU memory, which cuVS's device-only
// entry points (from_dlpack to a device_matrix_view) refuse.
func IsHost(v *dlpack.View) bool { return v.Device().Type == dlpack.CPU }

// Upload copies v, a row-major matrix in host memory, into a new matrix in
// res's device memory (cuvsRMMAlloc, cuvsMatrixCopy, cuvsStreamSync) and
// returns its view and the function that frees it: for an index that owns
// the copy of a dataset given in Go memory. The caller may change or free
// v once Upload returns.
func Upload(op, arg string, res *safe.Resources, v *dlpack.View) (dlpack.View, func() error, error) {
	switch v.DType() {
	case dlpack.Float32:
		return upload[float32](op, arg, res, v)
	case dlpack.Float16:
		return upload[float16.Float16](op, arg, res, v)
	case dlpack.Int8:
		return upload[int8](op, arg, res, v)
	case dlpack.Uint8:
		return upload[uint8](op, arg, res, v)
	}
	return dlpack.View{}, nil, Argf(op, arg, "dtype %s cannot be uploaded", v.DType())
}

func upload[T dlpack.DType](op, arg string, res *safe.Resources, v *dlpack.View) (dlpack.View, func() error, error) {
	m, err := safe.NewDeviceMatrix[T](res, int(v.Dim(0)), int(v.Dim(1)))
	if err != nil {
		return dlpack.View{}, nil, fmt.Errorf("%s: copying %s to device memory: %w", op, arg, err)
	}
	dst, _ := m.ViewMut()
	if err := safe.Copy(res, v, &dst); err != nil {
		_ = m.Close()
		return dlpack.View{}, nil, fmt.Errorf("%s: copying %s to device memory: %w", op, arg, err)
	}
	dv, _ := m.View()
	return dv, m.Close, nil
}
