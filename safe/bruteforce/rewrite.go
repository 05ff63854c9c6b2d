package bruteforce

import (
	"errors"
	"sync"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// exclusive is what the searches of an index need whose metric cuVS
// computes by rewriting the dataset in place (kit.RewritesInputs:
// HellingerExpanded, KLDivergence): one search at a time, each until its
// stream has undone the rewrite (two at once, on two streams, would take
// roots of roots), and, where the queries are rewritten too (Hellinger),
// a copy of them, so that the caller's are never written.
type exclusive struct {
	mu      sync.Mutex
	queries bool                      // the queries are rewritten: search a copy
	q       *safe.DeviceMatrix[uint8] // that copy, grown as needed; freed at Close
	shape   [2]int64                  // its shape for the search at hand
}

// newExclusive returns what a search with metric m needs, or nil when cuVS
// leaves the dataset alone.
func newExclusive(m safe.Metric) *exclusive {
	queries, dataset := kit.RewritesInputs(m)
	if !dataset {
		return nil
	}
	return &exclusive{queries: queries}
}

func (e *exclusive) free() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.q != nil {
		_ = e.q.Close()
		e.q = nil
	}
}

// searchRewriting is search for a metric that rewrites the dataset (see
// exclusive).
func (idx *Index) searchRewriting(op string, c dlpack.Call, res *safe.Resources, t *kit.SearchTensors, f generated.CuvsFilter) error {
	e := idx.excl
	e.mu.Lock()
	defer e.mu.Unlock()
	q := t.Queries
	if e.queries {
		p, err := kit.DeviceScratch(res, &e.q, t.N*idx.c.Dim*int64(idx.dtype.Bits/8))
		if err != nil {
			return kit.Wrap(op, err)
		}
		e.shape = [2]int64{t.N, idx.c.Dim}
		if q, err = kit.OutRaw(c, p, t.Device, &e.shape, idx.dtype); err != nil {
			return kit.Wrap(op, err)
		}
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(res)
	if q != t.Queries {
		if err := generated.CuvsMatrixCopy(h, t.Queries, q); err != nil {
			return kit.Wrap(op, err)
		}
	}
	err = generated.CuvsBruteForceSearch(h, idx.c.H, q, t.Neighbors, t.Distances, f)
	// The stream's work (the copy, the rewrite, the distances, the undoing)
	// must be done before another search may rewrite the dataset.
	return kit.Wrap(op, errors.Join(err, generated.CuvsStreamSync(h)))
}
