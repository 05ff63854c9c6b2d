package safe

import "math"

// The sentinels of unfilled result slots, one per neighbor type. A search
// for k neighbors cannot always fill k slots: an IVF index whose probed
// lists hold fewer than k rows, a CAGRA search whose graph walk cannot
// reach enough allowed rows. What cuVS writes in such a slot of a device
// output differs by algorithm (each package's Search says what, and the
// table under Sentinel); wherever this module delivers results in Go
// memory (Results from the one-call searches, the batcher's results) an
// unfilled slot holds the sentinel of its neighbor type and distance +Inf,
// whatever the algorithm.
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
//
// # Neighbor ids
//
// The neighbor id type of each package's outputs, and what a slot cuVS
// could not fill holds in device (or, for hnsw, host) outputs. Results in
// Go memory (Results, SearchSlice, BuildSlice, the batcher) always hold
// the sentinel of their type (Sentinel) with distance +Inf instead.
//
//	package       ids              unfilled slot
//	bruteforce    int64            none: a filter letting fewer than k rows through is refused
//	cagra         uint32, int64    2147483647 (SentinelID32), distance math.MaxFloat32
//	ivfflat       int64            a repeated row id, or 9223372036854775807 (SentinelID64) when every probed list is empty, distance ±Inf
//	ivfpq         int64            9223372036854775807 (SentinelID64), distance ±Inf
//	ivfsq         int64            9223372036854775807 (SentinelID64), distance ±Inf
//	hnsw          int64, uint64    none from Search (k ≤ Rows()); 9223372036854775807 (SentinelID64), distance +Inf, from SearchSlice with a filter
//	tiered        int64            9223372036854775807 (SentinelID64), distance +Inf; the one-call paths write their backend's
//	refine        int64            none: k ≤ candidates
//	distance      none             none
//	nndescent     uint32           none: short lists are filled with other rows
//	allneighbors  int64            none
//	vamana        uint32           none: a row's unfilled slots are left out of the file
//	kmeans        none             none
//	batch         the index's      the sentinel of the type (Sentinel), distance +Inf
//	multigpu      int64            9223372036854775807 (SentinelID64), distance +Inf
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

// Valid reports whether id can be a row of an index: true for 0 up to
// below the sentinel of its type, false for the sentinel (Sentinel[N]),
// for negative int64 ids and for ids above the sentinel (a uint32 with its
// top bit set, which CAGRA uses as a flag; a uint64 beyond int64's range,
// such as -1 read as uint64), none of which is a row.
func Valid[N NeighborID](id N) bool {
	switch v := any(id).(type) {
	case uint32:
		return v < SentinelID32
	case int64:
		return v >= 0 && v < SentinelID64
	case uint64:
		return v < uint64(SentinelID64)
	}
	return false
}
