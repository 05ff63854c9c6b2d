package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/batch"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// config is the command line; internal/cbench takes the same flags.
type config struct {
	rows, dim   int
	goroutines  []int
	duration    time.Duration
	pool        memory // -pool
	k, itopk    int
	graphDegree int
	batch       int
	persistent  bool
	algo        cagra.SearchAlgo // -algo: auto, single or multi
	recall      int              // -recall: queries whose recall is measured (0: none)
	block       int              // -block: CAGRA's thread block size (0: cuVS's choice)
	dtype       dlpack.DataType  // -dtype: the element type of the index and the queries
	seed        uint64
	lib         string

	// -mode batch: the goroutines share one batch.Batcher.
	batched  bool
	maxBatch int
	maxWait  time.Duration
	slots    int
	wait     batch.Wait // -wait: spin or sleep
	devBufs  bool       // -device-buffers: Options.DeviceBuffers

	// -tenants: each goroutine searches with one of this many filters
	// (0: none), each letting -tenant-allow of the rows through.
	tenants     int
	tenantAllow float64
}

// maxGoroutines bounds -goroutines.
const maxGoroutines = 1024

func parseConfig(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("serving", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var goroutines, pool, persistent, mode, algo, wait, dtype string
	var seconds, maxWaitUS float64
	fs.IntVar(&c.rows, "n", 100000, "dataset rows")
	fs.StringVar(&dtype, "dtype", "float32", "element type of the index and the queries: float32, int8 or uint8 (the same uniform random values scaled onto -128..127 or 0..255)")
	fs.IntVar(&c.dim, "dim", 128, "dimension")
	fs.StringVar(&goroutines, "goroutines", "1,8,32", "goroutine counts, one step each")
	fs.Float64Var(&seconds, "seconds", 5, "seconds per step")
	fs.StringVar(&pool, "pool", "on", "device memory: on (the RMM pool safe.Load enables), off (cuVS's default resource) or async (cudaMallocAsync: safe.WithAsyncMemoryResource, cuVS 26.08 and later)")
	fs.IntVar(&c.k, "k", 10, "neighbors per query")
	fs.IntVar(&c.itopk, "itopk", 64, "CAGRA itopk_size")
	fs.IntVar(&c.graphDegree, "graph-degree", 32, "CAGRA graph degree")
	fs.IntVar(&c.batch, "batch", 1, "queries per search")
	fs.StringVar(&persistent, "persistent", "off", "persistent search kernel (on|off)")
	fs.StringVar(&algo, "algo", "auto", "CAGRA search kernel: auto (cuVS picks by batch size), single (single-CTA) or multi (multi-CTA)")
	fs.Uint64Var(&c.seed, "seed", 42, "random seed")
	fs.IntVar(&c.block, "block", 0, "CAGRA search thread block size: 0 (cuVS picks by batch size), 64, 128, 256, 512 or 1024")
	fs.IntVar(&c.recall, "recall", 0, "before the steps, measure recall@k of this many queries against brute force, for each search kernel (0: none)")
	fs.StringVar(&mode, "mode", "direct", "direct: each goroutine searches on its own Resources; batch: the goroutines share a batch.Batcher")
	fs.IntVar(&c.maxBatch, "max-batch", batch.DefaultMaxBatch, "-mode batch: most queries per batch")
	fs.Float64Var(&maxWaitUS, "max-wait-us", float64(batch.DefaultMaxWait/time.Microsecond), "-mode batch: most microseconds a request waits for its batch to fill while others search (0: none)")
	fs.IntVar(&c.slots, "slots", batch.DefaultSlots, "-mode batch: batches in flight, each with its own Resources")
	fs.BoolVar(&c.devBufs, "device-buffers", false, "-mode batch: give the Batcher's slots device buffers (Options.DeviceBuffers): queries copied to the device before each search, results back after")
	fs.StringVar(&wait, "wait", "spin", "-mode batch: how the Batcher's slots wait for their searches: spin (Options.Wait WaitSpin, the default) or sleep (WaitSleep)")
	fs.IntVar(&c.tenants, "tenants", 0, "filters: goroutine i searches with filter i mod this (0: no filter); -mode batch through SearchIntoFiltered, with every result checked against its filter")
	fs.Float64Var(&c.tenantAllow, "tenant-allow", 0.5, "-tenants: the fraction of the rows each filter lets through (random, seeded)")
	fs.StringVar(&c.lib, "lib", "", "libcuvs_c.so (else $CUVS_LIBRARY, the loader's search, $CONDA_PREFIX/lib)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if c.pool, err = choose("pool", pool, memoryWords); err != nil {
		return c, err
	}
	if c.persistent, err = choose("persistent", persistent, onOffWords); err != nil {
		return c, err
	}
	if c.algo, err = choose("algo", algo, algoWords); err != nil {
		return c, err
	}
	if c.wait, err = choose("wait", wait, waitWords); err != nil {
		return c, err
	}
	if c.dtype, err = choose("dtype", dtype, dtypeWords); err != nil {
		return c, err
	}
	switch mode {
	case "direct":
	case "batch":
		c.batched = true
	default:
		return c, fmt.Errorf("-mode: %q, want direct or batch", mode)
	}
	for _, s := range strings.Split(goroutines, ",") {
		g, err := strconv.Atoi(s)
		if err != nil || g < 1 || g > maxGoroutines {
			return c, fmt.Errorf("-goroutines: bad list %q (each 1..%d)", goroutines, maxGoroutines)
		}
		c.goroutines = append(c.goroutines, g)
	}
	if !(seconds > 0) {
		return c, fmt.Errorf("-seconds: %v is not a positive number", seconds)
	}
	c.duration = time.Duration(seconds * float64(time.Second))
	for _, f := range []struct {
		name string
		v    int
	}{{"n", c.rows}, {"dim", c.dim}, {"k", c.k}, {"itopk", c.itopk}, {"graph-degree", c.graphDegree}, {"batch", c.batch}, {"max-batch", c.maxBatch}, {"slots", c.slots}} {
		if f.v < 1 {
			return c, fmt.Errorf("-%s: %d, want at least 1", f.name, f.v)
		}
	}
	switch c.block {
	case 0, 64, 128, 256, 512, 1024:
	default:
		return c, fmt.Errorf("-block: %d, want 0, 64, 128, 256, 512 or 1024", c.block)
	}
	if c.tenants < 0 || c.tenants > maxGoroutines {
		return c, fmt.Errorf("-tenants: %d, want 0..%d", c.tenants, maxGoroutines)
	}
	if !(c.tenantAllow > 0 && c.tenantAllow <= 1) {
		return c, fmt.Errorf("-tenant-allow: %v, want a fraction in (0, 1]", c.tenantAllow)
	}
	if c.recall < 0 {
		return c, fmt.Errorf("-recall: %d, want at least 0", c.recall)
	}
	if !(maxWaitUS >= 0) {
		return c, fmt.Errorf("-max-wait-us: %v is not a number >= 0", maxWaitUS)
	}
	c.maxWait = time.Duration(maxWaitUS * float64(time.Microsecond))
	if c.batched && c.batch > c.maxBatch {
		return c, fmt.Errorf("-batch %d exceeds -max-batch %d", c.batch, c.maxBatch)
	}
	if c.rows <= 2*c.graphDegree {
		return c, fmt.Errorf("-n %d: want more rows than twice -graph-degree (%d)", c.rows, c.graphDegree)
	}
	if c.k > c.rows {
		return c, fmt.Errorf("-k %d exceeds -n %d", c.k, c.rows)
	}
	return c, nil
}

// word is one of a flag's words and the value it stands for.
type word[V comparable] struct {
	w string
	v V
}

// memory is -pool's choice of device memory resource.
type memory int

const (
	poolOn    memory = iota // the RMM pool safe.Load enables
	poolOff                 // cuVS's default resource (safe.WithoutMemoryPool)
	poolAsync               // cudaMallocAsync (safe.WithAsyncMemoryResource, cuVS 26.08)
)

var (
	memoryWords = []word[memory]{{"on", poolOn}, {"off", poolOff}, {"async", poolAsync}}
	onOffWords  = []word[bool]{{"on", true}, {"off", false}}
	algoWords   = []word[cagra.SearchAlgo]{{"auto", cagra.AutoAlgo}, {"single", cagra.SingleCTA}, {"multi", cagra.MultiCTA}}
	waitWords   = []word[batch.Wait]{{"spin", batch.WaitSpin}, {"sleep", batch.WaitSleep}}
	dtypeWords  = []word[dlpack.DataType]{{"float32", dlpack.Float32}, {"int8", dlpack.Int8}, {"uint8", dlpack.Uint8}}
)

// elem is what -dtype chooses among: the element types of CAGRA indexes
// that this program builds and searches.
type elem interface{ float32 | int8 | uint8 }

// quantize maps uniform [0, 1) values onto T: float32 as they are, int8
// onto -128..127 and uint8 onto 0..255 (x·256, less 128 for int8). The
// integer index is the float32 one scaled, so the workloads are alike.
func quantize[T elem](v []float32) []T {
	out := make([]T, len(v))
	for i, x := range v {
		switch p := any(&out[i]).(type) {
		case *float32:
			*p = x
		case *int8:
			*p = int8(int(x*256) - 128)
		case *uint8:
			*p = uint8(x * 256)
		}
	}
	return out
}

// widen is v as float32s (the values brute force's ground truth is computed
// on: cuVS's brute force takes float32).
func widen[T elem](v []T) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// dataDesc is how the index line describes the data of -dtype d.
func dataDesc(d dlpack.DataType, seed uint64) string {
	switch d {
	case dlpack.Int8:
		return fmt.Sprintf("int8 (uniform random, seed %d, scaled onto -128..127)", seed)
	case dlpack.Uint8:
		return fmt.Sprintf("uint8 (uniform random, seed %d, scaled onto 0..255)", seed)
	}
	return fmt.Sprintf("float32 (uniform random, seed %d)", seed)
}

// choose returns the value of got among flag's words, or an error that
// lists them.
func choose[V comparable](flag, got string, words []word[V]) (V, error) {
	list := ""
	for i, w := range words {
		if w.w == got {
			return w.v, nil
		}
		switch {
		case i == 0:
		case i == len(words)-1:
			list += " or "
		default:
			list += ", "
		}
		list += w.w
	}
	var zero V
	return zero, fmt.Errorf("-%s: %q, want %s", flag, got, list)
}

// nameOf is v's word among words (the first word when none matches).
func nameOf[V comparable](v V, words []word[V]) string {
	for _, w := range words {
		if w.v == v {
			return w.w
		}
	}
	return words[0].w
}

// The memory pool safe.Load enables by default.
const poolLine = "on (%d%%..%d%% of device memory)"

// run is the whole program after flag parsing: load, build, warm up, then
// one table row per goroutine count.
func run(c config, out io.Writer) (err error) {
	var opts []safe.Option
	if c.lib != "" {
		opts = append(opts, safe.WithLibrary(c.lib))
	}
	switch c.pool {
	case poolAsync:
		opts = append(opts, safe.WithAsyncMemoryResource())
	case poolOff:
		opts = append(opts, safe.WithoutMemoryPool())
	}
	if err := safe.Load(opts...); err != nil {
		return err
	}
	v, err := safe.LibraryVersion()
	if err != nil {
		return err
	}
	pool := "off (cuVS's default memory resource)"
	switch c.pool {
	case poolOn:
		pool = fmt.Sprintf(poolLine, safe.DefaultPoolInitialPercent, safe.DefaultPoolMaxPercent)
	case poolAsync:
		pool = "async (cudaMallocAsync)"
	}
	fmt.Fprintf(out, "# serving (go): cuVS %s from %s; memory pool %s\n", v, generated.LibraryPath(), pool)

	res, err := safe.NewResources()
	if err != nil {
		return err
	}
	defer closeInto(&err, res)
	switch c.dtype {
	case dlpack.Int8:
		return serve[int8](c, out, res)
	case dlpack.Uint8:
		return serve[uint8](c, out, res)
	}
	return serve[float32](c, out, res)
}

// serve is run after loading, for -dtype T: build, warm up, then one table
// row per goroutine count.
func serve[T elem](c config, out io.Writer, res *safe.Resources) (err error) {
	idx, took, err := build[T](res, c)
	if err != nil {
		return err
	}
	defer closeInto(&err, idx)
	fmt.Fprintf(out, "# index: CAGRA %d x %d %s, graph degree %d (intermediate %d, NN-Descent), built in %.2f s\n",
		c.rows, c.dim, dataDesc(c.dtype, c.seed), c.graphDegree, 2*c.graphDegree, took.Seconds())

	sp, err := searchParams(c)
	if err != nil {
		return err
	}
	if c.recall > 0 {
		if err := printRecall[T](out, res, idx, sp, c); err != nil {
			return err
		}
	}
	persistent := "off"
	if c.persistent {
		persistent = "on"
	}
	if c.batched {
		fmt.Fprintf(out, "# search: k %d, itopk %d, batch %d, algo %s, block %d, persistent kernel %s, uint32 neighbors; mode batch: one batch.Batcher (max batch %d, max wait %v, %d slots, wait %s, device buffers %v), SearchInto from Go memory per call, %.2f s per step\n",
			c.k, c.itopk, c.batch, algoName(c.algo), c.block, persistent, c.maxBatch, c.maxWait, c.slots, nameOf(c.wait, waitWords), c.devBufs, c.duration.Seconds())
	} else {
		fmt.Fprintf(out, "# search: k %d, itopk %d, batch %d, algo %s, block %d, persistent kernel %s, uint32 neighbors; search + stream sync per call, %.2f s per step\n",
			c.k, c.itopk, c.batch, algoName(c.algo), c.block, persistent, c.duration.Seconds())
	}
	ts, err := newTenants(res, c)
	defer closeInto(&err, ts)
	if err != nil {
		return err
	}
	if err := printTenantRecall[T](out, res, idx, sp, c, ts); err != nil {
		return err
	}
	t0 := time.Now()
	if err := idx.WarmUp(res, &sp, c.batch, c.k, dlpack.Uint32); err != nil {
		return err
	}
	fmt.Fprintf(out, "# warm-up (first search): %.3f s\n", time.Since(t0).Seconds())
	fmt.Fprintf(out, "%10s %12s %10s %10s %10s %10s\n", "goroutines", "QPS", "p50_us", "p99_us", "max_us", "searches")

	var allocs, gcs uint64
	for _, g := range c.goroutines {
		var r result
		if c.batched {
			r, err = stepBatch[T](idx, &sp, c, g, ts)
		} else {
			r, err = step[T](idx, &sp, c, g, ts)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%10d %12.1f %10.1f %10.1f %10.1f %10d\n", g, r.qps, us(r.p50), us(r.p99), us(r.max), r.searches)
		fmt.Fprintf(out, "# cpu at %d goroutines: %.1f cores busy (user %.1f, system %.1f)\n", g, r.cpuUser+r.cpuSys, r.cpuUser, r.cpuSys)
		if c.batched {
			st := r.batches
			fmt.Fprintf(out, "# batches at %d goroutines: %d searched (%d multi-CTA), mean %.1f queries, p99 %d; mean queue %.0f µs per request; per batch: handoff %.0f, stage %.0f, search %.0f, deliver %.0f µs\n",
				g, st.Batches, st.Light, st.Mean(), st.Percentile(99), us(st.MeanQueue()), us(st.PerBatch(st.Times.Handoff)), us(st.PerBatch(st.Times.Stage)), us(st.PerBatch(st.Times.Search)), us(st.PerBatch(st.Times.Deliver)))
		}
		tenantLine(out, c, g, r.checked, r.outside, r.batches)
		allocs += r.allocs
		gcs += r.gcs
	}
	fmt.Fprintf(out, "# go: GOMAXPROCS %d; during the timed windows: %d heap allocations, %d GC cycles\n",
		runtime.GOMAXPROCS(0), allocs, gcs)
	return nil
}

// algoName is -algo's word for a.
func algoName(a cagra.SearchAlgo) string { return nameOf(a, algoWords) }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// build makes the index from uniform random host data, as cbench does:
// NN-Descent, intermediate degree twice the final one; for int8 and uint8
// the same values scaled (quantize).
func build[T elem](res *safe.Resources, c config) (*cagra.Index, time.Duration, error) {
	data, err := dlpack.NewHostMatrix(quantize[T](randomMatrix(c.seed, c.rows, c.dim)), c.rows, c.dim)
	if err != nil {
		return nil, 0, err
	}
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		return nil, 0, err
	}
	p.Metric = safe.L2Expanded
	p.GraphDegree = c.graphDegree
	p.IntermediateGraphDegree = 2 * c.graphDegree
	p.BuildAlgo = cagra.NNDescent
	t0 := time.Now()
	idx, err := cagra.Build(res, data, &p) // host data: copied, waited for
	return idx, time.Since(t0), err
}

func searchParams(c config) (cagra.SearchParams, error) {
	sp, err := cagra.DefaultSearchParams()
	if err != nil {
		return sp, err
	}
	sp.ITopKSize = c.itopk
	sp.Algo = c.algo
	sp.ThreadBlockSize = c.block
	if c.persistent {
		sp = sp.WithPersistentKernel(0, 0)
	}
	return sp, nil
}

// queryBatches is the number of query batches a worker cycles through: at
// most 4M floats of queries, at most 64 batches (as cbench).
func queryBatches(c config) int { return max(1, min(64, (1<<22)/(c.batch*c.dim))) }

// rowsTensor is rows [start, end) of a device matrix, as a dlpack.Tensor:
// a pointer to one is an interface value that costs no allocation.
type rowsTensor[T elem] struct {
	m          *safe.DeviceMatrix[T]
	start, end int
}

func (r *rowsTensor[T]) View() (dlpack.View, error) { return r.m.RowsView(r.start, r.end) }

// worker is one serving goroutine: its own Resources (own CUDA stream) and
// its own device buffers, allocated before the clock starts.
type worker[T elem] struct {
	res       *safe.Resources
	queries   *safe.DeviceMatrix[T] // nb batches of batch × dim
	neighbors *safe.DeviceMatrix[uint32]
	distances *safe.DeviceMatrix[float32]
	batch     rowsTensor[T]
	filter    *safe.Filter // -tenants: this goroutine's
	size, nb  int          // queries per batch, batches
	next      int          // the next batch searched
	timing
}

// timing is what a goroutine measures in a step.
type timing struct {
	hist     histogram
	searches int64
	end      time.Time
	err      error
}

func newWorker[T elem](c config, id int) (w *worker[T], err error) {
	w = &worker[T]{size: c.batch, nb: queryBatches(c)}
	if w.res, err = safe.NewResources(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.close())
		}
	}()
	rows := w.nb * c.batch
	if w.queries, err = safe.DeviceMatrixFrom(w.res, quantize[T](randomMatrix(querySeed(c.seed, id), rows, c.dim)), rows, c.dim); err != nil {
		return w, err
	}
	w.batch.m = w.queries
	if w.neighbors, err = safe.NewDeviceMatrix[uint32](w.res, c.batch, c.k); err != nil {
		return w, err
	}
	w.distances, err = safe.NewDeviceMatrix[float32](w.res, c.batch, c.k)
	return w, err
}

