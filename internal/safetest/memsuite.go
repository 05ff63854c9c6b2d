package safetest

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/safe"
)

// The conformance suite's device-memory cases: what an index holds counts
// in safe.DeviceMemory.InUse through Build, Deserialize and Extend, and an
// Extend that does not fit is refused before cuVS is called.

// memPerList is the rows per list of the memory cases' data: a power of two
// (an IVF list's capacity), doubled by their Extend.
const memPerList = 64

// memData is the memory cases' data: lists well separated clusters of
// perList rows each, one cluster after another, so that k-means finds them
// and every IVF list holds the same rows (the estimates assume balanced
// lists). Seeds give other rows of the same clusters.
func memData(seed uint64, lists, perList, dim int) []float32 {
	cr := rand.New(rand.NewPCG(17, 23))
	centres := make([]float32, lists*dim)
	for i := range centres {
		centres[i] = 1000 * cr.Float32()
	}
	r := rand.New(rand.NewPCG(seed, seed*7+3))
	out := make([]float32, 0, lists*perList*dim)
	for c := range lists {
		for range perList {
			for j := range dim {
				out = append(out, centres[c*dim+j]+r.Float32())
			}
		}
	}
	return out
}

// memLists is the lists (clusters) of the memory cases: the package's, or 8.
func (s *IndexSuite[I, P]) memLists() int {
	if s.Lists > 0 {
		return int(s.Lists)
	}
	return 8
}

// memBuild builds an index of the memory cases' data (seed 1), closed at
// the end of t, and returns it with its rows on the device.
func (s *IndexSuite[I, P]) memBuild(t *testing.T, res *safe.Resources) (I, *safe.DeviceMatrix[float32]) {
	t.Helper()
	l := s.memLists()
	n := l * memPerList
	ds := deviceFrom(t, res, memData(1, l, memPerList, s.Dim), n, s.Dim)
	idx, err := s.Build(res, ds, uint32(l), s.Dim)
	noErr(t, err)
	Close(t, idx)
	return idx, ds
}

// memSearch searches idx for the first rows of the memory data, every
// list probed, and returns the results on the host.
func (s *IndexSuite[I, P]) memSearch(t *testing.T, res *safe.Resources, idx I) ([]int64, []float32) {
	t.Helper()
	out, err := s.SearchSlice(res, idx, s.params(uint32(s.memLists())), memData(1, s.memLists(), memPerList, s.Dim)[:4*s.Dim], 4, nil)
	noErr(t, err)
	ids := append([]int64(nil), out.Neighbors...)
	return ids, append([]float32(nil), out.Distances...)
}

// memoryCounted: on the double, what the bindings count in
// safe.DeviceMemory.InUse for an index equals (within MemTol) what the
// double's memory resource holds for it: after Build, after Deserialize
// (the loaded copy), after an Extend that doubles it (the grown index in
// place of the old; the Extend's peak is EstimateExtend's), and nothing
// after Close.
func (s *IndexSuite[I, P]) memoryCounted(t *testing.T) {
	ctl := Double(t, "the double's device memory accounting")
	Check(t)
	res := Resources(t)
	m0, err := res.DeviceMemory()
	noErr(t, err)
	a0 := int64(ctl.DeviceMemory(0).Allocated)
	idx, ds := s.memBuild(t, res)
	own := int64(ds.Rows()*ds.Cols()*4+255) / 256 * 256 // the test's matrices count in both, exactly
	held := func(what string) {
		t.Helper()
		m, err := res.DeviceMemory()
		noErr(t, err)
		a, u := int64(ctl.DeviceMemory(0).Allocated)-a0-own, m.InUse-m0.InUse-own
		t.Logf("%s: the double holds %d bytes, DeviceMemory.InUse counts %d", what, a, u)
		if !within(u, a, s.MemTol) {
			t.Errorf("%s: the double holds %d bytes for the indexes, DeviceMemory.InUse counts %d (tolerance %.0f%%)", what, a, u, 100*s.MemTol)
		}
	}
	held("built")
	path := filepath.Join(t.TempDir(), s.Name+".idx")
	noErr(t, s.Serialize(idx, res, path))
	back, err := s.Deserialize(res, path)
	noErr(t, err)
	held("built and deserialized")
	noErr(t, back.Close())
	held("the deserialized one closed")
	if s.Extend != nil {
		l := s.memLists()
		more := deviceFrom(t, res, memData(2, l, memPerList, s.Dim), l*memPerList, s.Dim)
		own += int64(l*memPerList*s.Dim*4+255) / 256 * 256
		est, err := s.EstimateExtend(idx, l*memPerList)
		noErr(t, err)
		ctl.ResetDevicePeak(0)
		before := ctl.DeviceMemory(0).Allocated
		noErr(t, s.Extend(idx, res, more))
		peak := int64(ctl.DeviceMemory(0).Peak - before)
		t.Logf("Extend: the double's peak %d bytes over what it held, EstimateExtend %+v", peak, est)
		if !within(peak, est.BuildPeak+est.Dataset, s.MemTol) {
			t.Errorf("Extend: the double's peak is %d bytes over what it held, EstimateExtend's BuildPeak + Dataset %d + %d (tolerance %.0f%%)", peak, est.BuildPeak, est.Dataset, 100*s.MemTol)
		}
		held("extended")
	}
	noErr(t, idx.Close())
	held("closed")
}

