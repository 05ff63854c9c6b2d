package batch

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// slot is one batch in flight: its own Resources (its own CUDA stream), its
// staging buffers in pinned host memory and, with Options.DeviceBuffers,
// its device buffers, all allocated once by New and reused by every batch
// the slot runs. One worker goroutine runs the slot's batches, one at a
// time.
type slot[T dlpack.DType, N Neighbor] struct {
	res                *safe.Resources
	pinQ               *safe.PinnedMatrix[T] // maxBatch × dim, written by the worker
	pinN               *safe.PinnedMatrix[N] // maxBatch × maxK, read by the worker
	pinD               *safe.PinnedMatrix[float32]
	devQ               *safe.DeviceMatrix[T] // nil: the search reads and writes the pinned staging
	devN               *safe.DeviceMatrix[N]
	devD               *safe.DeviceMatrix[float32]
	views              []*rowViews // by row count, made on first use
	reqs               []*request[T, N]
	wake               chan struct{} // a batch to take; closed by Close
	dispatched         time.Time     // when kick last woke it (under the batcher's mu)
	light              bool          // its batch searches with the light-load kernel (set by take)
	filter             *safe.Filter  // its batch's requests' filter (set by take, held until released), or nil
	sleep              bool          // its searches are waited for asleep (Options.Wait WaitSleep: Resources.SyncBlocking)
	mixed              bool          // its batch holds requests of several filters, searched with a bitmap (set by take)
	scan               bool          // its batch is a scan (set by take, cleared by done)
	mixedRows          int           // the most query rows of a mixed batch
	bitmap             *bitmapBufs   // the mixed batches' bitmap, made by the first
	dim, maxK, maxRows int
}

// rowViews are the views of the first n rows of a slot's buffers: made once
// per row count, so that a batch builds no view (and allocates nothing).
type rowViews struct {
	pinQ       dlpack.View
	devQ       dlpack.ViewMut
	devQv      dlpack.View
	devN, devD dlpack.ViewMut
	devNv      dlpack.View
	devDv      dlpack.View
	pinN, pinD dlpack.ViewMut
}

func newSlot[T dlpack.DType, N Neighbor](maxBatch, dim, maxK int, deviceBuffers, sleep bool) (s *slot[T, N], err error) {
	s = &slot[T, N]{dim: dim, maxK: maxK, maxRows: maxBatch, views: make([]*rowViews, maxBatch+1), wake: make(chan struct{}, 1), sleep: sleep}
	if s.res, err = safe.NewResources(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
		}
	}()
	if s.pinQ, err = safe.NewPinnedMatrix[T](maxBatch, dim); err != nil {
		return s, err
	}
	if s.pinN, err = safe.NewPinnedMatrix[N](maxBatch, maxK); err != nil {
		return s, err
	}
	if s.pinD, err = safe.NewPinnedMatrix[float32](maxBatch, maxK); err != nil {
		return s, err
	}
	if !deviceBuffers {
		return s, nil
	}
	if s.devQ, err = safe.NewDeviceMatrix[T](s.res, maxBatch, dim); err != nil {
		return s, err
	}
	if s.devN, err = safe.NewDeviceMatrix[N](s.res, maxBatch, maxK); err != nil {
		return s, err
	}
	s.devD, err = safe.NewDeviceMatrix[float32](s.res, maxBatch, maxK)
	return s, err
}

// close frees the buffers, then the Resources.
func (s *slot[T, N]) close() error {
	var errs []error
	add := func(made bool, c interface{ Close() error }) {
		if made {
			errs = append(errs, c.Close())
		}
	}
	add(s.pinQ != nil, s.pinQ)
	add(s.pinN != nil, s.pinN)
	add(s.pinD != nil, s.pinD)
	add(s.devQ != nil, s.devQ)
	add(s.devN != nil, s.devN)
	add(s.devD != nil, s.devD)
	if s.bitmap != nil {
		errs = append(errs, s.bitmap.close())
	}
	return errors.Join(append(errs, s.res.Close())...)
}

