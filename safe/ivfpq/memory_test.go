package ivfpq_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// An index of BuildPrecomputed references the caller's model: it counts in
// DeviceMemory.InUse its own part only (list sizes and pointers), what the
// double holds for it, and nothing after Close.
func TestBuildPrecomputedCounted(t *testing.T) {
	ctl := safetest.Double(t, "the double's device memory accounting")
	f := setup(t)
	p := params(t)
	src := build(t, f.res, f.dataset, p)
	pqc, err := src.PQCenters()
	must(t, err)
	cen, err := src.CentersPadded()
	must(t, err)
	crot, err := src.CentersRot()
	must(t, err)
	rot, err := src.RotationMatrix()
	must(t, err)
	m0, err := f.res.DeviceMemory()
	must(t, err)
	a0 := int64(ctl.DeviceMemory(0).Allocated)
	idx, err := ivfpq.BuildPrecomputed(f.res, &p, dim, pqc, cen, crot, rot)
	must(t, err)
	m1, err := f.res.DeviceMemory()
	must(t, err)
	a, u := int64(ctl.DeviceMemory(0).Allocated)-a0, m1.InUse-m0.InUse
	if a != u || u <= 0 {
		t.Errorf("the precomputed index: the double holds %d bytes, InUse counts %d", a, u)
	}
	must(t, idx.Close())
	m2, err := f.res.DeviceMemory()
	must(t, err)
	if m2.InUse != m0.InUse || int64(ctl.DeviceMemory(0).Allocated) != a0 {
		t.Errorf("after Close: InUse %d (%d before), the double %d (%d before)", m2.InUse, m0.InUse, ctl.DeviceMemory(0).Allocated, a0)
	}
}
