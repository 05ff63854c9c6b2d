// Package cagra is CAGRA: graph-based approximate nearest-neighbour search
// on the GPU, the fastest cuVS index for small batches.
//
// Build from host or device data; search with queries, neighbors (uint32
// or int64) and distances (float32) in device memory, optionally filtered
// by a bitset. Any number of goroutines may search one index at once, each
// with its own safe.Resources; Extend and Close wait for no one: Extend
// refuses while searches are in flight, Close waits for them.
//
// When the dataset is device memory with 16-byte aligned rows, cuVS keeps a
// reference to it instead of a copy: the index then borrows the dataset
// until Close, and its owner refuses to be freed or written meanwhile.
// IndexFromArgs always borrows the graph, and the dataset under the same
// rule. Views of the index's own dataset and graph (Dataset, Graph) expire
// when the index is closed.
package cagra

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/handle"
)

var elemTypes = []dlpack.DataType{dlpack.Float32, dlpack.Float16, dlpack.Int8, dlpack.Uint8}

// The tensor rules of CAGRA, in one place.
var (
	datasetRule   = safe.Rule{Arg: "dataset", Memory: safe.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	extendRule    = safe.Rule{Arg: "additional", Memory: safe.AnyMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	graphRule     = safe.Rule{Arg: "graph", Memory: safe.AnyMemory, DTypes: []dlpack.DataType{dlpack.Uint32}, Rank: 2, RowMajor: true}
	queriesRule   = safe.Rule{Arg: "queries", Memory: safe.DeviceMemory, DTypes: elemTypes, Rank: 2, RowMajor: true}
	neighborsRule = safe.Rule{Arg: "neighbors", Memory: safe.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Uint32, dlpack.Int64}, Rank: 2, RowMajor: true}
	distancesRule = safe.Rule{Arg: "distances", Memory: safe.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true}
)

// importedView is a view cuVS handed out into the index's memory: the
// DLManagedTensor (our C memory) it filled in, imported.
type importedView struct {
	im *dlpack.Imported
	mt *generated.DLManagedTensor
}

// Index is a CAGRA index.
type Index struct {
	h      generated.CuvsCagraIndex_t // C memory
	rows   int64
	dim    int64
	degree int64
	dtype  dlpack.DataType

	state    handle.State
	mu       sync.Mutex // Close, Extend, the views list
	borrows  []*dlpack.Retention
	imported []importedView
	clean    runtime.Cleanup
}

func destroyIndex(h generated.CuvsCagraIndex_t) { _ = generated.CuvsCagraIndexDestroy(h) }

func newIndex(op string) (*Index, error) {
	var h generated.CuvsCagraIndex_t
	if err := generated.CuvsCagraIndexCreate(&h); err != nil {
		return nil, safe.Wrap(op, err)
	}
	idx := &Index{h: h}
	idx.clean = runtime.AddCleanup(idx, destroyIndex, h)
	return idx, nil
}

func (idx *Index) label() string { return fmt.Sprintf("cagra.Index(%p)", idx) }

// refresh reads the index's shape from the library.
func (idx *Index) refresh(op string) error {
	if err := generated.CuvsCagraIndexGetSize(idx.h, &idx.rows); err != nil {
		return safe.Wrap(op, err)
	}
	if err := generated.CuvsCagraIndexGetDims(idx.h, &idx.dim); err != nil {
		return safe.Wrap(op, err)
	}
	if err := generated.CuvsCagraIndexGetGraphDegree(idx.h, &idx.degree); err != nil {
		return safe.Wrap(op, err)
	}
	d := idx.h.Dtype
	idx.dtype = dlpack.DataType{Code: dlpack.TypeCode(d.Code), Bits: d.Bits, Lanes: d.Lanes}
	return nil
}

// fail destroys a half-made index.
func (idx *Index) fail() {
	idx.clean.Stop()
	for _, r := range idx.borrows {
		r.End()
	}
	_ = generated.CuvsCagraIndexDestroy(idx.h)
}

// keepsReference reports whether cuVS keeps a pointer to v's memory rather
// than a copy: device-accessible memory with 16-byte aligned rows.
func keepsReference(v *dlpack.View) bool {
	switch v.Device().Type {
	case dlpack.CUDA, dlpack.CUDAHost, dlpack.CUDAManaged:
	default:
		return false
	}
	p, err := v.Data()
	if err != nil {
		return true
	}
	rowBytes := v.Dim(1) * v.DType().ElemSize()
	return uintptr(p)%16 == 0 && rowBytes%16 == 0
}

// hostMemory reports whether a view may be Go memory, which is pinned only
// while its call lasts: the stream is synchronized before the call ends.
func hostMemory(v *dlpack.View) bool { return v.Device().Type == dlpack.CPU }

// Build makes a CAGRA index from dataset (rows × dim; float32, float16, int8
// or uint8; host or device memory, row-major).
func Build(res *safe.Resources, dataset dlpack.Tensor, p IndexParams) (*Index, error) {
	const op = "cagra.Build"
	if dataset == nil {
		return nil, safe.Argf(op, "dataset", "nil")
	}
	dv, err := dataset.View()
	if err != nil {
		return nil, safe.Argf(op, "dataset", "%v", err)
	}
	if err := datasetRule.Check(op, &dv); err != nil {
		return nil, err
	}
	if dv.Dim(0) < 2 || dv.Dim(1) < 1 {
		return nil, safe.Argf(op, "dataset", "shape %v, want at least two rows and one column", dv.Shape())
	}
	if err := p.validate(op); err != nil {
		return nil, err
	}
	if int64(p.GraphDegree) >= dv.Dim(0) {
		return nil, safe.Argf(op, "params.GraphDegree", "%d, the dataset has only %d rows", p.GraphDegree, dv.Dim(0))
	}
	cp, err := p.toC(op)
	defer cp.release()
	if err != nil {
		return nil, err
	}
	idx, err := newIndex(op)
	if err != nil {
		return nil, err
	}
	if keepsReference(&dv) {
		r, err := dv.Retain(idx.label())
		if err != nil {
			idx.fail()
			return nil, safe.Argf(op, "dataset", "%v", err)
		}
		idx.borrows = append(idx.borrows, r)
	}
	if err := callWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsCagraBuild(h, &cp.p, t[0], idx.h)
	}); err != nil {
		idx.fail()
		return nil, err
	}
	if err := idx.refresh(op); err != nil {
		idx.fail()
		return nil, err
	}
	return idx, nil
}

