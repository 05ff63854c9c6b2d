package hnsw_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/hnswlibbench"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/hnsw"
)

// searcher is one goroutine's one-query search of an index: its own
// Resources and tensors, reused (no allocation per search).
type searcher struct {
	res    *safe.Resources
	q      []float32
	nb     []int64
	ds     []float32
	qm     *dlpack.HostMatrix[float32]
	nm     *dlpack.HostMatrix[int64]
	dm     *dlpack.HostMatrix[float32]
	dim, k int
	out    safe.Results // SearchSliceInto's
}

func newSearcher(tb testing.TB, d, k int) *searcher {
	tb.Helper()
	res, err := safe.NewResources()
	must(tb, err)
	s := &searcher{res: res, q: make([]float32, d), nb: make([]int64, k), ds: make([]float32, k), dim: d, k: k}
	s.qm, err = dlpack.NewHostMatrix(s.q, 1, d)
	must(tb, err)
	s.nm, _ = dlpack.NewHostMatrix(s.nb, 1, k)
	s.dm, _ = dlpack.NewHostMatrix(s.ds, 1, k)
	return s
}

func (s *searcher) search(idx *hnsw.Index, p *hnsw.SearchParams, query []float32) error {
	copy(s.q, query)
	return idx.Search(s.res, p, s.qm, s.nm, s.dm)
}

// serialResults searches every query alone, one after the other: the
// reference for concurrent searches. hnswlib's search is deterministic for
// a given index, query, k and ef (searchKnn: a greedy descent, then a
// best-first search whose scratch is reset per query; nothing random).
func serialResults(t *testing.T, idx *hnsw.Index, ef int32, qs []float32) ([]int64, []float32) {
	t.Helper()
	s := newSearcher(t, dim, k)
	defer s.res.Close()
	n := len(qs) / dim
	nb, ds := make([]int64, n*k), make([]float32, n*k)
	for i := range n {
		must(t, s.search(idx, &hnsw.SearchParams{Ef: ef, NumThreads: 1}, qs[i*dim:(i+1)*dim]))
		copy(nb[i*k:], s.nb)
		copy(ds[i*k:], s.ds)
	}
	return nb, ds
}

