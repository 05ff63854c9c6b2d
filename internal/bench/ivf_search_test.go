package bench_test

import (
	"runtime"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// BenchmarkIVFFlatSearch: one IVF-Flat search of nQueries×dim float32
// queries for k neighbors, the double in instant mode (the index is built
// before instant mode starts): the generated layer (row 3), safe/ivfflat's
// Search and Prepared.Run (rows 4). Int64 neighbors, 16 lists, 4 probes.
func BenchmarkIVFFlatSearch(b *testing.B) {
	res := resources(b)
	dataset, err := safe.DeviceMatrixFrom(res, safetest.Random(1, nRows, dim), nRows, dim)
	must(b, err)
	closeAtEnd(b, dataset)
	p, err := ivfflat.DefaultIndexParams()
	must(b, err)
	p.NLists = 16
	idx, err := ivfflat.Build(res, dataset, &p)
	must(b, err)
	closeAtEnd(b, idx)
	sp := &ivfflat.SearchParams{NProbes: 4}
	dev := deviceTensors[int64](b, res)
	allowed := make([]int64, 0, nRows/2)
	for i := int64(0); i < nRows; i += 2 {
		allowed = append(allowed, i)
	}
	bitset, err := safe.NewBitsetFilterAllowing(res, nRows, allowed)
	must(b, err)
	closeAtEnd(b, bitset)

	b.Run("3_generated", func(b *testing.B) {
		// a raw index of the generated layer's own
		var rawIdx generated.CuvsIvfFlatIndex_t
		must(b, generated.CuvsIvfFlatIndexCreate(&rawIdx))
		b.Cleanup(func() { must(b, generated.CuvsIvfFlatIndexDestroy(rawIdx)) })
		h := rawResources(b)
		dv, err := dataset.View()
		must(b, err)
		c := dlpack.Begin("bench raw build")
		dt, err := c.In(&dv)
		must(b, err)
		cp := generated.CuvsIvfFlatIndexParams{Metric: generated.CuvsDistanceType_L2Expanded, AddDataOnBuild: true,
			NLists: 16, KmeansNIters: 20, KmeansTrainsetFraction: 0.5}
		var pin runtime.Pinner
		must(b, generated.CuvsIvfFlatBuild(h, cp.Pin(&pin), dt, rawIdx))
		pin.Unpin()
		must(b, generated.CuvsStreamSync(h))
		c.End()
		q, n, d := bound(b, deviceTensors[int64](b, res))
		csp := &generated.CuvsIvfFlatSearchParams{NProbes: 4}
		f := generated.CuvsFilter{Type: generated.CuvsFilterType_NO_FILTER}
		instant(b)
		b.ReportAllocs()
		var spin runtime.Pinner
		defer spin.Unpin()
		hsp := csp.Pin(&spin)
		for b.Loop() {
			if err := generated.CuvsIvfFlatSearch(h, hsp, rawIdx, q, n, d, f); err != nil {
				b.Fatal(err)
			}
		}
	})
	safeRow := func(name string, f *safe.Filter) {
		b.Run(name, func(b *testing.B) {
			instant(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := idx.Search(res, sp, dev.q, dev.n, dev.d, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	safeRow("4_safe_device", nil)
	safeRow("4_safe_device_bitset", bitset)
	b.Run("4_safe_prepared_device", func(b *testing.B) {
		t := deviceTensors[int64](b, res)
		ps, err := idx.Prepare(sp, t.q.(dlpack.TensorMut), t.n, t.d, nil)
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

// TestIVFFlatSearchAllocatesNothing holds the hot path to 0 allocations
// per search (Search and Prepared.Run), in instant mode.
func TestIVFFlatSearchAllocatesNothing(t *testing.T) {
	if race.Enabled { // the race detector allocates on its own
		t.Skip("the race detector allocates")
	}
	res, err := safe.NewResources()
	must2(t, err)
	defer res.Close()
	dataset, err := safe.DeviceMatrixFrom(res, safetest.Random(1, nRows, dim), nRows, dim)
	must2(t, err)
	defer dataset.Close()
	p, err := ivfflat.DefaultIndexParams()
	must2(t, err)
	p.NLists = 16
	idx, err := ivfflat.Build(res, dataset, &p)
	must2(t, err)
	defer idx.Close()
	q, err := safe.DeviceMatrixFrom(res, safetest.Random(2, nQueries, dim), nQueries, dim)
	must2(t, err)
	defer q.Close()
	n, err := safe.NewDeviceMatrix[int64](res, nQueries, k)
	must2(t, err)
	defer n.Close()
	d, err := safe.NewDeviceMatrix[float32](res, nQueries, k)
	must2(t, err)
	defer d.Close()
	ctl := safetest.Double(t, "instant mode")
	ctl.SetInstant(true)
	defer ctl.SetInstant(false)
	sp := &ivfflat.SearchParams{NProbes: 4}
	if a := testing.AllocsPerRun(100, func() {
		if err := idx.Search(res, sp, q, n, d, nil); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("ivfflat Search: %v allocations per search", a)
	}
}

func must2(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
