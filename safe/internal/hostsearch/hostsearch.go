// Package hostsearch is the one-call search from Go memory that every
// algorithm package offers (cagra.SearchSlice, bruteforce.SearchSlice, ...):
// queries in a Go slice, results in Go slices, the device buffers in
// between kept in a Pool per index and reused.
package hostsearch

import (
	"fmt"
	"sync"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// MaxFree is how many idle buffer sets a Pool keeps: as many concurrent
// one-call searches of one shape reuse their device memory; more allocate
// and free their own.
const MaxFree = 4

// Pool keeps the device buffers of an index's one-call searches. The zero
// Pool is ready; Close frees what it keeps.
type Pool struct {
	mu     sync.Mutex
	free   []buffers
	closed bool
}

// buffers are one search's device memory: queries (of the index's element
// type), neighbors and distances.
type buffers struct {
	rows, k   int
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

// take returns idle buffers for rows queries and k neighbours, if any.
func (p *Pool) take(rows, k int) (buffers, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.free) - 1; i >= 0; i-- {
		if b := p.free[i]; b.rows == rows && b.k == k {
			p.free = append(p.free[:i], p.free[i+1:]...)
			return b, true
		}
	}
	return buffers{}, false
}

// give keeps b for later searches, or frees it (the pool is closed, or
// full: the oldest idle set goes).
func (p *Pool) give(b buffers) {
	p.mu.Lock()
	var drop []buffers
	if p.closed {
		drop = append(drop, b)
	} else {
		p.free = append(p.free, b)
		if len(p.free) > MaxFree {
			drop = append(drop, p.free[0])
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
	p.free, p.closed = nil, true
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

// Search runs search on queries (n×dim values of T, row-major, in Go
// memory) for their k nearest neighbours into out, whose slices are reused
// when large enough. The device buffers come from p and go back to it.
func Search[T dlpack.DType](op string, res *safe.Resources, p *Pool, dim int, queries []T, k int, search Searcher, out *safe.Results) error {
	if out == nil {
		return kit.Argf(op, "out", "nil *safe.Results")
	}
	if dim < 1 {
		return kit.Argf(op, "queries", "the index has dimension %d", dim)
	}
	if len(queries) == 0 || len(queries)%dim != 0 {
		return kit.Argf(op, "queries", "%d values, want a positive multiple of the index's dimension %d", len(queries), dim)
	}
	if k < 1 {
		return kit.Argf(op, "k", "%d, want at least 1", k)
	}
	rows := len(queries) / dim
	b, ok := p.take(rows, k)
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
	return nil
}

func newBuffers[T dlpack.DType](res *safe.Resources, rows, dim, k int) (b buffers, err error) {
	b = buffers{rows: rows, k: k}
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
