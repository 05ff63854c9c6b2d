package tiered

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// mergeSet is the memory a composed search reuses from one search to the
// next: the tiers' candidates in one device buffer (ids of the ANN tier,
// ids of the fresh tier, then their distances, each n × its k), the same
// bytes read back into pinned host memory by one copy, and the merged
// results in C memory. An index keeps idle sets for its searches
// (mergePool).
type mergeSet struct {
	dev  *safe.DeviceMatrix[uint8] // 1 × bytes: the candidates
	host *safe.PinnedMatrix[uint8] // 1 × bytes: the same, read back
	out  cmem                      // n × k ids (int64), then n × k distances
	cand []cand                    // one query's candidates

	// views reused (no Go allocation per search)
	nbA, dsA, nbF, dsF dlpack.ViewMut
	back               dlpack.ViewMut
	all, outN, outD    dlpack.View
	shA, shF, shAll    [2]int64
	shOut              [2]int64
}

// cand is a candidate of the merge: a row's id and its distance.
type cand struct {
	id int64
	d  float32
}

// cmem is C memory grown as needed (pageable: a copy from it to the device
// has read it when cuvsMatrixCopy returns).
type cmem struct {
	p     unsafe.Pointer
	bytes uintptr
}

func (b *cmem) grow(bytes uintptr) unsafe.Pointer {
	if b.bytes < bytes {
		cFree(b.p)
		b.p, b.bytes = cAlloc(max(bytes, 8)), max(bytes, 8)
	}
	return b.p
}

func (b *cmem) free() {
	cFree(b.p)
	b.p, b.bytes = nil, 0
}

func (s *mergeSet) release() {
	if s.dev != nil {
		_ = s.dev.Close()
	}
	if s.host != nil {
		_ = s.host.Close()
	}
	s.out.free()
	*s = mergeSet{}
}

// buffers makes the set hold bytes bytes of candidates on the device and
// the host, reallocating only to grow.
func (s *mergeSet) buffers(res *safe.Resources, bytes int64) error {
	if s.dev != nil && int64(s.dev.Cols()) >= bytes {
		return nil
	}
	if s.dev != nil {
		_ = s.dev.Close()
		_ = s.host.Close()
		s.dev, s.host = nil, nil
	}
	bytes = max(bytes, 4096)
	dev, err := safe.NewDeviceMatrix[uint8](res, 1, int(bytes))
	if err != nil {
		return err
	}
	host, err := safe.NewPinnedMatrix[uint8](1, int(bytes))
	if err != nil {
		_ = dev.Close()
		return err
	}
	s.dev, s.host = dev, host
	return nil
}

// mergePool holds an index's idle merge sets apart from the Index (its
// Life's destroy function frees them).
type mergePool struct {
	mu     sync.Mutex
	free   []*mergeSet
	closed bool
}

// maxIdleMerge is the most idle sets an index keeps: a Batcher's default
// slots.
const maxIdleMerge = 32

func (p *mergePool) take() *mergeSet {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return s
	}
	p.mu.Unlock()
	return new(mergeSet)
}

