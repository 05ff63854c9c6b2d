package cagra

import (
	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// WarmUp pays, before a service takes traffic, what the first search of a
// new process costs: cuVS v26.06 links its CAGRA search kernels at run time
// on first use, which took ~5 s on an H200 (a later process finds them
// cached and starts in tens of milliseconds). It searches batch all-zero
// queries for k neighbors of type neighbors (dlpack.Uint32 or dlpack.Int64)
// with params, waits for the search, and frees the scratch memory it
// allocated on res.
//
// Warm up with the parameters, batch size, k and neighbor type you will
// serve with: cuVS picks (and links) a kernel per combination. The cost was
// measured once per process, not per Resources, so one WarmUp on one
// Resources serves every goroutine (examples/serving would show otherwise:
// a max latency of seconds in its first step). WarmUp is a search: it may
// run while other goroutines search.
func (idx *Index) WarmUp(res *safe.Resources, params *SearchParams, batch, k int, neighbors dlpack.DataType) error {
	const op = "cagra.Index.WarmUp"
	if _, err := kind.Of(idx, op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	if batch < 1 {
		return kit.Argf(op, "batch", "%d, want at least 1", batch)
	}
	if k < 1 {
		return kit.Argf(op, "k", "%d, want at least 1", k)
	}
	if neighbors != dlpack.Uint32 && neighbors != dlpack.Int64 {
		return kit.Argf(op, "neighbors", "dtype %s, want uint32 or int64", neighbors)
	}
	switch idx.dtype {
	case dlpack.Float32:
		return warmUp[float32](idx, res, params, batch, k, neighbors)
	case dlpack.Float16:
		return warmUp[float16.Float16](idx, res, params, batch, k, neighbors)
	case dlpack.Int8:
		return warmUp[int8](idx, res, params, batch, k, neighbors)
	case dlpack.Uint8:
		return warmUp[uint8](idx, res, params, batch, k, neighbors)
	}
	return kit.Argf(op, "index", "element type %s is not one CAGRA searches", idx.dtype)
}

func warmUp[T dlpack.DType](idx *Index, res *safe.Resources, params *SearchParams, batch, k int, nt dlpack.DataType) (err error) {
	dim := int(kind.Core(idx).Dim) // Dim, closed or not (a closed index is refused by the search)
	q, err := safe.DeviceMatrixFrom(res, make([]T, batch*dim), batch, dim)
	if err != nil {
		return err
	}
	defer closeInto(&err, q)
	d, err := safe.NewDeviceMatrix[float32](res, batch, k)
	if err != nil {
		return err
	}
	defer closeInto(&err, d)
	var n interface {
		dlpack.TensorMut
		Close() error
	}
	if nt == dlpack.Uint32 {
		n, err = safe.NewDeviceMatrix[uint32](res, batch, k)
	} else {
		n, err = safe.NewDeviceMatrix[int64](res, batch, k)
	}
	if err != nil {
		return err
	}
	defer closeInto(&err, n)
	if err := idx.Search(res, params, q, n, d, nil); err != nil {
		return err
	}
	return res.Sync()
}

// closeInto closes c, keeping the first error in *err.
func closeInto(err *error, c interface{ Close() error }) {
	if e := c.Close(); *err == nil {
		*err = e
	}
}

// PersistentRefused is why Search (and everything that searches with
// SearchParams: Prepare, WarmUp, batch.CAGRA) refuses Persistent, on every
// release, with an *safe.ArgError naming params.Persistent.
//
// The cause, read in cuVS's sources (both releases run the same persistent
// runner, search_single_cta_kernel_launcher_jit.cuh): the persistent kernel
// is one per process, launched on a stream of its own with a grid of
// PersistentDeviceUsage × the blocks that fit on every multiprocessor (all
// of them at cuVS's default usage of 1), and it stops only
// PersistentLifetime after its last job. A search first queues work on
// its Resources' own stream: on that Resources' first search, the set-up
// kernel of the dataset descriptor cuVS caches per Resources (and, on
// every search, the distance post-processing of int8/uint8 data and of
// metrics other than L2Expanded). That kernel cannot start beside the
// persistent one, so the stream sync after the search waits until the
// persistent kernel idles out: on the real library (H200), one search per
// 2 s on 26.06 (8 threads: 8 searches in 3 s) and on 26.08 (3 goroutines:
// 12 queries in 2 s). The runner also keeps that descriptor, which frees its
// memory on the stream of the Resources that created it: after that
// Resources' Close the free runs on a destroyed stream, the likely cause of
// the SIGSEGV that ended the 26.08 run (not confirmed by a core dump).
// Making it safe would take a usage below 1, every Resources primed with a
// non-persistent search before the kernel starts, and streams kept alive
// for two lifetimes after their last persistent search; until that is
// built and measured, the default kernel serves more: with the memory pool
// and batch.Batcher, 1.25M queries/s at 1,024 callers on an H200
// (BENCHMARKS.md).
const PersistentRefused = "the persistent kernel is refused: it stalls other work on every release (one search per 2 s on the real library) and crashed 26.08 after Close; see cagra.PersistentRefused's doc"

// WithPersistentKernel returns p set for CAGRA's persistent search kernel:
// Persistent on, Algo SingleCTA (the only kernel that has a persistent
// form), and, where not zero, PersistentLifetime (seconds the kernel keeps
// running after the last search; cuVS's default is 2) and
// PersistentDeviceUsage (the fraction of the GPU's maximum grid it
// occupies, in (0, 1]; cuVS's default is 1).
//
// One kernel then stays resident and takes the searches of every goroutine
// through a queue, which saves a kernel launch per search: it is meant for
// many goroutines each searching a few queries at a time. Its caveats,
// from cuVS's documentation: every search sharing it must use the same
// index and parameters; the first persistent search pays the kernel's
// start; while it runs it holds the GPU, so other work on the device makes
// the setup fragile (other kernels usually run but with no progress
// guarantee, CUDA allocations block the context, which the memory pool
// Load enables hides, and copies to pageable host memory, e.g. a Go slice,
// may block it: copy results through a safe.PinnedMatrix instead); a usage
// of 1 sometimes hurts, ~0.9 costs little and leaves a few multiprocessors
// free. Measure it against the default kernel on your workload (the
// examples/serving program takes -persistent on). On an H200 with the real
// library (v26.06), persistent-kernel searches stalled for seconds in C and
// in Go alike: with 8 threads, 8 searches completed in 3 s, each taking
// ~3 s; maximum latencies were 2–6 s at 1 and at 32 threads. Until that is
// understood, prefer the default kernel with the memory pool.
//
// Search refuses a persistent search, on every release: see
// PersistentRefused for why. WithPersistentKernel still sets the fields,
// for a release that makes it safe.
func (p SearchParams) WithPersistentKernel(lifetimeSeconds, deviceUsage float32) SearchParams {
	p.Persistent = true
	p.Algo = SingleCTA
	if lifetimeSeconds != 0 {
		p.PersistentLifetime = lifetimeSeconds
	}
	if deviceUsage != 0 {
		p.PersistentDeviceUsage = deviceUsage
	}
	return p
}
