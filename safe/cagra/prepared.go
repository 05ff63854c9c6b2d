package cagra

import (
	"fmt"
	"runtime"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/handle"
)

// Prepared is a search checked and bound once and run many times: the
// serving loop's hot path. Prepare validates its tensors and parameters and
// binds the tensors for the Prepared's whole life, so that Run is one C call
// plus two atomic counters and the resources' lock; Index.Search redoes all
// of that on every call.
//
// While it lives, a Prepared holds its three tensors exclusively (and its
// filter shared): their owners refuse to be freed, written or read by
// anyone else. Write the next batch of queries with SetQueries and read the
// results with Results, which copy through the bound tensors. Close ends the
// borrows. A Prepared is used by one goroutine at a time; give each serving
// goroutine its own, with its own Resources and buffers.
type Prepared struct {
	idx      *Index
	call     dlpack.Call
	params   *generated.CuvsCagraSearchParams // Go memory without pointers, read by C
	q, n, d  *generated.DLManagedTensor       // C memory, bound to call
	filter   generated.CuvsFilter
	filtered bool
	rows     int64 // the index's rows when prepared, for the filter
	qShape   [2]int64
	qDType   dlpack.DataType
	nShape   [2]int64
	nDType   dlpack.DataType
	state    handle.State
	clean    runtime.Cleanup
}

// Prepare checks a search of queries (n × Dim(), device memory) into
// neighbors (uint32 or int64, n × k) and distances (float32, n × k) with
// params and an optional bitset filter, exactly as Search would, and binds
// the tensors for repeated Runs.
func (idx *Index) Prepare(params *SearchParams, queries, neighbors, distances dlpack.TensorMut, filter *safe.Filter) (*Prepared, error) {
	const op = "cagra.Index.Prepare"
	if err := idx.enter(op); err != nil {
		return nil, err
	}
	defer idx.state.Leave()
	if params == nil || queries == nil || neighbors == nil || distances == nil {
		return nil, safe.Argf(op, "params/queries/neighbors/distances", "nil")
	}
	if err := params.validate(op); err != nil {
		return nil, err
	}
	qm, err := queries.ViewMut()
	if err != nil {
		return nil, safe.Argf(op, "queries", "%v", err)
	}
	nm, err := neighbors.ViewMut()
	if err != nil {
		return nil, safe.Argf(op, "neighbors", "%v", err)
	}
	dm, err := distances.ViewMut()
	if err != nil {
		return nil, safe.Argf(op, "distances", "%v", err)
	}
	if err := searchRules.Queries.CheckMut(op, &qm); err != nil {
		return nil, err
	}
	if qm.DType() != idx.dtype {
		return nil, safe.Argf(op, "queries", "dtype %s, the index holds %s", qm.DType(), idx.dtype)
	}
	if err := searchRules.Neighbors.CheckMut(op, &nm); err != nil {
		return nil, err
	}
	if err := searchRules.Distances.CheckMut(op, &dm); err != nil {
		return nil, err
	}
	qv, _ := qm.View()
	rows := idx.rows.Load()
	if _, err := safe.SearchShapesMut(op, &qv, &nm, &dm, idx.dim, rows); err != nil {
		return nil, err
	}
	p := &Prepared{
		idx: idx, rows: rows, filtered: filter != nil,
		qShape: [2]int64{qm.Dim(0), qm.Dim(1)}, qDType: qm.DType(),
		nShape: [2]int64{nm.Dim(0), nm.Dim(1)}, nDType: nm.DType(),
	}
	cp := params.cValue()
	p.params = &cp
	p.call = dlpack.Begin(op)
	// The queries are bound writable: the Prepared, not its caller, writes
	// them (SetQueries).
	if p.q, err = p.call.Out(&qm); err != nil {
		p.call.End()
		return nil, safe.Argf(op, "queries", "%v", err)
	}
	if p.n, err = p.call.Out(&nm); err != nil {
		p.call.End()
		return nil, safe.Argf(op, "neighbors", "%v", err)
	}
	if p.d, err = p.call.Out(&dm); err != nil {
		p.call.End()
		return nil, safe.Argf(op, "distances", "%v", err)
	}
	if p.filter, err = filter.Bind(op, p.call, rows, qm.Dim(0), safe.Bitset); err != nil {
		p.call.End()
		return nil, err
	}
	// A Prepared dropped without Close still ends its borrows.
	p.clean = runtime.AddCleanup(p, dlpack.Call.End, p.call)
	return p, nil
}

