package cagra

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
	"github.com/x448/float16"
)

// On cuVS 26.08 an index never owns its rows: cuvsCagraBuild, Extend,
// Merge, UpdateDataset and DeserializeGraphAndDataset bind it to a
// cuvsDataset_t (c/src/neighbors/cagra.cpp: the index stores a non-owning
// view of the dataset's rows), which the caller must keep alive while the
// index uses it and destroy afterwards with cuvsDatasetDestroy. dsSlot is
// that dataset, kept by the Index and destroyed after cuvsCagraIndexDestroy
// (kit.Life.Own), with what lies under it when it is a view.
type dsSlot struct {
	ds     generated.CuvsDataset_t // C memory: an owner (cuvsDatasetMakePadded, Merge, Deserialize) or a view
	borrow *dlpack.Retention       // the caller's rows under a view (Build, UpdateDataset)
	mem    func() error            // device memory of ours under a view (Extend's concatenation)
}

func (s *dsSlot) release() {
	if s.ds != nil {
		_ = generated.CuvsDatasetDestroy(s.ds)
	}
	if s.borrow != nil {
		s.borrow.End()
	}
	if s.mem != nil {
		_ = s.mem()
	}
	*s = dsSlot{}
}

// replace binds the slot to n, releasing what it held: for a call after
// which the index references n's rows only.
func (s *dsSlot) replace(n dsSlot) {
	old := *s
	*s = n
	old.release()
}

// deviceMemory reports memory cuVS's is_dlpack_device_compatible accepts
// (device or managed; pinned host memory is host memory to it).
func deviceMemory(t dlpack.DeviceType) bool { return t == dlpack.CUDA || t == dlpack.CUDAManaged }

// padded reports whether v's rows already have cuVS's padded stride: C
// contiguous rows whose width in bytes is a multiple of 16
// (make_device_padded_dataset_view refuses others).
func padded(v *dlpack.View) bool {
	return v.Layout().IsContiguous() && (v.Dim(1)*v.DType().ElemSize())%16 == 0
}

// deviceRows allocates a contiguous rows × dim device matrix of dt.
func deviceRows(res *safe.Resources, dt dlpack.DataType, rows, dim int64) (*dlpack.ViewMut, func() error, error) {
	switch dt {
	case dlpack.Float32:
		return newRows[float32](res, rows, dim)
	case dlpack.Float16:
		return newRows[float16.Float16](res, rows, dim)
	case dlpack.Int8:
		return newRows[int8](res, rows, dim)
	default:
		return newRows[uint8](res, rows, dim)
	}
}

func newRows[T dlpack.DType](res *safe.Resources, rows, dim int64) (*dlpack.ViewMut, func() error, error) {
	m, err := safe.NewDeviceMatrix[T](res, int(rows), int(dim))
	if err != nil {
		return nil, nil, err
	}
	v, err := m.ViewMut()
	if err != nil {
		_ = m.Close()
		return nil, nil, err
	}
	return &v, m.Close, nil
}

// rowsOf is rows [start, start+n) of m, a contiguous matrix.
func rowsOf(m *dlpack.ViewMut, start, n int64) (dlpack.ViewMut, error) {
	p, err := m.Data()
	if err != nil {
		return dlpack.ViewMut{}, err
	}
	p = unsafe.Add(p, start*m.Dim(1)*m.DType().ElemSize())
	return dlpack.FromRawPartsMut(p, m.Device(), []int64{n, m.Dim(1)}, nil, m.DType())
}

// asView is the read-only view of m.
func asView(m *dlpack.ViewMut) (dlpack.View, error) {
	p, err := m.Data()
	if err != nil {
		return dlpack.View{}, err
	}
	return dlpack.FromRawParts(p, m.Device(), m.Shape(), nil, m.DType())
}