// callWith runs one C call with inputs bound; used by the rare operations
// (build, extend, from-args), not by Search. Go memory among the inputs is
// pinned only for the call, so the stream is synchronized before it ends.
func callWith(op string, res *safe.Resources, in []*dlpack.View, f func(generated.CuvsResources_t, []*generated.DLManagedTensor) error) error {
	c := dlpack.Begin(op)
	defer c.End()
	ts := make([]*generated.DLManagedTensor, len(in))
	sync := false
	for i, v := range in {
		if v == nil {
			continue
		}
		t, err := c.In(v)
		if err != nil {
			return safe.Argf(op, "input", "%v", err)
		}
		ts[i] = t
		sync = sync || hostMemory(v)
	}
	h, err := res.Lock(op)
	if err != nil {
		return err
	}
	defer res.Unlock()
	if err := f(h, ts); err != nil {
		return safe.Wrap(op, err)
	}
	if sync {
		return safe.Wrap(op, generated.CuvsStreamSync(h))
	}
	return nil
}

// IndexFromArgs makes an index from a graph (rows × degree, uint32) and its
// dataset (rows × dim), with no build (cuvsCagraIndexFromArgs). The index
// borrows the graph until Close, and the dataset when cuVS keeps a
// reference to it (device memory, 16-byte aligned rows).
func IndexFromArgs(res *safe.Resources, metric safe.Metric, graph, dataset dlpack.Tensor) (*Index, error) {
	const op = "cagra.IndexFromArgs"
	if graph == nil || dataset == nil {
		return nil, safe.Argf(op, "graph/dataset", "nil")
	}
	gv, err := graph.View()
	if err != nil {
		return nil, safe.Argf(op, "graph", "%v", err)
	}
	dv, err := dataset.View()
	if err != nil {
		return nil, safe.Argf(op, "dataset", "%v", err)
	}
	if err := graphRule.Check(op, &gv); err != nil {
		return nil, err
	}
	if err := datasetRule.Check(op, &dv); err != nil {
		return nil, err
	}
	if gv.Dim(0) != dv.Dim(0) {
		return nil, safe.Argf(op, "graph", "%d rows, the dataset has %d", gv.Dim(0), dv.Dim(0))
	}
	if gv.Dim(1) < 1 || gv.Dim(1) >= gv.Dim(0) {
		return nil, safe.Argf(op, "graph", "degree %d for %d rows", gv.Dim(1), gv.Dim(0))
	}
	if !metric.Valid() {
		return nil, safe.Argf(op, "metric", "%d is not a metric", metric)
	}
	idx, err := newIndex(op)
	if err != nil {
		return nil, err
	}
	for _, v := range []*dlpack.View{&gv, &dv} {
		if v == &gv && v.Device().Type == dlpack.CPU {
			continue // a host graph is copied
		}
		if v == &dv && !keepsReference(v) {
			continue
		}
		r, err := v.Retain(idx.label())
		if err != nil {
			idx.fail()
			return nil, safe.Argf(op, "graph/dataset", "%v", err)
		}
		idx.borrows = append(idx.borrows, r)
	}
	if err := callWith(op, res, []*dlpack.View{&gv, &dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsCagraIndexFromArgs(h, metric.C(), t[0], t[1], idx.h)
	}); err != nil {
		idx.fail()
		return nil, err
	}
	if err := idx.refresh(op); err != nil {
		idx.fail()
		return nil, err
	}
	return idx, nil
}

