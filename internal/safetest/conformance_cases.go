package safetest

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/safe"
)

// The conformance suite's cases, one per old per-package test (TestIndex
// runs them as subtests).

var errSink = errors.New("sink failed")

// failingWriter accepts limit bytes, then fails.
type failingWriter struct{ limit, got int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.got+len(p) > w.limit {
		k := w.limit - w.got
		w.got = w.limit
		return k, errSink
	}
	w.got += len(p)
	return len(p), nil
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errSink }

// An index streamed to a writer gives the bytes Serialize writes to a
// file, and read back from a reader keeps its shape and searches exactly
// as the original (a round trip).
func (s *IndexSuite[I, P]) serializeToDeserializeFrom(t *testing.T) {
	f := s.fixture(t)
	idx := f.build(t)
	wantN, wantD := f.search(t, idx)
	var buf bytes.Buffer
	n, err := s.SerializeTo(idx, f.res, &buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("SerializeTo: %d bytes, buffer %d, %v", n, buf.Len(), err)
	}
	path := filepath.Join(t.TempDir(), s.Name+".idx")
	noErr(t, s.Serialize(idx, f.res, path))
	if file, err := os.ReadFile(path); err != nil || !bytes.Equal(file, buf.Bytes()) {
		t.Errorf("the stream (%d bytes) differs from the file (%d bytes), %v", buf.Len(), len(file), err)
	}
	back, err := s.DeserializeFrom(f.res, bytes.NewReader(buf.Bytes()))
	noErr(t, err)
	Close(t, back)
	s.sameShape(t, idx, back)
	if s.Deserialized != nil {
		s.Deserialized(t, f.res, idx, back)
	}
	gotN, gotD := f.search(t, back)
	if !slices.Equal(gotN, wantN) || !slices.Equal(gotD, wantD) {
		t.Errorf("the deserialized index searches differently")
	}
	if s.Check != nil {
		s.Check(t, f.res, f.data, f.qs, f.neighbors, f.distances)
	}
}

// SerializeTo and DeserializeFrom refuse nil writers and readers, pass a
// failing writer's or reader's error on, refuse garbage as a corrupt index
// and a closed index with safe.ErrClosed.
func (s *IndexSuite[I, P]) serializeToErrors(t *testing.T) {
	f := s.fixture(t)
	idx, err := s.Build(f.res, f.dataset, s.Lists, s.Dim)
	noErr(t, err)
	if _, err := s.SerializeTo(idx, f.res, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil writer: %v", err)
	}
	w := &failingWriter{limit: 100}
	if n, err := s.SerializeTo(idx, f.res, w); !errors.Is(err, errSink) || n != 100 {
		t.Errorf("a writer failing after 100 bytes: %d, %v", n, err)
	}
	if _, err := s.DeserializeFrom(f.res, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil reader: %v", err)
	}
	if _, err := s.DeserializeFrom(f.res, io.MultiReader(bytes.NewReader([]byte("<f4")), failingReader{})); !errors.Is(err, errSink) {
		t.Errorf("a failing reader: %v", err)
	}
	if _, err := s.DeserializeFrom(f.res, bytes.NewReader([]byte("not an index"))); !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("garbage: %v", err)
	}
	noErr(t, idx.Close())
	if _, err := s.SerializeTo(idx, f.res, io.Discard); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("closed index: %v", err)
	}
}

// Serialize to a path and Deserialize: the same shape, the element type
// kept (or zeroed, where cuVS does not record it), the same results.
func (s *IndexSuite[I, P]) serializeRoundTrip(t *testing.T) {
	f := s.fixture(t)
	idx := f.build(t)
	nb1, ds1 := f.search(t, idx)
	path := filepath.Join(t.TempDir(), s.Name+".bin")
	noErr(t, s.Serialize(idx, f.res, path))
	back, err := s.Deserialize(f.res, path)
	noErr(t, err)
	Close(t, back)
	s.sameShape(t, idx, back)
	if s.LosesDType {
		if back.DType() != (dlpack.DataType{}) || back.DType().String() != "unknown" {
			t.Errorf("deserialized DType %s, cuVS zeroes it (which prints unknown)", back.DType())
		}
	} else if back.DType() != idx.DType() {
		t.Errorf("deserialized DType %s, built %s", back.DType(), idx.DType())
	}
	nb2, ds2 := f.search(t, back)
	for i := range nb1 {
		if nb1[i] != nb2[i] || ds1[i] != ds2[i] {
			t.Fatalf("slot %d: %d/%g before, %d/%g after the round trip", i, nb1[i], ds1[i], nb2[i], ds2[i])
		}
	}
}

