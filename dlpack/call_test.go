package dlpack_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
)

func shapeOf(mt *generated.DLManagedTensor) []int64 {
	return unsafe.Slice(mt.DlTensor.Shape, mt.DlTensor.Ndim)
}

func stridesOf(mt *generated.DLManagedTensor) []int64 {
	if mt.DlTensor.Strides == nil {
		return nil
	}
	return unsafe.Slice(mt.DlTensor.Strides, mt.DlTensor.Ndim)
}

func TestCallMaterializes(t *testing.T) {
	q, _ := dlpack.NewHostMatrix(make([]float32, 12), 3, 4)
	n, _ := dlpack.NewHostMatrix(make([]int64, 6), 3, 2)
	qv, _ := q.View()
	nv, _ := n.ViewMut()
	// A column-major device matrix whose extent-1 dimension has an odd stride,
	// and a strided one.
	col, _ := dlpack.FromRawParts(fakePtr(fakeBase), dlpack.Device{Type: dlpack.CUDA, ID: 1}, []int64{5, 1, 3}, []int64{1, 77, 5}, dlpack.Float16)
	str, _ := dlpack.FromRawParts(fakePtr(fakeBase+1<<20), cuda0, []int64{4, 2}, []int64{8, 1}, dlpack.Uint8)

	c := dlpack.Begin("test.Materialize")
	defer c.End()
	qt, err := c.In(&qv)
	if err != nil {
		t.Fatal(err)
	}
	nt, err := c.Out(&nv)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := c.In(&col)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.In(&str)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 4 {
		t.Errorf("Len %d", c.Len())
	}
	check := func(name string, mt *generated.DLManagedTensor, data unsafe.Pointer, dev generated.DLDevice, dt generated.DLDataType, shape, strides []int64) {
		t.Helper()
		d := mt.DlTensor
		if d.Data != data || d.Device != dev || d.Dtype != dt || d.ByteOffset != 0 || mt.Deleter != nil || mt.ManagerCtx != nil {
			t.Errorf("%s: tensor %+v", name, d)
		}
		if fmt.Sprint(shapeOf(mt)) != fmt.Sprint(shape) || fmt.Sprint(stridesOf(mt)) != fmt.Sprint(strides) {
			t.Errorf("%s: shape %v strides %v, want %v %v", name, shapeOf(mt), stridesOf(mt), shape, strides)
		}
	}
	cpu := generated.DLDevice{DeviceType: generated.DLDeviceType_kDLCPU}
	f32 := generated.DLDataType{Code: 2, Bits: 32, Lanes: 1}
	check("queries", qt, unsafe.Pointer(&q.Data()[0]), cpu, f32, []int64{3, 4}, nil)
	check("neighbors", nt, unsafe.Pointer(&n.Data()[0]), cpu, generated.DLDataType{Code: 0, Bits: 64, Lanes: 1}, []int64{3, 2}, nil)
	check("col-major", ct, fakePtr(fakeBase), generated.DLDevice{DeviceType: generated.DLDeviceType_kDLCUDA, DeviceId: 1},
		generated.DLDataType{Code: 2, Bits: 16, Lanes: 1}, []int64{5, 1, 3}, []int64{1, 5, 5})
	check("strided", st, fakePtr(fakeBase+1<<20), generated.DLDevice{DeviceType: generated.DLDeviceType_kDLCUDA},
		generated.DLDataType{Code: 1, Bits: 8, Lanes: 1}, []int64{4, 2}, []int64{8, 1})
}

