// Package bruteforce is exact k-nearest-neighbour search on the GPU: the
// index is the dataset itself, and a search compares every query with every
// row.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	data, _ := dlpack.NewHostMatrix(rows, n, dim) // rows: n × dim float32 in Go memory
//	idx, _ := bruteforce.Build(res, data, nil)     // copied once to the device
//	defer idx.Close()
//	out, _ := bruteforce.SearchSlice(res, idx, queries, 10, nil) // Go memory in and out
//	ids, dists := out.Row(0)                                     // int64 ids, nearest first
//
// Distances and neighbor ids: see safe.Metric and safe.Sentinel (what each
// metric returns here, and unfilled slots).
//
// The index keeps a reference to a device dataset, not a copy: the
// dataset's owner (a safe.DeviceMatrix, say) refuses to be freed or written
// until the index is closed, with an error that names the index. A dataset
// in Go (host) memory is copied once into device memory the index owns.
//
// Search's inputs and outputs live in device memory (CUDA, pinned host or
// managed); neighbors are int64, distances float32. A search may be filtered by a
// bitset (one bit per row) or a bitmap (one bit per query and row).
// Prepare binds a search's tensors once for a loop of Runs (one C call
// each), as in package cagra.
package bruteforce

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/core"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// The tensor rules of brute force, in one place.
var (
	datasetRule = kit.Rule{Arg: "dataset", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32, dlpack.Float16}, Rank: 2, RowMajor: true, ColMajor: true}
	searchRules = kit.SearchRules{
		Queries:   kit.Rule{Arg: "queries", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32, dlpack.Float16}, Rank: 2, RowMajor: true},
		Neighbors: kit.Rule{Arg: "neighbors", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Int64}, Rank: 2, RowMajor: true},
		Distances: kit.Rule{Arg: "distances", Memory: kit.DeviceMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2, RowMajor: true},
	}
)

// BuildParams configures Build.
type BuildParams struct {
	Metric    safe.Metric // default L2Expanded
	MetricArg float32     // the p of LpUnexpanded; default 2
}

// DefaultBuildParams returns cuVS's defaults (L2Expanded, MetricArg 2).
// Brute force has no params struct in C, so the error is always nil: the
// signature is every package's DefaultXParams'. The zero BuildParams is
// L2Expanded too; a zero MetricArg matters only to LpUnexpanded, which
// refuses it.
func DefaultBuildParams() (BuildParams, error) {
	return BuildParams{Metric: safe.L2Expanded, MetricArg: 2}, nil
}

// maxHaversineK is the most neighbors a Haversine search returns right
// (cuVS's haversine_knn keeps a 1024-entry queue per query).
const maxHaversineK = 1024

// searchable reports whether cuVS's unfiltered brute-force search computes
// metric m: Haversine (haversine_knn, 2-dimensional rows) and the 16 metrics
// of its dense pairwise distance; cuVS builds an index for any other metric
// and throws at its first search ("Unknown or unsupported distance
// metric").
func searchable(m safe.Metric) bool {
	switch m {
	case safe.JaccardExpanded, safe.BrayCurtis, safe.DiceExpanded, safe.BitwiseHamming:
		return false
	}
	return m.Valid()
}

// Index is a brute-force index. Any number of goroutines may search it at
// once, each with its own safe.Resources (with HellingerExpanded or
// KLDivergence the searches then take turns: see Build). Close waits for
// searches in flight.
type Index struct {
	c      core.Index[generated.CuvsBruteForceIndex_t] // Rows and Dim set once, by Build or Deserialize
	dtype  dlpack.DataType
	metric safe.Metric
	excl   *exclusive // HellingerExpanded and KLDivergence: one search at a time (rewrite.go); nil for the others
	owns   bool       // deserialized: cuVS holds a device copy of the rows
}

// kind is brute force for the index core.
var kind = core.Kind[Index, generated.CuvsBruteForceIndex_t]{
	Name: "bruteforce", Create: generated.CuvsBruteForceIndexCreate, Destroy: generated.CuvsBruteForceIndexDestroy,
	SerializeC: generated.CuvsBruteForceSerialize, DeserializeC: generated.CuvsBruteForceDeserialize,
	CheckFile: checkFile,
	FileNeed:  fileNeed,
	Core:      func(i *Index) *core.Index[generated.CuvsBruteForceIndex_t] { return &i.c },
	Release: func(i *Index) {
		if i.excl != nil {
			i.excl.free()
		}
	},
	Loaded: (*Index).loaded,
	Held:   (*Index).held,
}

func init() { kind.Init() }

