package bench_test

import (
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

// BenchmarkIVFFiltered: the filter policy's own cost (issue 18), on the
// double computing for real (not instant mode): N = 20,000 × 64 float32,
// cuVS's default params (1,024 lists, 20 probes), 100 queries from the
// dataset, k = 10. For each IVF index, the unfiltered search, then a
// filtered one (FilterAuto) letting 100% and 50% of the rows through,
// search and stream sync; for IVF-PQ also with the dataset (refine) and
// with FilterIndex (the caller's probes). The target: filtered ≤ 1.2 × unfiltered.
func BenchmarkIVFFiltered(b *testing.B) {
	const n, d, nq, k = 20000, 64, 100, 10
	res := resources(b)
	data := safetest.Random(1, n, d)
	dataset, err := safe.DeviceMatrixFrom(res, data, n, d)
	must(b, err)
	closeAtEnd(b, dataset)
	queries, err := safe.DeviceMatrixFrom(res, data[:nq*d], nq, d)
	must(b, err)
	closeAtEnd(b, queries)
	nb, err := safe.NewDeviceMatrix[int64](res, nq, k)
	must(b, err)
	closeAtEnd(b, nb)
	dist, err := safe.NewDeviceMatrix[float32](res, nq, k)
	must(b, err)
	closeAtEnd(b, dist)
	filters := map[string]*safe.Filter{}
	for _, c := range []struct {
		name string
		step int64
	}{{"100pct", 1}, {"50pct", 2}} {
		ids := make([]int64, 0, n)
		for i := int64(0); i < n; i += c.step {
			ids = append(ids, i)
		}
		f, err := safe.NewBitsetFilterAllowing(res, n, ids)
		must(b, err)
		closeAtEnd(b, f)
		filters[c.name] = f
	}
	// ratio runs the unfiltered search and a filtered one alternately,
	// timing each (the machine is shared: alternating cancels its drift),
	// and reports filtered/unfiltered as the metric "x_unfiltered".
	ratio := func(b *testing.B, unf, filt func() error) {
		var tu, tf time.Duration
		for b.Loop() {
			for i, s := range []func() error{unf, filt} {
				t0 := time.Now()
				if err := s(); err != nil {
					b.Fatal(err)
				}
				if err := res.Sync(); err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					tu += time.Since(t0)
				} else {
					tf += time.Since(t0)
				}
			}
		}
		b.ReportMetric(float64(tf)/float64(tu), "x_unfiltered")
	}
	loop := func(b *testing.B, search func() error) {
		b.ReportAllocs()
		for b.Loop() {
			if err := search(); err != nil {
				b.Fatal(err)
			}
			if err := res.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("ivfflat", func(b *testing.B) {
		idx, err := ivfflat.Build(res, dataset, nil)
		must(b, err)
		closeAtEnd(b, idx)
		b.Run("unfiltered", func(b *testing.B) {
			loop(b, func() error { return idx.Search(res, nil, queries, nb, dist, nil) })
		})
		for _, name := range []string{"100pct", "50pct"} {
			f := filters[name]
			b.Run(name, func(b *testing.B) {
				loop(b, func() error { return idx.Search(res, nil, queries, nb, dist, f) })
			})
			b.Run(name+"_ratio", func(b *testing.B) {
				ratio(b, func() error { return idx.Search(res, nil, queries, nb, dist, nil) },
					func() error { return idx.Search(res, nil, queries, nb, dist, f) })
			})
		}
	})
	b.Run("ivfsq", func(b *testing.B) {
		idx, err := ivfsq.Build(res, dataset, nil)
		must(b, err)
		closeAtEnd(b, idx)
		b.Run("unfiltered", func(b *testing.B) {
			loop(b, func() error { return idx.Search(res, nil, queries, nb, dist, nil) })
		})
		for _, name := range []string{"100pct", "50pct"} {
			f := filters[name]
			b.Run(name, func(b *testing.B) {
				loop(b, func() error { return idx.Search(res, nil, queries, nb, dist, f) })
			})
			b.Run(name+"_ratio", func(b *testing.B) {
				ratio(b, func() error { return idx.Search(res, nil, queries, nb, dist, nil) },
					func() error { return idx.Search(res, nil, queries, nb, dist, f) })
			})
		}
	})
	b.Run("ivfpq", func(b *testing.B) {
		idx, err := ivfpq.Build(res, dataset, nil)
		must(b, err)
		closeAtEnd(b, idx)
		b.Run("unfiltered", func(b *testing.B) {
			loop(b, func() error { return idx.Search(res, nil, queries, nb, dist) })
		})
		for _, name := range []string{"100pct", "50pct"} {
			for _, mode := range []string{"", "_refine", "_index"} {
				sub := name + mode
				var fs *ivfpq.Filtered
				switch mode {
				case "_refine":
					fs, err = idx.NewFiltered(res, nil, filters[name], dataset, nq, k)
				case "_index": // the caller's probes, not raised
					fs, err = idx.NewFiltered(res, &ivfpq.SearchParams{FilterPath: safe.FilterIndex}, filters[name], nil, nq, k)
				default:
					fs, err = idx.NewFiltered(res, nil, filters[name], nil, nq, k)
				}
				must(b, err)
				closeAtEnd(b, fs)
				b.Run(sub, func(b *testing.B) {
					loop(b, func() error { return fs.Search(res, queries, nb, dist) })
				})
				b.Run(sub+"_ratio", func(b *testing.B) {
					ratio(b, func() error { return idx.Search(res, nil, queries, nb, dist) },
						func() error { return fs.Search(res, queries, nb, dist) })
				})
			}
		}
	})
}
