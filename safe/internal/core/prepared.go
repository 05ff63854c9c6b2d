package core

import (
	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
	"github.com/cuvs-go/cuvs/safe/internal/prepared"
)

// Prepared is the shell of a package's prepared search (its Prepared
// type holds one): the bound tensors (prepared.Search), the index they
// search, and the order a run takes them in. The zero Prepared is one not
// made by Prepare: its methods say so.
type Prepared[H ~uintptr] struct {
	Index *Index[H]
	S     *prepared.Search
}

// Prepare binds a search of t (prepared.New with the Kind's names, the
// index's dimension, rows and device) inside a shared use of t, after
// check (the package's own checks of its params, in the use). dtype is the
// element type the queries must have.
func (k *Kind[T, H]) Prepare(t *T, rules *kit.SearchRules, queries, neighbors, distances dlpack.TensorMut, dtype dlpack.DataType, filter *safe.Filter, kinds []safe.FilterKind, check func(c *Index[H]) error) (Prepared[H], error) {
	op := k.Op.Prepare
	c, err := k.Enter(t, op)
	if err != nil {
		return Prepared[H]{}, err
	}
	defer c.Leave()
	if check != nil {
		if err := check(c); err != nil {
			return Prepared[H]{}, err
		}
	}
	s, err := prepared.New(op, k.Op.Prepared, rules, queries, neighbors, distances, dtype, c.Dim, c.Rows.Load(), filter, kinds...)
	if err != nil {
		return Prepared[H]{}, err
	}
	s.IndexDevice = c.Dev
	return Prepared[H]{Index: c, S: s}, nil
}

// Enter starts a run of p on res for op: it refuses a Prepared not made by
// Prepare or closed, enters the index (a shared use), refuses with
// kit.Argf when the index has shrunk under a prepared search, or changed
// under a filtered one (a filter is a bitset over the rows prepared for),
// and locks res. Unlock gives res back, Leave ends the use.
func (p *Prepared[H]) Enter(op string, res *safe.Resources) (generated.CuvsResources_t, error) {
	if p == nil || p.S == nil {
		return 0, NeverPrepared(op)
	}
	s := p.S
	if !s.Enter() {
		return 0, s.Closed()
	}
	if err := p.Index.Life.Enter(op); err != nil {
		s.Leave()
		return 0, err
	}
	if rows := p.Index.Rows.Load(); rows != s.Rows && (s.Filtered || rows < s.Rows) {
		p.Leave()
		return 0, kit.Argf(op, "index", "prepared for %d rows, the index has %d since Extend: prepare again", s.Rows, rows)
	}
	h, err := s.Lock(op, res)
	if err != nil {
		p.Leave()
		return 0, err
	}
	return h, nil
}

// Unlock gives back res, locked by Enter, and wraps err, the run's C
// call's, for op.
func (p *Prepared[H]) Unlock(op string, res *safe.Resources, err error) error {
	kit.Unlock(res)
	return kit.Wrap(op, err)
}

// Leave ends what Enter began.
func (p *Prepared[H]) Leave() {
	p.Index.Life.Leave()
	p.S.Leave()
}

// SetQueries copies src into the bound queries (prepared.Search.SetQueries);
// name is the Prepared's ("ivfsq.Prepared"), for the zero one's error.
func (p *Prepared[H]) SetQueries(name string, res *safe.Resources, src dlpack.Tensor) error {
	if p == nil || p.S == nil {
		return NeverPrepared(name + ".SetQueries")
	}
	return p.S.SetQueries(res, src)
}

// Results copies the last results out (prepared.Search.Results); name as
// for SetQueries.
func (p *Prepared[H]) Results(name string, res *safe.Resources, neighbors, distances dlpack.TensorMut) error {
	if p == nil || p.S == nil {
		return NeverPrepared(name + ".Results")
	}
	return p.S.Results(res, neighbors, distances)
}

// Close ends the borrows (prepared.Search.Close); twice, or on the zero
// Prepared, is harmless.
func (p *Prepared[H]) Close() error {
	if p == nil || p.S == nil {
		return nil
	}
	return p.S.Close()
}
