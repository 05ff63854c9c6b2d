package multigpu_test

import (
	"sync"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// Searches from several goroutines run while Extends wait their turn and
// Close waits for both; every search sees the index before or after an
// Extend, never half of one (its k nearest are always valid ids).
func TestConcurrentSearchExtend(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	data, qs := safetest.Random(70, rows, dim), safetest.Random(71, nq, dim)
	ip, sp := allProbes(4)
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Mode: multigpu.Replicated, Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	extra := safetest.Random(72, 40, dim)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				got, err := idx.SearchK(res, &multigpu.IVFFlatSearchParams{Base: sp}, host(t, qs, nq), k)
				if err != nil {
					t.Error(err)
					return
				}
				for _, id := range got.Neighbors {
					if id < 0 || id >= rows+40 {
						t.Errorf("id %d", id)
						return
					}
				}
			}
		}()
	}
	for i := 0; i < 4; i++ {
		if err := idx.Extend(res, host(t, extra[i*10*dim:(i+1)*10*dim], 10), nil); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if idx.Rows() != rows+40 {
		t.Fatalf("rows %d", idx.Rows())
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idx.Extend(res, host(t, extra[:dim], 1), nil); err == nil {
		t.Fatal("Extend after Close")
	}
}

// Extend refuses, before C, what cuVS would misread.
func TestExtendRefusals(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	data := safetest.Random(73, rows, dim)
	ip, _ := allProbes(4)
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	one := safetest.Random(74, 1, dim)
	type refusal struct {
		name, arg string
		err       error
	}
	cases := []refusal{
		{"wrong dimension", "vectors", idx.Extend(res, host(t, data[:4*dim], 8), nil)},
		{"wrong dtype", "vectors", idx.Extend(res, dlpack.NewHostVector(make([]float32, 4)), nil)},
		{"nil vectors", "vectors", idx.Extend(res, nil, nil)},
	}
	if res.Ranks() > 1 { // one device takes one row
		cases = append(cases, refusal{"one row over two devices", "vectors", idx.Extend(res, host(t, one, 1), nil)})
	}
	for _, c := range cases {
		if !safetest.IsArg(c.err, c.arg) {
			t.Errorf("%s: %v, want an ArgError naming %s", c.name, c.err, c.arg)
		}
	}
	if idx.Rows() != rows {
		t.Fatalf("refused extends changed Rows to %d", idx.Rows())
	}
}