func (w *worker[T]) close() error {
	var err error
	if w.queries != nil {
		err = errors.Join(err, w.queries.Close())
	}
	if w.neighbors != nil {
		err = errors.Join(err, w.neighbors.Close())
	}
	if w.distances != nil {
		err = errors.Join(err, w.distances.Close())
	}
	return errors.Join(err, w.res.Close())
}

// search is the hot path: one search of the next query batch, then a wait
// for its results. It allocates nothing.
func (w *worker[T]) search(idx *cagra.Index, sp *cagra.SearchParams) error {
	w.batch.start = w.next * w.size
	w.batch.end = w.batch.start + w.size
	if w.next++; w.next == w.nb {
		w.next = 0
	}
	if err := idx.Search(w.res, sp, &w.batch, w.neighbors, w.distances, w.filter); err != nil {
		return err
	}
	return w.res.Sync()
}

// clock is the timed window of a step, set before the workers are let go.
type clock struct{ start, deadline time.Time }

// loop calls search until the deadline, timing each call.
func (w *timing) loop(search func() error, ready *sync.WaitGroup, start <-chan struct{}, clk *clock) {
	ready.Done()
	<-start
	t0 := time.Now()
	for {
		if w.err = search(); w.err != nil {
			w.end = time.Now()
			return
		}
		t1 := time.Now()
		w.hist.record(t1.Sub(t0))
		w.searches++
		if !t1.Before(clk.deadline) {
			w.end = t1
			return
		}
		t0 = t1
	}
}