// Rows returns the number of rows indexed (cuvsCagraIndexGetSize).
func (idx *Index) Rows() int64 { return idx.rows }

// Dim returns the vectors' dimension (cuvsCagraIndexGetDims).
func (idx *Index) Dim() int64 { return idx.dim }

// GraphDegree returns the graph's degree (cuvsCagraIndexGetGraphDegree).
func (idx *Index) GraphDegree() int64 { return idx.degree }

// DType returns the element type of the vectors.
func (idx *Index) DType() dlpack.DataType { return idx.dtype }

// Extend adds rows to the index (cuvsCagraExtend). It needs the index
// alone: it refuses (safe.ErrBusy) while searches are in flight.
func (idx *Index) Extend(res *safe.Resources, additional dlpack.Tensor, p ExtendParams) error {
	const op = "cagra.Index.Extend"
	if additional == nil {
		return safe.Argf(op, "additional", "nil")
	}
	av, err := additional.View()
	if err != nil {
		return safe.Argf(op, "additional", "%v", err)
	}
	if err := extendRule.Check(op, &av); err != nil {
		return err
	}
	if av.DType() != idx.dtype || av.Dim(1) != idx.dim {
		return safe.Argf(op, "additional", "%s × %d columns, the index holds %s × %d", av.DType(), av.Dim(1), idx.dtype, idx.dim)
	}
	if av.Dim(0) < 1 {
		return safe.Argf(op, "additional", "no rows")
	}
	idx.mu.Lock()
	defer idx.mu.Unlock()
	ok, closed := idx.state.TryExclusive()
	if !ok {
		if closed {
			return fmt.Errorf("%s: %w", op, safe.ErrClosed)
		}
		return fmt.Errorf("%s: %w: %d searches in flight", op, safe.ErrBusy, idx.state.InFlight())
	}
	defer idx.state.LeaveExclusive()
	if err := idx.expireViews(op); err != nil {
		return err
	}
	cp := generated.CuvsCagraExtendParams{MaxChunkSize: p.MaxChunkSize}
	if err := callWith(op, res, []*dlpack.View{&av}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsCagraExtend(h, &cp, t[0], idx.h)
	}); err != nil {
		return err
	}
	return idx.refresh(op)
}

