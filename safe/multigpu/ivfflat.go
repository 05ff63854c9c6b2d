package multigpu

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/mgparams"
)

// IVFFlatIndex is a multi-GPU IVF-Flat index (cuvsMultiGpuIvfFlatIndex):
// one single-GPU IVF-Flat index per device of the Resources it was made
// with. Searches may run from several goroutines (calls on one Resources
// are serialized); Extend needs it alone and waits its turn; Close waits
// for both.
type IVFFlatIndex struct {
	core
	h generated.CuvsMultiGpuIvfFlatIndex_t
}

var liveIVFFlat = live.New("multigpu.IVFFlatIndex")

func newIVFFlat(op string) (*IVFFlatIndex, error) {
	var h generated.CuvsMultiGpuIvfFlatIndex_t
	if err := generated.CuvsMultiGpuIvfFlatIndexCreate(&h); err != nil {
		return nil, kit.Wrap(op, err)
	}
	idx := &IVFFlatIndex{h: h}
	idx.rows.Store(-1)
	kit.Start(&idx.life, idx, "multigpu.IVFFlatIndex(%p)", liveIVFFlat, func() error { return generated.CuvsMultiGpuIvfFlatIndexDestroy(h) })
	return idx, nil
}

// BuildIVFFlat builds an IVF-Flat index over res's devices from dataset
// (rows × dim, float32, float16, int8 or uint8, row-major, host memory:
// the C API refuses device memory), replicated or sharded (params.Mode;
// nil params: sharded, cuVS's IVF-Flat defaults). Sharded, each device
// trains params.Base.NLists lists on its ⌈rows/R⌉ rows, so every device
// must get at least NLists rows. cuVS copies the rows; nothing is borrowed.
//
// C calls: cuvsMultiGpuIvfFlatIndexCreate, cuvsMultiGpuIvfFlatIndexParamsCreate
// (which calls cuvsIvfFlatIndexParamsCreate), cuvsMultiGpuIvfFlatBuild,
// cuvsMultiGpuIvfFlatIndexParamsDestroy; cuvsIvfFlatIndexParamsCreate/Destroy
// for nil Base (the defaults).
func BuildIVFFlat(res *Resources, dataset dlpack.Tensor, params *IVFFlatIndexParams) (*IVFFlatIndex, error) {
	const op = "multigpu.BuildIVFFlat"
	var p IVFFlatIndexParams
	if params != nil {
		p = *params
	}
	var base generated.CuvsIvfFlatIndexParams
	idx, err := newIVFFlat(op)
	if err != nil {
		return nil, err
	}
	err = idx.build(op, res, p.Mode, dataset, func(minRows, dim int64) (err error) {
		base, err = mgparams.IVFFlatIndex(p.Base, op, minRows, dim)
		return baseArg(err)
	}, func(h generated.CuvsResources_t, t *generated.DLManagedTensor) error {
		var mp generated.CuvsMultiGpuIvfFlatIndexParams_t
		if err := generated.CuvsMultiGpuIvfFlatIndexParamsCreate(&mp); err != nil {
			return err
		}
		*mp.Ref().BaseParams.Ref(), mp.Ref().Mode = base, p.Mode.c()
		err := generated.CuvsMultiGpuIvfFlatBuild(h, mp, t, idx.h)
		if derr := generated.CuvsMultiGpuIvfFlatIndexParamsDestroy(mp); err == nil {
			err = derr
		}
		return err
	})
	if err != nil {
		idx.life.Fail()
		return nil, err
	}
	if !base.AddDataOnBuild {
		idx.rows.Store(0)
		for i := range idx.shards {
			idx.shards[i] = 0
		}
	}
	return idx, nil
}

