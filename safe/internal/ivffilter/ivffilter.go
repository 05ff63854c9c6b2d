// Package ivffilter is the filtered-search policy of the IVF packages
// (ivfflat, ivfsq): how many lists a filtered search probes, when it
// probes them all, and the second pass that re-searches, with every list,
// the queries that came back short.
//
// An IVF search sees only the rows of the lists it probes: with a filter
// allowing a fraction f of the rows, the k nearest allowed rows of a query
// lie further out (about as far as its k/f nearest rows overall), and with
// few probes many are in lists the search never reads. On the test double
// (N = 20,000, D = 64 uniform, 1,024 lists, 20 probes, 200 queries from
// the dataset, k = 10; recall against the exact answer among the allowed
// rows), unfiltered recall@10 is 0.421 and filtered recall at the same 20
// probes is 0.369 (50% allowed), 0.316 (20%), 0.273 (10%), 0.192 (2%),
// 0.050 (0.1%). The probes that bring each back to 0.421 − 0.03 = 0.391:
// about 25 (50%), 32 (20%), 40 (10%), 60 (2%), 200 (0.1%), i.e. 20 ×
// f^(-1/3) (1.26, 1.71, 2.15, 3.68, 10). Recall at 2% rose to 0.466 with
// 80 probes and 0.649 with 160, at 10% to 0.539 with 80.
//
// f^(-1/3) left margins of 0.00 to 0.02 over the floor on the tests' 100
// queries (IVF-SQ at 50%: 0.384 against a floor of 0.384), so the policy
// raises the probes by f^(-1/2) (1.41 at 50%, 3.16 at 10%), and to at
// least 8 × k × lists / allowed, enough lists to hold eight times k allowed
// rows on average (it decides at 2%: 205 probes). Four times k was enough
// at N = 20,000 but not at the tests' second size, N = 8,000 (~8 rows a
// list): IVF-SQ at 10% allowed gave 0.494 against a floor of 0.501 with 64
// probes, 0.605 with eight times k (103 probes); at 50% allowed neither
// bound moves the f^(-1/2) probes, so the cost there is unchanged. With those, the tests'
// recall@10 (unfiltered 0.410 IVF-Flat, 0.414 IVF-SQ) is, at 50, 20, 10,
// 2%: 0.436, 0.452, 0.482, 0.603 (IVF-Flat) and 0.400, 0.471, 0.467, 0.569
// (IVF-SQ) with four times k (the 2% figures are higher with eight: 0.701
// for IVF-SQ); at 0.1% and 3 rows the raised probes pass half the lists and
// every list is probed (1.000 and 0.995). Probing every list instead of
// more than half of them costs at most twice the raised search and needs
// no second pass.
//
// On the real library (cuVS 26.08.01, H200) f^(-1/2) was not enough:
// IVF-Flat at N = 8,000, 50% allowed, kept 0.301 with the policy's 29
// probes against an unfiltered 0.377 at 20 (floor 0.347). cuVS's filtered
// IVF scan drops the rejected rows inside the probed lists (the bitset is
// tested per row as a list is scanned: sample_filter in
// cpp/src/neighbors/ivf_flat/detail/jit_lto_kernels/
// interleaved_scan_impl.cuh marks a rejected row invalid), so a probe brings f times the candidates an unfiltered
// one does, and 0.301 at 29 probes is about what an unfiltered search gets
// from 29 × 0.5 ≈ 15. The probes are therefore raised by 1/f (Exponent 1):
// the filtered search reads as many allowed rows as the unfiltered one
// reads rows (40 probes at 50%, 100 at 20%, every list from 5% down with
// 1,024 lists and 20 probes), still at least ListsPerK × k × lists /
// allowed. The double, which also drops rejected rows per list, gave more
// than the real library with fewer probes: its lists are not cuVS's
// balanced k-means lists.
package ivffilter

