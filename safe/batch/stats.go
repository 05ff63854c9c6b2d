package batch

import (
	"time"
)

// Stats counts the batches a Batcher has run, and where their time went.
type Stats struct {
	Batches int64 // searches run
	Light   int64 // of them, searched with the light-load kernel (CAGRA with AutoAlgo: multi-CTA)
	// Filtered is the batches searched with their requests' filter
	// (SearchFiltered, SearchIntoFiltered).
	Filtered int64
	// Mixed is the filtered batches whose requests carried different
	// filters, searched at once with a bitmap (BruteForce; see Batcher,
	// section Filters).
	Mixed int64
	// Scans is the batches searched as scans: brute force's, and CAGRA's
	// on its exact path (cagra.Index.PlanFilter for one query), of which
	// at most 2 search at once (see Batcher, section Filters).
	Scans int64
	// MaxPassed is the most batches taken while one request waited in the
	// queue: with requests of several filters, at most one per other filter
	// whose queued rows ahead of it fit in MaxBatch (see Batcher, section
	// Filters).
	MaxPassed int64
	Queries   int64   // query rows searched, those of cancelled requests included
	Sizes     []int64 // Sizes[n] is the number of batches of n rows
	Times     Times
}

// Times is where a Batcher's time went, summed: a request's life is Queue
// (waiting for a slot, or for MaxWait), then its batch's Handoff (the slot's
// goroutine waking), Stage, Search and Deliver.
type Times struct {
	Requests int64         // requests taken into batches
	Led      int64         // batches searched by their one caller's goroutine (no hand-off)
	Queue    time.Duration // over requests: enqueued → taken into a batch
	Handoff  time.Duration // over batches: slot dispatched → its goroutine took the batch
	Stage    time.Duration // over batches: queries copied into pinned staging
	Search   time.Duration // over batches: copy to the device, search, copy back, stream sync
	Deliver  time.Duration // over batches: results copied to the callers, the first callers woken (the rest wake one another)
}

// PerBatch returns the mean of d over the batches (0 before the first).
func (s Stats) PerBatch(d time.Duration) time.Duration {
	if s.Batches == 0 {
		return 0
	}
	return d / time.Duration(s.Batches)
}

// MeanQueue returns the mean time a request waited before its batch was
// taken (0 before the first).
func (s Stats) MeanQueue() time.Duration {
	if s.Times.Requests == 0 {
		return 0
	}
	return s.Times.Queue / time.Duration(s.Times.Requests)
}

// Mean returns the mean batch size in rows (0 before the first batch).
func (s Stats) Mean() float64 {
	if s.Batches == 0 {
		return 0
	}
	return float64(s.Queries) / float64(s.Batches)
}

// Percentile returns the batch size at or below which pct percent of the
// batches lie (0 before the first batch).
func (s Stats) Percentile(pct float64) int {
	if s.Batches == 0 {
		return 0
	}
	rank := int64(pct / 100 * float64(s.Batches))
	if float64(rank) < pct/100*float64(s.Batches) {
		rank++
	}
	rank = max(rank, 1)
	var cum int64
	for n, c := range s.Sizes {
		if cum += c; cum >= rank {
			return n
		}
	}
	return len(s.Sizes) - 1
}

// Stats returns the counts of the batches run so far.
func (b *Batcher[T, N]) Stats() Stats {
	if b == nil || b.b == nil {
		return Stats{}
	}
	in := b.b
	in.mu.Lock()
	defer in.unlock()
	return Stats{Batches: in.batches, Light: in.lightBatches, Filtered: in.filtered, Mixed: in.mixedBatches, Scans: in.scans, MaxPassed: in.passed, Queries: in.queries, Sizes: append([]int64(nil), in.sizes...), Times: in.times}
}