// extendOverMemoryLimit: with safe.SetMemoryLimit under what an Extend
// needs (EstimateExtend), Extend is refused with a *safe.MemoryError
// matching safe.ErrOutOfMemory before cuVS is called, and the index is as
// it was: its rows, what it counts, its searches. Without the limit the
// same Extend succeeds.
func (s *IndexSuite[I, P]) extendOverMemoryLimit(t *testing.T) {
	if s.Extend == nil {
		t.Skipf("%s has no Extend", s.Name)
	}
	Check(t)
	res := Resources(t)
	idx, _ := s.memBuild(t, res)
	l := s.memLists()
	add := l * memPerList
	more := deviceFrom(t, res, memData(2, l, memPerList, s.Dim), add, s.Dim)
	ids, dist := s.memSearch(t, res, idx)
	est, err := s.EstimateExtend(idx, add)
	noErr(t, err)
	if est.BuildPeak <= 0 || est.Index <= 0 {
		t.Fatalf("EstimateExtend(%d rows) = %+v: want a peak and an index", add, est)
	}
	m, err := res.DeviceMemory()
	noErr(t, err)
	need := est.BuildPeak + est.Dataset
	limit := m.InUse + need - 1
	noErr(t, safe.SetMemoryLimit(limit))
	t.Cleanup(func() { _ = safe.SetMemoryLimit(0) })
	var calls int64
	if ctl != nil {
		calls = ctl.Calls(s.ExtendC)
	}
	err = s.Extend(idx, res, more)
	var me *safe.MemoryError
	if !errors.Is(err, safe.ErrOutOfMemory) || !errors.As(err, &me) {
		t.Fatalf("Extend over the limit: %v (%T), want a *safe.MemoryError matching ErrOutOfMemory", err, err)
	}
	if me.Need != need || me.Available >= need || me.Limit != limit {
		t.Errorf("refusal %+v: want need %d (EstimateExtend) over what is left of the limit %d", me, need, limit)
	}
	if ctl != nil {
		if got := ctl.Calls(s.ExtendC); got != calls {
			t.Errorf("%s called %d times by a refused Extend", s.ExtendC, got-calls)
		}
	}
	if got := idx.Rows(); got != add {
		t.Errorf("Rows() = %d after the refused Extend, want %d", got, add)
	}
	if m2, err := res.DeviceMemory(); err != nil || m2.InUse != m.InUse {
		t.Errorf("DeviceMemory.InUse %d after the refused Extend, %d before (%v)", m2.InUse, m.InUse, err)
	}
	if gi, gd := s.memSearch(t, res, idx); !slices.Equal(gi, ids) || !slices.Equal(gd, dist) {
		t.Errorf("the index searches differently after the refused Extend")
	}
	noErr(t, safe.SetMemoryLimit(0))
	noErr(t, s.Extend(idx, res, more))
	if got := idx.Rows(); got != 2*add {
		t.Errorf("Rows() = %d after the Extend, want %d", got, 2*add)
	}
	after, err := res.DeviceMemory()
	noErr(t, err)
	t.Logf("InUse %d before the Extend, %d after; EstimateExtend %+v", m.InUse, after.InUse, est)
	if after.InUse <= m.InUse {
		t.Errorf("DeviceMemory.InUse %d after an Extend that doubled the index, %d before", after.InUse, m.InUse)
	}
}

