package hnsw

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// fileInfo is what Deserialize reads of an hnswlib file before cuVS does.
type fileInfo struct {
	count      int64
	dim        int64 // the vector's bytes over the element type's size
	maxLevel   int32
	entryLevel int32 // the enterpoint's own level
	// labelsNotRows: some element's label (the id a search returns) is
	// not a row number below count
	labelsNotRows bool
}

// The header hnswlib's saveIndex writes: offsetLevel0, max_elements,
// cur_element_count, size_data_per_element, label_offset, offsetData
// (uint64 each), maxlevel, enterpoint_node (int32), maxM, maxM0, M
// (uint64), mult (float64), ef_construction (uint64).
const headerBytes = 6*8 + 2*4 + 3*8 + 8 + 8

// maxDim bounds the dimension a file may claim.
const maxDim = 1 << 24

// header is hnswlib's header, as saveIndex writes it.
type header struct {
	OffsetLevel0, MaxElements, Count, PerElement, LabelOffset, OffsetData uint64
	MaxLevel, EnterPoint                                                  int32
	MaxM, MaxM0, M                                                        uint64
	Mult                                                                  float64
	EfConstruction                                                        uint64
}

// parseHeader reads hnswlib's header from the first headerBytes of b
// and checks its layout for vectors of elem-byte elements: an element is
// the base layer's link list (a count and maxM0 ids), the vector, then an
// 8-byte label (hnswlib's saveIndex of cuVS's index_impl and of hnswlib
// itself, 0.6 to 0.8). It returns the header and the dimension: the
// vector's bytes over elem. size is the file's size, which the elements
// must fit in.
func parseHeader(b []byte, elem, size int64) (header, int64, error) {
	var h header
	if len(b) < headerBytes {
		return h, 0, fmt.Errorf("%d bytes, shorter than hnswlib's %d-byte header", size, headerBytes)
	}
	le := binary.LittleEndian
	u := func(i int) uint64 { return le.Uint64(b[i:]) }
	h.OffsetLevel0, h.MaxElements, h.Count, h.PerElement, h.LabelOffset, h.OffsetData = u(0), u(8), u(16), u(24), u(32), u(40)
	h.MaxLevel, h.EnterPoint = int32(le.Uint32(b[48:])), int32(le.Uint32(b[52:]))
	h.MaxM, h.MaxM0, h.M = u(56), u(64), u(72)
	h.Mult = math.Float64frombits(u(80))
	h.EfConstruction = u(88)
	links0 := 4 + h.MaxM0*4
	switch {
	case h.OffsetLevel0 != 0: // hnswlib writes 0 and adds it to every element's address
		return h, 0, fmt.Errorf("level-0 offset %d, hnswlib's is 0: not an hnswlib index", h.OffsetLevel0)
	case h.MaxM0 > 1<<16 || h.MaxM > 1<<16:
		return h, 0, fmt.Errorf("maxM %d, maxM0 %d: not an hnswlib index", h.MaxM, h.MaxM0)
	case h.OffsetData != links0:
		return h, 0, fmt.Errorf("vectors at byte %d of an element, after a base-layer link list of %d bytes: not an hnswlib index", h.OffsetData, links0)
	case h.LabelOffset <= h.OffsetData || h.LabelOffset-h.OffsetData > maxDim*8:
		return h, 0, fmt.Errorf("vectors from byte %d to %d of an element: not an hnswlib index", h.OffsetData, h.LabelOffset)
	case h.PerElement != h.LabelOffset+8:
		return h, 0, fmt.Errorf("elements of %d bytes with labels at %d: not an hnswlib index (8-byte labels end them)", h.PerElement, h.LabelOffset)
	}
	vec := int64(h.LabelOffset - h.OffsetData)
	dim := vec / elem
	switch {
	case vec%elem != 0:
		return h, 0, fmt.Errorf("vectors of %d bytes, not a whole number of %d-byte elements (wrong dtype?%s)", vec, elem, fits(h.OffsetData, h.LabelOffset))
	case dim > maxDim:
		return h, 0, fmt.Errorf("dimension %d, above %d", dim, maxDim)
	case h.Count > h.MaxElements:
		return h, 0, fmt.Errorf("%d elements, more than its capacity %d", h.Count, h.MaxElements)
	case h.Count > uint64(size)/h.PerElement:
		return h, 0, fmt.Errorf("%d elements of %d bytes do not fit in %d bytes", h.Count, h.PerElement, size)
	case h.Count > 0 && (h.EnterPoint < 0 || uint64(h.EnterPoint) >= h.Count):
		return h, 0, fmt.Errorf("entry point %d outside its %d elements", h.EnterPoint, h.Count)
	case h.MaxLevel < 0 || h.MaxLevel > 64:
		return h, 0, fmt.Errorf("max level %d", h.MaxLevel)
	}
	return h, dim, nil
}

