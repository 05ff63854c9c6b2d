package safetest

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
)

// Index is what the conformance suite needs of an index package's *Index.
type Index interface {
	Rows() int
	Dim() int
	DType() dlpack.DataType
	Close() error
}

// IndexSuite is one index package's side of the conformance suite
// (TestIndex, FuzzDeserialize), as testing/fstest.TestFS serves file
// systems: the package's functions, adapted to one shape, and what sets the
// package apart. I is its *Index and P its SearchParams (any type for a
// package whose searches take none: the suite then passes nil).
//
// Every search of the suite uses the params Probes gives; every build
// passes the IVF list count the old per-package test used (Build says how
// the others read it). Exact equality is asked only of the same search
// repeated (Search against SearchSlice and Prepared) and of round trips:
// what holds on the real library for approximate and exact algorithms
// alike.
type IndexSuite[I Index, P any] struct {
	// Name is the package's name ("ivfsq"), which its errors start with.
	Name string
	// Rows, Dim, Queries and K are the main fixture's sizes: Rows × Dim
	// values of Data(1, ...), Queries queries of Data(2, ...), K
	// neighbours each.
	Rows, Dim, Queries, K int
	// Data returns n × d values from seed (nil: Random).
	Data func(seed uint64, n, d int) []float32
	// Lists is the list count the main fixture's index is built with, and
	// Probes the probes its searches use (0: nil params, cuVS's
	// defaults). Packages without lists leave both 0.
	Lists, Probes uint32

	// Build builds an index of dataset (device or host memory) with the
	// package's small test params: for IVF, lists lists (0: nil params,
	// cuVS's defaults) and, for IVF-PQ, pq_dim dim/2; the others ignore
	// lists and dim.
	Build func(res *safe.Resources, dataset dlpack.Tensor, lists uint32, dim int) (I, error)
	// Search is Index.Search into device outputs (filter nil when
	// Filters is false).
	Search func(idx I, res *safe.Resources, params *P, queries dlpack.Tensor, neighbors, distances dlpack.TensorMut, filter *safe.Filter) error
	// SearchSlice and SearchSliceInto are the package's, for float32
	// (filter nil when Filters is false); SearchSlice64 its SearchSlice
	// for float64 queries, with nil params and no filter.
	SearchSlice     func(res *safe.Resources, idx I, params *P, queries []float32, k int, filter *safe.Filter) (*safe.Results, error)
	SearchSliceInto func(res *safe.Resources, idx I, params *P, queries []float32, k int, filter *safe.Filter, out *safe.Results) error
	SearchSlice64   func(res *safe.Resources, idx I, queries []float64, k int) (*safe.Results, error)
	// Prepare is Index.Prepare (with no filter).
	Prepare func(idx I, params *P, queries, neighbors, distances dlpack.TensorMut) (IVFPrepared, error)
	// Extend is Index.Extend with ids numbered by the package (nil: the
	// package has no Extend); ExtendArg is the name its refusals give the
	// rows ("vectors").
	Extend    func(idx I, res *safe.Resources, vectors dlpack.Tensor) error
	ExtendArg string
	// ExtendC is the C function Extend calls ("cuvsIvfFlatExtend"), counted
	// on the double, and EstimateExtend the package's Index.EstimateExtend
	// of rows rows (nil with Extend).
	ExtendC        string
	EstimateExtend func(idx I, rows int) (safe.MemoryEstimate, error)
	// MemTol is the relative tolerance of the device memory the bindings
	// count for an index against what the double holds (MemoryCounted); 0:
	// they must agree exactly.
	MemTol float64
	// SerializeTo, Serialize, DeserializeFrom and Deserialize are the
	// package's, the dataset included where that is a choice.
	SerializeTo     func(idx I, res *safe.Resources, w io.Writer) (int64, error)
	Serialize       func(idx I, res *safe.Resources, path string) error
	DeserializeFrom func(res *safe.Resources, r io.Reader, opts ...safe.DeserializeOption) (I, error)
	Deserialize     func(res *safe.Resources, path string, opts ...safe.DeserializeOption) (I, error)
	// SerializeCuVS writes the index to a file exactly as cuVS's serializer
	// does, without the bindings' checksum (nil: Integrity skips).
	SerializeCuVS func(idx I, res *safe.Resources, path string) error

	// Filters is whether the package's searches take a filter.
	Filters bool
	// Half is whether Build takes float16 data from host memory (its
	// non-finite values are refused as float32's are).
	Half bool
	// LosesDType is whether a deserialized index's DType is zero (cuVS
	// does not record the element type) rather than the built one's.
	LosesDType bool
	// FindsRows is whether a search for a row of the index finds that row
	// first, at distance ~0, with every list probed.
	FindsRows bool

	// DefaultSearchParams is the package's (nil: it has none);
	// WithProbes returns p with n probes (nil: the package has no probes);
	// NLists returns an index's lists and DefaultNLists cuVS's default
	// count (nil: the package has no lists).
	DefaultSearchParams func() (P, error)
	WithProbes          func(p P, n uint32) P
	NLists              func(idx I) int
	DefaultNLists       func() (int, error)
	// BadParams spoils one field of the default params and returns the
	// argument the refusal names ("params.Algo"); nil: none.
	BadParams func(p *P) string

	// Describe returns what a round trip keeps beyond rows × dim ("in 32
	// lists"); nil: nothing.
	Describe func(idx I) string
	// Deserialized checks what else a round trip keeps (CAGRA's graph);
	// nil: nothing.
	Deserialized func(t *testing.T, res *safe.Resources, built, back I)
	// Check checks a deserialized index's search of the main fixture's
	// queries against its data (brute force: the exact kNN; CAGRA: its
	// recall); nil: no more than the round trip's equality.
	Check func(t *testing.T, res *safe.Resources, data, queries []float32, neighbors *safe.DeviceMatrix[int64], distances *safe.DeviceMatrix[float32])
}

