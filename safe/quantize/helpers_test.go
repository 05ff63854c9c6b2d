package quantize_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func host[T dlpack.DType](t testing.TB, data []T, rows, cols int) *dlpack.HostMatrix[T] {
	t.Helper()
	m, err := dlpack.NewHostMatrix(data, rows, cols)
	must(t, err)
	return m
}

func dev[T dlpack.DType](t testing.TB, res *safe.Resources, data []T, rows, cols int) *safe.DeviceMatrix[T] {
	t.Helper()
	m, err := safe.DeviceMatrixFrom(res, data, rows, cols)
	must(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func devZero[T dlpack.DType](t testing.TB, res *safe.Resources, rows, cols int) *safe.DeviceMatrix[T] {
	t.Helper()
	m, err := safe.NewDeviceMatrix[T](res, rows, cols)
	must(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func devVec[T dlpack.DType](t testing.TB, res *safe.Resources, n int) *safe.DeviceVector[T] {
	t.Helper()
	v, err := safe.NewDeviceVector[T](res, n)
	must(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func toHost[T dlpack.DType](t testing.TB, res *safe.Resources, m *safe.DeviceMatrix[T]) []T {
	t.Helper()
	out, err := m.ToHost(res)
	must(t, err)
	return out
}

// viewToHost copies a library view (a codebook) into Go memory.
func viewToHost(t testing.TB, res *safe.Resources, v dlpack.View) []float32 {
	t.Helper()
	n := 1
	for _, d := range v.Shape() {
		n *= int(d)
	}
	out := make([]float32, n)
	if n == 0 {
		return out
	}
	dst := host(t, out, int(v.Dim(0)), int(v.Dim(1)))
	dm, err := dst.ViewMut()
	must(t, err)
	must(t, safe.Copy(res, &v, &dm))
	return out
}
