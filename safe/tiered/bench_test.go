package tiered_test

import (
	"fmt"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

// BenchmarkTieredSearch: a search + sync of 1 and 100 queries (k 10) of a
// tiered index whose CAGRA tier holds 20,000 × 64 uniform rows (graph
// degree 32, itopk 64) and whose fresh tier holds 0, 1, 100 or 10,000
// rows, against a plain cagra.Index over the same ANN rows built with the
// same parameters ("cagra"). With 0 fresh rows the tiered search is one
// cuvsTieredIndexSearch; with fresh rows it is the composed path (two
// searches into device scratch, three host copies, a host merge).
func BenchmarkTieredSearch(b *testing.B) {
	const n, d, k = 20000, 64, 10
	res, err := safe.NewResources()
	if err != nil {
		b.Fatal(err)
	}
	defer res.Close()
	data := safetest.Random(30, n+10000, d)
	ann, err := safe.DeviceMatrixFrom(res, data[:n*d], n, d)
	if err != nil {
		b.Fatal(err)
	}
	defer ann.Close()
	cp, err := cagra.DefaultIndexParams()
	if err != nil {
		b.Fatal(err)
	}
	cp.GraphDegree, cp.IntermediateGraphDegree = 32, 64
	plain, err := cagra.Build(res, ann, &cp)
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	tp, err := tiered.DefaultIndexParams()
	if err != nil {
		b.Fatal(err)
	}
	tp.MinANNRows = 1000
	tp.CAGRA = tiered.CAGRAParams{GraphDegree: 32, IntermediateGraphDegree: 64}
	sp := &tiered.SearchParams{CAGRA: tiered.CAGRASearchParams{ITopKSize: 64}}
	csp, err := cagra.DefaultSearchParams()
	if err != nil {
		b.Fatal(err)
	}
	csp.ITopKSize = 64
	for _, nq := range []int{1, 100} {
		q, err := safe.DeviceMatrixFrom(res, data[:nq*d], nq, d)
		if err != nil {
			b.Fatal(err)
		}
		nb, _ := safe.NewDeviceMatrix[int64](res, nq, k)
		dist, _ := safe.NewDeviceMatrix[float32](res, nq, k)
		b.Run(fmt.Sprintf("cagra/q%d", nq), func(b *testing.B) {
			for b.Loop() {
				if err := plain.Search(res, &csp, q, nb, dist, nil); err != nil {
					b.Fatal(err)
				}
				if err := res.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, fresh := range []int{0, 1, 100, 10000} {
			idx, err := tiered.Build(res, ann, &tp)
			if err != nil {
				b.Fatal(err)
			}
			if fresh > 0 {
				add, err := safe.DeviceMatrixFrom(res, data[n*d:(n+fresh)*d], fresh, d)
				if err != nil {
					b.Fatal(err)
				}
				if err := idx.Extend(res, add); err != nil {
					b.Fatal(err)
				}
				_ = add.Close()
			}
			b.Run(fmt.Sprintf("tiered/fresh%d/q%d", fresh, nq), func(b *testing.B) {
				for b.Loop() {
					if err := idx.Search(res, sp, q, nb, dist, nil); err != nil {
						b.Fatal(err)
					}
					if err := res.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			})
			_ = idx.Close()
		}
		_ = q.Close()
		_ = nb.Close()
		_ = dist.Close()
	}
}