// Search finds the k nearest rows for each query, k being the number of
// columns of neighbors. queries is n × Dim() of the index's element type;
// neighbors (uint32 or int64) and distances (float32) are n × k; all in
// device memory. filter, if not nil, is a bitset for Rows() rows. The
// results are ready once res's stream is synchronized (res.Sync).
//
// Search allocates nothing on the Go heap when its tensors are pointers
// (e.g. *safe.DeviceMatrix), and holds no lock across the C call: any
// number of goroutines may search one index, each with its own Resources.
func (idx *Index) Search(res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	const op = "cagra.Index.Search"
	if !idx.state.Enter() {
		return errClosed
	}
	defer idx.state.Leave()
	if params == nil || queries == nil || neighbors == nil || distances == nil {
		return safe.Argf(op, "params/queries/neighbors/distances", "nil")
	}
	if err := params.validate(op); err != nil {
		return err
	}
	qv, err := queries.View()
	if err != nil {
		return safe.Argf(op, "queries", "%v", err)
	}
	nm, err := neighbors.ViewMut()
	if err != nil {
		return safe.Argf(op, "neighbors", "%v", err)
	}
	dm, err := distances.ViewMut()
	if err != nil {
		return safe.Argf(op, "distances", "%v", err)
	}
	nv, _ := nm.View()
	dv, _ := dm.View()
	if err := queriesRule.Check(op, &qv); err != nil {
		return err
	}
	if qv.DType() != idx.dtype {
		return safe.Argf(op, "queries", "dtype %s, the index holds %s", qv.DType(), idx.dtype)
	}
	if err := neighborsRule.Check(op, &nv); err != nil {
		return err
	}
	if err := distancesRule.Check(op, &dv); err != nil {
		return err
	}
	if _, err := safe.SearchShapes(op, &qv, &nv, &dv, idx.dim, idx.rows); err != nil {
		return err
	}
	c := dlpack.Begin(op)
	defer c.End()
	q, err := c.In(&qv)
	if err != nil {
		return safe.Argf(op, "queries", "%v", err)
	}
	n, err := c.Out(&nm)
	if err != nil {
		return safe.Argf(op, "neighbors", "%v", err)
	}
	d, err := c.Out(&dm)
	if err != nil {
		return safe.Argf(op, "distances", "%v", err)
	}
	f, err := filter.Bind(op, c, idx.rows, qv.Dim(0), safe.Bitset)
	if err != nil {
		return err
	}
	cp := params.toC()
	h, err := res.Lock(op)
	if err != nil {
		return err
	}
	err = generated.CuvsCagraSearch(h, &cp, idx.h, q, n, d, f)
	res.Unlock()
	if err != nil {
		return safe.Wrap(op, err)
	}
	return nil
}

var errClosed = fmt.Errorf("cagra.Index: %w", safe.ErrClosed)

// Serialize writes the index to a file, with its dataset when
// includeDataset is true (cuvsCagraSerialize).
func (idx *Index) Serialize(res *safe.Resources, path string, includeDataset bool) error {
	const op = "cagra.Index.Serialize"
	return idx.write(op, res, path, func(h generated.CuvsResources_t, p *byte) error {
		return generated.CuvsCagraSerialize(h, p, idx.h, includeDataset)
	})
}

// SerializeToHnswlib writes the index in hnswlib's format
// (cuvsCagraSerializeToHnswlib), for CPU search with hnswlib.
func (idx *Index) SerializeToHnswlib(res *safe.Resources, path string) error {
	const op = "cagra.Index.SerializeToHnswlib"
	return idx.write(op, res, path, func(h generated.CuvsResources_t, p *byte) error {
		return generated.CuvsCagraSerializeToHnswlib(h, p, idx.h)
	})
}

func (idx *Index) write(op string, res *safe.Resources, path string, f func(generated.CuvsResources_t, *byte) error) error {
	if !idx.state.Enter() {
		return fmt.Errorf("%s: %w", op, safe.ErrClosed)
	}
	defer idx.state.Leave()
	p, err := safe.CPath(op, path)
	if err != nil {
		return err
	}
	h, err := res.Lock(op)
	if err != nil {
		return err
	}
	defer res.Unlock()
	return safe.Wrap(op, f(h, &p[0]))
}

// Deserialize reads an index written by Serialize (cuvsCagraDeserialize).
func Deserialize(res *safe.Resources, path string) (*Index, error) {
	const op = "cagra.Deserialize"
	p, err := safe.CPath(op, path)
	if err != nil {
		return nil, err
	}
	idx, err := newIndex(op)
	if err != nil {
		return nil, err
	}
	h, err := res.Lock(op)
	if err != nil {
		idx.fail()
		return nil, err
	}
	err = generated.CuvsCagraDeserialize(h, &p[0], idx.h)
	res.Unlock()
	if err != nil {
		idx.fail()
		return nil, safe.Wrap(op, err)
	}
	if err := idx.refresh(op); err != nil {
		idx.fail()
		return nil, err
	}
	return idx, nil
}