type result struct {
	qps           float64
	p50, p99, max time.Duration
	searches      int64
	elapsed       time.Duration
	allocs, gcs   uint64 // heap allocations and GC cycles in the timed window
	// CPU time of the process in the timed window, per second of it: the
	// cores kept busy (a thread spinning in a stream sync counts).
	cpuUser, cpuSys float64
	batches         batch.Stats
	checked         int64 // -tenants, -mode batch: requests whose ids were checked against their filter
	outside         int64 // of their ids, those the filter forbids
}

// step runs n goroutines searching idx for c.duration.
func step[T elem](idx *cagra.Index, sp *cagra.SearchParams, c config, n int, ts *tenantSet) (r result, err error) {
	ws := make([]*worker[T], 0, n)
	defer func() {
		for _, w := range ws {
			err = errors.Join(err, w.close())
		}
	}()
	for i := range n {
		w, err := newWorker[T](c, i)
		if err != nil {
			return r, fmt.Errorf("%d goroutines: setting up goroutine %d: %w", n, i, err)
		}
		w.filter, _ = ts.of(i)
		ws = append(ws, w)
	}
	tm := make([]*timing, n)
	searches := make([]func() error, n)
	for i, w := range ws {
		tm[i] = &w.timing
		searches[i] = func() error { return w.search(idx, sp) }
	}
	return measure(c, tm, searches)
}

