// Command memest checks, on a real GPU, the index packages' EstimateMemory
// against what cuVS takes (issue 45). It has three modes:
//
// -mode table (the default): for every algorithm of -algos and every size
// of -rows (× -dim of -dtype, random clustered rows uploaded to the device
// first), the build's estimated peak and index against the measured ones,
// one line each with the ratios and whether both are within ±25%. cuVS
// allocates straight from CUDA (Load WithoutMemoryPool: cuda_memory_resource,
// freed at once) and a goroutine samples cudaMemGetInfo every -sample while
// the build runs: the peak is the most used less what was used before (so
// allocations shorter than the interval can be missed: the measured peak is
// a lower bound), the index what stays used after the build. With -track
// (cuVS 26.08) the builds also run on a Resources WithMemoryTracking whose
// CSV is kept (one per build, under -out) for the exact allocations.
//
// -mode toolarge: a build that does not fit the pool's cap (-cap bytes,
// Load WithMemoryLimit), "today" (a Resources WithoutMemoryCheck and no
// SetMemoryLimit: cuVS fails inside the build) and "after" (the bindings
// refuse before calling cuVS); for each, how long until the error, the
// error, what the device and pool hold after, and whether a small build
// and search still work.
//
// -mode overcap -algo ivfpq|ivfsq|ivfflat|cagra|hnsw-ace (overcap.go):
// an index built over -hostrows rows of -dim float32 in host memory (0:
// twice the cap) under a cap of -cap bytes, with docs/MEMORY.md's recipe
// for the algorithm: the estimate and the bindings' check (a refused
// build is tried again WithoutMemoryCheck, so that cuVS says whether it
// fits), the build's time, the pool's size after it (an upper bound of
// its peak: RMM grows a capped pool by half its remaining room), the
// tracked peak (cuVS 26.08: WithMemoryTracking's CSV, kept under -out),
// recall@-k of -queries queries against the exact neighbours (brute force
// over device chunks of an eighth of the cap, after the index is closed),
// before and after refining -refine×k candidates on the host, and a table
// row and a RESULT line. -capby pool caps cuVS's pool (Load
// WithMemoryLimit); -capby device runs without a pool, a DeviceMatrix of
// ours taking all of the device but the cap, and samples cudaMemGetInfo
// for the build's peak (the only peak 26.06 gives). IVF-Flat cannot hold
// the rows (its plain Build is refused) and builds 40% of the cap in
// rows by training on a sample and extending in device chunks; CAGRA is
// CAGRA-Q on 26.06 and refused on 26.08 (no compression, rows on the
// device); hnsw-ace searches on the CPU. One algorithm a process: the
// pool does not shrink.
//
// Build it here (no Go on the GPU machine) and carry the binary:
//
//	go build -o build/memest ./internal/bench/memest
//	memest -lib /root/cuvs/26.08.01/lib/libcuvs_c.so -algos ivfflat,ivfpq,bruteforce,cagra-ivfpq,cagra-nnd,tiered-cagra,tiered-ivfflat,tiered-ivfpq,cagra-ace,hnsw-ace -rows 100000,1000000,5000000
//
// The tiered rows build the ANN tier over every row (MinANNRows rows/2):
// their index counts cuVS's storage, which takes four times the rows'
// bytes (tiered.EstimateMemory); a measured index near the estimate
// confirms that reading of brute_force_storage on the GPU.
//
//	memest -lib ... -mode toolarge -algo cagra-ivfpq -rows 8000000 -cap 4294967296
//	memest -lib ... -mode overcap -algo ivfpq -cap 4294967296   # 8 GiB of rows: twice the cap
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

type config struct {
	lib, mode, algos, algo, dtype, out, capBy string
	rows                                      []int
	dim, queries, k, refineRatio              int
	hostRows                                  int
	capBytes                                  int64
	sample                                    time.Duration
	track                                     bool
}

