// Package unfilledtest checks, across packages, what a search writes in a
// result slot it cannot fill: the one sentinel of the id type
// (safe.Sentinel) with distance +Inf wherever this module writes the
// results, the backend's documented values in cuVS's own device outputs,
// and never anything else (no -1, no id that is not a row). It holds no
// code beyond its tests.
package unfilledtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

func TestMain(m *testing.M) { safetest.Main(m) }

// tieredFixture is a tiered index of 300 rows, 250 under CAGRA and 50
// fresh, and a filter letting 3 of them through.
func tieredFixture(t *testing.T, backend tiered.Backend) (*safe.Resources, *tiered.Index, *safe.Filter, []float32, map[int64]bool) {
	t.Helper()
	res := safetest.Resources(t)
	const dim, n = 4, 300
	data := safetest.Random(7, n, dim)
	first, err := safe.DeviceMatrixFrom(res, data[:250*dim], 250, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, first)
	p, err := tiered.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.MinANNRows = 200
	p.Backend = backend
	p.CAGRA = tiered.CAGRAParams{GraphDegree: 16, IntermediateGraphDegree: 32}
	p.IVFFlat.NLists = 8
	p.IVFPQ.NLists, p.IVFPQ.PQDim, p.IVFPQ.PQBits = 8, 2, 4 // 16-code books: 250 rows train them on the real library
	idx, err := tiered.Build(res, first, &p)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	fresh, err := safe.DeviceMatrixFrom(res, data[250*dim:], 50, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, fresh)
	if err := idx.Extend(res, fresh); err != nil {
		t.Fatal(err)
	}
	allowed := []int64{3, 100, 270}
	f, err := safe.NewBitsetFilterAllowing(res, n, allowed)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, f)
	ok := map[int64]bool{}
	for _, id := range allowed {
		ok[id] = true
	}
	return res, idx, f, data[:2*dim], ok
}

// checkRow fails t unless row holds the allowed rows first (each once) and
// then, in every slot past them, safe.SentinelID64 with +Inf.
func checkRow(t *testing.T, what string, ids []int64, dists []float32, ok map[int64]bool) {
	t.Helper()
	seen := map[int64]bool{}
	for j, id := range ids {
		if j < len(ok) {
			if !safe.Valid(id) || !ok[id] || seen[id] || math.IsInf(float64(dists[j]), 0) {
				t.Errorf("%s: slot %d holds %d (%v), want one of the allowed rows", what, j, id, dists[j])
			}
			seen[id] = true
			continue
		}
		if id != safe.Sentinel[int64]() || !math.IsInf(float64(dists[j]), 1) || safe.Valid(id) {
			t.Errorf("%s: unfilled slot %d holds %d (%v), want safe.SentinelID64 and +Inf", what, j, id, dists[j])
		}
	}
}

// A filter letting 3 rows through a search for 8: the slots past them hold
// safe.SentinelID64 and +Inf, in Go memory (SearchSlice) and in device
// outputs (Search, whose filtered path composes the tiers).
func TestTieredUnfilledSlots(t *testing.T) {
	safetest.Check(t)
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) { unfilledSlots(t, b) })
	}
}

var backends = []tiered.Backend{tiered.CAGRA, tiered.IVFFlat, tiered.IVFPQ}

func unfilledSlots(t *testing.T, b tiered.Backend) {
	res, idx, f, queries, ok := tieredFixture(t, b)
	const k = 8
	r, err := tiered.SearchSlice(res, idx, nil, queries, k, f)
	if err != nil {
		t.Fatal(err)
	}
	for q := range r.Len() {
		ids, dists := r.Row(q)
		checkRow(t, "SearchSlice", ids, dists, ok)
	}
	dq, err := safe.DeviceMatrixFrom(res, queries, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, dq)
	nb, err := safe.NewDeviceMatrix[int64](res, 2, k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, nb)
	ds, err := safe.NewDeviceMatrix[float32](res, 2, k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	if err := idx.Search(res, nil, dq, nb, ds, f); err != nil {
		t.Fatal(err)
	}
	ids, err := nb.ToHost(res)
	if err != nil {
		t.Fatal(err)
	}
	dists, err := ds.ToHost(res)
	if err != nil {
		t.Fatal(err)
	}
	for q := range 2 {
		checkRow(t, "Search", ids[q*k:(q+1)*k], dists[q*k:(q+1)*k], ok)
	}
}

// A query that finds nothing (NaN values in device memory, which Search
// does not read) leaves every slot unfilled: each holds a row, or a
// sentinel (the module's safe.SentinelID64, or CAGRA's own where the
// one-call path writes what cuVS wrote), never -1 or another id that is no
// row.
func TestTieredNoNegativeIDs(t *testing.T) {
	safetest.Check(t)
	for _, b := range backends {
		for _, k := range []int{8, 60} { // the one-call path; k past the fresh tier's rows: composed
			t.Run(fmt.Sprintf("%s/k=%d", b, k), func(t *testing.T) { noNegativeIDs(t, b, k) })
		}
	}
}

func noNegativeIDs(t *testing.T, b tiered.Backend, k int) {
	res, idx, _, queries, _ := tieredFixture(t, b)
	nan := append([]float32(nil), queries...)
	for i := range 4 {
		nan[i] = float32(math.NaN())
	}
	dq, err := safe.DeviceMatrixFrom(res, nan, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, dq)
	nb, err := safe.NewDeviceMatrix[int64](res, 2, k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, nb)
	ds, err := safe.NewDeviceMatrix[float32](res, 2, k)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	if err := idx.Search(res, nil, dq, nb, ds, nil); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		ids, err := nb.ToHost(res)
		if err != nil {
			t.Fatal(err)
		}
		for j, id := range ids {
			row := safe.Valid(id) && id < int64(idx.Rows()) && id != int64(cagra.SentinelID)
			if !row && id != safe.SentinelID64 && id != int64(cagra.SentinelID) {
				t.Errorf("%s: slot %d holds %d: neither a row nor a sentinel", what, j, id)
			}
		}
	}
	check("search")
	// With a row deleted every search composes the tiers.
	if _, err := idx.Delete([]int64{5}); err != nil {
		t.Fatal(err)
	}
	if err := idx.Search(res, nil, dq, nb, ds, nil); err != nil {
		t.Fatal(err)
	}
	check("search after Delete")
}