// rows returns the views of the first n rows, making them on first use.
func (s *slot[T, N]) rows(n int) (*rowViews, error) {
	if v := s.views[n]; v != nil {
		return v, nil
	}
	v := new(rowViews)
	var err error
	if v.pinQ, err = firstRows(s.pinQ, n); err != nil {
		return nil, err
	}
	if v.pinN, err = firstRowsMut(s.pinN, n); err != nil {
		return nil, err
	}
	if v.pinD, err = firstRowsMut(s.pinD, n); err != nil {
		return nil, err
	}
	if s.devQ == nil {
		s.views[n] = v
		return v, nil
	}
	if v.devQ, err = firstRowsMut(s.devQ, n); err != nil {
		return nil, err
	}
	if v.devN, err = firstRowsMut(s.devN, n); err != nil {
		return nil, err
	}
	if v.devD, err = firstRowsMut(s.devD, n); err != nil {
		return nil, err
	}
	v.devQv, _ = v.devQ.View()
	v.devNv, _ = v.devN.View()
	v.devDv, _ = v.devD.View()
	s.views[n] = v
	return v, nil
}

// matrix is what the slot's buffers have in common.
type matrix interface {
	ViewMut() (dlpack.ViewMut, error)
	Owner() *dlpack.Owner
}

// firstRowsMut is a writable view of the first n rows of m, sharing its
// memory and borrow state.
func firstRowsMut(m matrix, n int) (dlpack.ViewMut, error) {
	whole, err := m.ViewMut()
	if err != nil {
		return dlpack.ViewMut{}, err
	}
	p, err := whole.Data()
	if err != nil {
		return dlpack.ViewMut{}, err
	}
	v, err := dlpack.FromRawPartsMut(p, whole.Device(), []int64{int64(n), whole.Dim(1)}, nil, whole.DType())
	if err != nil {
		return dlpack.ViewMut{}, err
	}
	return v.WithOwner(m.Owner()), nil
}

func firstRows(m matrix, n int) (dlpack.View, error) {
	v, err := firstRowsMut(m, n)
	if err != nil {
		return dlpack.View{}, err
	}
	return v.View()
}

// search runs one batch of n rows already staged in pinQ and waits for it:
// it searches the pinned staging itself (pinned memory is device memory to
// cuVS: the GPU reads the queries and writes the results over the bus), or,
// with device buffers, copies the queries to the device, searches there
// and copies the results back into pinN and pinD. The stream is
// synchronized whatever failed, so that nothing still reads or writes the
// staging buffers when search returns. The wait spins (Resources.Sync)
// unless the slot waits asleep (s.sleep: Resources.SyncBlocking).
func (s *slot[T, N]) search(search searchFunc, n int, f *safe.Filter) error {
	const op = "batch.Batcher.Search"
	v, err := s.rows(n)
	if err != nil {
		return kit.Wrap(op, err)
	}
	if s.devQ == nil {
		return errors.Join(search(s.res, &v.pinQ, &v.pinN, &v.pinD, f), s.wait())
	}
	err = s.copy(op, &v.pinQ, &v.devQ, nil, nil)
	if err == nil {
		err = search(s.res, &v.devQv, &v.devN, &v.devD, f)
	}
	if err == nil {
		err = s.copy(op, &v.devNv, &v.pinN, &v.devDv, &v.pinD)
	}
	return errors.Join(err, s.wait())
}

// wait waits for the slot's stream: spinning, or asleep (s.sleep).
func (s *slot[T, N]) wait() error {
	if s.sleep {
		return s.res.SyncBlocking()
	}
	return s.res.Sync()
}

