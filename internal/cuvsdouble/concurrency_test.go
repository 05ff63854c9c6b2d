package cuvsdouble_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble/internal/capi"
)

// Many goroutines, each with its own resources, search one shared brute-force
// index and one shared CAGRA index.
func TestConcurrentSearches(t *testing.T) {
	c := newCagra(t)
	defer c.closeAll()
	const n, dim, nq, k, workers, rounds = 64, 8, 4, 5, 8, 20
	rng := newRand()
	data := randomMatrix(rng, n, dim)
	queries := randomMatrix(rng, nq, dim)
	ds := c.f32(capi.CUDA, capi.CUDA, n, dim, data)
	defer c.drop(ds)
	c.setDegrees(16, 8)
	idx := capi.Must(c.lib.CagraCreate())
	defer func() { c.must(c.lib.CagraDestroy(idx)) }() // before ds goes
	c.must(c.lib.CagraBuild(c.res, c.params, ds.t, idx))
	bf := capi.Must(c.lib.BFCreate())
	defer func() { c.must(c.lib.BFDestroy(bf)) }()
	c.must(c.lib.BFBuild(c.res, ds.t, capi.L2Expanded, 0, bf))
	wantI, wantD := exactKNN(data, n, dim, queries, k, capi.L2Expanded, nil, false)

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				res, err := c.lib.ResourcesCreate(false)
				if err != nil {
					return err
				}
				defer c.lib.ResourcesDestroy(res, false)
				qp, err := c.lib.RMMAlloc(res, nq*dim*4)
				if err != nil {
					return err
				}
				defer c.lib.RMMFree(res, qp, nq*dim*4)
				capi.CopyIn(qp, queries)
				nbp, _ := c.lib.RMMAlloc(res, nq*k*8)
				defer c.lib.RMMFree(res, nbp, nq*k*8)
				dp, _ := c.lib.RMMAlloc(res, nq*k*4)
				defer c.lib.RMMFree(res, dp, nq*k*4)
				qt := capi.NewTensor(qp, capi.CUDA, capi.Float, 32, nq, dim)
				defer qt.Free()
				nbt := capi.NewTensor(nbp, capi.CUDA, capi.Int, 64, nq, k)
				defer nbt.Free()
				dt := capi.NewTensor(dp, capi.CUDA, capi.Float, 32, nq, k)
				defer dt.Free()
				for r := 0; r < rounds; r++ {
					if r%2 == 0 {
						err = c.lib.CagraSearch(res, c.search, idx, qt, nbt, dt, capi.Filter{})
					} else {
						err = c.lib.BFSearch(res, bf, qt, nbt, dt, capi.Filter{})
					}
					if err != nil {
						return err
					}
					if err := c.lib.StreamSync(res); err != nil {
						return err
					}
					ids := capi.CopyOut[int64](nbp, nq*k)
					for qq := 0; qq < nq; qq++ {
						for j := 0; j < k; j++ {
							if ids[qq*k+j] != wantI[qq][j] {
								return &capi.Error{Func: "result", Text: "wrong neighbours"}
							}
						}
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	_ = wantD
}

// One cuvsResources_t used from two threads at once is a violation.
func TestSharedResourcesDetected(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	f.ctl.SetCallDelay(20 * time.Millisecond)
	for try := 0; try < 10 && f.ctl.ViolationCount() == 0; try++ {
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.lib.StreamSync(f.res)
			}()
		}
		wg.Wait()
	}
	f.ctl.SetCallDelay(0)
	f.expectViolations("used by two threads at the same time")
}

// Strict device mode refuses host memory labelled as device memory.
func TestStrictDevice(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	f.ctl.SetStrictDevice(true)
	defer f.ctl.SetStrictDevice(false)
	data := randomMatrix(newRand(), 8, 4)
	fake := f.f32(capi.CPU, capi.CUDA, 8, 4, data) // malloc'd, labelled kDLCUDA
	defer f.drop(fake)
	dev := f.f32(capi.CUDA, capi.CUDA, 8, 4, data)
	defer f.drop(dev)
	idx := capi.Must(f.lib.BFCreate())
	defer func() { f.must(f.lib.BFDestroy(idx)) }()
	err := f.lib.BFBuild(f.res, fake.t, capi.L2Expanded, 0, idx)
	if err == nil || !strings.Contains(err.Error(), "strict device mode") {
		t.Fatalf("got %v", err)
	}
	f.must(f.lib.BFBuild(f.res, dev.t, capi.L2Expanded, 0, idx))
	// a tensor running past the end of its allocation
	over := capi.NewTensor(dev.b.p, capi.CUDA, capi.Float, 32, 9, 4)
	defer over.Free()
	nb := f.zeros(capi.CUDA, capi.CUDA, capi.Int, 64, 9, 2)
	defer f.drop(nb)
	d := f.zeros(capi.CUDA, capi.CUDA, capi.Float, 32, 9, 2)
	defer f.drop(d)
	if err := f.lib.BFSearch(f.res, idx, over, nb.t, d.t, capi.Filter{}); err == nil || !strings.Contains(err.Error(), "strict device mode") {
		t.Fatalf("got %v", err)
	}
}

// The double compiles against cuVS's own headers too: a check that its
// signatures are the real ones. Set CUVSDOUBLE_REAL_HEADERS to cuVS's
// c/include and DLPack's include directories to run it (and
// CUVSDOUBLE_RELEASE to the release of those headers, 26.06 by default).
func TestBuildAgainstRealHeaders(t *testing.T) {
	env := os.Getenv(cuvsdouble.RealHeadersEnv)
	if env == "" {
		t.Skip("set " + cuvsdouble.RealHeadersEnv + " to cuVS's and DLPack's include directories")
	}
	f := newFixture(t, cuvsdouble.RealHeaders(filepath.SplitList(env)...))
	defer f.close()
	g := newFixture(t) // the same release against the generated declarations
	defer g.close()
	if got, want := f.ctl.Functions(), g.ctl.Functions(); !slices.Equal(got, want) {
		t.Fatalf("functions %v, want %v", got, want)
	}
}
