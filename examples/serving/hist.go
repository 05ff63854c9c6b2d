package main

import (
	"math/bits"
	"time"
)

// histogram counts latencies in nanoseconds in log-linear buckets: exact
// below 256 ns, then 128 buckets per power of two (a bucket is < 0.8% of
// its value wide). It is a fixed array, so recording allocates nothing.
// internal/cbench/csrc/cbench.c keeps the same buckets and percentile rule,
// so the two programs' percentiles are computed the same way.
type histogram [histBuckets]uint64

const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	// The largest bucket is that of 2^64-1: shift 56, index 56*128+255.
	histBuckets = (64-histSubBits-1)*histSub + 2*histSub
)

func histIndex(ns uint64) int {
	shift := 0
	if l := bits.Len64(ns); l > histSubBits+1 {
		shift = l - (histSubBits + 1)
	}
	return shift*histSub + int(ns>>shift)
}

// histValue is the middle of bucket i, in nanoseconds.
func histValue(i int) uint64 {
	shift := max(0, i/histSub-1)
	low := uint64(i-shift*histSub) << shift
	return low + (uint64(1)<<shift)>>1
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h[histIndex(uint64(d))]++
}

func (h *histogram) add(o *histogram) {
	for i, c := range o {
		h[i] += c
	}
}

func (h *histogram) count() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// percentile returns the value at or below which pct percent of the
// recorded latencies lie: the bucket holding the ceil(n*pct/100)-th
// smallest; 0 when nothing was recorded.
func (h *histogram) percentile(pct uint64) time.Duration {
	n := h.count()
	if n == 0 {
		return 0
	}
	rank := max(1, (n*pct+99)/100)
	var cum uint64
	for i, c := range h {
		cum += c
		if cum >= rank {
			return time.Duration(histValue(i))
		}
	}
	return 0
}

// maximum returns the middle of the highest non-empty bucket.
func (h *histogram) maximum() time.Duration {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i] != 0 {
			return time.Duration(histValue(i))
		}
	}
	return 0
}

// splitmix64 is the random generator of both programs (the C one has the
// same), so that they build the same index and search the same queries.
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float32 returns a uniform value in [0, 1).
func (s *splitmix64) float32() float32 { return float32(s.next()>>40) * (1.0 / (1 << 24)) }

// randomMatrix fills rows×dim float32s from seed.
func randomMatrix(seed uint64, rows, dim int) []float32 {
	s := splitmix64(seed)
	out := make([]float32, rows*dim)
	for i := range out {
		out[i] = s.float32()
	}
	return out
}

// querySeed is the seed of worker w's queries.
func querySeed(seed uint64, w int) uint64 { return seed ^ (0x5851f42d4c957f2d * uint64(w+1)) }
