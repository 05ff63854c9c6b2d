package safe

// Results are the k nearest neighbours of each of a search's queries, in Go
// memory: what the one-call searches (cagra.SearchSlice,
// bruteforce.SearchSlice, ...) return. Row i holds query i's neighbours,
// nearest first.
//
// Neighbors are int64 row ids for every algorithm. A slot the search could
// not fill holds SentinelID64 with distance +Inf, whatever the algorithm
// wrote there on the device (each package's Search says what): test ids
// with Valid. Unfilled slots come last in a row.
type Results struct {
	K         int       // neighbours per query
	Neighbors []int64   // Len()×K row ids, row-major
	Distances []float32 // Len()×K distances, row-major
}

// Len returns the number of queries.
func (r *Results) Len() int {
	if r == nil || r.K == 0 {
		return 0
	}
	return len(r.Neighbors) / r.K
}

// Row returns query i's neighbours and their distances (sub-slices of
// Neighbors and Distances, not copies).
func (r *Results) Row(i int) (neighbors []int64, distances []float32) {
	if r == nil || i < 0 || i >= r.Len() {
		return nil, nil
	}
	return r.Neighbors[i*r.K : (i+1)*r.K : (i+1)*r.K], r.Distances[i*r.K : (i+1)*r.K : (i+1)*r.K]
}