// TestIndex runs the conformance suite on s, one subtest per old
// per-package test, under its name without "Test":
// SerializeToDeserializeFrom, SerializeToErrors, SerializeRoundTrip,
// DeserializeBadFiles, Integrity, SearchSlice, SearchSliceAllocs,
// SearchSliceRefusedBeforeAllocation, Prepared, Closed,
// HostInputsNonFinite, BuildFromHostLikeDevice, ExtendUnderLoad,
// ZeroSearchParamsAreDefaults, NilParamsMeanDefaults, MemoryCounted,
// ExtendOverMemoryLimit, DeserializeOverMemoryLimit,
// DeserializeOverPoolCap and ExtendOverPoolCap. What a package lacks
// (Extend, params, lists) skips its subtests, saying so.
func TestIndex[I Index, P any](t *testing.T, s *IndexSuite[I, P]) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"SerializeToDeserializeFrom", s.serializeToDeserializeFrom},
		{"SerializeToErrors", s.serializeToErrors},
		{"SerializeRoundTrip", s.serializeRoundTrip},
		{"DeserializeBadFiles", s.deserializeBadFiles},
		{"Integrity", s.integrity},
		{"SearchSlice", s.searchSlice},
		{"SearchSliceAllocs", s.searchSliceAllocs},
		{"SearchSliceRefusedBeforeAllocation", s.searchSliceRefused},
		{"Prepared", s.prepared},
		{"Closed", s.closed},
		{"HostInputsNonFinite", s.hostInputsNonFinite},
		{"BuildFromHostLikeDevice", s.buildFromHost},
		{"ExtendUnderLoad", s.extendUnderLoad},
		{"ZeroSearchParamsAreDefaults", s.zeroSearchParams},
		{"NilParamsMeanDefaults", s.nilParams},
		{"MemoryCounted", s.memoryCounted},
		{"ExtendOverMemoryLimit", s.extendOverMemoryLimit},
		{"DeserializeOverMemoryLimit", s.deserializeOverMemoryLimit},
		{"DeserializeOverPoolCap", s.deserializeOverPoolCap},
		{"ExtendOverPoolCap", s.extendOverPoolCap},
	} {
		t.Run(c.name, c.run)
	}
}

// FuzzDeserialize is the body of the package's FuzzDeserializeFrom (the
// name its corpus in testdata/fuzz is kept under): the stream of a small
// index of data's rows (built with 4 lists), damaged and mutated, read by
// DeserializeFrom through fuzz (serialtest.Fuzz: never a panic or a hang;
// a searchable index, or safe.ErrCorruptIndex), a float32 index searched
// for one random query. data and fuzz are serialtest's Data and Fuzz,
// which live under safe/internal, out of this package's reach.
func FuzzDeserialize[I Index, P any](f *testing.F, s *IndexSuite[I, P],
	data func(f *testing.F, res *safe.Resources) *safe.DeviceMatrix[float32],
	fuzz func(f *testing.F, op string, valid []byte, read func(r io.Reader, opts ...safe.DeserializeOption) (I, error), use func(idx I) error)) {
	res, err := safe.NewResources()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { res.Close() })
	ds := data(f, res)
	idx, err := s.Build(res, ds, 4, ds.Cols())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { idx.Close() })
	var buf bytes.Buffer
	if _, err := s.SerializeTo(idx, res, &buf); err != nil {
		f.Fatal(err)
	}
	fuzz(f, s.Name+".DeserializeFrom", buf.Bytes(), func(r io.Reader, o ...safe.DeserializeOption) (I, error) {
		return s.DeserializeFrom(res, r, o...)
	}, func(idx I) error {
		if idx.DType() != dlpack.Float32 || idx.Rows() < 1 || idx.Dim() < 1 {
			return nil // no query for another element type or an empty index
		}
		_, err := s.SearchSlice(res, idx, nil, Random(1, 1, idx.Dim()), 1, nil)
		return err
	})
}

