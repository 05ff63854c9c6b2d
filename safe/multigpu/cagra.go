package multigpu

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/mgparams"
)

// CagraIndex is a multi-GPU CAGRA index (cuvsMultiGpuCagraIndex):
// one single-GPU CAGRA index per device of the Resources it was made
// with. Searches may run from several goroutines (calls on one Resources
// are serialized); Extend needs it alone and waits its turn; Close waits
// for both.
type CagraIndex struct {
	core
	h generated.CuvsMultiGpuCagraIndex_t
}

var liveCagra = live.New("multigpu.CagraIndex")

func newCagra(op string) (*CagraIndex, error) {
	var h generated.CuvsMultiGpuCagraIndex_t
	if err := generated.CuvsMultiGpuCagraIndexCreate(&h); err != nil {
		return nil, kit.Wrap(op, err)
	}
	idx := &CagraIndex{h: h}
	idx.rows.Store(-1)
	kit.Start(&idx.life, idx, "multigpu.CagraIndex(%p)", liveCagra, func() error { return generated.CuvsMultiGpuCagraIndexDestroy(h) })
	return idx, nil
}

// BuildCagra builds a CAGRA index over res's devices from dataset (rows
// × dim, float32, float16, int8 or uint8, row-major, host memory: the C
// API refuses device memory), replicated or sharded (params.Mode; nil
// params: sharded, cuVS's CAGRA defaults). Sharded, each device builds a
// graph on its ⌈rows/R⌉ rows (at least two), its degrees lowered to fit
// them as cagra.Build's are (cagra.IndexParams.Degrees); an IterativeSearch
// build over too few rows is refused as cagra.Build refuses it. cuVS
// copies the rows to each device; nothing is
// borrowed. The base params are converted by package cagra as for
// cagra.Build (release by release).
//
// C calls: cuvsMultiGpuCagraIndexCreate, cuvsMultiGpuCagraIndexParamsCreate
// (which calls cuvsCagraIndexParamsCreate), cuvsCagraIndexParamsCreate and
// what cagra.Build calls to fill its params, cuvsMultiGpuCagraBuild,
// cuvsMultiGpuCagraIndexParamsDestroy, cuvsCagraIndexParamsDestroy.
func BuildCagra(res *Resources, dataset dlpack.Tensor, params *CagraIndexParams) (*CagraIndex, error) {
	const op = "multigpu.BuildCagra"
	var p CagraIndexParams
	if params != nil {
		p = *params
	}
	var (
		c06     generated.CuvsCagraIndexParams_t
		c08     generated.CuvsCagraIndexParams_t_v2608
		release = func() {}
	)
	defer func() { release() }()
	idx, err := newCagra(op)
	if err != nil {
		return nil, err
	}
	err = idx.build(op, res, p.Mode, dataset, func(minRows, dim int64) error {
		var err error
		// cuVS builds each device's graph with its degrees lowered to
		// that device's rows, as cagra.Build's; the hook refuses only what
		// cuVS cannot build (fewer than two rows, IterativeSearch over too
		// few).
		c06, c08, release, err = mgparams.CagraIndex(p.Base, op, minRows)
		return baseArg(err)
	}, func(h generated.CuvsResources_t, t *generated.DLManagedTensor) error {
		// The multi-GPU params come with base params of cuVS's own; ours
		// (made by package cagra) stand in for the call, and theirs are
		// put back for Destroy, each freed by its maker.
		if c08 != 0 {
			var mp generated.CuvsMultiGpuCagraIndexParams_t_v2608
			if err := generated.CuvsMultiGpuCagraIndexParamsCreate_v2608(&mp); err != nil {
				return err
			}
			own := mp.Ref().BaseParams
			mp.Ref().BaseParams, mp.Ref().Mode = c08, p.Mode.c()
			err := generated.CuvsMultiGpuCagraBuild_v2608(h, mp, t, idx.h)
			mp.Ref().BaseParams = own
			if derr := generated.CuvsMultiGpuCagraIndexParamsDestroy_v2608(mp); err == nil {
				err = derr
			}
			return err
		}
		var mp generated.CuvsMultiGpuCagraIndexParams_t
		if err := generated.CuvsMultiGpuCagraIndexParamsCreate(&mp); err != nil {
			return err
		}
		own := mp.Ref().BaseParams
		mp.Ref().BaseParams, mp.Ref().Mode = c06, p.Mode.c()
		err := generated.CuvsMultiGpuCagraBuild(h, mp, t, idx.h)
		mp.Ref().BaseParams = own
		if derr := generated.CuvsMultiGpuCagraIndexParamsDestroy(mp); err == nil {
			err = derr
		}
		return err
	})
	if err != nil {
		idx.life.Fail()
		return nil, err
	}
	return idx, nil
}