func TestCallExpires(t *testing.T) {
	m, _ := dlpack.NewHostMatrix(make([]float32, 8), 2, 4)
	v, _ := m.View()
	orig := v
	c := dlpack.Begin("test.Expire")
	if _, err := c.In(&v); err != nil {
		t.Fatal(err)
	}
	if err := v.Err(); err != nil {
		t.Fatalf("bound view during the call: %v", err)
	}
	c.End()
	c.End() // harmless
	for name, err := range map[string]error{
		"Err":      v.Err(),
		"Data":     second(v.Data()),
		"View":     second(v.View()),
		"Retain":   second(v.Retain("late")),
		"Export":   second(dlpack.Export(v, nil)),
		"HostSlie": second(dlpack.HostSlice[float32](v)),
	} {
		if !errors.Is(err, dlpack.ErrExpired) {
			t.Errorf("%s after End: %v", name, err)
		}
	}
	var e *dlpack.Error
	if errors.As(v.Err(), &e); e == nil || e.Field != "view" || !strings.Contains(e.Error(), "call has ended") {
		t.Errorf("expired error %v", v.Err())
	}
	// A stale Call is inert, even once its state serves another call.
	c2 := dlpack.Begin("test.Next")
	defer c2.End()
	if _, err := c.In(&orig); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("In on an ended call: %v", err)
	}
	c.End()
	if _, err := c2.In(&v); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("rebinding an expired view: %v", err)
	}
	if _, err := c2.In(&orig); err != nil {
		t.Errorf("the unbound original is still good: %v", err)
	}
	if c2.Len() != 1 || c.Len() != 0 {
		t.Errorf("Len %d %d", c2.Len(), c.Len())
	}
	var zero dlpack.Call
	if _, err := zero.In(&orig); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("zero Call: %v", err)
	}
	zero.End()
}

func second[T any](_ T, err error) error { return err }