// deserializers are the C functions that read an index file, of every
// package the suite runs: a refused Deserialize calls none.
var deserializers = []string{
	"cuvsBruteForceDeserialize", "cuvsCagraDeserialize", "cuvsCagraDeserializeGraph",
	"cuvsCagraDeserializeGraphAndDataset", "cuvsIvfFlatDeserialize", "cuvsIvfPqDeserialize",
	"cuvsIvfSqDeserialize",
}

// deserializeCalls counts the calls of deserializers on the double (0
// elsewhere).
func deserializeCalls() int64 {
	var n int64
	for _, fn := range deserializers {
		if ctl != nil {
			n += max(ctl.Calls(fn), 0) // -1: not in this release
		}
	}
	return n
}

// loadedBytes deserializes path and returns what the loaded index holds
// on the device: on the double what its memory resource handed out for
// it, else what safe.DeviceMemory.InUse counts (MemoryCounted checks that
// the two agree).
func (s *IndexSuite[I, P]) loadedBytes(t *testing.T, res *safe.Resources, path string) int64 {
	t.Helper()
	m, err := res.DeviceMemory()
	noErr(t, err)
	var a0 int64
	if ctl != nil {
		a0 = int64(ctl.DeviceMemory(0).Allocated)
	}
	back, err := s.Deserialize(res, path)
	noErr(t, err)
	defer func() { noErr(t, back.Close()) }()
	if ctl != nil {
		return int64(ctl.DeviceMemory(0).Allocated) - a0
	}
	m2, err := res.DeviceMemory()
	noErr(t, err)
	return m2.InUse - m.InUse
}

// refusedLoad calls load (a Deserialize or DeserializeFrom) and wants a
// *safe.MemoryError matching safe.ErrOutOfMemory, with no deserializer
// called, nothing allocated on the double and nothing counted in InUse.
func refusedLoad[I Index](t *testing.T, res *safe.Resources, what string, load func() (I, error)) *safe.MemoryError {
	t.Helper()
	m, err := res.DeviceMemory()
	noErr(t, err)
	calls := deserializeCalls()
	var a0 uint64
	if ctl != nil {
		a0 = ctl.DeviceMemory(0).Allocated
	}
	back, err := load()
	var me *safe.MemoryError
	if !errors.Is(err, safe.ErrOutOfMemory) || !errors.As(err, &me) {
		if err == nil {
			_ = back.Close()
		}
		t.Fatalf("%s with %d bytes left of the limit: %v (%T), want a *safe.MemoryError", what, m.Available, err, err)
	}
	if got := deserializeCalls(); got != calls {
		t.Errorf("%s: the refusal called a deserializer %d times", what, got-calls)
	}
	if ctl != nil && ctl.DeviceMemory(0).Allocated != a0 {
		t.Errorf("%s: the refusal left the double holding %d more bytes", what, ctl.DeviceMemory(0).Allocated-a0)
	}
	if m2, err := res.DeviceMemory(); err != nil || m2.InUse != m.InUse {
		t.Errorf("%s: DeviceMemory.InUse %d after the refusal, %d before (%v)", what, m2.InUse, m.InUse, err)
	}
	return me
}

