package hnsw

import (
	"math"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// SearchFiltered is a filtered Search, which the C API lacks
// (cuvsHnswSearch takes no filter): it over-fetches and drops. filter is a
// bitset (safe.NewBitsetFilter, safe.NewBitsetFilterAllowing) made for
// Rows() rows, as every package's filter; its words are read on the host
// (copied from the device on first use and kept with the filter). A nil
// filter allows every row. queries is n × Dim() row-major, in Go memory,
// and must be finite (a NaN or an infinity is refused, naming queries and
// the row); neighbors and distances receive n × k results, nearest first,
// the allowed ones only.
//
// Each query is searched for k' = k × Rows() / allowed-count (× 1.25, at
// least k) neighbors and its allowed ones kept; the queries that got fewer
// than k are searched again with k' doubled, up to k' = Rows(). Slots that
// stay unfilled (fewer than k allowed rows reachable) hold
// safe.SentinelID64U with distance +Inf. Unlike Search it allocates
// scratch memory (k' results per query, and the queries searched again).
// C calls: cuvsHnswSearch, once per round (and cuvsMatrixCopy for the
// filter's first host copy).
func SearchFiltered[T dlpack.DType](res *safe.Resources, idx *Index, params *SearchParams, queries []T, k int, filter *safe.Filter, neighbors []uint64, distances []float32) error {
	const op = "hnsw.SearchFiltered"
	if idx == nil {
		return kit.NilIndex(op)
	}
	if err := idx.c.Life.Built(op); err != nil { // a zero index says so, before its arguments are checked
		return err
	}
	if dlpack.DataTypeOf[T]() != idx.DType() {
		return kit.Argf(op, "queries", "dtype %s, the index holds %s", dlpack.DataTypeOf[T](), idx.DType())
	}
	dim := idx.Dim()
	rows := idx.Rows()
	if dim < 1 || len(queries)%dim != 0 {
		return kit.Argf(op, "queries", "%d values, not a multiple of the dimension %d", len(queries), dim)
	}
	n := len(queries) / dim
	if err := kit.CheckFiniteSlice(op, "queries", queries, dim); err != nil {
		return err
	}
	if k < 1 || k > rows {
		return kit.Argf(op, "k", "%d, want 1 to Rows() = %d", k, rows)
	}
	if len(neighbors) != n*k || len(distances) != n*k {
		return kit.Argf(op, "neighbors/distances", "%d and %d slots for %d queries × k = %d", len(neighbors), len(distances), n, k)
	}
	if err := kit.CheckFilter(filter, op, int64(rows), int64(n), safe.Bitset); err != nil {
		return err
	}
	if filter == nil {
		if n == 0 {
			return nil
		}
		qm, err := dlpack.NewHostMatrix(queries, n, dim)
		if err != nil {
			return kit.Argf(op, "queries", "%w", err)
		}
		nm, _ := dlpack.NewHostMatrix(neighbors, n, k)
		dm, _ := dlpack.NewHostMatrix(distances, n, k)
		return idx.Search(res, params, qm, nm, dm)
	}
	allowed, err := kit.FilterHostWords(filter, op, res)
	if err != nil {
		return err
	}
	count := filter.Allowed()
	for i := range neighbors {
		neighbors[i], distances[i] = safe.SentinelID64U, float32(math.Inf(1))
	}
	if count == 0 || n == 0 {
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
		q := make([]T, m*dim)
		for j, qi := range pending {
			copy(q[j*dim:(j+1)*dim], queries[qi*dim:(qi+1)*dim])
		}
		nb := make([]uint64, m*kk)
		ds := make([]float32, m*kk)
		qm, err := dlpack.NewHostMatrix(q, m, dim)
		if err != nil {
			return kit.Argf(op, "queries", "%w", err)
		}
		nm, _ := dlpack.NewHostMatrix(nb, m, kk)
		dm, _ := dlpack.NewHostMatrix(ds, m, kk)
		if err := idx.Search(res, params, qm, nm, dm); err != nil {
			return err
		}
		last := kk == rows
		next := pending[:0]
		for j, qi := range pending {
			got := 0
			out := neighbors[qi*k : (qi+1)*k]
			outD := distances[qi*k : (qi+1)*k]
			for c := range out {
				out[c], outD[c] = safe.SentinelID64U, float32(math.Inf(1))
			}
			for c := 0; c < kk && got < k; c++ {
				id := nb[j*kk+c]
				if id >= uint64(rows) || allowed[id/32]>>(id%32)&1 == 0 {
					continue
				}
				out[got], outD[got] = id, ds[j*kk+c]
				got++
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
