package bruteforce_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
)

// An index and its searches on device 1's resources; queries on device 0
// are refused before any C call.
func TestSearchOnDevice(t *testing.T) {
	safetest.Check(t)
	if ctl := safetest.Control(); ctl != nil {
		ctl.SetDeviceCount(2)
		t.Cleanup(func() { ctl.SetDeviceCount(1) })
	} else if n, err := safe.DeviceCount(); err != nil || n < 2 {
		t.Skipf("needs 2 CUDA devices: %d, %v", n, err)
	}
	res := make([]*safe.Resources, 2)
	for d := range res {
		r, err := safe.NewResources(safe.OnDevice(d))
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, r)
		res[d] = r
	}
	mat := func(d int, data []float32, rows, cols int) *safe.DeviceMatrix[float32] {
		m, err := safe.DeviceMatrixFrom(res[d], data, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		safetest.Close(t, m)
		return m
	}
	data := safetest.Random(1, rows, dim)
	dataset := mat(1, data, rows, dim)
	idx, err := bruteforce.Build(res[1], dataset, nil)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	if _, err := bruteforce.Build(res[0], dataset, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("device 1's dataset built on device 0: %v", err)
	}
	qs := data[:nq*dim] // rows of the dataset: each finds itself first
	nb, err := safe.NewDeviceMatrix[int64](res[1], nq, k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, nb)
	dist := mat(1, make([]float32, nq*k), nq, k)
	if err := idx.Search(res[1], mat(1, qs, nq, dim), nb, dist, nil); err != nil {
		t.Fatal(err)
	}
	got, err := nb.ToHost(res[1])
	if err != nil {
		t.Fatal(err)
	}
	for q := 0; q < nq; q++ {
		if got[q*k] != int64(q) {
			t.Errorf("query %d: first neighbor %d", q, got[q*k])
		}
	}
	var ae *safe.ArgError
	if err := idx.Search(res[1], mat(0, qs, nq, dim), nb, dist, nil); !errors.As(err, &ae) {
		t.Errorf("device 0's queries on device 1's resources: %v", err)
	}
	// The index lives on device 1: device 0's resources, with tensors of
	// their own device, are refused too.
	nb0, err := safe.NewDeviceMatrix[int64](res[0], nq, k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, nb0)
	if err := idx.Search(res[0], mat(0, qs, nq, dim), nb0, mat(0, make([]float32, nq*k), nq, k), nil); !errors.As(err, &ae) || ae.Arg != "res" {
		t.Errorf("device 1's index searched with device 0's resources and tensors: %v", err)
	}
	// A search prepared on device 1's tensors refuses device 0's resources.
	queries := mat(1, qs, nq, dim)
	p, err := idx.Prepare(queries, nb, dist, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Run(res[1]); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(res[0]); !errors.As(err, &ae) || ae.Arg != "res" {
		t.Errorf("a search prepared on device 1 run on device 0's resources: %v", err)
	}
}