// deserializeOverMemoryLimit: Deserialize and DeserializeFrom of a file
// whose index does not fit under safe.SetMemoryLimit are refused with a
// *safe.MemoryError before cuVS reads it (refusedLoad). The need named,
// from the file's header, is a lower bound of what the loaded index holds
// (loadedBytes), so that a load that fits is never refused, and not a
// vacuous one (at least half of it, on these balanced lists): with the
// need left under the limit the file loads, with a byte less it is
// refused. With safe.WithoutMemoryCheck it loads under the limit.
func (s *IndexSuite[I, P]) deserializeOverMemoryLimit(t *testing.T) {
	Check(t)
	res := Resources(t)
	idx, _ := s.memBuild(t, res)
	path := filepath.Join(t.TempDir(), s.Name+".idx")
	noErr(t, s.Serialize(idx, res, path))
	loaded := s.loadedBytes(t, res, path)
	m, err := res.DeviceMemory()
	noErr(t, err)
	t.Cleanup(func() { _ = safe.SetMemoryLimit(0) })
	noErr(t, safe.SetMemoryLimit(m.InUse+1))
	me := refusedLoad(t, res, "Deserialize", func() (I, error) { return s.Deserialize(res, path) })
	need := me.Need
	t.Logf("the file's need %d bytes; the loaded index holds %d", need, loaded)
	if need > loaded || need < loaded/2 || me.Limit != m.InUse+1 || me.Available >= need {
		t.Errorf("refusal %+v: want a need of at most what the loaded index holds (%d), at least half of it, over what is left of the limit %d", me, loaded, m.InUse+1)
	}
	f, err := os.Open(path)
	noErr(t, err)
	defer f.Close()
	if me := refusedLoad(t, res, "DeserializeFrom", func() (I, error) { return s.DeserializeFrom(res, f) }); me.Need != need {
		t.Errorf("DeserializeFrom's refusal needs %d bytes, Deserialize's %d", me.Need, need)
	}
	noErr(t, safe.SetMemoryLimit(m.InUse+need-1))
	refusedLoad(t, res, "Deserialize with a byte too few", func() (I, error) { return s.Deserialize(res, path) })

	noErr(t, safe.SetMemoryLimit(m.InUse+need))
	back, err := s.Deserialize(res, path)
	noErr(t, err)
	noErr(t, back.Close())

	noErr(t, safe.SetMemoryLimit(m.InUse+1))
	unchecked, err := safe.NewResources(safe.WithoutMemoryCheck())
	noErr(t, err)
	defer unchecked.Close()
	calls := deserializeCalls()
	back, err = s.Deserialize(unchecked, path)
	noErr(t, err) // the limit binds the bindings' checks, not cuVS
	noErr(t, back.Close())
	if ctl != nil && deserializeCalls() != calls+1 {
		t.Errorf("Deserialize WithoutMemoryCheck called %d deserializers, want one", deserializeCalls()-calls)
	}
}

// deserializeOverPoolCap: on a small double device whose pool's cap leaves
// less than a file's need, Deserialize is refused before cuVS
// (*safe.MemoryError naming the cap); with safe.WithoutMemoryCheck cuVS is
// called and the pool refuses it as RMM's does (safe.ErrOutOfMemory from
// the library), leaving nothing allocated.
func (s *IndexSuite[I, P]) deserializeOverPoolCap(t *testing.T) {
	ctl := smallDevice(t)
	Check(t)
	res := Resources(t)
	idx, _ := s.memBuild(t, res)
	path := filepath.Join(t.TempDir(), s.Name+".idx")
	noErr(t, s.Serialize(idx, res, path))
	loaded := s.loadedBytes(t, res, path)
	m, err := res.DeviceMemory()
	noErr(t, err)
	// leave room for half what the loaded index holds
	fill := (m.Available - loaded/2) / 1024
	if fill < 1 {
		t.Fatalf("DeviceMemory %+v: no room to fill before a load of %d bytes", m, loaded)
	}
	filler, err := safe.NewDeviceMatrix[float32](res, int(fill), 256)
	noErr(t, err)
	defer filler.Close()
	me := refusedLoad(t, res, "Deserialize over the pool's cap", func() (I, error) { return s.Deserialize(res, path) })
	if me.PoolMax != m.Pool.Max || me.Need > loaded {
		t.Errorf("refusal %+v: want the pool's cap %d named, a need of at most %d", me, m.Pool.Max, loaded)
	}
	unchecked, err := safe.NewResources(safe.WithoutMemoryCheck())
	noErr(t, err)
	defer unchecked.Close()
	calls, a0 := deserializeCalls(), ctl.DeviceMemory(0).Allocated
	back, err := s.Deserialize(unchecked, path)
	var ce *safe.Error
	if err == nil || !errors.Is(err, safe.ErrOutOfMemory) || !errors.As(err, &ce) {
		if err == nil {
			_ = back.Close()
		}
		t.Fatalf("Deserialize WithoutMemoryCheck over the pool's cap: %v (%T), want the pool's out-of-memory from cuVS", err, err)
	}
	if got := deserializeCalls(); got != calls+1 {
		t.Errorf("WithoutMemoryCheck: %d deserializers called, want one", got-calls)
	}
	if a := ctl.DeviceMemory(0).Allocated; a != a0 {
		t.Errorf("the failed Deserialize left the double holding %d more bytes", a-a0)
	}
}

