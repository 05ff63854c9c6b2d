package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// config is the command line; internal/cbench takes the same flags.
type config struct {
	rows, dim   int
	goroutines  []int
	duration    time.Duration
	pool        bool
	k, itopk    int
	graphDegree int
	batch       int
	persistent  bool
	seed        uint64
	lib         string
}

func parseConfig(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("serving", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var goroutines, pool, persistent string
	var seconds float64
	fs.IntVar(&c.rows, "n", 100000, "dataset rows")
	fs.IntVar(&c.dim, "dim", 128, "dimension")
	fs.StringVar(&goroutines, "goroutines", "1,8,32", "goroutine counts, one step each")
	fs.Float64Var(&seconds, "seconds", 5, "seconds per step")
	fs.StringVar(&pool, "pool", "on", "device memory pool (on|off)")
	fs.IntVar(&c.k, "k", 10, "neighbors per query")
	fs.IntVar(&c.itopk, "itopk", 64, "CAGRA itopk_size")
	fs.IntVar(&c.graphDegree, "graph-degree", 32, "CAGRA graph degree")
	fs.IntVar(&c.batch, "batch", 1, "queries per search")
	fs.StringVar(&persistent, "persistent", "off", "persistent search kernel (on|off)")
	fs.Uint64Var(&c.seed, "seed", 42, "random seed")
	fs.StringVar(&c.lib, "lib", "", "libcuvs_c.so (else $CUVS_LIBRARY, the loader's search, $CONDA_PREFIX/lib)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if c.pool, err = onOff("pool", pool); err != nil {
		return c, err
	}
	if c.persistent, err = onOff("persistent", persistent); err != nil {
		return c, err
	}
	for _, s := range strings.Split(goroutines, ",") {
		g, err := strconv.Atoi(s)
		if err != nil || g < 1 {
			return c, fmt.Errorf("-goroutines: bad list %q", goroutines)
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
	}{{"n", c.rows}, {"dim", c.dim}, {"k", c.k}, {"itopk", c.itopk}, {"graph-degree", c.graphDegree}, {"batch", c.batch}} {
		if f.v < 1 {
			return c, fmt.Errorf("-%s: %d, want at least 1", f.name, f.v)
		}
	}
	if c.rows <= 2*c.graphDegree {
		return c, fmt.Errorf("-n %d: want more rows than twice -graph-degree (%d)", c.rows, c.graphDegree)
	}
	if c.k > c.rows {
		return c, fmt.Errorf("-k %d exceeds -n %d", c.k, c.rows)
	}
	return c, nil
}

func onOff(name, v string) (bool, error) {
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("-%s: %q, want on or off", name, v)
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
	if !c.pool {
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
	if c.pool {
		pool = fmt.Sprintf(poolLine, safe.DefaultPoolInitialPercent, safe.DefaultPoolMaxPercent)
	}
	fmt.Fprintf(out, "# serving (go): cuVS %s from %s; memory pool %s\n", v, generated.LibraryPath(), pool)

	res, err := safe.NewResources()
	if err != nil {
		return err
	}
	defer closeInto(&err, res)
	idx, took, err := build(res, c)
	if err != nil {
		return err
	}
	defer closeInto(&err, idx)
	fmt.Fprintf(out, "# index: CAGRA %d x %d float32 (uniform random, seed %d), graph degree %d (intermediate %d, NN-Descent), built in %.2f s\n",
		c.rows, c.dim, c.seed, c.graphDegree, 2*c.graphDegree, took.Seconds())

	sp, err := searchParams(c)
	if err != nil {
		return err
	}
	persistent := "off"
	if c.persistent {
		persistent = "on"
	}
	fmt.Fprintf(out, "# search: k %d, itopk %d, batch %d, persistent kernel %s, uint32 neighbors; search + stream sync per call, %.2f s per step\n",
		c.k, c.itopk, c.batch, persistent, c.duration.Seconds())
	t0 := time.Now()
	if err := idx.WarmUp(res, &sp, c.batch, c.k, dlpack.Uint32); err != nil {
		return err
	}
	fmt.Fprintf(out, "# warm-up (first search): %.3f s\n", time.Since(t0).Seconds())
	fmt.Fprintf(out, "%10s %12s %10s %10s %10s %10s\n", "goroutines", "QPS", "p50_us", "p99_us", "max_us", "searches")

	var allocs, gcs uint64
	for _, g := range c.goroutines {
		r, err := step(idx, &sp, c, g)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%10d %12.1f %10.1f %10.1f %10.1f %10d\n", g, r.qps, us(r.p50), us(r.p99), us(r.max), r.searches)
		allocs += r.allocs
		gcs += r.gcs
	}
	fmt.Fprintf(out, "# go: GOMAXPROCS %d; during the timed windows: %d heap allocations, %d GC cycles\n",
		runtime.GOMAXPROCS(0), allocs, gcs)
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// build makes the index from uniform random host data, as cbench does:
// NN-Descent, intermediate degree twice the final one.
func build(res *safe.Resources, c config) (*cagra.Index, time.Duration, error) {
	data, err := dlpack.NewHostMatrix(randomMatrix(c.seed, c.rows, c.dim), c.rows, c.dim)
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
	idx, err := cagra.Build(res, data, p) // host data: copied, waited for
	return idx, time.Since(t0), err
}

func searchParams(c config) (cagra.SearchParams, error) {
	sp, err := cagra.DefaultSearchParams()
	if err != nil {
		return sp, err
	}
	sp.ITopKSize = c.itopk
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
type rowsTensor struct {
	m          *safe.DeviceMatrix[float32]
	start, end int
}

func (r *rowsTensor) View() (dlpack.View, error) { return r.m.RowsView(r.start, r.end) }

// worker is one serving goroutine: its own Resources (own CUDA stream) and
// its own device buffers, allocated before the clock starts.
type worker struct {
	res       *safe.Resources
	queries   *safe.DeviceMatrix[float32] // nb batches of batch × dim
	neighbors *safe.DeviceMatrix[uint32]
	distances *safe.DeviceMatrix[float32]
	batch     rowsTensor
	size, nb  int // queries per batch, batches
	next      int // the next batch searched

	hist     histogram
	searches int64
	end      time.Time
	err      error
}

func newWorker(c config, id int) (w *worker, err error) {
	w = &worker{size: c.batch, nb: queryBatches(c)}
	if w.res, err = safe.NewResources(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.close())
		}
	}()
	rows := w.nb * c.batch
	if w.queries, err = safe.DeviceMatrixFrom(w.res, randomMatrix(querySeed(c.seed, id), rows, c.dim), rows, c.dim); err != nil {
		return w, err
	}
	w.batch.m = w.queries
	if w.neighbors, err = safe.NewDeviceMatrix[uint32](w.res, c.batch, c.k); err != nil {
		return w, err
	}
	w.distances, err = safe.NewDeviceMatrix[float32](w.res, c.batch, c.k)
	return w, err
}

func (w *worker) close() error {
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
func (w *worker) search(idx *cagra.Index, sp *cagra.SearchParams) error {
	w.batch.start = w.next * w.size
	w.batch.end = w.batch.start + w.size
	if w.next++; w.next == w.nb {
		w.next = 0
	}
	if err := idx.Search(w.res, sp, &w.batch, w.neighbors, w.distances, nil); err != nil {
		return err
	}
	return w.res.Sync()
}

// clock is the timed window of a step, set before the workers are let go.
type clock struct{ start, deadline time.Time }

func (w *worker) loop(idx *cagra.Index, sp *cagra.SearchParams, ready *sync.WaitGroup, start <-chan struct{}, clk *clock) {
	ready.Done()
	<-start
	t0 := time.Now()
	for {
		if w.err = w.search(idx, sp); w.err != nil {
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
}

// step runs n goroutines searching idx for c.duration.
func step(idx *cagra.Index, sp *cagra.SearchParams, c config, n int) (r result, err error) {
	ws := make([]*worker, 0, n)
	defer func() {
		for _, w := range ws {
			err = errors.Join(err, w.close())
		}
	}()
	for i := range n {
		w, err := newWorker(c, i)
		if err != nil {
			return r, fmt.Errorf("%d goroutines: setting up goroutine %d: %w", n, i, err)
		}
		ws = append(ws, w)
	}
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var clk clock
	for _, w := range ws {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			w.loop(idx, sp, &ready, start, &clk)
		}()
	}
	ready.Wait()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	clk.start = time.Now()
	clk.deadline = clk.start.Add(c.duration)
	close(start)
	done.Wait()
	runtime.ReadMemStats(&after)

	var all histogram
	end := clk.start
	for i, w := range ws {
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

// closeInto closes c, keeping the first error in *err.
func closeInto(err *error, c interface{ Close() error }) {
	if e := c.Close(); *err == nil {
		*err = e
	}
}
