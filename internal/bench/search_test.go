package bench_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/bench"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// The shape of every search: a small batch, as online serving sends. In
// instant mode the sizes change nothing but the metadata.
const (
	nQueries = 10
	k        = 10
	dim      = 128
	nRows    = 512 // rows of the indexes searched
)

// instant turns the double's instant mode on until the end of b: its search
// functions then return CUVS_SUCCESS at once, so what is measured is the
// cost of reaching them.
func instant(b *testing.B) {
	ctl := safetest.Double(b, "instant mode")
	ctl.SetInstant(true)
	b.Cleanup(func() { ctl.SetInstant(false) })
}

// needDouble skips a benchmark, before it makes anything, unless it runs on
// the double: its rows compare the bindings with the double's instant floor.
func needDouble(b *testing.B) {
	safetest.Double(b, "instant mode (these benchmarks measure the bindings against the double's floor, not a GPU)")
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func closeAtEnd(b *testing.B, c interface{ Close() error }) {
	b.Cleanup(func() {
		if err := c.Close(); err != nil {
			b.Error(err)
		}
	})
}

// outputs are the tensors of one search: queries, neighbors (N) and
// distances.
type outputs[N int64 | uint32] struct {
	q dlpack.Tensor
	n dlpack.TensorMut
	d dlpack.TensorMut
}

func deviceTensors[N int64 | uint32](b *testing.B, res *safe.Resources) outputs[N] {
	q, err := safe.DeviceMatrixFrom(res, safetest.Random(2, nQueries, dim), nQueries, dim)
	must(b, err)
	closeAtEnd(b, q)
	n, err := safe.NewDeviceMatrix[N](res, nQueries, k)
	must(b, err)
	closeAtEnd(b, n)
	d, err := safe.NewDeviceMatrix[float32](res, nQueries, k)
	must(b, err)
	closeAtEnd(b, d)
	return outputs[N]{q, n, d}
}

func pinnedTensors[N int64 | uint32](b *testing.B) outputs[N] {
	q, err := safe.NewPinnedMatrix[float32](nQueries, dim)
	must(b, err)
	copy(q.Data(), safetest.Random(2, nQueries, dim))
	closeAtEnd(b, q)
	n, err := safe.NewPinnedMatrix[N](nQueries, k)
	must(b, err)
	closeAtEnd(b, n)
	d, err := safe.NewPinnedMatrix[float32](nQueries, k)
	must(b, err)
	closeAtEnd(b, d)
	return outputs[N]{q, n, d}
}

// goSliceTensors lends Go slices (kDLCPU). cuVS's searches refuse host
// memory, so these serve only the views row.
func goSliceTensors(b *testing.B) outputs[uint32] {
	q, err := dlpack.NewHostMatrix(safetest.Random(2, nQueries, dim), nQueries, dim)
	must(b, err)
	n, err := dlpack.NewHostMatrix(make([]uint32, nQueries*k), nQueries, k)
	must(b, err)
	d, err := dlpack.NewHostMatrix(make([]float32, nQueries*k), nQueries, k)
	must(b, err)
	return outputs[uint32]{q, n, d}
}

// bound materializes the three tensors for one call that stays open until
// the end of b (for the raw rows, which take C tensors).
func bound[N int64 | uint32](b *testing.B, t outputs[N]) (q, n, d *generated.DLManagedTensor) {
	qv, err := t.q.View()
	must(b, err)
	nm, err := t.n.ViewMut()
	must(b, err)
	dm, err := t.d.ViewMut()
	must(b, err)
	c := dlpack.Begin("bench raw call")
	b.Cleanup(c.End)
	q, err = c.In(&qv)
	must(b, err)
	n, err = c.Out(&nm)
	must(b, err)
	d, err = c.Out(&dm)
	must(b, err)
	return q, n, d
}

// views3 is row 5: what a search does to its three tensors, without the
// search: take the views, materialize them for one call, end the call.
func views3[N int64 | uint32](b *testing.B, t outputs[N]) {
	b.ReportAllocs()
	for b.Loop() {
		qv, err1 := t.q.View()
		nm, err2 := t.n.ViewMut()
		dm, err3 := t.d.ViewMut()
		c := dlpack.Begin("bench views")
		_, err4 := c.In(&qv)
		_, err5 := c.Out(&nm)
		_, err6 := c.Out(&dm)
		c.End()
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || err6 != nil {
			b.Fatal(err1, err2, err3, err4, err5, err6)
		}
	}
}

func resources(b *testing.B) *safe.Resources {
	res, err := safe.NewResources()
	must(b, err)
	closeAtEnd(b, res)
	return res
}

func bindFloor(b *testing.B) {
	must(b, bench.Bind(safetest.LibraryPath()))
}

// rawResources is a cuvsResources_t of the generated layer's own.
func rawResources(b *testing.B) generated.CuvsResources_t {
	var h generated.CuvsResources_t
	must(b, generated.CuvsResourcesCreate(&h))
	b.Cleanup(func() { must(b, generated.CuvsResourcesDestroy(h)) })
	return h
}

// BenchmarkSearch is the table of BENCHMARKS.md: one search of nQueries×dim
// float32 queries for k neighbors through each layer, the double in instant
// mode. Rows 1-3 pass the generated layer's own handles and tensors, rows 4
// go through safe/cagra and safe/bruteforce, row 5 is the views of row 4
// alone.
func BenchmarkSearch(b *testing.B) {
	needDouble(b)
	b.Run("cagra", benchCagra)
	b.Run("bruteforce", benchBruteForce)
}

// benchCagra: CAGRA, uint32 neighbors, bitset filter.
func benchCagra(b *testing.B) {
	bindFloor(b)
	res := resources(b)
	data := safetest.Random(1, nRows, dim)

	// the generated layer's index, params and tensors
	h := rawResources(b)
	var ip generated.CuvsCagraIndexParams_t
	must(b, generated.CuvsCagraIndexParamsCreate(&ip))
	var rawIdx generated.CuvsCagraIndex_t
	must(b, generated.CuvsCagraIndexCreate(&rawIdx))
	b.Cleanup(func() { must(b, generated.CuvsCagraIndexDestroy(rawIdx)) })
	host, err := dlpack.NewHostMatrix(data, nRows, dim)
	must(b, err)
	hv, err := host.View()
	must(b, err)
	c := dlpack.Begin("bench raw build")
	ht, err := c.In(&hv)
	must(b, err)
	must(b, generated.CuvsCagraBuild(h, ip, ht, rawIdx))
	must(b, generated.CuvsStreamSync(h))
	c.End()
	must(b, generated.CuvsCagraIndexParamsDestroy(ip))
	var sp generated.CuvsCagraSearchParams_t
	must(b, generated.CuvsCagraSearchParamsCreate(&sp))
	b.Cleanup(func() { must(b, generated.CuvsCagraSearchParamsDestroy(sp)) })

	// the safe layer's
	p, err := cagra.DefaultIndexParams()
	must(b, err)
	idx, err := cagra.Build(res, host, &p)
	must(b, err)
	closeAtEnd(b, idx)
	sparams, err := cagra.DefaultSearchParams()
	must(b, err)
	dev := deviceTensors[uint32](b, res)
	pin := pinnedTensors[uint32](b)
	allowed := make([]int64, 0, nRows/2)
	for i := int64(0); i < nRows; i += 2 {
		allowed = append(allowed, i)
	}
	bitset, err := safe.NewBitsetFilterAllowing(res, nRows, allowed)
	must(b, err)
	closeAtEnd(b, bitset)

	// the C tensors the rows 1-3 pass: device matrices of their own
	rawArgs := func(b *testing.B) *bench.CagraSearchArgs {
		q, n, d := bound(b, deviceTensors[uint32](b, res))
		return &bench.CagraSearchArgs{Res: h, Params: sp, Index: rawIdx, Queries: q, Neighbors: n, Distances: d,
			Filter: generated.CuvsFilter{Type: generated.CuvsFilterType_NO_FILTER}}
	}

	b.Run("1_floor_C_loop", func(b *testing.B) {
		a := rawArgs(b)
		instant(b)
		b.ReportAllocs()
		b.ResetTimer()
		if failed := bench.CagraSearchLoop(b.N, a); failed != 0 {
			b.Fatalf("%d calls failed", failed)
		}
	})
	b.Run("2_cgo_bare", func(b *testing.B) {
		a := rawArgs(b)
		instant(b)
		b.ReportAllocs()
		for b.Loop() {
			if r := bench.CagraSearchBare(a); r != int32(generated.CuvsError_t_CUVS_SUCCESS) {
				b.Fatalf("cuvsCagraSearch returned %d", r)
			}
		}
	})
	b.Run("3_generated", func(b *testing.B) {
		a := rawArgs(b)
		instant(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := generated.CuvsCagraSearch(a.Res, a.Params, a.Index, a.Queries, a.Neighbors, a.Distances, a.Filter); err != nil {
				b.Fatal(err)
			}
		}
	})
	safeRow := func(name string, t outputs[uint32], f *safe.Filter) {
		b.Run(name, func(b *testing.B) {
			instant(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := idx.Search(res, &sparams, t.q, t.n, t.d, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	safeRow("4_safe_device", dev, nil)
	safeRow("4_safe_pinned", pin, nil)
	safeRow("4_safe_device_bitset", dev, bitset)
	// Selective filters take the exact path (brute force over the index's
	// dataset, see cagra.SearchParams.FilterExactBelow): int64 neighbors
	// with at least k rows allowed are one brute-force call; uint32
	// neighbors, or fewer rows than k, add scratch memory and a round trip
	// through the host.
	exactRow := func(name string, few []int64, below float64, wide bool) {
		b.Run(name, func(b *testing.B) {
			f, err := safe.NewBitsetFilterAllowing(res, nRows, few)
			must(b, err)
			closeAtEnd(b, f)
			sp := sparams
			sp.FilterExactBelow = below
			var t outputs[uint32]
			var t64 outputs[int64]
			search := func() error { return idx.Search(res, &sp, t.q, t.n, t.d, f) }
			if wide {
				t64 = deviceTensors[int64](b, res)
				search = func() error { return idx.Search(res, &sp, t64.q, t64.n, t64.d, f) }
			} else {
				t = deviceTensors[uint32](b, res)
			}
			must(b, search()) // builds the brute-force index once, outside instant mode
			instant(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := search(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	twenty := make([]int64, 20)
	for i := range twenty {
		twenty[i] = int64(i * 25)
	}
	exactRow("4_safe_device_bitset_exact_int64", twenty, 0.1, true)
	exactRow("4_safe_device_bitset_exact_uint32_3rows", []int64{1, 200, 400}, 0, false)
	preparedRow := func(name string, f *safe.Filter) {
		b.Run(name, func(b *testing.B) {
			t := deviceTensors[uint32](b, res)
			ps, err := idx.Prepare(&sparams, t.q.(dlpack.TensorMut), t.n, t.d, f)
			must(b, err)
			closeAtEnd(b, ps)
			instant(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := ps.Run(res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	preparedRow("4_safe_prepared_device", nil)
	preparedRow("4_safe_prepared_device_bitset", bitset)
	b.Run("5_views3_device", func(b *testing.B) { views3(b, dev) })
	b.Run("5_views3_pinned", func(b *testing.B) { views3(b, pin) })
	b.Run("5_views3_goslice", func(b *testing.B) { views3(b, goSliceTensors(b)) })
}

// benchBruteForce: brute force, int64 neighbors, bitset and bitmap filters.
func benchBruteForce(b *testing.B) {
	bindFloor(b)
	res := resources(b)
	dataset, err := safe.DeviceMatrixFrom(res, safetest.Random(1, nRows, dim), nRows, dim)
	must(b, err)
	closeAtEnd(b, dataset) // after the indexes: cleanups run last-in first-out

	h := rawResources(b)
	var rawIdx generated.CuvsBruteForceIndex_t
	must(b, generated.CuvsBruteForceIndexCreate(&rawIdx))
	b.Cleanup(func() { must(b, generated.CuvsBruteForceIndexDestroy(rawIdx)) })
	dv, err := dataset.View()
	must(b, err)
	c := dlpack.Begin("bench raw build")
	dt, err := c.In(&dv)
	must(b, err)
	must(b, generated.CuvsBruteForceBuild(h, dt, generated.CuvsDistanceType_L2Expanded, 2, rawIdx))
	c.End()

	idx, err := bruteforce.Build(res, dataset, nil)
	must(b, err)
	closeAtEnd(b, idx)
	dev := deviceTensors[int64](b, res)
	pin := pinnedTensors[int64](b)
	allowed := make([]int64, 0, nRows/2)
	for i := int64(0); i < nRows; i += 2 {
		allowed = append(allowed, i)
	}
	bitset, err := safe.NewBitsetFilterAllowing(res, nRows, allowed)
	must(b, err)
	closeAtEnd(b, bitset)
	words := make([]uint32, (nQueries*nRows+31)/32)
	for i := range words {
		words[i] = 0x55555555
	}
	bitmap, err := safe.NewBitmapFilter(res, nQueries, nRows, words)
	must(b, err)
	closeAtEnd(b, bitmap)

	rawArgs := func(b *testing.B) *bench.BruteForceSearchArgs {
		q, n, d := bound(b, deviceTensors[int64](b, res))
		return &bench.BruteForceSearchArgs{Res: h, Index: rawIdx, Queries: q, Neighbors: n, Distances: d,
			Filter: generated.CuvsFilter{Type: generated.CuvsFilterType_NO_FILTER}}
	}

	b.Run("1_floor_C_loop", func(b *testing.B) {
		a := rawArgs(b)
		instant(b)
		b.ReportAllocs()
		b.ResetTimer()
		if failed := bench.BruteForceSearchLoop(b.N, a); failed != 0 {
			b.Fatalf("%d calls failed", failed)
		}
	})
	b.Run("2_cgo_bare", func(b *testing.B) {
		a := rawArgs(b)
		instant(b)
		b.ReportAllocs()
		for b.Loop() {
			if r := bench.BruteForceSearchBare(a); r != int32(generated.CuvsError_t_CUVS_SUCCESS) {
				b.Fatalf("cuvsBruteForceSearch returned %d", r)
			}
		}
	})
	b.Run("3_generated", func(b *testing.B) {
		a := rawArgs(b)
		instant(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := generated.CuvsBruteForceSearch(a.Res, a.Index, a.Queries, a.Neighbors, a.Distances, a.Filter); err != nil {
				b.Fatal(err)
			}
		}
	})
	safeRow := func(name string, t outputs[int64], f *safe.Filter) {
		b.Run(name, func(b *testing.B) {
			instant(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := idx.Search(res, t.q, t.n, t.d, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	safeRow("4_safe_device", dev, nil)
	safeRow("4_safe_pinned", pin, nil)
	safeRow("4_safe_device_bitset", dev, bitset)
	safeRow("4_safe_device_bitmap", dev, bitmap)
	b.Run("4_safe_prepared_device", func(b *testing.B) {
		t := deviceTensors[int64](b, res)
		ps, err := idx.Prepare(t.q.(dlpack.TensorMut), t.n, t.d, nil)
		must(b, err)
		closeAtEnd(b, ps)
		instant(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := ps.Run(res); err != nil {
				b.Fatal(err)
			}
		}
	})
}