// set records what the index holds, as Build or the file says.
func (idx *Index) set(rows, dim int64, dtype dlpack.DataType, metric safe.Metric) {
	idx.c.Rows.Store(rows)
	idx.c.Dim, idx.dtype, idx.metric = dim, dtype, metric
	idx.excl = newExclusive(metric)
	idx.c.Life.SetLabel(fmt.Sprintf("bruteforce.Index(%d×%d)", rows, dim))
}

// Build makes an index over dataset (rows × dim, float32 or float16; in
// device memory, row- or column-major, or in host memory, row-major).
// params.Metric is one of package distance's 16 metrics, or Haversine for a
// dataset of 2 columns (latitude, longitude in radians; the distance is the
// central angle in radians); BrayCurtis, JaccardExpanded, DiceExpanded and
// BitwiseHamming are refused here (cuVS would build the index and throw at
// its first search). A HellingerExpanded or KLDivergence search, as
// cuvsPairwiseDistance does, overwrites the index's dataset (and, for
// HellingerExpanded, the queries) with square roots or logarithms during
// the search and puts them back afterwards, up to rounding (KLDivergence
// turns an element equal to 1 into 0): so the searches of such an index
// run one at a time, each waiting for its stream before the next starts,
// and a HellingerExpanded search copies the queries first (into device
// memory the index keeps until Close), so the caller's are never written.
// cuVS keeps a reference to the dataset, not a copy: the index borrows a
// device dataset until Close (its owner refuses to be freed or written
// meanwhile), and copies a host dataset once into device memory it owns
// and frees at Close (the caller may change or drop the Go memory once
// Build returns).
//
// C calls: cuvsBruteForceIndexCreate, cuvsBruteForceBuild, cuvsStreamSync;
// for a host dataset also cuvsRMMAlloc, cuvsMatrixCopy (and cuvsRMMFree at
// Close).
// Nil params means cuVS's defaults (DefaultBuildParams).
func Build(res *safe.Resources, dataset dlpack.Tensor, params *BuildParams) (*Index, error) {
	const op = "bruteforce.Build"
	pd, perr := kit.Or(params, DefaultBuildParams)
	if perr != nil {
		return nil, perr
	}
	p := *pd
	dv, err := datasetRule.Take(op, res, dataset)
	if err != nil {
		return nil, err
	}
	if dv.Dim(0) < 1 || dv.Dim(1) < 1 {
		return nil, kit.Argf(op, "dataset", "shape %v, want at least one row and one column", dv.Shape())
	}
	if !p.Metric.Valid() {
		return nil, kit.Argf(op, "params.Metric", "%d is not a metric", p.Metric)
	}
	if !searchable(p.Metric) {
		return nil, kit.Argf(op, "params.Metric", "brute force has no %v (cuVS's search refuses it)", p.Metric)
	}
	if p.Metric == safe.Haversine && dv.Dim(1) != 2 {
		return nil, kit.Argf(op, "dataset", "shape %v: Haversine needs 2 columns (latitude, longitude in radians)", dv.Shape())
	}
	host := kit.IsHost(&dv)
	if host && !dv.Layout().IsRowMajor() {
		return nil, kit.Argf(op, "dataset", "layout %s: a dataset in host memory must be row-major", dv.Layout())
	}
	est, err := EstimateMemory(safe.MemoryShape{Rows: int(dv.Dim(0)), Dim: int(dv.Dim(1)), DType: dv.DType(), HostDataset: host}, &p)
	if err != nil {
		return nil, err
	}
	done, err := kit.ReserveBuild(op, res, est)
	if err != nil {
		return nil, err
	}
	defer done()
	idx, err := kind.New(op, res)
	if err != nil {
		return nil, err
	}
	idx.set(dv.Dim(0), dv.Dim(1), dv.DType(), p.Metric)
	life := &idx.c.Life
	if host {
		uv, free, err := kit.Upload(op, "dataset", res, &dv)
		if err != nil {
			kind.Fail(idx)
			return nil, err
		}
		life.Own(free)
		dv = uv
	} else {
		// cuVS keeps a reference to the dataset: hold it until Close.
		r, err := dv.Retain(life.Label())
		if err != nil {
			kind.Fail(idx)
			return nil, kit.Argf(op, "dataset", "%w", err)
		}
		life.Borrow(r)
	}
	err = kit.CallWith(op, res, []*dlpack.View{&dv}, func(h generated.CuvsResources_t, t []*generated.DLManagedTensor) error {
		return generated.CuvsBruteForceBuild(h, t[0], kit.CMetric(p.Metric), p.MetricArg, idx.c.H)
	})
	if idx, err = kind.Made(op, res, idx, err); err == nil {
		kit.KeepIndex(op, res, &idx.c.Life, est.Index)
	}
	return idx, err
}

// Rows returns the number of rows indexed.
func (idx *Index) Rows() int { return kind.Rows(idx) }

