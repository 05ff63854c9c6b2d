package refine_test

import (
	"errors"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/refine"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const (
	rows = 500
	dim  = 12
	nq   = 20
	nc   = 40 // candidates per query
	k    = 8
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// candidates: nc distinct random rows per query.
func candidates() []int64 {
	r := rand.New(rand.NewPCG(7, 8))
	ids := make([]int64, 0, nq*nc)
	for q := 0; q < nq; q++ {
		for _, v := range r.Perm(rows)[:nc] {
			ids = append(ids, int64(v))
		}
	}
	return ids
}

// expected re-ranks in Go: the k best of each row's candidates by dist,
// ties to the smaller id.
func expected(data, qs []float32, cand []int64, dist safetest.Metric) ([]int64, []float32) {
	nb := make([]int64, 0, nq*k)
	ds := make([]float32, 0, nq*k)
	for q := 0; q < nq; q++ {
		type c struct {
			id int64
			d  float32
		}
		cs := make([]c, nc)
		for j := range cs {
			id := cand[q*nc+j]
			cs[j] = c{id, dist(qs[q*dim:(q+1)*dim], data[id*dim:(id+1)*dim])}
		}
		sort.Slice(cs, func(a, b int) bool {
			if cs[a].d != cs[b].d {
				return cs[a].d < cs[b].d
			}
			return cs[a].id < cs[b].id
		})
		for j := 0; j < k; j++ {
			nb = append(nb, cs[j].id)
			ds = append(ds, cs[j].d)
		}
	}
	return nb, ds
}

func compare(t *testing.T, nb []int64, ds []float32, wantN []int64, wantD []float32, negate bool) {
	t.Helper()
	for i := range wantN {
		d := wantD[i]
		if negate {
			d = -d
		}
		if nb[i] != wantN[i] || !safetest.NearlyEqual(ds[i], d) {
			t.Fatalf("slot %d: %d at %g, want %d at %g", i, nb[i], ds[i], wantN[i], d)
		}
	}
}

func TestRefineDevice(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data, qs, cand := safetest.Random(1, rows, dim), safetest.Random(2, nq, dim), candidates()
	dd, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	must(t, err)
	safetest.Close(t, dd)
	dq, err := safe.DeviceMatrixFrom(res, qs, nq, dim)
	must(t, err)
	safetest.Close(t, dq)
	dc, err := safe.DeviceMatrixFrom(res, cand, nq, nc)
	must(t, err)
	safetest.Close(t, dc)
	dn, err := safe.NewDeviceMatrix[int64](res, nq, k)
	must(t, err)
	safetest.Close(t, dn)
	dist, err := safe.NewDeviceMatrix[float32](res, nq, k)
	must(t, err)
	safetest.Close(t, dist)
	for _, c := range []struct {
		metric safe.Metric
		dist   safetest.Metric
		negate bool
	}{{safe.L2Expanded, safetest.L2, false}, {safe.InnerProduct, safetest.NegInner, true}} {
		t.Run(c.metric.String(), func(t *testing.T) {
			must(t, refine.Refine(res, dd, dq, dc, dn, dist, c.metric))
			nb, err := dn.ToHost(res)
			must(t, err)
			ds, err := dist.ToHost(res)
			must(t, err)
			wn, wd := expected(data, qs, cand, c.dist)
			compare(t, nb, ds, wn, wd, c.negate)
		})
	}
}

func TestRefineHost(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data, qs, cand := safetest.Random(1, rows, dim), safetest.Random(2, nq, dim), candidates()
	hd, _ := dlpack.NewHostMatrix(data, rows, dim)
	hq, _ := dlpack.NewHostMatrix(qs, nq, dim)
	hc, _ := dlpack.NewHostMatrix(cand, nq, nc)
	nb := make([]int64, nq*k)
	ds := make([]float32, nq*k)
	hn, _ := dlpack.NewHostMatrix(nb, nq, k)
	hdist, _ := dlpack.NewHostMatrix(ds, nq, k)
	must(t, refine.Refine(res, hd, hq, hc, hn, hdist, safe.L2Expanded))
	wn, wd := expected(data, qs, cand, safetest.L2)
	compare(t, nb, ds, wn, wd, false)
	must(t, refine.Refine(res, hd, hq, hc, hn, hdist, safe.InnerProduct))
	wn, wd = expected(data, qs, cand, safetest.NegInner)
	compare(t, nb, ds, wn, wd, true)
}

func TestRefineFault(t *testing.T) {
	ctl := safetest.Double(t, "fault injection")
	safetest.Check(t)
	res := safetest.Resources(t)
	hd, _ := dlpack.NewHostMatrix(safetest.Random(1, rows, dim), rows, dim)
	hq, _ := dlpack.NewHostMatrix(safetest.Random(2, nq, dim), nq, dim)
	hc, _ := dlpack.NewHostMatrix(candidates(), nq, nc)
	hn, _ := dlpack.NewHostMatrix(make([]int64, nq*k), nq, k)
	hdist, _ := dlpack.NewHostMatrix(make([]float32, nq*k), nq, k)
	ctl.FailNext("cuvsRefine", "injected")
	var ce *safe.Error
	if err := refine.Refine(res, hd, hq, hc, hn, hdist, safe.L2Expanded); !errors.As(err, &ce) || ce.Func != "cuvsRefine" {
		t.Fatalf("got %v, want cuvsRefine's failure", err)
	}
}

func TestBadInput(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data, qs, cand := safetest.Random(1, rows, dim), safetest.Random(2, nq, dim), candidates()
	hd, _ := dlpack.NewHostMatrix(data, rows, dim)
	hq, _ := dlpack.NewHostMatrix(qs, nq, dim)
	hq8, _ := dlpack.NewHostMatrix(make([]uint8, nq*dim), nq, dim)
	hqNarrow, _ := dlpack.NewHostMatrix(qs[:nq*(dim-1)], nq, dim-1)
	hc, _ := dlpack.NewHostMatrix(cand, nq, nc)
	hc32, _ := dlpack.NewHostMatrix(make([]int32, nq*nc), nq, nc)
	hn, _ := dlpack.NewHostMatrix(make([]int64, nq*k), nq, k)
	hnWide, _ := dlpack.NewHostMatrix(make([]int64, nq*(nc+1)), nq, nc+1)
	hdWide, _ := dlpack.NewHostMatrix(make([]float32, nq*(nc+1)), nq, nc+1)
	hdist, _ := dlpack.NewHostMatrix(make([]float32, nq*k), nq, k)
	dn, err := safe.NewDeviceMatrix[int64](res, nq, k)
	must(t, err)
	safetest.Close(t, dn)
	cases := []struct {
		name    string
		d, q, c dlpack.Tensor
		n, dist dlpack.TensorMut
		metric  safe.Metric
	}{
		{"nil", nil, hq, hc, hn, hdist, safe.L2Expanded},
		{"mixed memory", hd, hq, hc, dn, hdist, safe.L2Expanded},
		{"dtype mismatch", hd, hq8, hc, hn, hdist, safe.L2Expanded},
		{"dim mismatch", hd, hqNarrow, hc, hn, hdist, safe.L2Expanded},
		{"int32 candidates", hd, hq, hc32, hn, hdist, safe.L2Expanded},
		{"k past candidates", hd, hq, hc, hnWide, hdWide, safe.L2Expanded},
		{"cosine on the host", hd, hq, hc, hn, hdist, safe.CosineExpanded},
		{"L1", hd, hq, hc, hn, hdist, safe.L1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := refine.Refine(res, c.d, c.q, c.c, c.n, c.dist, c.metric); !errors.Is(err, safe.ErrInvalidArgument) {
				t.Fatalf("got %v, want an invalid-argument error", err)
			}
		})
	}
}
