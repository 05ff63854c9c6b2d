package safe_test

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
)

// pointerWords returns the pointer words the GC would scan in x and in the
// Go values it reaches (to depth 8), without following any pointer into
// [lo, hi): the memory freed, which must not be read.
func pointerWords(x any, lo, hi uintptr) []uintptr {
	var out []uintptr
	seen := map[uintptr]bool{}
	in := func(p uintptr) bool { return p >= lo && p < hi }
	var walk func(v reflect.Value, depth int)
	walk = func(v reflect.Value, depth int) {
		if depth > 8 {
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			p := v.Pointer()
			out = append(out, p)
			if in(p) || seen[p] {
				return
			}
			seen[p] = true
			walk(v.Elem(), depth+1)
		case reflect.UnsafePointer:
			out = append(out, v.Pointer())
		case reflect.Map, reflect.Chan, reflect.Func:
			out = append(out, v.Pointer())
		case reflect.Slice:
			if v.IsNil() {
				return
			}
			out = append(out, v.Pointer())
			if !in(v.Pointer()) {
				for i := 0; i < v.Len() && i < 64; i++ {
					walk(v.Index(i), depth+1)
				}
			}
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem(), depth+1)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), depth)
			}
		case reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), depth)
			}
		}
	}
	walk(reflect.ValueOf(x), 0)
	return out
}

// checkNoStale fails t if x keeps, in a field the GC scans, an address in
// [lo, hi) (memory already freed).
func checkNoStale(t *testing.T, what string, x any, lo, hi uintptr) {
	t.Helper()
	for _, p := range pointerWords(x, lo, hi) {
		if p >= lo && p < hi {
			t.Errorf("%s keeps %#x, in the freed memory [%#x, %#x), in a pointer field: the GC scans it, and once Go's heap has grown over the freed range it is a bad pointer", what, p, lo, hi)
			return
		}
	}
}

func dataOf(t *testing.T, v dlpack.View) uintptr {
	t.Helper()
	p, err := v.Data()
	if err != nil {
		t.Fatal(err)
	}
	return uintptr(p)
}

// Issue 29 ("found bad pointer in Go heap", a pointer to an unused region
// of a span, with the double's memory at legacy-layout mmap addresses):
// the owners of C and device memory, and the views they hand out, keep
// no pointer to that memory once it is freed. Go 1.26 puts its heap at a
// random base below 2^46, where C's mappings also lie under some layouts
// (setarch -L: 0x2b..., an unlimited stack: 0x15...), so a freed C address
// in a pointer field can come to point into Go's heap.
func TestNoFreedAddressAfterClose(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	const rows, cols = 64, 32

	m, err := safe.NewDeviceMatrix[float32](res, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := m.View()
	vm, _ := m.ViewMut()
	rv, err := m.RowsView(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	lo := dataOf(t, v)
	hi := lo + rows*cols*4
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoStale(t, "a closed DeviceMatrix", m, lo, hi)
	checkNoStale(t, "a view of a closed DeviceMatrix", &v, lo, hi)
	checkNoStale(t, "a writable view of a closed DeviceMatrix", &vm, lo, hi)
	checkNoStale(t, "a rows view of a closed DeviceMatrix", &rv, lo, hi)

	dv, err := safe.DeviceVectorFrom(res, make([]uint32, 100))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := dv.View()
	lo = dataOf(t, w)
	if err := dv.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoStale(t, "a closed DeviceVector", dv, lo, lo+400)

	pm, err := safe.NewPinnedMatrix[float32](rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	pv, _ := pm.View()
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(pm.Data())))
	if err := pm.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoStale(t, "a closed PinnedMatrix", pm, lo, lo+rows*cols*4)
	checkNoStale(t, "a view of a closed PinnedMatrix", &pv, lo, lo+rows*cols*4)

	// A view of Go memory keeps it reachable: that pointer is the GC's to see.
	host := make([]float32, 8)
	hv, err := dlpack.NewHostMatrix(host, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	hw, _ := hv.View()
	base := uintptr(unsafe.Pointer(&host[0]))
	found := false
	for _, p := range pointerWords(&hw, 0, 0) {
		found = found || p == base
	}
	if !found {
		t.Error("a view of Go memory holds no pointer to it: the GC could free it under the view")
	}
}
