package hnsw

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// fileInfo is what Deserialize reads of an hnswlib file before cuVS does.
type fileInfo struct {
	count      int64
	maxLevel   int32
	entryLevel int32 // the enterpoint's own level
}

// The header hnswlib's saveIndex writes: offsetLevel0, max_elements,
// cur_element_count, size_data_per_element, label_offset, offsetData
// (uint64 each), maxlevel, enterpoint_node (int32), maxM, maxM0, M
// (uint64), mult (float64), ef_construction (uint64).
const headerBytes = 6*8 + 2*4 + 3*8 + 8 + 8

// readFile checks an hnswlib file against the dimension and element type
// Deserialize is given: the file holds neither, and hnswlib's loadIndex
// sizes each element's vector by them, reading beside the elements (no
// error) when they are wrong. What the file does say is the byte size of a
// vector, dim × the element's size: that is checked, and so is, for
// float16 and float32, that every value read is finite (a file of 8-bit
// vectors read as floats is likely to hold NaN or infinity bit patterns;
// one of float32 read as 8-bit integers of 4 × dim holds nothing invalid:
// that mistake cannot be seen). It also walks the elements' upper link
// lists to the file's end. A file that cannot be opened or stat'ed gives
// os's error (*fs.PathError: fs.ErrNotExist for a missing file, with the
// path), wrapped in openError; every other error is the file's (for
// safe.ErrCorruptIndex).
func readFile(path string, dim int64, dtype dlpack.DataType) (fileInfo, error) {
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
	var h struct {
		OffsetLevel0, MaxElements, Count, PerElement, LabelOffset, OffsetData uint64
		MaxLevel, EnterPoint                                                  int32
		MaxM, MaxM0, M                                                        uint64
		Mult                                                                  float64
		EfConstruction                                                        uint64
	}
	if err := binary.Read(r, binary.LittleEndian, &h); err != nil {
		return fileInfo{}, fmt.Errorf("%d bytes, shorter than hnswlib's %d-byte header", size, headerBytes)
	}
	links0 := 4 + h.MaxM0*4
	want := links0 + uint64(dim*elem) + 8
	switch {
	case h.OffsetLevel0 != 0: // hnswlib writes 0 and adds it to every element's address
		return fileInfo{}, fmt.Errorf("level-0 offset %d, hnswlib's is 0: not an hnswlib index", h.OffsetLevel0)
	case h.MaxM0 > 1<<16 || h.MaxM > 1<<16:
		return fileInfo{}, fmt.Errorf("maxM %d, maxM0 %d: not an hnswlib index", h.MaxM, h.MaxM0)
	case h.PerElement != want || h.OffsetData != links0 || h.LabelOffset != links0+uint64(dim*elem):
		return fileInfo{}, fmt.Errorf("elements of %d bytes with vectors at %d..%d; dimension %d of %s needs %d bytes with vectors at %d..%d (wrong dim or dtype?%s)",
			h.PerElement, h.OffsetData, h.LabelOffset, dim, dtype, want, links0, links0+uint64(dim*elem), fits(h.OffsetData, h.LabelOffset))
	case h.Count > h.MaxElements:
		return fileInfo{}, fmt.Errorf("%d elements, more than its capacity %d", h.Count, h.MaxElements)
	case h.Count > uint64(size)/h.PerElement:
		return fileInfo{}, fmt.Errorf("%d elements of %d bytes do not fit in %d bytes", h.Count, h.PerElement, size)
	case h.Count > 0 && (h.EnterPoint < 0 || uint64(h.EnterPoint) >= h.Count):
		return fileInfo{}, fmt.Errorf("entry point %d outside its %d elements", h.EnterPoint, h.Count)
	case h.MaxLevel < 0 || h.MaxLevel > 64:
		return fileInfo{}, fmt.Errorf("max level %d", h.MaxLevel)
	}
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
	}
	block := uint32((h.MaxM + 1) * 4)
	info := fileInfo{count: int64(h.Count), maxLevel: h.MaxLevel}
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
