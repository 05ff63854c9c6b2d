package safetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
)

// IsArg reports whether err is a *safe.ArgError naming arg.
func IsArg(err error, arg string) bool {
	var ae *safe.ArgError
	return errors.As(err, &ae) && ae.Arg == arg
}

// DeviceMemory returns the device allocations (cuvsRMMAlloc) the double
// holds now and its total count of them so far; ok is false in
// conformance mode, where nothing counts them.
func DeviceMemory() (live, acquired int64, ok bool) {
	if ctl == nil {
		return 0, 0, false
	}
	p := ctl.Counters()["rmm"]
	return p.Live(), p.Acquired, true
}

// Refused runs call, which must be refused with an *safe.ArgError naming
// arg (and, if not empty, saying why: a substring of the error) and, on
// the double, without allocating any device memory.
func Refused(t testing.TB, what, arg, why string, call func() error) {
	t.Helper()
	_, before, counted := DeviceMemory()
	err := call()
	if !IsArg(err, arg) {
		t.Errorf("%s: %v, want an *safe.ArgError naming %q", what, err, arg)
	} else if why != "" && !strings.Contains(err.Error(), why) {
		t.Errorf("%s: %v, want it to say %q", what, err, why)
	}
	if _, after, _ := DeviceMemory(); counted && after != before {
		t.Errorf("%s: refused after %d device allocations, want none", what, after-before)
	}
}

// CheckUnfilled compares a SearchSlice's results with what Index.Search
// wrote into device outputs for the same queries (raw ids and distances,
// k per row, copied to the host): slots the library left unfilled (an
// infinite distance) must come last in their row, hold one id throughout
// the row that fill accepts (given the row's filled ids), and read as
// safe.SentinelID64 with +Inf in got; the other slots must be equal. It
// returns how many slots were unfilled.
func CheckUnfilled(t testing.TB, rawIDs []int64, rawD []float32, k int, got *safe.Results, fill func(filled []int64, id int64) bool) int {
	t.Helper()
	if got == nil || got.K != k || len(got.Neighbors) != len(rawIDs) || len(got.Distances) != len(rawD) {
		t.Fatalf("results %+v for %d slots of %d", got, len(rawIDs), k)
	}
	unfilled := 0
	for q := 0; q < len(rawIDs)/k; q++ {
		row, rd := rawIDs[q*k:(q+1)*k], rawD[q*k:(q+1)*k]
		gi, gd := got.Row(q)
		filled := 0
		for j := range row {
			if !isInf(rd[j]) {
				if filled != j {
					t.Errorf("query %d: slot %d filled after an unfilled one: %v %v", q, j, row, rd)
				}
				filled++
				if gi[j] != row[j] || gd[j] != rd[j] {
					t.Errorf("query %d slot %d: results %d %g, the device had %d %g", q, j, gi[j], gd[j], row[j], rd[j])
				}
				continue
			}
			unfilled++
			if gi[j] != safe.SentinelID64 || !isInf(gd[j]) || gd[j] < 0 || safe.Valid(gi[j]) {
				t.Errorf("query %d slot %d (unfilled): results %d %g, want SentinelID64 +Inf", q, j, gi[j], gd[j])
			}
			if row[j] != row[filled] || !fill(row[:filled], row[j]) {
				t.Errorf("query %d slot %d (unfilled): the device had id %d (row %v)", q, j, row[j], row)
			}
		}
	}
	return unfilled
}

// FillMaxInt64 is the fill of IVF-SQ and IVF-PQ: math.MaxInt64.
func FillMaxInt64(_ []int64, id int64) bool { return id == safe.SentinelID64 }

// FillRepeat is IVF-Flat's fill without a filter: one of the row's filled
// ids again (the first row stored in the first probed list), or
// math.MaxInt64 when nothing was found.
func FillRepeat(filled []int64, id int64) bool {
	if len(filled) == 0 {
		return id == safe.SentinelID64
	}
	return contains(filled, id)
}

// FillRow returns IVF-Flat's fill with a filter, for an index of n rows:
// a row id, which the filter may exclude, or math.MaxInt64.
func FillRow(n int64) func([]int64, int64) bool {
	return func(_ []int64, id int64) bool { return id == safe.SentinelID64 || id >= 0 && id < n }
}

func isInf(f float32) bool { return f > 3.4028235e+38 || f < -3.4028235e+38 }

func contains(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