// Search finds the k nearest rows of each query: queries n × Dim() of the
// index's element type, neighbors (int64) and distances (float32) n × k,
// all in host memory, as the C API wants (CPU, pinned or managed; cuVS
// copies each device's batch in and out). params nil means cuVS's
// defaults. The C API takes no filter. Slots cuVS could not fill (the
// probed lists hold fewer than k rows) are written as safe.SentinelID64
// with distance +Inf. It returns once the results are written.
//
// C calls: cuvsMultiGpuIvfFlatSearchParamsCreate, cuvsMultiGpuIvfFlatSearch,
// cuvsMultiGpuIvfFlatSearchParamsDestroy.
func (idx *IVFFlatIndex) Search(res *Resources, params *IVFFlatSearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error {
	const op = "multigpu.IVFFlatIndex.Search"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	var p IVFFlatSearchParams
	if params != nil {
		p = *params
	}
	d, err := p.Distribution.resolve(op)
	if err != nil {
		return err
	}
	base, err := mgparams.IVFFlatSearch(p.Base, op)
	if err != nil {
		return baseArg(err)
	}
	qv, nv, dv, err := idx.searchArgs(op, d, queries, neighbors, distances)
	if err != nil {
		return err
	}
	return idx.search(op, res, &qv, &nv, &dv, func(h generated.CuvsResources_t, q, n, dd *generated.DLManagedTensor) error {
		var sp generated.CuvsMultiGpuIvfFlatSearchParams_t
		if err := generated.CuvsMultiGpuIvfFlatSearchParamsCreate(&sp); err != nil {
			return err
		}
		*sp.Ref().BaseParams.Ref() = base
		sp.Ref().SearchMode, sp.Ref().MergeMode, sp.Ref().NRowsPerBatch = generated.CuvsMultiGpuReplicatedSearchMode(d.SearchMode), d.MergeMode.c(), d.RowsPerBatch
		err := generated.CuvsMultiGpuIvfFlatSearch(h, sp, idx.h, q, n, dd)
		if derr := generated.CuvsMultiGpuIvfFlatSearchParamsDestroy(sp); err == nil {
			err = derr
		}
		return err
	})
}

// SearchK is Search into new Go memory: the k nearest rows of each query
// (queries in host memory, e.g. a dlpack.HostMatrix), as safe.Results.
func (idx *IVFFlatIndex) SearchK(res *Resources, params *IVFFlatSearchParams, queries dlpack.Tensor, k int) (*safe.Results, error) {
	if idx == nil {
		return nil, kit.NilIndex("multigpu.IVFFlatIndex.SearchK")
	}
	if err := idx.life.Built("multigpu.IVFFlatIndex.SearchK"); err != nil { // a zero index says so, before its arguments are checked
		return nil, err
	}
	return searchK(queries, k, func(n, d dlpack.TensorMut) error { return idx.Search(res, params, queries, n, d) })
}

// Extend adds vectors (n × Dim(), the index's element type, host memory)
// with ids (an int64 host vector of n ids) or, ids nil, ids Go gives:
// the next positions of each device's index (a replicated index: Rows()
// onward; a sharded one: each shard's size onward). cuVS itself takes no
// nil ids on a non-empty index (its refusal, thrown inside the per-device
// OpenMP loop, aborts the process), so nil ids are refused where Go does
// not know the rows (an index loaded from a file). A replicated index
// adds every row on every device; a sharded one splits them as Build does
// (each device must get one), and refuses ids of your own (see Shards for
// its numbering). It needs the index alone and waits its turn.
//
// C calls: cuvsMultiGpuIvfFlatExtend.
func (idx *IVFFlatIndex) Extend(res *Resources, vectors dlpack.Tensor, ids dlpack.Tensor) error {
	const op = "multigpu.IVFFlatIndex.Extend"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	return idx.extend(op, res, vectors, ids, &ids64Rule, func(h generated.CuvsResources_t, v, i *generated.DLManagedTensor) error {
		return generated.CuvsMultiGpuIvfFlatExtend(h, idx.h, v, i)
	})
}

// Serialize writes the index to path (cuvsMultiGpuIvfFlatSerialize): the
// element type, mode and device count, then each device's index.
func (idx *IVFFlatIndex) Serialize(res *Resources, path string) error {
	const op = "multigpu.IVFFlatIndex.Serialize"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	return idx.serialize(op, res, path, func(h generated.CuvsResources_t, p *byte) error {
		return generated.CuvsMultiGpuIvfFlatSerialize(h, idx.h, p)
	})
}

// DeserializeIVFFlat reads an index Serialize wrote onto res's devices
// (cuvsMultiGpuIvfFlatDeserialize): res must have as many devices as the
// file (cuVS refuses otherwise). Rows and Dim are not known afterwards (no
// getter).
func DeserializeIVFFlat(res *Resources, path string, opts ...safe.DeserializeOption) (*IVFFlatIndex, error) {
	return loadIVFFlat("multigpu.DeserializeIVFFlat", res, path, true, opts)
}

// DistributeIVFFlat loads a single-GPU IVF-Flat index file (what
// ivfflat.Index.Serialize writes) onto every device of res: a replicated
// index (cuvsMultiGpuIvfFlatDistribute). Rows and Dim are not known
// afterwards (no getter).
func DistributeIVFFlat(res *Resources, path string, opts ...safe.DeserializeOption) (*IVFFlatIndex, error) {
	return loadIVFFlat("multigpu.DistributeIVFFlat", res, path, false, opts)
}

func loadIVFFlat(op string, res *Resources, path string, multi bool, opts []safe.DeserializeOption) (*IVFFlatIndex, error) {
	idx, err := newIVFFlat(op)
	if err != nil {
		return nil, err
	}
	if err := idx.load(op, res, path, multi, opts, nil, func(h generated.CuvsResources_t, p *byte) error {
		if multi {
			return generated.CuvsMultiGpuIvfFlatDeserialize(h, p, idx.h)
		}
		return generated.CuvsMultiGpuIvfFlatDistribute(h, p, idx.h)
	}, func() generated.DLDataType { return idx.h.Ref().Dtype }); err != nil {
		idx.life.Fail()
		return nil, err
	}
	return idx, nil
}

// Dim returns the vectors' dimension, 0 when not known.
func (idx *IVFFlatIndex) Dim() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.dim)
}

// DType returns the vectors' element type.
func (idx *IVFFlatIndex) DType() dlpack.DataType {
	if idx == nil || idx.life.Closed() {
		return dlpack.DataType{}
	}
	return idx.dtype
}

// Mode returns how the index is laid out.
func (idx *IVFFlatIndex) Mode() Mode {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return idx.mode
}

// Close frees the index (cuvsMultiGpuIvfFlatIndexDestroy). Closing twice is
// harmless; it waits for searches and an Extend in flight.
func (idx *IVFFlatIndex) Close() error {
	if idx == nil {
		return nil
	}
	return kit.Wrap("multigpu.IVFFlatIndex.Close", idx.life.Close("multigpu.IVFFlatIndex.Close"))
}

// Rows returns the number of rows indexed, -1 when not known: the C API has
// no getter, so Go counts them through Build and Extend; after Deserialize
// and Distribute they are not known.
func (idx *IVFFlatIndex) Rows() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return idx.rowCount()
}

// Shards returns the rows each device holds, rank by rank (a copy), nil
// when not known (Deserialize, Distribute, or Resources that could not
// count their devices). A sharded index's search ids are positions in the
// concatenation of the shards: rank r's i-th row has id Shards()[0] + ... +
// Shards()[r-1] + i, its built rows first, then the rows later Extends gave
// it (each Extend splits its rows over the devices as Build does).
func (idx *IVFFlatIndex) Shards() []int64 {
	if idx == nil || idx.life.Closed() {
		return nil
	}
	return idx.shardRows()
}