func TestCallAliasing(t *testing.T) {
	buf := make([]float32, 100)
	part := func(off, n int) (dlpack.View, dlpack.ViewMut) {
		p := unsafe.Pointer(&buf[off])
		v, err := dlpack.FromRawParts(p, dlpack.HostDevice, []int64{int64(n)}, nil, dlpack.Float32)
		if err != nil {
			t.Fatal(err)
		}
		m, err := dlpack.FromRawPartsMut(p, dlpack.HostDevice, []int64{int64(n)}, nil, dlpack.Float32)
		if err != nil {
			t.Fatal(err)
		}
		return v, m
	}
	t.Run("out overlaps in", func(t *testing.T) {
		c := dlpack.Begin("alias")
		defer c.End()
		in, _ := part(0, 50)
		_, out := part(49, 10)
		if _, err := c.In(&in); err != nil {
			t.Fatal(err)
		}
		_, err := c.Out(&out)
		checkErr(t, err, dlpack.ErrAliased, "tensor 1", "overlaps tensor 0 (float32 cpu:0 [50] row-major|col-major)")
	})
	t.Run("in overlaps out", func(t *testing.T) {
		c := dlpack.Begin("alias")
		defer c.End()
		in, _ := part(0, 50)
		_, out := part(49, 10)
		if _, err := c.Out(&out); err != nil {
			t.Fatal(err)
		}
		_, err := c.In(&in)
		checkErr(t, err, dlpack.ErrAliased, "tensor 1", "alias")
	})
	t.Run("out overlaps out", func(t *testing.T) {
		c := dlpack.Begin("alias")
		defer c.End()
		_, a := part(10, 10)
		_, b := part(0, 11)
		if _, err := c.Out(&a); err != nil {
			t.Fatal(err)
		}
		_, err := c.Out(&b)
		checkErr(t, err, dlpack.ErrAliased, "tensor 1", "")
	})
	t.Run("same out twice", func(t *testing.T) {
		c := dlpack.Begin("alias")
		defer c.End()
		_, a := part(0, 10)
		b := a
		if _, err := c.Out(&a); err != nil {
			t.Fatal(err)
		}
		_, err := c.Out(&b)
		checkErr(t, err, dlpack.ErrAliased, "tensor 1", "")
	})
	t.Run("adjacent and shared reads are fine", func(t *testing.T) {
		c := dlpack.Begin("alias")
		defer c.End()
		in1, _ := part(0, 50)
		in2, _ := part(10, 50)
		_, out1 := part(60, 20)
		_, out2 := part(80, 20)
		for _, v := range []*dlpack.View{&in1, &in2} {
			if _, err := c.In(v); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range []*dlpack.ViewMut{&out1, &out2} {
			if _, err := c.Out(m); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("negative strides span backwards", func(t *testing.T) {
		c := dlpack.Begin("alias")
		defer c.End()
		rev, err := dlpack.FromRawParts(unsafe.Pointer(&buf[19]), dlpack.HostDevice, []int64{10}, []int64{-1}, dlpack.Float32) // buf[10..19]
		if err != nil {
			t.Fatal(err)
		}
		_, out := part(5, 6) // buf[5..10]
		if _, err := c.In(&rev); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Out(&out); !errors.Is(err, dlpack.ErrAliased) {
			t.Errorf("overlap through a negative stride: %v", err)
		}
	})
	t.Run("handles of other devices are not addresses", func(t *testing.T) {
		c := dlpack.Begin("alias")
		defer c.End()
		in, _ := part(0, 10)
		cl, err := dlpack.FromRawPartsMut(unsafe.Pointer(&buf[0]), dlpack.Device{Type: dlpack.OpenCL}, []int64{10}, nil, dlpack.Float32)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.In(&in); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Out(&cl); err != nil {
			t.Errorf("an OpenCL handle equal to a host address: %v", err)
		}
	})
	t.Run("empty views never alias", func(t *testing.T) {
		c := dlpack.Begin("alias")
		defer c.End()
		_, a := part(0, 10)
		e, err := dlpack.FromRawPartsMut(unsafe.Pointer(&buf[0]), dlpack.HostDevice, []int64{0}, nil, dlpack.Float32)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Out(&a); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Out(&e); err != nil {
			t.Errorf("empty view: %v", err)
		}
	})
}

func TestCallManyTensors(t *testing.T) {
	c := dlpack.Begin("many")
	defer c.End()
	var ptrs []*generated.DLManagedTensor
	for i := 0; i < 21; i++ {
		v, err := dlpack.FromRawParts(fakePtr(fakeBase+uintptr(i)*64), cuda0, []int64{int64(i + 1)}, nil, dlpack.Float32)
		if err != nil {
			t.Fatal(err)
		}
		mt, err := c.In(&v)
		if err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, mt)
	}
	for i, mt := range ptrs {
		if shapeOf(mt)[0] != int64(i+1) || uintptr(mt.DlTensor.Data) != fakeBase+uintptr(i)*64 {
			t.Errorf("tensor %d: %v %p", i, shapeOf(mt), mt.DlTensor.Data)
		}
	}
}

func TestOwnerBorrows(t *testing.T) {
	m, _ := dlpack.NewHostMatrix(make([]float32, 8), 2, 4)
	m.Owner().SetLabel("dataset")
	v, _ := m.View()

	c := dlpack.Begin("cagra.Build")
	if _, err := c.In(&v); err != nil {
		t.Fatal(err)
	}
	err := m.Close()
	var be *dlpack.BorrowedError
	if !errors.As(err, &be) || !errors.Is(err, dlpack.ErrBorrowed) || be.Op != "close" || be.Owner != "dataset" ||
		err.Error() != `dlpack: cannot close dataset: still borrowed by call "cagra.Build" (reading)` {
		t.Fatalf("Close during a call: %v", err)
	}
	if _, err := m.Owner().LendMut("copy"); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("LendMut during a read: %v", err)
	}
	// cuVS keeps the dataset: the index retains it past the call.
	ret, err := v.Retain("cagra.Index")
	if err != nil {
		t.Fatal(err)
	}
	c.End()
	if !m.Owner().Busy() {
		t.Error("not busy while retained")
	}
	err = m.Close()
	if !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), `"cagra.Index" (retained)`) {
		t.Fatalf("Close while retained: %v", err)
	}
	// Reading still works; writing does not.
	c = dlpack.Begin("search")
	rv, _ := m.View()
	if _, err := c.In(&rv); err != nil {
		t.Errorf("read while retained: %v", err)
	}
	c.End()
	c = dlpack.Begin("overwrite")
	mv, _ := m.ViewMut()
	_, err = c.Out(&mv)
	if !errors.As(err, &be) || be.Op != "borrow mutably" || !strings.Contains(err.Error(), "cagra.Index") {
		t.Errorf("write while retained: %v", err)
	}
	c.End()
	if got := m.Owner().Borrowers(); len(got) != 1 || got[0] != `"cagra.Index" (retained)` {
		t.Errorf("Borrowers %q", got)
	}
	ret.End()
	ret.End() // harmless
	if ret.By() != "cagra.Index" || m.Owner().Busy() {
		t.Error("retention did not end")
	}
	// An exclusive lending blocks readers and names itself.
	lend, err := m.Owner().LendMut("async copy")
	if err != nil {
		t.Fatal(err)
	}
	c = dlpack.Begin("search")
	rv, _ = m.View()
	if _, err := c.In(&rv); !errors.Is(err, dlpack.ErrBorrowed) || !strings.Contains(err.Error(), `"async copy" (lent mutably)`) {
		t.Errorf("read while lent: %v", err)
	}
	c.End()
	if _, err := m.Owner().Retain("x"); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("Retain while lent: %v", err)
	}
	lend.End()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if !m.Owner().Closed() {
		t.Error("not closed")
	}
	for name, err := range map[string]error{
		"view":    v.Err(),
		"Retain":  second(m.Owner().Retain("late")),
		"LendMut": second(m.Owner().LendMut("late")),
	} {
		if !errors.Is(err, dlpack.ErrExpired) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	c = dlpack.Begin("late")
	defer c.End()
	// A view tied to a closed owner by hand is refused too.
	raw, _ := dlpack.FromRawParts(fakePtr(fakeBase), cuda0, []int64{1}, nil, dlpack.Float32)
	raw = raw.WithOwner(m.Owner())
	if _, err := c.In(&raw); !errors.Is(err, dlpack.ErrExpired) {
		t.Errorf("binding a view of a closed owner: %v", err)
	}
}

