package batch

import (
	"context"
	"math"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
)

// Results a Batcher delivers hold safe's sentinel of their neighbor type
// with +Inf in slots the index could not fill: CAGRA with a filter
// allowing fewer rows than k writes its own 2^31-1 and FLT_MAX on the
// device; the Batcher's uint32 and int64 results hold SentinelID32 and
// SentinelID64 with +Inf.
func TestUnfilledSlots(t *testing.T) {
	safetest.Check(t)
	const rows, d, k = 200, 8, 6
	res := safetest.Resources(t)
	data := safetest.Random(3, rows, d)
	idx := buildCAGRA(t, res, data, rows, d, 16)
	allowed := []int64{4, 40}
	filter, err := safe.NewBitsetFilterAllowing(res, rows, allowed)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, filter)
	s, err := CAGRA(idx, cagraDefaults(t), filter)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, valid func(int) bool, dist []float32) {
		t.Helper()
		for j := range k {
			if filled := j < len(allowed); valid(j) != filled || math.IsInf(float64(dist[j]), 1) == filled {
				t.Errorf("%s slot %d: valid %v, distance %g", name, j, valid(j), dist[j])
			}
		}
	}
	b32, err := New[float32, uint32](s, Options{MaxK: k})
	if err != nil {
		t.Fatal(err)
	}
	defer b32.Close()
	r32, err := b32.Search(context.Background(), data[:d], k)
	if err != nil {
		t.Fatal(err)
	}
	// Search hands out int64 ids whatever N: a uint32 sentinel becomes
	// SentinelID64, as in every SearchSlice.
	check("uint32", func(j int) bool { return safe.Valid(r32.Neighbors[j]) }, r32.Distances)
	n32, d32 := make([]uint32, k), make([]float32, k)
	if err := b32.SearchInto(context.Background(), data[:d], n32, d32); err != nil {
		t.Fatal(err)
	}
	check("uint32 SearchInto", func(j int) bool { return safe.Valid(n32[j]) }, d32)
	b64, err := New[float32, int64](s, Options{MaxK: k})
	if err != nil {
		t.Fatal(err)
	}
	defer b64.Close()
	r64, err := b64.Search(context.Background(), data[:d], k)
	if err != nil {
		t.Fatal(err)
	}
	check("int64", func(j int) bool { return safe.Valid(r64.Neighbors[j]) }, r64.Distances)
}