// Search finds the k nearest rows of each query: queries n × Dim() of the
// index's element type, neighbors (int64) and distances (float32) n × k,
// all in host memory, as the C API wants (CPU, pinned or managed; cuVS
// copies each device's batch in and out). params nil means cuVS's
// defaults. The C API takes no filter. CAGRA's neighbors are int64 here
// (uint32 on one GPU). On a sharded index k may not exceed the rows of the
// smallest shard (see Shards): a device cannot fill more slots, and cuVS
// would add its offset to the ones it leaves. Slots cuVS could not fill are written as
// safe.SentinelID64 with distance +Inf. It returns once the results are written.
//
// C calls: cuvsMultiGpuCagraSearchParamsCreate, cuvsMultiGpuCagraSearch,
// cuvsMultiGpuCagraSearchParamsDestroy.
func (idx *CagraIndex) Search(res *Resources, params *CagraSearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error {
	const op = "multigpu.CagraIndex.Search"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	var p CagraSearchParams
	if params != nil {
		p = *params
	}
	d, err := p.Distribution.resolve(op)
	if err != nil {
		return err
	}
	base, err := mgparams.CagraSearch(p.Base, op)
	if err != nil {
		return baseArg(err)
	}
	qv, nv, dv, err := idx.searchArgs(op, d, queries, neighbors, distances)
	if err != nil {
		return err
	}
	if m := idx.minShard(); idx.mode == Sharded && m >= 0 && nv.Dim(1) > m {
		// A device's CAGRA search cannot fill more slots than it has rows,
		// and cuVS adds the device's offset to whatever it leaves there:
		// the unfilled slots could not be told apart afterwards.
		return kit.Argf(op, "neighbors", "k = %d exceeds the %d rows of the smallest shard", nv.Dim(1), m)
	}
	return idx.search(op, res, &qv, &nv, &dv, func(h generated.CuvsResources_t, q, n, dd *generated.DLManagedTensor) error {
		var sp generated.CuvsMultiGpuCagraSearchParams_t
		if err := generated.CuvsMultiGpuCagraSearchParamsCreate(&sp); err != nil {
			return err
		}
		*sp.Ref().BaseParams.Ref() = base
		sp.Ref().SearchMode, sp.Ref().MergeMode, sp.Ref().NRowsPerBatch = generated.CuvsMultiGpuReplicatedSearchMode(d.SearchMode), d.MergeMode.c(), d.RowsPerBatch
		err := generated.CuvsMultiGpuCagraSearch(h, sp, idx.h, q, n, dd)
		if derr := generated.CuvsMultiGpuCagraSearchParamsDestroy(sp); err == nil {
			err = derr
		}
		return err
	})
}

// SearchK is Search into new Go memory: the k nearest rows of each query
// (queries in host memory, e.g. a dlpack.HostMatrix), as safe.Results.
func (idx *CagraIndex) SearchK(res *Resources, params *CagraSearchParams, queries dlpack.Tensor, k int) (*safe.Results, error) {
	if idx == nil {
		return nil, kit.NilIndex("multigpu.CagraIndex.SearchK")
	}
	if err := idx.life.Built("multigpu.CagraIndex.SearchK"); err != nil { // a zero index says so, before its arguments are checked
		return nil, err
	}
	return searchK(queries, k, func(n, d dlpack.TensorMut) error { return idx.Search(res, params, queries, n, d) })
}

// Extend is refused: cuVS's multi-GPU CAGRA does not implement extend
// (26.08: iface.hpp's extend fails "CAGRA does not implement the extend
// method" for an index whose rows are of CAGRA's padded width, inside the
// per-device OpenMP loop, which aborts the process, as measured on the
// real 26.08.01; for other widths it returns success having added
// nothing). To add rows, build anew (or keep a single-GPU cagra.Index and
// use its Extend, then DistributeCagra its file). cuvsMultiGpuCagraExtend
// is never called; the arguments are not looked at.
func (idx *CagraIndex) Extend(res *Resources, vectors dlpack.Tensor, ids dlpack.Tensor) error {
	const op = "multigpu.CagraIndex.Extend"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so
		return err
	}
	return kit.Argf(op, "index", "cuVS's multi-GPU CAGRA does not implement extend (it aborts the process for rows of CAGRA's padded width and adds nothing otherwise): build anew, or extend a single-GPU cagra.Index and DistributeCagra it")
}