// fixture is the main data set on the device, with outputs for
// Queries × K.
type fixture[I Index, P any] struct {
	s         *IndexSuite[I, P]
	res       *safe.Resources
	data, qs  []float32
	dataset   *safe.DeviceMatrix[float32]
	queries   *safe.DeviceMatrix[float32]
	neighbors *safe.DeviceMatrix[int64]
	distances *safe.DeviceMatrix[float32]
}

func (s *IndexSuite[I, P]) data(seed uint64, n, d int) []float32 {
	if s.Data != nil {
		return s.Data(seed, n, d)
	}
	return Random(seed, n, d)
}

// params returns the search params with n probes (nil for 0, or where the
// package has no probes: its defaults).
func (s *IndexSuite[I, P]) params(n uint32) *P {
	if n == 0 || s.WithProbes == nil {
		return nil
	}
	var zero P
	p := s.WithProbes(zero, n)
	return &p
}

func (s *IndexSuite[I, P]) fixture(t *testing.T) *fixture[I, P] {
	t.Helper()
	Check(t)
	f := &fixture[I, P]{s: s, res: Resources(t), data: s.data(1, s.Rows, s.Dim), qs: s.data(2, s.Queries, s.Dim)}
	f.dataset = deviceFrom(t, f.res, f.data, s.Rows, s.Dim)
	f.queries = deviceFrom(t, f.res, f.qs, s.Queries, s.Dim)
	f.neighbors = newDevice[int64](t, f.res, s.Queries, s.K)
	f.distances = newDevice[float32](t, f.res, s.Queries, s.K)
	return f
}

// build builds the main index (Lists lists), closed at the end of t.
func (f *fixture[I, P]) build(t *testing.T) I {
	t.Helper()
	idx, err := f.s.Build(f.res, f.dataset, f.s.Lists, f.s.Dim)
	noErr(t, err)
	Close(t, idx)
	return idx
}

// search searches the queries (Probes probes) into the outputs and returns
// them on the host.
func (f *fixture[I, P]) search(t *testing.T, idx I) ([]int64, []float32) {
	t.Helper()
	noErr(t, f.s.Search(idx, f.res, f.s.params(f.s.Probes), f.queries, f.neighbors, f.distances, nil))
	noErr(t, f.res.Sync())
	n, err := f.neighbors.ToHost(f.res)
	noErr(t, err)
	d, err := f.distances.ToHost(f.res)
	noErr(t, err)
	return n, d
}

// shape describes what a round trip keeps of idx.
func (s *IndexSuite[I, P]) shape(idx I) string {
	out := fmt.Sprintf("%d×%d", idx.Rows(), idx.Dim())
	if s.Describe != nil {
		out += " " + s.Describe(idx)
	}
	return out
}

// sameShape fails t unless back keeps built's shape and the fixture's
// sizes.
func (s *IndexSuite[I, P]) sameShape(t *testing.T, built, back I) {
	t.Helper()
	if got, want := s.shape(back), s.shape(built); got != want || back.Rows() != s.Rows || back.Dim() != s.Dim {
		t.Fatalf("deserialized %s, want %s (%d×%d)", got, want, s.Rows, s.Dim)
	}
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func deviceFrom[T dlpack.DType](t *testing.T, res *safe.Resources, data []T, r, c int) *safe.DeviceMatrix[T] {
	t.Helper()
	m, err := safe.DeviceMatrixFrom(res, data, r, c)
	noErr(t, err)
	Close(t, m)
	return m
}

func newDevice[T dlpack.DType](t *testing.T, res *safe.Resources, r, c int) *safe.DeviceMatrix[T] {
	t.Helper()
	m, err := safe.NewDeviceMatrix[T](res, r, c)
	noErr(t, err)
	Close(t, m)
	return m
}

func hostFrom[T dlpack.DType](t *testing.T, data []T, d int) *dlpack.HostMatrix[T] {
	t.Helper()
	m, err := dlpack.NewHostMatrix(data, len(data)/d, d)
	noErr(t, err)
	return m
}