// measure runs searches[i] in a goroutine each, timed into ts[i], for
// c.duration, and sums up.
func measure(c config, ts []*timing, searches []func() error) (r result, err error) {
	n := len(ts)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var clk clock
	for i, w := range ts {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			w.loop(searches[i], &ready, start, &clk)
		}()
	}
	ready.Wait()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	clk.start = time.Now()
	clk.deadline = clk.start.Add(c.duration)
	close(start)
	done.Wait()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	wall := time.Since(clk.start).Seconds()
	runtime.ReadMemStats(&after)
	r.cpuUser = tvSeconds(ru1.Utime, ru0.Utime) / wall
	r.cpuSys = tvSeconds(ru1.Stime, ru0.Stime) / wall

	var all histogram
	end := clk.start
	for i, w := range ts {
		if w.err != nil {
			return r, fmt.Errorf("%d goroutines: goroutine %d: %w", n, i, w.err)
		}
		all.add(&w.hist)
		r.searches += w.searches
		if w.end.After(end) {
			end = w.end
		}
	}
	r.elapsed = end.Sub(clk.start)
	if r.elapsed > 0 {
		r.qps = float64(r.searches) * float64(c.batch) / r.elapsed.Seconds()
	}
	r.p50, r.p99, r.max = all.percentile(50), all.percentile(99), all.maximum()
	r.allocs = after.Mallocs - before.Mallocs
	r.gcs = uint64(after.NumGC - before.NumGC)
	return r, nil
}

