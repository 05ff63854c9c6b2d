// Package hostsearch is the one-call search from Go memory that every
// algorithm package offers (cagra.SearchSlice, bruteforce.SearchSlice, ...):
// queries in a Go slice, results in Go slices, the device buffers in
// between kept in a Pool per index and reused.
package hostsearch

import (
	"fmt"
	"math"
	"sync"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// What a Pool keeps idle: at most MaxFree buffer sets, of at most
// MaxFreeBytes of device memory in all. As many concurrent one-call
// searches of one shape reuse their device memory; more, or a set larger
// than MaxFreeBytes, allocate and free their own.
const (
	MaxFree      = 4
	MaxFreeBytes = 64 << 20
)

// Pool keeps the device buffers of an index's one-call searches, by query
// element type and shape. The zero Pool is ready; Close frees what it
// keeps.
type Pool struct {
	mu     sync.Mutex
	free   []buffers
	bytes  int64 // device memory of free
	closed bool
}

// buffers are one search's device memory: queries (of element type dtype),
// neighbors and distances.
type buffers struct {
	dtype     dlpack.DataType
	rows, k   int
	bytes     int64
	queries   interface{ Close() error }
	neighbors *safe.DeviceMatrix[int64]
	distances *safe.DeviceMatrix[float32]
}

func (b *buffers) close() error {
	var first error
	for _, c := range []interface{ Close() error }{b.queries, b.neighbors, b.distances} {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Idle returns how many buffer sets p keeps and their device memory in
// bytes, for tests.
func (p *Pool) Idle() (sets int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free), p.bytes
}

// take returns idle buffers for rows queries of type dt and k neighbours,
// if any.
func (p *Pool) take(dt dlpack.DataType, rows, k int) (buffers, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.free) - 1; i >= 0; i-- {
		if b := p.free[i]; b.dtype == dt && b.rows == rows && b.k == k {
			p.free = append(p.free[:i], p.free[i+1:]...)
			p.bytes -= b.bytes
			return b, true
		}
	}
	return buffers{}, false
}

// give keeps b for later searches, or frees it: the pool is closed, b
// alone exceeds MaxFreeBytes, or the oldest idle sets go until the pool
// is within MaxFree and MaxFreeBytes.
func (p *Pool) give(b buffers) {
	p.mu.Lock()
	var drop []buffers
	if p.closed || b.bytes > MaxFreeBytes {
		drop = append(drop, b)
	} else {
		p.free = append(p.free, b)
		p.bytes += b.bytes
		for len(p.free) > MaxFree || p.bytes > MaxFreeBytes {
			drop = append(drop, p.free[0])
			p.bytes -= p.free[0].bytes
			p.free = append(p.free[:0], p.free[1:]...)
		}
	}
	p.mu.Unlock()
	for i := range drop {
		_ = drop[i].close()
	}
}

// Close frees the idle buffers; buffers in use are freed when their search
// ends. Closing twice is harmless.
func (p *Pool) Close() error {
	p.mu.Lock()
	free := p.free
	p.free, p.bytes, p.closed = nil, 0, true
	p.mu.Unlock()
	var first error
	for i := range free {
		if err := free[i].close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Searcher runs one search of device tensors: queries [n, dim], neighbors
// (int64) and distances (float32) [n, k].
type Searcher func(res *safe.Resources, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut) error

// Spec is what a one-call search checks before it allocates anything: the
// index's shape, the query element types it takes, and the algorithm's
// own cheap checks.
//
// Nothing in a Spec escapes (errors format copies of its fields), so a
// Spec and its Check closure live on the caller's stack: keep it so, or
// every search allocates.
type Spec struct {
	Dim    int               // the index's dimension
	Rows   int               // the index's rows: k's bound
	DTypes []dlpack.DataType // the query element types the index takes now
	// Check, if not nil, makes the algorithm's other checks of a search
	// of n queries for k neighbours (resources, params, filter), before
	// any allocation.
	Check func(n, k int) error
}

// Search runs search on queries (n×dim values of T, row-major, in Go
// memory) for their k nearest neighbours into out, whose slices are reused
// when large enough. Every argument is checked first — out, the queries'
// element type and length, k against the index's rows, s.Check, and the
// queries' values (no NaN or infinity) — and only then are device buffers
// taken from p (or allocated); they go back to it. Unfilled slots come out
// as safe.SentinelID64 with distance +Inf (kit.Unfilled).
func Search[T dlpack.DType](op string, res *safe.Resources, p *Pool, s *Spec, queries []T, k int, search Searcher, out *safe.Results) error {
	if out == nil {
		return kit.Argf(op, "out", "nil *safe.Results")
	}
	dt := dlpack.DataTypeOf[T]()
	ok := false
	for _, t := range s.DTypes {
		ok = ok || t == dt
	}
	if !ok {
		return kit.Argf(op, "queries", "element type %s, the index takes %s", dt, typeList(s.DTypes))
	}
	dim := s.Dim
	if dim < 1 {
		return kit.Argf(op, "queries", "the index has dimension %d", dim)
	}
	if len(queries) == 0 || len(queries)%dim != 0 {
		return kit.Argf(op, "queries", "%d values, want a positive multiple of the index's dimension %d", len(queries), dim)
	}
	rows := len(queries) / dim
	if k < 1 {
		return kit.Argf(op, "k", "%d, want at least 1", k)
	}
	if k > s.Rows {
		return kit.Argf(op, "k", "%d exceeds the %d rows of the index", k, s.Rows)
	}
	if int64(rows) > math.MaxInt64/12/int64(k) {
		return kit.Argf(op, "k", "%d neighbours for %d queries overflow", k, rows)
	}
	if s.Check != nil {
		if err := s.Check(rows, k); err != nil {
			return err
		}
	}
	if err := kit.CheckFiniteSlice(op, "queries", queries, dim); err != nil {
		return err
	}
	b, ok := p.take(dt, rows, k)
	if !ok {
		var err error
		if b, err = newBuffers[T](res, rows, dim, k); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	defer p.give(b)
	q := b.queries.(*safe.DeviceMatrix[T])
	if err := q.CopyFromHost(res, queries); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := search(res, q, b.neighbors, b.distances); err != nil {
		return err
	}
	resize(out, rows, k)
	// Each copy waits for the work queued before it on res's stream.
	if err := b.neighbors.CopyToHost(res, out.Neighbors); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := b.distances.CopyToHost(res, out.Distances); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	kit.Unfilled(out.Neighbors, out.Distances)
	return nil
}

// typeList formats ts without letting ts escape.
func typeList(ts []dlpack.DataType) string {
	out := ""
	for i := range ts {
		if i > 0 {
			out += " or "
		}
		out += ts[i].String()
	}
	return out
}

func newBuffers[T dlpack.DType](res *safe.Resources, rows, dim, k int) (b buffers, err error) {
	b = buffers{dtype: dlpack.DataTypeOf[T](), rows: rows, k: k}
	b.bytes = int64(rows)*int64(dim)*b.dtype.ElemSize() + int64(rows)*int64(k)*12
	q, err := safe.NewDeviceMatrix[T](res, rows, dim)
	if err != nil {
		return b, err
	}
	b.queries = q
	if b.neighbors, err = safe.NewDeviceMatrix[int64](res, rows, k); err != nil {
		q.Close()
		return b, err
	}
	if b.distances, err = safe.NewDeviceMatrix[float32](res, rows, k); err != nil {
		q.Close()
		b.neighbors.Close()
		return b, err
	}
	return b, nil
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
