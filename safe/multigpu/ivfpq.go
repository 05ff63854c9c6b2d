package multigpu

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/mgparams"
)

// IVFPQIndex is a multi-GPU IVF-PQ index (cuvsMultiGpuIvfPqIndex):
// one single-GPU IVF-PQ index per device of the Resources it was made
// with. Searches may run from several goroutines (calls on one Resources
// are serialized); Extend needs it alone and waits its turn; Close waits
// for both.
type IVFPQIndex struct {
	core
	h generated.CuvsMultiGpuIvfPqIndex_t
}

var liveIVFPQ = live.New("multigpu.IVFPQIndex")

func newIVFPQ(op string) (*IVFPQIndex, error) {
	var h generated.CuvsMultiGpuIvfPqIndex_t
	if err := generated.CuvsMultiGpuIvfPqIndexCreate(&h); err != nil {
		return nil, kit.Wrap(op, err)
	}
	idx := &IVFPQIndex{h: h}
	idx.rows.Store(-1)
	kit.Start(&idx.life, idx, "multigpu.IVFPQIndex(%p)", liveIVFPQ, func() error { return generated.CuvsMultiGpuIvfPqIndexDestroy(h) })
	return idx, nil
}

// BuildIVFPQ builds an IVF-PQ index over res's devices from dataset
// (rows × dim, float32, float16, int8 or uint8, row-major, host memory:
// the C API refuses device memory), replicated or sharded (params.Mode;
// nil params: sharded, cuVS's IVF-PQ defaults). Sharded, each device
// trains params.Base.NLists lists on its ⌈rows/R⌉ rows, so every device
// must get at least NLists rows. cuVS copies the rows; nothing is borrowed.
//
// C calls: cuvsMultiGpuIvfPqIndexCreate, cuvsMultiGpuIvfPqIndexParamsCreate
// (which calls cuvsIvfPqIndexParamsCreate), cuvsMultiGpuIvfPqBuild,
// cuvsMultiGpuIvfPqIndexParamsDestroy; cuvsIvfPqIndexParamsCreate/Destroy
// for nil Base (the defaults).
func BuildIVFPQ(res *Resources, dataset dlpack.Tensor, params *IVFPQIndexParams) (*IVFPQIndex, error) {
	const op = "multigpu.BuildIVFPQ"
	var p IVFPQIndexParams
	if params != nil {
		p = *params
	}
	var base generated.CuvsIvfPqIndexParams
	idx, err := newIVFPQ(op)
	if err != nil {
		return nil, err
	}
	err = idx.build(op, res, p.Mode, dataset, func(minRows, dim int64) (err error) {
		if base, err = mgparams.IVFPQIndex(p.Base, op, dim); err != nil {
			return baseArg(err)
		}
		if int64(base.NLists) > minRows {
			return kit.Argf(op, "params.Base.NLists", "%d, a device builds on only %d rows", base.NLists, minRows)
		}
		return nil
	}, func(h generated.CuvsResources_t, t *generated.DLManagedTensor) error {
		var mp generated.CuvsMultiGpuIvfPqIndexParams_t
		if err := generated.CuvsMultiGpuIvfPqIndexParamsCreate(&mp); err != nil {
			return err
		}
		*mp.Ref().BaseParams.Ref(), mp.Ref().Mode = base, p.Mode.c()
		err := generated.CuvsMultiGpuIvfPqBuild(h, mp, t, idx.h)
		if derr := generated.CuvsMultiGpuIvfPqIndexParamsDestroy(mp); err == nil {
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
// defaults. The C API takes no filter. Distances are IVF-PQ's approximate
// ones. Slots cuVS could not fill are written as safe.SentinelID64 with
// distance +Inf. It returns once the results are written.
//
// C calls: cuvsMultiGpuIvfPqSearchParamsCreate, cuvsMultiGpuIvfPqSearch,
// cuvsMultiGpuIvfPqSearchParamsDestroy.
func (idx *IVFPQIndex) Search(res *Resources, params *IVFPQSearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error {
	const op = "multigpu.IVFPQIndex.Search"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	var p IVFPQSearchParams
	if params != nil {
		p = *params
	}
	d, err := p.Distribution.resolve(op)
	if err != nil {
		return err
	}
	base, err := mgparams.IVFPQSearch(p.Base, op)
	if err != nil {
		return baseArg(err)
	}
	qv, nv, dv, err := idx.searchArgs(op, d, queries, neighbors, distances)
	if err != nil {
		return err
	}
	return idx.search(op, res, &qv, &nv, &dv, func(h generated.CuvsResources_t, q, n, dd *generated.DLManagedTensor) error {
		var sp generated.CuvsMultiGpuIvfPqSearchParams_t
		if err := generated.CuvsMultiGpuIvfPqSearchParamsCreate(&sp); err != nil {
			return err
		}
		*sp.Ref().BaseParams.Ref() = base
		sp.Ref().SearchMode, sp.Ref().MergeMode, sp.Ref().NRowsPerBatch = generated.CuvsMultiGpuReplicatedSearchMode(d.SearchMode), d.MergeMode.c(), d.RowsPerBatch
		err := generated.CuvsMultiGpuIvfPqSearch(h, sp, idx.h, q, n, dd)
		if derr := generated.CuvsMultiGpuIvfPqSearchParamsDestroy(sp); err == nil {
			err = derr
		}
		return err
	})
}

// SearchK is Search into new Go memory: the k nearest rows of each query
// (queries in host memory, e.g. a dlpack.HostMatrix), as safe.Results.
func (idx *IVFPQIndex) SearchK(res *Resources, params *IVFPQSearchParams, queries dlpack.Tensor, k int) (*safe.Results, error) {
	if idx == nil {
		return nil, kit.NilIndex("multigpu.IVFPQIndex.SearchK")
	}
	if err := idx.life.Built("multigpu.IVFPQIndex.SearchK"); err != nil { // a zero index says so, before its arguments are checked
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
// C calls: cuvsMultiGpuIvfPqExtend.
func (idx *IVFPQIndex) Extend(res *Resources, vectors dlpack.Tensor, ids dlpack.Tensor) error {
	const op = "multigpu.IVFPQIndex.Extend"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	return idx.extend(op, res, vectors, ids, &ids64Rule, func(h generated.CuvsResources_t, v, i *generated.DLManagedTensor) error {
		return generated.CuvsMultiGpuIvfPqExtend(h, idx.h, v, i)
	})
}

// Serialize writes the index to path (cuvsMultiGpuIvfPqSerialize): the
// element type, mode and device count, then each device's index.
func (idx *IVFPQIndex) Serialize(res *Resources, path string) error {
	const op = "multigpu.IVFPQIndex.Serialize"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	return idx.serialize(op, res, path, func(h generated.CuvsResources_t, p *byte) error {
		return generated.CuvsMultiGpuIvfPqSerialize(h, idx.h, p)
	})
}

// DeserializeIVFPQ reads an index Serialize wrote onto res's devices
// (cuvsMultiGpuIvfPqDeserialize): res must have as many devices as the
// file (cuVS refuses otherwise). Rows and Dim are not known afterwards (no
// getter).
func DeserializeIVFPQ(res *Resources, path string, opts ...safe.DeserializeOption) (*IVFPQIndex, error) {
	return loadIVFPQ("multigpu.DeserializeIVFPQ", res, path, true, opts)
}

// DistributeIVFPQ loads a single-GPU IVF-PQ index file (what
// ivfpq.Index.Serialize writes) onto every device of res: a replicated
// index (cuvsMultiGpuIvfPqDistribute). Rows and Dim are not known
// afterwards (no getter).
func DistributeIVFPQ(res *Resources, path string, opts ...safe.DeserializeOption) (*IVFPQIndex, error) {
	return loadIVFPQ("multigpu.DistributeIVFPQ", res, path, false, opts)
}

func loadIVFPQ(op string, res *Resources, path string, multi bool, opts []safe.DeserializeOption) (*IVFPQIndex, error) {
	idx, err := newIVFPQ(op)
	if err != nil {
		return nil, err
	}
	if err := idx.load(op, res, path, multi, opts, nil, func(h generated.CuvsResources_t, p *byte) error {
		if multi {
			return generated.CuvsMultiGpuIvfPqDeserialize(h, p, idx.h)
		}
		return generated.CuvsMultiGpuIvfPqDistribute(h, p, idx.h)
	}, func() generated.DLDataType { return idx.h.Ref().Dtype }); err != nil {
		idx.life.Fail()
		return nil, err
	}
	return idx, nil
}

// Dim returns the vectors' dimension, 0 when not known.
func (idx *IVFPQIndex) Dim() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.dim)
}

// DType returns the vectors' element type.
func (idx *IVFPQIndex) DType() dlpack.DataType {
	if idx == nil || idx.life.Closed() {
		return dlpack.DataType{}
	}
	return idx.dtype
}

// Mode returns how the index is laid out.
func (idx *IVFPQIndex) Mode() Mode {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return idx.mode
}

// Close frees the index (cuvsMultiGpuIvfPqIndexDestroy). Closing twice is
// harmless; it waits for searches and an Extend in flight.
func (idx *IVFPQIndex) Close() error {
	if idx == nil {
		return nil
	}
	return kit.Wrap("multigpu.IVFPQIndex.Close", idx.life.Close("multigpu.IVFPQIndex.Close"))
}

// Rows returns the number of rows indexed, -1 when not known: the C API has
// no getter, so Go counts them through Build and Extend; after Deserialize
// and Distribute they are not known.
func (idx *IVFPQIndex) Rows() int {
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
func (idx *IVFPQIndex) Shards() []int64 {
	if idx == nil || idx.life.Closed() {
		return nil
	}
	return idx.shardRows()
}
