package safe

import (
	"reflect"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
)

// TestParamsMemFits: every params struct of the C API fits a Resources'
// params memory (kit.Params panics on a larger one), with room to spare
// for a release that grows them.
func TestParamsMemFits(t *testing.T) {
	for _, s := range []any{
		generated.CuvsBinaryQuantizerParams{}, generated.CuvsCagraSearchParams{}, generated.CuvsCagraIndexParams{},
		generated.CuvsCagraIndexParams_v2608{}, generated.CuvsHnswExtendParams{}, generated.CuvsHnswIndexParams{},
		generated.CuvsHnswSearchParams{}, generated.CuvsIvfFlatIndexParams{}, generated.CuvsIvfFlatSearchParams{},
		generated.CuvsIvfPqIndexParams{}, generated.CuvsIvfPqSearchParams{}, generated.CuvsIvfSqIndexParams{},
		generated.CuvsIvfSqSearchParams{}, generated.CuvsNNDescentIndexParams{}, generated.CuvsProductQuantizerParams{},
		generated.CuvsScalarQuantizerParams{}, generated.CuvsScalarQuantizer{}, generated.CuvsVamanaIndexParams{},
		generated.CuvsKMeansParams_v2608{}, generated.CuvsTieredIndexParams_v2608{}, generated.CuvsAllNeighborsIndexParams{},
	} {
		if n := reflect.TypeOf(s).Size(); n > paramsBytes/2 {
			t.Errorf("%T: %d bytes, above half the params memory (%d)", s, n, paramsBytes)
		}
	}
}

// TestParamsNeedsLock: the params memory is handed out only to a caller
// holding the Resources for a call.
func TestParamsNeedsLock(t *testing.T) {
	r := &Resources{h: 1, dev: unbound, pmem: 8}
	defer func() {
		if recover() == nil {
			t.Error("params of an unlocked Resources did not panic")
		}
	}()
	r.params(8)
}
