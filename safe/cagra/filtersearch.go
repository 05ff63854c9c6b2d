package cagra

// #include <stdlib.h>
import "C"

import (
	"sync"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// cbuf is host scratch memory in C (no Go pointers to pin or check),
// grown as needed and freed with the index.
type cbuf struct {
	p     unsafe.Pointer
	bytes uintptr
}

func (b *cbuf) grow(bytes uintptr) unsafe.Pointer {
	if bytes == 0 {
		bytes = 8
	}
	if b.bytes < bytes {
		C.free(b.p)
		b.p = C.malloc(C.size_t(bytes))
		b.bytes = bytes
	}
	return b.p
}

func (b *cbuf) free() {
	C.free(b.p)
	b.p, b.bytes = nil, 0
}

func slice[T any](b *cbuf, n int64) []T {
	var zero T
	p := b.grow(uintptr(n) * unsafe.Sizeof(zero))
	return unsafe.Slice((*T)(p), n)
}

// filterScratch is the memory the exact path and the second pass reuse
// from one search to the next: device matrices for brute force's results
// and host buffers for what passes through the host. An index keeps idle
// sets for its searches (takeScratch).
type filterScratch struct {
	ids    *safe.DeviceMatrix[int64]   // brute force's neighbors, n × kk
	dists  *safe.DeviceMatrix[float32] // brute force's distances when kk < k
	hostA  cbuf                        // n × kk ids (int64), or the graph's ids read back
	hostB  cbuf                        // n × kk distances
	outN   cbuf                        // n × k neighbors as the caller's dtype
	outD   cbuf                        // n × k distances
	shape  [2]int64                    // for the host views
	shapeB [2]int64

	// the second pass: the short queries' rows
	short          cbuf // their indices (int64)
	hostQ, hostS   cbuf // the batch's queries, the short ones
	devQ, devI     *safe.DeviceMatrix[uint8]
	devD           *safe.DeviceMatrix[uint8]
	shapeQ, shapeS [2]int64

	// the post-filter path: the unfiltered search's candidates
	devPI, devPD *safe.DeviceMatrix[uint8]
	postI, postD cbuf // n × k' ids (int64) and distances, read back
	shapeP       [2]int64
}

func (s *filterScratch) release() {
	if s == nil {
		return
	}
	if s.ids != nil {
		_ = s.ids.Close()
		s.ids = nil
	}
	if s.dists != nil {
		_ = s.dists.Close()
		s.dists = nil
	}
	for _, m := range []**safe.DeviceMatrix[uint8]{&s.devQ, &s.devI, &s.devD, &s.devPI, &s.devPD} {
		if *m != nil {
			_ = (*m).Close()
			*m = nil
		}
	}
	s.short.free()
	s.postI.free()
	s.postD.free()
	s.hostQ.free()
	s.hostS.free()
	s.hostA.free()
	s.hostB.free()
	s.outN.free()
	s.outD.free()
}

// devIDs and devDists return device scratch of n × kk, made anew when the
// shape changes.
func (s *filterScratch) devIDs(res *safe.Resources, n, kk int64) (*safe.DeviceMatrix[int64], error) {
	if s.ids != nil && (int64(s.ids.Rows()) != n || int64(s.ids.Cols()) != kk) {
		_ = s.ids.Close()
		s.ids = nil
	}
	if s.ids == nil {
		m, err := safe.NewDeviceMatrix[int64](res, int(n), int(kk))
		if err != nil {
			return nil, err
		}
		s.ids = m
	}
	return s.ids, nil
}

func (s *filterScratch) devDists(res *safe.Resources, n, kk int64) (*safe.DeviceMatrix[float32], error) {
	if s.dists != nil && (int64(s.dists.Rows()) != n || int64(s.dists.Cols()) != kk) {
		_ = s.dists.Close()
		s.dists = nil
	}
	if s.dists == nil {
		m, err := safe.NewDeviceMatrix[float32](res, int(n), int(kk))
		if err != nil {
			return nil, err
		}
		s.dists = m
	}
	return s.dists, nil
}

// hostOut binds n × c host memory p of dtype dt to call c as an output.
func hostOut(call dlpack.Call, p unsafe.Pointer, shape *[2]int64, dt dlpack.DataType) (*generated.DLManagedTensor, error) {
	mv, err := dlpack.FromRawPartsMut(p, dlpack.HostDevice, shape[:], nil, dt)
	if err != nil {
		return nil, err
	}
	return call.Out(&mv)
}

func devOut[T dlpack.DType](call dlpack.Call, m *safe.DeviceMatrix[T]) (*generated.DLManagedTensor, error) {
	mv, err := m.ViewMut()
	if err != nil {
		return nil, err
	}
	return call.Out(&mv)
}

// takeScratch returns an idle scratch set of the index, or a new one when
// every set is in use (concurrent filtered searches, a Batcher's slots);
// give it back with putScratch. The index keeps up to maxIdleScratch idle
// sets, so that concurrent searches reuse their memory instead of
// allocating and freeing a set each (on the real H200 that cost a 256-slot
// filtered load most of its throughput).
func (idx *Index) takeScratch() *filterScratch {
	sl := idx.scratch
	sl.mu.Lock()
	if n := len(sl.free); n > 0 {
		s := sl.free[n-1]
		sl.free[n-1] = nil
		sl.free = sl.free[:n-1]
		sl.mu.Unlock()
		return s
	}
	sl.mu.Unlock()
	return new(filterScratch)
}

func (idx *Index) putScratch(s *filterScratch) {
	sl := idx.scratch
	sl.mu.Lock()
	if !sl.closed && len(sl.free) < maxIdleScratch {
		sl.free = append(sl.free, s)
		sl.mu.Unlock()
		return
	}
	sl.mu.Unlock()
	s.release()
}

// maxIdleScratch is the most idle scratch sets an index keeps: a Batcher's
// default slots.
const maxIdleScratch = 32

// scratchSlot holds the idle scratch sets apart from the Index, so that the
// cleanup of an Index dropped without Close can free them.
type scratchSlot struct {
	mu     sync.Mutex
	free   []*filterScratch
	closed bool
}

func (sl *scratchSlot) release() {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.closed = true
	for i, s := range sl.free {
		s.release()
		sl.free[i] = nil
	}
	sl.free = nil
}

// searchExact runs a filtered search as exact brute force over the index's
// dataset: the true nearest allowed rows, sentinels past the allowed count.
// It synchronizes res's stream unless neighbors are int64 and at least k
// rows are allowed (then it is one asynchronous C call). It allocates
// nothing on the Go heap once the index's scratch has the batch's shape.
func (idx *Index) searchExact(op string, res *safe.Resources, t *kit.SearchTensors, f generated.CuvsFilter, allowed int64) error {
	if why := idx.noExact(); why != "" {
		return kit.Argf(op, "params.FilterPath", "a filter allowing %d of %d rows needs the exact path, but %s; set FilterPath to safe.FilterIndex to search the graph anyway (CAGRA then fills slots it cannot reach with SentinelID)", allowed, idx.c.Rows.Load(), why)
	}
	bf, err := idx.exactIndex(op, res)
	if err != nil {
		return err
	}
	n, k := t.N, t.K
	kk := min(k, allowed)
	wide := t.Neighbors.DlTensor.Dtype.Bits == 64
	if kk == k && wide {
		h, err := kit.Lock(res, op)
		if err != nil {
			return err
		}
		err = generated.CuvsBruteForceSearch(h, bf, t.Queries, t.Neighbors, t.Distances, f)
		kit.Unlock(res)
		return kit.Wrap(op, err)
	}
	s := idx.takeScratch()
	err = idx.exactVia(op, res, s, bf, t, f, n, k, kk, wide)
	idx.putScratch(s)
	return err
}

// searchBitmap searches with a bitmap filter (a row of bits per query):
// always exactly, since cuVS's CAGRA search takes bitsets only, and only
// when every query lets k rows through (brute force's rule: past a
// query's allowed rows it returns unset memory, and a bitmap's queries
// differ in how many they allow, which exactVia's sentinel fill does not
// follow). FilterPath safe.FilterIndex is refused.
func (idx *Index) searchBitmap(op string, res *safe.Resources, sp SearchParams, t *kit.SearchTensors, f generated.CuvsFilter, filter *safe.Filter) error {
	if sp.FilterPath == safe.FilterIndex {
		return kit.Argf(op, "params.FilterPath", "FilterIndex with a bitmap filter: CAGRA's graph search takes bitsets only (a bitmap is searched exactly)")
	}
	if a := int64(filter.Allowed()); a < t.K {
		return kit.Argf(op, "filter", "a bitmap letting a query through %d rows, fewer than k %d (brute force, which searches a bitmap, cannot fill k)", a, t.K)
	}
	if why := idx.noExact(); why != "" {
		return kit.Argf(op, "filter", "a bitmap is searched exactly, but %s", why)
	}
	return idx.searchExact(op, res, t, f, int64(filter.Allowed()))
}

// exactVia is searchExact through scratch: brute force must not be asked
// for more neighbors than rows allowed (the real library then returns
// uninitialised memory), and writes int64 ids only: kk neighbors into
// scratch, then the caller's k columns, in its dtype, from the host.
func (idx *Index) exactVia(op string, res *safe.Resources, s *filterScratch, bf generated.CuvsBruteForceIndex_t, t *kit.SearchTensors, f generated.CuvsFilter, n, k, kk int64, wide bool) error {
	call := dlpack.Begin(op)
	defer call.End()
	ids := slice[int64](&s.hostA, n*kk)
	dists := slice[float32](&s.hostB, n*kk)
	if kk > 0 {
		dn, err := s.devIDs(res, n, kk)
		if err != nil {
			return err
		}
		bn, err := devOut(call, dn)
		if err != nil {
			return err
		}
		bd := t.Distances // brute force writes the caller's distances when kk == k
		if kk < k {
			dd, err := s.devDists(res, n, kk)
			if err != nil {
				return err
			}
			if bd, err = devOut(call, dd); err != nil {
				return err
			}
		}
		h, err := kit.Lock(res, op)
		if err != nil {
			return err
		}
		err = generated.CuvsBruteForceSearch(h, bf, t.Queries, bn, bd, f)
		kit.Unlock(res)
		if err != nil {
			return kit.Wrap(op, err)
		}
		s.shapeB = [2]int64{n, kk}
		hn, err := hostOut(call, unsafe.Pointer(unsafe.SliceData(ids)), &s.shapeB, dlpack.Int64)
		if err != nil {
			return err
		}
		if err := kit.CopyBound(op, res, bn, hn); err != nil {
			return err
		}
		if kk < k {
			hd, err := hostOut(call, unsafe.Pointer(unsafe.SliceData(dists)), &s.shapeB, dlpack.Float32)
			if err != nil {
				return err
			}
			if err := kit.CopyBound(op, res, bd, hd); err != nil {
				return err
			}
		}
	}
	s.shape = [2]int64{n, k}
	if kk < k {
		outD := slice[float32](&s.outD, n*k)
		fill(outD, dists, n, k, kk, SentinelDistance)
		hd, err := hostOut(call, unsafe.Pointer(unsafe.SliceData(outD)), &s.shape, dlpack.Float32)
		if err != nil {
			return err
		}
		if err := kit.CopyBound(op, res, hd, t.Distances); err != nil {
			return err
		}
	}
	var p unsafe.Pointer
	dt := dlpack.Uint32
	if wide {
		o := slice[int64](&s.outN, n*k)
		fill(o, ids, n, k, kk, int64(SentinelID))
		p, dt = unsafe.Pointer(unsafe.SliceData(o)), dlpack.Int64
	} else {
		o := slice[uint32](&s.outN, n*k)
		for q := int64(0); q < n; q++ {
			row, in := o[q*k:(q+1)*k], ids[q*kk:(q+1)*kk]
			for j := range row {
				row[j] = SentinelID
				if int64(j) < kk {
					row[j] = uint32(in[j])
				}
			}
		}
		p = unsafe.Pointer(unsafe.SliceData(o))
	}
	hn, err := hostOut(call, p, &s.shape, dt)
	if err != nil {
		return err
	}
	return kit.CopyBound(op, res, hn, t.Neighbors)
}

// hostNeighbors is s.hostA seen as n × k neighbors of the caller's dtype:
// int64 when wide, else uint32 (CAGRA's two), with the address and dtype
// hostOut binds.
type hostNeighbors struct {
	i64 []int64
	u32 []uint32
	p   unsafe.Pointer
	dt  dlpack.DataType
}

func (s *filterScratch) neighbors(t *kit.SearchTensors) hostNeighbors {
	n := t.N * t.K
	if t.Neighbors.DlTensor.Dtype.Bits == 64 {
		b := slice[int64](&s.hostA, n)
		return hostNeighbors{i64: b, p: unsafe.Pointer(unsafe.SliceData(b)), dt: dlpack.Int64}
	}
	b := slice[uint32](&s.hostA, n)
	return hostNeighbors{u32: b, p: unsafe.Pointer(unsafe.SliceData(b)), dt: dlpack.Uint32}
}

func (h *hostNeighbors) set(j, id int64) {
	if h.i64 != nil {
		h.i64[j] = id
	} else {
		h.u32[j] = uint32(id)
	}
}

func (h *hostNeighbors) valid(j int64) bool {
	if h.i64 != nil {
		return Valid(h.i64[j])
	}
	return Valid(h.u32[j])
}

// has reports whether id is among slots lo to hi (cuVS's results may
// repeat a row).
func (h *hostNeighbors) has(lo, hi, id int64) bool {
	for j := lo; j < hi; j++ {
		if h.i64 != nil && h.i64[j] == id || h.u32 != nil && int64(h.u32[j]) == id {
			return true
		}
	}
	return false
}

// shortQueries reads a graph search's neighbors back into s.hostA
// (waiting for the search) and lists in s.short the queries that came back
// with fewer than need valid rows; it returns how many.
func (idx *Index) shortQueries(op string, res *safe.Resources, s *filterScratch, t *kit.SearchTensors, need int64) (int64, error) {
	call := dlpack.Begin(op)
	defer call.End()
	n, k := t.N, t.K
	s.shape = [2]int64{n, k}
	ids := s.neighbors(t)
	hn, err := hostOut(call, ids.p, &s.shape, ids.dt)
	if err != nil {
		return 0, err
	}
	if err := kit.CopyBound(op, res, t.Neighbors, hn); err != nil {
		return 0, err
	}
	short := slice[int64](&s.short, n)
	m := int64(0)
	for q := int64(0); q < n; q++ {
		valid := int64(0)
		for j := q * k; j < (q+1)*k; j++ {
			if ids.valid(j) {
				valid++
			}
		}
		if valid < need {
			short[m] = q
			m++
		}
	}
	return m, nil
}

// secondPass searches the m short queries listed in s.short exactly and
// writes their rows over the graph's: the batch's queries through the host
// into scratch, brute force of those rows, then the caller's outputs patched
// on the host (the neighbors read back by shortQueries, in s.hostA) and
// written back. At least k rows are allowed (the policy sends fewer to the
// exact path), so brute force fills every slot. Seven copies, each waited
// for; searchGraph takes the whole batch exactly instead when more than a
// quarter of it came back short.
func (idx *Index) secondPass(op string, res *safe.Resources, s *filterScratch, bf generated.CuvsBruteForceIndex_t, t *kit.SearchTensors, f generated.CuvsFilter, m int64) error {
	call := dlpack.Begin(op)
	defer call.End()
	n, k := t.N, t.K
	d, qdt := idx.c.Dim, idx.dtype // the queries' shape and type (checked against the index)
	rowBytes := d * qdt.ElemSize()
	dev := dlpack.Device{Type: dlpack.CUDA, ID: idx.c.Dev.ID}
	// the short queries, gathered on the host and copied up
	s.shapeQ, s.shapeS = [2]int64{n, d}, [2]int64{m, d}
	hq := s.hostQ.grow(uintptr(n * rowBytes))
	bq, err := hostOut(call, hq, &s.shapeQ, qdt)
	if err != nil {
		return err
	}
	if err := kit.CopyBound(op, res, t.Queries, bq); err != nil {
		return err
	}
	hs := s.hostS.grow(uintptr(m * rowBytes))
	short := slice[int64](&s.short, n)[:m]
	all := unsafe.Slice((*byte)(hq), n*rowBytes)
	sub := unsafe.Slice((*byte)(hs), m*rowBytes)
	for j, q := range short {
		copy(sub[int64(j)*rowBytes:(int64(j)+1)*rowBytes], all[q*rowBytes:(q+1)*rowBytes])
	}
	bs, err := hostOut(call, hs, &s.shapeS, qdt)
	if err != nil {
		return err
	}
	pq, err := kit.DeviceScratch(res, &s.devQ, m*rowBytes)
	if err != nil {
		return err
	}
	dq, err := kit.OutRaw(call, pq, dev, &s.shapeS, qdt)
	if err != nil {
		return err
	}
	if err := kit.CopyBound(op, res, bs, dq); err != nil {
		return err
	}
	// brute force of those rows
	s.shapeB = [2]int64{m, k}
	pi, err := kit.DeviceScratch(res, &s.devI, m*k*8)
	if err != nil {
		return err
	}
	pd, err := kit.DeviceScratch(res, &s.devD, m*k*4)
	if err != nil {
		return err
	}
	di, err := kit.OutRaw(call, pi, dev, &s.shapeB, dlpack.Int64)
	if err != nil {
		return err
	}
	dd, err := kit.OutRaw(call, pd, dev, &s.shapeB, dlpack.Float32)
	if err != nil {
		return err
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = generated.CuvsBruteForceSearch(h, bf, dq, di, dd, f)
	kit.Unlock(res)
	if err != nil {
		return kit.Wrap(op, err)
	}
	ids := slice[int64](&s.hostB, m*k) // hostB: m × k ids, outD: n × k distances, then m × k
	hi, err := hostOut(call, unsafe.Pointer(unsafe.SliceData(ids)), &s.shapeB, dlpack.Int64)
	if err != nil {
		return err
	}
	if err := kit.CopyBound(op, res, di, hi); err != nil {
		return err
	}
	dists := slice[float32](&s.outN, m*k)
	hd, err := hostOut(call, unsafe.Pointer(unsafe.SliceData(dists)), &s.shapeB, dlpack.Float32)
	if err != nil {
		return err
	}
	if err := kit.CopyBound(op, res, dd, hd); err != nil {
		return err
	}
	// the caller's outputs, patched
	s.shape = [2]int64{n, k}
	outD := slice[float32](&s.outD, n*k)
	ho, err := hostOut(call, unsafe.Pointer(unsafe.SliceData(outD)), &s.shape, dlpack.Float32)
	if err != nil {
		return err
	}
	if err := kit.CopyBound(op, res, t.Distances, ho); err != nil {
		return err
	}
	out := s.neighbors(t)
	for j, q := range short {
		copy(outD[q*k:(q+1)*k], dists[int64(j)*k:(int64(j)+1)*k])
		for c := int64(0); c < k; c++ {
			out.set(q*k+c, ids[int64(j)*k+c])
		}
	}
	hn, err := hostOut(call, out.p, &s.shape, out.dt)
	if err != nil {
		return err
	}
	if err := kit.CopyBound(op, res, hn, t.Neighbors); err != nil {
		return err
	}
	return kit.CopyBound(op, res, ho, t.Distances)
}

// searchGraph runs the graph search of a filtered plan and its second
// pass: cp is the C parameters with the plan's top-k.
func (idx *Index) searchGraph(op string, res *safe.Resources, cp *generated.CuvsCagraSearchParams, t *kit.SearchTensors, f generated.CuvsFilter, plan filterPlan, allowed int64) error {
	if plan.post > 0 {
		return idx.searchPost(op, res, cp, t, f, plan, allowed)
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return err
	}
	err = generated.CuvsCagraSearch(h, kit.Params[generated.CuvsCagraSearchParams_t](res, cp), idx.c.H, t.Queries, t.Neighbors, t.Distances, f)
	kit.Unlock(res)
	if err != nil || !plan.second {
		return kit.Wrap(op, err)
	}
	bf, err := idx.exactIndex(op, res)
	if err != nil {
		return err
	}
	s := idx.takeScratch()
	m, err := idx.shortQueries(op, res, s, t, min(t.K, allowed))
	if err == nil && m > 0 && 4*m <= t.N && allowed >= t.K {
		err = idx.secondPass(op, res, s, bf, t, f, m)
		m = 0
	}
	idx.putScratch(s)
	if err != nil || m == 0 {
		return err
	}
	// most of the batch came back short: all of it exactly
	return idx.searchExact(op, res, t, f, allowed)
}

// searchPost runs the post-filter path (filterPlan.post): an unfiltered
// graph search for k' = plan.post candidates per query into device
// scratch, read back (two copies, waited for) and filtered on the host
// against the bitset's host copy (kept with the filter): each query's
// first k allowed candidates, distinct, nearest first, are written to the
// caller's outputs (two copies); a query left with fewer than min(k,
// allowed) goes to the exact second pass (the whole batch exactly when
// more than a quarter is short). It allocates nothing on the Go heap once
// the filter's host copy and the scratch exist.
func (idx *Index) searchPost(op string, res *safe.Resources, cp *generated.CuvsCagraSearchParams, t *kit.SearchTensors, f generated.CuvsFilter, plan filterPlan, allowed int64) error {
	words, err := kit.FilterHostWords(plan.filter, op, res)
	if err != nil {
		return err
	}
	s := idx.takeScratch()
	m, err := idx.postFilter(op, res, s, cp, t, words, plan.post, allowed)
	if err == nil && m > 0 && 4*m <= t.N {
		var bf generated.CuvsBruteForceIndex_t
		if bf, err = idx.exactIndex(op, res); err == nil {
			err = idx.secondPass(op, res, s, bf, t, f, m)
		}
		m = 0
	}
	idx.putScratch(s)
	if err != nil || m == 0 {
		return err
	}
	return idx.searchExact(op, res, t, f, allowed)
}

// postFilter is searchPost's graph search and host filtering; it leaves
// the caller's neighbors (their dtype) in s.hostA and the short queries in
// s.short, and returns how many.
func (idx *Index) postFilter(op string, res *safe.Resources, s *filterScratch, cp *generated.CuvsCagraSearchParams, t *kit.SearchTensors, words []uint32, kc, allowed int64) (int64, error) {
	call := dlpack.Begin(op)
	defer call.End()
	n, k, rows := t.N, t.K, idx.c.Rows.Load()
	dev := dlpack.Device{Type: dlpack.CUDA, ID: idx.c.Dev.ID}
	s.shapeP = [2]int64{n, kc}
	pi, err := kit.DeviceScratch(res, &s.devPI, n*kc*8)
	if err != nil {
		return 0, err
	}
	pd, err := kit.DeviceScratch(res, &s.devPD, n*kc*4)
	if err != nil {
		return 0, err
	}
	di, err := kit.OutRaw(call, pi, dev, &s.shapeP, dlpack.Int64)
	if err != nil {
		return 0, err
	}
	dd, err := kit.OutRaw(call, pd, dev, &s.shapeP, dlpack.Float32)
	if err != nil {
		return 0, err
	}
	h, err := kit.Lock(res, op)
	if err != nil {
		return 0, err
	}
	err = generated.CuvsCagraSearch(h, kit.Params[generated.CuvsCagraSearchParams_t](res, cp), idx.c.H, t.Queries, di, dd, generated.CuvsFilter{Type: generated.CuvsFilterType_NO_FILTER})
	kit.Unlock(res)
	if err != nil {
		return 0, kit.Wrap(op, err)
	}
	ci := slice[int64](&s.postI, n*kc)
	cd := slice[float32](&s.postD, n*kc)
	hi, err := hostOut(call, unsafe.Pointer(unsafe.SliceData(ci)), &s.shapeP, dlpack.Int64)
	if err != nil {
		return 0, err
	}
	if err := kit.CopyBound(op, res, di, hi); err != nil {
		return 0, err
	}
	hd, err := hostOut(call, unsafe.Pointer(unsafe.SliceData(cd)), &s.shapeP, dlpack.Float32)
	if err != nil {
		return 0, err
	}
	if err := kit.CopyBound(op, res, dd, hd); err != nil {
		return 0, err
	}
	s.shape = [2]int64{n, k}
	out := s.neighbors(t)
	outD := slice[float32](&s.outD, n*k)
	short := slice[int64](&s.short, n)
	want := min(k, allowed)
	m := int64(0)
	for q := int64(0); q < n; q++ {
		got := int64(0)
		for j := q * kc; j < (q+1)*kc && got < k; j++ {
			id, d := ci[j], cd[j]
			if id < 0 || id >= rows || words[id>>5]>>(uint64(id)&31)&1 == 0 || !(d < SentinelDistance) ||
				out.has(q*k, q*k+got, id) {
				continue
			}
			out.set(q*k+got, id)
			outD[q*k+got] = d
			got++
		}
		if got < want {
			short[m] = q
			m++
		}
		for ; got < k; got++ {
			out.set(q*k+got, int64(SentinelID))
			outD[q*k+got] = SentinelDistance
		}
	}
	hn, err := hostOut(call, out.p, &s.shape, out.dt)
	if err != nil {
		return 0, err
	}
	if err := kit.CopyBound(op, res, hn, t.Neighbors); err != nil {
		return 0, err
	}
	ho, err := hostOut(call, unsafe.Pointer(unsafe.SliceData(outD)), &s.shape, dlpack.Float32)
	if err != nil {
		return 0, err
	}
	return m, kit.CopyBound(op, res, ho, t.Distances)
}
