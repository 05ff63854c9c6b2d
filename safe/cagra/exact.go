package cagra

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"unsafe"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// The values CAGRA writes in a result slot it could not fill (seen on the
// real library with selective filters, where graph search cannot reach the
// allowed rows): the index type's maximum with the top bit cleared, in
// uint32 and int64 neighbors alike, and float32's maximum as the distance.
// Slots are filled in order of distance, so unfilled ones come last in a
// row. Filtered searches that take the exact path (see
// SearchParams.FilterExactBelow) use the same values when fewer rows are
// allowed than k. These are what device outputs hold; results in Go memory
// (SearchSlice's safe.Results) hold safe.SentinelID64 and +Inf instead, as
// every package's do.
const (
	SentinelID       = safe.SentinelID32 // 2147483647, CAGRA's own
	SentinelDistance = math.MaxFloat32   // 3.4028235e+38
)

// Valid reports whether id is a neighbor: neither SentinelID (device
// outputs) nor safe's sentinel of N (results in Go memory).
func Valid[N uint32 | int64](id N) bool {
	return id != N(SentinelID) && safe.Valid(id)
}

// Trim returns the leading part of one result row (its neighbors and,
// if not nil, distances, in host memory) that holds real neighbors: the
// row cut at its first slot that is not Valid.
func Trim[N uint32 | int64](ids []N, dists []float32) ([]N, []float32) {
	n := len(ids)
	for i, id := range ids {
		if !Valid(id) {
			n = i
			break
		}
	}
	if dists != nil {
		dists = dists[:min(n, len(dists))]
	}
	return ids[:n], dists
}

// DefaultFilterExactBelow is the fraction of an index's rows that a filter
// must allow for a filtered search to stay a graph search. Measured on the
// real library (20,000 rows): with 3 or 50 rows allowed (0.25%) graph search
// returned only the query's own row, with 2,000 (10%) it was complete;
// between those it was not measured. 1% sends the failing cases to the
// exact search and keeps graph search for what was seen to work.
const DefaultFilterExactBelow = 0.01

// exactThreshold is the fraction in force, or a negative number for never.
func (s *SearchParams) exactThreshold() float64 {
	if s.FilterExactBelow == 0 {
		return DefaultFilterExactBelow
	}
	return s.FilterExactBelow
}

// wantsExact reports whether a search of k neighbors with filter f takes the
// exact path.
func (s *SearchParams) wantsExact(f *safe.Filter, rows, k int64) bool {
	if f == nil || f.Kind() != safe.Bitset {
		return false
	}
	th := s.exactThreshold()
	if th < 0 {
		return false
	}
	a := int64(f.Allowed())
	return a < k || float64(a) < th*float64(rows)
}

// exactState is the brute-force index the exact path searches: built on
// first use over the index's own dataset (device memory cuVS already holds)
// and kept until Extend or Close.
type exactState struct {
	bf   generated.CuvsBruteForceIndex_t
	view *dlpack.Imported           // the dataset view bf reads, when its rows are packed
	mt   *generated.DLManagedTensor // our C memory holding that view
	pack interface{ Close() error } // a packed copy, when the dataset's rows are padded
}

func (e *exactState) release() {
	if e == nil {
		return
	}
	if e.bf != nil {
		_ = generated.CuvsBruteForceIndexDestroy(e.bf)
	}
	if e.view != nil {
		_ = e.view.Close()
	}
	if e.mt != nil {
		cFree(unsafe.Pointer(e.mt))
	}
	if e.pack != nil {
		_ = e.pack.Close()
	}
}

// noExact says why an index cannot take the exact path, or "" if it can.
func (idx *Index) noExact() string {
	switch {
	case idx.onDisk:
		return "the index is stored on disk (ACE disk mode)"
	case !idx.metricKnown:
		return "the index's metric is unknown (an index deserialized from a file whose header was not readable)"
	case idx.metric != safe.L2Expanded:
		// Whether brute force's distances for the other metrics match
		// CAGRA's (sign, scale) is not known from a real run.
		return fmt.Sprintf("the exact path supports L2Expanded only, the index uses %s", idx.metric)
	case idx.dtype != dlpack.Float32 && idx.dtype != dlpack.Float16:
		return fmt.Sprintf("brute force (the exact path) takes float32 or float16 data, the index holds %s", idx.dtype)
	}
	return ""
}