func main() {
	var c config
	var rows string
	flag.StringVar(&c.lib, "lib", "", "libcuvs_c.so")
	flag.StringVar(&c.mode, "mode", "table", "table, toolarge or overcap")
	flag.StringVar(&c.algos, "algos", "ivfflat,ivfpq,bruteforce,cagra-ivfpq,cagra-nnd", "table: algorithms")
	flag.StringVar(&c.algo, "algo", "", "toolarge: the algorithm [cagra-ivfpq]; overcap: "+strings.Join(overcapAlgos, ", ")+" [ivfpq]")
	flag.StringVar(&rows, "rows", "100000,1000000,5000000", "rows (table: each; toolarge: the first)")
	flag.IntVar(&c.dim, "dim", 128, "dimension")
	flag.StringVar(&c.dtype, "dtype", "float32", "float32 or int8 (int8: IVF-Flat, IVF-PQ and CAGRA)")
	flag.IntVar(&c.hostRows, "hostrows", 0, "overcap: rows of -dim float32 in host memory (0: twice the cap)")
	flag.Int64Var(&c.capBytes, "cap", 4<<30, "toolarge, overcap: the cap in bytes")
	flag.StringVar(&c.capBy, "capby", "pool", "overcap: pool (safe.WithMemoryLimit) or device (no pool, a filler taking the rest)")
	flag.IntVar(&c.queries, "queries", 1000, "overcap: queries for recall")
	flag.IntVar(&c.k, "k", 10, "overcap: neighbours")
	flag.IntVar(&c.refineRatio, "refine", 4, "overcap: candidates per neighbour refined on the host (IVF-PQ, IVF-SQ, CAGRA-Q)")
	flag.DurationVar(&c.sample, "sample", time.Millisecond, "table, overcap -capby device: cudaMemGetInfo sampling interval")
	flag.BoolVar(&c.track, "track", false, "table: also build WithMemoryTracking (cuVS 26.08) and keep the CSVs under -out")
	flag.StringVar(&c.out, "out", "memest-out", "where the tracking CSVs go (-track; overcap on 26.08 always tracks)")
	flag.Parse()
	for _, s := range strings.Split(rows, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			fmt.Fprintf(os.Stderr, "memest: -rows: %q\n", s)
			os.Exit(2)
		}
		c.rows = append(c.rows, n)
	}
	var err error
	switch c.mode {
	case "table":
		err = table(&c)
	case "toolarge":
		err = tooLarge(&c)
	case "overcap":
		err = overCap(&c)
	default:
		err = fmt.Errorf("-mode %q: want table, toolarge or overcap", c.mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "memest:", err)
		os.Exit(1)
	}
}

func load(c *config, opts ...safe.Option) error {
	if c.lib != "" {
		opts = append(opts, safe.WithLibrary(c.lib))
	}
	if err := safe.Load(opts...); err != nil {
		return err
	}
	v, _ := safe.LibraryVersion()
	fmt.Printf("# cuVS %s, %s\n", v, time.Now().UTC().Format(time.RFC3339))
	return nil
}

// clustered returns rows × dim float32s around 1024 random centers.
func clustered(seed uint64, rows, dim int) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	const nc = 1024
	centers := make([]float32, nc*dim)
	for i := range centers {
		centers[i] = r.Float32()*2 - 1
	}
	out := make([]float32, rows*dim)
	var wg sync.WaitGroup
	const parts = 16
	for p := 0; p < parts; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			rr := rand.New(rand.NewPCG(seed, uint64(p)+2))
			for i := p * rows / parts; i < (p+1)*rows/parts; i++ {
				c := centers[rr.IntN(nc)*dim:]
				for j := 0; j < dim; j++ {
					out[i*dim+j] = c[j] + float32(rr.NormFloat64())*0.15
				}
			}
		}(p)
	}
	wg.Wait()
	return out
}

func toInt8(f []float32) []int8 {
	out := make([]int8, len(f))
	for i, v := range f {
		out[i] = int8(max(-127, min(127, v*100)))
	}
	return out
}

// sampler records the most device memory used while it runs.
type sampler struct {
	res  *safe.Resources
	stop chan struct{}
	done chan struct{}
	peak int64
	err  error
}

func used(res *safe.Resources) (int64, error) {
	m, err := res.DeviceMemory()
	if err != nil {
		return 0, err
	}
	if m.Total == 0 {
		return 0, errors.New("the CUDA runtime has no cudaMemGetInfo")
	}
	return m.Total - m.Free, nil
}

