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

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// The stream format (cuVS's tiered index has no serialization): the magic,
// a little-endian header (fileHeader), then every row, float32
// little-endian, in id order (the ANN rows, then the fresh ones).
const magic = "cuvs-go/tiered\x00\x01"

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

// SerializeTo writes the index to w: its parameters, its tier split and
// every row (Rows() × Dim() float32, copied from the device), and returns
// the bytes written. The ANN index itself is not written (the C API has no
// serializer for a tiered index): DeserializeFrom rebuilds it over the
// same rows. A shared use: it runs beside searches, not beside Extend.
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
	rows, ann := idx.rows.Load(), idx.annRows.Load()
	p := idx.p
	h := fileHeader{
		Backend: int32(p.Backend), Metric: int32(p.Metric), MinANNRows: p.MinANNRows,
		GraphDegree: p.CAGRA.GraphDegree, IntermediateGraphDegree: p.CAGRA.IntermediateGraphDegree,
		FlatLists: p.IVFFlat.NLists, FlatIters: p.IVFFlat.KMeansNIters,
		PQLists: p.IVFPQ.NLists, PQIters: p.IVFPQ.KMeansNIters, PQBits: p.IVFPQ.PQBits, PQDim: p.IVFPQ.PQDim,
		Dim: idx.dim, Rows: rows, ANNRows: ann,
	}
	if p.CreateANNIndexOnExtend {
		h.CreateANNIndexOnExtend = 1
	}
	if p.IVFFlat.AdaptiveCenters {
		h.AdaptiveCenters = 1
	}
	host := make([]float32, rows*idx.dim)
	st := idx.st
	if ann > 0 {
		if err := st.annData.CopyToHost(res, host[:ann*idx.dim]); err != nil {
			return 0, kit.Wrap(op, err)
		}
	}
	if fr := rows - ann; fr > 0 {
		part := host[ann*idx.dim:]
		if int64(st.fresh.Rows()) == fr {
			if err := st.fresh.CopyToHost(res, part); err != nil {
				return 0, kit.Wrap(op, err)
			}
		} else {
			v, err := st.fresh.RowsView(0, int(fr))
			if err == nil {
				var hm *dlpack.HostMatrix[float32]
				if hm, err = dlpack.NewHostMatrix(part, int(fr), int(idx.dim)); err == nil {
					hv, _ := hm.ViewMut()
					err = safe.Copy(res, &v, &hv)
				}
			}
			if err != nil {
				return 0, kit.Wrap(op, err)
			}
		}
	}
	cw := &countingWriter{w: w}
	bw := bufio.NewWriter(cw)
	if _, err := bw.WriteString(magic); err != nil {
		return cw.n, fmt.Errorf("%s: %w", op, err)
	}
	if err := binary.Write(bw, binary.LittleEndian, &h); err != nil {
		return cw.n, fmt.Errorf("%s: %w", op, err)
	}
	if err := binary.Write(bw, binary.LittleEndian, host); err != nil {
		return cw.n, fmt.Errorf("%s: %w", op, err)
	}
	if err := bw.Flush(); err != nil {
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
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer f.Close()
	return deserialize(op, res, f, opts)
}

// DeserializeFrom reads an index written by SerializeTo from r: the same
// rows, ids, tier split and parameters; the ANN index is rebuilt over the
// ANN rows (cuvsTieredIndexBuild), so its searches match the original's
// approximately (exactly for the fresh tier). A stream that is not one
// (bad magic, header, length, a non-finite value) is safe.ErrCorruptIndex;
// safe.MaxBytes bounds its length, checked from the header before the
// rows are read.
func DeserializeFrom(res *safe.Resources, r io.Reader, opts ...safe.DeserializeOption) (*Index, error) {
	return deserialize("tiered.DeserializeFrom", res, r, opts)
}

func deserialize(op string, res *safe.Resources, r io.Reader, opts []safe.DeserializeOption) (*Index, error) {
	if r == nil {
		return nil, kit.Argf(op, "r", "nil io.Reader")
	}
	var lim safe.DeserializeLimits
	for _, o := range opts {
		if o == nil {
			return nil, kit.Argf(op, "opts", "nil DeserializeOption")
		}
		o(&lim)
	}
	if lim.MaxBytes < 0 {
		return nil, kit.Argf(op, "opts", "MaxBytes(%d): want a positive limit, or 0 for none", lim.MaxBytes)
	}
	br := bufio.NewReader(r)
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(br, m); err != nil || string(m) != magic {
		return nil, kit.Corrupt(op, errors.New("not a tiered index stream (magic)"))
	}
	var h fileHeader
	if err := binary.Read(br, binary.LittleEndian, &h); err != nil {
		return nil, kit.Corrupt(op, fmt.Errorf("header: %w", err))
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
	if h.Dim < 1 || h.Rows < 1 || h.ANNRows < 0 || h.ANNRows > h.Rows || (h.ANNRows > 0 && h.ANNRows <= p.MinANNRows) ||
		h.Rows > math.MaxInt64/4/h.Dim {
		return nil, kit.Corrupt(op, fmt.Errorf("shape %d × %d with %d ANN rows", h.Rows, h.Dim, h.ANNRows))
	}
	size := int64(len(magic)) + int64(unsafe.Sizeof(h)) + h.Rows*h.Dim*4
	if lim.MaxBytes > 0 && size > lim.MaxBytes {
		return nil, kit.Argf(op, "r", "a tiered index of %d bytes, over the limit of %d (safe.MaxBytes)", size, lim.MaxBytes)
	}
	host := make([]float32, h.Rows*h.Dim)
	if err := binary.Read(br, binary.LittleEndian, host); err != nil {
		return nil, kit.Corrupt(op, fmt.Errorf("rows: %w", err))
	}
	if n, _ := br.Read(make([]byte, 1)); n != 0 {
		return nil, kit.Corrupt(op, errors.New("bytes after the index"))
	}
	if err := kit.CheckFiniteSlice(op, "rows", host, int(h.Dim)); err != nil {
		return nil, kit.Corrupt(op, err)
	}
	return assemble(op, res, &p, host, h.Dim, h.Rows, h.ANNRows)
}

// assemble makes an index of rows (host, rows × dim) whose first ann are
// under the ANN index (0: none).
func assemble(op string, res *safe.Resources, p *IndexParams, rows []float32, dim, n, ann int64) (*Index, error) {
	if ann == n || ann == 0 {
		data, err := safe.DeviceMatrixFrom(res, rows, int(n), int(dim))
		if err != nil {
			return nil, kit.Wrap(op, err)
		}
		q := *p
		if ann == 0 {
			q.MinANNRows = max(q.MinANNRows, n) // all fresh
		}
		idx, err := build(op, res, &q, data, n)
		if idx != nil {
			idx.p = *p
		}
		return idx, err
	}
	annData, err := safe.DeviceMatrixFrom(res, rows[:ann*dim], int(ann), int(dim))
	if err != nil {
		return nil, kit.Wrap(op, err)
	}
	idx, err := build(op, res, p, annData, ann)
	if err != nil {
		return nil, err
	}
	hm, err := dlpack.NewHostMatrix(rows[ann*dim:], int(n-ann), int(dim))
	if err == nil {
		err = idx.Extend(res, hm)
	}
	if err != nil {
		_ = idx.Close()
		return nil, err
	}
	return idx, nil
}
