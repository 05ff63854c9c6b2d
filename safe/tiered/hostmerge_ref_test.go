package tiered

// The host merge of the composed search as it was (device scratch per
// call, a copy waited for per tier and output, a sort per query), kept
// here only as the reference TestMergeMatchesReference compares the
// pooled merge with.

import (
	"math"
	"sort"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// composedRef is the composed search as it was before the pooled merge
// (issue 44, part 1), kept as the reference the new path must agree with:
// it searches the tiers apart and merges on the host, mapping
// positions to ids; dead is the search's deletion state, plain whether
// positions are ids with none deleted.
func (idx *Index) composedRef(op string, res *safe.Resources, sp *cSearch, size uintptr, queries dlpack.Tensor, qv *dlpack.View, nv, dv *dlpack.ViewMut, n, k int64, filter *safe.Filter, dead *deletions, plain bool) error {
	st := idx.st
	stored, ann := idx.stored.Load(), idx.annRows.Load()
	fr := stored - ann
	kA, kF := min(k, ann), min(k, fr)
	var fA, fF *safe.Filter
	var wA, wF []uint32
	want := min(k, stored) // valid results per query a full search gives
	allowedA := ann        // the ANN tier's rows allowed and live
	exact := false
	if filter != nil || !plain {
		d, err := idx.derive(op, res, filter, dead)
		if err != nil {
			return err
		}
		defer idx.release(d)
		fA, fF = d.ann.of(filter), d.fresh.of(filter)
		wA, wF = d.ann.words, d.fresh.words
		if ann > 0 {
			if d.ann.allowed == 0 {
				kA = 0
			} else if wA != nil {
				if frac := float64(d.ann.allowed) / float64(ann); frac < ExactBelow || d.ann.allowed <= k {
					exact, kA = true, min(kA, d.ann.allowed)
				} else {
					idx.raise(sp, frac, k)
				}
			}
		}
		kF = min(kF, d.fresh.allowed)
		want = min(k, d.ann.allowed+d.fresh.allowed)
		allowedA = d.ann.allowed
	}
	var hA, hF tierOut
	var err error
	if kA > 0 {
		if hA, err = idx.annCandidates(op, res, sp, size, queries, qv, n, kA, fA, ann, exact); err != nil {
			return err
		}
	}
	if kF > 0 {
		nb, ds, err := scratch(res, n, kF)
		if err != nil {
			return kit.Wrap(op, err)
		}
		defer nb.Close()
		defer ds.Close()
		if err := st.freshBF.Search(res, queries, nb, ds, fF); err != nil {
			return err
		}
		if hF, err = toHost(res, nb, ds, n, kF); err != nil {
			return kit.Wrap(op, err)
		}
	}
	ids := make([]int64, n*k)
	dists := make([]float32, n*k)
	larger := idx.p.Metric == safe.InnerProduct
	a := tierSrc{o: &hA, rows: ann, from: 0, words: wA}
	b := tierSrc{o: &hF, rows: fr, from: ann, words: wF}
	if short := mergeLists(ids, dists, n, k, st.ids, &a, &b, want, larger); short && !exact && kA > 0 {
		// The ANN index's search left a query short of the rows the
		// filter and the deletions allow: search its tier exactly.
		kA = min(k, allowedA)
		if hA, err = idx.annCandidates(op, res, sp, size, queries, qv, n, kA, fA, ann, true); err != nil {
			return err
		}
		mergeLists(ids, dists, n, k, st.ids, &a, &b, want, larger)
	}
	hi, err := dlpack.NewHostMatrix(ids, int(n), int(k))
	if err != nil {
		return kit.Wrap(op, err)
	}
	hd, err := dlpack.NewHostMatrix(dists, int(n), int(k))
	if err != nil {
		return kit.Wrap(op, err)
	}
	hiv, _ := hi.View()
	hdv, _ := hd.View()
	if err := safe.Copy(res, &hiv, nv); err != nil {
		return kit.Wrap(op, err)
	}
	return kit.Wrap(op, safe.Copy(res, &hdv, dv))
}

// annCandidates searches the ANN tier (ann rows) for kA neighbors of each
// query into device scratch, by its ANN index or, exact, by brute force
// over its rows, filtered by f (over its positions; nil: none), and copies
// them to the host.
func (idx *Index) annCandidates(op string, res *safe.Resources, sp *cSearch, size uintptr, queries dlpack.Tensor, qv *dlpack.View, n, kA int64, f *safe.Filter, ann int64, exact bool) (tierOut, error) {
	nb, ds, err := scratch(res, n, kA)
	if err != nil {
		return tierOut{}, kit.Wrap(op, err)
	}
	defer nb.Close()
	defer ds.Close()
	if exact {
		bf, err := idx.annExactIndex(op, res, ann)
		if err != nil {
			return tierOut{}, err
		}
		if err := bf.Search(res, queries, nb, ds, f); err != nil {
			return tierOut{}, err
		}
	} else {
		nbv, _ := nb.ViewMut()
		dsv, _ := ds.ViewMut()
		if err := idx.searchANN(op, res, sp, size, qv, &nbv, &dsv, f, ann); err != nil {
			return tierOut{}, err
		}
	}
	h, err := toHost(res, nb, ds, n, kA)
	if err != nil {
		return tierOut{}, kit.Wrap(op, err)
	}
	if !exact && idx.p.Backend == IVFPQ && idx.p.Metric == safe.CosineExpanded {
		// IVF-PQ's cosine is -cos (cuVS leaves its score), the fresh
		// tier's brute force 1 - cos: one scale before the merge.
		for i, d := range h.dists {
			if !math.IsInf(float64(d), 0) {
				h.dists[i] = d + 1
			}
		}
	}
	return h, nil
}

// tierOut is one tier's candidates in host memory: n rows of k.
type tierOut struct {
	ids   []int64
	dists []float32
	k     int64
}

func scratch(res *safe.Resources, n, k int64) (*safe.DeviceMatrix[int64], *safe.DeviceMatrix[float32], error) {
	nb, err := safe.NewDeviceMatrix[int64](res, int(n), int(k))
	if err != nil {
		return nil, nil, err
	}
	ds, err := safe.NewDeviceMatrix[float32](res, int(n), int(k))
	if err != nil {
		_ = nb.Close()
		return nil, nil, err
	}
	return nb, ds, nil
}

func toHost(res *safe.Resources, nb *safe.DeviceMatrix[int64], ds *safe.DeviceMatrix[float32], n, k int64) (tierOut, error) {
	o := tierOut{ids: make([]int64, n*k), dists: make([]float32, n*k), k: k}
	if err := nb.CopyToHost(res, o.ids); err != nil {
		return o, err
	}
	return o, ds.CopyToHost(res, o.dists)
}

// tierSrc is one tier's candidates for the merge: rows rows at storage
// positions from.., of which words (nil: all) are allowed.
type tierSrc struct {
	o          *tierOut
	rows, from int64
	words      []uint32
}

// mergeLists writes into ids/dists (n × k) the best k of each query's
// candidates in a and b, each a tier position mapped to its row's id (pos
// the id of each stored position; nil: the position), unfilled slots
// holding safe.SentinelID64 and +Inf. A candidate its tier's words do not
// allow is dropped. It reports whether a query got fewer than want rows.
func mergeLists(ids []int64, dists []float32, n, k int64, pos []int64, a, b *tierSrc, want int64, larger bool) bool {
	type cand struct {
		id int64
		d  float32
	}
	buf := make([]cand, 0, a.o.k+b.o.k)
	inf := float32(math.Inf(1))
	short := false
	for q := range n {
		buf = buf[:0]
		for _, t := range []*tierSrc{a, b} {
			for j := range t.o.k {
				p, d := t.o.ids[q*t.o.k+j], t.o.dists[q*t.o.k+j]
				if valid(p, d, t.rows) && allows(t.words, p) {
					buf = append(buf, cand{idAt(pos, t.from+p), d})
				}
			}
		}
		sort.SliceStable(buf, func(i, j int) bool {
			if larger {
				return buf[i].d > buf[j].d
			}
			return buf[i].d < buf[j].d
		})
		out := ids[q*k : (q+1)*k]
		od := dists[q*k : (q+1)*k]
		w := 0
		for _, c := range buf {
			if w == int(k) {
				break
			}
			dup := false
			for _, x := range out[:w] {
				dup = dup || x == c.id
			}
			if !dup {
				out[w], od[w] = c.id, c.d
				w++
			}
		}
		short = short || int64(w) < want
		for ; w < int(k); w++ {
			out[w], od[w] = safe.SentinelID64, inf
		}
	}
	return short
}