func TestOwnerWithinOneCall(t *testing.T) {
	var o dlpack.Owner
	o.SetLabel("buffer")
	a, _ := dlpack.FromRawParts(fakePtr(fakeBase), cuda0, []int64{16}, nil, dlpack.Float32)
	b, _ := dlpack.FromRawPartsMut(fakePtr(fakeBase+64), cuda0, []int64{16}, nil, dlpack.Float32)
	a, b = a.WithOwner(&o), b.WithOwner(&o)
	if a.Owner() != &o || b.Owner() != &o {
		t.Fatal("WithOwner")
	}
	// Two disjoint parts of one buffer, read and written by one call.
	c := dlpack.Begin("one")
	if _, err := c.In(&a); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Out(&b); err != nil {
		t.Fatalf("upgrade within the call: %v", err)
	}
	a2 := a
	if _, err := c.In(&a2); err != nil {
		t.Fatalf("re-reading within the call: %v", err)
	}
	if got := o.Borrowers(); len(got) != 1 || got[0] != `call "one" (writing)` {
		t.Errorf("Borrowers %q", got)
	}
	c2 := dlpack.Begin("two")
	a3, _ := dlpack.FromRawParts(fakePtr(fakeBase), cuda0, []int64{16}, nil, dlpack.Float32)
	a3 = a3.WithOwner(&o)
	if _, err := c2.In(&a3); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("reading while another call writes: %v", err)
	}
	c2.End()
	c.End()
	// Upgrading is refused when another call reads too.
	c, c2 = dlpack.Begin("one"), dlpack.Begin("two")
	a4, _ := dlpack.FromRawParts(fakePtr(fakeBase), cuda0, []int64{16}, nil, dlpack.Float32)
	a4 = a4.WithOwner(&o)
	b5, _ := dlpack.FromRawPartsMut(fakePtr(fakeBase+64), cuda0, []int64{16}, nil, dlpack.Float32)
	b5 = b5.WithOwner(&o)
	if _, err := c.In(&a4); err != nil {
		t.Fatal(err)
	}
	a6, _ := dlpack.FromRawParts(fakePtr(fakeBase), cuda0, []int64{16}, nil, dlpack.Float32)
	a6 = a6.WithOwner(&o)
	if _, err := c2.In(&a6); err != nil {
		t.Fatal(err)
	}
	if got := o.Borrowers(); len(got) != 1 || !strings.HasPrefix(got[0], "2 calls (reading") {
		t.Errorf("Borrowers %q", got)
	}
	if _, err := c.Out(&b5); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("upgrade while another call reads: %v", err)
	}
	c.End()
	c2.End()
	if o.Busy() {
		t.Errorf("still busy: %q", o.Borrowers())
	}
	var unnamed dlpack.Owner
	if unnamed.Label() != "tensor owner" {
		t.Errorf("default label %q", unnamed.Label())
	}
}
