package serialtest

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/ivfsq"
)

func TestMain(m *testing.M) { safetest.Main(m) }

const rows, dim = 300, 16

// kind is one index type: how to build one, write it, and read it back
// from a path and from a stream.
type kind struct {
	name  string
	write func(t *testing.T, res *safe.Resources, data *safe.DeviceMatrix[float32]) []byte
	file  func(res *safe.Resources, path string) (io.Closer, error)
	read  func(res *safe.Resources, r io.Reader, opts ...safe.DeserializeOption) (io.Closer, error)
}

func must[I io.Closer](t *testing.T, idx I, err error) I {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	return idx
}

func stream(t *testing.T, serializeTo func(w io.Writer) (int64, error)) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := serializeTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// closer makes a typed nil index an untyped nil io.Closer.
func closer[I io.Closer](idx I, err error) (io.Closer, error) {
	if err != nil {
		return nil, err
	}
	return idx, nil
}

var kinds = []kind{
	{
		name: "bruteforce",
		write: func(t *testing.T, res *safe.Resources, data *safe.DeviceMatrix[float32]) []byte {
			idx, err := bruteforce.Build(res, data, nil)
			must(t, idx, err)
			return stream(t, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
		},
		file: func(res *safe.Resources, path string) (io.Closer, error) {
			return closer(bruteforce.Deserialize(res, path))
		},
		read: func(res *safe.Resources, r io.Reader, o ...safe.DeserializeOption) (io.Closer, error) {
			return closer(bruteforce.DeserializeFrom(res, r, o...))
		},
	},
	{
		name: "cagra",
		write: func(t *testing.T, res *safe.Resources, data *safe.DeviceMatrix[float32]) []byte {
			p, err := cagra.DefaultIndexParams()
			if err != nil {
				t.Fatal(err)
			}
			p.GraphDegree, p.IntermediateGraphDegree = 16, 32
			idx, err := cagra.Build(res, data, &p)
			must(t, idx, err)
			return stream(t, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
		},
		file: func(res *safe.Resources, path string) (io.Closer, error) { return closer(cagra.Deserialize(res, path)) },
		read: func(res *safe.Resources, r io.Reader, o ...safe.DeserializeOption) (io.Closer, error) {
			return closer(cagra.DeserializeFrom(res, r, o...))
		},
	},
	{
		name: "ivfflat",
		write: func(t *testing.T, res *safe.Resources, data *safe.DeviceMatrix[float32]) []byte {
			p, err := ivfflat.DefaultIndexParams()
			if err != nil {
				t.Fatal(err)
			}
			p.NLists = 8
			idx, err := ivfflat.Build(res, data, &p)
			must(t, idx, err)
			return stream(t, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
		},
		file: func(res *safe.Resources, path string) (io.Closer, error) {
			return closer(ivfflat.Deserialize(res, path))
		},
		read: func(res *safe.Resources, r io.Reader, o ...safe.DeserializeOption) (io.Closer, error) {
			return closer(ivfflat.DeserializeFrom(res, r, o...))
		},
	},
	{
		name: "ivfsq",
		write: func(t *testing.T, res *safe.Resources, data *safe.DeviceMatrix[float32]) []byte {
			p, err := ivfsq.DefaultIndexParams()
			if err != nil {
				t.Fatal(err)
			}
			p.NLists = 8
			idx, err := ivfsq.Build(res, data, &p)
			must(t, idx, err)
			return stream(t, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
		},
		file: func(res *safe.Resources, path string) (io.Closer, error) { return closer(ivfsq.Deserialize(res, path)) },
		read: func(res *safe.Resources, r io.Reader, o ...safe.DeserializeOption) (io.Closer, error) {
			return closer(ivfsq.DeserializeFrom(res, r, o...))
		},
	},
	{
		name: "ivfpq",
		write: func(t *testing.T, res *safe.Resources, data *safe.DeviceMatrix[float32]) []byte {
			p, err := ivfpq.DefaultIndexParams()
			if err != nil {
				t.Fatal(err)
			}
			p.NLists, p.PQDim, p.PQBits = 8, 8, 8
			idx, err := ivfpq.Build(res, data, &p)
			must(t, idx, err)
			return stream(t, func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) })
		},
		file: func(res *safe.Resources, path string) (io.Closer, error) { return closer(ivfpq.Deserialize(res, path)) },
		read: func(res *safe.Resources, r io.Reader, o ...safe.DeserializeOption) (io.Closer, error) {
			return closer(ivfpq.DeserializeFrom(res, r, o...))
		},
	},
}

func damages(valid []byte) []Damaged { return Damages(valid) }

func itoa(i int) string { return strconv.Itoa(i) }

// A damaged index, read from a file or a stream, is refused with
// safe.ErrCorruptIndex (and nothing is left open); the valid one is read.
func TestCorruptIndexes(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data, err := safe.DeviceMatrixFrom(res, safetest.Random(1, rows, dim), rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, data)
	dir := t.TempDir()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			valid := k.write(t, res, data)
			idx, err := k.read(res, bytes.NewReader(valid))
			must(t, idx, err)
			for _, d := range damages(valid) {
				path := filepath.Join(dir, k.name+".idx")
				if err := os.WriteFile(path, d.Data, 0o600); err != nil {
					t.Fatal(err)
				}
				for via, read := range map[string]func() (io.Closer, error){
					"Deserialize":     func() (io.Closer, error) { return k.file(res, path) },
					"DeserializeFrom": func() (io.Closer, error) { return k.read(res, bytes.NewReader(d.Data)) },
				} {
					idx, err := read()
					if idx != nil {
						idx.Close()
					}
					if !errors.Is(err, safe.ErrCorruptIndex) || idx != nil {
						t.Errorf("%s, %s: %v", d.Name, via, err)
						continue
					}
					// The error names the function called, and never the
					// in-memory file DeserializeFrom reads through.
					msg := err.Error()
					if !strings.HasPrefix(msg, k.name+"."+via+": ") || strings.Contains(msg, "/proc/self/fd") || !utf8.ValidString(msg) {
						t.Errorf("%s, %s: the error does not name %s.%s, or shows the stream's path: %q", d.Name, via, k.name, via, msg)
					}
				}
			}
			// A missing file is not a corrupt one: fs.ErrNotExist, naming
			// the path, found before any C call (cuVS would say "Cannot
			// open file").
			missing := filepath.Join(dir, "missing")
			if _, err := k.file(res, missing); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, safe.ErrCorruptIndex) || !strings.Contains(err.Error(), missing) {
				t.Errorf("missing file: %v", err)
			}
			if _, err := k.file(res, dir); !errors.Is(err, syscall.EISDIR) || errors.Is(err, safe.ErrCorruptIndex) {
				t.Errorf("a directory: %v", err)
			}
		})
	}
}