func (p *mergePool) put(s *mergeSet) {
	p.mu.Lock()
	if !p.closed && len(p.free) < maxIdleMerge {
		p.free = append(p.free, s)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	s.release()
}

func (p *mergePool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for i, s := range p.free {
		s.release()
		p.free[i] = nil
	}
	p.free = nil
}

// devView sets v to n × k elements of dt at byte offset off of the set's
// device buffer.
func (s *mergeSet) devView(v *dlpack.ViewMut, shape *[2]int64, off, n, k int64, dt dlpack.DataType) error {
	base, err := s.dev.ViewMut()
	if err != nil {
		return err
	}
	p, err := base.Data()
	if err != nil {
		return err
	}
	*shape = [2]int64{n, k}
	*v, err = dlpack.FromRawPartsMut(unsafe.Add(p, off), base.Device(), shape[:], nil, dt)
	return err
}

// tierPlan is what a composed search asks of each tier.
type tierPlan struct {
	kA, kF   int64        // candidates per query of the ANN and the fresh tier
	fA, fF   *safe.Filter // their positions' filters (nil: none)
	wA, wF   []uint32     // the same on the host (nil: every position)
	exact    bool         // the ANN tier by brute force over its rows
	ann, fr  int64        // the tiers' stored rows
	want     int64        // valid results per query a full search gives
	allowedA int64        // the ANN tier's rows allowed and live
}

// composedSearch searches the tiers into one device buffer, reads it back
// with one copy and one wait, merges on the host into C memory (no Go
// allocation) and writes the caller's outputs (two copies from C memory,
// which need no wait: the results are ready once res's stream is
// synchronized).
func (idx *Index) composedSearch(op string, res *safe.Resources, sp *cSearch, size uintptr, queries dlpack.Tensor, qv *dlpack.View, nv, dv *dlpack.ViewMut, n, k int64, pl *tierPlan) error {
	s := idx.st.merges.take()
	defer idx.st.merges.put(s)
	short, err := idx.mergeOnce(op, res, s, sp, size, queries, qv, n, k, pl)
	if err != nil {
		return err
	}
	if short && !pl.exact && pl.kA > 0 {
		// The ANN index's search left a query short of the rows the
		// filter and the deletions allow: search its tier exactly.
		pl.exact, pl.kA = true, min(k, pl.allowedA)
		if _, err := idx.mergeOnce(op, res, s, sp, size, queries, qv, n, k, pl); err != nil {
			return err
		}
	}
	c := dlpack.Begin(op)
	defer c.End()
	on, err := c.In(&s.outN)
	if err != nil {
		return kit.Wrap(op, err)
	}
	od, err := c.In(&s.outD)
	if err != nil {
		return kit.Wrap(op, err)
	}
	nt, err := c.Out(nv)
	if err != nil {
		return kit.Argf(op, "neighbors", "%w", err)
	}
	dt, err := c.Out(dv)
	if err != nil {
		return kit.Argf(op, "distances", "%w", err)
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(res)
	if err := generated.CuvsMatrixCopy(h, on, nt); err != nil {
		return kit.Wrap(op, err)
	}
	return kit.Wrap(op, generated.CuvsMatrixCopy(h, od, dt))
}

// mergeOnce runs both tiers' searches as pl says into s, reads them back
// (one copy, one wait) and merges them into s.out; it reports whether a
// query got fewer than pl.want rows.
func (idx *Index) mergeOnce(op string, res *safe.Resources, s *mergeSet, sp *cSearch, size uintptr, queries dlpack.Tensor, qv *dlpack.View, n, k int64, pl *tierPlan) (bool, error) {
	kA, kF := pl.kA, pl.kF
	idsBytes := 8 * n * (kA + kF)
	total := idsBytes + 4*n*(kA+kF)
	if total > 0 {
		if err := s.buffers(res, total); err != nil {
			return false, kit.Wrap(op, err)
		}
	}
	i64, f32 := dlpack.Int64, dlpack.Float32
	if kA > 0 {
		if err := s.devView(&s.nbA, &s.shA, 0, n, kA, i64); err != nil {
			return false, kit.Wrap(op, err)
		}
		if err := s.devView(&s.dsA, &s.shA, idsBytes, n, kA, f32); err != nil {
			return false, kit.Wrap(op, err)
		}
		if err := idx.annInto(op, res, sp, size, queries, qv, &s.nbA, &s.dsA, pl); err != nil {
			return false, err
		}
	}
	if kF > 0 {
		if err := s.devView(&s.nbF, &s.shF, 8*n*kA, n, kF, i64); err != nil {
			return false, kit.Wrap(op, err)
		}
		if err := s.devView(&s.dsF, &s.shF, idsBytes+4*n*kA, n, kF, f32); err != nil {
			return false, kit.Wrap(op, err)
		}
		if err := idx.st.freshBF.Search(res, queries, &s.nbF, &s.dsF, pl.fF); err != nil {
			return false, err
		}
	}
	var host []byte
	if total > 0 {
		if err := s.readBack(op, res, total); err != nil {
			return false, err
		}
		host = s.host.Data()[:total]
	}
	// the merged results, in C memory
	outBytes := uintptr(12 * n * k)
	p := s.out.grow(outBytes)
	ids := unsafe.Slice((*int64)(p), n*k)
	dists := unsafe.Slice((*float32)(unsafe.Add(p, 8*n*k)), n*k)
	s.shOut = [2]int64{n, k}
	var err error
	if s.outN, err = dlpack.FromRawParts(p, dlpack.HostDevice, s.shOut[:], nil, dlpack.Int64); err != nil {
		return false, kit.Wrap(op, err)
	}
	if s.outD, err = dlpack.FromRawParts(unsafe.Add(p, 8*n*k), dlpack.HostDevice, s.shOut[:], nil, dlpack.Float32); err != nil {
		return false, kit.Wrap(op, err)
	}
	var a, b tierList
	if total > 0 {
		hp := unsafe.Pointer(unsafe.SliceData(host))
		a = tierList{ids: unsafe.Slice((*int64)(hp), n*kA), k: kA, rows: pl.ann, from: 0, words: pl.wA}
		b = tierList{ids: unsafe.Slice((*int64)(unsafe.Add(hp, 8*n*kA)), n*kF), k: kF, rows: pl.fr, from: pl.ann, words: pl.wF}
		a.dists = unsafe.Slice((*float32)(unsafe.Add(hp, idsBytes)), n*kA)
		b.dists = unsafe.Slice((*float32)(unsafe.Add(hp, idsBytes+4*n*kA)), n*kF)
		// IVF-PQ's cosine is -cos (cuVS leaves its score), the fresh
		// tier's brute force 1 - cos: one scale before the merge.
		a.shift = !pl.exact && idx.p.Backend == IVFPQ && idx.p.Metric == safe.CosineExpanded
	}
	larger := idx.p.Metric == safe.InnerProduct
	short := false
	for q := range n {
		s.cand = a.collect(s.cand[:0], q, idx.st.ids)
		s.cand = b.collect(s.cand, q, idx.st.ids)
		if larger {
			slices.SortStableFunc(s.cand, farFirst)
		} else {
			slices.SortStableFunc(s.cand, nearFirst)
		}
		w := fill(ids[q*k:(q+1)*k], dists[q*k:(q+1)*k], s.cand)
		short = short || w < pl.want
	}
	return short, nil
}

func nearFirst(x, y cand) int { return cmp.Compare(x.d, y.d) }
func farFirst(x, y cand) int  { return cmp.Compare(y.d, x.d) }

// fill writes the best of cs (sorted) into one query's row, a row repeated
// by a tier taken once, and the slots past them safe.SentinelID64 with
// +Inf; it returns how many rows it wrote.
func fill(out []int64, od []float32, cs []cand) int64 {
	w := 0
	for _, c := range cs {
		if w == len(out) {
			break
		}
		// a repeated row has the same distance: look back over the
		// slots of that distance
		dup := false
		for j := w - 1; j >= 0 && od[j] == c.d && !dup; j-- {
			dup = out[j] == c.id
		}
		if !dup {
			out[w], od[w] = c.id, c.d
			w++
		}
	}
	valid := int64(w)
	inf := float32(math.Inf(1))
	for ; w < len(out); w++ {
		out[w], od[w] = safe.SentinelID64, inf
	}
	return valid
}

// tierList is one tier's candidates read back: n rows of k, positions of
// a tier of rows rows stored from position from on, of which words (nil:
// all) are allowed.
type tierList struct {
	ids        []int64
	dists      []float32
	k          int64
	rows, from int64
	words      []uint32
	shift      bool // add 1 to finite distances (IVF-PQ's -cos to 1 - cos)
}

// collect appends query q's valid, allowed candidates, their positions
// mapped to ids (pos: the id of each stored position; nil: the position).
func (t *tierList) collect(cs []cand, q int64, pos []int64) []cand {
	for j := range t.k {
		p, d := t.ids[q*t.k+j], t.dists[q*t.k+j]
		if valid(p, d, t.rows) && allows(t.words, p) {
			if t.shift {
				d++
			}
			cs = append(cs, cand{idAt(pos, t.from+p), d})
		}
	}
	return cs
}

// readBack copies the set's first bytes bytes of candidates to its pinned
// host memory and waits: the search's one wait.
func (s *mergeSet) readBack(op string, res *safe.Resources, bytes int64) error {
	base, err := s.dev.ViewMut()
	if err != nil {
		return kit.Wrap(op, err)
	}
	dp, err := base.Data()
	if err != nil {
		return kit.Wrap(op, err)
	}
	s.shAll = [2]int64{1, bytes}
	if s.all, err = dlpack.FromRawParts(dp, base.Device(), s.shAll[:], nil, dlpack.Uint8); err != nil {
		return kit.Wrap(op, err)
	}
	hv, err := s.host.ViewMut()
	if err != nil {
		return kit.Wrap(op, err)
	}
	hp, err := hv.Data()
	if err != nil {
		return kit.Wrap(op, err)
	}
	if s.back, err = dlpack.FromRawPartsMut(hp, hv.Device(), s.shAll[:], nil, dlpack.Uint8); err != nil {
		return kit.Wrap(op, err)
	}
	c := dlpack.Begin(op)
	defer c.End()
	src, err := c.In(&s.all)
	if err != nil {
		return kit.Wrap(op, err)
	}
	dst, err := c.Out(&s.back)
	if err != nil {
		return kit.Wrap(op, err)
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(res)
	if err := generated.CuvsMatrixCopy(h, src, dst); err != nil {
		return kit.Wrap(op, err)
	}
	return kit.Wrap(op, generated.CuvsStreamSync(h))
}

// annInto searches the ANN tier for pl.kA neighbors of each query into nb
// and ds (device views), by its ANN index or, pl.exact, by brute force over
// its rows, filtered by pl.fA.
func (idx *Index) annInto(op string, res *safe.Resources, sp *cSearch, size uintptr, queries dlpack.Tensor, qv *dlpack.View, nb, ds *dlpack.ViewMut, pl *tierPlan) error {
	if pl.exact {
		bf, err := idx.annExactIndex(op, res, pl.ann)
		if err != nil {
			return err
		}
		return bf.Search(res, queries, nb, ds, pl.fA)
	}
	return idx.searchANN(op, res, sp, size, qv, nb, ds, pl.fA, pl.ann)
}
