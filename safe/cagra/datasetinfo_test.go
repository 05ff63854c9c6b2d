package cagra_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// TestDatasetInfo: on 26.08 an index built from padded device rows views
// them (not owning, device, padded, their dtype); one built from host rows,
// references the library's own padded copy, and once extended a view of
// the concatenation made for it; on 26.06 there is
// no dataset object to describe.
func TestDatasetInfo(t *testing.T) {
	f := setup(t)
	if !on2608() {
		idx := build(t, f.res, f.dataset, params(t))
		if _, err := idx.DatasetInfo(); !errors.Is(err, safe.ErrNotInRelease) {
			t.Fatalf("on %s: %v, want ErrNotInRelease", safe.Release(), err)
		}
		return
	}
	m := deviceMatrix(t, f.res, f.data, rows, dim) // 16 float32s a row: already padded
	viewing := build(t, f.res, m, params(t))
	got, err := viewing.DatasetInfo()
	if err != nil {
		t.Fatal(err)
	}
	if want := (cagra.DatasetInfo{DType: dlpack.Float32, Device: true, Padded: true, Owning: false}); got != want {
		t.Errorf("built from padded device rows: %+v, want %+v", got, want)
	}
	owning := build(t, f.res, hostMatrix(t, f.data, rows, dim), params(t))
	if got, err = owning.DatasetInfo(); err != nil {
		t.Fatal(err)
	}
	if want := (cagra.DatasetInfo{DType: dlpack.Float32, Device: true, Padded: true, Owning: true}); got != want {
		t.Errorf("built from host rows: %+v, want %+v", got, want)
	}
	if err := viewing.Extend(f.res, hostMatrix(t, safetest.Random(5, 4, dim), 4, dim), nil); err != nil {
		t.Fatal(err)
	}
	// Extend rebinds the index to a concatenation in device memory this
	// package allocated for it: 32-byte rows, so a padded view of it.
	if got, err = viewing.DatasetInfo(); err != nil || got != (cagra.DatasetInfo{DType: dlpack.Float32, Device: true, Padded: true}) {
		t.Errorf("after Extend: %+v, %v, want a padded device view", got, err)
	}
	if err := viewing.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := viewing.DatasetInfo(); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	var nilIdx *cagra.Index
	if _, err := nilIdx.DatasetInfo(); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil index: %v", err)
	}
}
