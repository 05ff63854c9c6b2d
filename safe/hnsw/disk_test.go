package hnsw_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// What Build's refusal of HierarchyCPU on disk saves: cuVS runs the whole
// ACE build, then refuses to convert the graph it left on disk for the CPU
// hierarchy, with the release's message (26.06 "Disk2disk serialization
// not supported for CPU hierarchy.", 26.08 "Disk serialization ...").
func TestDiskCPUHierarchyRefusedByC(t *testing.T) {
	safetest.Double(t, "cuVS's own refusal, reached past the Go checks")
	safetest.Check(t)
	f := newFixture(t)
	hm := hostMatrix(t, f.data, rows, dim)
	v, err := hm.View()
	must(t, err)
	var ap generated.CuvsHnswAceParams_t
	must(t, generated.CuvsHnswAceParamsCreate(&ap))
	defer generated.CuvsHnswAceParamsDestroy(ap)
	ap.Ref().UseDisk = true
	var pp generated.CuvsHnswIndexParams_t
	must(t, generated.CuvsHnswIndexParamsCreate(&pp))
	cp := *pp.Ref()
	must(t, generated.CuvsHnswIndexParamsDestroy(pp))
	cp.Hierarchy = generated.CuvsHnswHierarchy_CPU
	cp.AceParams = ap
	var h generated.CuvsHnswIndex_t
	must(t, generated.CuvsHnswIndexCreate(&h))
	defer generated.CuvsHnswIndexDestroy(h)
	c := dlpack.Begin("test")
	defer c.End()
	mt, err := c.In(&v)
	must(t, err)
	rh, err := kit.Lock(f.res, "test")
	must(t, err)
	defer kit.Unlock(f.res)
	var pin runtime.Pinner
	err = generated.CuvsHnswBuild(rh, cp.Pin(&pin), mt, h)
	pin.Unpin()
	want := "Disk serialization not supported for CPU hierarchy."
	if generated.Release() == "26.06" {
		want = "Disk2disk serialization not supported for CPU hierarchy."
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("ACE on disk with the CPU hierarchy: %v, want %q", err, want)
	}
}
