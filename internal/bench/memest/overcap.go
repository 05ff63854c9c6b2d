package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
	"github.com/cuvs-go/cuvs/safe/refine"
)

// overcapAlgos are -mode overcap's algorithms (docs/MEMORY.md has the
// recipes and what does not work).
var overcapAlgos = []string{"ivfpq", "ivfsq", "ivfflat", "cagra", "hnsw-ace"}

// overcap is one -mode overcap run: an index built over host rows larger
// than the device memory a cap allows.
type overcap struct {
	c         *config
	rows, dim int
	data, qs  []float32
	capBytes  int64
	res       *safe.Resources // plain: the exact neighbours, the refinement, the filler
	filler    *safe.DeviceMatrix[uint8]
	csvN      int
}

// index is a built index as a run needs it.
type index struct {
	close  func() error
	search func(res *safe.Resources, k int) (*safe.Results, error) // the run's queries
	exact  bool                                                    // exact distances: nothing to refine
}

// spec is one algorithm's recipe.
type spec struct {
	name     string
	rows     int // rows built (the first rows of the data)
	recipe   string
	estimate func() (safe.MemoryEstimate, error) // nil: not estimated
	build    func(res *safe.Resources) (*index, error)
}

// result is what a run measured; -1 is "not measured".
type result struct {
	algo, note, check         string
	rows                      int
	ok, possible              bool
	estPeak                   int64 // BuildPeak + Dataset
	poolBuild                 int64 // the pool's size after the build
	trackBuild, trackAll      int64 // tracked peak through the build, and through the search
	sampled                   int64 // sampled peak through the build (-capby device)
	buildS, recall, refinedAt float64
}

func newResult(algo string, rows int) result {
	return result{algo: algo, rows: rows, estPeak: -1, poolBuild: -1, trackBuild: -1, trackAll: -1, sampled: -1, recall: -1, refinedAt: -1}
}