// readFile checks an hnswlib file for vectors of dtype elements: the file
// gives the byte size of a vector (dim × the element's size), not the
// element type, which Deserialize is given; the dimension follows. For
// float16 and float32 every value read must be finite (a file of 8-bit
// vectors read as floats is likely to hold NaN or infinity bit patterns;
// one of float32 read as 8-bit integers of 4 × dim holds nothing invalid:
// that mistake cannot be seen). Every label must be an int64 id below
// safe.SentinelID64. It also walks the elements' link lists to the
// file's end. A file that cannot be opened or stat'ed gives os's error
// (*fs.PathError: fs.ErrNotExist for a missing file, with the path),
// wrapped in openError; every other error is the file's (for
// safe.ErrCorruptIndex).
func readFile(path string, dtype dlpack.DataType) (fileInfo, error) {
	elem := dtype.ElemSize()
	f, err := os.Open(path)
	if err != nil {
		return fileInfo{}, openError{err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fileInfo{}, openError{err}
	}
	size := st.Size()
	r := bufio.NewReaderSize(f, 1<<16)
	hb := make([]byte, headerBytes)
	n, _ := io.ReadFull(r, hb)
	h, dim, err := parseHeader(hb[:n], elem, size)
	if err != nil {
		return fileInfo{}, err
	}
	links0 := 4 + h.MaxM0*4
	labelsNotRows := false
	elemBuf := make([]byte, h.PerElement)
	for i := uint64(0); i < h.Count; i++ {
		if _, err := io.ReadFull(r, elemBuf); err != nil {
			return fileInfo{}, fmt.Errorf("truncated in its elements")
		}
		// the base layer's links: a count (hnswlib reads its low 16 bits)
		// and up to maxM0 ids, each of an element (hnswlib follows them
		// unchecked)
		if err := checkLinks(elemBuf[:links0], h.MaxM0, h.Count); err != nil {
			return fileInfo{}, fmt.Errorf("element %d, base layer: %w", i, err)
		}
		// the vector sits at links0, a multiple of 4 bytes into elemBuf
		if j, what := kit.FirstNonFinite(unsafe.Pointer(&elemBuf[links0]), int(dim), dtype); j >= 0 {
			return fileInfo{}, fmt.Errorf("element %d holds %s at column %d read as %s: not a file of %s vectors of dimension %d (wrong dtype?)", i, what, j, dtype, dtype, dim)
		}
		label := binary.LittleEndian.Uint64(elemBuf[h.LabelOffset:])
		if label >= math.MaxInt64 {
			return fileInfo{}, fmt.Errorf("element %d has label %d, beyond the int64 ids below safe.SentinelID64 that searches return", i, label)
		}
		labelsNotRows = labelsNotRows || label >= h.Count
	}
	block := uint32((h.MaxM + 1) * 4)
	info := fileInfo{count: int64(h.Count), dim: dim, maxLevel: h.MaxLevel, labelsNotRows: labelsNotRows}
	var b [4]byte
	var levels []byte
	level := make([]uint32, h.Count) // each element's top level
	upper := make([][]byte, h.Count) // its link lists above the base layer
	for i := uint64(0); i < h.Count; i++ {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return fileInfo{}, fmt.Errorf("truncated in the link lists (element %d of %d)", i, h.Count)
		}
		n := binary.LittleEndian.Uint32(b[:])
		if n%block != 0 {
			return fileInfo{}, fmt.Errorf("element %d: link lists of %d bytes, not a multiple of %d", i, n, block)
		}
		if n/block > uint32(h.MaxLevel) {
			return fileInfo{}, fmt.Errorf("element %d: %d levels, above the index's max level %d", i, n/block, h.MaxLevel)
		}
		if int64(i) == int64(h.EnterPoint) {
			info.entryLevel = int32(n / block)
		}
		if uint64(cap(levels)) < uint64(n) {
			levels = make([]byte, n)
		}
		levels = levels[:n]
		if _, err := io.ReadFull(r, levels); err != nil {
			return fileInfo{}, fmt.Errorf("truncated in the link lists (element %d of %d)", i, h.Count)
		}
		for l := uint32(0); l < n/block; l++ {
			if err := checkLinks(levels[l*block:(l+1)*block], h.MaxM, h.Count); err != nil {
				return fileInfo{}, fmt.Errorf("element %d, level %d: %w", i, l+1, err)
			}
		}
		level[i] = n / block
		if n > 0 {
			upper[i] = append([]byte(nil), levels...)
		}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return fileInfo{}, errors.New("bytes after the index")
	}
	// A link on level l leads to an element that has level l (hnswlib
	// reads the target's list on that level unchecked).
	for i, u := range upper {
		for l := uint32(0); l < level[i]; l++ {
			list := u[l*block:]
			for j := uint32(0); j < uint32(binary.LittleEndian.Uint16(list)); j++ {
				if t := binary.LittleEndian.Uint32(list[4+4*j:]); level[t] < l+1 {
					return fileInfo{}, fmt.Errorf("element %d, level %d: a link to element %d, which has %d levels", i, l+1, t, level[t])
				}
			}
		}
	}
	return info, nil
}

// checkLinks checks one hnswlib link list: a count of at most max links
// (hnswlib reads the low 16 bits of its first 4 bytes), then the ids, each
// below count, the elements'.
func checkLinks(list []byte, max, count uint64) error {
	n := uint64(binary.LittleEndian.Uint16(list))
	if n > max || 4+4*n > uint64(len(list)) {
		return fmt.Errorf("%d links, more than its %d", n, max)
	}
	for j := uint64(0); j < n; j++ {
		if id := uint64(binary.LittleEndian.Uint32(list[4+4*j:])); id >= count {
			return fmt.Errorf("a link to element %d, of %d", id, count)
		}
	}
	return nil
}

// openError is os's error for a file Deserialize cannot open: the
// caller's (a missing file, a denied permission), not the file's.
type openError struct{ err error }

func (e openError) Error() string { return e.err.Error() }
func (e openError) Unwrap() error { return e.err }

// fits names the (dim, dtype) pairs that vectors of the bytes from..to
// of an element fit, for a mismatch's message.
func fits(from, to uint64) string {
	if to <= from {
		return ""
	}
	n := to - from
	var s []string
	for _, t := range elemTypes {
		if es := uint64(t.ElemSize()); n%es == 0 {
			s = append(s, fmt.Sprintf("%d of %s", n/es, t))
		}
	}
	return fmt.Sprintf(" the file's vectors are %d bytes: dimension %s", n, strings.Join(s, ", "))
}
