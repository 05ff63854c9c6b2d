package nndescent

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// The tensor rules of NN-Descent, in one place: the dataset in host or
// device memory (cuVS picks the path from the tensor); a caller's graph for
// BuildInto in host memory (cuVS views it as a host matrix); the
// destinations of Graph and Distances in either.
var (
	datasetRule   = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32, dlpack.Float16, dlpack.Int8, dlpack.Uint8}, Rank: 2, RowMajor: true}
	intoGraphRule = kit.Rule{Arg: "graph", Memory: kit.HostMemory, DTypes: []dlpack.DataType{dlpack.Uint32}, Rank: 2, RowMajor: true}
	graphRule     = kit.Rule{Arg: "dst", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Uint32}, Rank: 2, RowMajor: true}
	distRule      = kit.Rule{Arg: "dst", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true}
)

// Index is an NN-Descent kNN graph held by cuVS: Rows() × GraphDegree()
// neighbour ids in host memory and, when built with ReturnDistances, their
// distances in device memory. It keeps no reference to the dataset. Any
// number of goroutines may read it at once (each with its own
// safe.Resources); Close waits for them.
type Index struct {
	h      generated.CuvsNNDescentIndex_t
	rows   int64
	degree int64
	dist   bool
	metric safe.Metric
	life   kit.Life
}

// newIndex makes the C handle. Its dtype is set to uint32 at once: that is
// what cuvsNNDescentBuild writes first, and cuvsNNDescentIndexDestroy
// frees only a handle of that dtype (a fresh handle's is zero, so one whose
// build never began would fail to be destroyed and leak).
func newIndex(op string, res *safe.Resources) (*Index, error) {
	var h generated.CuvsNNDescentIndex_t
	if err := generated.CuvsNNDescentIndexCreate(&h); err != nil {
		return nil, kit.Wrap(op, err)
	}
	h.Ref().Dtype = generated.DLDataType{Code: uint8(generated.DLDataTypeCode_kDLUInt), Bits: 32, Lanes: 1}
	idx := &Index{h: h}
	kit.Start(&idx.life, idx, "nndescent.Index(%p)", liveIndexes, func() error { return generated.CuvsNNDescentIndexDestroy(h) })
	// The build, deserialization or merge that follows runs on res and
	// refuses it as Keep would: Keep's error is theirs.
	_ = idx.life.Keep(res, op)
	return idx, nil
}

// take checks dataset and p for a build.
func take(op string, res *safe.Resources, dataset dlpack.Tensor, p *IndexParams) (dlpack.View, error) {
	dv, err := datasetRule.Take(op, res, dataset)
	if err != nil {
		return dv, err
	}
	if dv.Dim(0) < 2 || dv.Dim(1) < 1 {
		return dv, kit.Argf(op, "dataset", "shape %v, want at least two rows and one column", dv.Shape())
	}
	return dv, p.validate(op, dv.Dim(0), dv.DType())
}

// Build computes the kNN graph of dataset (rows × dim, float32, float16,
// int8 or uint8, row-major, host or device memory, at least two rows):
// for each row its p.GraphDegree nearest other rows, without itself. NN-
// Descent is approximate: a few neighbours may be missed (cuVS fills a
// short list with random rows, never the row itself or a repeat). The
// index keeps the graph (and, with p.ReturnDistances, the distances) until
// Close; it does not reference the dataset.
//
// C calls: cuvsNNDescentIndexCreate, cuvsNNDescentBuild (graph NULL),
// cuvsStreamSync. Nil params means cuVS's defaults (DefaultIndexParams).
func Build(res *safe.Resources, dataset dlpack.Tensor, params *IndexParams) (*Index, error) {
	const op = "nndescent.Build"
	pd, err := kit.Or(params, DefaultIndexParams)
	if err != nil {
		return nil, err
	}
	p := *pd
	dv, err := take(op, res, dataset, &p)
	if err != nil {
		return nil, err
	}
	est, err := EstimateMemory(safe.MemoryShape{Rows: int(dv.Dim(0)), Dim: int(dv.Dim(1)), DType: dv.DType(), HostDataset: kit.IsHost(&dv)}, &p)
	if err != nil {
		return nil, err
	}
	done, err := kit.ReserveBuild(op, res, est)
	if err != nil {
		return nil, err
	}
	defer done()
	idx, err := newIndex(op, res)
	if err != nil {
		return nil, err
	}
	cp := p.cValue()
	if err := kit.CallWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsNNDescentBuild(h, kit.Params[generated.CuvsNNDescentIndexParams_t](res, &cp), t[0], nil, idx.h)
	}); err != nil {
		idx.life.Fail()
		return nil, err
	}
	kit.KeepIndex(op, res, &idx.life, est.Index)
	idx.rows, idx.degree, idx.dist, idx.metric = dv.Dim(0), int64(p.GraphDegree), p.ReturnDistances, p.Metric
	return idx, nil
}

