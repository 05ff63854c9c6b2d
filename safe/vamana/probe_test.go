package vamana_test

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/vamana"
)

// probeCase is one build for TestProbe: raw calls cuvsVamanaBuild directly
// (no Go checks, no device copy of a host dataset), otherwise vamana.Build.
type probeCase struct {
	rows, dim int
	host      bool // the rows in Go memory (kDLCPU), else device memory
	raw       bool
	set       func(p *generated.CuvsVamanaIndexParams)
}

var probeCases = map[string]probeCase{
	// The evidence: defaults over 2,000 × 32 host rows, straight to C.
	"raw-host-defaults": {rows: 2000, dim: 32, host: true, raw: true},
	// The same rows in device memory, straight to C.
	"raw-device-defaults": {rows: 2000, dim: 32, raw: true},
	// Small host datasets straight to C: does the fault need many rows?
	"raw-host-small": {rows: 500, dim: 16, host: true, raw: true},
	// Through Build (which copies host rows to the device first).
	"go-host-defaults":   {rows: 2000, dim: 32, host: true},
	"go-device-defaults": {rows: 2000, dim: 32},
	// Past the search kernel's 48 KiB of shared memory (Build refuses it):
	// a launch error, or worse?
	"raw-device-queue-3071": {rows: 2000, dim: 32, raw: true, set: func(p *generated.CuvsVamanaIndexParams) { p.QueueSize = 3071 }},
	// visited_size above the largest sort size for degree 32 (Build
	// refuses it): SortPairsKernel then runs with no shared memory.
	"raw-device-visited-1024": {rows: 2000, dim: 32, raw: true, set: func(p *generated.CuvsVamanaIndexParams) { p.VisitedSize = 1024 }},
	// A visited_size that is not a power of two (cuVS rounds it up).
	"raw-device-visited-100": {rows: 2000, dim: 32, raw: true, set: func(p *generated.CuvsVamanaIndexParams) { p.VisitedSize = 100 }},
	// Degree 64 and 256 on few rows.
	"raw-device-degree-64":  {rows: 200, dim: 16, raw: true, set: func(p *generated.CuvsVamanaIndexParams) { p.GraphDegree, p.VisitedSize = 64, 128 }},
	"raw-device-degree-256": {rows: 300, dim: 16, raw: true, set: func(p *generated.CuvsVamanaIndexParams) { p.GraphDegree, p.VisitedSize = 256, 512 }},
}

// TestProbe runs one probeCase on the loaded library and prints what
// happened: the build's error and whether the process's CUDA context still
// copies memory afterwards. An illegal address kills the context for the
// rest of the process, so one case per process: CUVS_GO_PROBE=1
// CUVS_GO_PROBE_CASE=<name> go test -run '^TestProbe$' -v ./safe/vamana/
// (with CUVS_TEST_LIBRARY pointing at a real libcuvs_c). Skipped unless
// CUVS_GO_PROBE=1.
func TestProbe(t *testing.T) {
	if os.Getenv("CUVS_GO_PROBE") != "1" {
		t.Skip("a probe of the real library: set CUVS_GO_PROBE=1 and CUVS_GO_PROBE_CASE")
	}
	name := os.Getenv("CUVS_GO_PROBE_CASE")
	c, ok := probeCases[name]
	if !ok {
		var names []string
		for n := range probeCases {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Fatalf("CUVS_GO_PROBE_CASE=%q, want one of %s", name, strings.Join(names, ", "))
	}
	res, err := safe.NewResources()
	must(t, err)
	defer res.Close()
	data := safetest.Random(21, c.rows, c.dim)
	var ds dlpack.Tensor
	if c.host {
		hm, err := dlpack.NewHostMatrix(data, c.rows, c.dim)
		must(t, err)
		ds = hm
	} else {
		dm, err := safe.DeviceMatrixFrom(res, data, c.rows, c.dim)
		must(t, err)
		defer dm.Close()
		ds = dm
	}
	var buildErr error
	if c.raw {
		buildErr = rawBuild(t, res, ds, c.set)
	} else {
		idx, err := vamana.Build(res, ds, nil)
		buildErr = err
		if err == nil {
			defer idx.Close()
		}
	}
	fmt.Printf("probe %s: build: %v\n", name, buildErr)
	m, err := safe.DeviceMatrixFrom(res, []float32{1, 2, 3, 4}, 2, 2)
	if err == nil {
		var back []float32
		back, err = m.ToHost(res)
		if err == nil && back[3] != 4 {
			err = fmt.Errorf("read back %v", back)
		}
		_ = m.Close()
	}
	fmt.Printf("probe %s: CUDA context afterwards: %v\n", name, err)
}

// rawBuild calls cuvsVamanaBuild with cuVS's defaults changed by set, and
// destroys what it made.
func rawBuild(t *testing.T, res *safe.Resources, ds dlpack.Tensor, set func(p *generated.CuvsVamanaIndexParams)) error {
	v, err := ds.View()
	must(t, err)
	var p generated.CuvsVamanaIndexParams_t
	must(t, generated.CuvsVamanaIndexParamsCreate(&p))
	defer generated.CuvsVamanaIndexParamsDestroy(p)
	if set != nil {
		set(p.Ref())
	}
	var h generated.CuvsVamanaIndex_t
	must(t, generated.CuvsVamanaIndexCreate(&h))
	defer generated.CuvsVamanaIndexDestroy(h)
	c := dlpack.Begin("probe")
	defer c.End()
	mt, err := c.In(&v)
	must(t, err)
	rh, err := kit.Lock(res, "probe")
	must(t, err)
	defer kit.Unlock(res)
	if err := generated.CuvsVamanaBuild(rh, p, mt, h); err != nil {
		return err
	}
	return generated.CuvsStreamSync(rh)
}
