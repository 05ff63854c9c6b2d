package cagra_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

// bitmapFixture is a bitmap of nq queries over rows rows, query q letting
// through a random share (30-70%) of the rows, with each query's own
// bitset.
type bitmapFixture struct {
	bitmap  *safe.Filter
	bitsets []*safe.Filter
	allows  []map[int64]bool // by query
}

func newBitmapFixture(t *testing.T, res *safe.Resources, seed uint64) *bitmapFixture {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	words := make([]uint32, (nq*rows+31)/32)
	fx := &bitmapFixture{}
	for q := range nq {
		share := 0.3 + 0.4*r.Float64()
		var allowed []int64
		in := map[int64]bool{}
		for row := range rows {
			if r.Float64() < share {
				allowed = append(allowed, int64(row))
				in[int64(row)] = true
				b := q*rows + row
				words[b/32] |= 1 << (b % 32)
			}
		}
		bs, err := safe.NewBitsetFilterAllowing(res, rows, allowed)
		must(t, err)
		safetest.Close(t, bs)
		fx.bitsets, fx.allows = append(fx.bitsets, bs), append(fx.allows, in)
	}
	var err error
	fx.bitmap, err = safe.NewBitmapFilter(res, nq, rows, words)
	must(t, err)
	safetest.Close(t, fx.bitmap)
	return fx
}

// A bitmap filter (a row of bits per query) is searched exactly: each
// query's neighbors are those of an exact search of that query alone with
// its own row of the bitmap as a bitset, in uint32 and int64 ids alike.
func TestBitmapSearchIsExact(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	fx := newBitmapFixture(t, f.res, 3)
	exact := f.sp
	exact.FilterPath = safe.FilterExact
	one := newDevice[int64](t, f.res, 1, k)
	oneDist := newDevice[float32](t, f.res, 1, k)
	want := make([][]int64, nq)
	for q := range nq {
		qm := deviceMatrix(t, f.res, f.qs[q*dim:(q+1)*dim], 1, dim)
		must(t, idx.Search(f.res, &exact, qm, one, oneDist, fx.bitsets[q]))
		must(t, f.res.Sync())
		want[q] = toHost[int64](t, f.res, mustView(t, one))
	}
	before := calls()
	must(t, idx.Search(f.res, &f.sp, f.queries, f.n64, f.dist, fx.bitmap))
	must(t, f.res.Sync())
	got64 := toHost[int64](t, f.res, mustView(t, f.n64))
	if c := called(before); before != nil && slices.Contains(c, "cuvsCagraSearch") {
		t.Errorf("a bitmap search called %v: want brute force only", c)
	}
	must(t, idx.Search(f.res, &f.sp, f.queries, f.n32, f.dist, fx.bitmap))
	must(t, f.res.Sync())
	got32 := toHost[uint32](t, f.res, mustView(t, f.n32))
	for q := range nq {
		for j := range k {
			id := got64[q*k+j]
			if id != want[q][j] || int64(got32[q*k+j]) != id {
				t.Fatalf("query %d: bitmap search gave %v (uint32 %v), its bitset's exact search %v", q, got64[q*k:(q+1)*k], got32[q*k:(q+1)*k], want[q])
			}
			if !fx.allows[q][id] {
				t.Fatalf("query %d: id %d is not in its row of the bitmap", q, id)
			}
		}
	}
}

