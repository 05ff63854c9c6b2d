package bench_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// ivfpqIndex builds a small IVF-PQ index (nRows × dim float32 from the
// host, 8 lists) for the search rows, closed at the end of b.
func ivfpqIndex(b *testing.B, res *safe.Resources) (*ivfpq.Index, ivfpq.SearchParams) {
	host, err := dlpack.NewHostMatrix(safetest.Random(1, nRows, dim), nRows, dim)
	must(b, err)
	p, err := ivfpq.DefaultIndexParams()
	must(b, err)
	p.NLists, p.KMeansNIters = 8, 5
	idx, err := ivfpq.Build(res, host, &p)
	must(b, err)
	closeAtEnd(b, idx)
	sp, err := ivfpq.DefaultSearchParams()
	must(b, err)
	return idx, sp
}

// BenchmarkSearchIVFPQ is IVF-PQ's part of the table: one search of
// nQueries×dim float32 queries for k int64 neighbors, the double in instant
// mode. Row 3 calls the generated layer on an index and params of its own,
// rows 4 go through safe/ivfpq.
func BenchmarkSearchIVFPQ(b *testing.B) {
	bindFloor(b)
	res := resources(b)
	idx, sp := ivfpqIndex(b, res)
	dev := deviceTensors[int64](b, res)
	pin := pinnedTensors[int64](b)

	b.Run("3_generated", func(b *testing.B) {
		h := rawResources(b)
		var rawIdx generated.CuvsIvfPqIndex_t
		must(b, generated.CuvsIvfPqIndexCreate(&rawIdx))
		b.Cleanup(func() { must(b, generated.CuvsIvfPqIndexDestroy(rawIdx)) })
		var ip generated.CuvsIvfPqIndexParams_t
		must(b, generated.CuvsIvfPqIndexParamsCreate(&ip))
		ip.Ref().NLists, ip.Ref().KmeansNIters = 8, 5
		host, err := dlpack.NewHostMatrix(safetest.Random(1, nRows, dim), nRows, dim)
		must(b, err)
		hv, err := host.View()
		must(b, err)
		c := dlpack.Begin("bench raw build")
		ht, err := c.In(&hv)
		must(b, err)
		must(b, generated.CuvsIvfPqBuild(h, ip, ht, rawIdx))
		must(b, generated.CuvsStreamSync(h))
		c.End()
		must(b, generated.CuvsIvfPqIndexParamsDestroy(ip))
		var rsp generated.CuvsIvfPqSearchParams_t
		must(b, generated.CuvsIvfPqSearchParamsCreate(&rsp))
		b.Cleanup(func() { must(b, generated.CuvsIvfPqSearchParamsDestroy(rsp)) })
		q, n, d := bound(b, deviceTensors[int64](b, res))
		instant(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := generated.CuvsIvfPqSearch(h, rsp, rawIdx, q, n, d); err != nil {
				b.Fatal(err)
			}
		}
	})
	safeRow := func(name string, t outputs[int64]) {
		b.Run(name, func(b *testing.B) {
			instant(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := idx.Search(res, &sp, t.q, t.n, t.d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	safeRow("4_safe_device", dev)
	safeRow("4_safe_pinned", pin)
	b.Run("4_safe_prepared_device", func(b *testing.B) {
		t := deviceTensors[int64](b, res)
		ps, err := idx.Prepare(&sp, t.q.(dlpack.TensorMut), t.n, t.d)
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
