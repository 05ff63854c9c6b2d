package multigpu

import (
	"bufio"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

var elemTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16, dlpack.Int8, dlpack.Uint8}

// The tensor rules of the multi-GPU C API, in one place: every tensor is
// host memory (CPU, pinned or managed: is_dlpack_host_compatible), row-major
// (from_dlpack of a host_matrix_view); neighbors int64 and distances
// float32 for all three algorithms.
var (
	datasetRule   = kit.Rule{Arg: "dataset", Memory: kit.HostMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	vectorsRule   = kit.Rule{Arg: "vectors", Memory: kit.HostMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	ids64Rule     = kit.Rule{Arg: "ids", Memory: kit.HostMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 1, RowMajor: true}
	queriesRule   = kit.Rule{Arg: "queries", Memory: kit.HostMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	neighborsRule = kit.Rule{Arg: "neighbors", Memory: kit.HostMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 2, RowMajor: true}
	distancesRule = kit.Rule{Arg: "distances", Memory: kit.HostMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true}
)

// core is what the three index types share: the lifecycle, and what Go
// knows of the index (the C API has no getter: no rows, no dimension, no
// mode).
type core struct {
	life   kit.Life
	dtype  dlpack.DataType
	dim    int64 // 0 when not known (Deserialize, Distribute)
	mode   Mode
	ranks  int // devices the index is laid over, 0 when not known
	mu     sync.Mutex
	rows   atomic.Int64 // -1 when not known
	shards []int64      // rows per device, nil when not known (guarded by mu)
	// fileData is the length of the data of the file load read (what
	// precedes its checksum trailer), for reading its header afterwards.
	fileData int64
}

// take returns t's view checked against r, with CheckFinite for float
// host data, every refusal an *ArgError naming r.Arg.
func take(op string, r *kit.Rule, t dlpack.Tensor) (dlpack.View, error) {
	if t == nil {
		return dlpack.View{}, kit.Argf(op, r.Arg, "nil")
	}
	v, err := t.View()
	if err != nil {
		return v, kit.Argf(op, r.Arg, "%w", err)
	}
	if err := r.Check(op, &v); err != nil {
		return v, err
	}
	return v, kit.CheckFinite(op, r.Arg, &v)
}

// split returns how cuVS splits n rows over ranks devices (snmg's build and
// extend): ⌈n/R⌉ each, the rest on the last, or an error naming arg when a
// device would get no row (cuVS would hand it a negative extent).
func split(op, arg string, n int64, ranks int) ([]int64, error) {
	per := (n + int64(ranks) - 1) / int64(ranks)
	out := make([]int64, ranks)
	for r := range out {
		rows := min(per, n-int64(r)*per)
		if rows < 1 {
			return nil, kit.Argf(op, arg, "%d rows over %d devices: device %d (rank %d) would get none (cuVS gives each ⌈n/%d⌉ = %d)", n, ranks, r, r, ranks, per)
		}
		out[r] = rows
	}
	return out, nil
}

// layout returns the rows each device builds on.
func layout(op string, mode Mode, n int64, ranks int) ([]int64, error) {
	if ranks < 1 {
		return nil, nil
	}
	if mode == Sharded {
		return split(op, "dataset", n, ranks)
	}
	out := make([]int64, ranks)
	for r := range out {
		out[r] = n
	}
	return out, nil
}

// withCall binds views (outputs after inputs) to one C call on res, and runs
// f; for each output it hands f the view's data pointer, read before the
// call ends.
func withCall(op string, res *Resources, in []*dlpack.View, out []*dlpack.ViewMut, f func(h generated.CuvsResources_t, in [3]*generated.DLManagedTensor, out [2]*generated.DLManagedTensor) error) error {
	c := dlpack.Begin(op)
	defer c.End()
	var tin [3]*generated.DLManagedTensor
	var tout [2]*generated.DLManagedTensor
	for i, v := range in {
		if v == nil {
			continue
		}
		t, err := c.In(v)
		if err != nil {
			return kit.Argf(op, "input", "%w", err)
		}
		tin[i] = t
	}
	for i, m := range out {
		t, err := c.Out(m)
		if err != nil {
			return kit.Argf(op, "output", "%w", err)
		}
		tout[i] = t
	}
	h, err := res.lock(op)
	if err != nil {
		return err
	}
	defer res.unlock()
	return kit.Wrap(op, f(h, tin, tout))
}

func (c *core) build(op string, res *Resources, mode Mode, dataset dlpack.Tensor, check func(minRows, dim int64) error, call func(h generated.CuvsResources_t, t *generated.DLManagedTensor) error) error {
	if !mode.valid() {
		return kit.Argf(op, "params.Mode", "%d is not a distribution mode", mode)
	}
	dv, err := take(op, &datasetRule, dataset)
	if err != nil {
		return err
	}
	n, dim := dv.Dim(0), dv.Dim(1)
	if n < 1 || dim < 1 {
		return kit.Argf(op, "dataset", "shape %v, want at least one row and one column", dv.Shape())
	}
	if res == nil {
		return kit.Argf(op, "res", "nil *multigpu.Resources")
	}
	shards, err := layout(op, mode, n, res.Ranks())
	if err != nil {
		return err
	}
	minRows := n
	for _, s := range shards {
		minRows = min(minRows, s)
	}
	if err := check(minRows, dim); err != nil {
		return err
	}
	if err := withCall(op, res, []*dlpack.View{&dv}, nil, func(h generated.CuvsResources_t, in [3]*generated.DLManagedTensor, _ [2]*generated.DLManagedTensor) error {
		return call(h, in[0])
	}); err != nil {
		return err
	}
	c.dtype, c.dim, c.mode, c.ranks, c.shards = dv.DType(), dim, mode, res.Ranks(), shards
	c.rows.Store(n)
	return nil
}

// searchArgs checks a search's tensors against the index; it returns their
// views and k.
func (c *core) searchArgs(op string, d Distribution, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) (qv dlpack.View, nv, dv dlpack.ViewMut, err error) {
	if queries == nil {
		return qv, nv, dv, kit.Argf(op, "queries", "nil")
	}
	if neighbors == nil {
		return qv, nv, dv, kit.Argf(op, "neighbors", "nil")
	}
	if distances == nil {
		return qv, nv, dv, kit.Argf(op, "distances", "nil")
	}
	if qv, err = queries.View(); err != nil {
		return qv, nv, dv, kit.Argf(op, "queries", "%w", err)
	}
	if err = queriesRule.Check(op, &qv); err != nil {
		return
	}
	if nv, err = neighbors.ViewMut(); err != nil {
		return qv, nv, dv, kit.Argf(op, "neighbors", "%w", err)
	}
	if err = neighborsRule.CheckMut(op, &nv); err != nil {
		return
	}
	if dv, err = distances.ViewMut(); err != nil {
		return qv, nv, dv, kit.Argf(op, "distances", "%w", err)
	}
	if err = distancesRule.CheckMut(op, &dv); err != nil {
		return
	}
	if c.dtype != (dlpack.DataType{}) && qv.DType() != c.dtype {
		return qv, nv, dv, kit.Argf(op, "queries", "dtype %s, the index holds %s", qv.DType(), c.dtype)
	}
	n := qv.Dim(0)
	if c.dim != 0 && qv.Dim(1) != c.dim {
		return qv, nv, dv, kit.Argf(op, "queries", "%d columns, the index has dimension %d", qv.Dim(1), c.dim)
	}
	if nv.Dim(0) != n {
		return qv, nv, dv, kit.Argf(op, "neighbors", "%d rows for %d queries", nv.Dim(0), n)
	}
	if dv.Dim(0) != n || dv.Dim(1) != nv.Dim(1) {
		return qv, nv, dv, kit.Argf(op, "distances", "shape %v, neighbors is %v", dv.Shape(), nv.Shape())
	}
	k := nv.Dim(1)
	if k < 1 {
		return qv, nv, dv, kit.Argf(op, "neighbors", "k = %d, want at least 1", k)
	}
	if rows := c.rows.Load(); rows >= 0 && k > rows {
		return qv, nv, dv, kit.Argf(op, "neighbors", "k = %d exceeds the %d rows of the index", k, rows)
	}
	if c.mode == Replicated && c.ranks > 0 && d.SearchMode == RoundRobin && n > d.RowsPerBatch {
		return qv, nv, dv, kit.Argf(op, "queries", "%d rows: a round-robin search takes at most RowsPerBatch = %d", n, d.RowsPerBatch)
	}
	return qv, nv, dv, kit.CheckFinite(op, "queries", &qv)
}

// search runs a checked search and normalizes the unfilled slots of its
// host outputs to safe.SentinelID64 with +Inf.
func (c *core) search(op string, res *Resources, qv *dlpack.View, nv, dv *dlpack.ViewMut, call func(h generated.CuvsResources_t, q, n, d *generated.DLManagedTensor) error) error {
	if err := c.life.Enter(op); err != nil {
		return err
	}
	defer c.life.Leave()
	var np, dp unsafe.Pointer
	count := int(nv.Len())
	err := withCall(op, res, []*dlpack.View{qv}, []*dlpack.ViewMut{nv, dv}, func(h generated.CuvsResources_t, in [3]*generated.DLManagedTensor, out [2]*generated.DLManagedTensor) error {
		np, dp = out[0].DlTensor.Data, out[1].DlTensor.Data
		return call(h, in[0], out[0], out[1])
	})
	if err != nil || count == 0 {
		return err
	}
	kit.Unfilled(unsafe.Slice((*int64)(np), count), unsafe.Slice((*float32)(dp), count))
	return nil
}

// extend adds vectors (and ids, or nil) under the index's exclusive use.
func (c *core) extend(op string, res *Resources, vectors dlpack.Tensor, ids dlpack.Tensor, idsRule *kit.Rule, call func(h generated.CuvsResources_t, v, ids *generated.DLManagedTensor) error) error {
	vv, err := take(op, &vectorsRule, vectors)
	if err != nil {
		return err
	}
	if vv.DType() != c.dtype && c.dtype != (dlpack.DataType{}) {
		return kit.Argf(op, "vectors", "dtype %s, the index holds %s", vv.DType(), c.dtype)
	}
	n := vv.Dim(0)
	if n < 1 {
		return kit.Argf(op, "vectors", "no rows")
	}
	if c.dim != 0 && vv.Dim(1) != c.dim {
		return kit.Argf(op, "vectors", "%d columns, the index has dimension %d", vv.Dim(1), c.dim)
	}
	var iv *dlpack.View
	// IVF without ids: cuVS's extend aborts the process on a non-empty
	// index (ivf_flat/ivf_pq extend's "You must pass data indices when the
	// index is non-empty.", thrown inside snmg's OpenMP loop:
	// std::terminate, measured on 26.08.01), so Go numbers the rows as the
	// docs promise, under the index's exclusive use.
	makeIDs := ids == nil && idsRule == &ids64Rule
	if ids != nil {
		if c.mode == Sharded {
			return kit.Argf(op, "ids", "a sharded index numbers its rows itself: cuVS adds each device's offset to every id it returns, so ids of your own would come back shifted (extend without ids; see Shards)")
		}
		v, err := take(op, idsRule, ids)
		if err != nil {
			return err
		}
		if v.Dim(0) != n {
			return kit.Argf(op, "ids", "%d ids for %d rows", v.Dim(0), n)
		}
		iv = &v
	}
	var add []int64
	if c.mode == Sharded && c.ranks > 0 {
		if add, err = split(op, "vectors", n, c.ranks); err != nil {
			return err
		}
	}
	return c.life.Exclusive(op, func() error {
		if makeIDs {
			made, err := c.nextIDs(op, n)
			if err != nil {
				return err
			}
			v, err := take(op, idsRule, dlpack.NewHostVector(made))
			if err != nil {
				return err
			}
			iv = &v
		}
		err := withCall(op, res, []*dlpack.View{&vv, iv}, nil, func(h generated.CuvsResources_t, in [3]*generated.DLManagedTensor, _ [2]*generated.DLManagedTensor) error {
			return call(h, in[0], in[1])
		})
		if err != nil {
			return err
		}
		c.mu.Lock()
		for r := range c.shards {
			if add != nil {
				c.shards[r] += add[r]
			} else {
				c.shards[r] += n
			}
		}
		c.mu.Unlock()
		if rows := c.rows.Load(); rows >= 0 {
			c.rows.Store(rows + n)
		}
		return nil
	})
}

// nextIDs returns the ids of n rows an IVF Extend adds without ids of the
// caller's: the next positions of each device's index, as the rows of a
// build are numbered (a replicated index: Rows() onward; a sharded one:
// each shard's size onward, for its part of the n rows, split as Build
// splits). They are refused where Go does not know the rows (after
// Deserialize or Distribute).
func (c *core) nextIDs(op string, n int64) ([]int64, error) {
	ids := make([]int64, n)
	if c.mode != Sharded {
		base := c.rows.Load()
		if base < 0 {
			return nil, kit.Argf(op, "ids", "nil, and the index's rows are not known (loaded from a file): cuVS's multi-GPU IVF extend without ids aborts the process (\"You must pass data indices when the index is non-empty.\", thrown inside its per-device OpenMP loop); pass ids")
		}
		for i := range ids {
			ids[i] = base + int64(i)
		}
		return ids, nil
	}
	c.mu.Lock()
	shards := append([]int64(nil), c.shards...)
	c.mu.Unlock()
	if len(shards) != c.ranks || c.ranks < 1 {
		return nil, kit.Argf(op, "vectors", "the shards' rows are not known (loaded from a file): a sharded index takes no ids of its own, and cuVS's multi-GPU IVF extend without ids aborts the process (\"You must pass data indices when the index is non-empty.\", thrown inside its per-device OpenMP loop)")
	}
	add, err := split(op, "vectors", n, c.ranks)
	if err != nil {
		return nil, err
	}
	i := 0
	for r, a := range add {
		for j := range a {
			ids[i] = shards[r] + j
			i++
		}
	}
	return ids, nil
}

func (c *core) serialize(op string, res *Resources, path string, call func(h generated.CuvsResources_t, p *byte) error) error {
	p, err := kit.CPath(op, path)
	if err != nil {
		return err
	}
	if err := c.life.Enter(op); err != nil {
		return err
	}
	defer c.life.Leave()
	h, err := res.lock(op)
	if err != nil {
		return err
	}
	err = kit.Wrap(op, call(h, &p[0]))
	res.unlock()
	if err != nil {
		return err
	}
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return nil // SerializeTo's pipe: the stream is sealed as it is copied (kit.SerializeSealed)
	}
	return kit.Seal(op, path, false) // the checksum trailer (cuVS's readers stop before it)
}

// load runs a Deserialize or Distribute call (a missing file refused
// first, then the file's checksum trailer checked under opts, and pre,
// if not nil, given the length of the data before it; cuVS's refusals of
// the file also safe.ErrCorruptIndex); the index learns its dtype
// from the handle, and, for a multi-GPU file, its mode and device count from
// the file's header (NumPy dtype, then .npy scalars: mode, ranks).
func (c *core) load(op string, res *Resources, path string, multi bool, opts []safe.DeserializeOption, pre func(dataLen int64) error, call func(h generated.CuvsResources_t, p *byte) error, dtype func() generated.DLDataType) error {
	if err := kit.CheckFile(op, path); err != nil { // a missing file is fs.ErrNotExist
		return err
	}
	lim, err := kit.Limits(op, opts)
	if err != nil {
		return err
	}
	info, err := kit.VerifyFile(op, path, false, lim)
	if err != nil {
		return err
	}
	if pre != nil {
		if err := pre(info.DataLen); err != nil {
			return err
		}
	}
	c.fileData = info.DataLen
	p, err := kit.CPath(op, path)
	if err != nil {
		return err
	}
	h, err := res.lock(op)
	if err != nil {
		return err
	}
	err = kit.MarkCorrupt(kit.Wrap(op, call(h, &p[0])))
	res.unlock()
	if err != nil {
		return err
	}
	c.dtype = kit.DataType(dtype())
	c.rows.Store(-1)
	c.mode, c.ranks = Replicated, res.Ranks()
	if multi {
		mode, ranks, herr := readHeader(path)
		if herr == nil {
			c.mode, c.ranks = mode, ranks
		}
	}
	return nil
}

// readHeader reads the mode and rank count of a multi-GPU index file.
func readHeader(path string) (Mode, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	if _, err := r.Discard(4); err != nil {
		return 0, 0, err
	}
	m, err := npy.ReadScalar(r)
	if err != nil {
		return 0, 0, err
	}
	n, err := npy.ReadScalar(r)
	if err != nil {
		return 0, 0, err
	}
	return modeOf(generated.CuvsMultiGpuDistributionMode(m.Int)), int(n.Int), nil
}

func (c *core) rowCount() int { return int(c.rows.Load()) }

// minShard returns the fewest rows a device holds, -1 when not known.
func (c *core) minShard() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := int64(-1)
	for _, s := range c.shards {
		if m < 0 || s < m {
			m = s
		}
	}
	return m
}

func (c *core) shardRows() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.shards...)
}
