package bruteforce

import (
	"errors"
	"sync"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// rewrites reports whether cuVS rewrites the index's dataset in place during
// a search with metric m (distance/detail/distance.cuh's distance_impl, both
// releases): HellingerExpanded takes square roots of the dataset and of the
// queries, KLDivergence logarithms of the dataset, and both undo it on the
// stream after the distance kernel. Two such searches at once, on two
// streams, would take roots of roots; a search's queries would be written.
func rewrites(m safe.Metric) bool {
	return m == safe.HellingerExpanded || m == safe.KLDivergence
}

// exclusive serializes the searches of an index whose metric rewrites its
// dataset, each until its stream has put the dataset back, and holds
// Hellinger's copy of the queries.
type exclusive struct {
	mu sync.Mutex
	q  *safe.DeviceMatrix[uint8] // the queries' copy (Hellinger), grown as needed; freed at Close
}

func (e *exclusive) free() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.q != nil {
		_ = e.q.Close()
		e.q = nil
	}
}

// queriesCopy binds to c an n × dim tensor of dt in the index's copy of the
// queries, grown as needed. e.mu is held.
func (e *exclusive) queriesCopy(res *safe.Resources, c dlpack.Call, dev dlpack.Device, n, dim int64, dt dlpack.DataType) (*generated.DLManagedTensor, error) {
	bytes := max(n*dim*int64(dt.Bits/8), 8)
	if e.q != nil && int64(e.q.Cols()) < bytes {
		_ = e.q.Close()
		e.q = nil
	}
	if e.q == nil {
		m, err := safe.NewDeviceMatrix[uint8](res, 1, int(bytes))
		if err != nil {
			return nil, err
		}
		e.q = m
	}
	v, err := e.q.ViewMut()
	if err != nil {
		return nil, err
	}
	p, err := v.Data()
	if err != nil {
		return nil, err
	}
	mv, err := dlpack.FromRawPartsMut(p, dev, []int64{n, dim}, nil, dt)
	if err != nil {
		return nil, err
	}
	return c.Out(&mv)
}

// searchRewriting is search for a metric that rewrites the dataset: one at
// a time per index, the queries copied first for Hellinger (so that the
// caller's are never written), and the stream synchronized before the next
// may start.
func (idx *Index) searchRewriting(op string, c dlpack.Call, res *safe.Resources, t *kit.SearchTensors, f generated.CuvsFilter) error {
	idx.excl.mu.Lock()
	defer idx.excl.mu.Unlock()
	q := t.Queries
	if idx.metric == safe.HellingerExpanded {
		var err error
		if q, err = idx.excl.queriesCopy(res, c, t.Device, t.N, idx.dim, idx.dtype); err != nil {
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
	err = generated.CuvsBruteForceSearch(h, idx.h, q, t.Neighbors, t.Distances, f)
	// The stream's work (the copy, the rewrite, the distances, the undoing)
	// must be done before another search may rewrite the dataset.
	return kit.Wrap(op, errors.Join(err, generated.CuvsStreamSync(h)))
}