// Concurrent searches of one index, with one ef or with two, give exactly
// the rows and distances of serial ones; the double records a violation
// if two searches with different ef overlap (they would race on hnswlib's
// ef_ in the real library), which safetest.Check reports.
func TestConcurrentSearchesMatchSerial(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	efs := []int32{24, 96}
	wantN := make([][]int64, len(efs))
	wantD := make([][]float32, len(efs))
	for i, ef := range efs {
		wantN[i], wantD[i] = serialResults(t, idx, ef, f.qs)
	}
	if r := recall(wantN[1], f.exact); r < 0.9 {
		t.Errorf("recall %.3f at ef %d", r, efs[1])
	}
	for _, mixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("mixed=%v", mixed), func(t *testing.T) {
			const goroutines, rounds = 16, 3
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := newSearcher(t, dim, k)
					defer s.res.Close()
					e := 1
					if mixed {
						e = g % 2
					}
					for r := range rounds * nq {
						qi := (g*7 + r) % nq
						if mixed && r%5 == 0 {
							e = 1 - e
						}
						if err := s.search(idx, &hnsw.SearchParams{Ef: efs[e], NumThreads: 1}, f.qs[qi*dim:(qi+1)*dim]); err != nil {
							errs <- err
							return
						}
						if !slices.Equal(s.nb, wantN[e][qi*k:(qi+1)*k]) || !slices.Equal(s.ds, wantD[e][qi*k:(qi+1)*k]) {
							errs <- fmt.Errorf("goroutine %d, query %d, ef %d: %v %v, serially %v %v", g, qi, efs[e], s.nb, s.ds, wantN[e][qi*k:(qi+1)*k], wantD[e][qi*k:(qi+1)*k])
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
	// A batch of all queries (spread over OpenMP threads by cuVS) gives the
	// rows of the one-query searches.
	nb, ds := f.search(t, idx, efs[1], f.qs)
	if !slices.Equal(nb, wantN[1]) || !slices.Equal(ds, wantD[1]) {
		t.Error("a batched search differs from one-query searches")
	}
}

// A NaN or an infinity in the queries is refused, naming queries and the
// row, by Search and SearchFiltered, before cuVS answers it (hnswlib
// returned arbitrary rows with NaN distances).
func TestSearchNonFinite(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	words := make([]uint32, (rows+31)/32)
	for i := range rows {
		words[i/32] |= 1 << (i % 32)
	}
	filter, err := safe.NewBitsetFilter(f.res, rows, words)
	must(t, err)
	safetest.Close(t, filter)
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		q := slices.Clone(f.qs[:3*dim])
		q[2*dim+5] = bad
		nb, ds := make([]int64, 3*k), make([]float32, 3*k)
		err := idx.Search(f.res, nil, hostMatrix(t, q, 3, dim), hostMatrix(t, nb, 3, k), hostMatrix(t, ds, 3, k))
		if !isArg(err, "queries") || !strings.Contains(err.Error(), "row 2") {
			t.Errorf("Search of %v: %v (ids %v), want an ArgError naming queries, row 2", bad, err, nb[2*k:])
		}
		for _, fl := range []*safe.Filter{nil, filter} {
			_, err = hnsw.SearchSlice(f.res, idx, nil, q, k, fl)
			if !isArg(err, "queries") || !strings.Contains(err.Error(), "hnsw.SearchSlice") || !strings.Contains(err.Error(), "row 2") {
				t.Errorf("SearchSlice of %v (filter %v): %v, want an ArgError of SearchSlice naming queries, row 2", bad, fl != nil, err)
			}
		}
	}
}

// A missing file is fs.ErrNotExist with its path, before any C call (cuVS
// said "Cannot open file" without the path).
func TestDeserializeMissingFile(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	path := filepath.Join(t.TempDir(), "missing.hnsw")
	_, err := hnsw.Deserialize(res, path, dlpack.Float32, safe.L2Expanded, nil)
	var ce *safe.Error
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) || errors.As(err, &ce) || errors.Is(err, safe.ErrCorruptIndex) {
		t.Fatalf("got %v, want fs.ErrNotExist naming %s, not a cuVS error", err, path)
	}
}

// The file gives the byte size of a vector, not the element type: the
// dimension follows from the dtype passed. float32 bytes read as float16
// hold NaN/Inf patterns and are refused; read as int8 they load as an index
// of four times the dimension (any bytes are valid 8-bit integers), which
// Dim() tells; vectors that are no whole number of elements are refused
// naming the dimensions that fit.
func TestDeserializeDtypeMismatch(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), indexParams(t, hnsw.HierarchyCPU))
	must(t, err)
	safetest.Close(t, idx)
	var buf bytes.Buffer
	_, err = idx.SerializeTo(f.res, &buf)
	must(t, err)
	path := filepath.Join(t.TempDir(), "x.hnsw")
	must(t, os.WriteFile(path, buf.Bytes(), 0o600))
	cpu := indexParams(t, hnsw.HierarchyCPU)
	back, err := hnsw.Deserialize(f.res, path, dlpack.Float32, safe.L2Expanded, cpu)
	must(t, err)
	safetest.Close(t, back)
	if back.Dim() != dim || back.DType() != dlpack.Float32 {
		t.Errorf("float32: %s × %d, want float32 × %d", back.DType(), back.Dim(), dim)
	}
	as8, err := hnsw.Deserialize(f.res, path, dlpack.Int8, safe.L2Expanded, cpu)
	must(t, err)
	safetest.Close(t, as8)
	if as8.Dim() != 4*dim {
		t.Errorf("int8: dimension %d, want %d (the vector's bytes)", as8.Dim(), 4*dim)
	}
	_, err = hnsw.Deserialize(f.res, path, dlpack.Float16, safe.L2Expanded, cpu)
	if !errors.Is(err, safe.ErrCorruptIndex) || !strings.Contains(err.Error(), "wrong dtype") {
		t.Errorf("float16: %v, want ErrCorruptIndex (NaN/Inf patterns)", err)
	}
	// vectors of 4*dim+2 bytes (in hnswlib's bytes: the stream's checksum
	// would refuse the edit first)
	b := bytes.Clone(safetest.CuVSBytes(buf.Bytes()))
	for _, off := range []int{24, 32} { // size_data_per_element, label_offset
		binary.LittleEndian.PutUint64(b[off:], binary.LittleEndian.Uint64(b[off:])+2)
	}
	odd := filepath.Join(t.TempDir(), "odd.hnsw")
	must(t, os.WriteFile(odd, b, 0o600))
	_, err = hnsw.Deserialize(f.res, odd, dlpack.Float32, safe.L2Expanded, cpu)
	if !errors.Is(err, safe.ErrCorruptIndex) || !strings.Contains(err.Error(), "33 of float16, 66 of int8") {
		t.Errorf("66-byte vectors as float32: %v, want ErrCorruptIndex naming the dims that fit", err)
	}
}

