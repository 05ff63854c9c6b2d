package nndescent_test

import (
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/safetest"
)

// Why newIndex sets the handle's dtype: cuvsNNDescentIndexDestroy frees
// only a handle of dtype uint32 (what cuvsNNDescentBuild writes first), and
// a fresh handle's dtype is zero. Destroying one fails (and, in cuVS,
// leaks it: the double keeps it too); with the dtype set it succeeds. From
// c/src/neighbors/nn_descent.cpp, the same in v26.06.00 and v26.08.01.
func TestDestroyNeedsDtype(t *testing.T) {
	var h generated.CuvsNNDescentIndex_t
	must(t, generated.CuvsNNDescentIndexCreate(&h))
	err := generated.CuvsNNDescentIndexDestroy(h)
	if err == nil || !strings.Contains(err.Error(), "Unsupported nn-descent index dtype") {
		t.Fatalf("destroying a fresh handle: %v", err)
	}
	h.Ref().Dtype = generated.DLDataType{Code: uint8(generated.DLDataTypeCode_kDLUInt), Bits: 32, Lanes: 1}
	must(t, generated.CuvsNNDescentIndexDestroy(h))
	if c := safetest.Control(); c != nil {
		// the first handle is freed now: nothing left
		if n := c.Counters()["nn_descent_index"].Live(); n != 0 {
			t.Errorf("%d handles live", n)
		}
	}
}
