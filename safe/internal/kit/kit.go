// Package kit is the toolkit of the safe layer's algorithm packages
// (safe/bruteforce, safe/cagra, safe/ivfflat, ...): argument errors, the
// wrapping of cuVS's errors, tensor rules, the binding of a search's
// tensors and filter, and access to a Resources' C handle. It is internal:
// what a user calls lives in package safe, which hands out no C handle.
package kit

import (
	"sync"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/base"
)

// Argf returns a *safe.ArgError. As with fmt.Errorf, an error given for a
// %w verb is kept as the cause (safe.ArgError.Err). It is package safe's
// own (through base.Argf): one implementation for the whole safe layer.
func Argf(op, arg, format string, args ...any) error { return base.Argf(op, arg, format, args...) }

// Wrap turns an error from package generated into the safe layer's: a
// *generated.Error becomes a *safe.Error for op; other errors are wrapped
// with op. nil stays nil. It is package safe's own (through base.Wrap).
func Wrap(op string, err error) error {
	if err == nil {
		return nil // without the hook's call: the common case
	}
	return base.Wrap(op, err)
}

// Reason extracts the human part of a cuVS error text: its first line,
// without the source location.
func Reason(text string) string { return base.Reason(text) }

// CPath returns path as a NUL-terminated byte slice for a C call, refusing
// paths that C cannot represent.
func CPath(op, path string) ([]byte, error) {
	b, why := base.CPath(path)
	if why != "" {
		return nil, Argf(op, "path", "%s", why)
	}
	return b, nil
}

// Lock takes res for one C call (with its device current, for a Resources
// made with safe.OnDevice) and returns its handle; Unlock gives it back, on
// the same goroutine. A nil or closed res is refused.
func Lock(res *safe.Resources, op string) (generated.CuvsResources_t, error) {
	return base.Lock(res, op)
}

// Retain keeps res alive, Close notwithstanding, until release is called:
// for a C object made with res outside an index's Life (Life.Keep is the
// index's form).
func Retain(res *safe.Resources, op string) (release func(), err error) { return base.Retain(res, op) }

// Unlock ends what Lock began.
func Unlock(res *safe.Resources) { base.Unlock(res) }

// Open refuses a nil, zero or closed res as Lock does, naming op, and
// holds nothing: an operation that goes on through the safe layer's public
// functions (safe.DeviceMatrixFrom, whose refusals name themselves) asks
// it first, so that a closed res is refused under the caller's name.
func Open(res *safe.Resources, op string) error { return base.Open(res, op) }

// cHandle is a generated handle type whose struct is S.
type cHandle[S any] interface {
	~uintptr
	Ref() *S
}

// Params copies *v, the parameters of one C call, into res's C memory for
// them and returns its address as the handle type H of S (a search's or a
// build's params, filled in Go memory per call). res must be locked for
// that call (Lock, CallWith, a Prepared's Lock) and the call made before
// Unlock; C reads the struct and keeps nothing of it. Unlike the struct's
// Pin, it allocates nothing: the search paths stay free of allocations.
func Params[H cHandle[S], S any](res *safe.Resources, v *S) H {
	h := H(base.Params(res, unsafe.Sizeof(*v)))
	*h.Ref() = *v
	return h
}

// CheckDevice refuses, with an *ArgError naming arg, memory of another CUDA
// device than res's.
func CheckDevice(res *safe.Resources, op, arg string, dev dlpack.Device) error {
	return base.CheckDevice(res, op, arg, dev)
}

// BindFilter checks f against an index of rows rows searched with nQueries
// queries, binds its memory to call c and returns the C filter. A nil f is
// no filter. kinds lists the kinds the algorithm supports.
func BindFilter(f *safe.Filter, op string, c dlpack.Call, rows, nQueries int64, kinds ...safe.FilterKind) (generated.CuvsFilter, error) {
	if f == nil {
		return generated.CuvsFilter{Type: generated.CuvsFilterType_NO_FILTER}, nil
	}
	ok := false
	for _, k := range kinds {
		ok = ok || k == f.Kind()
	}
	if !ok {
		return generated.CuvsFilter{}, Argf(op, "filter", "a %s filter is not supported here", f.Kind())
	}
	return base.BindFilter(f, op, c, rows, nQueries)
}

