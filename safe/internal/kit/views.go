package kit

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
)

// Views are the views cuVS hands out into an index's own memory
// (cuvsCagraIndexGetDataset, cuvsIvfPqIndexGetCenters, ...): each is a
// DLManagedTensor of our C memory that cuVS fills in (shape and strides it
// allocates, with a deleter that frees only those), imported as a view. They
// expire together, when the index is closed or changed. The index keeps
// them under its own lock.
type Views struct{ list []importedView }

type importedView struct {
	im *dlpack.Imported
	mt *generated.DLManagedTensor // C memory, ours
}

// Import has fill write a view into a DLManagedTensor of C memory and
// returns it, imported, labelled op; it expires with Expire.
func (vs *Views) Import(op string, fill func(*generated.DLManagedTensor) error) (dlpack.View, error) {
	var zero generated.DLManagedTensor
	mt := (*generated.DLManagedTensor)(C.calloc(1, C.size_t(unsafe.Sizeof(zero))))
	if mt == nil {
		return dlpack.View{}, fmt.Errorf("%s: out of C memory", op)
	}
	if err := fill(mt); err != nil {
		C.free(unsafe.Pointer(mt))
		return dlpack.View{}, Wrap(op, err)
	}
	im, err := dlpack.Import(mt)
	if err != nil {
		C.free(unsafe.Pointer(mt))
		return dlpack.View{}, fmt.Errorf("%s: %w", op, err)
	}
	im.Owner().SetLabel(op)
	v, err := im.View()
	if err != nil {
		im.Close()
		C.free(unsafe.Pointer(mt))
		return dlpack.View{}, fmt.Errorf("%s: %w", op, err)
	}
	vs.list = append(vs.list, importedView{im, mt})
	return v, nil
}

// Expire closes every view (calling cuVS's deleter; the struct is ours);
// it refuses, keeping the rest, while one is borrowed by a call or
// retained.
func (vs *Views) Expire(op string) error {
	for i, iv := range vs.list {
		if err := iv.im.Close(); err != nil {
			vs.list = vs.list[i:]
			return fmt.Errorf("%s: a view of the index is in use: %w", op, err)
		}
		C.free(unsafe.Pointer(iv.mt))
	}
	vs.list = nil
	return nil
}

// CopyOut has get write a view of the index's memory into a
// DLManagedTensor of C memory, copies the view into dst (safe.Copy: any
// memory, the last dimension contiguous) and ends the view with its
// deleter: for getters that hand out a view (cuvsIvfFlatIndexGetCenters,
// cuvsIvfSqIndexGetCenters, cuvsIvfPqIndexGetCenters all call to_dlpack on
// the index's own array, a view, whatever their headers say), so the
// caller gets a copy that no Extend or Close can invalidate.
func CopyOut(op string, res *safe.Resources, dst *dlpack.ViewMut, get func(*generated.DLManagedTensor) error) error {
	var zero generated.DLManagedTensor
	mt := (*generated.DLManagedTensor)(C.calloc(1, C.size_t(unsafe.Sizeof(zero))))
	if mt == nil {
		return fmt.Errorf("%s: %w", op, safe.ErrOutOfMemory)
	}
	defer C.free(unsafe.Pointer(mt))
	if err := get(mt); err != nil {
		return Wrap(op, err)
	}
	im, err := dlpack.Import(mt)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	im.Owner().SetLabel(op)
	v, err := im.View()
	if err == nil {
		err = safe.Copy(res, &v, dst)
	}
	if cerr := im.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("%s: %w", op, cerr)
	}
	return err
}
