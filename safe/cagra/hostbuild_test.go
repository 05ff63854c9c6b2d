package cagra_test

import (
	"math"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// Build from Go memory: the index searches like one built from device
// memory (recall against exact neighbours within 0.15 of it: the build is
// approximate), and owns its copy: changing the Go slice after Build
// leaves every result as it was.
func TestBuildFromHostLikeDevice(t *testing.T) {
	safetest.Check(t)
	const n, d, nq, kk = 600, 16, 16, 5
	res := safetest.Resources(t)
	data := safetest.Random(51, n, d)
	queries := safetest.Random(52, nq, d)
	ds, err := safe.DeviceMatrixFrom(res, data, n, d)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, ds)
	p, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.GraphDegree, p.IntermediateGraphDegree = 16, 32
	dev, err := cagra.Build(res, ds, &p)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, dev)
	hostData := slices.Clone(data)
	hm, err := dlpack.NewHostMatrix(hostData, n, d)
	if err != nil {
		t.Fatal(err)
	}
	host, err := cagra.Build(res, hm, &p)
	if err != nil {
		t.Fatalf("Build from host memory: %v", err)
	}
	safetest.Close(t, host)
	if host.Rows() != n || host.Dim() != d {
		t.Fatalf("host build: %d × %d", host.Rows(), host.Dim())
	}
	search := func(idx *cagra.Index) *safe.Results {
		t.Helper()
		r, err := cagra.SearchSlice(res, idx, nil, queries, kk, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	exact := safetest.ExactKNN(data, queries, d, kk, safetest.L2, nil)
	recall := func(r *safe.Results) float64 {
		hit := 0
		for q := range nq {
			ids, _ := r.Row(q)
			for _, w := range exact[q] {
				if slices.Contains(ids, w) {
					hit++
				}
			}
		}
		return float64(hit) / float64(nq*kk)
	}
	before := search(host)
	if rh, rd := recall(before), recall(search(dev)); math.Abs(rh-rd) > 0.15 {
		t.Errorf("recall %.2f from the host build, %.2f from the device build", rh, rd)
	}
	for i := range hostData {
		hostData[i] = -1000 // after Build: must not reach the index
	}
	after := search(host)
	for q := range nq {
		bn, bd := before.Row(q)
		an, ad := after.Row(q)
		if !slices.Equal(bn, an) || !slices.Equal(bd, ad) {
			t.Errorf("query %d after the Go slice changed: %v %v, before %v %v", q, an, ad, bn, bd)
		}
	}
}
