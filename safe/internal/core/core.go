// Package core is what every index package shares above kit: the C
// handle and its life, the index's size and device, its serialization to
// files and streams, its one-call searches from Go memory and the shell of
// its prepared searches. An algorithm describes itself once, in a Kind
// (its name, its C entry points, how it reads its sizes back), the way
// database/sql's drivers describe themselves to it; the package keeps its
// own exported types and documented methods, each a line or two over the
// Kind's.
//
// A package embeds an Index in its own index type and declares its Kind:
//
//	type Index struct {
//		c      core.Index[generated.CuvsIvfSqIndex_t]
//		nLists int64 // what only IVF-SQ has
//	}
//
//	var kind = core.Kind[Index, generated.CuvsIvfSqIndex_t]{
//		Name: "ivfsq", Create: generated.CuvsIvfSqIndexCreate, ...,
//		Core: func(i *Index) *core.Index[generated.CuvsIvfSqIndex_t] { return &i.c },
//	}
//
//	func (idx *Index) Rows() int { return kind.Rows(idx) }
package core

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/live"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/hostsearch"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// Index is the part of an index every algorithm has, embedded (as a named
// field) in each package's index type.
type Index[H ~uintptr] struct {
	H    H             // the C handle, C memory
	Dev  dlpack.Device // where the index keeps its memory: the device of the resources that made it (zero: not known, then not checked)
	Rows atomic.Int64  // changed by Extend; read by searches meanwhile
	Dim  int64

	Life   kit.Life        // Close, cleanup, searches, Extend, borrows, views
	Slices hostsearch.Pool // SearchSlice's device buffers
	Mem    *kit.Held       // what the index counts in safe.DeviceMemory.InUse; made by New
}

// Kind describes one algorithm's index to the core: T is the package's
// index type, H its C handle. Declare it as a package variable and call
// Init once (from an init function: its funcs may refer to the package's
// methods).
type Kind[T any, H ~uintptr] struct {
	Name string // the package's name, which prefixes every operation: "ivfsq"

	Create  func(*H) error // cuvs...IndexCreate
	Destroy func(H) error  // cuvs...IndexDestroy
	// Wrap wraps Create's error for an operation; nil is kit.Wrap.
	Wrap func(op string, err error) error

	// SerializeC and DeserializeC are the C calls that write and read a
	// file (cuvs...Serialize, cuvs...Deserialize).
	SerializeC, DeserializeC func(h generated.CuvsResources_t, path *byte, idx H) error

	// CheckFile checks a file's layout before any C call of Deserialize,
	// its first size bytes (what precedes a checksum trailer); nil checks
	// only that it can be opened (kit.CheckFile).
	CheckFile func(op, path string, size int64) error
	// FileNeed is the device memory the index in a file (its first size
	// bytes, after CheckFile) will hold, bounded from below by what its
	// header tells: Deserialize refuses, before any C call, a file whose
	// need res's device cannot give (kit.CheckFileMemory). An error is a
	// header that does not fit its file (safe.ErrCorruptIndex). Nil checks
	// nothing.
	FileNeed func(path string, size int64) (int64, error)

	// Sidecar: the format's reader refuses bytes after its data
	// (hnswlib's), so Serialize writes the checksum to a sidecar file
	// beside the file rather than after its data; streams still carry it
	// after the data (DeserializeFrom cuts it off). The package then reads
	// files with its own Deserialize.
	Sidecar bool

	// Core returns the Index inside a package's index.
	Core func(*T) *Index[H]
	// Refresh reads the sizes back from the library after a build or a
	// deserialization (Made); nil reads nothing.
	Refresh func(t *T, op string) error
	// Loaded reads from a file Deserialize has read what the library
	// does not say (IVF-Flat's size); nil reads nothing.
	Loaded func(t *T, op, path string) error
	// Release frees the package's own buffers at Close, after the uses in
	// flight and before the handle (the core frees Slices itself).
	Release func(t *T)
	// Held is the device memory the index holds, from its sizes as read
	// back (Refresh, Loaded): what Deserialize counts in
	// safe.DeviceMemory.InUse, and Recount after an Extend; nil counts
	// nothing.
	Held func(t *T) int64

	Live *live.Counter // the indexes not yet destroyed, for tests' leak checks; made by Init
	Op   Ops           // the operations' names; made by Init
}