// cpuSeconds is the process's CPU time so far (user and system).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// The benchmark's environment (internal/hnswlibbench/run.sh sets it on a
// GPU machine).
const (
	benchShapeEnv = "CUVS_HNSW_BENCH"   // ROWSxDIM, default 10000x32
	benchGEnv     = "CUVS_HNSW_BENCH_G" // goroutine counts, default 1,8,32
	// benchDirEnv names a folder for the files internal/hnswlibbench's
	// hnswlib-serve reads: index.hnsw (the index, Serialize's),
	// queries.fbin, and go.i64bin (the ids of SearchSlice over every query
	// once, at the benchmark's ef and k).
	benchDirEnv = "CUVS_HNSW_BENCH_DIR"
)

// benchConfig reads the benchmark's environment.
func benchConfig(b *testing.B) (rows, dim int, gs []int) {
	rows, dim, gs = 10000, 32, []int{1, 8, 32}
	if v := os.Getenv(benchShapeEnv); v != "" {
		r, d, ok := strings.Cut(v, "x")
		var err1, err2 error
		rows, err1 = strconv.Atoi(r)
		dim, err2 = strconv.Atoi(d)
		if !ok || err1 != nil || err2 != nil || rows < 100 || dim < 1 {
			b.Fatalf("$%s=%q, want ROWSxDIM (at least 100 rows)", benchShapeEnv, v)
		}
	}
	if v := os.Getenv(benchGEnv); v != "" {
		gs = nil
		for _, f := range strings.Split(v, ",") {
			g, err := strconv.Atoi(f)
			if err != nil || g < 1 {
				b.Fatalf("$%s=%q, want goroutine counts such as 1,8,16,32", benchGEnv, v)
			}
			gs = append(gs, g)
		}
	}
	return rows, dim, gs
}