func startSampler(res *safe.Resources, every time.Duration) *sampler {
	s := &sampler{res: res, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			u, err := used(res)
			if err != nil {
				s.err = err
				return
			}
			s.peak = max(s.peak, u)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) finish() (int64, error) {
	close(s.stop)
	<-s.done
	return s.peak, s.err
}

type builder struct {
	name     string
	estimate func(s safe.MemoryShape) (safe.MemoryEstimate, error)
	build    func(res *safe.Resources, ds dlpack.Tensor) (interface{ Close() error }, error)
}

// hostBuilders are built from the rows in host memory (float32 only): ACE
// partitions host rows.
var hostBuilders = map[string]bool{"hnsw-ace": true, "cagra-ace": true}

func builders(rows int) map[string]builder {
	nl := uint32(max(1, min(rows/2000, 1024)))
	ivfp := func() *ivfflat.IndexParams {
		p, _ := ivfflat.DefaultIndexParams()
		p.NLists = nl
		return &p
	}
	pqp := func() *ivfpq.IndexParams {
		p, _ := ivfpq.DefaultIndexParams()
		p.NLists = nl
		return &p
	}
	cgp := func(a cagra.GraphBuildAlgo) *cagra.IndexParams {
		p, _ := cagra.DefaultIndexParams()
		p.BuildAlgo = a
		return &p
	}
	tdp := func(b tiered.Backend) *tiered.IndexParams {
		p, _ := tiered.DefaultIndexParams()
		p.Backend, p.MinANNRows = b, int64(rows/2) // the ANN tier built over every row
		p.IVFFlat.NLists, p.IVFPQ.NLists = nl, nl
		return &p
	}
	td := func(name string, b tiered.Backend) builder {
		return builder{name, func(s safe.MemoryShape) (safe.MemoryEstimate, error) { return tiered.EstimateMemory(s, tdp(b), nil) },
			func(res *safe.Resources, ds dlpack.Tensor) (interface{ Close() error }, error) {
				return tiered.Build(res, ds, tdp(b))
			}}
	}
	aceP := func() *hnsw.IndexParams {
		p, _ := hnsw.DefaultIndexParams()
		a, _ := hnsw.DefaultACEParams()
		a.UseDisk, a.MaxGPUMemoryGB = false, 0
		p.ACE = &a
		return &p
	}
	cgACE := func() *cagra.IndexParams {
		p := cgp(cagra.ACE)
		a, _ := cagra.DefaultACEParams()
		a.UseDisk = false
		p.ACE = &a
		return p
	}
	return map[string]builder{
		"hnsw-ace": {"hnsw-ace", func(s safe.MemoryShape) (safe.MemoryEstimate, error) { return hnsw.EstimateMemory(s, aceP()) },
			func(res *safe.Resources, ds dlpack.Tensor) (interface{ Close() error }, error) {
				return hnsw.Build(res, ds, aceP())
			}},
		"cagra-ace": {"cagra-ace", func(s safe.MemoryShape) (safe.MemoryEstimate, error) { return cagra.EstimateMemory(s, cgACE(), nil) },
			func(res *safe.Resources, ds dlpack.Tensor) (interface{ Close() error }, error) {
				return cagra.Build(res, ds, cgACE())
			}},
		"tiered-cagra":   td("tiered-cagra", tiered.CAGRA),
		"tiered-ivfflat": td("tiered-ivfflat", tiered.IVFFlat),
		"tiered-ivfpq":   td("tiered-ivfpq", tiered.IVFPQ),
		"ivfflat": {"ivfflat", func(s safe.MemoryShape) (safe.MemoryEstimate, error) { return ivfflat.EstimateMemory(s, ivfp(), nil) },
			func(res *safe.Resources, ds dlpack.Tensor) (interface{ Close() error }, error) {
				return ivfflat.Build(res, ds, ivfp())
			}},
		"ivfpq": {"ivfpq", func(s safe.MemoryShape) (safe.MemoryEstimate, error) { return ivfpq.EstimateMemory(s, pqp(), nil) },
			func(res *safe.Resources, ds dlpack.Tensor) (interface{ Close() error }, error) {
				return ivfpq.Build(res, ds, pqp())
			}},
		"bruteforce": {"bruteforce", func(s safe.MemoryShape) (safe.MemoryEstimate, error) { return bruteforce.EstimateMemory(s, nil) },
			func(res *safe.Resources, ds dlpack.Tensor) (interface{ Close() error }, error) {
				return bruteforce.Build(res, ds, nil)
			}},
		"cagra-ivfpq": {"cagra-ivfpq", func(s safe.MemoryShape) (safe.MemoryEstimate, error) {
			return cagra.EstimateMemory(s, cgp(cagra.IVFPQ), nil)
		},
			func(res *safe.Resources, ds dlpack.Tensor) (interface{ Close() error }, error) {
				return cagra.Build(res, ds, cgp(cagra.IVFPQ))
			}},
		"cagra-nnd": {"cagra-nnd", func(s safe.MemoryShape) (safe.MemoryEstimate, error) {
			return cagra.EstimateMemory(s, cgp(cagra.NNDescent), nil)
		},
			func(res *safe.Resources, ds dlpack.Tensor) (interface{ Close() error }, error) {
				return cagra.Build(res, ds, cgp(cagra.NNDescent))
			}},
	}
}

func ratio(got, want int64) float64 {
	if want == 0 {
		return math.NaN()
	}
	return float64(got) / float64(want)
}

func table(c *config) error {
	if err := load(c, safe.WithoutMemoryPool()); err != nil {
		return err
	}
	fmt.Println("| algorithm | dtype | rows | est. peak MiB | measured peak MiB | peak ratio | est. index MiB | measured index MiB | index ratio | within ±25% |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, rows := range c.rows {
		f := clustered(1, rows, c.dim)
		for _, name := range strings.Split(c.algos, ",") {
			b, ok := builders(rows)[name]
			if !ok {
				return fmt.Errorf("-algos: %q", name)
			}
			if c.dtype == "int8" && (name == "bruteforce" || hostBuilders[b.name] || strings.HasPrefix(name, "tiered-")) {
				continue // brute force takes float32 and float16 only, the tiered index float32
			}
			if err := tableRow(c, b, rows, f); err != nil {
				fmt.Printf("| %s | %s | %d | error: %v |\n", name, c.dtype, rows, err)
			}
		}
	}
	return nil
}

func tableRow(c *config, b builder, rows int, f []float32) error {
	var opts []safe.ResourcesOption
	var csv string
	if c.track {
		if err := os.MkdirAll(c.out, 0o755); err != nil {
			return err
		}
		csv = filepath.Join(c.out, fmt.Sprintf("%s-%s-%d.csv", b.name, c.dtype, rows))
		opts = append(opts, safe.WithMemoryTracking(csv, time.Millisecond))
	}
	res, err := safe.NewResources(append(opts, safe.WithoutMemoryCheck())...)
	if err != nil {
		return err
	}
	defer res.Close()
	var ds interface {
		dlpack.Tensor
		Close() error
	}
	dt := dlpack.Float32
	if hostBuilders[b.name] {
		hm, herr := dlpack.NewHostMatrix(f, rows, c.dim)
		if herr != nil {
			return herr
		}
		ds = struct {
			dlpack.Tensor
			io.Closer
		}{hm, io.NopCloser(nil)}
	} else if c.dtype == "int8" {
		ds, err = safe.DeviceMatrixFrom(res, toInt8(f), rows, c.dim)
		dt = dlpack.Int8
	} else {
		ds, err = safe.DeviceMatrixFrom(res, f, rows, c.dim)
	}
	if err != nil {
		return err
	}
	defer ds.Close()
	est, err := b.estimate(safe.MemoryShape{Rows: rows, Dim: c.dim, DType: dt, HostDataset: hostBuilders[b.name]})
	if err != nil {
		return err
	}
	if err := res.Sync(); err != nil {
		return err
	}
	before, err := used(res)
	if err != nil {
		return err
	}
	s := startSampler(res, c.sample)
	start := time.Now()
	idx, err := b.build(res, ds)
	if err == nil {
		err = res.Sync()
	}
	took := time.Since(start)
	peak, serr := s.finish()
	if err != nil {
		return err
	}
	defer idx.Close()
	if serr != nil {
		return serr
	}
	after, err := used(res)
	if err != nil {
		return err
	}
	mp, mi := max(peak, after)-before, after-before
	rp, ri := ratio(mp, est.BuildPeak), ratio(mi, est.Index)
	ok := math.Abs(rp-1) <= 0.25 && (est.Index == 0 || math.Abs(ri-1) <= 0.25)
	const mib = 1 << 20
	fmt.Printf("| %s | %s | %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | %v |  <!-- build %.1fs%s -->\n", b.name, c.dtype, rows,
		float64(est.BuildPeak)/mib, float64(mp)/mib, rp, float64(est.Index)/mib, float64(mi)/mib, ri, ok, took.Seconds(), csvNote(csv))
	return nil
}

func csvNote(p string) string {
	if p == "" {
		return ""
	}
	return ", tracking CSV " + p
}

// tooLarge builds c.algo over c.rows[0] rows under a pool capped at c.cap,
// without the bindings' check and with it.
func tooLarge(c *config) error {
	if err := load(c, safe.WithMemoryLimit(c.capBytes)); err != nil {
		return err
	}
	rows := c.rows[0]
	algo := c.algo
	if algo == "" {
		algo = "cagra-ivfpq"
	}
	b, ok := builders(rows)[algo]
	if !ok {
		return fmt.Errorf("-algo %q", algo)
	}
	f := clustered(2, rows, c.dim)
	hm, err := dlpack.NewHostMatrix(f, rows, c.dim)
	if err != nil {
		return err
	}
	est, err := b.estimate(safe.MemoryShape{Rows: rows, Dim: c.dim, DType: dlpack.Float32, HostDataset: true})
	if err != nil {
		return err
	}
	fmt.Printf("# %s over %d × %d float32 rows in host memory: estimated peak %.2f GiB (+ %.2f GiB upload), index %.2f GiB; pool cap %.2f GiB\n",
		algo, rows, c.dim, gib(est.BuildPeak), gib(est.Dataset), gib(est.Index), gib(c.capBytes))
	for _, today := range []bool{true, false} {
		label := "after (checked)"
		var opts []safe.ResourcesOption
		if today {
			label = "today (WithoutMemoryCheck, no limit)"
			opts = append(opts, safe.WithoutMemoryCheck())
			_ = safe.SetMemoryLimit(0)
		} else {
			_ = safe.SetMemoryLimit(c.capBytes)
		}
		res, err := safe.NewResources(opts...)
		if err != nil {
			return err
		}
		m0, _ := res.DeviceMemory()
		start := time.Now()
		idx, err := b.build(res, hm)
		took := time.Since(start)
		if err == nil {
			idx.Close()
		}
		m1, _ := res.DeviceMemory()
		var me *safe.MemoryError
		fmt.Printf("%s: after %.2fs: %v\n  out of memory: %v, refused before cuVS: %v\n  device before: free %.2f GiB, pool size %.2f GiB; after: free %.2f GiB, pool size %.2f GiB, in use by the bindings %.2f GiB\n",
			label, took.Seconds(), err, errors.Is(err, safe.ErrOutOfMemory), errors.As(err, &me),
			gib(m0.Free), gib(m0.Pool.Size), gib(m1.Free), gib(m1.Pool.Size), gib(m1.InUse))
		fmt.Printf("  a small build and search after it: %v\n", smallWorks(res))
		res.Close()
	}
	return nil
}

// smallWorks builds a 10k-row brute-force index and searches it.
func smallWorks(res *safe.Resources) error {
	f := clustered(3, 10000, 32)
	hm, err := dlpack.NewHostMatrix(f, 10000, 32)
	if err != nil {
		return err
	}
	idx, err := bruteforce.Build(res, hm, nil)
	if err != nil {
		return err
	}
	defer idx.Close()
	r, err := bruteforce.SearchSlice(res, idx, f[:32*10], 5, nil)
	if err != nil {
		return err
	}
	for q := 0; q < 10; q++ {
		if r.Neighbors[q*5] != int64(q) {
			return fmt.Errorf("query %d: nearest %d, want itself", q, r.Neighbors[q*5])
		}
	}
	return nil
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }

// chunkedExact is the exact k nearest (L2) over rows in chunks of at most
// chunkBytes, each uploaded and searched by brute force, merged on the host.
func chunkedExact(res *safe.Resources, f []float32, rows, dim int, qs []float32, k int, chunkBytes int64) ([]int64, error) {
	nq := len(qs) / dim
	type cand struct {
		d  float32
		id int64
	}
	best := make([][]cand, nq)
	step := int(max(chunkBytes/int64(dim*4), int64(k)))
	for lo := 0; lo < rows; lo += step {
		hi := min(rows, lo+step)
		dm, err := safe.DeviceMatrixFrom(res, f[lo*dim:hi*dim], hi-lo, dim)
		if err != nil {
			return nil, err
		}
		idx, err := bruteforce.Build(res, dm, nil)
		if err != nil {
			dm.Close()
			return nil, err
		}
		r, err := bruteforce.SearchSlice(res, idx, qs, k, nil)
		idx.Close()
		dm.Close()
		if err != nil {
			return nil, err
		}
		for q := 0; q < nq; q++ {
			for j := 0; j < k; j++ {
				best[q] = append(best[q], cand{r.Distances[q*k+j], r.Neighbors[q*k+j] + int64(lo)})
			}
			sort.Slice(best[q], func(a, b int) bool { return best[q][a].d < best[q][b].d })
			best[q] = best[q][:k]
		}
	}
	out := make([]int64, 0, nq*k)
	for q := range best {
		for _, c := range best[q] {
			out = append(out, c.id)
		}
	}
	return out, nil
}

func recall(got, exact []int64, k int) float64 {
	hit := 0
	for q := 0; q*k < len(exact); q++ {
		want := map[int64]bool{}
		for _, id := range exact[q*k : (q+1)*k] {
			want[id] = true
		}
		for _, id := range got[q*k : (q+1)*k] {
			if want[id] {
				hit++
			}
		}
	}
	return float64(hit) / float64(len(exact))
}
