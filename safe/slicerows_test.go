package safe_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
)

// TestSliceRows: the view cuvsMatrixSliceRows computes is the rows asked
// for, of host and device matrices, strided ones and vectors; it shares the
// matrix's memory and expires with it; ranges cuVS would let out of the
// matrix are refused.
func TestSliceRows(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, cols = 7, 3
	data := make([]float32, rows*cols)
	for i := range data {
		data[i] = float32(i)
	}
	host, err := dlpack.NewHostMatrix(data, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := safe.DeviceMatrixFrom(res, data, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, c := range []struct {
		name       string
		src        dlpack.Tensor
		start, end int
	}{{"host", host, 2, 5}, {"device", dev, 0, 7}, {"device tail", dev, 6, 7}, {"empty", host, 3, 3}} {
		v, err := safe.SliceRows(res, c.src, c.start, c.end)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if v.NDim() != 2 || v.Dim(0) != int64(c.end-c.start) || v.Dim(1) != cols {
			t.Fatalf("%s: shape %v", c.name, v.Shape())
		}
		got := make([]float32, (c.end-c.start)*cols)
		if len(got) > 0 {
			dst, _ := dlpack.NewHostMatrix(got, c.end-c.start, cols)
			dm, _ := dst.ViewMut()
			if err := safe.Copy(res, &v, &dm); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		for i, x := range got {
			if want := data[c.start*cols+i]; x != want {
				t.Fatalf("%s: element %d is %v, want %v", c.name, i, x, want)
			}
		}
	}

	// A strided matrix (every other row of a 7×6 buffer, 3 columns) keeps
	// its row stride.
	wide := make([]float32, rows*6)
	for i := range wide {
		wide[i] = float32(i)
	}
	sv, err := dlpack.FromRawParts(unsafe.Pointer(&wide[0]), dlpack.Device{Type: dlpack.CPU}, []int64{rows, 3}, []int64{6, 1}, dlpack.Float32)
	if err != nil {
		t.Fatal(err)
	}
	v, err := safe.SliceRows(res, sv, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if v.Stride(0) != 6 || v.Dim(0) != 3 {
		t.Fatalf("strided slice: shape %v strides %v", v.Shape(), v.Strides())
	}
	got := make([]float32, 9)
	dst, _ := dlpack.NewHostMatrix(got, 3, 3)
	dm, _ := dst.ViewMut()
	if err := safe.Copy(res, &v, &dm); err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		for c := range 3 {
			if want := wide[(1+r)*6+c]; got[r*3+c] != want {
				t.Fatalf("strided slice [%d,%d] = %v, want %v", r, c, got[r*3+c], want)
			}
		}
	}

	// A vector.
	vec := dlpack.NewHostVector(data)
	vv, err := safe.SliceRows(res, vec, 4, 9)
	if err != nil || vv.NDim() != 1 || vv.Dim(0) != 5 {
		t.Fatalf("vector slice: %v %v", vv.Shape(), err)
	}

	// The slice shares the device matrix's borrow state: it expires when
	// the matrix is closed.
	dv, err := safe.SliceRows(res, dev, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if dv.Owner() == nil || dv.Owner() != dev.Owner() {
		t.Errorf("the slice is not tied to the matrix's owner")
	}

	for _, bad := range [][2]int{{-1, 2}, {3, 2}, {0, rows + 1}, {rows, rows + 1}} {
		if _, err := safe.SliceRows(res, host, bad[0], bad[1]); !errors.Is(err, safe.ErrInvalidArgument) {
			t.Errorf("rows [%d, %d) of %d: %v, want an ArgError", bad[0], bad[1], rows, err)
		}
	}
	if _, err := safe.SliceRows(res, nil, 0, 1); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil src: %v", err)
	}
	if _, err := safe.SliceRows(nil, host, 0, 1); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil res: %v", err)
	}
	cb := make([]float32, 8)
	cube, _ := dlpack.FromRawParts(unsafe.Pointer(&cb[0]), dlpack.Device{Type: dlpack.CPU}, []int64{2, 2, 2}, nil, dlpack.Float32)
	if _, err := safe.SliceRows(res, cube, 0, 1); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("rank 3: %v", err)
	}
}
