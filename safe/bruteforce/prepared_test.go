package bruteforce_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// A prepared search gives exact results batch after batch, with a bitmap
// filter bound once; its buffers are its own until Close.
func TestPrepared(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	words := make([]uint32, kit.Words(nq*rows))
	for q := 0; q < nq; q++ {
		for i := 0; i < rows; i++ {
			if i%2 == q%2 {
				b := q*rows + i
				words[b/32] |= 1 << (b % 32)
			}
		}
	}
	bm, err := safe.NewBitmapFilter(f.res, nq, rows, words)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, bm)
	ps, err := idx.Prepare(f.queries, f.neighbors, f.distances, bm)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ps)
	ids := make([]int64, nq*k)
	idsT, _ := dlpack.NewHostMatrix(ids, nq, k)
	for batch := uint64(0); batch < 2; batch++ {
		qs := safetest.Random(50+batch, nq, dim)
		host, _ := dlpack.NewHostMatrix(qs, nq, dim)
		if err := ps.SetQueries(f.res, host); err != nil {
			t.Fatal(err)
		}
		if err := ps.Run(f.res); err != nil {
			t.Fatal(err)
		}
		if err := ps.Results(f.res, idsT, nil); err != nil {
			t.Fatal(err)
		}
		for q := 0; q < nq; q++ {
			checkExact(t, f.data, qs[q*dim:(q+1)*dim], ids[q*k:(q+1)*k], nil, k, func(i int) bool { return i%2 == q%2 })
		}
	}
	if err := f.neighbors.Close(); !errors.Is(err, dlpack.ErrBorrowed) {
		t.Errorf("closing bound neighbors: %v", err)
	}
	if ctl := safetest.Control(); ctl != nil { // fault injection: the double only
		ctl.FailNext("cuvsBruteForceSearch", "injected")
		if err := ps.Run(f.res); !isCuvs(err, "cuvsBruteForceSearch") {
			t.Errorf("injected failure: %v", err)
		}
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ps.Run(f.res); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	n32, _ := safe.NewDeviceMatrix[int32](f.res, nq, k)
	safetest.Close(t, n32)
	var ae *safe.ArgError
	if _, err := idx.Prepare(f.queries, n32, f.distances, nil); !errors.As(err, &ae) || ae.Arg != "neighbors" {
		t.Errorf("int32 neighbors: %v", err)
	}
}
