package vamana_test

import (
	"errors"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/vamana"
)

// A failing cuvsVamanaIndexParamsDestroy is reported by DefaultIndexParams (a
// *safe.Error naming it). The struct it could not free stays allocated in
// the library, so this test makes no leak check.
func TestDefaultIndexParamsDestroyFails(t *testing.T) {
	ctl := safetest.Double(t, "fault injection")
	ctl.FailNext("cuvsVamanaIndexParamsDestroy", "injected")
	defer ctl.ClearFaults()
	_, err := vamana.DefaultIndexParams()
	var ce *safe.Error
	if !errors.As(err, &ce) || ce.Func != "cuvsVamanaIndexParamsDestroy" {
		t.Errorf("got %v, want the failure of cuvsVamanaIndexParamsDestroy", err)
	}
}
