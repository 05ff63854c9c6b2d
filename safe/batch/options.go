package batch

import (
	"time"

	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Neighbor is a type of neighbor ids a Batcher hands out.
type Neighbor interface{ uint32 | int64 }

// The defaults of Options' zero fields.
const (
	// DefaultMaxBatch is the default of Options.MaxBatch: on an H200 a
	// CAGRA search of 256 queries (N=100k, D=128, itopk 64) costs about
	// 1.2× one of a single query (409 µs against 341 µs), and the GPU
	// saturates near 1.25 million queries a second for batches of 64 to 512.
	DefaultMaxBatch = 256
	// DefaultMaxWait is the default of Options.MaxWait: 0, no waiting. On
	// an H200 a batch that starts now costs almost nothing more than one
	// that waits to grow (safe/batch/DESIGN.md), so a batch
	// starts as soon as a slot is free.
	DefaultMaxWait = 0
	// DefaultSlots is the default of Options.Slots: enough that up to 32
	// concurrent callers each find a free slot, so that at light load the
	// Batcher searches as per-call searching does (and its latency is a
	// direct search's); beyond that, batches grow by themselves while every
	// slot is busy. safe/batch/DESIGN.md has the numbers.
	DefaultSlots = 32
)

// Options configure a Batcher. The zero value of every field but MaxK
// means its default.
type Options struct {
	// MaxK is the largest k a request may ask for, at least 1 and at most
	// the index's rows. Every batch is searched for MaxK neighbors, and a
	// request for fewer gets the first k of them (see Batcher, section
	// k): set it to the k you serve. Zero is refused.
	MaxK int
	// MaxBatch is the most query rows one search takes (DefaultMaxBatch
	// if 0). A request's rows all go to one batch, so a request may hold at
	// most MaxBatch rows.
	MaxBatch int
	// MaxWait is how long a request may wait for its batch to fill while
	// other batches are searching, even though a slot is free (at least 0;
	// 0, the default, never waits: a batch starts whenever a slot is free
	// and requests wait). It is never spent when no batch is searching: a
	// lone caller's batch starts at once.
	MaxWait time.Duration
	// Slots is the number of batches that may be in flight at once, each
	// with its own safe.Resources (its own CUDA stream) and buffers
	// (DefaultSlots if 0). With 2 or more, the next batch gathers while one
	// searches; with more, searches on different streams overlap on the
	// GPU.
	Slots int
	// DeviceBuffers gives each slot device buffers: a batch's queries are
	// copied there from the pinned staging, searched, and the results
	// copied back (three more C calls per batch). Without (the default), a
	// batch searches the pinned staging itself, which cuVS accepts as
	// device memory: the GPU reads the queries and writes the results
	// across the bus, in the search's own kernels. Set it for a Searcher
	// that reads its queries many times (brute force over a large dataset
	// reads them once per tile) or that needs kDLCUDA memory. The IVF-PQ
	// Searchers (IVFPQ, IVFPQFiltered) always get them.
	DeviceBuffers bool
	// Wait is how a slot's goroutine waits for its batch's search:
	// WaitSpin (the zero value, the default) or WaitSleep.
	Wait Wait
}

// Wait is how a Batcher's slots wait for their searches (Options.Wait).
//
// Measured on the real H200 (cuVS 26.08.01, CAGRA 100k × 128, one-query
// callers, examples/serving -wait): sleeping freed most of the cores the
// spinning slots held (8 callers: 1.9 against 7.8 cores busy; 1,024: 5.8
// against 8.8) but answered later at every load (1 caller: p50 260
// against 205 µs; 8: 27k against 33k queries/s; 256: 517k against 594k;
// 1,024: 1.19M against 1.25M). Spinning never used all 16 cores, so the
// Batcher was not short of CPU; choose WaitSleep where the process has
// other work for those cores.
type Wait int

const (
	// WaitSpin waits with Resources.Sync: CUDA's default wait, the calling
	// thread spinning on a core until the GPU is done. The soonest answer.
	WaitSpin Wait = iota
	// WaitSleep waits with Resources.SyncBlocking: the thread sleeps until
	// the GPU signals, which frees the core and costs tens of
	// microseconds per batch.
	WaitSleep
)

// withDefaults fills zero fields and checks every range.
func (o Options) withDefaults(op string, rows int64) (Options, error) {
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Slots == 0 {
		o.Slots = DefaultSlots
	}
	switch {
	case o.MaxK < 1:
		return o, kit.Argf(op, "MaxK", "%d, want at least 1", o.MaxK)
	case int64(o.MaxK) > rows:
		return o, kit.Argf(op, "MaxK", "%d exceeds the index's %d rows", o.MaxK, rows)
	case o.MaxBatch < 1:
		return o, kit.Argf(op, "MaxBatch", "%d, want at least 1 (0 for the default)", o.MaxBatch)
	case o.MaxWait < 0:
		return o, kit.Argf(op, "MaxWait", "%v is negative", o.MaxWait)
	case o.Slots < 1:
		return o, kit.Argf(op, "Slots", "%d, want at least 1 (0 for the default)", o.Slots)
	case o.Wait != WaitSpin && o.Wait != WaitSleep:
		return o, kit.Argf(op, "Wait", "%d, want WaitSpin or WaitSleep", o.Wait)
	}
	return o, nil
}
