package tiered

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"unsafe"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/integrity"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// The stream format (cuVS's tiered index has no serialization): the magic,
// a little-endian header (fileHeader; from version 2 then the ids given,
// an int64), every row, float32 little-endian, the ANN rows then the fresh
// ones, each tier in id order; from version 2, when fewer rows than ids
// given are written (rows deleted), the id of each row, int64, ascending.
// Version 1 (written before deletions) holds ids 0..Rows-1; it is read.
// After the data, a checksum trailer (safe/internal/integrity: a CRC-32C
// per MiB), which the readers check first; a stream without one (written
// before it) is read unverified, and refused under safe.RequireChecksum.
const (
	magic   = "cuvs-go/tiered\x00\x02"
	magicV1 = "cuvs-go/tiered\x00\x01"
)

type fileHeader struct {
	Backend, Metric                      int32
	MinANNRows                           int64
	CreateANNIndexOnExtend               uint8
	AdaptiveCenters                      uint8
	_                                    [6]byte
	GraphDegree, IntermediateGraphDegree uint64
	FlatLists, FlatIters                 uint32
	PQLists, PQIters, PQBits, PQDim      uint32
	Dim, Rows, ANNRows                   int64
}

// SerializeTo writes the index to w: its parameters, its tier split, its
// live rows (Live() × Dim() float32, copied from the device) and, when
// rows were deleted, their ids, then a checksum trailer (a CRC-32C per MiB:
// DeserializeFrom refuses a stream with a flipped bit as
// safe.ErrCorruptIndex naming the damaged range); it returns the bytes
// written. Deleted rows
// are not written (their ids stay deleted in the index read back). The ANN
// index itself is not written (the C API has no serializer for a tiered
// index): DeserializeFrom rebuilds it over the same rows. A shared use: it
// runs beside searches and Deletes, not beside Extend; it writes one
// deletion state.
//
// C calls: cuvsMatrixCopy, cuvsStreamSync.
func (idx *Index) SerializeTo(res *safe.Resources, w io.Writer) (int64, error) {
	const op = "tiered.Index.SerializeTo"
	if idx == nil {
		return 0, kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return 0, err
	}
	if w == nil {
		return 0, kit.Argf(op, "w", "nil io.Writer")
	}
	if err := idx.life.Enter(op); err != nil {
		return 0, err
	}
	defer idx.life.Leave()
	if err := kit.CheckIndexDevice(res, op, idx.dev); err != nil {
		return 0, err
	}
	rows, stored, ann := idx.rows.Load(), idx.stored.Load(), idx.annRows.Load()
	dead := idx.st.dead.Load()
	host, err := idx.hostRows(res, stored)
	if err != nil {
		return 0, kit.Wrap(op, err)
	}
	// the live rows and their ids, packed
	spans, live := liveSpans(dead, stored)
	var ids []int64
	if live != rows {
		ids = make([]int64, 0, live)
	}
	packed := host[:0]
	var liveANN int64
	for _, s := range spans {
		packed = append(packed, host[s.from*idx.dim:(s.from+s.n)*idx.dim]...)
		liveANN += max(0, min(s.from+s.n, ann)-s.from)
		if ids != nil {
			for p := s.from; p < s.from+s.n; p++ {
				ids = append(ids, idAt(idx.st.ids, p))
			}
		}
	}
	p := idx.p
	if liveANN <= p.MinANNRows || p.annLists() > liveANN {
		liveANN = 0 // too few left for an ANN index: every row fresh
	}
	h := fileHeader{
		Backend: int32(p.Backend), Metric: int32(p.Metric), MinANNRows: p.MinANNRows,
		GraphDegree: p.CAGRA.GraphDegree, IntermediateGraphDegree: p.CAGRA.IntermediateGraphDegree,
		FlatLists: p.IVFFlat.NLists, FlatIters: p.IVFFlat.KMeansNIters,
		PQLists: p.IVFPQ.NLists, PQIters: p.IVFPQ.KMeansNIters, PQBits: p.IVFPQ.PQBits, PQDim: p.IVFPQ.PQDim,
		Dim: idx.dim, Rows: live, ANNRows: liveANN,
	}
	if p.CreateANNIndexOnExtend {
		h.CreateANNIndexOnExtend = 1
	}
	if p.IVFFlat.AdaptiveCenters {
		h.AdaptiveCenters = 1
	}
	cw := &countingWriter{w: w}
	sum := integrity.NewSum()
	bw := bufio.NewWriter(integrity.Writer(cw, sum))
	if _, err := bw.WriteString(magic); err != nil {
		return cw.n, fmt.Errorf("%s: %w", op, err)
	}
	for _, v := range []any{&h, rows, packed} {
		if err := binary.Write(bw, binary.LittleEndian, v); err != nil {
			return cw.n, fmt.Errorf("%s: %w", op, err)
		}
	}
	if ids != nil {
		if err := binary.Write(bw, binary.LittleEndian, ids); err != nil {
			return cw.n, fmt.Errorf("%s: %w", op, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("%s: %w", op, err)
	}
	if _, err := cw.Write(sum.Trailer()); err != nil {
		return cw.n, fmt.Errorf("%s: %w", op, err)
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Serialize writes the index to the file path (SerializeTo's format),
// replacing it.
func (idx *Index) Serialize(res *safe.Resources, path string) error {
	const op = "tiered.Index.Serialize"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if _, err := idx.SerializeTo(res, f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Deserialize reads an index written by Serialize (or SerializeTo) from
// the file path.
func Deserialize(res *safe.Resources, path string, opts ...safe.DeserializeOption) (*Index, error) {
	const op = "tiered.Deserialize"
	if err := kit.CheckFile(op, path); err != nil { // a missing file is fs.ErrNotExist
		return nil, err
	}
	lim, err := kit.Limits(op, opts)
	if err != nil {
		return nil, err
	}
	info, err := kit.VerifyFile(op, path, false, lim)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer f.Close()
	return deserialize(op, res, io.LimitReader(f, info.DataLen), lim.MaxBytes)
}

// DeserializeFrom reads an index written by SerializeTo from r: the same
// live rows, ids (the deleted ones staying deleted), tier split and
// parameters (the deleted rows' storage freed: the ANN tier's live rows
// stay under the ANN index when more than MinANNRows, else every row is
// fresh); the ANN index is rebuilt over the ANN rows
// (cuvsTieredIndexBuild), so its searches match the original's
// approximately (exactly for the fresh tier). A stream of the package's
// version 1 (written before Delete existed) is read too. A stream that is not one
// (bad magic, header, length, a non-finite value) is safe.ErrCorruptIndex;
// safe.MaxBytes bounds its length, checked from the header before the
// rows are read.
func DeserializeFrom(res *safe.Resources, r io.Reader, opts ...safe.DeserializeOption) (*Index, error) {
	const op = "tiered.DeserializeFrom"
	lim, err := kit.Limits(op, opts)
	if err != nil {
		return nil, err
	}
	return kit.DeserializeFrom(op, r, opts, func(path string) (*Index, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		defer f.Close()
		return deserialize(op, res, f, lim.MaxBytes)
	})
}

// deserialize reads the stream's data (its checksum checked and cut off
// by the caller) from r; maxBytes (0: none) bounds its length.
func deserialize(op string, res *safe.Resources, r io.Reader, maxBytes int64) (*Index, error) {
	br := bufio.NewReader(r)
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(br, m); err != nil || (string(m) != magic && string(m) != magicV1) {
		return nil, kit.Corrupt(op, errors.New("not a tiered index stream (magic)"))
	}
	v1 := string(m) == magicV1
	var h fileHeader
	if err := binary.Read(br, binary.LittleEndian, &h); err != nil {
		return nil, kit.Corrupt(op, fmt.Errorf("header: %w", err))
	}
	ids := h.Rows // ids given
	if !v1 {
		if err := binary.Read(br, binary.LittleEndian, &ids); err != nil {
			return nil, kit.Corrupt(op, fmt.Errorf("header: %w", err))
		}
	}
	p := IndexParams{
		Backend: Backend(h.Backend), Metric: safe.Metric(h.Metric), MinANNRows: h.MinANNRows,
		CreateANNIndexOnExtend: h.CreateANNIndexOnExtend == 1,
		CAGRA:                  CAGRAParams{GraphDegree: h.GraphDegree, IntermediateGraphDegree: h.IntermediateGraphDegree},
		IVFFlat:                IVFFlatParams{NLists: h.FlatLists, KMeansNIters: h.FlatIters, AdaptiveCenters: h.AdaptiveCenters == 1},
		IVFPQ:                  IVFPQParams{NLists: h.PQLists, KMeansNIters: h.PQIters, PQBits: h.PQBits, PQDim: h.PQDim},
	}
	if err := p.validate(op); err != nil {
		return nil, kit.Corrupt(op, err)
	}
	if h.Dim < 1 || h.Rows < 0 || (v1 && h.Rows < 1) || ids < max(1, h.Rows) || h.ANNRows < 0 || h.ANNRows > h.Rows ||
		(h.ANNRows > 0 && h.ANNRows <= p.MinANNRows) || h.Rows > math.MaxInt64/8/h.Dim {
		return nil, kit.Corrupt(op, fmt.Errorf("shape %d × %d with %d ANN rows, %d ids", h.Rows, h.Dim, h.ANNRows, ids))
	}
	size := int64(len(magic)) + int64(unsafe.Sizeof(h)) + h.Rows*h.Dim*4
	if !v1 {
		size += 8
		if ids != h.Rows {
			size += h.Rows * 8
		}
	}
	if maxBytes > 0 && size > maxBytes {
		return nil, kit.Argf(op, "r", "a tiered index of %d bytes, over the limit of %d (safe.MaxBytes)", size, maxBytes)
	}
	host := make([]float32, h.Rows*h.Dim)
	if err := binary.Read(br, binary.LittleEndian, host); err != nil {
		return nil, kit.Corrupt(op, fmt.Errorf("rows: %w", err))
	}
	var idList []int64
	if ids != h.Rows {
		idList = make([]int64, h.Rows)
		if err := binary.Read(br, binary.LittleEndian, idList); err != nil {
			return nil, kit.Corrupt(op, fmt.Errorf("ids: %w", err))
		}
		if !ascending(idList, ids) {
			return nil, kit.Corrupt(op, fmt.Errorf("ids: not ascending in [0, %d)", ids))
		}
	}
	if n, _ := br.Read(make([]byte, 1)); n != 0 {
		return nil, kit.Corrupt(op, errors.New("bytes after the index"))
	}
	if err := kit.CheckFiniteSlice(op, "rows", host, int(h.Dim)); err != nil {
		return nil, kit.Corrupt(op, err)
	}
	return assemble(op, res, &p, host, h.Dim, h.Rows, h.ANNRows, ids, idList)
}

// assemble makes an index of rows (host, n × dim) whose first ann are
// under the ANN index (0: none), rows ids given, ids those of the rows
// (nil: 0..n-1).
func assemble(op string, res *safe.Resources, p *IndexParams, host []float32, dim, n, ann, rows int64, ids []int64) (*Index, error) {
	upload := func(from, to int64) (*safe.DeviceMatrix[float32], error) {
		if to == from {
			return nil, nil
		}
		m, err := safe.DeviceMatrixFrom(res, host[from*dim:to*dim], int(to-from), int(dim))
		return m, kit.Wrap(op, err)
	}
	if ann == n || ann == 0 {
		data, err := upload(0, n)
		if err != nil {
			return nil, err
		}
		q := *p
		if ann == 0 {
			q.MinANNRows = max(q.MinANNRows, n) // all fresh
		}
		idx, err := build(op, res, &q, data, dim, n, rows, ids)
		if idx != nil {
			idx.p = *p
		}
		return idx, err
	}
	annData, err := upload(0, ann)
	if err != nil {
		return nil, err
	}
	lay, err := makeLayout(op, res, p, annData, ann)
	if err != nil {
		return nil, err
	}
	if lay.fresh, err = upload(ann, n); err == nil {
		lay.freshBF, err = freshIndex(res, p.Metric, lay.fresh, n-ann)
	}
	if err != nil {
		lay.free()
		return nil, kit.Wrap(op, err)
	}
	lay.stored, lay.ids = n, ids
	return newWith(op, res, p, dim, rows, &lay)
}
