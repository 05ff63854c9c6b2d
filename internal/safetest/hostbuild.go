package safetest

import (
	"math"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
)

// HostIndex is what BuildFromHostLikeDevice needs of an index.
type HostIndex interface {
	Rows() int
	Dim() int
	Close() error
}

// BuildFromHostLikeDevice checks that an index built from Go memory
// searches like one built from device memory (recall against exact
// neighbours within 0.15 of it: the build is approximate) and owns its
// copy: changing the Go slice after Build leaves every result as it was.
// build builds from either tensor; search searches queries for k
// neighbours.
func BuildFromHostLikeDevice[I HostIndex](t *testing.T, build func(res *safe.Resources, dataset dlpack.Tensor) (I, error), search func(res *safe.Resources, idx I, queries []float32, k int) (*safe.Results, error)) {
	t.Helper()
	Check(t)
	const n, d, nq, kk = 600, 16, 16, 5
	res := Resources(t)
	data := Random(51, n, d)
	queries := Random(52, nq, d)
	ds, err := safe.DeviceMatrixFrom(res, data, n, d)
	if err != nil {
		t.Fatal(err)
	}
	Close(t, ds)
	dev, err := build(res, ds)
	if err != nil {
		t.Fatal(err)
	}
	Close(t, dev)
	hostData := slices.Clone(data)
	hm, err := dlpack.NewHostMatrix(hostData, n, d)
	if err != nil {
		t.Fatal(err)
	}
	host, err := build(res, hm)
	if err != nil {
		t.Fatalf("Build from host memory: %v", err)
	}
	Close(t, host)
	if host.Rows() != n || host.Dim() != d {
		t.Fatalf("host build: %d × %d", host.Rows(), host.Dim())
	}
	run := func(idx I) *safe.Results {
		t.Helper()
		r, err := search(res, idx, queries, kk)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	exact := ExactKNN(data, queries, d, kk, L2, nil)
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
	before := run(host)
	if rh, rd := recall(before), recall(run(dev)); math.Abs(rh-rd) > 0.15 {
		t.Errorf("recall %.2f from the host build, %.2f from the device build", rh, rd)
	}
	for i := range hostData {
		hostData[i] = -1000 // after Build: must not reach the index
	}
	after := run(host)
	for q := range nq {
		bn, bd := before.Row(q)
		an, ad := after.Row(q)
		if !slices.Equal(bn, an) || !slices.Equal(bd, ad) {
			t.Errorf("query %d after the Go slice changed: %v %v, before %v %v", q, an, ad, bn, bd)
		}
	}
}
