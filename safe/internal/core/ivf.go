package core

import (
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/ivffilter"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// IVF is what the IVF packages whose searches take a bitset (ivfflat,
// ivfsq) share beyond Index: the lists, and the pinned buffers of the
// filter policy's second look (ivffilter).
type IVF struct {
	NLists int64
	Hosts  ivffilter.Pool
}

// IVFCall is an IVF algorithm's C search of the bound tensors, probing
// probes lists, with filter f.
type IVFCall func(res *safe.Resources, h generated.CuvsResources_t, probes uint32, q, n, d *generated.DLManagedTensor, f generated.CuvsFilter) error

// IVFSearch is one search's request, resolved by its package.
type IVFSearch struct {
	Path   ivffilter.Path  // the params' FilterPath
	Probes uint32          // the params' probes
	DType  dlpack.DataType // the element type the queries must have
	Filter *safe.Filter    // a bitset, or nil
}

// AllLists is the probes of the exact path: every list.
func (v *IVF) AllLists() uint32 { return uint32(min(max(v.NLists, 1), 1<<31)) }

// Plan is the filter policy's plan for a search of k neighbours over rows
// rows (see ivffilter.Decide).
func (v *IVF) Plan(s *IVFSearch, rows, k int64) ivffilter.Plan {
	allowed := rows
	if s.Filter != nil {
		allowed = int64(s.Filter.Allowed())
	}
	return ivffilter.Decide(s.Path, s.Probes, v.NLists, rows, allowed, k, s.Filter != nil)
}

// SearchIVF is an IVF package's Index.Search after its params are
// resolved into s: the index's device, the tensors against rules, the
// filter bound, and the plan run (ivffilter.Run) with call.
func (c *Index[H]) SearchIVF(v *IVF, op string, call dlpack.Call, res *safe.Resources, rules *kit.SearchRules, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, s *IVFSearch, search IVFCall) error {
	if err := kit.CheckIndexDevice(res, op, c.Dev); err != nil {
		return err
	}
	rows := c.Rows.Load()
	var t kit.SearchTensors
	if err := rules.Bind(op, call, queries, neighbors, distances, s.DType, c.Dim, rows, &t); err != nil {
		return err
	}
	f, err := kit.BindFilter(s.Filter, op, call, rows, t.N, safe.Bitset)
	if err != nil {
		return err
	}
	plan := v.Plan(s, rows, t.K)
	ft := ivffilter.Tensors{Q: t.Queries, N: t.Neighbors, D: t.Distances, Rows: t.N, K: t.K, QRowSize: RowBytes(t.Queries)}
	return ivffilter.Run(op, res, &v.Hosts, plan, v.AllLists(), &ft, func(res *safe.Resources, h generated.CuvsResources_t, probes uint32, q, n, d *generated.DLManagedTensor) error {
		return search(res, h, probes, q, n, d, f)
	})
}

// IVFPrepared is Prepared with the filter policy's plan: Run is one C
// call, or with the plan's second look a copy of the distances, a sync and
// a C call per run of short queries (into Host, pinned, the Prepared's).
type IVFPrepared[H ~uintptr] struct {
	Prepared[H]
	Plan ivffilter.Plan
	All  uint32 // every list: the second look's probes
	Host *ivffilter.Host
	T    ivffilter.Tensors
}

// PrepareIVF is Kind.Prepare for an IVF package: s as for SearchIVF
// (its DType the queries'), check the package's checks of its params.
func PrepareIVF[T any, H ~uintptr](k *Kind[T, H], t *T, v *IVF, rules *kit.SearchRules, queries, neighbors, distances dlpack.TensorMut, s *IVFSearch, check func(*Index[H]) error) (*IVFPrepared[H], error) {
	p, err := k.Prepare(t, rules, queries, neighbors, distances, s.DType, s.Filter, []safe.FilterKind{safe.Bitset}, check)
	if err != nil {
		return nil, err
	}
	ps := p.S
	q := &IVFPrepared[H]{Prepared: p, Plan: v.Plan(s, ps.Rows, ps.K()), All: v.AllLists()}
	q.T = ivffilter.Tensors{Q: ps.Queries, N: ps.Neighbors, D: ps.Distances, Rows: ps.N(), K: ps.K(), QRowSize: RowBytes(ps.Queries)}
	if q.Plan.Repair {
		if q.Host, err = ivffilter.NewHost(q.T.Rows, q.T.K); err != nil {
			ps.Close()
			return nil, err
		}
	}
	return q, nil
}

// Run searches once on res with search (probes lists), then takes the
// plan's second look.
func (p *IVFPrepared[H]) Run(op string, res *safe.Resources, search IVFCall) error {
	if p == nil {
		return NeverPrepared(op)
	}
	h, err := p.Enter(op, res)
	if err != nil {
		return err
	}
	s := p.S
	err = p.Unlock(op, res, search(res, h, p.Plan.Probes, s.Queries, s.Neighbors, s.Distances, s.Filter))
	if err == nil && p.Plan.Repair {
		err = ivffilter.Repair(op, res, p.Host, p.Plan, p.All, &p.T, func(res *safe.Resources, h generated.CuvsResources_t, probes uint32, q, n, d *generated.DLManagedTensor) error {
			return search(res, h, probes, q, n, d, s.Filter)
		})
	}
	p.Leave()
	return err
}

// Close ends the borrows and frees the second look's buffer.
func (p *IVFPrepared[H]) Close() error {
	if p == nil {
		return nil
	}
	err := p.Prepared.Close()
	if p.Host != nil {
		if e := p.Host.Close(); err == nil {
			err = e
		}
		p.Host = nil
	}
	return err
}

// RowBytes is the size of one row of a bound, packed row-major matrix.
func RowBytes(mt *generated.DLManagedTensor) int64 {
	dl := &mt.DlTensor
	cols := *(*int64)(unsafe.Add(unsafe.Pointer(dl.Shape), 8))
	return cols * int64(dl.Dtype.Bits) / 8 * int64(max(dl.Dtype.Lanes, 1))
}

// SetQueries is Prepared.SetQueries, for a nil p too.
func (p *IVFPrepared[H]) SetQueries(name string, res *safe.Resources, src dlpack.Tensor) error {
	if p == nil {
		return NeverPrepared(name + ".SetQueries")
	}
	return p.Prepared.SetQueries(name, res, src)
}

// Results is Prepared.Results, for a nil p too.
func (p *IVFPrepared[H]) Results(name string, res *safe.Resources, neighbors, distances dlpack.TensorMut) error {
	if p == nil {
		return NeverPrepared(name + ".Results")
	}
	return p.Prepared.Results(name, res, neighbors, distances)
}
