package hnsw

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
)

// hnswHeader is hnswlib's header for count elements of dim float32
// values with maxM0 base-layer links.
func hnswHeader(count, dim, maxM0 uint64, maxLevel, ep int32) []byte {
	links0 := 4 + maxM0*4
	b := make([]byte, 0, headerBytes)
	for _, v := range []uint64{0, count, count, links0 + 4*dim + 8, links0 + 4*dim, links0} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(maxLevel))
	b = binary.LittleEndian.AppendUint32(b, uint32(ep))
	for _, v := range []uint64{maxM0 / 2, maxM0, maxM0 / 2, math.Float64bits(1 / math.Log(float64(maxM0/2))), 64} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// The header of what hnswlib's saveIndex writes gives the dimension for
// each element type, or the element types that fit.
func TestParseHeader(t *testing.T) {
	b := hnswHeader(10, 16, 32, 2, 3)
	size := int64(len(b)) + 10*int64(4+32*4+16*4+8) + 10*4
	for _, c := range []struct {
		dt  dlpack.DataType
		dim int64
	}{{dlpack.Float32, 16}, {dlpack.Float16, 32}, {dlpack.Int8, 64}, {dlpack.Uint8, 64}} {
		h, dim, err := parseHeader(b, c.dt.ElemSize(), size)
		if err != nil || dim != c.dim || h.Count != 10 || h.MaxM0 != 32 || h.EnterPoint != 3 || h.MaxLevel != 2 {
			t.Errorf("%s: dim %d, %+v, %v; want dim %d", c.dt, dim, h, err, c.dim)
		}
	}
	for name, mut := range map[string]func([]byte){
		"short":        nil,
		"offset":       func(b []byte) { b[0] = 1 },
		"vector bytes": func(b []byte) { binary.LittleEndian.PutUint64(b[32:], binary.LittleEndian.Uint64(b[32:])+2) },
		"no label":     func(b []byte) { binary.LittleEndian.PutUint64(b[24:], binary.LittleEndian.Uint64(b[24:])+8) },
		"entry":        func(b []byte) { binary.LittleEndian.PutUint32(b[52:], 10) },
		"capacity":     func(b []byte) { binary.LittleEndian.PutUint64(b[8:], 9) },
		"level":        func(b []byte) { binary.LittleEndian.PutUint32(b[48:], 65) },
		"data at 0":    func(b []byte) { binary.LittleEndian.PutUint64(b[40:], 0) },
		"huge maxM0":   func(b []byte) { binary.LittleEndian.PutUint64(b[64:], 1<<20) },
		"huge elements": func(b []byte) {
			binary.LittleEndian.PutUint64(b[16:], 1<<40)
			binary.LittleEndian.PutUint64(b[8:], 1<<40)
		},
	} {
		x := append([]byte(nil), b...)
		if mut == nil {
			x = x[:headerBytes-1]
		} else {
			mut(x)
		}
		if _, _, err := parseHeader(x, 4, size); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseHeader: any bytes, any element size and file size: never a
// panic; an accepted header describes elements of a link list, a vector
// of whole elements of the dimension returned, and an 8-byte label, which
// fit in the file, with an entry point among them. Its corpus is kept in
// testdata/fuzz.
func FuzzParseHeader(f *testing.F) {
	f.Add(hnswHeader(10, 16, 32, 2, 3), uint8(4), int64(2000))
	f.Add(hnswHeader(0, 4, 8, 0, -1), uint8(1), int64(96))
	f.Add(hnswHeader(1<<20, 128, 64, 5, 7), uint8(2), int64(1<<40))
	f.Fuzz(func(t *testing.T, b []byte, elem uint8, size int64) {
		es := int64(elem%4) + 1
		if es == 3 {
			es = 4
		}
		if size < 0 {
			size = -size
		}
		h, dim, err := parseHeader(b, es, size)
		if err != nil {
			return
		}
		links0 := 4 + 4*h.MaxM0
		switch {
		case dim < 1 || dim > maxDim:
			t.Fatalf("dim %d", dim)
		case h.OffsetData != links0 || h.LabelOffset-h.OffsetData != uint64(dim*es) || h.PerElement != h.LabelOffset+8:
			t.Fatalf("layout %+v for dim %d of %d bytes", h, dim, es)
		case h.Count > h.MaxElements || h.Count > uint64(size)/h.PerElement:
			t.Fatalf("%d elements of %d bytes in %d bytes (capacity %d)", h.Count, h.PerElement, size, h.MaxElements)
		case h.Count > 0 && (h.EnterPoint < 0 || uint64(h.EnterPoint) >= h.Count):
			t.Fatalf("entry %d of %d", h.EnterPoint, h.Count)
		case h.MaxLevel < 0 || h.MaxLevel > 64 || h.MaxM > 1<<16 || h.MaxM0 > 1<<16:
			t.Fatalf("%+v", h)
		}
	})
}