// exactIndex returns the brute-force index over the dataset, building it
// on first use. The caller holds a shared use of idx.
func (idx *Index) exactIndex(op string, res *safe.Resources) (generated.CuvsBruteForceIndex_t, error) {
	idx.exactMu.Lock()
	defer idx.exactMu.Unlock()
	if idx.exact.e != nil {
		return idx.exact.e.bf, nil
	}
	e := &exactState{mt: cDLManaged()}
	ok := false
	defer func() {
		if !ok {
			e.release()
		}
	}()
	if err := generated.CuvsCagraIndexGetDataset(idx.h, e.mt); err != nil {
		return nil, kit.Wrap(op, err)
	}
	im, err := dlpack.Import(e.mt)
	if err != nil {
		return nil, fmt.Errorf("%s: the index's dataset: %w", op, err)
	}
	e.view = im
	v, err := im.View()
	if err != nil {
		return nil, fmt.Errorf("%s: the index's dataset: %w", op, err)
	}
	if v.NDim() != 2 || v.Dim(0) != idx.rows.Load() || v.Dim(1) != idx.dim {
		return nil, kit.Argf(op, "params.FilterExactBelow", "the index holds no dataset (compressed, or deserialized without it; dataset shape %v): the exact path for selective filters needs one; set FilterExactBelow < 0 to search the graph anyway", v.Shape())
	}
	call := dlpack.Begin(op) // ends before a failed build's release
	defer call.End()
	src := e.mt
	if v.Stride(0) != v.Dim(1) {
		// brute force wants packed rows: copy the padded dataset once.
		pv, err := e.packCopy(res, &v)
		if err != nil {
			return nil, err
		}
		if src, err = call.In(&pv); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	var bf generated.CuvsBruteForceIndex_t // a local: e holds Go pointers
	if err := generated.CuvsBruteForceIndexCreate(&bf); err != nil {
		return nil, kit.Wrap(op, err)
	}
	e.bf = bf
	h, err := kit.Lock(res, op)
	if err != nil {
		return nil, err
	}
	err = generated.CuvsBruteForceBuild(h, src, kit.CMetric(safe.L2Expanded), 0, e.bf)
	if err == nil {
		// Other goroutines search it on their own streams.
		err = generated.CuvsStreamSync(h)
	}
	kit.Unlock(res)
	if err != nil {
		return nil, kit.Wrap(op, err)
	}
	ok = true
	idx.exact.e = e
	return e.bf, nil
}

// packCopy copies the padded dataset v into a packed device matrix, which e
// keeps (bf reads it until release closes it), and returns its view.
func (e *exactState) packCopy(res *safe.Resources, v *dlpack.View) (dlpack.View, error) {
	r, c := int(v.Dim(0)), int(v.Dim(1))
	var m dlpack.TensorMut
	var err error
	if v.DType() == dlpack.Float16 {
		var d *safe.DeviceMatrix[float16.Float16]
		d, err = safe.NewDeviceMatrix[float16.Float16](res, r, c)
		if err == nil {
			m, e.pack = d, d
		}
	} else {
		var d *safe.DeviceMatrix[float32]
		d, err = safe.NewDeviceMatrix[float32](res, r, c)
		if err == nil {
			m, e.pack = d, d
		}
	}
	if err != nil {
		return dlpack.View{}, err
	}
	mv, err := m.ViewMut()
	if err != nil {
		return dlpack.View{}, err
	}
	if err := safe.Copy(res, v, &mv); err != nil { // mv is bound, and expires, here
		return dlpack.View{}, err
	}
	fresh, err := m.ViewMut()
	if err != nil {
		return dlpack.View{}, err
	}
	return fresh.View()
}

// searchExact runs a filtered search as exact brute force over the index's
// dataset: the true nearest allowed rows, sentinels past the allowed count.
// It synchronizes res's stream unless neighbors are int64 and at least k
// rows are allowed (then it is one asynchronous C call).
func (idx *Index) searchExact(op string, res *safe.Resources, t *kit.SearchTensors, f generated.CuvsFilter, allowed int64) error {
	if why := idx.noExact(); why != "" {
		return kit.Argf(op, "params.FilterExactBelow", "a filter allowing %d of %d rows needs the exact path, but %s; set FilterExactBelow < 0 to search the graph anyway (CAGRA then fills slots it cannot reach with SentinelID)", allowed, idx.rows.Load(), why)
	}
	bf, err := idx.exactIndex(op, res)
	if err != nil {
		return err
	}
	n, k := t.N, t.K
	kk := min(k, allowed)
	wide := t.Neighbors.DlTensor.Dtype.Bits == 64
	if kk == k && wide {
		h, err := kit.Lock(res, op)
		if err != nil {
			return err
		}
		err = generated.CuvsBruteForceSearch(h, bf, t.Queries, t.Neighbors, t.Distances, f)
		kit.Unlock(res)
		return kit.Wrap(op, err)
	}
	// Brute force must not be asked for more neighbors than rows allowed
	// (the real library then returns uninitialised memory): search kk into
	// scratch, then write the caller's k columns from the host.
	ids := make([]int64, n*kk)
	dists := make([]float32, n*kk)
	if kk > 0 {
		if err := idx.exactInto(op, res, bf, t, f, ids, dists, n, kk); err != nil {
			return err
		}
	}
	outD := make([]float32, n*k)
	fill(outD, dists, n, k, kk, SentinelDistance)
	var outN dlpack.Tensor
	if wide {
		o := make([]int64, n*k)
		fill(o, ids, n, k, kk, int64(SentinelID))
		outN, err = dlpack.NewHostMatrix(o, int(n), int(k))
	} else {
		o := make([]uint32, n*k)
		w := make([]uint32, len(ids))
		for i, id := range ids {
			w[i] = uint32(id)
		}
		fill(o, w, n, k, kk, SentinelID)
		outN, err = dlpack.NewHostMatrix(o, int(n), int(k))
	}
	if err != nil {
		return err
	}
	hd, err := dlpack.NewHostMatrix(outD, int(n), int(k))
	if err != nil {
		return err
	}
	call := dlpack.Begin(op)
	defer call.End()
	for i, src := range []dlpack.Tensor{outN, hd} {
		hv, err := src.View()
		if err != nil {
			return err
		}
		st, err := call.In(&hv)
		if err != nil {
			return err
		}
		dst := t.Neighbors
		if i == 1 {
			dst = t.Distances
		}
		if err := kit.CopyBound(op, res, st, dst); err != nil {
			return err
		}
	}
	return nil
}

// exactInto searches kk neighbors into scratch device memory and copies
// them to ids and dists (n × kk, host).
func (idx *Index) exactInto(op string, res *safe.Resources, bf generated.CuvsBruteForceIndex_t, t *kit.SearchTensors, f generated.CuvsFilter, ids []int64, dists []float32, n, kk int64) error {
	nb, err := safe.NewDeviceMatrix[int64](res, int(n), int(kk))
	if err != nil {
		return err
	}
	defer nb.Close()
	ds, err := safe.NewDeviceMatrix[float32](res, int(n), int(kk))
	if err != nil {
		return err
	}
	defer ds.Close()
	hn, err := dlpack.NewHostMatrix(ids, int(n), int(kk))
	if err != nil {
		return err
	}
	hd, err := dlpack.NewHostMatrix(dists, int(n), int(kk))
	if err != nil {
		return err
	}
	call := dlpack.Begin(op) // ends before the deferred Closes
	defer call.End()
	var bound [4]*generated.DLManagedTensor
	for i, m := range []dlpack.TensorMut{nb, ds, hn, hd} {
		mv, err := m.ViewMut()
		if err != nil {
			return err
		}
		if bound[i], err = call.Out(&mv); err != nil {
			return err
		}
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = generated.CuvsBruteForceSearch(h, bf, t.Queries, bound[0], bound[1], f)
	kit.Unlock(res)
	if err != nil {
		return kit.Wrap(op, err)
	}
	if err := kit.CopyBound(op, res, bound[0], bound[2]); err != nil {
		return err
	}
	return kit.CopyBound(op, res, bound[1], bound[3])
}

// fill writes n rows of k values into out: each row's kk values from in,
// then pad.
func fill[T any](out, in []T, n, k, kk int64, pad T) {
	for q := int64(0); q < n; q++ {
		row := out[q*k : (q+1)*k]
		copy(row, in[q*kk:(q+1)*kk])
		for j := kk; j < k; j++ {
			row[j] = pad
		}
	}
}

// readMetric reads the metric from the header of a file cuvsCagraSerialize
// wrote (a 4-byte dtype tag, then NumPy scalars: version, rows, dim, graph
// degree, metric). ok is false if the header is not in that format.
func readMetric(path string) (m safe.Metric, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var tag [4]byte
	if _, err := io.ReadFull(r, tag[:]); err != nil || tag[0] != '<' && tag[0] != '|' && tag[0] != '>' {
		return 0, false
	}
	// version, [26.08: dataset kind,] rows, dim, degree, metric
	s, err := npy.ReadScalar(r)
	if err != nil {
		return 0, false
	}
	n := 4
	if s.Int >= 6 {
		n = 5
	}
	for range n {
		if s, err = npy.ReadScalar(r); err != nil {
			return 0, false
		}
	}
	m = safe.Metric(s.Int)
	return m, m.Valid()
}