// A bitmap is refused where it cannot be searched exactly: FilterIndex
// (the graph takes bitsets only), a query letting fewer than k rows
// through, a bitmap of another number of queries; nothing is called.
func TestBitmapRefused(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	fx := newBitmapFixture(t, f.res, 4)
	graph := f.sp
	graph.FilterPath = safe.FilterIndex
	words := make([]uint32, (nq*rows+31)/32)
	for b := range nq * rows {
		if q, row := b/rows, b%rows; q != 3 || row < k-1 { // query 3: k-1 rows
			words[b/32] |= 1 << (b % 32)
		}
	}
	short, err := safe.NewBitmapFilter(f.res, nq, rows, words)
	must(t, err)
	safetest.Close(t, short)
	if short.AllowedFor(3) != k-1 {
		t.Fatalf("the short bitmap lets query 3 through %d rows, want %d", short.AllowedFor(3), k-1)
	}
	other, err := safe.NewBitmapFilter(f.res, nq-1, rows, make([]uint32, ((nq-1)*rows+31)/32))
	must(t, err)
	safetest.Close(t, other)
	for name, c := range map[string]struct {
		p      *cagra.SearchParams
		filter *safe.Filter
		arg    string
	}{
		"FilterIndex":         {&graph, fx.bitmap, "params.FilterPath"},
		"a query short of k":  {&f.sp, short, "filter"},
		"another query count": {&f.sp, other, "filter"},
	} {
		before := calls()
		err := idx.Search(f.res, c.p, f.queries, f.n64, f.dist, c.filter)
		if !isArg(err, c.arg) {
			t.Errorf("%s: %v, want an *safe.ArgError naming %s", name, err, c.arg)
		}
		if c := called(before); len(c) != 0 {
			t.Errorf("%s: refused after calling %v", name, c)
		}
	}
}

// PlanFilter says which path Search takes, and Search takes it: brute
// force for the exact path, cuVS's CAGRA search for the graph.
func TestPlanFilterMatchesSearch(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	fx := newBitmapFixture(t, f.res, 5)
	few, err := safe.NewBitsetFilterAllowing(f.res, rows, []int64{1, 5, 9, 13, 17, 21, 25, 29})
	must(t, err)
	safetest.Close(t, few)
	var most []int64
	for r := range int64(rows) {
		if r%10 != 0 {
			most = append(most, r)
		}
	}
	ninety, err := safe.NewBitsetFilterAllowing(f.res, rows, most)
	must(t, err)
	safetest.Close(t, ninety)
	graph, exact := f.sp, f.sp
	graph.FilterPath, exact.FilterPath = safe.FilterIndex, safe.FilterExact
	for name, c := range map[string]struct {
		p      *cagra.SearchParams
		filter *safe.Filter
		want   safe.FilterPath
	}{
		"no filter":                {&f.sp, nil, safe.FilterIndex},
		"4% allowed":               {&f.sp, few, safe.FilterExact},
		"90% allowed":              {&f.sp, ninety, safe.FilterIndex},
		"90% allowed, FilterExact": {&exact, ninety, safe.FilterExact},
		"4% allowed, FilterIndex":  {&graph, few, safe.FilterIndex},
		"a bitmap":                 {&f.sp, fx.bitmap, safe.FilterExact},
	} {
		got, err := idx.PlanFilter(c.p, c.filter, k, nq)
		must(t, err)
		if got != c.want {
			t.Errorf("%s: PlanFilter %v, want %v", name, got, c.want)
		}
		before := calls()
		must(t, idx.Search(f.res, c.p, f.queries, f.n64, f.dist, c.filter))
		must(t, f.res.Sync())
		if before == nil {
			continue // another library: no call counts
		}
		took := called(before)
		if bf, graph := slices.Contains(took, "cuvsBruteForceSearch"), slices.Contains(took, "cuvsCagraSearch"); (got == safe.FilterExact) != (bf && !graph) {
			t.Errorf("%s: planned %v, Search called %v", name, got, took)
		}
	}
	if a := testing.AllocsPerRun(50, func() { _, _ = idx.PlanFilter(&f.sp, few, k, 1) }); a != 0 {
		t.Errorf("PlanFilter allocates %v times a call, want 0 (a Batcher calls it per request)", a)
	}
	if _, err := idx.PlanFilter(nil, nil, 0, 1); !isArg(err, "k") {
		t.Errorf("k 0: %v, want an *safe.ArgError naming k", err)
	}
	must(t, idx.Close())
	if _, err := idx.PlanFilter(nil, nil, k, 1); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("PlanFilter of a closed index: %v, want safe.ErrClosed", err)
	}
}
