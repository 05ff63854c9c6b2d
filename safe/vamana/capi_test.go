package vamana_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/vamana"
)

// cuvsVamanaIndexGetDims on a handle of no known dtype (a fresh one)
// succeeds and writes nothing (c/src/neighbors/vamana.cpp): the package
// reads it only after a build.
func TestGetDimsOfFreshHandle(t *testing.T) {
	safetest.Check(t)
	var h generated.CuvsVamanaIndex_t
	must(t, generated.CuvsVamanaIndexCreate(&h))
	d := int32(-7)
	must(t, generated.CuvsVamanaIndexGetDims(h, &d))
	if d != -7 {
		t.Errorf("dim %d written", d)
	}
	must(t, generated.CuvsVamanaIndexDestroy(h))
}

// What Build's refusal of a batch of no rows saves: cuVS's batched insert
// would write past its buffers of no rows, then loop forever (the double fails instead and records the misuse; the
// empty index the real code made first leaks, and so it does in the
// double).
func TestNoRowBatchesLoopForever(t *testing.T) {
	ctl := safetest.Double(t, "a build cuVS would never finish")
	res := safetest.Resources(t)
	data := safetest.Random(9, 100, dim)
	dm, err := safe.DeviceMatrixFrom(res, data, 100, dim)
	must(t, err)
	safetest.Close(t, dm)
	v, err := dm.View()
	must(t, err)
	var p generated.CuvsVamanaIndexParams_t
	must(t, generated.CuvsVamanaIndexParamsCreate(&p))
	defer generated.CuvsVamanaIndexParamsDestroy(p)
	p.Ref().MaxFraction = 0.005 // int(0.005 × 100) = 0 rows a batch
	var h generated.CuvsVamanaIndex_t
	must(t, generated.CuvsVamanaIndexCreate(&h))
	defer generated.CuvsVamanaIndexDestroy(h)
	c := dlpack.Begin("test")
	defer c.End()
	mt, err := c.In(&v)
	must(t, err)
	rh, err := kit.Lock(res, "test")
	must(t, err)
	defer kit.Unlock(res)
	if err := generated.CuvsVamanaBuild(rh, p, mt, h); err == nil {
		t.Fatal("a build of batches of no rows succeeded")
	}
	vs := ctl.TakeViolations()
	if len(vs) != 1 || !strings.Contains(vs[0], "loops forever") {
		t.Errorf("violations %q", vs)
	}
}

// What Build's device copy of a host dataset saves: cuVS's host path hands
// the host pointer to its kernels (cudaErrorIllegalAddress; cuVS issue
// #1380). The double fails and records the misuse.
func TestHostDatasetFaults(t *testing.T) {
	ctl := safetest.Double(t, "a build that would kill the CUDA context")
	res := safetest.Resources(t)
	data := safetest.Random(10, 2000, 32)
	hm, err := dlpack.NewHostMatrix(data, 2000, 32)
	must(t, err)
	v, err := hm.View()
	must(t, err)
	var p generated.CuvsVamanaIndexParams_t
	must(t, generated.CuvsVamanaIndexParamsCreate(&p))
	defer generated.CuvsVamanaIndexParamsDestroy(p)
	var h generated.CuvsVamanaIndex_t
	must(t, generated.CuvsVamanaIndexCreate(&h))
	defer generated.CuvsVamanaIndexDestroy(h)
	c := dlpack.Begin("test")
	defer c.End()
	mt, err := c.In(&v)
	must(t, err)
	rh, err := kit.Lock(res, "test")
	must(t, err)
	defer kit.Unlock(res)
	err = generated.CuvsVamanaBuild(rh, p, mt, h)
	if err == nil || !strings.Contains(err.Error(), "cudaErrorIllegalAddress") {
		t.Fatalf("a build over host memory: %v", err)
	}
	vs := ctl.TakeViolations()
	if len(vs) != 1 || !strings.Contains(vs[0], "pageable host memory") {
		t.Errorf("violations %q", vs)
	}
}

// The double builds graphs as cuVS does, repeats included: RobustPrune
// drops a repeat only when it meets it head to head, writes a merge no
// longer than the degree unpruned, and leaves a row's old tail behind a
// shorter result (robust_prune.cuh). Real 2,000-row graphs hold rows such
// as "... 1569 1569 901 901 1620 901".
func TestDoubleRepeatsNeighbours(t *testing.T) {
	safetest.Double(t, "the double's graphs")
	safetest.Check(t)
	res := safetest.Resources(t)
	data := safetest.Random(1, rows, dim)
	ds, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	must(t, err)
	safetest.Close(t, ds)
	idx, err := vamana.Build(res, ds, nil)
	must(t, err)
	safetest.Close(t, idx)
	path := filepath.Join(t.TempDir(), "g")
	must(t, idx.Serialize(res, path, safe.WithoutDataset()))
	g := readGraph(t, path)
	withRepeats := 0
	for _, row := range g.Adjacency {
		seen := map[uint32]bool{}
		for _, id := range row {
			if seen[id] {
				withRepeats++
				break
			}
			seen[id] = true
		}
	}
	t.Logf("%d of %d rows hold a neighbour twice", withRepeats, rows)
	if withRepeats == 0 {
		t.Error("no row holds a repeated neighbour")
	}
}