// smallDevice makes the double's device 256 MiB with a pool capped at
// half of it, until the end of t (then the default pool again).
func smallDevice(t *testing.T) *cuvsdouble.Control {
	t.Helper()
	ctl := Double(t, "a small device")
	noErr(t, safe.ResetMemoryResource())
	ctl.SetDeviceBytes(256 << 20)
	t.Cleanup(func() {
		_ = safe.ResetMemoryResource()
		ctl.SetDeviceBytes(0)
		if err := safe.EnableMemoryPool(safe.DefaultPoolInitialPercent, safe.DefaultPoolMaxPercent, false); err != nil {
			t.Error(err)
		}
	})
	noErr(t, safe.EnableMemoryPool(1, 50, false))
	return ctl
}

// extendOverPoolCap: on a small double device whose pool's cap leaves an
// Extend too little room, Extend is refused before cuVS
// (*safe.MemoryError naming the cap); with safe.WithoutMemoryCheck cuVS is
// called and the pool refuses it as RMM's does (safe.ErrOutOfMemory from
// the library); the double then leaves the index as it was.
func (s *IndexSuite[I, P]) extendOverPoolCap(t *testing.T) {
	if s.Extend == nil {
		t.Skipf("%s has no Extend", s.Name)
	}
	ctl := smallDevice(t)
	Check(t)
	res := Resources(t)
	idx, _ := s.memBuild(t, res)
	l := s.memLists()
	add := l * memPerList
	more := deviceFrom(t, res, memData(2, l, memPerList, s.Dim), add, s.Dim)
	ids, dist := s.memSearch(t, res, idx)
	est, err := s.EstimateExtend(idx, add)
	noErr(t, err)
	m, err := res.DeviceMemory()
	noErr(t, err)
	// leave room for Extend's own allocations and half its peak
	fill := (m.Available - est.Dataset - est.BuildPeak/2) / 1024
	if fill < 1 {
		t.Fatalf("DeviceMemory %+v: no room to fill before an Extend needing %+v", m, est)
	}
	filler, err := safe.NewDeviceMatrix[float32](res, int(fill), 256)
	noErr(t, err)
	defer filler.Close()
	calls := ctl.Calls(s.ExtendC)
	err = s.Extend(idx, res, more)
	var me *safe.MemoryError
	if !errors.As(err, &me) || !errors.Is(err, safe.ErrOutOfMemory) {
		t.Fatalf("Extend over the pool's cap: %v, want a *safe.MemoryError", err)
	}
	if me.PoolMax != m.Pool.Max || ctl.Calls(s.ExtendC) != calls {
		t.Errorf("refusal %+v, %d calls of %s: want the pool's cap %d named and no call", me, ctl.Calls(s.ExtendC)-calls, s.ExtendC, m.Pool.Max)
	}
	unchecked, err := safe.NewResources(safe.WithoutMemoryCheck())
	noErr(t, err)
	defer unchecked.Close()
	err = s.Extend(idx, unchecked, more)
	var ce *safe.Error
	if err == nil || !errors.Is(err, safe.ErrOutOfMemory) || !errors.As(err, &ce) {
		t.Fatalf("Extend WithoutMemoryCheck over the pool's cap: %v (%T), want the pool's out-of-memory from cuVS", err, err)
	}
	if got := ctl.Calls(s.ExtendC); got != calls+1 {
		t.Errorf("WithoutMemoryCheck: %s called %d times, want once", s.ExtendC, got-calls)
	}
	if got := idx.Rows(); got != add {
		t.Errorf("Rows() = %d after the failed Extend, want %d", got, add)
	}
	if gi, gd := s.memSearch(t, res, idx); !slices.Equal(gi, ids) || !slices.Equal(gd, dist) {
		t.Errorf("the index searches differently after the failed Extend")
	}
}
