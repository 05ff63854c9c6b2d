package safe

import "math"

// The sentinels of unfilled result slots, one per neighbor type. A search
// for k neighbors cannot always fill k slots: an IVF index whose probed
// lists hold fewer than k rows, a CAGRA search whose graph walk cannot
// reach enough allowed rows. What cuVS writes in such a slot of a device
// output differs by algorithm (each package's Search says what); wherever
// this module delivers results in Go memory (Results from the one-call
// searches, the batcher's results) an unfilled slot holds the sentinel of
// its neighbor type and distance +Inf, whatever the algorithm.
const (
	// SentinelID32 is the sentinel of uint32 neighbors: CAGRA's own
	// (2^31-1, the index type's maximum with the top bit cleared).
	SentinelID32 uint32 = math.MaxInt32
	// SentinelID64 is the sentinel of int64 neighbors: the IVF indexes'
	// own (math.MaxInt64, cuVS's kOutOfBoundsRecord).
	SentinelID64 int64 = math.MaxInt64
	// SentinelID64U is the sentinel of uint64 neighbors.
	SentinelID64U uint64 = math.MaxUint64
)

// NeighborID is the set of neighbor id types of cuVS's searches.
type NeighborID interface {
	uint32 | int64 | uint64
}

// Sentinel returns the sentinel of neighbor type N: SentinelID32,
// SentinelID64 or SentinelID64U.
func Sentinel[N NeighborID]() N {
	var z N
	// Variables, not the constants: a constant conversion to N must fit
	// every type of the set.
	s32, s64, s64u := SentinelID32, SentinelID64, SentinelID64U
	switch any(z).(type) {
	case uint32:
		return N(s32)
	case int64:
		return N(s64)
	}
	return N(s64u)
}

// Valid reports whether id is a neighbor rather than the sentinel of its
// type (Sentinel[N]).
func Valid[N NeighborID](id N) bool { return id != Sentinel[N]() }