// Serialize writes the index to path (cuvsMultiGpuCagraSerialize): the
// element type, mode and device count, then each device's index.
func (idx *CagraIndex) Serialize(res *Resources, path string) error {
	const op = "multigpu.CagraIndex.Serialize"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	return idx.serialize(op, res, path, func(h generated.CuvsResources_t, p *byte) error {
		return generated.CuvsMultiGpuCagraSerialize(h, idx.h, p)
	})
}

// DeserializeCagra reads an index Serialize wrote onto res's devices
// (cuvsMultiGpuCagraDeserialize): res must have as many devices as the
// file (cuVS refuses otherwise). The C API has no getter: Rows, Dim and
// Shards are read from the file, whose every rank begins with cuVS's CAGRA
// header (rows, dim); they stay unknown (-1, 0, nil) for a file in no
// format Go can read, and then UpdateDataset refuses the index.
func DeserializeCagra(res *Resources, path string, opts ...safe.DeserializeOption) (*CagraIndex, error) {
	return loadCagra("multigpu.DeserializeCagra", res, path, true, opts)
}

// DistributeCagra loads a single-GPU CAGRA index file (what
// cagra.Index.Serialize writes) onto every device of res: a replicated
// index (cuvsMultiGpuCagraDistribute). Rows, Dim and Shards are read from
// the file's header, as for DeserializeCagra.
func DistributeCagra(res *Resources, path string, opts ...safe.DeserializeOption) (*CagraIndex, error) {
	return loadCagra("multigpu.DistributeCagra", res, path, false, opts)
}

func loadCagra(op string, res *Resources, path string, multi bool, opts []safe.DeserializeOption) (*CagraIndex, error) {
	var pre func(int64) error
	if !multi {
		// as cagra.Deserialize: whole .npy items after the dtype tag, to
		// the end of the data (cuVS's distribute reads what it needs and
		// takes a file with bytes after the index, measured on 26.08.01)
		pre = func(n int64) error { return kit.CheckItemsN(op, path, n, true, nil) }
	}
	idx, err := newCagra(op)
	if err != nil {
		return nil, err
	}
	if err := idx.load(op, res, path, multi, opts, pre, func(h generated.CuvsResources_t, p *byte) error {
		if multi {
			return generated.CuvsMultiGpuCagraDeserialize(h, p, idx.h)
		}
		return generated.CuvsMultiGpuCagraDistribute(h, p, idx.h)
	}, func() generated.DLDataType { return idx.h.Ref().Dtype }); err != nil {
		idx.life.Fail()
		return nil, err
	}
	idx.learnRows(path, multi, res.Ranks())
	return idx, nil
}

// learnRows sets the rows, shards and dimension of a loaded index from its
// file (readCagraRows), where the file's ranks agree with what the load
// learned; otherwise they stay unknown.
func (idx *CagraIndex) learnRows(path string, multi bool, ranks int) {
	file, dim, err := readCagraRows(path, idx.fileData, multi)
	if err != nil {
		return
	}
	var rows int64
	var shards []int64
	if multi {
		if len(file) != idx.ranks {
			return
		}
		for _, n := range file {
			switch {
			case idx.mode == Sharded:
				rows += n
			case n != file[0]: // replicated: every device holds every row
				return
			default:
				rows = n
			}
		}
		shards = file
	} else {
		rows = file[0] // Distribute copies it to every device
		for range ranks {
			shards = append(shards, rows)
		}
	}
	idx.mu.Lock()
	idx.shards = shards
	idx.mu.Unlock()
	idx.dim = dim
	idx.rows.Store(rows)
}

// Dim returns the vectors' dimension, 0 when not known.
func (idx *CagraIndex) Dim() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.dim)
}

// DType returns the vectors' element type.
func (idx *CagraIndex) DType() dlpack.DataType {
	if idx == nil || idx.life.Closed() {
		return dlpack.DataType{}
	}
	return idx.dtype
}

// Mode returns how the index is laid out.
func (idx *CagraIndex) Mode() Mode {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return idx.mode
}

// Close frees the index (cuvsMultiGpuCagraIndexDestroy). Closing twice is
// harmless; it waits for searches and an Extend in flight.
func (idx *CagraIndex) Close() error {
	if idx == nil {
		return nil
	}
	return kit.Wrap("multigpu.CagraIndex.Close", idx.life.Close("multigpu.CagraIndex.Close"))
}

var updateRule = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}

