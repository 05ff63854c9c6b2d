package batch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// TestCAGRARowsFloat32, TestCAGRARowsInt8 and TestCAGRARowsUint8: no
// wrong rows through a Batcher over a CAGRA index of each element type
// cuVS's CAGRA takes. Many goroutines each make requests of 1–3 query
// rows with their own k, batched with one another, and every request's
// results must be those of the same queries searched alone with the
// index's own search (cagra.SearchSlice, the same parameters): ids equal
// position by position (but where two rows lie at the same distance,
// which a GPU's top-k may order either way: integer data has such ties),
// distances equal to float32 rounding.
//
// The kernel is single-CTA, chosen (not AutoAlgo, which picks by load):
// a query's single-CTA search does not depend on the other queries of its
// batch, where multi-CTA's CTAs share one visited-table per query and race
// on it. Dimension 32 of values spread over their type's range keeps ties
// rare at CAGRA's internal top-k, where one could change the walk.
//
// A library built without int8 or uint8 (the float32-only 26.06.00 build)
// refuses the index's build with its own text ("not compiled in this
// float32-only cuVS build: ..."), which this test reports as its failure:
// internal/gputest/run.sh counts that as the library's lack.
func TestCAGRARowsFloat32(t *testing.T) { cagraRows[float32](t) }
func TestCAGRARowsInt8(t *testing.T)    { cagraRows[int8](t) }
func TestCAGRARowsUint8(t *testing.T)   { cagraRows[uint8](t) }

// asType maps uniform [0, 1) values onto T's range: float32 as is, int8
// onto -128..127, uint8 onto 0..255.
func asType[T float32 | int8 | uint8](v []float32) []T {
	out := make([]T, len(v))
	for i, x := range v {
		switch p := any(&out[i]).(type) {
		case *float32:
			*p = x
		case *int8:
			*p = int8(int(x*256) - 128)
		case *uint8:
			*p = uint8(x * 256)
		}
	}
	return out
}

func cagraRows[T float32 | int8 | uint8](t *testing.T) {
	safetest.Check(t)
	const rows, d, k = 1000, 32, 8
	res := safetest.Resources(t)
	data := asType[T](safetest.Random(31, rows, d))
	ds, err := safe.DeviceMatrixFrom(res, data, rows, d)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = 32, 64
	idx, err := cagra.Build(res, ds, &p) // the library's own refusal, where it lacks T
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	if dt := idx.DType(); dt != dlpack.DataTypeOf[T]() {
		t.Fatalf("index of %s, built from %s", dt, dlpack.DataTypeOf[T]())
	}
	sp := cagraDefaults(t)
	sp.Algo = cagra.SingleCTA
	s, err := CAGRA(idx, sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New[float32, uint32](s, Options{MaxK: k}); dlpack.DataTypeOf[T]() != dlpack.Float32 && err == nil {
		t.Errorf("float32 queries on a %s index: accepted", dlpack.DataTypeOf[T]())
	}
	if ctl := safetest.Control(); ctl != nil {
		ctl.SetCallDelay(200 * time.Microsecond) // GPU time, so that batches form
		ctl.SetCallJitter(100 * time.Microsecond)
		t.Cleanup(func() { ctl.SetCallDelay(0); ctl.SetCallJitter(0) })
	}
	for _, o := range []Options{
		{MaxK: k, MaxBatch: 16, Slots: 3},
		{MaxK: k, MaxBatch: 16, Slots: 3, DeviceBuffers: true},
	} {
		t.Run(fmt.Sprintf("uint32 device buffers %v", o.DeviceBuffers), func(t *testing.T) {
			rowsThrough[T, uint32](t, res, idx, sp, s, o)
		})
		t.Run(fmt.Sprintf("int64 device buffers %v", o.DeviceBuffers), func(t *testing.T) {
			rowsThrough[T, int64](t, res, idx, sp, s, o)
		})
	}
}

// rowsThrough makes a Batcher over s with o, searches it from 24
// goroutines, 10 requests each, and compares each request with a direct
// search of its queries.
func rowsThrough[T float32 | int8 | uint8, N Neighbor](t *testing.T, res *safe.Resources, idx *cagra.Index, sp *cagra.SearchParams, s Searcher, o Options) {
	b, err := New[T, N](s, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WarmUp(); err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 24, 10
	type req struct {
		q    []T
		n    []N
		d    []float32
		k    int
		err  error
		seed uint64
	}
	reqs := make([][]req, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				seed := uint64(5000 + g*each + i)
				n := 1 + int(seed%3)
				r := req{q: asType[T](safetest.Random(seed, n, b.Dim())), k: 1 + int(seed%uint64(o.MaxK)), seed: seed}
				r.n, r.d = make([]N, n*r.k), make([]float32, n*r.k)
				r.err = b.SearchInto(context.Background(), r.q, r.n, r.d)
				reqs[g] = append(reqs[g], r)
			}
		}()
	}
	wg.Wait()
	st := b.Stats()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d batches, mean %.1f rows, p99 %d", st.Batches, st.Mean(), st.Percentile(99))
	if safetest.Control() != nil && st.Percentile(100) < 2 {
		t.Errorf("no batch of more than one row formed: %+v", st)
	}
	wrong := 0
	for g := range reqs {
		for _, r := range reqs[g] {
			if r.err != nil {
				t.Fatalf("goroutine %d, seed %d: %v", g, r.seed, r.err)
			}
			want, err := cagra.SearchSlice(res, idx, sp, r.q, r.k, nil)
			if err != nil {
				t.Fatal(err)
			}
			for j, id := range r.n {
				got := int64(id)
				if !safe.Valid(id) {
					got = safe.SentinelID64
				}
				w, wd := want.Neighbors[j], want.Distances[j]
				// Another id is right only at the same distance (a tie);
				// a row of another request's results would differ in its
				// distances.
				if (got == safe.SentinelID64) != (w == safe.SentinelID64) || !safetest.NearlyEqual(r.d[j], wd) {
					wrong++
					if wrong <= 5 {
						t.Errorf("goroutine %d, seed %d, row %d, k %d: slot %d holds %d at %v, a direct search gives %d at %v",
							g, r.seed, j/r.k, r.k, j%r.k, got, r.d[j], w, wd)
					}
				}
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d wrong result slots of %d requests", wrong, goroutines*each)
	}
}
