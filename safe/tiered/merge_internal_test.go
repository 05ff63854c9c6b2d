package tiered

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// refSearch is Search with the composed path of before (composedRef).
func (idx *Index) refSearch(res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	const op = "tiered.refSearch"
	if err := idx.life.Enter(op); err != nil {
		return err
	}
	defer idx.life.Leave()
	qv, _ := viewOf(op, "queries", queries)
	nv, _ := viewMutOf(op, "neighbors", neighbors)
	dv, _ := viewMutOf(op, "distances", distances)
	k, err := searchRules.Check(op, &qv, &nv, &dv, dlpack.Float32, idx.dim, idx.rows.Load())
	if err != nil {
		return err
	}
	sp, size, err := idx.searchParams(params)
	if err != nil {
		return err
	}
	idx.coverK(&sp, int64(k), idx.annRows.Load())
	dead := idx.st.dead.Load()
	plain := idx.st.ids == nil && dead.count() == 0
	return kit.Wrap(op, idx.composedRef(op, res, &sp, size, queries, &qv, &nv, &dv, qv.Dim(0), k, filter, dead, plain))
}

type mergeFixture struct {
	res  *safe.Resources
	idx  *Index
	q    *safe.DeviceMatrix[float32]
	n    int
	data []float32
}

const mdim = 8

func newMergeFixture(t *testing.T, b Backend, m safe.Metric, ann, fresh int) *mergeFixture {
	t.Helper()
	res := safetest.Resources(t)
	data := safetest.Random(uint64(ann+fresh), ann+fresh, mdim)
	p, err := DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	p.Backend, p.Metric, p.MinANNRows = b, m, 50
	p.CAGRA = CAGRAParams{GraphDegree: 16, IntermediateGraphDegree: 32}
	p.IVFFlat.NLists = 8
	p.IVFPQ = IVFPQParams{NLists: 8, PQDim: 4}
	base, err := safe.DeviceMatrixFrom(res, data[:ann*mdim], ann, mdim)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	idx, err := Build(res, base, &p)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	if fresh > 0 {
		add, err := safe.DeviceMatrixFrom(res, data[ann*mdim:], fresh, mdim)
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.Extend(res, add); err != nil {
			t.Fatal(err)
		}
		_ = add.Close()
	}
	// queries: stored rows and new points
	nq := 12
	qs := append(append([]float32(nil), data[:6*mdim]...), safetest.Random(99, nq-6, mdim)...)
	q, err := safe.DeviceMatrixFrom(res, qs, nq, mdim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, q)
	return &mergeFixture{res: res, idx: idx, q: q, n: nq, data: data}
}

// both runs a search through the pooled merge and through the reference.
func (f *mergeFixture) both(t *testing.T, sp *SearchParams, k int, filter *safe.Filter) (gi []int64, gd []float32, ri []int64, rd []float32) {
	t.Helper()
	run := func(ref bool) ([]int64, []float32) {
		nb, err := safe.NewDeviceMatrix[int64](f.res, f.n, k)
		if err != nil {
			t.Fatal(err)
		}
		defer nb.Close()
		ds, err := safe.NewDeviceMatrix[float32](f.res, f.n, k)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		if ref {
			err = f.idx.refSearch(f.res, sp, f.q, nb, ds, filter)
		} else {
			err = f.idx.Search(f.res, sp, f.q, nb, ds, filter)
		}
		if err != nil {
			t.Fatal(err)
		}
		ids, err := nb.ToHost(f.res)
		if err != nil {
			t.Fatal(err)
		}
		d, err := ds.ToHost(f.res)
		if err != nil {
			t.Fatal(err)
		}
		return ids, d
	}
	gi, gd = run(false)
	ri, rd = run(true)
	return
}

// sameResults: the same distances slot by slot, and the same ids except
// inside a run of equal distances, where the same set of ids.
func sameResults(t *testing.T, what string, k int, gi []int64, gd []float32, ri []int64, rd []float32) {
	t.Helper()
	for q := 0; q < len(gi)/k; q++ {
		row := q * k
		for j := 0; j < k; j++ {
			if gd[row+j] != rd[row+j] {
				t.Fatalf("%s: query %d slot %d: distance %v, the host merge %v (ids %v / %v)", what, q, j, gd[row+j], rd[row+j], gi[row:row+k], ri[row:row+k])
			}
		}
		for j := 0; j < k; {
			e := j + 1
			for e < k && gd[row+e] == gd[row+j] {
				e++
			}
			a := map[int64]int{}
			for x := j; x < e; x++ {
				a[gi[row+x]]++
				a[ri[row+x]]--
			}
			for id, c := range a {
				if c != 0 {
					t.Fatalf("%s: query %d slots %d-%d (distance %v): ids %v, the host merge %v (id %d)", what, q, j, e-1, gd[row+j], gi[row+j:row+e], ri[row+j:row+e], id)
				}
			}
			j = e
		}
	}
}

