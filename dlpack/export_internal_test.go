package dlpack

import (
	"testing"
	"unsafe"
)

// A consumer that calls the deleter twice, or a deleter call for a tensor
// that is not ours, must not release anything twice.
func TestExportDeleterTwice(t *testing.T) {
	released := 0
	v := NewHostVector([]float64{1, 2})
	view, _ := v.View()
	mt, err := Export(view, func() { released++ })
	if err != nil {
		t.Fatal(err)
	}
	var other slot
	releaseExport(unsafe.Pointer(&other.mt)) // not an export: ignored
	cuvsgoDLPackExportDeleter(unsafe.Pointer(mt))
	cuvsgoDLPackExportDeleter(unsafe.Pointer(mt)) // the record is gone: ignored, memory untouched
	if released != 1 {
		t.Fatalf("released %d times", released)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}
