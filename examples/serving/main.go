// Command serving measures online CAGRA search from Go the way a service
// does it: many goroutines searching one index at once, each with its own
// safe.Resources (its own CUDA stream) and its own device buffers allocated
// once, so that a search allocates nothing on the Go heap.
//
// It loads libcuvs_c (with the memory pool unless -pool off), builds a CAGRA
// index from uniform random data, warms up with one search (the first
// search of a process links cuVS's kernels: ~5 s), then for each count in
// -goroutines runs that many goroutines, each calling Search then
// Resources.Sync in a loop for -seconds, and prints one row per count:
//
//	goroutines          QPS     p50_us     p99_us     max_us   searches
//
// QPS is queries (searches × -batch) per second of wall time; the
// latencies are per search (search + stream sync), from a log-linear
// histogram with < 1% buckets.
//
// internal/cbench is the same workload in C with pthreads, with the same
// flags, random data and output: compare.sh runs both on one machine and
// prints the Go/C ratios. See README.md for the targets, the memory-pool
// decision and the persistent kernel.
//
// Usage, on a machine with a GPU and libcuvs_c:
//
//	serving -n 100000 -dim 128 -goroutines 1,8,32 -seconds 5 -pool on -k 10 -itopk 64 -graph-degree 32 -batch 1
//
// With -mode batch the goroutines (up to 1024) share one batch.Batcher
// instead: each calls SearchInto with its queries and result buffers in Go
// memory, and the Batcher gathers concurrent requests into GPU batches
// (-max-batch, -max-wait-us, -slots, -wait spin|sleep: Options.Wait,
// -device-buffers: Options.DeviceBuffers). With -tenants N every goroutine
// searches with a filter (goroutine i with filter i mod N, each letting
// -tenant-allow of the rows through): in -mode batch through
// SearchIntoFiltered, every result checked against its filter (a comment
// line per row: requests checked, ids outside their filter, filtered
// batches, Stats.MaxPassed), in -mode direct as filtered searches. Each row is then followed by a
// comment line with the batch sizes formed (mean, p99). Every row is
// followed by the cores the process kept busy in its timed window
// ("# cpu at N goroutines": user and system CPU time per second; a thread
// spinning in a stream sync counts as a busy core).
//
// Flags: -n rows, -dim, -goroutines list, -seconds per step, -pool on|off,
// -k, -itopk, -graph-degree, -batch, -persistent on|off, -algo
// auto|single|multi (CAGRA's search kernel: auto is cuVS's AUTO per call,
// and the Batcher's choice by load with -mode batch), -recall n (each
// kernel's recall@k of n queries against brute force, printed before the
// steps), -mode direct|batch,
// -max-batch, -max-wait-us, -slots, -wait, -device-buffers, -dtype
// float32|int8|uint8 (the index's and the queries' element type: the same
// uniform values scaled onto -128..127 or 0..255), -seed, -lib path
// (else $CUVS_LIBRARY, the loader's search for libcuvs_c.so,
// $CONDA_PREFIX/lib).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

func main() {
	c, err := parseConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "serving:", err)
		os.Exit(2)
	}
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "serving:", err)
		os.Exit(1)
	}
}