// BenchmarkServe measures one-query searches of one index (built on the
// GPU by ACE, CPU hierarchy, M 16) from 1, 8 and 32 goroutines (each with
// its own Resources, ef 64, k 10, NumThreads 1), four ways: serial (a lock
// around every search: the package's behaviour before searches with one
// ef could overlap), pool (4 deserialized copies of the index, one search
// at a time per copy), shared (one index, Index.Search of reused tensors
// overlapping through the package's ef gate) and slice (shared, through
// SearchSliceInto of Go slices). It reports queries per second, the CPUs
// the process kept busy (CPU time / wall time) and the searches in flight
// on average (time inside Search, summed, / wall time). On the test
// double the search is the double's own CPU code. $CUVS_HNSW_BENCH (rows
// x dim), $CUVS_HNSW_BENCH_G (goroutine counts) and $CUVS_HNSW_BENCH_DIR
// (files for hnswlib's own search, internal/hnswlibbench) change it.
func BenchmarkServe(b *testing.B) {
	const bK, copies = 10, 4
	bRows, bDim, gs := benchConfig(b)
	res, err := safe.NewResources()
	must(b, err)
	defer res.Close()
	data := safetest.Random(1, bRows, bDim)
	qs := safetest.Random(2, 1000, bDim)
	p, err := hnsw.DefaultIndexParams()
	must(b, err)
	p.Hierarchy, p.M, p.EfConstruction = hnsw.HierarchyCPU, 16, 64
	m, err := dlpack.NewHostMatrix(data, bRows, bDim)
	must(b, err)
	t0 := time.Now()
	idx, err := hnsw.Build(res, m, &p)
	must(b, err)
	defer idx.Close()
	b.Logf("hnsw.Build of %d x %d: %v", bRows, bDim, time.Since(t0))
	var file bytes.Buffer
	_, err = idx.SerializeTo(res, &file)
	must(b, err)
	pool := make([]*hnsw.Index, copies)
	for i := range pool {
		pool[i], err = hnsw.DeserializeFrom(res, bytes.NewReader(file.Bytes()), dlpack.Float32, safe.L2Expanded, &p)
		must(b, err)
		defer pool[i].Close()
	}
	sp := &hnsw.SearchParams{Ef: 64, NumThreads: 1}
	if dir := os.Getenv(benchDirEnv); dir != "" {
		must(b, os.MkdirAll(dir, 0o755))
		// Serialize's file: hnswlib's bytes alone (the checksum in a
		// sidecar); SerializeTo's stream carries it after them, which
		// hnswlib's loadIndex refuses ("Index seems to be corrupted")
		must(b, idx.Serialize(res, filepath.Join(dir, "index.hnsw")))
		must(b, hnswlibbench.WriteQueries(filepath.Join(dir, "queries.fbin"), qs, bDim))
		r, err := hnsw.SearchSlice(res, idx, sp, qs, bK, nil)
		must(b, err)
		must(b, hnswlibbench.WriteIDs(filepath.Join(dir, "go.i64bin"), r.Neighbors, bK))
		b.Logf("wrote index.hnsw, queries.fbin and go.i64bin (ef %d, k %d) to %s", sp.Ef, bK, dir)
	}
	for _, g := range gs {
		for _, mode := range []string{"serial", "pool", "shared", "slice"} {
			b.Run(fmt.Sprintf("%s/g=%d", mode, g), func(b *testing.B) {
				var one sync.Mutex
				locks := make([]sync.Mutex, copies)
				ss := make([]*searcher, g)
				for i := range ss {
					ss[i] = newSearcher(b, bDim, bK)
					defer ss[i].res.Close()
				}
				var next, busy atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start, cpu0 := time.Now(), cpuSeconds()
				for i, s := range ss {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							n := next.Add(1) - 1
							if n >= int64(b.N) {
								return
							}
							qi := int(n % 1000)
							q := qs[qi*bDim : (qi+1)*bDim]
							timed := func(x *hnsw.Index) error {
								t0 := time.Now()
								err := s.search(x, sp, q)
								busy.Add(int64(time.Since(t0)))
								return err
							}
							var err error
							switch mode {
							case "serial":
								one.Lock()
								err = timed(idx)
								one.Unlock()
							case "pool":
								c := i % copies
								locks[c].Lock()
								err = timed(pool[c])
								locks[c].Unlock()
							case "slice":
								t0 := time.Now()
								err = hnsw.SearchSliceInto(s.res, idx, sp, q, bK, nil, &s.out)
								busy.Add(int64(time.Since(t0)))
							default:
								err = timed(idx)
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				wall := time.Since(start).Seconds()
				b.ReportMetric(float64(b.N)/wall, "qps")
				b.ReportMetric((cpuSeconds()-cpu0)/wall, "cpus")
				b.ReportMetric(time.Duration(busy.Load()).Seconds()/wall, "inflight")
			})
		}
	}
}
