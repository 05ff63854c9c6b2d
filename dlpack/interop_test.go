package dlpack_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/dlpacktest"
)

func TestGoLayoutMatchesC(t *testing.T) {
	size, tensor, ctx, del := dlpacktest.Layout()
	var mt generated.DLManagedTensor
	if unsafe.Sizeof(mt) != size || unsafe.Offsetof(mt.DlTensor) != tensor || unsafe.Offsetof(mt.ManagerCtx) != ctx || unsafe.Offsetof(mt.Deleter) != del {
		t.Fatalf("DLManagedTensor: Go %d/%d/%d/%d, C %d/%d/%d/%d", unsafe.Sizeof(mt), unsafe.Offsetof(mt.DlTensor),
			unsafe.Offsetof(mt.ManagerCtx), unsafe.Offsetof(mt.Deleter), size, tensor, ctx, del)
	}
}

func float32Bytes(xs ...float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

var (
	cpuDev = generated.DLDevice{DeviceType: generated.DLDeviceType_kDLCPU}
	f32DL  = generated.DLDataType{Code: uint8(generated.DLDataTypeCode_kDLFloat), Bits: 32, Lanes: 1}
)

func TestImport(t *testing.T) {
	// A 2x3 float32 matrix stored column-major, 8 bytes into its allocation.
	ct := dlpacktest.New(dlpacktest.Spec{
		Device: cpuDev, DType: f32DL, Shape: []int64{2, 3}, Strides: []int64{1, 2}, ByteOffset: 8,
		Data: float32Bytes(1, 4, 2, 5, 3, 6),
	})
	defer ct.Free()
	im, err := dlpack.Import(ct.MT)
	if err != nil {
		t.Fatal(err)
	}
	v, err := im.View()
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := v.Data(); p != unsafe.Add(ct.MT.DlTensor.Data, 8) {
		t.Errorf("byte_offset not folded in")
	}
	if v.Layout() != dlpack.ColMajor || v.String() != "float32 cpu:0 [2 3] col-major" {
		t.Errorf("view %v", v)
	}
	s, err := dlpack.HostSlice[float32](v)
	if err != nil || fmt.Sprint(s) != "[1 4 2 5 3 6]" {
		t.Errorf("values %v, %v", s, err)
	}
	m, err := im.ViewMut()
	if err != nil {
		t.Fatal(err)
	}
	// Bound to a call, the import refuses Close.
	c := dlpack.Begin("refine")
	if _, err := c.Out(&m); err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), "imported DLPack tensor") {
		t.Fatalf("Close during a call: %v", err)
	}
	c.End()
	if ct.DeleterCalls() != 0 {
		t.Fatal("deleter called early")
	}
	// Close calls the deleter once, whoever calls Close how often.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := im.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := ct.DeleterCalls(); n != 1 {
		t.Fatalf("deleter called %d times", n)
	}
	if _, err := im.View(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("View after Close: %v", err)
	}
	if _, err := im.ViewMut(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("ViewMut after Close: %v", err)
	}
	if err := v.Err(); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("old view after Close: %v", err)
	}
}

func TestImportRejects(t *testing.T) {
	if _, err := dlpack.Import(nil); !errors.Is(err, dlpack.ErrInvalidMetadata) {
		t.Errorf("nil: %v", err)
	}
	cases := []struct {
		name  string
		mod   func(*generated.DLTensor)
		kind  error
		field string
	}{
		{"negative ndim", func(d *generated.DLTensor) { d.Ndim = -1 }, dlpack.ErrInvalidMetadata, "ndim"},
		{"nil shape", func(d *generated.DLTensor) { d.Shape = nil }, dlpack.ErrInvalidMetadata, "shape"},
		{"negative extent", func(d *generated.DLTensor) { *d.Shape = -5 }, dlpack.ErrInvalidMetadata, "shape[0]"},
		{"nil data", func(d *generated.DLTensor) { d.Data = nil }, dlpack.ErrInvalidMetadata, "data"},
		{"unknown device", func(d *generated.DLTensor) { d.Device.DeviceType = 42 }, dlpack.ErrUnsupportedDevice, "device.device_type"},
		{"bool32", func(d *generated.DLTensor) { d.Dtype = generated.DLDataType{Code: 6, Bits: 32, Lanes: 1} }, dlpack.ErrUnsupportedDType, "dtype.bits"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ct := dlpacktest.New(dlpacktest.Spec{Device: cpuDev, DType: f32DL, Shape: []int64{4}, Data: float32Bytes(1, 2, 3, 4)})
			defer ct.Free()
			tc.mod(&ct.MT.DlTensor)
			_, err := dlpack.Import(ct.MT)
			checkErr(t, err, tc.kind, tc.field, "")
			if ct.DeleterCalls() != 0 {
				t.Error("a refused import called the deleter")
			}
			ct.Delete() // the caller still owns it
		})
	}
	t.Run("self-overlapping ViewMut", func(t *testing.T) {
		ct := dlpacktest.New(dlpacktest.Spec{Device: cpuDev, DType: f32DL, Shape: []int64{4}, Strides: []int64{0}, Data: float32Bytes(1)})
		defer ct.Free()
		im, err := dlpack.Import(ct.MT)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := im.ViewMut(); !errors.Is(err, dlpack.ErrAliased) {
			t.Errorf("broadcast ViewMut: %v", err)
		}
		if err := im.Close(); err != nil || ct.DeleterCalls() != 1 {
			t.Errorf("Close: %v, %d", err, ct.DeleterCalls())
		}
	})
	t.Run("no deleter", func(t *testing.T) {
		ct := dlpacktest.New(dlpacktest.Spec{Device: cpuDev, DType: f32DL, Shape: []int64{1}, Data: float32Bytes(1)})
		defer ct.Free()
		ct.MT.Deleter = nil
		im, err := dlpack.Import(ct.MT)
		if err != nil {
			t.Fatal(err)
		}
		if err := im.Close(); err != nil {
			t.Fatal(err)
		}
		ct.Delete()
	})
}

