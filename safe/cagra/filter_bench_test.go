package cagra_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// BenchmarkFilteredSearch: the filter policy's own cost on the double
// (5,000 × 64 uniform, 100 dataset rows as queries, k 10, default build and
// search params), a search + sync: unfiltered, then with filters allowing
// 100% and 50% of the rows (the policy's choice; its graph path by a tiny
// FilterExactBelow: at 50% the post-filter path, an unfiltered search at
// itopk 64 for 40 candidates read back and filtered on the host; then
// each path forced). One search before the timing copies the filter's
// bitset to the host once (the post-filter path keeps it with the filter).
func BenchmarkFilteredSearch(b *testing.B) {
	const n, d, nq, k = 5000, 64, 100, 10
	res, err := safe.NewResources()
	if err != nil {
		b.Fatal(err)
	}
	defer res.Close()
	data := safetest.Random(18, n, d)
	ds, err := safe.DeviceMatrixFrom(res, data, n, d)
	if err != nil {
		b.Fatal(err)
	}
	defer ds.Close()
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		b.Fatal(err)
	}
	idx, err := cagra.Build(res, ds, &p)
	if err != nil {
		b.Fatal(err)
	}
	defer idx.Close()
	q, err := safe.DeviceMatrixFrom(res, data[:nq*d], nq, d)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	nb, _ := safe.NewDeviceMatrix[int64](res, nq, k)
	defer nb.Close()
	dist, _ := safe.NewDeviceMatrix[float32](res, nq, k)
	defer dist.Close()
	all := make([]int64, 0, n)
	half := make([]int64, 0, n/2)
	for i := int64(0); i < n; i++ {
		all = append(all, i)
		if i%2 == 0 {
			half = append(half, i)
		}
	}
	fAll, _ := safe.NewBitsetFilterAllowing(res, n, all)
	defer fAll.Close()
	fHalf, _ := safe.NewBitsetFilterAllowing(res, n, half)
	defer fHalf.Close()
	for _, c := range []struct {
		name   string
		filter *safe.Filter
		path   safe.FilterPath
		below  float64
	}{
		{"unfiltered", nil, safe.FilterAuto, 0},
		{"100pct_auto", fAll, safe.FilterAuto, 0},
		{"50pct_auto", fHalf, safe.FilterAuto, 0},
		{"50pct_policy_graph", fHalf, safe.FilterAuto, 1e-9},
		{"50pct_graph_forced", fHalf, safe.FilterIndex, 0},
		{"50pct_exact_forced", fHalf, safe.FilterExact, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			sp := cagra.SearchParams{FilterPath: c.path, FilterExactBelow: c.below}
			if err := idx.Search(res, &sp, q, nb, dist, c.filter); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := idx.Search(res, &sp, q, nb, dist, c.filter); err != nil {
					b.Fatal(err)
				}
				if err := res.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
