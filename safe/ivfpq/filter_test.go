package ivfpq_test

import (
	"sync"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// The filtered-recall data set: issue 18's N = 20,000, D = 64, 100
// queries from the dataset, k = 10, cuVS's default params (1,024 lists,
// 20 probes).
var (
	filterDataOnce sync.Once
	filterData     *safetest.FilterData
)

func filteredData() *safetest.FilterData {
	filterDataOnce.Do(func() { filterData = safetest.NewFilterData(20000, 64, 100, 10) })
	return filterData
}

// A filtered IVF-PQ search (which cuVS's C API lacks) keeps recall@10
// (against the exact answer among the allowed rows) within 0.03 of the
// unfiltered search's at every fraction allowed, from 100% to 3 rows,
// with the dataset given (refine, exact for selective filters), through
// Filtered.Search (all the queries, and half of them) and
// SearchSliceFiltered; no slot is unfilled while at least k rows are
// allowed. Without the dataset the figures are logged, and the slots are
// checked down to 10%.
func TestFilteredRecall(t *testing.T) {
	safetest.Check(t)
	fd := filteredData()
	res := safetest.Resources(t)
	ds, err := safe.DeviceMatrixFrom(res, fd.Data, fd.N, fd.D)
	must(t, err)
	safetest.Close(t, ds)
	idx, err := ivfpq.Build(res, ds, nil)
	must(t, err)
	safetest.Close(t, idx)
	queries, err := safe.DeviceMatrixFrom(res, fd.Queries, fd.NQ, fd.D)
	must(t, err)
	safetest.Close(t, queries)
	nb, err := safe.NewDeviceMatrix[int64](res, fd.NQ, fd.K)
	must(t, err)
	safetest.Close(t, nb)
	dd, err := safe.NewDeviceMatrix[float32](res, fd.NQ, fd.K)
	must(t, err)
	safetest.Close(t, dd)
	must(t, idx.Search(res, nil, queries, nb, dd))
	ids, err := nb.ToHost(res)
	must(t, err)
	base := safetest.Recall(ids, fd.K, fd.Exact(nil))
	floor := base - 0.03
	t.Logf("unfiltered recall@%d %.3f", fd.K, base)
	half := fd.NQ / 2
	hq, err := safe.DeviceMatrixFrom(res, fd.Queries[:half*fd.D], half, fd.D)
	must(t, err)
	safetest.Close(t, hq)
	hn, err := safe.NewDeviceMatrix[int64](res, half, fd.K)
	must(t, err)
	safetest.Close(t, hn)
	hd, err := safe.NewDeviceMatrix[float32](res, half, fd.K)
	must(t, err)
	safetest.Close(t, hd)
	out := new(safe.Results)
	for _, c := range fd.Cases() {
		filter, err := safe.NewBitsetFilterAllowing(res, fd.N, c.Allowed)
		must(t, err)
		exact := fd.Exact(c.OK)
		for _, withData := range []bool{true, false} {
			var data *safe.DeviceMatrix[float32]
			name := c.Name + " without dataset"
			if withData {
				data, name = ds, c.Name
			}
			var f *ivfpq.Filtered
			if data != nil {
				f, err = idx.NewFiltered(res, nil, filter, data, safe.L2Expanded, fd.NQ, fd.K)
			} else {
				f, err = idx.NewFiltered(res, nil, filter, nil, safe.L2Expanded, fd.NQ, fd.K)
			}
			must(t, err)
			check := func(what string, ids []int64, dists []float32, rows int) {
				t.Helper()
				r := safetest.Recall(ids, fd.K, exact[:rows])
				t.Logf("%s %s: recall %.3f", name, what, r)
				if withData && r < floor {
					t.Errorf("%s %s: recall@%d %.3f, want at least %.3f (unfiltered %.3f - 0.03)", name, what, fd.K, r, floor, base)
				}
				if withData || len(c.Allowed) >= fd.N/10 {
					safetest.CheckFilled(t, name+" "+what, ids, dists, fd.K, &c)
				}
			}
			must(t, f.Search(res, queries, nb, dd))
			ids, err := nb.ToHost(res)
			must(t, err)
			dists, err := dd.ToHost(res)
			must(t, err)
			check("Search", ids, dists, fd.NQ)

			if !withData { // the second pass searches the whole batch again
				must(t, ivfpq.SearchSliceFiltered(res, f, fd.Queries, out))
				check("SearchSlice", out.Neighbors, out.Distances, fd.NQ)
				must(t, f.Close())
				continue
			}
			must(t, f.Search(res, hq, hn, hd))
			hids, err := hn.ToHost(res)
			must(t, err)
			hdists, err := hd.ToHost(res)
			must(t, err)
			for i := range hids {
				if hids[i] != ids[i] || hdists[i] != dists[i] {
					t.Fatalf("%s: half the queries: slot %d is %d (%g), all of them gave %d (%g)", name, i, hids[i], hdists[i], ids[i], dists[i])
				}
			}

			must(t, ivfpq.SearchSliceFiltered(res, f, fd.Queries, out))
			check("SearchSlice", out.Neighbors, out.Distances, fd.NQ)
			must(t, f.Close())
		}
		must(t, filter.Close())
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
