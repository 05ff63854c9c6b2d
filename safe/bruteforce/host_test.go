package bruteforce_test

import (
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// A dataset in Go memory builds an index that searches exactly like one
// built from device memory, and the index owns its copy: changing the Go
// slice after Build changes nothing.
func TestBuildFromHost(t *testing.T) {
	f := setup(t)
	dev, err := bruteforce.Build(f.res, f.dataset, nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, dev)
	data := slices.Clone(f.data)
	hm, err := dlpack.NewHostMatrix(data, rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	host, err := bruteforce.Build(f.res, hm, nil)
	if err != nil {
		t.Fatalf("Build from host memory: %v", err)
	}
	safetest.Close(t, host)
	for i := range data {
		data[i] = -1000 // after Build: must not reach the index
	}
	for _, idx := range []*bruteforce.Index{dev, host} {
		if idx.Rows() != rows || idx.Dim() != dim {
			t.Fatalf("shape %d × %d", idx.Rows(), idx.Dim())
		}
	}
	search := func(idx *bruteforce.Index) ([]int64, []float32) {
		if err := idx.Search(f.res, f.queries, f.neighbors, f.distances, nil); err != nil {
			t.Fatal(err)
		}
		nb, err := f.neighbors.ToHost(f.res)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := f.distances.ToHost(f.res)
		if err != nil {
			t.Fatal(err)
		}
		return nb, ds
	}
	wn, wd := search(dev)
	gn, gd := search(host)
	if !slices.Equal(wn, gn) || !slices.Equal(wd, gd) {
		t.Errorf("host build: %v %v\ndevice build: %v %v", gn, gd, wn, wd)
	}
	want := safetest.ExactKNN(f.data, f.qs, dim, k, safetest.L2, nil)
	for q := range want {
		if !slices.Equal(gn[q*k:(q+1)*k], want[q]) {
			t.Errorf("query %d: %v, want %v", q, gn[q*k:(q+1)*k], want[q])
		}
	}
	// The host dataset was not borrowed: its Go slice is free.
	if _, err := hm.View(); err != nil {
		t.Error(err)
	}
}
