package ivfflat_test

import (
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// A dataset in Go memory builds an index that searches exactly like one
// built from device memory (every list probed: exact), and changing the Go
// slice after Build changes nothing.
func TestBuildFromHost(t *testing.T) {
	safetest.Check(t)
	const n, nq, kk = 400, 8, 5
	f := newFixture(t, n, nq, kk)
	p := params(t)
	dev := f.build(t, p)
	data := slices.Clone(f.data)
	hm, err := dlpack.NewHostMatrix(data, n, dim)
	must(t, err)
	host, err := ivfflat.Build(f.res, hm, &p)
	if err != nil {
		t.Fatalf("Build from host memory: %v", err)
	}
	safetest.Close(t, host)
	for i := range data {
		data[i] = -1000 // after Build: must not reach the index
	}
	if host.Rows() != n || host.Dim() != dim || host.NLists() != nLists {
		t.Fatalf("rows %d, dim %d, lists %d", host.Rows(), host.Dim(), host.NLists())
	}
	wn, wd := f.search(t, dev, nLists, nil)
	gn, gd := f.search(t, host, nLists, nil)
	exact := safetest.ExactKNN(f.data, f.qs, dim, kk, safetest.L2, nil)
	for q := range nq {
		for j := range kk {
			i := q*kk + j
			if gn[i] != wn[i] && !safetest.NearlyEqual(gd[i], wd[i]) {
				t.Errorf("query %d: host build %v, device build %v", q, gn[q*kk:(q+1)*kk], wn[q*kk:(q+1)*kk])
				break
			}
		}
		if !slices.Equal(gn[q*kk:(q+1)*kk], exact[q]) {
			t.Errorf("query %d: %v, exact %v", q, gn[q*kk:(q+1)*kk], exact[q])
		}
	}
}