// safe.MaxBytes bounds the stream: one byte over is refused naming the
// limit, the exact size is read.
func TestMaxBytes(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	data, err := safe.DeviceMatrixFrom(res, safetest.Random(1, rows, dim), rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, data)
	for _, k := range kinds {
		valid := k.write(t, res, data)
		n := int64(len(valid))
		idx, err := k.read(res, bytes.NewReader(valid), safe.MaxBytes(n-1))
		var ae *safe.ArgError
		if idx != nil || !errors.As(err, &ae) || ae.Arg != "r" || !strings.Contains(err.Error(), itoa(int(n-1))) {
			t.Errorf("%s: %d bytes, MaxBytes(%d): %v", k.name, n, n-1, err)
		}
		idx, err = k.read(res, bytes.NewReader(valid), safe.MaxBytes(n))
		must(t, idx, err)
		if _, err := k.read(res, bytes.NewReader(valid), safe.MaxBytes(-1)); !errors.As(err, &ae) || ae.Arg != "opts" {
			t.Errorf("%s: MaxBytes(-1): %v", k.name, err)
		}
	}
}

// DeserializeFrom reads through memory: with $TMPDIR pointing nowhere it
// still reads every index type.
func TestDeserializeFromTouchesNoDisk(t *testing.T) {
	safetest.Check(t)
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc: DeserializeFrom falls back to a temporary file")
	}
	res := safetest.Resources(t)
	data, err := safe.DeviceMatrixFrom(res, safetest.Random(1, rows, dim), rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, data)
	streams := make([][]byte, len(kinds))
	for i, k := range kinds {
		streams[i] = k.write(t, res, data) // SerializeTo's pipe lives in $TMPDIR
	}
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "does-not-exist"))
	for i, k := range kinds {
		idx, err := k.read(res, bytes.NewReader(streams[i]))
		if err != nil {
			t.Errorf("%s: %v", k.name, err)
			continue
		}
		idx.Close()
	}
}