// FilterHostWords returns bitset f's words in host memory, read-only:
// copied from the device on the first call (with res) and kept with f.
func FilterHostWords(f *safe.Filter, op string, res *safe.Resources) ([]uint32, error) {
	return base.FilterHostWords(f, op, res)
}

// HoldFilter keeps f from being closed until ReleaseFilter: Close of f
// refuses meanwhile. It refuses a closed f (safe.ErrClosed) and allocates
// nothing.
func HoldFilter(f *safe.Filter, op string) error { return base.HoldFilter(f, op) }

// ReleaseFilter ends a HoldFilter.
func ReleaseFilter(f *safe.Filter) { base.ReleaseFilter(f) }

// NewBatchBitmap makes a bitmap filter for at most maxQueries queries over
// rows rows, and returns it with its device words, which the caller
// rewrites for each search (with nothing else searching with it) and then
// describes with SetBatchQueries. Close the filter to free them.
func NewBatchBitmap(res *safe.Resources, maxQueries, rows int64) (*safe.Filter, *safe.DeviceVector[uint32], error) {
	f, w, err := base.NewBatchBitmap(res, maxQueries, rows)
	if err != nil {
		return nil, nil, err
	}
	return f.(*safe.Filter), w.(*safe.DeviceVector[uint32]), nil
}

// SetBatchQueries makes f, from NewBatchBitmap, a filter for
// len(perQuery) queries, query q letting perQuery[q] rows through.
func SetBatchQueries(f *safe.Filter, perQuery []int64) { base.SetBatchQueries(f, perQuery) }

// CheckFilter makes BindFilter's checks of f without binding it: its kind
// against kinds, its rows against the index's, a bitmap's queries against
// nQueries. A nil f passes.
func CheckFilter(f *safe.Filter, op string, rows, nQueries int64, kinds ...safe.FilterKind) error {
	if f == nil {
		return nil
	}
	ok := false
	for _, k := range kinds {
		ok = ok || k == f.Kind()
	}
	if !ok {
		return Argf(op, "filter", "a %s filter is not supported here", f.Kind())
	}
	if int64(f.Rows()) != rows {
		return Argf(op, "filter", "made for %d rows, the index has %d", f.Rows(), rows)
	}
	if f.Kind() == safe.Bitmap && int64(f.Queries()) != nQueries {
		return Argf(op, "filter", "bitmap for %d queries, got %d", f.Queries(), nQueries)
	}
	return nil
}

// CopyBound copies between two tensors already bound to a call
// (cuvsMatrixCopy) and waits for the copy.
func CopyBound(op string, res *safe.Resources, src, dst *generated.DLManagedTensor) error {
	h, err := Lock(res, op)
	if err != nil {
		return err
	}
	defer Unlock(res)
	if err := generated.CuvsMatrixCopy(h, src, dst); err != nil {
		return Wrap(op, err)
	}
	return Wrap(op, generated.CuvsStreamSync(h))
}

// Words returns the number of 32-bit words a bitset for rows rows holds.
func Words(rows int64) int64 { return (rows + 31) / 32 }

// CMetric returns a metric as the C enum.
func CMetric(m safe.Metric) generated.CuvsDistanceType { return generated.CuvsDistanceType(m) }

// Defaults is a params struct read once from the library (an algorithm's
// DefaultSearchParams, say), for calls given nil params: the first Get
// reads it, later ones return the same value, which callers only read.
type Defaults[P any] struct {
	Read func() (P, error)
	mu   sync.Mutex
	ok   bool
	p    P
}

