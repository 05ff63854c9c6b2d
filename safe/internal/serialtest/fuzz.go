package serialtest

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/integrity"
)

// Damaged is one way of spoiling a valid index stream.
type Damaged struct {
	Name string
	Data []byte
}

// Damages returns ways of spoiling valid: empty, garbage, bytes after the
// index, truncations, and flipped bytes in the header.
func Damages(valid []byte) []Damaged {
	n := len(valid)
	cut := func(k int) []byte { return bytes.Clone(valid[:k]) }
	flip := func(i int) []byte { b := bytes.Clone(valid); b[i] ^= 0xff; return b }
	d := []Damaged{
		{"empty", nil},
		{"garbage", []byte("this is not an index file, just text of a plausible length...")},
		{"trailing byte", append(bytes.Clone(valid), 0)},
		{"trailing text", append(bytes.Clone(valid), "more"...)},
		{"valid twice", append(bytes.Clone(valid), valid...)},
	}
	for _, k := range []int{1, 3, 4, 10, 64, n / 2, n - 1} {
		if k > 0 && k < n {
			d = append(d, Damaged{"truncated to " + strconv.Itoa(k), cut(k)})
		}
	}
	// The first bytes: the type tag or magic, and the header's fields.
	for _, i := range []int{0, 1, 2, 3, 4, 5, 6, 8, 20} {
		if i < n {
			d = append(d, Damaged{"byte " + strconv.Itoa(i) + " flipped", flip(i)})
		}
	}
	return d
}

// Rows and Dim are the shape of the small index each fuzzer serializes as
// its seed (Data's).
const Rows, Dim = 64, 8

// Data returns the seed index's rows in device memory, freed by f's end.
func Data(f *testing.F, res *safe.Resources) *safe.DeviceMatrix[float32] {
	f.Helper()
	m, err := safe.DeviceMatrixFrom(res, safetest.Random(7, Rows, Dim), Rows, Dim)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	return m
}

// Resources returns resources closed at f's end.
func Resources(f *testing.F) *safe.Resources {
	f.Helper()
	res, err := safe.NewResources()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { res.Close() })
	return res
}

// Stream returns what serializeTo writes.
func Stream(f *testing.F, serializeTo func(w io.Writer) (int64, error)) []byte {
	f.Helper()
	var buf bytes.Buffer
	if _, err := serializeTo(&buf); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}

// Query returns one random query of dim values for a float32 index, nil (no
// search) for another element type or an empty index.
func Query(dtype dlpack.DataType, dim, rows int) []float32 {
	if dtype != dlpack.Float32 || rows < 1 || dim < 1 {
		return nil
	}
	return safetest.Random(1, 1, dim)
}

// Fuzz is the body of every package's FuzzDeserializeFrom: seeded with
// valid (a small index the package serialized) and Damages(valid), it
// reads each input with read, the package's DeserializeFrom named op
// (bounded by safe.MaxBytes), and requires that the read neither panics
// nor hangs, and either gives an index that use can search and that then
// closes, or fails with an error that matches safe.ErrCorruptIndex (or
// safe.ErrInvalidArgument, for a stream over the bound), names op, is
// valid UTF-8 and does not show the stream's internal /proc/self/fd path.
func Fuzz[I io.Closer](f *testing.F, op string, valid []byte, read func(r io.Reader, opts ...safe.DeserializeOption) (I, error), use func(idx I) error) {
	// valid, as the bindings write it (a checksum trailer after cuVS's
	// bytes), and cuVS's bytes alone (as cuVS writes them): damage to the
	// first is refused by the checksum, to the second by the layout checks
	// and cuVS's reader, which the fuzzer thus keeps reaching.
	seeds := [][]byte{valid}
	if info, err := integrity.Check(bytes.NewReader(valid), int64(len(valid))); err == nil && info.Appended {
		seeds = append(seeds, valid[:info.DataLen])
	}
	for _, v := range seeds {
		f.Add(v)
		for _, d := range Damages(v) {
			f.Add(d.Data)
		}
		// Further into the header, and past it, on the double only: a real
		// library is fed only what TestCorruptIndexes feeds it.
		for i := 9; safetest.Control() != nil && i < len(v) && i < 256; i += 7 {
			b := bytes.Clone(v)
			b[i] ^= 0xff
			f.Add(b)
		}
	}
	limit := safe.MaxBytes(int64(4*len(valid) + 4096))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The read, the search and the Close, each within a bound.
		within := func(what string, g func()) {
			t.Helper()
			done := make(chan struct{})
			go func() {
				defer close(done)
				g()
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s of %d bytes hangs in %s", op, len(data), what)
			}
		}
		var idx I
		var err error
		within("the read", func() { idx, err = read(bytes.NewReader(data), limit) })
		if err != nil {
			msg := err.Error()
			switch {
			case !errors.Is(err, safe.ErrCorruptIndex) && !errors.Is(err, safe.ErrInvalidArgument):
				t.Fatalf("neither safe.ErrCorruptIndex nor safe.ErrInvalidArgument: %v", err)
			case !strings.HasPrefix(msg, op+": "):
				t.Fatalf("does not name %s: %v", op, err)
			case !utf8.ValidString(msg):
				t.Fatalf("not valid UTF-8: %q", msg)
			case strings.Contains(msg, "/proc/self/fd"):
				t.Fatalf("shows the in-memory file's path: %v", err)
			}
			return
		}
		var uerr, cerr error
		within("a search", func() { uerr = use(idx) })
		within("Close", func() { cerr = idx.Close() })
		if uerr != nil {
			t.Fatalf("%s accepted %d bytes, but the index cannot be searched: %v", op, len(data), uerr)
		}
		if cerr != nil {
			t.Fatalf("Close: %v", cerr)
		}
	})
}
