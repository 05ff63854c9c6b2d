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
}
