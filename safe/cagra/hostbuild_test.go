package cagra_test

import (
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// Build from Go memory: the index searches like one built from device
// memory and owns its copy (safetest.BuildFromHostLikeDevice).
func TestBuildFromHostLikeDevice(t *testing.T) {
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = 16, 32
	safetest.BuildFromHostLikeDevice(t,
		func(res *safe.Resources, ds dlpack.Tensor) (*cagra.Index, error) { return cagra.Build(res, ds, &p) },
		func(res *safe.Resources, idx *cagra.Index, q []float32, k int) (*safe.Results, error) {
			return cagra.SearchSlice(res, idx, nil, q, k, nil)
		})
}
