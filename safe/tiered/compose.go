package tiered

import (
	"math"
	"sort"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// ExactBelow is the filter policy of the ANN tier: a bitset letting
// through less than this fraction of the ANN rows (or no more than k of
// them) is searched exactly, by brute force over the ANN rows, instead of
// by the ANN index; above it the ANN search's effort is raised by 1/f (f
// the fraction allowed, deletions included): CAGRA's internal top-k to
// itopk/f (rounded to the nearest multiple of 32, so that a few percent
// deleted or filtered out keep itopk; at most max(256, itopk)), an IVF
// backend's probes to n_probes/f (at most its lists). cagra's own policy goes exact below 25% at itopk 64
// (cagra.MaxFilterITopK = 256 = 64/0.25), IVF's raises probes by 1/f.
const ExactBelow = 0.25

// Search finds the k nearest live rows for each query, k being the
// columns of neighbors, up to Rows(). queries (n × Dim() float32),
// neighbors (int64 ids) and distances (float32), n × k, in device memory;
// the results are ready once res's stream is synchronized. A deleted row
// is never returned; k is filled while live rows (allowed by the filter)
// remain (on every path but the one-call ones below), the slots past them
// holding safe.SentinelID64 with +Inf.
//
// filter, if not nil, is a bitset over Rows() ids, honoured in both tiers
// together with the deletions (a row must be allowed and live; see
// ExactBelow for the ANN tier's policy). Its bits are ids whatever the
// storage: after a compaction the package maps them to positions.
//
// How it runs:
//   - one tier holding every row, none deleted or compacted away, no
//     filter, k within that tier: one C call (cuvsTieredIndexSearch on the
//     ANN tier, cuvsBruteForceSearch on the fresh tier), nothing
//     allocated; a slot the ANN backend cannot fill then holds the
//     backend's own marker (CAGRA: id 2147483647, distance FLT_MAX; IVF:
//     safe.SentinelID64 or a repeated id with distance +Inf), as in
//     packages cagra and ivfflat;
//   - otherwise (rows in both tiers, a filter, deletions, a compacted
//     storage, or k past a tier's rows) the tiers are searched apart into
//     device scratch: the ANN tier for min(k, ANNRows()) neighbors, the
//     fresh tier by brute force for min(k, its rows allowed), each with
//     its positions' bitset (filter AND live); both lists are copied to
//     the host, their positions mapped to ids, merged by distance (largest
//     first for InnerProduct) and written to neighbors/distances, every
//     slot left unfilled holding safe.SentinelID64 with distance +Inf. A
//     search whose ANN index left a query short of the rows allowed has
//     its ANN tier searched again exactly (brute force over its rows). Its cost over the
//     two searches: device scratch allocated per call, three host copies
//     and a stream sync (BENCHMARKS.md).
//
// Non-finite query values are not checked (device memory is not read):
// SearchSlice refuses them.
//
// C calls: cuvsTieredIndexSearch, cuvsBruteForceSearch, cuvsMatrixCopy,
// cuvsStreamSync; with a filter or deletions once per filter, deletion
// state and storage cuvsMatrixCopy (the filter's words to the host) and
// the uploads of the positions' bitsets, and for a selective one
// cuvsBruteForceBuild over the ANN rows (once). Nil params means cuVS's
// defaults.
func (idx *Index) Search(res *safe.Resources, params *SearchParams, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error {
	if idx == nil {
		return kit.NilIndex("tiered.Index.Search")
	}
	const op = "tiered.Index.Search"
	if err := idx.life.Enter(op); err != nil {
		return err
	}
	defer idx.life.Leave()
	if err := kit.CheckIndexDevice(res, op, idx.dev); err != nil {
		return err
	}
	rows, stored, ann := idx.rows.Load(), idx.stored.Load(), idx.annRows.Load()
	fr := stored - ann
	qv, err := viewOf(op, "queries", queries)
	if err != nil {
		return err
	}
	nv, err := viewMutOf(op, "neighbors", neighbors)
	if err != nil {
		return err
	}
	dv, err := viewMutOf(op, "distances", distances)
	if err != nil {
		return err
	}
	k, err := searchRules.Check(op, &qv, &nv, &dv, dlpack.Float32, idx.dim, rows)
	if err != nil {
		return err
	}
	if err := kit.CheckFilter(filter, op, rows, qv.Dim(0), safe.Bitset); err != nil {
		return err
	}
	sp, size, err := idx.searchParams(params)
	if err != nil {
		return err
	}
	// one deletion state for the whole search: it sees a Delete or not
	dead := idx.st.dead.Load()
	plain := idx.st.ids == nil && dead.count() == 0 // positions are ids, none deleted
	if plain && filter == nil && fr == 0 {
		return idx.searchANN(op, res, &sp, size, &qv, &nv, &dv, nil, ann)
	}
	if plain && filter == nil && ann == 0 {
		return idx.st.freshBF.Search(res, queries, neighbors, distances, nil)
	}
	return idx.composed(op, res, &sp, size, queries, &qv, &nv, &dv, qv.Dim(0), k, filter, dead, plain)
}

func viewOf(op, arg string, t dlpack.Tensor) (dlpack.View, error) {
	if t == nil {
		return dlpack.View{}, kit.Argf(op, arg, "nil")
	}
	v, err := t.View()
	if err != nil {
		return dlpack.View{}, kit.Argf(op, arg, "%w", err)
	}
	return v, nil
}

func viewMutOf(op, arg string, t dlpack.TensorMut) (dlpack.ViewMut, error) {
	if t == nil {
		return dlpack.ViewMut{}, kit.Argf(op, arg, "nil")
	}
	v, err := t.ViewMut()
	if err != nil {
		return dlpack.ViewMut{}, kit.Argf(op, arg, "%w", err)
	}
	return v, nil
}

// searchANN runs cuvsTieredIndexSearch on the ANN tier (which holds no
// fresh rows: cuVS searches its ANN index alone, the filter by id) into nv
// and dv, f over annRows rows or nil.
func (idx *Index) searchANN(op string, res *safe.Resources, sp *cSearch, size uintptr, qv *dlpack.View, nv, dv *dlpack.ViewMut, f *safe.Filter, ann int64) error {
	c := dlpack.Begin(op)
	defer c.End()
	qt, err := c.In(qv)
	if err != nil {
		return kit.Argf(op, "queries", "%w", err)
	}
	nt, err := c.Out(nv)
	if err != nil {
		return kit.Argf(op, "neighbors", "%w", err)
	}
	dt, err := c.Out(dv)
	if err != nil {
		return kit.Argf(op, "distances", "%w", err)
	}
	cf, err := kit.BindFilter(f, op, c, ann, qv.Dim(0), safe.Bitset)
	if err != nil {
		return err
	}
	mem := cAlloc(size)
	defer cFree(mem)
	switch idx.p.Backend {
	case CAGRA:
		*(*generated.CuvsCagraSearchParams)(mem) = sp.cagra
	case IVFFlat:
		*(*generated.CuvsIvfFlatSearchParams)(mem) = sp.flat
	case IVFPQ:
		*(*generated.CuvsIvfPqSearchParams)(mem) = sp.pq
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = generated.CuvsTieredIndexSearch(h, mem, idx.st.ann, qt, nt, dt, cf)
	kit.Unlock(res)
	return kit.Wrap(op, err)
}

// raise applies the filter policy to the ANN search's parameters for a
// filter allowing the fraction frac of the ANN rows.
func (idx *Index) raise(sp *cSearch, frac float64, k int64) {
	switch idx.p.Backend {
	case CAGRA:
		it := int64(sp.cagra.ItopkSize)
		// to the nearest multiple of 32: a filter or a deletion set
		// taking a few percent of the rows keeps CAGRA's effort
		up := int64(math.Round(float64(it)/frac/32)) * 32
		up = min(up, max(256, it))
		sp.cagra.ItopkSize = uint64(max(it, up, (k+31)/32*32))
	case IVFFlat:
		sp.flat.NProbes = probes(sp.flat.NProbes, frac, idx.p.annLists())
	case IVFPQ:
		sp.pq.NProbes = probes(sp.pq.NProbes, frac, idx.p.annLists())
	}
}

func probes(n uint32, frac float64, lists int64) uint32 {
	up := int64(math.Ceil(float64(n) / frac))
	return uint32(max(int64(n), min(up, lists)))
}

// annExactIndex returns brute force over the ANN rows, made on first use.
func (idx *Index) annExactIndex(op string, res *safe.Resources, ann int64) (*bruteforce.Index, error) {
	st := idx.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.annExact != nil {
		return st.annExact, nil
	}
	if err := idx.life.Keep(res, op); err != nil {
		return nil, err
	}
	bf, err := freshIndex(res, idx.p.Metric, st.annData, ann)
	if err != nil {
		return nil, kit.Wrap(op, err)
	}
	st.annExact = bf
	return bf, nil
}

// composed searches the tiers apart and merges on the host, mapping
// positions to ids; dead is the search's deletion state, plain whether
// positions are ids with none deleted.
func (idx *Index) composed(op string, res *safe.Resources, sp *cSearch, size uintptr, queries dlpack.Tensor, qv *dlpack.View, nv, dv *dlpack.ViewMut, n, k int64, filter *safe.Filter, dead *deletions, plain bool) error {
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

// valid reports whether a candidate of a tier of rows rows is a row: an id
// in range with a finite distance (CAGRA's 2147483647/FLT_MAX, the IVF
// indexes' INT64_MAX and their repeated ids with +Inf are not).
func valid(id int64, d float32, rows int64) bool {
	if id < 0 || id >= rows || math.IsInf(float64(d), 0) || math.IsNaN(float64(d)) {
		return false
	}
	return !(id == math.MaxInt32 && d == math.MaxFloat32)
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
