package ivfpq_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// Build from Go memory: the index searches like one built from device
// memory and owns its copy (safetest.BuildFromHostLikeDevice).
func TestBuildFromHostLikeDevice(t *testing.T) {
	p, err := ivfpq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.NLists, p.PQDim, p.PQBits = 8, 8, 8
	safetest.BuildFromHostLikeDevice(t,
		func(res *safe.Resources, ds dlpack.Tensor) (*ivfpq.Index, error) { return ivfpq.Build(res, ds, &p) },
		func(res *safe.Resources, idx *ivfpq.Index, q []float32, k int) (*safe.Results, error) {
			return ivfpq.SearchSlice(res, idx, &ivfpq.SearchParams{NProbes: 8}, q, k)
		})
}