// Ops are the names of a Kind's operations, made once so that naming an
// operation on a hot path allocates nothing.
type Ops struct {
	Search, Prepare, Extend, SearchSlice                 string
	Serialize, SerializeTo, Deserialize, DeserializeFrom string
	Close, Prepared                                      string
}

// Init makes the Kind's names and live counter. It returns k.
func (k *Kind[T, H]) Init() *Kind[T, H] {
	n := k.Name
	k.Op = Ops{
		Search: n + ".Index.Search", Prepare: n + ".Index.Prepare", Extend: n + ".Index.Extend",
		SearchSlice: n + ".SearchSlice",
		Serialize:   n + ".Index.Serialize", SerializeTo: n + ".Index.SerializeTo",
		Deserialize: n + ".Deserialize", DeserializeFrom: n + ".DeserializeFrom",
		Close: n + ".Index.Close", Prepared: n + ".Prepared",
	}
	if k.Live == nil {
		k.Live = live.New(n + ".Index")
	}
	return k
}

// New makes an index whose C handle is created but not yet filled, for
// the build, deserialization or merge op that follows on res: the handle
// is counted and freed with the index (by Close, or a cleanup if it is
// dropped), and res is kept until then (kit.Life.Keep; a refusal of res is
// left to that operation's own call). On failure of what follows, call
// Fail; on success, Made.
func (k *Kind[T, H]) New(op string, res *safe.Resources) (*T, error) {
	var h H
	if err := k.Create(&h); err != nil {
		if k.Wrap != nil {
			return nil, k.Wrap(op, err)
		}
		return nil, kit.Wrap(op, err)
	}
	t := new(T)
	c := k.Core(t)
	c.H = h
	destroy := k.Destroy
	kit.Start(&c.Life, t, k.Name+".Index(%p)", k.Live, func() error { return destroy(h) })
	c.Mem = kit.NewHeld(&c.Life)
	_ = c.Life.Keep(res, op)
	return t, nil
}

// Recount counts what t holds now (Held) in safe.DeviceMemory.InUse, in
// place of what it counted before: after a deserialization, or an Extend
// that changed its sizes.
func (k *Kind[T, H]) Recount(t *T, op string, res *safe.Resources) {
	if k.Held != nil {
		k.Core(t).Mem.Set(op, res, k.Held(t))
	}
}

// Fail frees an index New made that is not handed out.
func (k *Kind[T, H]) Fail(t *T) { k.Core(t).Life.Fail() }

// Made ends a build, deserialization or merge of t on res that returned
// err: on error it frees t (Fail) and returns err; otherwise it reads the
// sizes back (Refresh) and where the index lives, and returns t.
func (k *Kind[T, H]) Made(op string, res *safe.Resources, t *T, err error) (*T, error) {
	if err == nil && k.Refresh != nil {
		err = k.Refresh(t, op)
	}
	if err != nil {
		k.Fail(t)
		return nil, err
	}
	c := k.Core(t)
	c.Dev, _ = kit.DeviceOf(res, op) // unknown (zero) if it cannot be read: then not checked
	return t, nil
}

// Of returns t's Index, or an error for a nil t (kit.NilIndex) or the
// zero value (never built), for op.
func (k *Kind[T, H]) Of(t *T, op string) (*Index[H], error) {
	if t == nil {
		return nil, kit.NilIndex(op)
	}
	c := k.Core(t)
	if err := c.Life.Built(op); err != nil {
		return nil, err
	}
	return c, nil
}

