package safe_test

import (
	"math"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
)

// One sentinel per neighbor type, CAGRA's for uint32 and the IVF indexes'
// for int64; Valid tells real ids from them.
func TestSentinels(t *testing.T) {
	if safe.SentinelID32 != 0x7FFFFFFF || safe.SentinelID64 != math.MaxInt64 || safe.SentinelID64U != math.MaxUint64 {
		t.Fatal("sentinel values")
	}
	if safe.Sentinel[uint32]() != safe.SentinelID32 || safe.Sentinel[int64]() != safe.SentinelID64 || safe.Sentinel[uint64]() != safe.SentinelID64U {
		t.Error("Sentinel")
	}
	if !safe.Valid(uint32(0)) || !safe.Valid(int64(0x7FFFFFFF)) || !safe.Valid(uint64(1)) {
		t.Error("Valid refuses a real id")
	}
	if safe.Valid(safe.SentinelID32) || safe.Valid(safe.SentinelID64) || safe.Valid(safe.SentinelID64U) {
		t.Error("Valid accepts a sentinel")
	}
	// Nothing that is not a row is valid (issue 46): a negative int64 (-1,
	// which tiered once wrote in unfilled slots), a uint32 with the top bit
	// CAGRA uses as a flag, a uint64 outside int64's range (-1 read as
	// uint64); the largest ids below the sentinels are rows.
	for _, c := range []struct {
		name  string
		valid bool
		want  bool
	}{
		{"int64 -1", safe.Valid(int64(-1)), false},
		{"int64 MinInt64", safe.Valid(int64(math.MinInt64)), false},
		{"int64 below the sentinel", safe.Valid(int64(math.MaxInt64 - 1)), true},
		{"uint32 0xFFFFFFFF", safe.Valid(uint32(math.MaxUint32)), false},
		{"uint32 0x80000000", safe.Valid(uint32(1 << 31)), false},
		{"uint32 below the sentinel", safe.Valid(uint32(math.MaxInt32 - 1)), true},
		{"uint64 SentinelID64", safe.Valid(uint64(math.MaxInt64)), false},
		{"uint64 1<<63", safe.Valid(uint64(1 << 63)), false},
		{"uint64 below", safe.Valid(uint64(math.MaxInt64 - 1)), true},
	} {
		if c.valid != c.want {
			t.Errorf("Valid(%s) = %t, want %t", c.name, c.valid, c.want)
		}
	}
}
