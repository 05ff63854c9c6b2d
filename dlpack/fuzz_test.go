package dlpack_test

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
)

func int64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func int64Bytes(xs ...int64) []byte {
	b := make([]byte, 8*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// fuzzPtr maps fuzz input to an address that is never dereferenced and never
// in the Go heap: nil, one low in the address space, one near its top, or
// one in the fake device range.
func fuzzPtr(addr uint64) unsafe.Pointer {
	switch {
	case addr == 0:
		return nil
	case addr>>62 == 3:
		return fakePtr(uintptr(0xffff_ffff_0000_0000 | addr&0xffff_ffff))
	case addr>>62 == 2:
		return fakePtr(uintptr(0x1000 + addr&0xffff))
	}
	return fakePtr(uintptr(fakeBase + addr&0xff_ffff_ffff))
}

// FuzzFromRawParts feeds arbitrary metadata to the constructors. They must
// not panic; they refuse with a typed error or return a view whose metadata
// is what was asked for and is consistent; a writable view is never accepted
// where a read-only one is refused; FromDLTensor agrees with FromRawParts;
// and an accepted view binds to a call and materializes as given.
func FuzzFromRawParts(f *testing.F) {
	f.Add(uint64(1<<12), int32(2), int32(0), uint8(2), uint8(32), uint16(1), int64Bytes(3, 4), []byte(nil), false)
	f.Add(uint64(1<<12), int32(1), int32(0), uint8(0), uint8(8), uint16(1), int64Bytes(3, 4), int64Bytes(1, 3), true)
	f.Add(uint64(0), int32(13), int32(1), uint8(1), uint8(16), uint16(1), int64Bytes(0, 5), []byte(nil), false)
	f.Add(uint64(3<<62|0xfff0), int32(3), int32(0), uint8(5), uint8(64), uint16(2), int64Bytes(2, 2), int64Bytes(-2, 1), true)
	f.Fuzz(func(t *testing.T, addr uint64, devType, devID int32, code, bits uint8, lanes uint16, shapeB, stridesB []byte, hasStrides bool) {
		data := fuzzPtr(addr)
		dev := dlpack.Device{Type: dlpack.DeviceType(devType), ID: devID}
		dt := dlpack.DataType{Code: dlpack.TypeCode(code), Bits: bits, Lanes: lanes}
		shape := int64s(shapeB)
		var strides []int64
		if hasStrides {
			strides = int64s(stridesB)
		}
		v, err := dlpack.FromRawParts(data, dev, shape, strides, dt)
		m, errM := dlpack.FromRawPartsMut(data, dev, shape, strides, dt)
		if err != nil {
			var e *dlpack.Error
			if !errors.As(err, &e) || e.Field == "" || e.Reason == "" {
				t.Fatalf("untyped or vague error %v", err)
			}
			kinds := []error{dlpack.ErrUnsupportedDevice, dlpack.ErrUnsupportedDType, dlpack.ErrStridesRank, dlpack.ErrInvalidMetadata}
			if !slices.ContainsFunc(kinds, func(k error) bool { return errors.Is(err, k) }) {
				t.Fatalf("error of no known kind: %v", err)
			}
			if errM == nil {
				t.Fatalf("FromRawPartsMut accepted what FromRawParts refused: %v", err)
			}
		} else {
			checkFuzzView(t, v, data, dev, dt, shape, strides)
		}
		// FromDLTensor reads the same metadata through the C struct, where
		// strides, when present, always have ndim entries.
		if len(shape) > 0 && (!hasStrides || len(strides) == len(shape)) {
			dl := &generated.DLTensor{Data: data, Device: generated.DLDevice{DeviceType: generated.DLDeviceType(devType), DeviceId: devID},
				Ndim: int32(len(shape)), Dtype: generated.DLDataType{Code: code, Bits: bits, Lanes: lanes}, Shape: &shape[0]}
			if hasStrides {
				dl.Strides = &strides[0]
			}
			if _, errDL := dlpack.FromDLTensor(dl); (errDL == nil) != (err == nil) {
				t.Fatalf("FromDLTensor: %v, FromRawParts: %v", errDL, err)
			}
		}
		if errM != nil {
			if err == nil && !errors.Is(errM, dlpack.ErrAliased) {
				t.Fatalf("FromRawPartsMut refused a valid view without ErrAliased: %v", errM)
			}
			return
		}
		c := dlpack.Begin("fuzz")
		defer c.End()
		mt, err := c.Out(&m)
		if err != nil {
			t.Fatal(err)
		}
		got := unsafe.Slice(mt.DlTensor.Shape, mt.DlTensor.Ndim)
		if mt.DlTensor.Data != data || !slices.Equal(got, shape) {
			t.Fatalf("materialized %p %v, want %p %v", mt.DlTensor.Data, got, data, shape)
		}
		if mt.DlTensor.Strides == nil && !m.Layout().IsRowMajor() {
			t.Fatalf("NULL strides for a %v view", m.Layout())
		}
	})
}

func checkFuzzView(t *testing.T, v dlpack.View, data unsafe.Pointer, dev dlpack.Device, dt dlpack.DataType, shape, strides []int64) {
	t.Helper()
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
	if p, _ := v.Data(); p != data || v.Device() != dev || v.DType() != dt || !slices.Equal(v.Shape(), shape) {
		t.Fatalf("view %v does not keep its metadata", v)
	}
	if strides != nil && !slices.Equal(v.Strides(), strides) {
		t.Fatalf("strides %v, want %v", v.Strides(), strides)
	}
	n := int64(1)
	for _, e := range shape {
		n *= e
	}
	if v.Len() != n {
		t.Fatalf("Len %d, want %d", v.Len(), n)
	}
	if n > 0 && data == nil {
		t.Fatal("nil data accepted")
	}
	// The layout claim, checked the slow way.
	st := v.Strides()
	row, col := true, true
	want := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 && st[i] != want {
			row = false
		}
		want *= shape[i]
	}
	want = 1
	for i := range shape {
		if shape[i] != 1 && st[i] != want {
			col = false
		}
		want *= shape[i]
	}
	if n <= 1 {
		row, col = true, true
	}
	if v.Layout().IsRowMajor() != row || v.Layout().IsColMajor() != col {
		t.Fatalf("layout %v for shape %v strides %v", v.Layout(), shape, st)
	}
}
