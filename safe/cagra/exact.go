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
// SearchParams.FilterPath) use the same values when fewer rows are
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
	if e.bf != 0 {
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
	// bf's norms are allocated on res's stream and freed there when the
	// index is closed: res must outlive it (safe.Resources.Close).
	if err := idx.c.Life.Keep(res, op); err != nil {
		return 0, err
	}
	e := &exactState{mt: cDLManaged()}
	ok := false
	defer func() {
		if !ok {
			e.release()
		}
	}()
	if err := generated.CuvsCagraIndexGetDataset(idx.c.H, e.mt); err != nil {
		return 0, kit.Wrap(op, err)
	}
	im, err := dlpack.Import(e.mt)
	if err != nil {
		return 0, fmt.Errorf("%s: the index's dataset: %w", op, err)
	}
	e.view = im
	v, err := im.View()
	if err == nil {
		v, err = logicalRows(op, v, idx.c.Dim) // 26.08: [rows, row width] without strides
	}
	if err != nil {
		return 0, fmt.Errorf("%s: the index's dataset: %w", op, err)
	}
	if v.NDim() != 2 || v.Dim(0) != idx.c.Rows.Load() || v.Dim(1) != idx.c.Dim {
		return 0, kit.Argf(op, "params.FilterPath", "the index holds no dataset (compressed, or deserialized without it; dataset shape %v): the exact path for selective filters needs one; set FilterPath to safe.FilterIndex to search the graph anyway", v.Shape())
	}
	call := dlpack.Begin(op) // ends before a failed build's release
	defer call.End()
	src := e.mt
	if v.Stride(0) != v.Dim(1) {
		// brute force wants packed rows: copy the padded dataset once.
		pv, err := e.packCopy(res, &v)
		if err != nil {
			return 0, err
		}
		if src, err = call.In(&pv); err != nil {
			return 0, fmt.Errorf("%s: %w", op, err)
		}
	}
	var bf generated.CuvsBruteForceIndex_t // a local: e holds Go pointers
	if err := generated.CuvsBruteForceIndexCreate(&bf); err != nil {
		return 0, kit.Wrap(op, err)
	}
	e.bf = bf
	h, err := kit.Lock(res, op)
	if err != nil {
		return 0, err
	}
	err = generated.CuvsBruteForceBuild(h, src, kit.CMetric(safe.L2Expanded), 0, e.bf)
	if err == nil {
		// Other goroutines search it on their own streams.
		err = generated.CuvsStreamSync(h)
	}
	kit.Unlock(res)
	if err != nil {
		return 0, kit.Wrap(op, err)
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