func TestExport(t *testing.T) {
	data := []float32{1, 2, 3, 4, 5, 6}
	m, _ := dlpack.NewHostMatrix(data, 2, 3)
	m.Owner().SetLabel("matrix")
	v, _ := m.View()
	var released atomic.Int32
	live := dlpack.LiveExports()
	mt, err := dlpack.Export(v, func() { released.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	d := mt.DlTensor
	if d.Data != unsafe.Pointer(&data[0]) || d.Device != cpuDev || d.Dtype != f32DL || d.ByteOffset != 0 ||
		fmt.Sprint(shapeOf(mt), stridesOf(mt)) != "[2 3] [3 1]" || mt.Deleter == nil {
		t.Fatalf("exported %+v", d)
	}
	if dlpack.LiveExports() != live+1 {
		t.Error("LiveExports")
	}
	// While exported, the owner refuses Close and writers, and says why.
	if err := m.Close(); !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), `"DLPack consumer" (retained)`) {
		t.Fatalf("Close while exported: %v", err)
	}
	// Round trip: import our own export, read it, close it.
	im, err := dlpack.Import(mt)
	if err != nil {
		t.Fatal(err)
	}
	iv, _ := im.View()
	if s, err := dlpack.HostSlice[float32](iv); err != nil || &s[0] != &data[0] || fmt.Sprint(s) != "[1 2 3 4 5 6]" {
		t.Errorf("round trip: %v %v", s, err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if released.Load() != 1 || dlpack.LiveExports() != live {
		t.Fatalf("released %d times, %d live", released.Load(), dlpack.LiveExports())
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close after release: %v", err)
	}
	if _, err := dlpack.Export(v, nil); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("exporting a view of a closed owner: %v", err)
	}
}

func TestExportDeleterOnForeignThreads(t *testing.T) {
	const n = 32
	var released atomic.Int32
	var wg sync.WaitGroup
	live := dlpack.LiveExports()
	for i := 0; i < n; i++ {
		vec := dlpack.NewHostVector([]int16{int16(i), 2, 3})
		mv, _ := vec.ViewMut()
		mt, err := dlpack.ExportMut(mv, func() { released.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := vec.Owner().Retain("reader"); !errors.Is(err, dlpack.ErrBorrowed) {
			t.Errorf("retaining a mutably exported owner: %v", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := dlpacktest.DeleteOnNewThread(mt); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if released.Load() != n || dlpack.LiveExports() != live {
		t.Fatalf("released %d of %d; %d live", released.Load(), n, dlpack.LiveExports())
	}
}

func TestExportDevice(t *testing.T) {
	v, _ := dlpack.FromRawParts(fakePtr(fakeBase), dlpack.Device{Type: dlpack.CUDA, ID: 3}, []int64{4, 5}, []int64{1, 4}, dlpack.Float16)
	mt, err := dlpack.Export(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := mt.DlTensor
	if d.Device.DeviceId != 3 || d.Device.DeviceType != generated.DLDeviceType_kDLCUDA || fmt.Sprint(stridesOf(mt)) != "[1 4]" {
		t.Errorf("exported %+v strides %v", d, stridesOf(mt))
	}
	dlpacktest.DeleteOnNewThread(mt)
}