// deviceDataset wraps v (rows × dim) in a device-padded cuvsDataset_t for
// the 26.08 calls: a view of v's rows (cuvsDatasetMakePaddedView) when
// they are in device memory with the padded stride, the index then
// borrowing them (or owning them through own, memory of ours); otherwise
// a padded copy in device memory that the dataset owns
// (cuvsDatasetMakePadded), after which own is freed. call runs with the
// dataset on the locked resources; the stream is synchronized after it.
func deviceDataset(op string, res *safe.Resources, v *dlpack.View, label string, own func() error, call func(h generated.CuvsResources_t, ds generated.CuvsDataset_t) error) (dsSlot, error) {
	var slot dsSlot
	view := deviceMemory(v.Device().Type) && padded(v)
	if view && own == nil {
		r, err := v.Retain(label)
		if err != nil {
			return slot, kit.Argf(op, "dataset", "%w", err)
		}
		slot.borrow = r
	}
	if view {
		slot.mem = own
	}
	var ds generated.CuvsDataset_t
	err := kit.CallWith(op, res, []*dlpack.View{v}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		var err error
		if view {
			err = generated.CuvsDatasetMakePaddedView(h, t[0], &ds)
		} else {
			err = generated.CuvsDatasetMakePadded(h, t[0], generated.CuvsDatasetMemType_t_CUVS_DATASET_MEM_TYPE_DEVICE, &ds)
		}
		if err != nil {
			return err
		}
		return call(h, ds)
	})
	slot.ds = ds
	if !view && own != nil {
		_ = own() // the owner holds a copy (the stream was synchronized)
	}
	return slot, err
}

// build2608 is Build on cuVS 26.08 (cuvsCagraBuild_v2608, on a Dataset).
func (idx *Index) build2608(op string, res *safe.Resources, dv *dlpack.View, p generated.CuvsCagraIndexParams_t_v2608) error {
	if p.BuildAlgo == generated.CuvsCagraGraphBuildAlgo_ACE {
		return idx.ace2608(op, res, dv, p)
	}
	own := (func() error)(nil)
	v := dv
	if deviceMemory(dv.Device().Type) && !dv.Layout().IsContiguous() {
		// Strided device rows: cuVS's dataset factories take C-contiguous
		// sources only; go through a contiguous copy of ours.
		m, free, err := deviceRows(res, dv.DType(), dv.Dim(0), dv.Dim(1))
		if err != nil {
			return kit.Wrap(op, err)
		}
		if err := safe.Copy(res, dv, m); err != nil {
			_ = free()
			return kit.Wrap(op, err)
		}
		cv, err := asView(m)
		if err != nil {
			_ = free()
			return kit.Wrap(op, err)
		}
		v, own = &cv, free
	}
	slot, err := deviceDataset(op, res, v, idx.life.Label(), own, func(h generated.CuvsResources_t, ds generated.CuvsDataset_t) error {
		return generated.CuvsCagraBuild_v2608(h, p, ds, idx.h)
	})
	idx.ds.replace(slot)
	return err
}

// extend2608 is Extend on cuVS 26.08: cuvsCagraExtend_v2608 takes the old
// rows and the new ones concatenated in one device-padded dataset, and
// rebinds the index to it. Go builds it: a device matrix of Rows() +
// added rows (the index's rows copied from its dataset view, then the new
// ones), wrapped as a padded view when the rows are 16-byte multiples, or
// copied once more into a padded dataset otherwise; the dataset the index
// referenced before is destroyed after a successful extend.
func (idx *Index) extend2608(op string, res *safe.Resources, cp generated.CuvsCagraExtendParams_t, av *dlpack.View) (bool, error) {
	mt := cDLManaged()
	defer cFree(unsafe.Pointer(mt))
	if err := generated.CuvsCagraIndexGetDataset(idx.h, mt); err != nil {
		return false, kit.Wrap(op, err)
	}
	im, err := dlpack.Import(mt)
	if err != nil {
		return false, kit.Wrap(op, err)
	}
	old, err := im.View()
	if err != nil {
		im.Close()
		return false, kit.Wrap(op, err)
	}
	nOld, nNew := old.Dim(0), av.Dim(0)
	m, free, err := deviceRows(res, idx.dtype, nOld+nNew, idx.dim)
	if err != nil {
		im.Close()
		return false, kit.Wrap(op, err)
	}
	top, err := rowsOf(m, 0, nOld)
	if err == nil {
		err = safe.Copy(res, &old, &top)
	}
	var bottom dlpack.ViewMut
	if err == nil {
		bottom, err = rowsOf(m, nOld, nNew)
	}
	if err == nil {
		err = safe.Copy(res, av, &bottom)
	}
	var whole dlpack.View
	if err == nil {
		whole, err = asView(m)
	}
	if err != nil {
		im.Close()
		_ = free()
		return false, kit.Wrap(op, err)
	}
	extended := false
	slot, err := deviceDataset(op, res, &whole, idx.life.Label(), free, func(h generated.CuvsResources_t, ds generated.CuvsDataset_t) error {
		err := generated.CuvsCagraExtend_v2608(h, cp, ds, nOld, idx.h)
		extended = err == nil
		return err
	})
	im.Close()
	if extended {
		idx.ds.replace(slot)
	} else {
		slot.release()
	}
	return extended, err
}