// Get returns the defaults, reading them on the first call (a failed read
// is retried by the next Get).
func (d *Defaults[P]) Get() (*P, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.ok {
		p, err := d.Read()
		if err != nil {
			return nil, err
		}
		d.p, d.ok = p, true
	}
	return &d.p, nil
}

// Or returns p, or, when p is nil, a fresh copy of what read returns: the
// defaults of a build's params.
func Or[P any](p *P, read func() (P, error)) (*P, error) {
	if p != nil {
		return p, nil
	}
	d, err := read()
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// CallWith runs one C call of a rare operation (build, extend, ...) with
// the views in bound to it (nil ones passed as nil), on res, then waits for
// res's stream: Go memory among the inputs is pinned only while the call
// lasts, and the caller may free or write device inputs once it returns.
// Search paths bind their tensors themselves and do not wait.
func CallWith(op string, res *safe.Resources, in []*dlpack.View, f func(generated.CuvsResources_t, []*generated.DLManagedTensor) error) error {
	c := dlpack.Begin(op)
	defer c.End()
	ts := make([]*generated.DLManagedTensor, len(in))
	for i, v := range in {
		if v == nil {
			continue
		}
		t, err := c.In(v)
		if err != nil {
			return Argf(op, "input", "%w", err)
		}
		ts[i] = t
	}
	h, err := Lock(res, op)
	if err != nil {
		return err
	}
	defer Unlock(res)
	if err := f(h, ts); err != nil {
		return Wrap(op, err)
	}
	return Wrap(op, generated.CuvsStreamSync(h))
}

// DataType converts an index's C dtype, whose lanes some of cuVS's paths
// leave 0 (deserialization), to a DLPack data type with lanes 1.
func DataType(d generated.DLDataType) dlpack.DataType {
	return dlpack.DataType{Code: dlpack.TypeCode(d.Code), Bits: d.Bits, Lanes: 1}
}

// WithPath runs f, a C call taking a file name (serialize, deserialize),
// with path as a C string on res, and wraps its error for op.
func WithPath(op string, res *safe.Resources, path string, f func(h generated.CuvsResources_t, path *byte) error) error {
	p, err := CPath(op, path)
	if err != nil {
		return err
	}
	h, err := Lock(res, op)
	if err != nil {
		return err
	}
	defer Unlock(res)
	return Wrap(op, f(h, &p[0]))
}

// Serialize is WithPath inside a shared use of an index (Life.Enter).
func Serialize(op string, res *safe.Resources, life *Life, path string, f func(h generated.CuvsResources_t, path *byte) error) error {
	if err := life.Enter(op); err != nil {
		return err
	}
	defer life.Leave()
	return WithPath(op, res, path, f)
}

// DeviceOf returns the CUDA device res works on, as a DLPack device: where
// an index built with res keeps its memory. A nil res gives the zero
// Device (the caller's next use of res refuses it).
func DeviceOf(res *safe.Resources, op string) (dlpack.Device, error) {
	if res == nil {
		return dlpack.Device{}, nil
	}
	id, err := base.DeviceID(res, op)
	if err != nil {
		return dlpack.Device{}, err
	}
	return dlpack.Device{Type: dlpack.CUDA, ID: id}, nil
}

// CheckIndexDevice refuses, with an *ArgError naming res, resources of
// another CUDA device than dev, where an index keeps its memory: searching
// it from another device would read memory that device cannot see. The
// zero Device (not known) passes.
func CheckIndexDevice(res *safe.Resources, op string, dev dlpack.Device) error {
	if dev.Type != dlpack.CUDA || res == nil {
		return nil
	}
	id, err := base.DeviceID(res, op)
	if err != nil {
		return err
	}
	if id != dev.ID {
		return Argf(op, "res", "the index is on CUDA device %d, the resources work on device %d", dev.ID, id)
	}
	return nil
}
