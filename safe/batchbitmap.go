package safe

import "math"

// A batch bitmap is a bitmap Filter whose words and query count a
// batch.Batcher rewrites for each batch of brute-force requests with
// different filters (a row of bits per query, each copied from its
// request's bitset): device words for maxQueries × rows bits, allocated
// once, and per batch the query count and each query's allowed count
// (setBatchQueries). Nothing exported makes one: the Batcher reaches it
// through safe/internal/kit, and a search through it only while no other
// search uses it (the Batcher's slot owns it).

// newBatchBitmap allocates a batch bitmap for at most maxQueries queries
// over an index of rows rows.
func newBatchBitmap(res *Resources, maxQueries, rows int64) (*Filter, error) {
	const op = "safe.newBatchBitmap"
	if maxQueries < 1 || rows < 1 || rows > math.MaxInt64/maxQueries {
		return nil, argf(op, "rows", "%d queries × %d rows: want positive sizes that do not overflow", maxQueries, rows)
	}
	v, err := NewDeviceVector[uint32](res, int(wordsFor(maxQueries*rows)))
	if err != nil {
		return nil, err
	}
	v.Owner().SetLabel("batch bitmap filter")
	return &Filter{kind: Bitmap, rows: rows, queries: maxQueries, perQuery: make([]int64, maxQueries), words: v}, nil
}

// setBatchQueries makes f, a batch bitmap, a filter for len(perQuery)
// queries, query q letting perQuery[q] rows through (its words already
// written for them).
func (f *Filter) setBatchQueries(perQuery []int64) {
	f.perQuery = f.perQuery[:len(perQuery)]
	copy(f.perQuery, perQuery)
	f.queries = int64(len(perQuery))
	f.allowed = 0
	for q, n := range perQuery {
		if q == 0 || n < f.allowed {
			f.allowed = n
		}
	}
}

// batchWords returns a batch bitmap's device words.
func (f *Filter) batchWords() *DeviceVector[uint32] { return f.words }