// Dim returns the dimension of the vectors.
func (idx *Index) Dim() int { return kind.Dim(idx) }

// DType returns the element type of the vectors.
func (idx *Index) DType() dlpack.DataType {
	if kind.Gone(idx) {
		return dlpack.DataType{}
	}
	return idx.dtype
}

// Metric returns the distance the index was built with.
func (idx *Index) Metric() safe.Metric {
	if kind.Gone(idx) {
		return 0
	}
	return idx.metric
}

// checkSearch refuses, before any C call, what cuVS does wrong or refuses
// late: a Haversine search of more than 1024 neighbors (haversine_knn's
// block select holds 1024: the rest would be garbage) or of rows that are
// not 2-dimensional (a deserialized index); with a filter, more neighbors
// than the filter lets through (cuVS then returns uninitialised memory: ids
// out of range, NaN distances, not even the allowed rows), and metrics its
// filtered search lacks.
func (idx *Index) checkSearch(op string, f *safe.Filter, k int64) error {
	if idx.metric == safe.Haversine && f == nil {
		if idx.c.Dim != 2 {
			return kit.Argf(op, "index", "Haversine needs 2-dimensional rows (latitude, longitude); the index has %d dimensions", idx.c.Dim)
		}
		if k > maxHaversineK {
			return kit.Argf(op, "neighbors", "k = %d: a Haversine search returns at most %d neighbors", k, maxHaversineK)
		}
	}
	if f == nil {
		return nil
	}
	switch idx.metric {
	case safe.L2Expanded, safe.L2SqrtExpanded, safe.InnerProduct, safe.CosineExpanded:
	default:
		return kit.Argf(op, "filter", "a filtered search needs L2Expanded, L2SqrtExpanded, InnerProduct or CosineExpanded; the index uses %v", idx.metric)
	}
	if k <= int64(f.Allowed()) {
		return nil
	}
	if f.Kind() == safe.Bitmap {
		for q := 0; ; q++ {
			if n := int64(f.AllowedFor(q)); n < k {
				return kit.Argf(op, "filter", "the bitmap lets query %d see %d rows, fewer than k = %d", q, n, k)
			}
		}
	}
	return kit.Argf(op, "filter", "the bitset lets %d rows through, fewer than k = %d", f.Allowed(), k)
}

// Search finds the k nearest rows of the index for each query, k being the
// number of columns of neighbors. queries is n × Dim(), neighbors (int64)
// and distances (float32) n × k, all in device memory. filter, if not nil,
// is a bitset for Rows() rows or a bitmap for n queries, letting at least k
// rows through for every query (Filter.Allowed), and the index's metric is
// L2Expanded, L2SqrtExpanded, InnerProduct or CosineExpanded (cuVS's
// filtered search has no other). The results are ready once res's stream
// is synchronized (res.Sync). It calls cuvsBruteForceSearch; with
// HellingerExpanded or KLDivergence also cuvsStreamSync, and with
// HellingerExpanded cuvsMatrixCopy (and cuvsRMMAlloc when the index's copy
// of the queries grows).
//
// Every slot is filled: cuVS returns uninitialised memory in slots a
// filter leaves empty, so a filter letting fewer than k rows through is
// refused. Device inputs are not read: NaN or infinite values in them give
// what cuVS computes (SearchSlice refuses them in Go memory). With
// HellingerExpanded or KLDivergence the search is synchronous and one at a
// time per index (see Build): the results are ready when it returns.
func (idx *Index) Search(res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	op := kind.Op.Search
	if idx != nil {
		if err := kit.CheckIndexDevice(res, op, idx.c.Dev); err != nil {
			return err
		}
	}
	return kind.Search(idx, op, func(c dlpack.Call) error {
		return idx.search(op, c, res, queries, neighbors, distances, filter)
	})
}