// Run searches once, on res's stream: the results are ready once res is
// synchronized (Results does it). It allocates nothing and makes one C call
// (cuvsCagraSearch).
func (p *Prepared) Run(res *safe.Resources) error {
	const op = "cagra.Prepared.Run"
	if !p.state.Enter() {
		return errPreparedClosed
	}
	if err := p.idx.enter(op); err != nil {
		p.state.Leave()
		return err
	}
	if p.filtered && p.idx.rows.Load() != p.rows {
		p.idx.state.Leave()
		p.state.Leave()
		return safe.Argf(op, "filter", "made for %d rows, the index has %d since Extend: prepare again", p.rows, p.idx.rows.Load())
	}
	h, err := res.Lock(op)
	if err == nil {
		err = generated.CuvsCagraSearch(h, p.params, p.idx.h, p.q, p.n, p.d, p.filter)
		res.Unlock()
		err = safe.Wrap(op, err)
	}
	p.idx.state.Leave()
	p.state.Leave()
	return err
}

var errPreparedClosed = fmt.Errorf("cagra.Prepared: %w", safe.ErrClosed)

// SetQueries copies src (the prepared queries' shape and element type; host
// or device memory) into the bound queries and waits for the copy
// (cuvsMatrixCopy, cuvsStreamSync).
func (p *Prepared) SetQueries(res *safe.Resources, src dlpack.Tensor) error {
	const op = "cagra.Prepared.SetQueries"
	if src == nil {
		return safe.Argf(op, "src", "nil")
	}
	sv, err := src.View()
	if err != nil {
		return safe.Argf(op, "src", "%v", err)
	}
	if err := p.checkShape(op, "src", sv.DType(), sv.NDim(), sv.Dim, p.qDType, p.qShape); err != nil {
		return err
	}
	if sv.Dim(1) > 1 && sv.Stride(1) != 1 {
		return safe.Argf(op, "src", "strides %v: rows must be contiguous", sv.Strides())
	}
	return p.copy(op, res, func(c dlpack.Call) (s, d *generated.DLManagedTensor, err error) {
		s, err = c.In(&sv)
		return s, p.q, err
	})
}

// Results copies the last results into neighbors and distances (either may
// be nil; the prepared shapes and element types; host or device memory) and
// waits for the search and the copies.
func (p *Prepared) Results(res *safe.Resources, neighbors, distances dlpack.TensorMut) error {
	const op = "cagra.Prepared.Results"
	for i, t := range []dlpack.TensorMut{neighbors, distances} {
		if t == nil {
			continue
		}
		arg, src, dt := "neighbors", p.n, p.nDType
		if i == 1 {
			arg, src, dt = "distances", p.d, dlpack.Float32
		}
		m, err := t.ViewMut()
		if err != nil {
			return safe.Argf(op, arg, "%v", err)
		}
		if err := p.checkShape(op, arg, m.DType(), m.NDim(), m.Dim, dt, p.nShape); err != nil {
			return err
		}
		if m.Dim(1) > 1 && m.Stride(1) != 1 {
			return safe.Argf(op, arg, "strides %v: rows must be contiguous", m.Strides())
		}
		if err := p.copy(op, res, func(c dlpack.Call) (s, d *generated.DLManagedTensor, err error) {
			d, err = c.Out(&m)
			return src, d, err
		}); err != nil {
			return err
		}
	}
	return nil
}

func (p *Prepared) checkShape(op, arg string, dt dlpack.DataType, ndim int, dim func(int) int64, want dlpack.DataType, shape [2]int64) error {
	if dt != want || ndim != 2 || dim(0) != shape[0] || dim(1) != shape[1] {
		return safe.Argf(op, arg, "want %s [%d %d]", want, shape[0], shape[1])
	}
	return nil
}

func (p *Prepared) copy(op string, res *safe.Resources, bind func(dlpack.Call) (src, dst *generated.DLManagedTensor, err error)) error {
	if !p.state.Enter() {
		return errPreparedClosed
	}
	defer p.state.Leave()
	c := dlpack.Begin(op)
	defer c.End()
	s, d, err := bind(c)
	if err != nil {
		return safe.Argf(op, "tensor", "%v", err)
	}
	h, err := res.Lock(op)
	if err != nil {
		return err
	}
	defer res.Unlock()
	if err := generated.CuvsMatrixCopy(h, s, d); err != nil {
		return safe.Wrap(op, err)
	}
	return safe.Wrap(op, generated.CuvsStreamSync(h))
}

// Close ends the Prepared's borrows, waiting for a Run or copy in flight.
// Closing twice is harmless.
func (p *Prepared) Close() error {
	if p.state.Close() {
		p.clean.Stop()
		p.call.End()
	}
	return nil
}
