package safe_test

import (
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
)

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
	safetest.CheckNoStale(t, "a closed DeviceMatrix", m, lo, hi)
	safetest.CheckNoStale(t, "a view of a closed DeviceMatrix", &v, lo, hi)
	safetest.CheckNoStale(t, "a writable view of a closed DeviceMatrix", &vm, lo, hi)
	safetest.CheckNoStale(t, "a rows view of a closed DeviceMatrix", &rv, lo, hi)

	dv, err := safe.DeviceVectorFrom(res, make([]uint32, 100))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := dv.View()
	lo = dataOf(t, w)
	if err := dv.Close(); err != nil {
		t.Fatal(err)
	}
	safetest.CheckNoStale(t, "a closed DeviceVector", dv, lo, lo+400)

	pm, err := safe.NewPinnedMatrix[float32](rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	pv, _ := pm.View()
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(pm.Data())))
	if err := pm.Close(); err != nil {
		t.Fatal(err)
	}
	safetest.CheckNoStale(t, "a closed PinnedMatrix", pm, lo, lo+rows*cols*4)
	safetest.CheckNoStale(t, "a view of a closed PinnedMatrix", &pv, lo, lo+rows*cols*4)

	// A view of Go memory keeps it reachable: that pointer is the GC's to see.
	host := make([]float32, 8)
	hv, err := dlpack.NewHostMatrix(host, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	hw, _ := hv.View()
	base := uintptr(unsafe.Pointer(&host[0]))
	found := false
	for _, p := range safetest.PointerWords(&hw, 0, 0) {
		found = found || p == base
	}
	if !found {
		t.Error("a view of Go memory holds no pointer to it: the GC could free it under the view")
	}
}
