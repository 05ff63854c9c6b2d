package ivfsq_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

// Build from Go memory: the index searches like one built from device
// memory and owns its copy (safetest.BuildFromHostLikeDevice).
func TestBuildFromHostLikeDevice(t *testing.T) {
	p, err := ivfsq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.NLists = 8
	safetest.BuildFromHostLikeDevice(t,
		func(res *safe.Resources, ds dlpack.Tensor) (*ivfsq.Index, error) { return ivfsq.Build(res, ds, &p) },
		func(res *safe.Resources, idx *ivfsq.Index, q []float32, k int) (*safe.Results, error) {
			return ivfsq.SearchSlice(res, idx, &ivfsq.SearchParams{NProbes: 8}, q, k, nil)
		})
}