// Merge makes one index of several (cuvsCagraMerge), with p's parameters
// for the merged graph; filter, if not nil, is a bitset over the
// concatenated rows that keeps only the rows it lets through.
func Merge(res *safe.Resources, p IndexParams, indexes []*Index, filter *safe.Filter) (*Index, error) {
	const op = "cagra.Merge"
	if len(indexes) < 2 {
		return nil, safe.Argf(op, "indexes", "%d indexes, want at least 2", len(indexes))
	}
	if err := p.validate(op); err != nil {
		return nil, err
	}
	hs := make([]generated.CuvsCagraIndex_t, len(indexes))
	var total int64
	for i, x := range indexes {
		if x == nil {
			return nil, safe.Argf(op, "indexes", "entry %d is nil", i)
		}
		if !x.state.Enter() {
			return nil, safe.Argf(op, "indexes", "entry %d is closed", i)
		}
		defer x.state.Leave()
		if x.dtype != indexes[0].dtype || x.dim != indexes[0].dim {
			return nil, safe.Argf(op, "indexes", "entry %d holds %s × %d, entry 0 %s × %d", i, x.dtype, x.dim, indexes[0].dtype, indexes[0].dim)
		}
		hs[i] = x.h
		total += x.rows
	}
	cp, err := p.toC(op)
	defer cp.release()
	if err != nil {
		return nil, err
	}
	out, err := newIndex(op)
	if err != nil {
		return nil, err
	}
	c := dlpack.Begin(op)
	defer c.End()
	f, err := filter.Bind(op, c, total, 0, safe.Bitset)
	if err != nil {
		out.fail()
		return nil, err
	}
	h, err := res.Lock(op)
	if err != nil {
		out.fail()
		return nil, err
	}
	err = generated.CuvsCagraMerge(h, &cp.p, &hs[0], uint64(len(hs)), f, out.h)
	res.Unlock()
	runtime.KeepAlive(hs)
	if err != nil {
		out.fail()
		return nil, safe.Wrap(op, err)
	}
	if err := out.refresh(op); err != nil {
		out.fail()
		return nil, err
	}
	return out, nil
}

// Dataset returns a read-only view of the index's dataset, in device memory
// (cuvsCagraIndexGetDataset). The view expires when the index is closed or
// extended.
func (idx *Index) Dataset() (dlpack.View, error) {
	return idx.internalView("cagra.Index.Dataset", generated.CuvsCagraIndexGetDataset)
}

// Graph returns a read-only view of the index's graph, rows × degree uint32
// in device memory (cuvsCagraIndexGetGraph). The view expires when the index
// is closed or extended.
func (idx *Index) Graph() (dlpack.View, error) {
	return idx.internalView("cagra.Index.Graph", generated.CuvsCagraIndexGetGraph)
}

func (idx *Index) internalView(op string, get func(generated.CuvsCagraIndex_t, *generated.DLManagedTensor) error) (dlpack.View, error) {
	if !idx.state.Enter() {
		return dlpack.View{}, fmt.Errorf("%s: %w", op, safe.ErrClosed)
	}
	defer idx.state.Leave()
	mt := cDLManaged()
	if err := get(idx.h, mt); err != nil {
		cFree(unsafe.Pointer(mt))
		return dlpack.View{}, safe.Wrap(op, err)
	}
	im, err := dlpack.Import(mt)
	if err != nil {
		cFree(unsafe.Pointer(mt))
		return dlpack.View{}, fmt.Errorf("%s: %w", op, err)
	}
	im.Owner().SetLabel(op)
	v, err := im.View()
	if err != nil {
		im.Close()
		cFree(unsafe.Pointer(mt))
		return dlpack.View{}, fmt.Errorf("%s: %w", op, err)
	}
	idx.mu.Lock()
	idx.imported = append(idx.imported, importedView{im, mt})
	idx.mu.Unlock()
	return v, nil
}

// expireViews closes the views handed out into the index's memory; it
// refuses while one is borrowed. idx.mu is held.
func (idx *Index) expireViews(op string) error {
	for i, iv := range idx.imported {
		// Close calls cuVS's deleter, which frees the shape and strides it
		// allocated; the struct itself is ours.
		if err := iv.im.Close(); err != nil {
			idx.imported = idx.imported[i:]
			return fmt.Errorf("%s: a view of the index is in use: %w", op, err)
		}
		cFree(unsafe.Pointer(iv.mt))
	}
	idx.imported = nil
	return nil
}

// Close frees the index, waiting for searches in flight, expires its
// dataset and graph views and ends its borrows. Closing twice is harmless.
func (idx *Index) Close() error {
	const op = "cagra.Index.Close"
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if idx.state.Closed() {
		return nil
	}
	if err := idx.expireViews(op); err != nil {
		return err
	}
	idx.state.Close()
	idx.clean.Stop()
	err := generated.CuvsCagraIndexDestroy(idx.h)
	for _, r := range idx.borrows {
		r.End()
	}
	idx.borrows = nil
	return safe.Wrap(op, err)
}