// copy queues the copy of src into dst, and of src2 into dst2 when not nil
// (cuvsMatrixCopy), without waiting.
//
// The views are the slot's cached ones, taken by value: binding a view to a
// call ties it to that call, and the copies expire with it.
func (s *slot[T, N]) copy(op string, src *dlpack.View, dst *dlpack.ViewMut, src2 *dlpack.View, dst2 *dlpack.ViewMut) error {
	c := dlpack.Begin(op)
	defer c.End()
	sv, dv := *src, *dst
	a, err := c.In(&sv)
	if err != nil {
		return kit.Wrap(op, err)
	}
	b, err := c.Out(&dv)
	if err != nil {
		return kit.Wrap(op, err)
	}
	var a2, b2 *generated.DLManagedTensor
	if src2 != nil {
		sv2, dv2 := *src2, *dst2
		if a2, err = c.In(&sv2); err != nil {
			return kit.Wrap(op, err)
		}
		if b2, err = c.Out(&dv2); err != nil {
			return kit.Wrap(op, err)
		}
	}
	h, err := kit.Lock(s.res, op)
	if err != nil {
		return err
	}
	defer kit.Unlock(s.res)
	if err := generated.CuvsMatrixCopy(h, a, b); err != nil {
		return kit.Wrap(op, err)
	}
	if a2 != nil {
		return kit.Wrap(op, generated.CuvsMatrixCopy(h, a2, b2))
	}
	return nil
}

// stage copies the queries of r into rows [row, row+r.rows) of pinQ.
func (s *slot[T, N]) stage(r *request[T, N], row int) {
	copy(s.pinQ.Data()[row*s.dim:], r.q)
}

// deliver copies the results of rows [row, row+r.rows) into r's buffers,
// keeping the first r.k of the maxK columns, with unfilled slots as
// safe.Sentinel[N]() and +Inf (kit.Unfilled).
func (s *slot[T, N]) deliver(r *request[T, N], row int) {
	pn, pd := s.pinN.Data(), s.pinD.Data()
	for i := range r.rows {
		src := (row + i) * s.maxK
		copy(r.nb[i*r.k:(i+1)*r.k], pn[src:src+r.k])
		copy(r.dist[i*r.k:(i+1)*r.k], pd[src:src+r.k])
	}
	kit.Unfilled(r.nb[:r.rows*r.k], r.dist[:r.rows*r.k])
}

// The fan-out of a batch's wake-ups: the slot's goroutine copies every
// request's rows out of the staging (the slot is then free for its next
// batch), wakes the first fanRoot callers, and each woken caller wakes the
// next fanOut below it (a tree over the batch's requests: request i's
// children are fanRoot+i·fanOut ... fanRoot+i·fanOut+fanOut-1). A batch of
// 256 is woken in four levels, of 1,024 in five, the wake-ups spread over
// the callers' goroutines instead of one.
const (
	fanRoot = 8
	fanOut  = 4
)

// fan is a batch's requests while their callers wake one another: a copy
// of the slot's list (the slot runs its next batch meanwhile), pooled.
type fan[T dlpack.DType, N Neighbor] struct {
	reqs []*request[T, N]
	left atomic.Int32 // requests not yet woken (or skipped)
	pool *sync.Pool
}

// wakeBelow wakes the children of request pos (pos -1: the first fanRoot
// requests).
func (f *fan[T, N]) wakeBelow(pos int) {
	first, n := fanRoot+pos*fanOut, fanOut
	if pos < 0 {
		first, n = 0, fanRoot
	}
	for i := first; i < first+n && i < len(f.reqs); i++ {
		r := f.reqs[i]
		if r.state.Load() == stDelivering {
			// Its results are written: its caller wakes those below it
			// and counts itself (request.wake).
			r.fan, r.pos = f, i
			r.done <- struct{}{}
			continue
		}
		// Its caller left (cancelled before the copy): wake its children
		// here.
		f.wakeBelow(i)
		f.finish()
	}
}

// finish counts one request woken; the last one returns f to its pool.
func (f *fan[T, N]) finish() {
	if f.left.Add(-1) == 0 {
		clear(f.reqs)
		f.reqs = f.reqs[:0]
		f.pool.Put(f)
	}
}