// fileHasDataset reports whether a CAGRA file of cuVS 26.08 (or of its test
// double) holds its dataset: cuVS 26.08's serializer writes, after the
// 4-byte dtype tag, the scalars version (6), serialized_dataset_kind (0:
// none), rows, dim, graph degree, metric; the double's format has its
// dataset kind at byte 40. ok is false for a file of neither.
func fileHasDataset(path string) (has, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return false, false
	}
	defer f.Close()
	r := bufio.NewReader(f)
	head, _ := r.Peek(44)
	if len(head) == 44 && bytes.Equal(head[:8], []byte("CVDBLCG6")) {
		return binary.LittleEndian.Uint32(head[40:]) != 0, true
	}
	var tag [4]byte
	if _, err := io.ReadFull(r, tag[:]); err != nil {
		return false, false
	}
	v, err := npy.ReadScalar(r)
	if err != nil || v.Int < 6 {
		return false, false
	}
	k, err := npy.ReadScalar(r)
	if err != nil {
		return false, false
	}
	return k.Int != 0, true
}

// fromArgs2608 is IndexFromArgs on cuVS 26.08 (see IndexFromArgs).
func (idx *Index) fromArgs2608(op string, res *safe.Resources, metric safe.Metric, gv, dv *dlpack.View) error {
	again := *dv // a view bound to a call expires with it: one for each call
	v, own := dv, (func() error)(nil)
	if !deviceMemory(dv.Device().Type) {
		up, free, err := kit.Upload(op, "dataset", res, dv)
		if err != nil {
			return err
		}
		v, own = &up, free
		again = up
	}
	if err := kit.CallWith(op, res, []*dlpack.View{gv, v}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsCagraIndexFromArgs(h, kit.CMetric(metric), t[0], t[1], idx.h)
	}); err != nil {
		if own != nil {
			_ = own()
		}
		return err
	}
	if padded(v) {
		idx.ds.replace(dsSlot{mem: own}) // the index references v's rows
		return nil
	}
	slot, err := deviceDataset(op, res, &again, idx.life.Label(), own, func(h generated.CuvsResources_t, ds generated.CuvsDataset_t) error {
		return generated.CuvsCagraUpdateDataset(h, ds, idx.h)
	})
	idx.ds.replace(slot)
	return err
}

// ace2608 is an ACE build on cuVS 26.08: ACE reads host rows, and a host
// dataset gives a host-backed index that search refuses, so the build
// runs on a standard view of the host rows (cuvsDatasetMakeStandardView),
// then a padded device copy (cuvsDatasetMakePadded) is attached with
// cuvsCagraUpdateDataset and the host view destroyed.
func (idx *Index) ace2608(op string, res *safe.Resources, dv *dlpack.View, p generated.CuvsCagraIndexParams_t_v2608) error {
	var host, dev generated.CuvsDataset_t
	err := kit.CallWith(op, res, []*dlpack.View{dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		if err := generated.CuvsDatasetMakeStandardView(h, t[0], &host); err != nil {
			return err
		}
		if err := generated.CuvsCagraBuild_v2608(h, p, host, idx.h); err != nil {
			return err
		}
		if err := generated.CuvsDatasetMakePadded(h, t[0], generated.CuvsDatasetMemType_t_CUVS_DATASET_MEM_TYPE_DEVICE, &dev); err != nil {
			return err
		}
		return generated.CuvsCagraUpdateDataset(h, dev, idx.h)
	})
	idx.ds.replace(dsSlot{ds: dev})
	if host != nil {
		if err != nil {
			// The index may reference the host view's rows: destroy it
			// with the index.
			idx.life.Own(func() error { return generated.CuvsDatasetDestroy(host) })
		} else {
			_ = generated.CuvsDatasetDestroy(host)
		}
	}
	return err
}