import (
	"math"
	"sync"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Path is a SearchParams.FilterPath (a safe.FilterPath) as the policy
// takes it: Path(sp.FilterPath).
type Path int

// The paths, safe's values.
const (
	Auto  = Path(safe.FilterAuto)
	Index = Path(safe.FilterIndex)
	Exact = Path(safe.FilterExact)
)

// The policy's constants (see the package doc for where they come from).
const (
	// Exponent: the probes of a filtered search are the caller's times
	// (rows/allowed)^Exponent (1/3 was the double's fit, 1/2 fell short
	// on the real library; 1: as many allowed rows read as an unfiltered
	// search reads rows).
	Exponent = 1.0
	// ListsPerK: the probed lists hold, on average, at least ListsPerK × k
	// allowed rows (probes ≥ ListsPerK × k × lists / allowed).
	ListsPerK = 8
	// ExactAbove: when the raised probes exceed this fraction of the
	// lists, every list is probed instead (at most 1/ExactAbove times the
	// raised search's scan, and no second pass).
	ExactAbove = 0.5
)

// Plan is what a search runs.
type Plan struct {
	Probes uint32 // the lists each query probes
	Repair bool   // read the results and re-search short queries with every list
	Want   int64  // min(k, allowed): the slots that must be filled
}

// Decide returns the plan of a search of k neighbours probing probes of
// nLists lists with path, over an index of rows rows of which allowed pass
// the filter (filtered false: no filter).
func Decide(path Path, probes uint32, nLists, rows, allowed, k int64, filtered bool) Plan {
	all := uint32(min(nLists, math.MaxUint32))
	if nLists < 1 {
		all = probes
	}
	want := k
	if filtered && allowed < want {
		want = allowed
	}
	if !filtered || path == Index {
		return Plan{Probes: probes, Want: want}
	}
	if path == Exact || allowed < 1 {
		return Plan{Probes: all, Want: want}
	}
	if allowed >= rows || int64(probes) >= nLists {
		return Plan{Probes: probes, Want: want}
	}
	p := math.Ceil(float64(probes) * math.Pow(float64(rows)/float64(allowed), Exponent))
	p = max(p, math.Ceil(ListsPerK*float64(k)*float64(nLists)/float64(allowed)))
	if p > ExactAbove*float64(nLists) {
		return Plan{Probes: all, Want: want}
	}
	return Plan{Probes: uint32(p), Repair: true, Want: want}
}

// Call is one C search of the bound tensors with probes lists.
type Call func(res *safe.Resources, h generated.CuvsResources_t, probes uint32, q, n, d *generated.DLManagedTensor) error

// Run runs plan on the bound tensors t with search: one C call, and with
// plan.Repair, a copy of the distances into host (pinned memory from hp),
// and the queries with fewer than plan.Want slots filled searched again
// with all lists, a run of consecutive ones per C call. It allocates
// nothing once hp holds a buffer of the size.
func Run(op string, res *safe.Resources, hp *Pool, plan Plan, all uint32, t *Tensors, search Call) error {
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = search(res, h, plan.Probes, t.Q, t.N, t.D)
	kit.Unlock(res)
	if err != nil || !plan.Repair || plan.Want < 1 {
		return kit.Wrap(op, err)
	}
	buf, err := hp.take(t.Rows, t.K)
	if err != nil {
		return err
	}
	defer hp.give(buf)
	return repair(op, res, buf, plan, all, t, search)
}

// Tensors are a search's bound tensors and their shape.
type Tensors struct {
	Q, N, D  *generated.DLManagedTensor
	Rows, K  int64
	QRowSize int64 // bytes per query row
}

// repair reads the distances and re-searches the short queries.
func repair(op string, res *safe.Resources, buf *Host, plan Plan, all uint32, t *Tensors, search Call) error {
	if err := kit.CopyBound(op, res, t.D, buf.mt); err != nil {
		return err
	}
	d := buf.m.Data()
	short := func(q int64) bool {
		v := d[q*t.K+plan.Want-1]
		return math.IsInf(float64(v), 0) || math.IsNaN(float64(v))
	}
	for q := int64(0); q < t.Rows; {
		if !short(q) {
			q++
			continue
		}
		end := q + 1
		for end < t.Rows && short(end) {
			end++
		}
		if err := SearchRows(op, res, t, q, end, all, search); err != nil {
			return err
		}
		q = end
	}
	return nil
}

// SearchRows searches queries [from, to) again with probes lists, in
// place: the bound tensors are narrowed to those rows for the call and
// restored after it.
func SearchRows(op string, res *safe.Resources, t *Tensors, from, to int64, probes uint32, search Call) error {
	type saved struct {
		data unsafe.Pointer
		rows int64
	}
	ts := [3]*generated.DLManagedTensor{t.Q, t.N, t.D}
	rowBytes := [3]int64{t.QRowSize, t.K * 8, t.K * 4}
	var old [3]saved
	for i, mt := range ts {
		old[i] = saved{mt.DlTensor.Data, *mt.DlTensor.Shape}
		mt.DlTensor.Data = unsafe.Add(mt.DlTensor.Data, from*rowBytes[i])
		*mt.DlTensor.Shape = to - from
	}
	h, err := kit.Lock(res, op)
	if err == nil {
		err = kit.Wrap(op, search(res, h, probes, t.Q, t.N, t.D))
		kit.Unlock(res)
	}
	for i, mt := range ts {
		mt.DlTensor.Data = old[i].data
		*mt.DlTensor.Shape = old[i].rows
	}
	return err
}

// Host is a pinned rows×k float32 buffer with its tensor bound to a call
// of its own, for the copies of a search's distances.
type Host struct {
	m       *safe.PinnedMatrix[float32]
	call    dlpack.Call
	mt      *generated.DLManagedTensor
	rows, k int64
}

// NewHost allocates a Host.
func NewHost(rows, k int64) (*Host, error) {
	m, err := safe.NewPinnedMatrix[float32](int(rows), int(k))
	if err != nil {
		return nil, err
	}
	b := &Host{m: m, rows: rows, k: k, call: dlpack.Begin("ivffilter.Host")}
	vm, err := m.ViewMut()
	if err == nil {
		b.mt, err = b.call.Out(&vm)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Close frees the buffer.
func (b *Host) Close() error {
	b.call.End()
	return b.m.Close()
}

// Repair is Run's second half for a search already made (a Prepared's
// Run): with plan.Repair, it reads the distances into buf and re-searches
// the short queries with all lists.
func Repair(op string, res *safe.Resources, buf *Host, plan Plan, all uint32, t *Tensors, search Call) error {
	if !plan.Repair || plan.Want < 1 {
		return nil
	}
	return repair(op, res, buf, plan, all, t, search)
}

// MaxFree is the number of idle buffers a Pool keeps.
const MaxFree = 4

// Pool keeps an index's idle Host buffers. The zero Pool is ready.
type Pool struct {
	mu     sync.Mutex
	free   []*Host
	closed bool
}

func (p *Pool) take(rows, k int64) (*Host, error) {
	p.mu.Lock()
	for i := len(p.free) - 1; i >= 0; i-- {
		if b := p.free[i]; b.rows == rows && b.k == k {
			p.free = append(p.free[:i], p.free[i+1:]...)
			p.mu.Unlock()
			return b, nil
		}
	}
	p.mu.Unlock()
	return NewHost(rows, k)
}

func (p *Pool) give(b *Host) {
	p.mu.Lock()
	var drop *Host
	if p.closed {
		drop = b
	} else {
		p.free = append(p.free, b)
		if len(p.free) > MaxFree {
			drop = p.free[0]
			p.free = append(p.free[:0], p.free[1:]...)
		}
	}
	p.mu.Unlock()
	if drop != nil {
		_ = drop.Close()
	}
}

// Close frees the idle buffers; a buffer in use is freed when its search
// gives it back.
func (p *Pool) Close() error {
	p.mu.Lock()
	free := p.free
	p.free, p.closed = nil, true
	p.mu.Unlock()
	var first error
	for _, b := range free {
		if err := b.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