// The pooled merge gives what the host merge of before gave: every
// backend, metric, filter, deletion set and k, before and after a
// compaction.
func TestMergeMatchesReference(t *testing.T) {
	safetest.Check(t)
	const ann, fresh = 300, 40
	for _, c := range []struct {
		b Backend
		m safe.Metric
	}{{CAGRA, safe.L2Expanded}, {CAGRA, safe.InnerProduct}, {IVFFlat, safe.L2Expanded}, {IVFPQ, safe.CosineExpanded}, {IVFFlat, safe.InnerProduct}} {
		t.Run(fmt.Sprintf("%s/%s", c.b, c.m), func(t *testing.T) {
			f := newMergeFixture(t, c.b, c.m, ann, fresh)
			rows := f.idx.Rows()
			rng := rand.New(rand.NewPCG(7, uint64(c.b)))
			half := make([]uint32, kit.Words(int64(rows)))
			sparse := make([]uint32, len(half))
			for i := range rows {
				if rng.IntN(2) == 0 {
					half[i/32] |= 1 << (i % 32)
				}
				if rng.IntN(20) == 0 {
					sparse[i/32] |= 1 << (i % 32)
				}
			}
			fh, err := safe.NewBitsetFilter(f.res, rows, half)
			if err != nil {
				t.Fatal(err)
			}
			safetest.Close(t, fh)
			fs, err := safe.NewBitsetFilter(f.res, rows, sparse)
			if err != nil {
				t.Fatal(err)
			}
			safetest.Close(t, fs)
			check := func(stage string) {
				for _, k := range []int{1, 7, fresh + 5, 120} {
					for _, fl := range []struct {
						name string
						f    *safe.Filter
					}{{"none", nil}, {"half", fh}, {"sparse", fs}} {
						what := fmt.Sprintf("%s/k%d/%s", stage, k, fl.name)
						gi, gd, ri, rd := f.both(t, nil, k, fl.f)
						sameResults(t, what, k, gi, gd, ri, rd)
					}
				}
			}
			check("fresh")
			var del []int64
			for i := range rows {
				if rng.IntN(10) == 0 {
					del = append(del, int64(i))
				}
			}
			if _, err := f.idx.Delete(del); err != nil {
				t.Fatal(err)
			}
			check("deleted")
			if err := f.idx.Compact(f.res); err != nil {
				t.Fatal(err)
			}
			add, err := safe.DeviceMatrixFrom(f.res, f.data[:30*mdim], 30, mdim)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.idx.Extend(f.res, add); err != nil {
				t.Fatal(err)
			}
			_ = add.Close()
			// the filters again over every id: the new ones allowed by half
			// and every seventh by sparse
			grown := func(w []uint32, every int) *safe.Filter {
				n := f.idx.Rows()
				g := make([]uint32, kit.Words(int64(n)))
				copy(g, w)
				for i := rows; i < n; i++ {
					if i%every == 0 {
						g[i/32] |= 1 << (i % 32)
					}
				}
				fl, err := safe.NewBitsetFilter(f.res, n, g)
				if err != nil {
					t.Fatal(err)
				}
				safetest.Close(t, fl)
				return fl
			}
			fh, fs = grown(half, 1), grown(sparse, 7)
			check("compacted")
		})
	}
}

// A composed search allocates nothing on the Go heap once its memory is
// pooled, reads the candidates back with one copy and waits once, and
// allocates no device memory.
func TestComposedSearchCosts(t *testing.T) {
	ctl := safetest.Double(t, "counting the composed search's C calls")
	f := newMergeFixture(t, CAGRA, safe.L2Expanded, 300, 40)
	rows := f.idx.Rows()
	words := make([]uint32, kit.Words(int64(rows)))
	for i := range rows {
		if i%3 != 0 {
			words[i/32] |= 1 << (i % 32)
		}
	}
	flt, err := safe.NewBitsetFilter(f.res, rows, words)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, flt)
	const k = 10
	nb, _ := safe.NewDeviceMatrix[int64](f.res, f.n, k)
	safetest.Close(t, nb)
	ds, _ := safe.NewDeviceMatrix[float32](f.res, f.n, k)
	safetest.Close(t, ds)
	for _, c := range []struct {
		name  string
		f     *safe.Filter
		setup func()
	}{
		{"fresh", nil, func() {}},
		{"filter", flt, func() {}},
		{"deleted", nil, func() {
			if _, err := f.idx.Delete([]int64{1, 2, 3, 305}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		c.setup()
		search := func() {
			if err := f.idx.Search(f.res, nil, f.q, nb, ds, c.f); err != nil {
				t.Fatal(err)
			}
		}
		search() // makes the pooled memory and the filters
		calls := func() [4]int64 {
			return [4]int64{ctl.Calls("cuvsStreamSync"), ctl.Calls("cuvsMatrixCopy"), ctl.Calls("cuvsRMMAlloc"), ctl.Calls("cuvsRMMHostAlloc")}
		}
		before := calls()
		search()
		after := calls()
		if got := after[0] - before[0]; got != 1 {
			t.Errorf("%s: %d stream syncs, want 1", c.name, got)
		}
		if got := after[1] - before[1]; got != 3 {
			t.Errorf("%s: %d copies, want 3 (the candidates back, the results out)", c.name, got)
		}
		if after[2] != before[2] || after[3] != before[3] {
			t.Errorf("%s: %d device and %d pinned allocations, want none", c.name, after[2]-before[2], after[3]-before[3])
		}
		if race.Enabled {
			continue
		}
		if a := testing.AllocsPerRun(20, search); a != 0 {
			t.Errorf("%s: %v Go allocations per search, want 0", c.name, a)
		}
	}
}