// Enter is Of and a shared use (kit.Life.Enter); Leave the Index after.
func (k *Kind[T, H]) Enter(t *T, op string) (*Index[H], error) {
	if t == nil {
		return nil, kit.NilIndex(op)
	}
	c := k.Core(t)
	if err := c.Life.Enter(op); err != nil {
		return nil, err
	}
	return c, nil
}

// Leave ends a shared use Enter began.
func (c *Index[H]) Leave() { c.Life.Leave() }

// Gone reports whether t is nil, never made or closed (Close has begun):
// then its getters return their zero values (safe's doc: ErrClosed's rule
// for getters).
func (k *Kind[T, H]) Gone(t *T) bool { return t == nil || k.Core(t).Life.Closed() }

// Rows returns t's rows; 0 for a nil or closed t.
func (k *Kind[T, H]) Rows(t *T) int {
	if k.Gone(t) {
		return 0
	}
	return int(k.Core(t).Rows.Load())
}

// Dim returns t's dimension; 0 for a nil or closed t.
func (k *Kind[T, H]) Dim(t *T) int {
	if k.Gone(t) {
		return 0
	}
	return int(k.Core(t).Dim)
}

// Serialize writes t to the file path (SerializeC), inside a shared use,
// then its checksum (kit.Seal): after cuVS's bytes, or in a sidecar file
// for a Sidecar kind.
func (k *Kind[T, H]) Serialize(t *T, res *safe.Resources, path string) error {
	op := k.Op.Serialize
	if err := k.serialize(op, t, res, path); err != nil {
		return err
	}
	return kit.Seal(op, path, k.Sidecar)
}

// SerializeCuVS writes t to the file path exactly as cuVS does, without
// the checksum: for the tests that read what cuVS itself wrote.
func (k *Kind[T, H]) SerializeCuVS(t *T, res *safe.Resources, path string) error {
	return k.serialize(k.Op.Serialize, t, res, path)
}

// serialize writes t to the file path as cuVS does, without a checksum.
func (k *Kind[T, H]) serialize(op string, t *T, res *safe.Resources, path string) error {
	if t == nil {
		return kit.NilIndex(op)
	}
	c := k.Core(t)
	return kit.Serialize(op, res, &c.Life, path, func(h generated.CuvsResources_t, p *byte) error {
		return k.SerializeC(h, p, c.H)
	})
}

// SerializeTo writes t to w as Serialize writes a file, the checksum
// trailer after cuVS's bytes (kit.SerializeSealed), for every kind.
func (k *Kind[T, H]) SerializeTo(t *T, res *safe.Resources, w io.Writer) (int64, error) {
	op := k.Op.SerializeTo
	if _, err := k.Of(t, op); err != nil { // a zero index says so, before its arguments are checked
		return 0, err
	}
	return kit.SerializeSealed(op, w, func(path string) error { return k.serialize(op, t, res, path) })
}

// Deserialize reads an index from the file path: its checksum where it
// has one (kit.VerifyFile), CheckFile, the device memory check of
// FileNeed, then a new handle filled by DeserializeC (a refusal of the
// file's contents is safe.ErrCorruptIndex), then Made, and counts what the
// index holds (Held). cuVS's reader stops at its last field, before the
// trailer.
func (k *Kind[T, H]) Deserialize(res *safe.Resources, path string, opts []safe.DeserializeOption) (*T, error) {
	op := k.Op.Deserialize
	lim, err := kit.Limits(op, opts)
	if err != nil {
		return nil, err
	}
	if err := kit.CheckFile(op, path); err != nil { // refused before any C call: a missing file is fs.ErrNotExist
		return nil, err
	}
	info, err := kit.VerifyFile(op, path, false, lim)
	if err != nil {
		return nil, err
	}
	if k.CheckFile != nil {
		if err := k.CheckFile(op, path, info.DataLen); err != nil {
			return nil, err
		}
	}
	if k.FileNeed != nil {
		need, err := k.FileNeed(path, info.DataLen)
		if err != nil {
			return nil, kit.Corrupt(op, err)
		}
		if err := kit.CheckFileMemory(op, res, need); err != nil {
			return nil, err
		}
	}
	t, err := k.New(op, res)
	if err != nil {
		return nil, err
	}
	h := k.Core(t).H
	err = kit.Deserialize(op, res, path, func(rh generated.CuvsResources_t, p *byte) error {
		return k.DeserializeC(rh, p, h)
	})
	if err == nil && k.Loaded != nil {
		err = k.Loaded(t, op, path)
	}
	if t, err = k.Made(op, res, t, err); err == nil {
		k.Recount(t, op, res)
	}
	return t, err
}

