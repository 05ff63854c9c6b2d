package closedtest

import (
	"reflect"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/hnsw"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
	"github.com/cuvs-go/cuvs/safe/nndescent"
	"github.com/cuvs-go/cuvs/safe/tiered"
	"github.com/cuvs-go/cuvs/safe/vamana"
)

// closer is what every index has.
type closer interface{ Close() error }

// The getters of a closed index, which return no error, return their zero
// values (safe.ErrClosed's rule for getters), in every index package:
// Rows and Dim (internal/safetest's conformance suite checks those of the
// packages it runs on) and each package's own (issue 46).
func TestClosedIndexGetters(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	// 512 rows: enough for IVF-PQ's 256-code books on the real library.
	const n, dim = 512, 4
	data := safetest.Random(3, n, dim)
	host, err := dlpack.NewHostMatrix(data, n, dim)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	type getters struct {
		name string
		idx  closer
		get  func() []any
	}
	var cases []getters

	bp := bruteforce.BuildParams{Metric: safe.InnerProduct}
	bf, err := bruteforce.Build(res, host, &bp)
	must(err)
	cases = append(cases, getters{"bruteforce", bf, func() []any { return []any{bf.Rows(), bf.Dim(), bf.DType(), bf.Metric()} }})

	cp, err := cagra.DefaultIndexParams()
	must(err)
	cp.GraphDegree, cp.IntermediateGraphDegree = 8, 16
	cg, err := cagra.Build(res, host, &cp)
	must(err)
	cases = append(cases, getters{"cagra", cg, func() []any { return []any{cg.Rows(), cg.Dim(), cg.DType(), cg.GraphDegree()} }})

	hp, err := hnsw.DefaultIndexParams()
	must(err)
	hp.Hierarchy = hnsw.HierarchyCPU
	hn, err := hnsw.FromCagra(res, cg, &hp)
	must(err)
	cases = append(cases, getters{"hnsw", hn, func() []any { return []any{hn.Rows(), hn.Dim(), hn.DType(), hn.Metric(), hn.Hierarchy()} }})

	fp, err := ivfflat.DefaultIndexParams()
	must(err)
	fp.NLists = 4
	fl, err := ivfflat.Build(res, host, &fp)
	must(err)
	cases = append(cases, getters{"ivfflat", fl, func() []any { return []any{fl.Rows(), fl.Dim(), fl.DType(), fl.NLists()} }})

	qp, err := ivfpq.DefaultIndexParams()
	must(err)
	qp.NLists, qp.PQDim = 4, 2
	pq, err := ivfpq.Build(res, host, &qp)
	must(err)
	cases = append(cases, getters{"ivfpq", pq, func() []any {
		return []any{pq.Rows(), pq.Dim(), pq.DType(), pq.NLists(), pq.PQDim(), pq.PQBits(), pq.PQLen(), pq.RotDim(), pq.CodeBytes()}
	}})

	sp, err := ivfsq.DefaultIndexParams()
	must(err)
	sp.NLists = 4
	sq, err := ivfsq.Build(res, host, &sp)
	must(err)
	cases = append(cases, getters{"ivfsq", sq, func() []any { return []any{sq.Rows(), sq.Dim(), sq.DType(), sq.NLists()} }})

	np, err := nndescent.DefaultIndexParams()
	must(err)
	np.GraphDegree, np.IntermediateGraphDegree, np.ReturnDistances, np.Metric = 4, 8, true, safe.InnerProduct
	nd, err := nndescent.Build(res, host, &np)
	must(err)
	cases = append(cases, getters{"nndescent", nd, func() []any { return []any{nd.Rows(), nd.GraphDegree(), nd.HasDistances(), nd.Metric()} }})

	vp, err := vamana.DefaultIndexParams()
	must(err)
	vp.Metric = safe.L2Expanded
	vm, err := vamana.Build(res, host, &vp)
	must(err)
	cases = append(cases, getters{"vamana", vm, func() []any { return []any{vm.Rows(), vm.Dim(), vm.GraphDegree(), vm.DType(), vm.Borrows()} }})

	tp, err := tiered.DefaultIndexParams()
	must(err)
	tp.MinANNRows = n / 2
	td, err := tiered.Build(res, host, &tp)
	must(err)
	cases = append(cases, getters{"tiered", td, func() []any {
		return []any{td.Rows(), td.ANNRows(), td.Dim(), td.DType(), td.Backend(), td.Params(), td.Live(), td.Stored()}
	}})

	for _, c := range cases {
		before := c.get()
		for i, v := range before[:1] { // Rows, of every index, is known while open
			if reflect.ValueOf(v).IsZero() {
				t.Errorf("%s: getter %d is %v while open", c.name, i, v)
			}
		}
		must(c.idx.Close())
		for i, v := range c.get() {
			if !reflect.ValueOf(v).IsZero() {
				t.Errorf("%s: getter %d is %v after Close (was %v), want its zero value", c.name, i, v, before[i])
			}
		}
	}
}