func (idx *Index) search(op string, c dlpack.Call, res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	var t kit.SearchTensors
	rows := idx.c.Rows.Load()
	if err := searchRules.BindOn(op, res, c, queries, neighbors, distances, idx.dtype, idx.c.Dim, rows, &t); err != nil {
		return err
	}
	f, err := kit.BindFilter(filter, op, c, rows, t.N, safe.Bitset, safe.Bitmap)
	if err != nil {
		return err
	}
	if err := idx.checkSearch(op, filter, t.K); err != nil {
		return err
	}
	if idx.excl != nil {
		return idx.searchRewriting(op, c, res, &t, f)
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = generated.CuvsBruteForceSearch(h, idx.c.H, t.Queries, t.Neighbors, t.Distances, f)
	kit.Unlock(res)
	return kit.Wrap(op, err)
}

// Serialize writes the index, with its dataset, to a file.
//
// The file is cuVS's bytes followed by the bindings' checksum trailer
// (CRC-32C sums, 4 bytes per MiB), which cuVS's reader, stopping at its
// last field, ignores: cuVS (C, C++, Python) reads the file as its own.
func (idx *Index) Serialize(res *safe.Resources, path string) error {
	return kind.Serialize(idx, res, path)
}

// Deserialize reads an index written by Serialize. The index owns its copy
// of the dataset, in device memory: it counts in safe.DeviceMemory.InUse
// (with the norms) until Close. A file whose index does not fit in what
// the device can still give (safe.DeviceMemory.Available: its rows and
// norms, as its header tells) is refused with a *safe.MemoryError before
// cuVS reads it, unless res was made safe.WithoutMemoryCheck.
//
// A file that is not a whole brute-force index (truncated,
// damaged, with bytes after the index) is refused with
// safe.ErrCorruptIndex: its header and layout are checked before any C
// call, and cuVS's own refusals of its contents carry the sentinel too.
//
// The file's checksum trailer is checked first, where it has one: a
// flipped bit anywhere is safe.ErrCorruptIndex naming the damaged byte
// range. A file cuVS wrote has none and loads unproved (the checks above
// only): safe.RequireChecksum refuses it, safe.Verified tells which.
func Deserialize(res *safe.Resources, path string, opts ...safe.DeserializeOption) (*Index, error) {
	return kind.Deserialize(res, path, opts)
}

// checkFile refuses, before any C call, a file whose header is not a
// brute-force index's or that is not whole .npy items to its end.
func checkFile(op, path string, size int64) error {
	if _, err := readHeader(path); err != nil {
		if _, ok := err.(*os.PathError); ok { // not opened: not corrupt
			return fmt.Errorf("%s: %w", op, err)
		}
		return kit.Corrupt(op, err)
	}
	return kit.CheckItemsN(op, path, size, true, nil)
}

// loaded reads what the index holds from the file's header, once cuVS has
// read the file.
func (idx *Index) loaded(op, path string) error {
	hdr, err := readHeader(path)
	if err != nil {
		return kit.Corrupt(op, err)
	}
	idx.set(hdr.rows, hdr.dim, hdr.dtype, hdr.metric)
	idx.owns = true
	return nil
}

// held is the device memory idx holds: a float norm a row for the
// expanded metrics, and, deserialized, a copy of its rows
// (brute_force_serialize.cu, deserialize: the rows read into host memory,
// then copied to the device by the index).
func (idx *Index) held() int64 {
	rows := idx.c.Rows.Load()
	var b int64
	if expanded(idx.metric) {
		b = memest.Round(rows * 4)
	}
	if idx.owns {
		b += memest.Round(rows * idx.c.Dim * memest.ElemSize(idx.dtype))
	}
	return b
}

type header struct {
	rows, dim int64
	dtype     dlpack.DataType
	metric    safe.Metric
}

// readHeader reads the size, dimension, element type and metric at the
// start of a serialized brute-force index: a 4-byte NumPy dtype ("<f4";
// float16 is "<e2", RAFT's name for half), then .npy scalars: format
// version, rows, dim, metric.
func readHeader(path string) (header, error) {
	f, err := os.Open(path)
	if err != nil {
		return header{}, err
	}
	defer f.Close()
	return parseHeader(bufio.NewReader(f))
}

func parseHeader(r *bufio.Reader) (header, error) {
	var h header
	var dt [4]byte
	if _, err := io.ReadFull(r, dt[:]); err != nil {
		return h, fmt.Errorf("not a brute-force index: %w", err)
	}
	switch string(dt[:3]) {
	case "<f4":
		h.dtype = dlpack.Float32
	case "<e2":
		h.dtype = dlpack.Float16
	default:
		return h, fmt.Errorf("not a brute-force index (element type %q)", dt[:3])
	}
	var v [4]int64
	for i := range v {
		s, err := npy.ReadScalar(r)
		if err != nil {
			return h, fmt.Errorf("not a brute-force index: %w", err)
		}
		v[i] = s.Int
	}
	h.rows, h.dim, h.metric = v[1], v[2], safe.Metric(v[3])
	if h.rows < 1 || h.dim < 1 {
		return h, fmt.Errorf("not a brute-force index (%d rows of dimension %d)", h.rows, h.dim)
	}
	if !h.metric.Valid() {
		return h, fmt.Errorf("not a brute-force index (metric %d)", v[3])
	}
	return h, nil
}

// Close frees the index, waiting for searches in flight, and ends its
// borrow of the dataset (or frees its copy of a host dataset). Closing
// twice, or closing the zero Index, is harmless; if freeing fails, a later
// Close tries again. C call: cuvsBruteForceIndexDestroy.
func (idx *Index) Close() error { return kind.Close(idx) }
