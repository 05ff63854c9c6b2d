package hnsw

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
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

// readFile checks an hnswlib file against the dimension and element size
// Deserialize is given: the file holds neither, and hnswlib's loadIndex
// sizes each element's vector by them, reading beside the elements (no
// error) when they are wrong. It also walks the elements' upper link
// lists to the file's end. Errors are the file's: safe.ErrCorruptIndex.
func readFile(path string, dim, elem int64) (fileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileInfo{}, errOpen
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fileInfo{}, errOpen
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
		return fileInfo{}, fmt.Errorf("elements of %d bytes with vectors at %d..%d; dimension %d of %d-byte elements needs %d bytes with vectors at %d..%d (wrong dim or dtype?)",
			h.PerElement, h.OffsetData, h.LabelOffset, dim, elem, want, links0, links0+uint64(dim*elem))
	case h.Count > h.MaxElements:
		return fileInfo{}, fmt.Errorf("%d elements, more than its capacity %d", h.Count, h.MaxElements)
	case h.Count > uint64(size)/h.PerElement:
		return fileInfo{}, fmt.Errorf("%d elements of %d bytes do not fit in %d bytes", h.Count, h.PerElement, size)
	case h.Count > 0 && (h.EnterPoint < 0 || uint64(h.EnterPoint) >= h.Count):
		return fileInfo{}, fmt.Errorf("entry point %d outside its %d elements", h.EnterPoint, h.Count)
	case h.MaxLevel < 0 || h.MaxLevel > 64:
		return fileInfo{}, fmt.Errorf("max level %d", h.MaxLevel)
	}
	if _, err := r.Discard(int(h.Count * h.PerElement)); err != nil {
		return fileInfo{}, fmt.Errorf("truncated in its elements")
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

// errOpen marks a file that cannot be opened: cuVS reports it.
var errOpen = errors.New("cannot open")