// DeserializeFrom reads an index from r through Deserialize
// (kit.DeserializeFrom: the stream's checksum checked, and cut off).
func (k *Kind[T, H]) DeserializeFrom(res *safe.Resources, r io.Reader, opts []safe.DeserializeOption) (*T, error) {
	return kit.DeserializeFrom(k.Op.DeserializeFrom, r, opts, func(path string) (*T, error) { return k.Deserialize(res, path, nil) })
}

// Close frees t (kit.Life.Close): Release and the one-call searches'
// buffers go after the uses in flight, before the handle. A nil t is
// harmless.
func (k *Kind[T, H]) Close(t *T) error {
	if t == nil {
		return nil
	}
	c := k.Core(t)
	return c.Life.Close(k.Op.Close, func() {
		_ = c.Slices.Close()
		if k.Release != nil {
			k.Release(t)
		}
	})
}

// Search runs search, a package's search of t bound to one call c, inside
// a shared use of t: it waits while an Extend runs or is pending and
// refuses after Close has begun. The call's borrows end when search
// returns.
func (k *Kind[T, H]) Search(t *T, op string, search func(c dlpack.Call) error) error {
	ci, err := k.Enter(t, op)
	if err != nil {
		return err
	}
	defer ci.Leave()
	call := dlpack.Begin(op)
	defer call.End()
	return search(call)
}

// NeverPrepared is the error of a method of a Prepared not made by
// Prepare: it matches safe.ErrClosed.
func NeverPrepared(op string) error {
	return fmt.Errorf("%s: %w: the zero value, never built (a Prepared not made by Index.Prepare)", op, safe.ErrClosed)
}

// centersRule is every IVF package's Centers destination.
var centersRule = kit.Rule{Arg: "dst", Memory: kit.AnyMemory, DTypes: []dlpack.DataType{dlpack.Float32}, Rank: 2}

// Centers is the IVF packages' Centers: it copies the lists' centers,
// lists() × Dim() float32, into dst (host or device memory, rows
// contiguous) and waits for the copy. get is the C getter, which
// overwrites the tensor it is given with a view into the index (it does
// not copy): the core hands it a tensor of its own and copies from that
// view (kit.CopyOut).
func (k *Kind[T, H]) Centers(t *T, op string, res *safe.Resources, dst dlpack.TensorMut, lists func() int64, get func(H, *generated.DLManagedTensor) error) error {
	c, err := k.Of(t, op) // a zero index says so, before its arguments are checked
	if err != nil {
		return err
	}
	if dst == nil {
		return kit.Argf(op, "dst", "nil")
	}
	dm, err := dst.ViewMut()
	if err != nil {
		return kit.Argf(op, "dst", "%w", err)
	}
	if err := centersRule.CheckMut(op, &dm); err != nil {
		return err
	}
	if err := c.Life.Enter(op); err != nil {
		return err
	}
	defer c.Leave()
	if n := lists(); dm.Dim(0) != n || dm.Dim(1) != c.Dim {
		return kit.Argf(op, "dst", "shape %v, want [%d %d]", dm.Shape(), n, c.Dim)
	}
	return kit.CopyOut(op, res, &dm, func(mt *generated.DLManagedTensor) error { return get(c.H, mt) })
}