// BuildInto computes the graph as Build does, into graph, a host matrix of
// uint32 (rows × p.GraphDegree, row-major; CPU, pinned or managed memory)
// of the caller's, and keeps nothing: cuVS builds an index that views
// graph (it writes p.GraphDegree ids per row whatever the tensor's shape:
// BuildInto checks the shape), which BuildInto destroys before returning.
// p.ReturnDistances is ignored (cuVS refuses it with a caller's graph).
// A failed destroy is reported, and tried once more.
//
// C calls: cuvsNNDescentIndexCreate, cuvsNNDescentBuild (with graph),
// cuvsStreamSync, cuvsNNDescentIndexDestroy.
func BuildInto(res *safe.Resources, dataset dlpack.Tensor, graph dlpack.TensorMut, params *IndexParams) error {
	const op = "nndescent.BuildInto"
	pd, err := kit.Or(params, DefaultIndexParams)
	if err != nil {
		return err
	}
	p := *pd
	p.ReturnDistances = false
	dv, err := take(op, res, dataset, &p)
	if err != nil {
		return err
	}
	if graph == nil {
		return kit.Argf(op, "graph", "nil")
	}
	gm, err := graph.ViewMut()
	if err != nil {
		return kit.Argf(op, "graph", "%w", err)
	}
	if err := intoGraphRule.CheckMut(op, &gm); err != nil {
		return err
	}
	if gm.Dim(0) != dv.Dim(0) || gm.Dim(1) != int64(p.GraphDegree) {
		return kit.Argf(op, "graph", "shape %v, want [%d %d] (rows × params.GraphDegree)", gm.Shape(), dv.Dim(0), p.GraphDegree)
	}
	idx, err := newIndex(op, res)
	if err != nil {
		return err
	}
	cp := p.cValue()
	err = kit.CallInOut(op, res, []*dlpack.View{&dv}, []*dlpack.ViewMut{&gm}, func(h generated.CuvsResources_t, in, out []*generated.DLManagedTensor) error {
		return generated.CuvsNNDescentBuild(h, kit.Params[generated.CuvsNNDescentIndexParams_t](res, &cp), in[0], out[0], idx.h)
	})
	if cerr := idx.life.Close(op); cerr != nil {
		// Try once more (the index is never handed out: nothing else would
		// free it); report the first failure.
		_ = idx.life.Close(op)
		if err == nil {
			err = cerr
		}
	}
	return err
}

// Rows returns the number of rows of the graph (the dataset's).
func (idx *Index) Rows() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.rows)
}

// GraphDegree returns the number of neighbours per row.
func (idx *Index) GraphDegree() int {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return int(idx.degree)
}

// HasDistances reports whether the index keeps distances (built with
// ReturnDistances).
func (idx *Index) HasDistances() bool { return idx != nil && !idx.life.Closed() && idx.dist }

// Metric returns the metric the graph was built with.
func (idx *Index) Metric() safe.Metric {
	if idx == nil || idx.life.Closed() {
		return 0
	}
	return idx.metric
}

// Graph copies the graph into dst, a uint32 matrix of Rows() ×
// GraphDegree() in host or device memory, and waits for the copy
// (cuvsNNDescentIndexGetGraph, cuvsStreamSync).
func (idx *Index) Graph(res *safe.Resources, dst dlpack.TensorMut) error {
	if idx == nil {
		return kit.NilIndex("nndescent.Index.Graph")
	}
	if err := idx.life.Built("nndescent.Index.Graph"); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	return idx.copyOut("nndescent.Index.Graph", res, dst, &graphRule, generated.CuvsNNDescentIndexGetGraph)
}