// tvSeconds is b - a in seconds.
func tvSeconds(b, a syscall.Timeval) float64 {
	return float64(b.Sec-a.Sec) + float64(b.Usec-a.Usec)/1e6
}

// closeInto closes c, keeping the first error in *err.
func closeInto(err *error, c interface{ Close() error }) {
	if e := c.Close(); *err == nil {
		*err = e
	}
}

// batchWorker is one goroutine of -mode batch: its queries and result
// buffers in Go memory, searched through the shared Batcher.
type batchWorker[T elem] struct {
	b         *batch.Batcher[T, uint32]
	queries   []T // nb batches of size × dim
	neighbors []uint32
	distances []float32
	size, nb  int
	next      int
	dim       int
	filter    *safe.Filter // -tenants: this goroutine's filter, and its bits
	allow     []uint64
	checked   int64
	outside   int64
	timing
}

// search is the hot path of -mode batch: one SearchInto of the next query
// batch. It allocates nothing.
func (w *batchWorker[T]) search() error {
	q := w.queries[w.next*w.size*w.dim : (w.next+1)*w.size*w.dim]
	if w.next++; w.next == w.nb {
		w.next = 0
	}
	if w.filter == nil {
		return w.b.SearchInto(context.Background(), q, w.neighbors, w.distances)
	}
	if err := w.b.SearchIntoFiltered(context.Background(), w.filter, q, w.neighbors, w.distances); err != nil {
		return err
	}
	w.checked++
	w.outside += outside(w.neighbors, w.allow)
	return nil
}