// overCap runs -mode overcap for c.algo.
func overCap(c *config) error {
	algo := c.algo
	if algo == "" {
		algo = "ivfpq"
	}
	if !contains(overcapAlgos, algo) {
		return fmt.Errorf("-algo %q: overcap takes %s", algo, strings.Join(overcapAlgos, ", "))
	}
	o := &overcap{c: c, dim: c.dim, capBytes: c.capBytes}
	if o.capBytes < 1 || o.dim < 1 || c.queries < 1 || c.k < 1 || c.refineRatio < 1 {
		return fmt.Errorf("-cap %d, -dim %d, -queries %d, -k %d, -refine %d: want all positive", o.capBytes, o.dim, c.queries, c.k, c.refineRatio)
	}
	switch c.capBy {
	case "pool":
		if err := load(c, safe.WithMemoryLimit(c.capBytes)); err != nil {
			return err
		}
	case "device":
		if err := load(c, safe.WithoutMemoryPool()); err != nil {
			return err
		}
	default:
		return fmt.Errorf("-capby %q: want pool or device", c.capBy)
	}
	var err error
	if o.res, err = safe.NewResources(); err != nil {
		return err
	}
	defer o.res.Close()
	if err := o.capDevice(); err != nil {
		return err
	}
	defer o.filler.Close()

	rowBytes := int64(o.dim) * 4
	o.rows = c.hostRows
	if o.rows == 0 {
		o.rows = int((2*o.capBytes + rowBytes - 1) / rowBytes) // twice the cap
	}
	if o.rows < 2 {
		return fmt.Errorf("-hostrows %d: want at least 2", o.rows)
	}
	start := time.Now()
	f := clustered(4, o.rows+c.queries, o.dim) // the queries: more rows of the same clusters, not indexed
	o.data, o.qs = f[:o.rows*o.dim], f[o.rows*o.dim:]
	fmt.Printf("# overcap %s: %d × %d float32 rows in host memory (%.2f GiB, %.1f× the cap), %d queries, made in %.1fs\n",
		algo, o.rows, o.dim, gib(int64(o.rows)*rowBytes), float64(int64(o.rows)*rowBytes)/float64(o.capBytes), c.queries, time.Since(start).Seconds())

	var r result
	switch algo {
	case "ivfpq":
		r, err = o.run(o.ivfpqSpec())
	case "ivfsq":
		r, err = o.run(o.ivfsqSpec())
	case "ivfflat":
		r, err = o.ivfflat()
	case "cagra":
		r, err = o.cagra()
	case "hnsw-ace":
		r, err = o.run(o.hnswSpec())
	}
	if err != nil {
		return err
	}
	o.report(r)
	if r.possible && !r.ok {
		return fmt.Errorf("overcap %s: %s", algo, r.note)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// capDevice prints the cap. With -capby device it takes, with a
// DeviceMatrix of its own, all of the device's free memory but the cap (no
// pool: cuVS allocates straight from CUDA, and a sampler of
// cudaMemGetInfo sees its peaks).
func (o *overcap) capDevice() error {
	m, err := o.res.DeviceMemory()
	if err != nil {
		return err
	}
	if o.c.capBy == "pool" {
		fmt.Printf("# cap: the pool (safe.WithMemoryLimit(%d)): maximum %.3f GiB, initial %.3f GiB; device total %.2f GiB\n",
			o.capBytes, gib(m.Pool.Max), gib(m.Pool.Initial), gib(m.Total))
		return nil
	}
	if m.Total == 0 {
		return errors.New("-capby device: the CUDA runtime has no cudaMemGetInfo")
	}
	if fill := m.Free - o.capBytes; fill > 0 {
		if o.filler, err = safe.NewDeviceMatrix[uint8](o.res, int(fill), 1); err != nil {
			return fmt.Errorf("-capby device: taking %.2f GiB: %w", gib(fill), err)
		}
	}
	m, err = o.res.DeviceMemory()
	if err != nil {
		return err
	}
	fmt.Printf("# cap: the device (no pool; a %.2f GiB filler of ours): free %.3f GiB of %.2f GiB\n",
		gib(int64(o.filler.Rows())), gib(m.Free), gib(m.Total))
	return nil
}

// nLists is the IVF runs' list count: about 1000 rows a list, at most 4096.
func (o *overcap) nLists(rows int) uint32 { return uint32(max(1, min(rows/1000, 4096))) }

// nProbes probes 1/32 of the lists, at least 8 (all of them when fewer).
func nProbes(nl uint32) uint32 { return min(nl, max(nl/32, 8)) }

func (o *overcap) hostRows(rows int) (*dlpack.HostMatrix[float32], error) {
	return dlpack.NewHostMatrix(o.data[:rows*o.dim], rows, o.dim)
}

func (o *overcap) shape(rows int) safe.MemoryShape {
	return safe.MemoryShape{Rows: rows, Dim: o.dim, DType: dlpack.Float32, HostDataset: true}
}

func (o *overcap) ivfpqSpec() spec {
	nl := o.nLists(o.rows)
	p, _ := ivfpq.DefaultIndexParams()
	p.NLists, p.PQDim = nl, uint32(max(1, o.dim/2))
	// k-means trains on a float32 sample on the device: a quarter of the
	// cap at most (cuVS's default fraction, 0.5, of 8 GiB of rows is the
	// whole of a 4 GiB cap)
	p.KMeansTrainsetFraction = min(p.KMeansTrainsetFraction, float64(o.capBytes)/4/float64(int64(o.rows)*int64(o.dim)*4))
	sp, _ := ivfpq.DefaultSearchParams()
	sp.NProbes = nProbes(nl)
	return spec{
		name: "ivfpq", rows: o.rows,
		recipe: fmt.Sprintf("ivfpq.Build on the host rows (NLists %d, PQDim %d, PQBits %d, KMeansTrainsetFraction %.3g; cuVS trains on a sample and encodes the rows in host batches); SearchSlice with NProbes %d for %d×k candidates, refine.Refine against the host rows",
			nl, p.PQDim, p.PQBits, p.KMeansTrainsetFraction, sp.NProbes, o.c.refineRatio),
		estimate: func() (safe.MemoryEstimate, error) { return ivfpq.EstimateMemory(o.shape(o.rows), &p, nil) },
		build: func(res *safe.Resources) (*index, error) {
			hm, err := o.hostRows(o.rows)
			if err != nil {
				return nil, err
			}
			idx, err := ivfpq.Build(res, hm, &p)
			if err != nil {
				return nil, err
			}
			return &index{close: idx.Close, search: func(res *safe.Resources, k int) (*safe.Results, error) {
				return ivfpq.SearchSlice(res, idx, &sp, o.qs, k)
			}}, nil
		},
	}
}

func (o *overcap) ivfsqSpec() spec {
	nl := o.nLists(o.rows)
	p, _ := ivfsq.DefaultIndexParams()
	p.NLists = nl
	sp, _ := ivfsq.DefaultSearchParams()
	sp.NProbes = nProbes(nl)
	return spec{
		name: "ivfsq", rows: o.rows,
		recipe: fmt.Sprintf("ivfsq.Build on the host rows (NLists %d; one byte a dimension; cuVS encodes the rows in host batches); SearchSlice with NProbes %d for %d×k candidates, refine.Refine against the host rows",
			nl, sp.NProbes, o.c.refineRatio),
		estimate: func() (safe.MemoryEstimate, error) { return ivfsq.EstimateMemory(o.shape(o.rows), &p, nil) },
		build: func(res *safe.Resources) (*index, error) {
			hm, err := o.hostRows(o.rows)
			if err != nil {
				return nil, err
			}
			idx, err := ivfsq.Build(res, hm, &p)
			if err != nil {
				return nil, err
			}
			return &index{close: idx.Close, search: func(res *safe.Resources, k int) (*safe.Results, error) {
				return ivfsq.SearchSlice(res, idx, &sp, o.qs, k, nil)
			}}, nil
		},
	}
}

// ivfflat shows that IVF-Flat cannot take the rows (its lists hold every
// row on the device, and its C build takes device rows: a plain Build is
// refused before cuVS), then builds the most the recipe fits: a model
// trained on a host sample, the rows added by Extend from device chunks.
func (o *overcap) ivfflat() (result, error) {
	nl := o.nLists(o.rows)
	p, _ := ivfflat.DefaultIndexParams()
	p.NLists = nl
	hm, err := o.hostRows(o.rows)
	if err != nil {
		return result{}, err
	}
	e, _ := ivfflat.EstimateMemory(o.shape(o.rows), &p, nil)
	idx, err := ivfflat.Build(o.res, hm, &p)
	fmt.Printf("plain ivfflat.Build of all %d rows: estimate %.2f GiB upload + %.2f GiB peak, index %.2f GiB: %v\n",
		o.rows, gib(e.Dataset), gib(e.BuildPeak), gib(e.Index), errText(err))
	if err == nil {
		_ = idx.Close()
	}

	rowBytes := int64(o.dim) * 4
	fit := int(o.capBytes * 4 / 10 / rowBytes) // the index holds the rows, and cuVS's extend reallocates each list it grows while the old one is held (ivf_flat_build.cuh): 40% of the cap in rows
	if fit < 2 {
		r := newResult("ivfflat", 0)
		r.note = "the cap holds no rows"
		return r, nil
	}
	fl := o.nLists(fit)
	p.NLists, p.AddDataOnBuild, p.ConservativeMemoryAllocation = fl, false, true
	train := min(fit, max(fit/10, int(fl)*40))
	chunk := max(1, int(o.capBytes/16/rowBytes))
	pe, _ := ivfflat.EstimateMemory(o.shape(fit), &ivfflat.IndexParams{Metric: p.Metric, AddDataOnBuild: true, NLists: fl, KMeansNIters: p.KMeansNIters, KMeansTrainsetFraction: p.KMeansTrainsetFraction, ConservativeMemoryAllocation: true}, nil)
	if h, err := o.hostRows(fit); err == nil {
		pp := p
		pp.AddDataOnBuild, pp.ConservativeMemoryAllocation = true, false
		pidx, err := ivfflat.Build(o.res, h, &pp)
		if err == nil {
			_ = pidx.Close()
		}
		fmt.Printf("plain ivfflat.Build of the %d rows the recipe builds: estimate %.2f GiB upload + %.2f GiB peak: %v\n",
			fit, gib(pe.Dataset), gib(pe.BuildPeak), errText(err))
	}
	sp, _ := ivfflat.DefaultSearchParams()
	sp.NProbes = nProbes(fl)
	return o.run(spec{
		name: "ivfflat", rows: fit,
		recipe: fmt.Sprintf("IVF-Flat's lists hold every row on the device: the recipe builds %d rows (%.2f GiB, 40%% of the cap): ivfflat.Build on a %d-row host sample with AddDataOnBuild false and ConservativeMemoryAllocation (NLists %d), then Index.Extend with device chunks of %d rows (safe.DeviceMatrixFrom, closed after each); SearchSlice with NProbes %d (exact distances)",
			fit, gib(int64(fit)*rowBytes), train, fl, chunk, sp.NProbes),
		estimate: func() (safe.MemoryEstimate, error) {
			e := pe // the index the recipe ends with, a chunk and its ids
			e.Dataset, e.BuildPeak = 0, e.Index+int64(chunk)*(rowBytes+8)
			return e, nil
		},
		build: func(res *safe.Resources) (*index, error) {
			h, err := o.hostRows(train)
			if err != nil {
				return nil, err
			}
			idx, err := ivfflat.Build(res, h, &p)
			if err != nil {
				return nil, err
			}
			for lo := 0; lo < fit; lo += chunk {
				hi := min(fit, lo+chunk)
				dm, err := safe.DeviceMatrixFrom(res, o.data[lo*o.dim:hi*o.dim], hi-lo, o.dim)
				if err == nil {
					err = idx.Extend(res, dm, nil)
					if cerr := dm.Close(); err == nil {
						err = cerr
					}
				}
				if err != nil {
					_ = idx.Close()
					return nil, fmt.Errorf("extending rows %d..%d: %w", lo, hi, err)
				}
			}
			return &index{close: idx.Close, exact: true, search: func(res *safe.Resources, k int) (*safe.Results, error) {
				return ivfflat.SearchSlice(res, idx, &sp, o.qs, k, nil)
			}}, nil
		},
	})
}

// cagra builds CAGRA-Q on cuVS 26.06 (the graph through IVF-PQ from host
// batches, the rows compressed in the index); on 26.08, whose C API has no
// compression and whose searchable indexes hold the rows padded on the
// device, it shows Build's refusal.
func (o *overcap) cagra() (result, error) {
	p, _ := cagra.DefaultIndexParams()
	p.BuildAlgo = cagra.IVFPQ
	if safe.Release() != "26.06" {
		p.GraphDegree, p.IntermediateGraphDegree = 32, 64
		hm, err := o.hostRows(o.rows)
		if err != nil {
			return result{}, err
		}
		e, eerr := cagra.EstimateMemory(o.shape(o.rows), &p, nil)
		idx, err := cagra.Build(o.res, hm, &p)
		if err == nil {
			_ = idx.Close()
			if int64(o.rows)*int64(o.dim)*4 > o.capBytes {
				return result{}, errors.New("cagra.Build over rows larger than the cap succeeded: docs/MEMORY.md says it cannot")
			}
			r := newResult("cagra", o.rows)
			r.note = "the rows fit the cap: nothing over it to show (-hostrows 0 makes twice the cap)"
			return r, nil
		}
		if eerr != nil {
			fmt.Printf("cagra.EstimateMemory: %v\n", eerr)
		}
		fmt.Printf("cagra.Build (IVF-PQ graph) of the host rows: estimate %.2f GiB peak, index %.2f GiB: %v\n",
			gib(e.BuildPeak), gib(e.Index), errText(err))
		r := newResult("cagra", o.rows)
		r.note = "not possible on cuVS " + safe.Release() + ": no compression in its C API, and a searchable index holds the rows padded on the device (docs/MEMORY.md)"
		if errors.As(err, new(*safe.MemoryError)) {
			r.check = "refused before cuVS"
		}
		return r, nil
	}
	rows := o.rows
	deg, ideg := 32, 64
	// cuVS prunes the kNN graph with all of it on the device
	// (graph_core.cuh, prune_graph_gpu: rows × intermediate degree × 4 bytes)
	ideg = min(ideg, int(float64(o.capBytes)*0.7/float64(int64(rows)*4))/8*8)
	deg = min(deg, ideg)
	if ideg < 8 {
		r := newResult("cagra", rows)
		r.note = fmt.Sprintf("the kNN graph of %d rows does not fit %.2f GiB at any useful degree", rows, gib(o.capBytes))
		return r, nil
	}
	p.GraphDegree, p.IntermediateGraphDegree = deg, ideg
	cp, err := cagra.DefaultCompressionParams()
	if err != nil {
		return result{}, err
	}
	p.Compression = &cp
	sp, _ := cagra.DefaultSearchParams()
	kc := o.c.k * o.c.refineRatio
	sp.ITopKSize = max(128, (kc+31)/32*32)
	return o.run(spec{
		name: "cagra", rows: rows,
		recipe: fmt.Sprintf("cagra.Build on the host rows with BuildAlgo IVFPQ (degree %d, intermediate %d: the kNN graph is pruned whole on the device) and Compression (cuVS's defaults: the index holds VQ+PQ codes, not the rows); SearchSlice with ITopKSize %d for %d×k candidates, refine.Refine against the host rows",
			deg, ideg, sp.ITopKSize, o.c.refineRatio),
		build: func(res *safe.Resources) (*index, error) {
			hm, err := o.hostRows(rows)
			if err != nil {
				return nil, err
			}
			idx, err := cagra.Build(res, hm, &p)
			if err != nil {
				return nil, err
			}
			return &index{close: idx.Close, search: func(res *safe.Resources, k int) (*safe.Results, error) {
				return cagra.SearchSlice(res, idx, &sp, o.qs, k, nil)
			}}, nil
		},
	})
}

// hnswSpec builds an HNSW index (searched on the CPU) through ACE, its
// partitions sized to fit the cap.
func (o *overcap) hnswSpec() spec {
	rowBytes := int64(o.dim) * 4
	p, _ := hnsw.DefaultIndexParams()
	p.M = 16
	ace, _ := hnsw.DefaultACEParams()
	// a partition holds about 2·rows/n rows (each row joins two), copied
	// to the device on 26.08: a quarter of the cap
	n := int64(math.Ceil(float64(8*int64(o.rows)*rowBytes) / float64(o.capBytes)))
	ace.NPartitions = uint64(max(2, min(n, int64(o.rows)/1000)))
	ace.UseDisk, ace.MaxGPUMemoryGB = false, 0
	p.ACE = &ace
	sp, _ := hnsw.DefaultSearchParams()
	sp.Ef = int32(max(200, o.c.k*o.c.refineRatio))
	return spec{
		name: "hnsw-ace", rows: o.rows,
		recipe: fmt.Sprintf("hnsw.Build on the host rows (M %d, ACE with %d partitions in memory, MaxGPUMemoryGB 0, hierarchy %v): the graph is built on the GPU a partition at a time, the index lives in host memory; SearchSlice on the CPU with Ef %d",
			p.M, ace.NPartitions, p.Hierarchy, sp.Ef),
		estimate: func() (safe.MemoryEstimate, error) { return hnsw.EstimateMemory(o.shape(o.rows), &p) },
		build: func(res *safe.Resources) (*index, error) {
			hm, err := o.hostRows(o.rows)
			if err != nil {
				return nil, err
			}
			idx, err := hnsw.Build(res, hm, &p)
			if err != nil {
				return nil, err
			}
			return &index{close: idx.Close, exact: true, search: func(res *safe.Resources, k int) (*safe.Results, error) {
				return hnsw.SearchSlice(res, idx, &sp, o.qs, k, nil)
			}}, nil
		},
	}
}

// phase is a build and its search on Resources of their own: tracked on
// cuVS 26.08 with a pool, sampled with -capby device.
type phase struct {
	res     *safe.Resources
	csv     string
	t0      time.Time
	s       *sampler
	before  int64
	buildUS int64
}

func (o *overcap) begin(tag string, unchecked bool) (*phase, error) {
	var opts []safe.ResourcesOption
	if unchecked {
		opts = append(opts, safe.WithoutMemoryCheck())
	}
	ph := &phase{}
	if o.c.capBy == "pool" && safe.Release() != "26.06" {
		if err := os.MkdirAll(o.c.out, 0o755); err != nil {
			return nil, err
		}
		o.csvN++
		ph.csv = filepath.Join(o.c.out, fmt.Sprintf("overcap-%s-%d.csv", tag, o.csvN))
		opts = append(opts, safe.WithMemoryTracking(ph.csv, time.Millisecond))
	}
	ph.t0 = time.Now() // before the tracking's own clock starts
	res, err := safe.NewResources(opts...)
	if err != nil {
		return nil, err
	}
	ph.res = res
	if o.c.capBy == "device" {
		if ph.before, err = used(res); err != nil {
			res.Close()
			return nil, err
		}
		ph.s = startSampler(res, o.c.sample)
	}
	return ph, nil
}

// built marks the build's end: the pool's size, the sampled peak.
func (ph *phase) built() (pool, sampled int64) {
	ph.buildUS = time.Since(ph.t0).Microseconds()
	pool, sampled = -1, -1
	if m, err := ph.res.DeviceMemory(); err == nil && m.Pool.Enabled && m.Pool.Max > 0 {
		pool = m.Pool.Size
	}
	if ph.s != nil {
		if pk, err := ph.s.finish(); err == nil {
			sampled = max(pk-ph.before, 0)
		}
		ph.s = nil
	}
	return pool, sampled
}

// end closes the Resources and reads the tracked peaks: through the build
// (the samples up to 10 ms after it: a sample is written one interval
// after the allocations it covers, and the search starts 20 ms after the
// build) and through the search.
func (ph *phase) end() (build, all int64) {
	if ph.s != nil {
		_, _ = ph.s.finish()
	}
	ph.res.Close()
	build, all = -1, -1
	if ph.csv == "" {
		return build, all
	}
	if pk, ok, err := trackedPeak(ph.csv, ph.buildUS+10000); err != nil {
		fmt.Printf("tracking CSV %s: %v\n", ph.csv, err)
	} else if ok {
		build = pk
	}
	if pk, ok, err := trackedPeak(ph.csv, -1); err == nil && ok {
		all = pk
	}
	return build, all
}

// run builds s on its own Resources (with the bindings' check; refused by
// it, again without), searches, measures, and computes recall against
// the exact neighbours.
func (o *overcap) run(s spec) (result, error) {
	r := newResult(s.name, s.rows)
	r.possible = true
	fmt.Printf("# recipe: %s\n", s.recipe)
	if s.estimate != nil {
		if e, err := s.estimate(); err != nil {
			fmt.Printf("estimate: %v\n", err)
		} else {
			r.estPeak = e.BuildPeak + e.Dataset
			fmt.Printf("estimate: build peak %.3f GiB (+ %.3f GiB upload), index %.3f GiB\n", gib(e.BuildPeak), gib(e.Dataset), gib(e.Index))
		}
	} else {
		fmt.Println("estimate: none (the package does not estimate this build: Build calls cuVS unchecked)")
	}
	kc := o.c.k * o.c.refineRatio
	var cand *safe.Results
	unchecked := false
	for {
		ph, err := o.begin(s.name, unchecked)
		if err != nil {
			return r, err
		}
		start := time.Now()
		idx, err := s.build(ph.res)
		if err == nil {
			if err = ph.res.Sync(); err != nil {
				_ = idx.close()
			}
		}
		took := time.Since(start)
		var me *safe.MemoryError
		if err != nil && errors.As(err, &me) && !unchecked {
			fmt.Printf("check: refused before cuVS after %.2fs: %v\n", took.Seconds(), err)
			r.check = fmt.Sprintf("refused (needs %.2f GiB of %.2f GiB): built unchecked", gib(me.Need), gib(me.Available))
			ph.end()
			unchecked = true
			continue
		}
		if err != nil {
			ph.end()
			r.note = fmt.Sprintf("build failed after %.1fs: %s", took.Seconds(), errText(err))
			return r, nil
		}
		if r.check == "" {
			r.check = "passed"
		}
		r.buildS = took.Seconds()
		r.poolBuild, r.sampled = ph.built()
		fmt.Printf("build: %.1fs; pool after %s; sampled peak %s\n", r.buildS, gibOr(r.poolBuild), gibOr(r.sampled))
		time.Sleep(20 * time.Millisecond)
		start = time.Now()
		k := o.c.k
		if !idx.exact {
			k = kc
		}
		cand, err = idx.search(ph.res, k)
		if err == nil {
			err = ph.res.Sync()
		}
		if cerr := idx.close(); err == nil {
			err = cerr
		}
		pool := int64(-1)
		if m, merr := ph.res.DeviceMemory(); merr == nil && m.Pool.Enabled && m.Pool.Max > 0 {
			pool = m.Pool.Size
		}
		r.trackBuild, r.trackAll = ph.end()
		if err != nil {
			r.note = "search failed: " + errText(err)
			return r, nil
		}
		fmt.Printf("search: %d queries for %d in %.3fs; pool after %s; tracked peak %s through the build, %s through the search\n",
			len(o.qs)/o.dim, k, time.Since(start).Seconds(), gibOr(pool), gibOr(r.trackBuild), gibOr(r.trackAll))
		break
	}
	start := time.Now()
	exact, err := chunkedExact(o.res, o.data, s.rows, o.dim, o.qs, o.c.k, max(o.capBytes/8, int64(o.dim)*4*int64(o.c.k)))
	if err != nil {
		return r, fmt.Errorf("exact neighbours: %w", err)
	}
	fmt.Printf("exact: brute force over device chunks in %.1fs\n", time.Since(start).Seconds())
	r.recall = recall(firstK(cand, o.c.k), exact, o.c.k)
	if cand.K > o.c.k {
		ref, err := o.refineHost(s.rows, cand)
		if err != nil {
			return r, fmt.Errorf("refine: %w", err)
		}
		r.refinedAt = recall(ref, exact, o.c.k)
	}
	r.ok = true
	return r, nil
}

// firstK is the first k ids of each query's candidates.
func firstK(r *safe.Results, k int) []int64 {
	if r.K == k {
		return r.Neighbors
	}
	out := make([]int64, 0, r.Len()*k)
	for q := 0; q < r.Len(); q++ {
		out = append(out, r.Neighbors[q*r.K:q*r.K+k]...)
	}
	return out
}

// refineHost re-ranks the candidates exactly against the host rows
// (cuvsRefine on the CPU).
func (o *overcap) refineHost(rows int, cand *safe.Results) ([]int64, error) {
	nq, k := cand.Len(), o.c.k
	ds, err := o.hostRows(rows)
	if err != nil {
		return nil, err
	}
	qm, err := dlpack.NewHostMatrix(o.qs, nq, o.dim)
	if err != nil {
		return nil, err
	}
	cm, err := dlpack.NewHostMatrix(cand.Neighbors, nq, cand.K)
	if err != nil {
		return nil, err
	}
	nb, dist := make([]int64, nq*k), make([]float32, nq*k)
	nm, err := dlpack.NewHostMatrix(nb, nq, k)
	if err != nil {
		return nil, err
	}
	dm, err := dlpack.NewHostMatrix(dist, nq, k)
	if err != nil {
		return nil, err
	}
	return nb, refine.Refine(o.res, ds, qm, cm, nm, dm, safe.L2Expanded)
}

func errText(err error) string {
	if err == nil {
		return "built"
	}
	s := err.Error()
	if i := strings.Index(s, "\n"); i >= 0 {
		s = s[:i] // RAFT's stack frames follow
	}
	return s
}

func gibOr(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f GiB", gib(n))
}

func fmtOr(v float64, f string) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf(f, v)
}

// within reports whether every peak measured is within the cap.
func (o *overcap) within(r result) bool {
	if !r.ok {
		return false
	}
	for _, v := range []int64{r.poolBuild, r.trackBuild, r.trackAll, r.sampled} {
		if v > o.capBytes {
			return false
		}
	}
	return true
}

// report prints the run's table row and its RESULT line (key=value, for
// scripts and the tests).
func (o *overcap) report(r result) {
	v, _ := safe.LibraryVersion()
	rowBytes := int64(o.dim) * 4
	fmt.Println("| algorithm | cuVS | rows × dim | host GiB | cap GiB | cap by | estimated peak GiB | pool after build GiB | tracked peak GiB (build / with search) | sampled peak GiB | within cap | build s | recall@k | refined recall@k |")
	fmt.Println("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|")
	fmt.Printf("| %s | %s | %d × %d | %.2f | %.2f | %s | %s | %s | %s / %s | %s | %v | %s | %s | %s |\n",
		r.algo, v, r.rows, o.dim, gib(int64(r.rows)*rowBytes), gib(o.capBytes), o.c.capBy,
		strings.TrimSuffix(gibOr(r.estPeak), " GiB"), strings.TrimSuffix(gibOr(r.poolBuild), " GiB"),
		strings.TrimSuffix(gibOr(r.trackBuild), " GiB"), strings.TrimSuffix(gibOr(r.trackAll), " GiB"),
		strings.TrimSuffix(gibOr(r.sampled), " GiB"), o.within(r), fmtOr(r.buildS, "%.1f"),
		fmtOr(r.recall, "%.4f"), fmtOr(r.refinedAt, "%.4f"))
	if r.note != "" {
		fmt.Printf("note: %s\n", r.note)
	}
	fmt.Printf("RESULT algo=%s release=%s rows=%d dim=%d host_bytes=%d cap=%d capby=%s possible=%v ok=%v within=%v est_peak=%d pool_build=%d tracked_build=%d tracked_all=%d sampled=%d build_s=%.3f recall=%.4f refined=%.4f check=%q\n",
		r.algo, safe.Release(), r.rows, o.dim, int64(r.rows)*rowBytes, o.capBytes, o.c.capBy, r.possible, r.ok, o.within(r),
		r.estPeak, r.poolBuild, r.trackBuild, r.trackAll, r.sampled, r.buildS, r.recall, r.refinedAt, r.check)
}
