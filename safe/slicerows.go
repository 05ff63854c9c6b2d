package safe

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
)

// SliceRows returns the view of rows [start, end) of src (rank 1 or 2, any
// memory, any row stride) that cuVS's cuvsMatrixSliceRows computes: same
// dtype, device, columns and strides, its data start rows in. It shares
// src's memory and borrow state (the view is tied to src's owner, so it
// expires when src's does) and copies nothing.
//
// cuVS checks only that end >= start: rows past src's end give a view
// outside the matrix. SliceRows refuses any range not within [0, rows]
// before the call. The C function writes the view's shape (and strides)
// into memory it allocates, freed here by the deleter it installs
// (cuvsMatrixDestroy).
//
// C calls: cuvsMatrixSliceRows, cuvsMatrixDestroy (as the view's deleter).
func SliceRows(res *Resources, src dlpack.Tensor, start, end int) (dlpack.View, error) {
	const op = "safe.SliceRows"
	if src == nil {
		return dlpack.View{}, argf(op, "src", "nil Tensor")
	}
	v, err := src.View()
	if err != nil {
		return dlpack.View{}, argf(op, "src", "%w", err)
	}
	if v.NDim() < 1 || v.NDim() > 2 {
		return dlpack.View{}, argf(op, "src", "rank %d, want 1 or 2", v.NDim())
	}
	if start < 0 || end < start || int64(end) > v.Dim(0) {
		return dlpack.View{}, argf(op, "rows", "[%d, %d) is not within [0, %d) (cuVS would return a view outside the matrix)", start, end, v.Dim(0))
	}
	base, err := v.Data()
	if err != nil {
		return dlpack.View{}, argf(op, "src", "%w", err)
	}
	h, err := res.lock(op)
	if err != nil {
		return dlpack.View{}, err
	}
	defer res.unlock()
	var zero generated.DLManagedTensor
	mt := (*generated.DLManagedTensor)(C.calloc(1, C.size_t(unsafe.Sizeof(zero))))
	if mt == nil {
		return dlpack.View{}, fmt.Errorf("%s: %w (C memory for the view)", op, ErrOutOfMemory)
	}
	defer C.free(unsafe.Pointer(mt))
	c := dlpack.Begin(op)
	s, err := c.In(&v)
	if err != nil {
		c.End()
		return dlpack.View{}, argf(op, "src", "%w", err)
	}
	err = generated.CuvsMatrixSliceRows(h, s, int64(start), int64(end), mt)
	// Where cuVS put the view, as an offset from src's data (the bound
	// tensor's data is src's): the view is rebuilt on src's own pointer.
	off := int64(uintptr(mt.DlTensor.Data) - uintptr(s.DlTensor.Data))
	c.End()
	if err != nil {
		return dlpack.View{}, wrap(op, err)
	}
	im, err := dlpack.Import(mt)
	if err != nil {
		return dlpack.View{}, wrap(op, err)
	}
	defer func() { _ = im.Close() }() // cuvsMatrixDestroy: the shape and strides cuVS allocated
	got, err := im.View()
	if err != nil {
		return dlpack.View{}, wrap(op, err)
	}
	var want int64
	if start > 0 {
		want = int64(start) * v.Stride(0) * v.DType().ElemSize()
	}
	if off != want || got.Dim(0) != int64(end-start) || got.DType() != v.DType() || got.NDim() != v.NDim() {
		return dlpack.View{}, fmt.Errorf("%s: cuvsMatrixSliceRows returned %s at byte %d, want %d rows at byte %d", op, got.String(), off, end-start, want)
	}
	var strides []int64
	if got.NDim() == 2 {
		strides = got.Strides()
	}
	out, err := dlpack.FromRawParts(unsafe.Add(base, off), v.Device(), got.Shape(), strides, v.DType())
	if err != nil {
		return dlpack.View{}, wrap(op, err)
	}
	return out.WithOwner(v.Owner()), nil
}
