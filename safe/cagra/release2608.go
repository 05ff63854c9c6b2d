package cagra

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
	"github.com/cuvs-go/cuvs/safe/internal/release"
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
	if s.ds != 0 {
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
	if p.Ref().BuildAlgo == generated.CuvsCagraGraphBuildAlgo_ACE {
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
	slot, err := deviceDataset(op, res, v, idx.c.Life.Label(), own, func(h generated.CuvsResources_t, ds generated.CuvsDataset_t) error {
		return generated.CuvsCagraBuild_v2608(h, p, ds, idx.c.H)
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
	if err := generated.CuvsCagraIndexGetDataset(idx.c.H, mt); err != nil {
		return false, kit.Wrap(op, err)
	}
	im, err := dlpack.Import(mt)
	if err != nil {
		return false, kit.Wrap(op, err)
	}
	old, err := im.View()
	if err == nil {
		old, err = logicalRows(op, old, idx.c.Dim) // [rows, row width]: the padding is not copied
	}
	if err != nil {
		im.Close()
		return false, kit.Wrap(op, err)
	}
	nOld, nNew := old.Dim(0), av.Dim(0)
	m, free, err := deviceRows(res, idx.dtype, nOld+nNew, idx.c.Dim)
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
	slot, err := deviceDataset(op, res, &whole, idx.c.Life.Label(), free, func(h generated.CuvsResources_t, ds generated.CuvsDataset_t) error {
		err := generated.CuvsCagraExtend_v2608(h, cp, ds, nOld, idx.c.H)
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
		return generated.CuvsCagraIndexFromArgs(h, kit.CMetric(metric), t[0], t[1], idx.c.H)
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
	slot, err := deviceDataset(op, res, &again, idx.c.Life.Label(), own, func(h generated.CuvsResources_t, ds generated.CuvsDataset_t) error {
		return generated.CuvsCagraUpdateDataset(h, ds, idx.c.H)
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
		if err := generated.CuvsCagraBuild_v2608(h, p, host, idx.c.H); err != nil {
			return err
		}
		if g, err := idx.graphRows(op); err != nil || g == 0 {
			// ACE's disk mode (asked for, or chosen for lack of memory)
			// leaves the graph in build_dir: cagra::attach_dataset would
			// copy only the in-memory graph (none) into the device index
			// and refuse the rows ("Padded dataset row count must match
			// the index size", cpp/include/cuvs/neighbors/cagra.hpp
			// convert_standard_to_padded_index). Such an index is not
			// searchable anyway: keep it as ACE left it, for hnsw.FromCagra.
			return err
		}
		if err := generated.CuvsDatasetMakePadded(h, t[0], generated.CuvsDatasetMemType_t_CUVS_DATASET_MEM_TYPE_DEVICE, &dev); err != nil {
			return err
		}
		return generated.CuvsCagraUpdateDataset(h, dev, idx.c.H)
	})
	idx.ds.replace(dsSlot{ds: dev})
	if host != 0 {
		if err != nil {
			// The index may reference the host view's rows: destroy it
			// with the index.
			idx.c.Life.Own(func() error { return generated.CuvsDatasetDestroy(host) })
		} else {
			_ = generated.CuvsDatasetDestroy(host)
		}
	}
	return err
}

// UpdateDataset binds the index to dataset (rows × dim of the index's
// element type and dimension, Rows() rows, host or device memory) in place
// of the rows it referenced: cuVS 26.08's cuvsCagraUpdateDataset, which
// attaches a device-padded dataset. Rows already padded in device memory
// are referenced (a view: the index borrows them until Close or the next
// UpdateDataset or Extend, as Build does); others are copied into a padded
// device dataset the index owns (cuvsDatasetMakePadded). The graph is kept:
// row i of dataset must be the vector of the graph's row i. It makes an
// index deserialized without its dataset searchable. Like Extend, it
// needs the index alone and waits its turn, and the Dataset and Graph
// views expire. A copy counts in safe.DeviceMemory.InUse with the index.
// On cuVS 26.06 it returns an error wrapping safe.ErrNotInRelease, before
// any other work.
//
// C calls: cuvsDatasetMakePaddedView or cuvsDatasetMakePadded,
// cuvsCagraUpdateDataset, cuvsStreamSync, cuvsDatasetDestroy (of the
// dataset it replaces).
func (idx *Index) UpdateDataset(res *safe.Resources, dataset dlpack.Tensor) error {
	const op = "cagra.Index.UpdateDataset"
	if err := kit.InRelease(op, "cuvsCagraUpdateDataset"); err != nil {
		return err
	}
	if _, err := kind.Of(idx, op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	if err := kit.CheckIndexDevice(res, op, idx.c.Dev); err != nil {
		return err
	}
	if err := idx.refuseOnDisk(op); err != nil {
		return err
	}
	dv, err := datasetRule.Take(op, res, dataset)
	if err != nil {
		return err
	}
	if dv.DType() != idx.dtype || (idx.c.Dim != 0 && dv.Dim(1) != idx.c.Dim) {
		return kit.Argf(op, "dataset", "%s × %d columns, the index holds %s × %d", dv.DType(), dv.Dim(1), idx.dtype, idx.c.Dim)
	}
	if rows := idx.c.Rows.Load(); dv.Dim(0) != rows {
		// cuVS does not check: its graph would refer to rows that are not there.
		return kit.Argf(op, "dataset", "%d rows, the index's graph has %d", dv.Dim(0), rows)
	}
	return idx.c.Life.Exclusive(op, func() error {
		if err := idx.c.Life.Keep(res, op); err != nil {
			return err
		}
		idx.exact.release() // it reads the old rows
		v, own := &dv, (func() error)(nil)
		if !deviceMemory(dv.Device().Type) {
			up, free, err := kit.Upload(op, "dataset", res, &dv)
			if err != nil {
				return err
			}
			v, own = &up, free
		}
		slot, err := deviceDataset(op, res, v, idx.c.Life.Label(), own, func(h generated.CuvsResources_t, ds generated.CuvsDataset_t) error {
			return generated.CuvsCagraUpdateDataset(h, ds, idx.c.H)
		})
		if err != nil {
			slot.release()
			return err
		}
		idx.ds.replace(slot)
		idx.noDataset = false
		// cuvsDatasetMakePadded's copy is the index's; a view's rows are
		// their matrix's (ours after an upload: counted as a matrix).
		idx.ownsRows.Store(!padded(v))
		if idx.c.Dim == 0 {
			// A graph-only index that reported no dimension: the rows'
			// is its own now. (Otherwise nothing changes: the shape was
			// checked, and Dim may be read concurrently.)
			idx.c.Dim = dv.Dim(1)
		}
		kind.Recount(idx, op, res) // its rows' dimension known
		return nil
	})
}

var (
	partitionIDsRule = kit.Rule{Arg: "partitionIDs", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Uint32}, Rank: 2, RowMajor: true}
)

// SearchMultiPartition searches several indexes (partitions of one
// collection, of the same element type and dimension) at once and returns
// the k best of all for each query: cuVS 26.08's
// cuvsCagraSearchMultiPartition. queries is n × Dim(); neighbors (uint32 or
// int64), distances (float32) and partitionIDs (uint32) are n × k, all in
// device memory: neighbors[i][j] is a row of partitions[partitionIDs[i][j]].
// filters, if not nil, has one entry per partition: nil (no filter) or a
// bitset over that partition's Rows() rows. The results are ready once
// res's stream is synchronized (res.Sync); slots left unfilled hold
// SentinelID. With at most 32 partitions it allocates nothing on the Go
// heap. On cuVS 26.06 it returns an error wrapping
// safe.ErrNotInRelease, before any other work. As cuVS refuses them, the
// partitions must share one metric and one graph degree (Build lowers the
// degree of an index over few rows: build small partitions with the same
// GraphDegree, at most rows-1), and params.Algo MultiKernel is refused.
//
// C call: cuvsCagraSearchMultiPartition.
func SearchMultiPartition(res *safe.Resources, params *SearchParams, partitions []*Index, queries dlpack.Tensor, partitionIDs, neighbors, distances dlpack.TensorMut, filters []*safe.Filter) error {
	const op = "cagra.SearchMultiPartition"
	if !release.Has(release.CagraDataset) { // kit.InRelease allocates: only for the refusal
		if err := kit.InRelease(op, "cuvsCagraSearchMultiPartition"); err != nil {
			return err
		}
	}
	if len(partitions) == 0 {
		return kit.Argf(op, "partitions", "none")
	}
	if filters != nil && len(filters) != len(partitions) {
		return kit.Argf(op, "filters", "%d filters for %d partitions", len(filters), len(partitions))
	}
	if params == nil {
		params = &zeroSearchParams
	}
	sp, err := params.withDefaults(op)
	if err != nil {
		return err
	}
	if err := sp.validate(op); err != nil {
		return err
	}
	if sp.Algo == MultiKernel {
		// cagra_search.cuh, search_multi_partition (26.08).
		return kit.Argf(op, "params.Algo", "MultiKernel: cuVS: MULTI_KERNEL is not supported for multi-partition search")
	}
	var hsArr [32]generated.CuvsCagraIndex_t
	var fsArr [32]generated.CuvsFilter
	hs, fs := hsArr[:0], fsArr[:0]
	var total int64
	first := partitions[0]
	entered := 0
	defer func() {
		for _, x := range partitions[:entered] {
			x.c.Life.Leave()
		}
	}()
	for i, x := range partitions {
		if x == nil {
			return kit.Argf(op, "partitions", "entry %d is nil", i)
		}
		if err := x.c.Life.Enter(op); err != nil {
			return err
		}
		entered++
		if err := kit.CheckIndexDevice(res, op, x.c.Dev); err != nil {
			return err
		}
		if err := x.refuseOnDisk(op); err != nil {
			return err
		}
		if err := x.refuseGraphOnly(op); err != nil {
			return err
		}
		if x.dtype != first.dtype || x.c.Dim != first.c.Dim {
			return kit.Argf(op, "partitions", "entry %d holds %s × %d, entry 0 %s × %d", i, x.dtype, x.c.Dim, first.dtype, first.c.Dim)
		}
		// cuVS sizes the search by partition 0 and refuses the others'
		// differences (search_multi_partition); partitions over few rows
		// may have been built with a lowered degree (Build).
		if x.metricKnown && first.metricKnown && x.metric != first.metric {
			return kit.Argf(op, "partitions", "entry %d uses %s, entry 0 %s: cuVS: All partitions must use the same distance metric for multi-partition search", i, x.metric, first.metric)
		}
		if d, d0 := x.degree.Load(), first.degree.Load(); d != d0 {
			return kit.Argf(op, "partitions", "entry %d has graph degree %d, entry 0 %d: cuVS: All partitions must use the same graph degree for multi-partition search", i, d, d0)
		}
		hs = append(hs, x.c.H)
		total += x.c.Rows.Load()
	}
	c := dlpack.Begin(op)
	defer c.End()
	var t kit.SearchTensors
	if err := searchRules.BindOn(op, res, c, queries, neighbors, distances, first.dtype, first.c.Dim, total, &t); err != nil {
		return err
	}
	if partitionIDs == nil {
		return kit.Argf(op, "partitionIDs", "nil tensor")
	}
	pm, err := partitionIDs.ViewMut()
	if err != nil {
		return kit.Argf(op, "partitionIDs", "%w", err)
	}
	if err := partitionIDsRule.CheckMut(op, &pm); err != nil {
		return err
	}
	if pm.Dim(0) != t.N || pm.Dim(1) != t.K {
		return kit.Argf(op, "partitionIDs", "shape %v, want [%d %d]", pm.Shape(), t.N, t.K)
	}
	pt, err := c.Out(&pm)
	if err != nil {
		return kit.Argf(op, "partitionIDs", "%w", err)
	}
	anyFilter := false
	for i, x := range partitions {
		var f *safe.Filter
		if filters != nil {
			f = filters[i]
		}
		cf, err := kit.BindFilter(f, op, c, x.c.Rows.Load(), t.N, safe.Bitset)
		if err != nil {
			return fmt.Errorf("filters[%d]: %w", i, err)
		}
		anyFilter = anyFilter || f != nil
		fs = append(fs, cf)
	}
	if err := sp.checkFiltered(op, anyFilter, t.K); err != nil {
		return err
	}
	var fp *generated.CuvsFilter
	if filters != nil {
		fp = &fs[0]
	}
	cp := sp.cValue()
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = generated.CuvsCagraSearchMultiPartition(h, kit.Params[generated.CuvsCagraSearchParams_t](res, &cp), uint32(len(hs)), &hs[0], t.Queries, pt, t.Neighbors, t.Distances, fp)
	kit.Unlock(res)
	return kit.Wrap(op, err)
}
