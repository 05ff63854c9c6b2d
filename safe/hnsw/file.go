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
		// the vector sits at links0, a multiple of 4 bytes into elemBuf
		if j, what := kit.FirstNonFinite(unsafe.Pointer(&elemBuf[links0]), int(dim), dtype); j >= 0 {
			return fileInfo{}, fmt.Errorf("element %d holds %s at column %d read as %s: not a file of %s vectors of dimension %d (wrong dtype?)", i, what, j, dtype, dtype, dim)
		}
	}
	block := uint32((h.MaxM + 1) * 4)
	info := fileInfo{count: int64(h.Count), maxLevel: h.MaxLevel}
	var b [4]byte
	for i := uint64(0); i < h.Count; i++ {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return fileInfo{}, fmt.Errorf("truncated in the link lists (element %d of %d)", i, h.Count)
		}
		n := binary.LittleEndian.Uint32(b[:])
		if n%block != 0 {
			return fileInfo{}, fmt.Errorf("element %d: link lists of %d bytes, not a multiple of %d", i, n, block)
		}
		if int64(i) == int64(h.EnterPoint) {
			info.entryLevel = int32(n / block)
		}
		if _, err := r.Discard(int(n)); err != nil {
			return fileInfo{}, fmt.Errorf("truncated in the link lists (element %d of %d)", i, h.Count)
		}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return fileInfo{}, errors.New("bytes after the index")
	}
	return info, nil
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
