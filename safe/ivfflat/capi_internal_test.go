package ivfflat

import (
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// What the C functions do beyond their headers, pinned down on whatever
// library runs the tests (the double imitates what cuVS's sources do).

func testIndex(t *testing.T) (*safe.Resources, *safe.DeviceMatrix[float32], *Index) {
	t.Helper()
	res := safetest.Resources(t)
	ds, err := safe.DeviceMatrixFrom(res, safetest.Random(1, 200, 8), 200, 8)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	p, err := DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.NLists = 4
	idx, err := Build(res, ds, &p)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	return res, ds, idx
}

// cuvsIvfFlatBuild copies the dataset's dtype (lanes 1);
// cuvsIvfFlatDeserialize sets code and bits only.
func TestCDeserializeLeavesLanesZero(t *testing.T) {
	safetest.Check(t)
	res, _, idx := testIndex(t)
	if l := idx.c.H.Ref().Dtype.Lanes; l != 1 {
		t.Errorf("built index: lanes %d", l)
	}
	path := filepath.Join(t.TempDir(), "i.bin")
	if err := idx.Serialize(res, path); err != nil {
		t.Fatal(err)
	}
	back, err := Deserialize(res, path)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if d := back.c.H.Ref().Dtype; d.Code != 2 || d.Bits != 32 || d.Lanes != 0 {
		t.Errorf("deserialized dtype {%d %d %d}, want {2 32 0}", d.Code, d.Bits, d.Lanes)
	}
	if back.DType().Lanes != 1 {
		t.Errorf("DType %s: lanes 0 must read as 1", back.DType())
	}
}

// cuvsIvfFlatIndexGetCenters overwrites the tensor with a view into the
// index: a data pointer of its own, a shape it allocated, a deleter.
func TestCGetCentersIsAView(t *testing.T) {
	safetest.Check(t)
	_, _, idx := testIndex(t)
	mt := cDLManaged()
	defer cFree(unsafe.Pointer(mt))
	if err := generated.CuvsIvfFlatIndexGetCenters(idx.c.H, mt); err != nil {
		t.Fatal(err)
	}
	tt := &mt.DlTensor
	if tt.Data == nil || tt.Ndim != 2 || tt.Shape == nil || mt.Deleter == nil {
		t.Fatalf("GetCenters left data %v, ndim %d, shape %v, deleter %v", tt.Data, tt.Ndim, tt.Shape, mt.Deleter)
	}
	shape := unsafe.Slice(tt.Shape, 2)
	if shape[0] != 4 || shape[1] != 8 {
		t.Errorf("shape %v, want [4 8]", shape)
	}
	callDeleter(mt)
}

// cuvsIvfFlatExtend dereferences new_indices: the double records a NULL
// one as a violation (the real library crashes, so this runs on the double
// only).
func TestCExtendNullIDs(t *testing.T) {
	ctl := safetest.Double(t, "a call that crashes the real library")
	safetest.Check(t)
	res, ds, idx := testIndex(t)
	v, _ := ds.View()
	err := kit.CallWith("test", res, []*dlpack.View{&v, nil}, func(h generated.CuvsResources_t, ts []*generated.DLManagedTensor) error {
		return generated.CuvsIvfFlatExtend(h, ts[0], nil, idx.c.H)
	})
	if err == nil {
		t.Fatal("extend with NULL ids succeeded")
	}
	vs := ctl.TakeViolations()
	if len(vs) != 1 || !strings.Contains(vs[0], "NULL new_indices") {
		t.Errorf("violations %v", vs)
	}
}
