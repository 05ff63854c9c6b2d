package cagra_test

import (
	"math"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// A filter allowing fewer rows than k: the device outputs hold CAGRA's
// SentinelID with SentinelDistance past the allowed rows (what the real
// library writes, imitated on the exact path); SearchSlice's results hold
// safe.SentinelID64 with +Inf there, as every package's, so safe.Valid
// tells them; cagra.Valid tells both.
func TestSearchSliceUnfilled(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	allowed := []int64{3, 50, 120}
	filter, err := safe.NewBitsetFilterAllowing(f.res, rows, allowed)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, filter)
	if err := idx.Search(f.res, &f.sp, f.queries, f.n64, f.dist, filter); err != nil {
		t.Fatal(err)
	}
	if err := f.res.Sync(); err != nil {
		t.Fatal(err)
	}
	rawN, err := f.n64.ToHost(f.res)
	if err != nil {
		t.Fatal(err)
	}
	rawD, err := f.dist.ToHost(f.res)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cagra.SearchSlice(f.res, idx, &f.sp, f.qs, k, filter)
	if err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(1))
	for q := range nq {
		for j := range k {
			i := q*k + j
			if j < len(allowed) {
				if rawN[i] != got.Neighbors[i] || rawD[i] != got.Distances[i] || !safe.Valid(got.Neighbors[i]) {
					t.Errorf("query %d slot %d: results %d %g, the device had %d %g", q, j, got.Neighbors[i], got.Distances[i], rawN[i], rawD[i])
				}
				continue
			}
			if rawN[i] != int64(cagra.SentinelID) || rawD[i] != cagra.SentinelDistance {
				t.Errorf("query %d slot %d: the device had %d %g, want CAGRA's sentinels", q, j, rawN[i], rawD[i])
			}
			if got.Neighbors[i] != safe.SentinelID64 || got.Distances[i] != inf || safe.Valid(got.Neighbors[i]) || cagra.Valid(got.Neighbors[i]) {
				t.Errorf("query %d slot %d: results %d %g, want SentinelID64 +Inf", q, j, got.Neighbors[i], got.Distances[i])
			}
		}
	}
}

// cagra.SentinelID is safe.SentinelID32; cagra.Valid refuses it and safe's
// int64 sentinel both.
func TestSentinelAlias(t *testing.T) {
	if cagra.SentinelID != safe.SentinelID32 {
		t.Fatal("cagra.SentinelID is not safe.SentinelID32")
	}
	if cagra.Valid(safe.SentinelID64) || cagra.Valid(int64(cagra.SentinelID)) || cagra.Valid(safe.SentinelID32) || !cagra.Valid(int64(7)) {
		t.Error("cagra.Valid")
	}
}
