package vamana_test

import (
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
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
// would loop forever (the double fails instead and records the misuse; the
// empty index the real code made first leaks, and so it does in the
// double).
func TestNoRowBatchesLoopForever(t *testing.T) {
	ctl := safetest.Double(t, "a build cuVS would never finish")
	res := safetest.Resources(t)
	data := safetest.Random(9, 100, dim)
	hm, err := dlpack.NewHostMatrix(data, 100, dim)
	must(t, err)
	v, err := hm.View()
	must(t, err)
	var p generated.CuvsVamanaIndexParams_t
	must(t, generated.CuvsVamanaIndexParamsCreate(&p))
	defer generated.CuvsVamanaIndexParamsDestroy(p)
	p.MaxFraction = 0.005 // int(0.005 × 100) = 0 rows a batch
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
