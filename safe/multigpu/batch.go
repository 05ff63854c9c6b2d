package multigpu

import (
	"math"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// hostBuf is Go memory lent as a row-major CPU matrix.
type hostBuf struct {
	data  []byte
	shape []int64
	dtype dlpack.DataType
}

func newHostBuf(rows, cols int64, dt dlpack.DataType) *hostBuf {
	n := max(rows*cols*dt.ElemSize(), 1)
	return &hostBuf{data: make([]byte, n), shape: []int64{rows, cols}, dtype: dt}
}

func (b *hostBuf) View() (dlpack.View, error) {
	return dlpack.FromRawParts(unsafe.Pointer(&b.data[0]), dlpack.Device{Type: dlpack.CPU}, b.shape, nil, b.dtype)
}

func (b *hostBuf) ViewMut() (dlpack.ViewMut, error) {
	return dlpack.FromRawPartsMut(unsafe.Pointer(&b.data[0]), dlpack.Device{Type: dlpack.CPU}, b.shape, nil, b.dtype)
}

// copyBetween copies src into dst (cuvsMatrixCopy on res, then a stream
// sync): device ↔ host staging.
func copyBetween(op string, res *safe.Resources, src dlpack.Tensor, dst dlpack.TensorMut) error {
	sv, err := src.View()
	if err != nil {
		return kit.Argf(op, "queries", "%w", err)
	}
	dv, err := dst.ViewMut()
	if err != nil {
		return kit.Argf(op, "output", "%w", err)
	}
	c := dlpack.Begin(op)
	defer c.End()
	st, err := c.In(&sv)
	if err != nil {
		return kit.Argf(op, "input", "%w", err)
	}
	dt, err := c.Out(&dv)
	if err != nil {
		return kit.Argf(op, "output", "%w", err)
	}
	return kit.CopyBound(op, res, st, dt)
}

// mgSearcher adapts a multi-GPU index for safe/batch.
type mgSearcher struct {
	op     string
	dtype  func() dlpack.DataType
	dim    func() int
	rows   func() int
	search func(q dlpack.Tensor, n, d dlpack.TensorMut) error
}

func (s *mgSearcher) DType() dlpack.DataType           { return s.dtype() }
func (s *mgSearcher) Dim() int                         { return s.dim() }
func (s *mgSearcher) NeighborTypes() []dlpack.DataType { return []dlpack.DataType{dlpack.Int64} }

// Rows is the index's rows, or, when not known (deserialized), the largest
// int: cuVS then checks k.
func (s *mgSearcher) Rows() int {
	if r := s.rows(); r >= 0 {
		return r
	}
	return math.MaxInt
}

// SearchBatch copies the batch's queries from the Batcher's device buffers
// to Go memory, searches them on the multi-GPU index (host memory in and
// out, as the C API wants), and copies the results back to the Batcher's
// device buffers, all on res's stream, synchronized.
func (s *mgSearcher) SearchBatch(res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error {
	qv, err := queries.View()
	if err != nil {
		return kit.Argf(s.op, "queries", "%w", err)
	}
	nv, err := neighbors.ViewMut()
	if err != nil {
		return kit.Argf(s.op, "neighbors", "%w", err)
	}
	n, dim, k := qv.Dim(0), qv.Dim(1), nv.Dim(1)
	hq := newHostBuf(n, dim, qv.DType())
	hn := newHostBuf(n, k, dlpack.Int64)
	hd := newHostBuf(n, k, dlpack.Float32)
	if err := copyBetween(s.op, res, queries, hq); err != nil {
		return err
	}
	if err := s.search(hq, hn, hd); err != nil {
		return err
	}
	if err := copyBetween(s.op, res, hn, neighbors); err != nil {
		return err
	}
	return copyBetween(s.op, res, hd, distances)
}

// Searcher adapts the index for a safe/batch Batcher: every batch the
// Batcher gathers (in device memory, on the Batcher's resources) is
// copied to Go memory and searched with params (copied; nil: cuVS's
// defaults) on mres, the multi-GPU resources, then copied back. One big
// host batch is what the multi-GPU search wants, so many small requests
// gain from the Batcher; the copies cost two host round trips per batch and
// allocate their staging memory. Batches are serialized on mres. The
// multi-GPU search takes no filter. Neighbor ids are int64.
//
// C calls, per batch: cuvsMatrixCopy and cuvsStreamSync (three each),
// what Search calls.
func (idx *IVFFlatIndex) Searcher(mres *Resources, params *IVFFlatSearchParams) (batch.Searcher, error) {
	const op = "multigpu.IVFFlatIndex.Searcher"
	if idx == nil {
		return nil, kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return nil, err
	}
	if mres == nil {
		return nil, kit.Argf(op, "mres", "nil *multigpu.Resources")
	}
	var p IVFFlatSearchParams
	if params != nil {
		p = *params
	}
	return &mgSearcher{op: op, dtype: idx.DType, dim: idx.Dim, rows: idx.Rows,
		search: func(q dlpack.Tensor, n, d dlpack.TensorMut) error { return idx.Search(mres, &p, q, n, d) }}, nil
}

// Searcher adapts the index for a safe/batch Batcher, as
// IVFFlatIndex.Searcher does.
func (idx *IVFPQIndex) Searcher(mres *Resources, params *IVFPQSearchParams) (batch.Searcher, error) {
	const op = "multigpu.IVFPQIndex.Searcher"
	if idx == nil {
		return nil, kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return nil, err
	}
	if mres == nil {
		return nil, kit.Argf(op, "mres", "nil *multigpu.Resources")
	}
	var p IVFPQSearchParams
	if params != nil {
		p = *params
	}
	return &mgSearcher{op: op, dtype: idx.DType, dim: idx.Dim, rows: idx.Rows,
		search: func(q dlpack.Tensor, n, d dlpack.TensorMut) error { return idx.Search(mres, &p, q, n, d) }}, nil
}

// Searcher adapts the index for a safe/batch Batcher, as
// IVFFlatIndex.Searcher does (neighbors int64: the multi-GPU CAGRA search
// writes int64).
func (idx *CagraIndex) Searcher(mres *Resources, params *CagraSearchParams) (batch.Searcher, error) {
	const op = "multigpu.CagraIndex.Searcher"
	if idx == nil {
		return nil, kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return nil, err
	}
	if mres == nil {
		return nil, kit.Argf(op, "mres", "nil *multigpu.Resources")
	}
	var p CagraSearchParams
	if params != nil {
		p = *params
	}
	return &mgSearcher{op: op, dtype: idx.DType, dim: idx.Dim, rows: idx.Rows,
		search: func(q dlpack.Tensor, n, d dlpack.TensorMut) error { return idx.Search(mres, &p, q, n, d) }}, nil
}
