package hnsw

import (
	"math"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// SearchSlice is the one-call search from Go memory, as in every index
// package: queries holds n×Dim() values of the index's element type,
// row-major; the result holds each query's k nearest rows (int64 ids),
// nearest first, with their distances (hnswlib's: squared L2, or
// 1 - <q, x> for InnerProduct). params nil means cuVS's defaults; filter
// nil searches every row. A service serving cagra.SearchSlice switches to
// the CPU copy of its index by calling this instead.
//
// filter is a bitset (safe.NewBitsetFilter, safe.NewBitsetFilterAllowing)
// made for Rows() rows, as in every package; its words are read on the
// host (copied from the device on first use and kept with the filter).
// cuvsHnswSearch takes no filter: each query is searched for k' = k ×
// Rows() / allowed-count (× 1.25, at least k) neighbors and its allowed
// ones kept; the queries that got fewer than k are searched again with k'
// doubled, up to k' = Rows(). A filtered search allocates scratch memory
// (k' results per query, and the queries searched again); an unfiltered
// one searches into out directly.
//
// A slot the search could not fill (a filter letting fewer than k
// reachable rows through) holds safe.SentinelID64 with distance +Inf, as
// in every package's Results: test with safe.Valid.
//
// Everything is checked before cuVS is called: the queries' element
// type, length and values (a NaN or an infinity is refused, naming its
// row), k against Rows(), params, the filter. Searches run concurrently
// as Index.Search's do (one Ef per index while serving). On error the
// result is nil.
//
// C calls: cuvsHnswSearch (once per round of a filtered search), and
// cuvsMatrixCopy for a filter's first host copy.
func SearchSlice[T dlpack.DType](res *safe.Resources, idx *Index, params *SearchParams, queries []T, k int, filter *safe.Filter) (*safe.Results, error) {
	out := new(safe.Results)
	if err := SearchSliceInto(res, idx, params, queries, k, filter, out); err != nil {
		return nil, err
	}
	return out, nil
}

// SearchSliceInto is SearchSlice writing into out, whose slices are reused
// when large enough.
func SearchSliceInto[T dlpack.DType](res *safe.Resources, idx *Index, params *SearchParams, queries []T, k int, filter *safe.Filter, out *safe.Results) error {
	const op = "hnsw.SearchSlice"
	if idx == nil {
		return kit.Argf(op, "idx", "nil *Index")
	}
	if err := idx.c.Life.Enter(op); err != nil { // a zero or closed index says so first
		return err
	}
	defer idx.c.Life.Leave()
	if out == nil {
		return kit.Argf(op, "out", "nil *safe.Results")
	}
	if dt := dlpack.DataTypeOf[T](); dt != idx.dtype {
		return kit.Argf(op, "queries", "element type %s, the index holds %s", dt, idx.dtype)
	}
	dim, rows := int(idx.c.Dim), int(idx.c.Rows.Load())
	if len(queries) == 0 || len(queries)%dim != 0 {
		return kit.Argf(op, "queries", "%d values, want a positive multiple of the index's dimension %d", len(queries), dim)
	}
	n := len(queries) / dim
	if k < 1 {
		return kit.Argf(op, "k", "%d, want at least 1", k)
	}
	if k > rows {
		return kit.Argf(op, "k", "%d exceeds the %d rows of the index", k, rows)
	}
	if int64(n) > math.MaxInt64/12/int64(k) {
		return kit.Argf(op, "k", "%d neighbours for %d queries overflow", k, n)
	}
	sp, err := params.resolve(op)
	if err != nil {
		return err
	}
	if err := kit.CheckFilter(filter, op, int64(rows), int64(n), safe.Bitset); err != nil {
		return err
	}
	if filter != nil && idx.labelsNotRows {
		return kit.Argf(op, "filter", "the index's file labels its elements with ids other than their rows 0..%d: a filter over rows does not apply", rows-1)
	}
	if err := kit.CheckFiniteSlice(op, "queries", queries, dim); err != nil {
		return err
	}
	resize(out, n, k)
	if filter == nil {
		if err := searchSlice(op, res, idx, &sp, queries, n, dim, k, out.Neighbors, out.Distances); err != nil {
			return err
		}
		kit.Unfilled(out.Neighbors, out.Distances)
		return nil
	}
	return searchFiltered(op, res, idx, &sp, queries, n, dim, k, filter, out)
}

// searchSlice runs one cuvsHnswSearch of n queries for k neighbors into
// nb and ds (n×k each), inside the index's life. The views are made here,
// on the stack: a search of Go slices allocates nothing.
func searchSlice[T dlpack.DType](op string, res *safe.Resources, idx *Index, sp *SearchParams, queries []T, n, dim, k int, nb []int64, ds []float32) error {
	qs, os := [2]int64{int64(n), int64(dim)}, [2]int64{int64(n), int64(k)}
	qv, err := dlpack.FromRawParts(unsafe.Pointer(unsafe.SliceData(queries)), dlpack.HostDevice, qs[:], nil, dlpack.DataTypeOf[T]())
	if err != nil {
		return kit.Argf(op, "queries", "%w", err)
	}
	nv, err := dlpack.FromRawPartsMut(unsafe.Pointer(unsafe.SliceData(nb)), dlpack.HostDevice, os[:], nil, dlpack.Int64)
	if err != nil {
		return kit.Argf(op, "neighbors", "%w", err)
	}
	dv, err := dlpack.FromRawPartsMut(unsafe.Pointer(unsafe.SliceData(ds)), dlpack.HostDevice, os[:], nil, dlpack.Float32)
	if err != nil {
		return kit.Argf(op, "distances", "%w", err)
	}
	return idx.search(op, res, sp, &qv, &nv, &dv, false)
}

// searchFiltered is SearchSliceInto's over-fetch and drop (see
// SearchSlice): out is sized n×k.
func searchFiltered[T dlpack.DType](op string, res *safe.Resources, idx *Index, sp *SearchParams, queries []T, n, dim, k int, filter *safe.Filter, out *safe.Results) error {
	rows := int(idx.c.Rows.Load())
	allowed, err := kit.FilterHostWords(filter, op, res)
	if err != nil {
		return err
	}
	inf := float32(math.Inf(1))
	for i := range out.Neighbors {
		out.Neighbors[i], out.Distances[i] = safe.SentinelID64, inf
	}
	count := filter.Allowed()
	if count == 0 {
		return nil
	}
	kk := int(math.Ceil(float64(k) * float64(rows) / float64(count) * 1.25))
	kk = min(max(kk, k), rows)
	pending := make([]int, n)
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		m := len(pending)
		q := queries
		if m < n {
			q = make([]T, m*dim)
			for j, qi := range pending {
				copy(q[j*dim:(j+1)*dim], queries[qi*dim:(qi+1)*dim])
			}
		}
		nb := make([]int64, m*kk)
		ds := make([]float32, m*kk)
		if err := searchSlice(op, res, idx, sp, q, m, dim, kk, nb, ds); err != nil {
			return err
		}
		last := kk == rows
		next := pending[:0]
		for j, qi := range pending {
			got := 0
			on := out.Neighbors[qi*k : (qi+1)*k]
			od := out.Distances[qi*k : (qi+1)*k]
			for c := 0; c < kk && got < k; c++ {
				id, d := nb[j*kk+c], ds[j*kk+c]
				if id < 0 || id >= int64(rows) || math.IsInf(float64(d), 0) || allowed[id/32]>>(id%32)&1 == 0 {
					continue
				}
				on[got], od[got] = id, d
				got++
			}
			for c := got; c < k; c++ {
				on[c], od[c] = safe.SentinelID64, inf
			}
			if got < k && !last {
				next = append(next, qi)
			}
		}
		pending = next
		kk = min(kk*2, rows)
	}
	return nil
}

// resize makes r hold n queries of k results, reusing its slices' memory
// when they are large enough.
func resize(r *safe.Results, n, k int) {
	r.K = k
	if cap(r.Neighbors) >= n*k {
		r.Neighbors = r.Neighbors[:n*k]
	} else {
		r.Neighbors = make([]int64, n*k)
	}
	if cap(r.Distances) >= n*k {
		r.Distances = r.Distances[:n*k]
	} else {
		r.Distances = make([]float32, n*k)
	}
}
