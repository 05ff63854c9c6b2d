package cagra_test

import (
	"math"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// Refusals come before any device memory is taken, name the argument the
// caller passed (k, not a neighbors tensor it never saw), and give a nil
// result: among them a float64 query slice for a float32 index, which used
// to panic in the buffer pool.
func TestSearchSliceRefusedBeforeAllocation(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	other, err := safe.NewBitsetFilterAllowing(f.res, rows+1, []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, other)
	nan := append([]float32(nil), f.qs[:3*dim]...)
	nan[2*dim] = float32(math.Inf(1))
	badAlgo := f.sp
	badAlgo.Algo = 99
	for _, c := range []struct {
		name, arg, why string
		sp             *cagra.SearchParams
		queries        []float32
		k              int
		filter         *safe.Filter
	}{
		{"k = 0", "k", "", nil, f.qs, 0, nil},
		{"k above the rows", "k", "exceeds", nil, f.qs, rows + 1, nil},
		{"k = 1<<24", "k", "exceeds", nil, f.qs, 1 << 24, nil},
		{"k = 1<<40", "k", "exceeds", nil, f.qs, 1 << 40, nil},
		{"+Inf query", "queries", "row 2 holds +Inf", nil, nan, k, nil},
		{"a filter for other rows", "filter", "rows", nil, f.qs, k, other},
		{"bad params", "params.Algo", "", &badAlgo, f.qs, k, nil},
	} {
		safetest.Refused(t, c.name, c.arg, c.why, func() error {
			r, err := cagra.SearchSlice(f.res, idx, c.sp, c.queries, c.k, c.filter)
			if r != nil {
				t.Errorf("%s: a result with error %v", c.name, err)
			}
			return err
		})
	}
	safetest.Refused(t, "float64 queries", "queries", "float64", func() error {
		_, err := cagra.SearchSlice(f.res, idx, nil, make([]float64, dim), 1, nil)
		return err
	})
}

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

// Build and Extend from Go memory refuse NaN and infinite values, naming
// the argument and the first bad row.
func TestHostInputsNonFinite(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(3, 100, dim)
	bad := append([]float32(nil), data...)
	bad[42*dim+1] = float32(math.NaN())
	p := params(t)
	safetest.Refused(t, "Build NaN", "dataset", "row 42 holds NaN", func() error {
		idx, err := cagra.Build(res, hostMatrix(t, bad, 100, dim), &p)
		if idx != nil {
			idx.Close()
		}
		return err
	})
	idx := build(t, res, hostMatrix(t, data, 100, dim), p)
	more := safetest.Random(4, 10, dim)
	more[3*dim] = float32(math.Inf(-1))
	if err := idx.Extend(res, hostMatrix(t, more, 10, dim), nil); !safetest.IsArg(err, "additional") {
		t.Errorf("Extend -Inf: %v", err)
	}
}