// newBatcher makes the Batcher of -mode batch and warms up its slots.
func newBatcher[T elem](idx *cagra.Index, sp *cagra.SearchParams, c config) (*batch.Batcher[T, uint32], error) {
	s, err := batch.CAGRA(idx, sp, nil)
	if err != nil {
		return nil, err
	}
	b, err := batch.New[T, uint32](s, batch.Options{MaxK: c.k, MaxBatch: c.maxBatch, MaxWait: c.maxWait, Slots: c.slots, Wait: c.wait, DeviceBuffers: c.devBufs})
	if err != nil {
		return nil, err
	}
	if err := b.WarmUp(); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return b, nil
}

// stepBatch runs n goroutines searching idx through one Batcher for
// c.duration; the Batcher is made (and warmed up) before the clock starts.
func stepBatch[T elem](idx *cagra.Index, sp *cagra.SearchParams, c config, n int, ts *tenantSet) (r result, err error) {
	tenants := ts
	b, err := newBatcher[T](idx, sp, c)
	if err != nil {
		return r, fmt.Errorf("%d goroutines: %w", n, err)
	}
	defer closeInto(&err, b)
	tm := make([]*timing, n)
	searches := make([]func() error, n)
	ws := make([]*batchWorker[T], 0, n)
	for i := range n {
		w := &batchWorker[T]{b: b, size: c.batch, nb: queryBatches(c), dim: c.dim,
			neighbors: make([]uint32, c.batch*c.k), distances: make([]float32, c.batch*c.k)}
		w.queries = quantize[T](randomMatrix(querySeed(c.seed, i), w.nb*c.batch, c.dim))
		w.filter, w.allow = tenants.of(i)
		ws = append(ws, w)
		tm[i], searches[i] = &w.timing, w.search
	}
	r, err = measure(c, tm, searches)
	r.batches = b.Stats()
	for _, w := range ws {
		r.checked += w.checked
		r.outside += w.outside
	}
	return r, err
}