// UpdateDataset gives every device of the index new rows for its graph
// (cuVS 26.08's cuvsMultiGpuCagraUpdateDataset), which takes a padded
// device dataset: dataset (rows × Dim() of the index's element type, host
// or device memory) is copied into one (cuvsDatasetMakePadded), or, device
// memory (CUDA or managed) whose rows are already cuVS's padded width (a
// multiple of 16 bytes), which cuvsDatasetMakePadded refuses to copy, is
// passed as a view of itself (cuvsDatasetMakePaddedView). cuVS copies it
// to each device (a replicated index's devices each take rows [0, Rows());
// a sharded one's device r its shard); the index keeps no reference to
// dataset. cuVS does not check the dataset's rows against the graph's:
// here it must have exactly Rows() rows, so an index whose rows are not
// known (see DeserializeCagra) is refused. It needs the index alone. On
// 26.06 it returns an error wrapping safe.ErrNotInRelease.
//
// C calls: cuvsDatasetMakePadded or cuvsDatasetMakePaddedView,
// cuvsMultiGpuCagraUpdateDataset, cuvsDatasetDestroy.
func (idx *CagraIndex) UpdateDataset(res *Resources, dataset dlpack.Tensor) error {
	const op = "multigpu.CagraIndex.UpdateDataset"
	if err := kit.InRelease(op, "cuvsMultiGpuCagraUpdateDataset"); err != nil {
		return err
	}
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	if dataset == nil {
		return kit.Argf(op, "dataset", "nil")
	}
	dv, err := dataset.View()
	if err != nil {
		return kit.Argf(op, "dataset", "%w", err)
	}
	if err := updateRule.Check(op, &dv); err != nil {
		return err
	}
	if dv.DType() != idx.dtype || (idx.dim != 0 && dv.Dim(1) != idx.dim) {
		return kit.Argf(op, "dataset", "%s × %d columns, the index holds %s × %d", dv.DType(), dv.Dim(1), idx.dtype, idx.dim)
	}
	rows := idx.rows.Load()
	if rows < 0 {
		return kit.Argf(op, "dataset", "the index's rows are not known (its file's headers could not be read): cuVS would read past a dataset too short")
	}
	if dv.Dim(0) != rows {
		return kit.Argf(op, "dataset", "%d rows, the index's graph has %d", dv.Dim(0), rows)
	}
	return idx.life.Exclusive(op, func() error {
		return withCall(op, res, []*dlpack.View{&dv}, nil, func(h generated.CuvsResources_t, in [3]*generated.DLManagedTensor, _ [2]*generated.DLManagedTensor) error {
			var ds generated.CuvsDataset_t
			if err := makePadded(h, &dv, in[0], &ds); err != nil {
				return err
			}
			err := generated.CuvsMultiGpuCagraUpdateDataset(h, ds, idx.h)
			if derr := generated.CuvsDatasetDestroy(ds); err == nil {
				err = derr
			}
			return err
		})
	})
}

// Rows returns the number of rows indexed, -1 when not known: the C API has
// no getter, so Go counts them through Build and Extend, and reads them
// from the file after Deserialize and Distribute (see DeserializeCagra).
func (idx *CagraIndex) Rows() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return idx.rowCount()
}

// Shards returns the rows each device holds, rank by rank (a copy), nil
// when not known (a file whose headers could not be read, or Resources
// that could not count their devices). A sharded index's search ids are positions in the
// concatenation of the shards: rank r's i-th row has id Shards()[0] + ... +
// Shards()[r-1] + i, its built rows first, then the rows later Extends gave
// it (each Extend splits its rows over the devices as Build does).
func (idx *CagraIndex) Shards() []int64 {
	if idx == nil || idx.life.Closed() {
		return nil
	}
	return idx.shardRows()
}

// makePadded makes the padded device dataset UpdateDataset hands cuVS: a
// view of device rows already of the padded width (cuvsDatasetMakePadded
// refuses those: "source is device and stride is already correct", cuVS's
// make_device_dense_row_major_dataset_from_src, for memory that
// cudaPointerGetAttributes reports as device or managed), else a padded
// copy.
func makePadded(h generated.CuvsResources_t, v *dlpack.View, t *generated.DLManagedTensor, out *generated.CuvsDataset_t) error {
	if viewable(v) {
		return generated.CuvsDatasetMakePaddedView(h, t, out)
	}
	return generated.CuvsDatasetMakePadded(h, t, generated.CuvsDatasetMemType_t_CUVS_DATASET_MEM_TYPE_DEVICE, out)
}

// viewable reports whether v is device (or managed) memory whose rows are
// contiguous and a multiple of 16 bytes wide: cuVS's padded width
// (cagra_required_row_width).
func viewable(v *dlpack.View) bool {
	t := v.Device().Type
	return (t == dlpack.CUDA || t == dlpack.CUDAManaged) && v.Layout().IsContiguous() && (v.Dim(1)*v.DType().ElemSize())%16 == 0
}