// A missing file is not read.
func (s *IndexSuite[I, P]) deserializeBadFiles(t *testing.T) {
	Check(t)
	res := Resources(t)
	if _, err := s.Deserialize(res, filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// The one-call search from Go memory returns, per query, what Index.Search
// returns into device buffers; a short query and k = 0 are refused.
func (s *IndexSuite[I, P]) searchSlice(t *testing.T) {
	f := s.fixture(t)
	idx := f.build(t)
	wantN, wantD := f.search(t, idx)
	sp := s.params(s.Probes)
	got, err := s.SearchSlice(f.res, idx, sp, f.qs, s.K, nil)
	noErr(t, err)
	if got.Len() != s.Queries || got.K != s.K || !slices.Equal(got.Neighbors, wantN) || !slices.Equal(got.Distances, wantD) {
		t.Errorf("SearchSlice differs from Search")
	}
	last := s.Queries - 1
	if ids, _ := got.Row(last); !slices.Equal(ids, wantN[last*s.K:]) {
		t.Errorf("Row(%d) = %v", last, ids)
	}
	if _, err := s.SearchSlice(f.res, idx, sp, f.qs[:s.Dim-1], s.K, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("a short query: %v", err)
	}
	if _, err := s.SearchSlice(f.res, idx, sp, f.qs, 0, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("k = 0: %v", err)
	}
}

// A loop of one-call searches of one shape into one Results allocates
// nothing on the Go heap (the checks before the device buffers included).
func (s *IndexSuite[I, P]) searchSliceAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	f := s.fixture(t)
	idx := f.build(t)
	sp := s.params(s.Probes)
	var out safe.Results
	noErr(t, s.SearchSliceInto(f.res, idx, sp, f.qs, s.K, nil, &out))
	if a := testing.AllocsPerRun(20, func() {
		if err := s.SearchSliceInto(f.res, idx, sp, f.qs, s.K, nil, &out); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("SearchSliceInto: %v allocations per call", a)
	}
}

// Refusals come before any device memory is taken, name the argument the
// caller passed (k, not a neighbors tensor it never saw), and give a nil
// result: among them a float64 query slice for a float32 index, which used
// to panic in the buffer pool. After them a good search fills every slot.
func (s *IndexSuite[I, P]) searchSliceRefused(t *testing.T) {
	f := s.fixture(t)
	idx := f.build(t)
	sp := s.params(s.Probes)
	type refusal struct {
		name, arg, why string
		sp             *P
		queries        []float32
		k              int
		filter         *safe.Filter
	}
	cases := []refusal{
		{"k = 0", "k", "", sp, f.qs, 0, nil},
		{"k above the rows", "k", "exceeds", sp, f.qs, s.Rows + 1, nil},
		{"k = 1<<24", "k", "exceeds", sp, f.qs, 1 << 24, nil},
		{"k = 1<<40", "k", "exceeds", sp, f.qs, 1 << 40, nil},
	}
	for _, c := range []struct {
		row int
		v   float32
		why string
	}{
		{2, float32(math.NaN()), "row 2 holds NaN"},
		{1, float32(math.NaN()), "row 1 holds NaN"},
		{1, float32(math.Inf(-1)), "row 1 holds -Inf"},
		{2, float32(math.Inf(1)), "row 2 holds +Inf"},
	} {
		bad := slices.Clone(f.qs[:3*s.Dim])
		bad[c.row*s.Dim+1] = c.v
		cases = append(cases, refusal{c.why, "queries", c.why, sp, bad, s.K, nil})
	}
	if s.Filters {
		other, err := safe.NewBitsetFilterAllowing(f.res, s.Rows+1, []int64{1})
		noErr(t, err)
		Close(t, other)
		cases = append(cases, refusal{"a filter for other rows", "filter", "rows", sp, f.qs, s.K, other})
	}
	if s.BadParams != nil {
		p, err := s.DefaultSearchParams()
		noErr(t, err)
		if s.Probes != 0 {
			p = s.WithProbes(p, s.Probes)
		}
		arg := s.BadParams(&p)
		cases = append(cases, refusal{"bad params", arg, "", &p, f.qs, s.K, nil})
	}
	for _, c := range cases {
		Refused(t, c.name, c.arg, c.why, func() error {
			r, err := s.SearchSlice(f.res, idx, c.sp, c.queries, c.k, c.filter)
			if r != nil {
				t.Errorf("%s: a result with error %v", c.name, err)
			}
			return err
		})
	}
	Refused(t, "float64 queries", "queries", "float64", func() error {
		_, err := s.SearchSlice64(f.res, idx, make([]float64, s.Dim), 1)
		return err
	})
	got, err := s.SearchSlice(f.res, idx, sp, f.qs, s.K, nil)
	noErr(t, err)
	for i, id := range got.Neighbors {
		if !safe.Valid(id) || math.IsInf(float64(got.Distances[i]), 0) {
			t.Fatalf("slot %d unfilled: %d %g", i, id, got.Distances[i])
		}
	}
}

// Prepared.Run gives what Search gives; its queries can be set from host
// memory; after Close it refuses to run; Prepare refuses outputs of
// different shapes.
func (s *IndexSuite[I, P]) prepared(t *testing.T) {
	f := s.fixture(t)
	idx := f.build(t)
	n1, d1 := f.search(t, idx)
	sp := s.params(s.Probes)
	q := deviceFrom(t, f.res, slices.Clone(f.qs), s.Queries, s.Dim)
	nb := newDevice[int64](t, f.res, s.Queries, s.K)
	dist := newDevice[float32](t, f.res, s.Queries, s.K)
	ps, err := s.Prepare(idx, sp, q, nb, dist)
	noErr(t, err)
	noErr(t, ps.Run(f.res))
	n2 := make([]int64, s.Queries*s.K)
	d2 := make([]float32, s.Queries*s.K)
	noErr(t, ps.Results(f.res, hostFrom(t, n2, s.K), hostFrom(t, d2, s.K)))
	for i := range n1 {
		if n1[i] != n2[i] || d1[i] != d2[i] {
			t.Fatalf("slot %d: Search %d/%g, Prepared %d/%g", i, n1[i], d1[i], n2[i], d2[i])
		}
	}
	noErr(t, ps.SetQueries(f.res, hostFrom(t, slices.Clone(f.qs), s.Dim)))
	noErr(t, ps.Close())
	if err := ps.Run(f.res); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	wide := newDevice[float32](t, f.res, s.Queries, s.K+1)
	if _, err := s.Prepare(idx, sp, f.queries, f.neighbors, wide); !IsArg(err, "distances") || !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("Prepare with mismatched distances: %v", err)
	}
}

// Close twice succeeds; then every call refuses with safe.ErrClosed, and
// the getters return their zero values (safe.ErrClosed's rule for them).
func (s *IndexSuite[I, P]) closed(t *testing.T) {
	f := s.fixture(t)
	idx, err := s.Build(f.res, f.dataset, s.Lists, s.Dim)
	noErr(t, err)
	if idx.Rows() != s.Rows || idx.Dim() != s.Dim || idx.DType() != dlpack.Float32 {
		t.Fatalf("built: %s", s.shape(idx))
	}
	noErr(t, idx.Close())
	noErr(t, idx.Close())
	if idx.Rows() != 0 || idx.Dim() != 0 || idx.DType() != (dlpack.DataType{}) {
		t.Errorf("getters after Close: Rows %d, Dim %d, DType %s; want 0, 0, unknown", idx.Rows(), idx.Dim(), idx.DType())
	}
	sp := s.params(s.Probes)
	calls := map[string]error{
		"Search":      s.Search(idx, f.res, sp, f.queries, f.neighbors, f.distances, nil),
		"SearchSlice": errOnly(s.SearchSlice(f.res, idx, sp, f.qs, s.K, nil)),
		"Prepare":     errOnly(s.Prepare(idx, sp, f.queries, f.neighbors, f.distances)),
		"SerializeTo": errOnly(s.SerializeTo(idx, f.res, io.Discard)),
		"Serialize":   s.Serialize(idx, f.res, filepath.Join(t.TempDir(), "x")),
	}
	if s.Extend != nil {
		calls["Extend"] = s.Extend(idx, f.res, f.dataset)
	}
	for name, err := range calls {
		if !errors.Is(err, safe.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
}

func errOnly[T any](_ T, err error) error { return err }

// Build and Extend from Go memory refuse NaN and infinite values (float16
// too, where Build takes it), naming the argument and the first bad row,
// before any device memory is taken.
func (s *IndexSuite[I, P]) hostInputsNonFinite(t *testing.T) {
	Check(t)
	res := Resources(t)
	const n = 400
	d := s.Dim
	data := s.data(3, n, d)
	build := func(x dlpack.Tensor) error {
		idx, err := s.Build(res, x, 4, d)
		if err == nil {
			idx.Close()
		}
		return err
	}
	for _, c := range []struct {
		row, col int
		v        float32
		why      string
	}{
		{17, 3, float32(math.Inf(1)), "row 17 holds +Inf"},
		{17, 3, float32(math.Inf(-1)), "row 17 holds -Inf"},
		{123, 0, float32(math.NaN()), "row 123 holds NaN"},
		{42, 1, float32(math.NaN()), "row 42 holds NaN"},
	} {
		bad := slices.Clone(data)
		bad[c.row*d+c.col] = c.v
		Refused(t, "Build "+c.why, "dataset", c.why, func() error { return build(hostFrom(t, bad, d)) })
	}
	if s.Half {
		for _, c := range []struct {
			row, col int
			v        float16.Float16
			why      string
		}{
			{17, 3, float16.NaN(), "row 17 holds NaN"},
			{5, 2, float16.Inf(-1), "row 5 holds -Inf"},
		} {
			h := make([]float16.Float16, len(data))
			for i, v := range data {
				h[i] = float16.Fromfloat32(v)
			}
			h[c.row*d+c.col] = c.v
			Refused(t, "Build float16 "+c.why, "dataset", c.why, func() error { return build(hostFrom(t, h, d)) })
		}
	}
	if s.Extend == nil {
		return
	}
	idx, err := s.Build(res, hostFrom(t, data, d), 4, d)
	noErr(t, err)
	Close(t, idx)
	for _, c := range []struct {
		row, col int
		v        float32
	}{
		{9, 0, float32(math.NaN())},
		{4, 1, float32(math.Inf(1))},
		{3, 0, float32(math.Inf(-1))},
	} {
		more := s.data(4, 10, d)
		more[c.row*d+c.col] = c.v
		if err := s.Extend(idx, res, hostFrom(t, more, d)); !IsArg(err, s.ExtendArg) {
			t.Errorf("Extend %g in row %d: %v", c.v, c.row, err)
		}
	}
	if idx.Rows() != n {
		t.Errorf("Rows() = %d after refused Extends of %d rows", idx.Rows(), n)
	}
}

// Build from Go memory: the index searches like one built from device
// memory and owns its copy (BuildFromHostLikeDevice; 8 lists, 8 probes).
func (s *IndexSuite[I, P]) buildFromHost(t *testing.T) {
	BuildFromHostLikeDevice(t,
		func(res *safe.Resources, ds dlpack.Tensor) (I, error) { return s.Build(res, ds, 8, 16) },
		func(res *safe.Resources, idx I, q []float32, k int) (*safe.Results, error) {
			return s.SearchSlice(res, idx, s.params(8), q, k, nil)
		})
}

// Extend under search traffic: 8 goroutines search (each query is a row
// of the index) while Extend adds rows far from every query, 20 times.
// Every Extend succeeds (it waits its turn), no search fails (a search
// waits for an Extend rather than fail), the row count
// follows, and every result stays right (with FindsRows, each query's
// nearest is itself).
func (s *IndexSuite[I, P]) extendUnderLoad(t *testing.T) {
	if s.Extend == nil {
		t.Skipf("%s has no Extend", s.Name)
	}
	Check(t)
	const n, d, nq, kk, extends, add = 300, 16, 8, 4, 20, 10
	res := Resources(t)
	data := Random(31, n, d)
	ds := deviceFrom(t, res, data, n, d)
	idx, err := s.Build(res, ds, 8, d)
	noErr(t, err)
	Close(t, idx)
	sp := s.params(8) // every list
	queries := data[:nq*d]
	far := Random(32, add, d)
	for i := range far {
		far[i] += 10 // far from every query
	}
	fm := deviceFrom(t, res, far, add, d)
	searches := ExtendUnderLoad(t, 8, extends, func(r *safe.Resources) error {
		out, err := s.SearchSlice(r, idx, sp, queries, kk, nil)
		if err != nil {
			return err
		}
		rows := int64(idx.Rows())
		for q := range nq {
			ids, dist := out.Row(q)
			if s.FindsRows && (ids[0] != int64(q) || dist[0] > 1e-4) {
				t.Errorf("query %d (a row of the index): nearest %d at %g", q, ids[0], dist[0])
			}
			for _, id := range ids {
				if id < 0 || id >= rows {
					t.Errorf("query %d: id %d of %d rows", q, id, rows)
				}
			}
		}
		return nil
	}, func(int) error { return s.Extend(idx, res, fm) })
	if got, want := idx.Rows(), n+extends*add; got != want {
		t.Errorf("Rows() = %d after %d Extends of %d rows to %d, want %d", got, extends, add, n, want)
	}
	t.Logf("%d searches around %d Extends", searches, extends)
}

// One rule for search parameters: a zero field means cuVS's default, so
// the zero SearchParams searches exactly as nil params and as
// DefaultSearchParams do, and a params with only some fields set (the
// probes) takes the defaults for the rest.
func (s *IndexSuite[I, P]) zeroSearchParams(t *testing.T) {
	if s.WithProbes == nil {
		t.Skipf("%s's search params have no probes", s.Name)
	}
	Check(t)
	const n, d, nq, kk = 400, 16, 8, 5
	res := Resources(t)
	ds := deviceFrom(t, res, Random(41, n, d), n, d)
	idx, err := s.Build(res, ds, 16, d)
	noErr(t, err)
	Close(t, idx)
	def, err := s.DefaultSearchParams()
	noErr(t, err)
	queries := Random(42, nq, d)
	search := func(sp *P) *safe.Results {
		t.Helper()
		r, err := s.SearchSlice(res, idx, sp, queries, kk, nil)
		if err != nil {
			t.Fatalf("params %+v: %v", sp, err)
		}
		return r
	}
	same := func(name string, a, b *safe.Results) {
		t.Helper()
		for q := range nq {
			an, ad := a.Row(q)
			bn, bd := b.Row(q)
			if !slices.Equal(an, bn) || !slices.Equal(ad, bd) {
				t.Errorf("%s, query %d: %v %v, want %v %v", name, q, an, ad, bn, bd)
			}
		}
	}
	want := search(&def)
	var zero P
	same("zero SearchParams", search(&zero), want)
	same("nil params", search(nil), want)
	few := s.WithProbes(def, 2)
	same("only NProbes set", search(s.params(2)), search(&few))
}

// Nil params are cuVS's defaults, for a build (its list count) and for a
// search (the same results as DefaultSearchParams).
func (s *IndexSuite[I, P]) nilParams(t *testing.T) {
	if s.NLists == nil {
		t.Skipf("%s has no lists", s.Name)
	}
	f := s.fixture(t)
	idx, err := s.Build(f.res, f.dataset, 0, s.Dim)
	noErr(t, err)
	Close(t, idx)
	lists, err := s.DefaultNLists()
	noErr(t, err)
	if s.NLists(idx) != lists {
		t.Errorf("built with nil params: %d lists, the default is %d", s.NLists(idx), lists)
	}
	sp, err := s.DefaultSearchParams()
	noErr(t, err)
	search := func(p *P) ([]int64, []float32) {
		noErr(t, s.Search(idx, f.res, p, f.queries, f.neighbors, f.distances, nil))
		n, err := f.neighbors.ToHost(f.res)
		noErr(t, err)
		d, err := f.distances.ToHost(f.res)
		noErr(t, err)
		return n, d
	}
	wantN, wantD := search(&sp)
	gotN, gotD := search(nil)
	if !slices.Equal(gotN, wantN) || !slices.Equal(gotD, wantD) {
		t.Errorf("search with nil params differs from DefaultSearchParams")
	}
}
