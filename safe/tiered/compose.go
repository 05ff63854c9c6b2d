package tiered

import (
	"math"

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
// storage: after a compaction the package maps them to positions. A CAGRA
// ANN tier's ITopKSize is raised to its k (rounded up to 32) where k
// passes it, which cuVS would refuse.
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
//     one device buffer the index keeps for its searches: the ANN tier for
//     min(k, ANNRows()) neighbors, the fresh tier by brute force for
//     min(k, its rows allowed), each with its positions' bitset (filter
//     AND live); the buffer is read back into pinned host memory (one
//     copy, one stream sync), the lists merged by distance (largest first
//     for InnerProduct), their positions mapped to ids, and the results
//     written to neighbors/distances from host memory (two copies, not
//     waited for), every slot left unfilled holding safe.SentinelID64 with
//     distance +Inf. A search whose ANN index left a query short of the
//     rows allowed has its ANN tier searched again exactly (brute force
//     over its rows). Its cost over the two searches: three copies and a
//     stream sync; no device allocation once the index's buffers have
//     grown to the batch, and no Go allocation (BENCHMARKS.md).
//
// Non-finite query values are not checked (device memory is not read):
// SearchSlice refuses them.
//
// C calls: cuvsTieredIndexSearch, cuvsBruteForceSearch, cuvsMatrixCopy,
// cuvsStreamSync (cuvsRMMAlloc and cuvsRMMHostAlloc while the index's
// buffers grow); with a filter or deletions once per filter, deletion
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
	idx.coverK(&sp, int64(k), ann)
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

// coverK raises a CAGRA ANN tier's internal top-k to the tier's k, to a
// multiple of 32, as the filter policy raises it: CAGRA's single-CTA
// search refuses a k past its ITopKSize (real cuVS: "topk = 120 must be
// smaller than itopk_size = 64").
func (idx *Index) coverK(sp *cSearch, k, ann int64) {
	if ka := uint64(min(k, ann)); idx.p.Backend == CAGRA && ka > sp.cagra.ItopkSize {
		sp.cagra.ItopkSize = (ka + 31) / 32 * 32
	}
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

// composed searches the tiers apart and merges them (composedSearch),
// mapping positions to ids; dead is the search's deletion state, plain
// whether positions are ids with none deleted.
func (idx *Index) composed(op string, res *safe.Resources, sp *cSearch, size uintptr, queries dlpack.Tensor, qv *dlpack.View, nv, dv *dlpack.ViewMut, n, k int64, filter *safe.Filter, dead *deletions, plain bool) error {
	stored, ann := idx.stored.Load(), idx.annRows.Load()
	fr := stored - ann
	pl := tierPlan{kA: min(k, ann), kF: min(k, fr), ann: ann, fr: fr, want: min(k, stored), allowedA: ann}
	if filter != nil || !plain {
		d, err := idx.derive(op, res, filter, dead)
		if err != nil {
			return err
		}
		defer idx.release(d)
		pl.fA, pl.fF = d.ann.of(filter), d.fresh.of(filter)
		pl.wA, pl.wF = d.ann.words, d.fresh.words
		if ann > 0 {
			if d.ann.allowed == 0 {
				pl.kA = 0
			} else if pl.wA != nil {
				if frac := float64(d.ann.allowed) / float64(ann); frac < ExactBelow || d.ann.allowed <= k {
					pl.exact, pl.kA = true, min(pl.kA, d.ann.allowed)
				} else {
					idx.raise(sp, frac, k)
				}
			}
		}
		pl.kF = min(pl.kF, d.fresh.allowed)
		pl.want = min(k, d.ann.allowed+d.fresh.allowed)
		pl.allowedA = d.ann.allowed
	}
	return idx.composedSearch(op, res, sp, size, queries, qv, nv, dv, n, k, &pl)
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