// Distances copies the distances into dst, a float32 matrix of Rows() ×
// GraphDegree() in host or device memory, and waits for the copy
// (cuvsNNDescentIndexGetDistances, cuvsStreamSync). Row i, column j is the
// distance from row i to Graph's row i, column j: squared for L2Expanded,
// 1 - cosine for CosineExpanded, the inner product itself for
// InnerProduct; with float16 computation (what DistCompAuto chooses for
// float32 data of more than 16 dimensions: see DefaultIndexParams;
// DistCompFP32 avoids it) they are approximate. An index built without
// ReturnDistances refuses, with an *safe.ArgError naming the index.
func (idx *Index) Distances(res *safe.Resources, dst dlpack.TensorMut) error {
	if idx == nil {
		return kit.NilIndex("nndescent.Index.Distances")
	}
	if err := idx.life.Built("nndescent.Index.Distances"); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	const op = "nndescent.Index.Distances"
	if !idx.dist && !idx.life.Closed() {
		return kit.Argf(op, "index", "built without ReturnDistances: cuVS kept no distances")
	}
	return idx.copyOut(op, res, dst, &distRule, generated.CuvsNNDescentIndexGetDistances)
}

func (idx *Index) copyOut(op string, res *safe.Resources, dst dlpack.TensorMut, rule *kit.Rule, get func(generated.CuvsResources_t, generated.CuvsNNDescentIndex_t, *generated.DLManagedTensor) error) error {
	if dst == nil {
		return kit.Argf(op, "dst", "nil")
	}
	dm, err := dst.ViewMut()
	if err != nil {
		return kit.Argf(op, "dst", "%w", err)
	}
	if err := rule.CheckMut(op, &dm); err != nil {
		return err
	}
	if err := kit.CheckDevice(res, op, "dst", dm.Device()); err != nil {
		return err
	}
	if err := idx.life.Enter(op); err != nil {
		return err
	}
	defer idx.life.Leave()
	if dm.Dim(0) != idx.rows || dm.Dim(1) != idx.degree {
		return kit.Argf(op, "dst", "shape %v, want [%d %d]", dm.Shape(), idx.rows, idx.degree)
	}
	return kit.CallInOut(op, res, nil, []*dlpack.ViewMut{&dm}, func(h generated.CuvsResources_t, _, out []*generated.DLManagedTensor) error {
		return get(h, idx.h, out[0])
	})
}

// GraphSlice returns the graph in Go memory, row-major: row i's neighbours
// are [i*GraphDegree(), (i+1)*GraphDegree()).
func (idx *Index) GraphSlice(res *safe.Resources) ([]uint32, error) {
	if idx == nil {
		return nil, kit.NilIndex("nndescent.Index.GraphSlice")
	}
	out := make([]uint32, idx.rows*idx.degree)
	m, err := dlpack.NewHostMatrix(out, int(idx.rows), int(idx.degree))
	if err != nil {
		return nil, kit.Argf("nndescent.Index.GraphSlice", "index", "%w", err)
	}
	if err := idx.Graph(res, m); err != nil {
		return nil, err
	}
	return out, nil
}

// DistancesSlice returns the distances in Go memory, laid out as
// GraphSlice's ids.
func (idx *Index) DistancesSlice(res *safe.Resources) ([]float32, error) {
	if idx == nil {
		return nil, kit.NilIndex("nndescent.Index.DistancesSlice")
	}
	out := make([]float32, idx.rows*idx.degree)
	m, err := dlpack.NewHostMatrix(out, int(idx.rows), int(idx.degree))
	if err != nil {
		return nil, kit.Argf("nndescent.Index.DistancesSlice", "index", "%w", err)
	}
	if err := idx.Distances(res, m); err != nil {
		return nil, err
	}
	return out, nil
}

// Close frees the index (cuvsNNDescentIndexDestroy), after the reads in
// flight. Closing twice is harmless.
func (idx *Index) Close() error {
	if idx == nil {
		return nil
	}
	return idx.life.Close("nndescent.Index.Close")
}

// liveIndexes counts the indexes not yet destroyed, for tests' leak checks.
var liveIndexes = live.New("nndescent.Index")
