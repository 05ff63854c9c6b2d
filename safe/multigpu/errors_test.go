package multigpu_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
	"github.com/cuvs-go/cuvs/safe/internal/serialtest"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// closer makes a typed nil index an untyped nil io.Closer.
func closer[I io.Closer](idx I, err error) (io.Closer, error) {
	if err != nil {
		return nil, err
	}
	return idx, nil
}

// The deserializers' refusals of a damaged stream are safe.ErrCorruptIndex,
// give cuVS's reason (not only "... failed"), name the function called,
// never the in-memory file, and are valid UTF-8 (a damaged byte quoted by
// cuVS is escaped). A missing file is fs.ErrNotExist, naming the path.
func TestDeserializeErrors(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	data := safetest.Random(66, rows, dim)
	ip, _ := allProbes(4)
	idx, err := multigpu.BuildIVFFlat(res, host(t, data, rows), &multigpu.IVFFlatIndexParams{Mode: multigpu.Replicated, Base: ip})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	var multi bytes.Buffer
	if _, err := idx.SerializeTo(res, &multi); err != nil {
		t.Fatal(err)
	}
	sres := safetest.Resources(t)
	dm, err := safe.DeviceMatrixFrom(sres, data, rows, dim)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, dm)
	cp, err := cagra.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	cp.GraphDegree, cp.IntermediateGraphDegree = 16, 32
	single, err := cagra.Build(sres, dm, &cp)
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, single)
	var sc bytes.Buffer
	if _, err := single.SerializeTo(sres, &sc); err != nil {
		t.Fatal(err)
	}
	type reader func(r io.Reader, o ...safe.DeserializeOption) (io.Closer, error)
	check := func(op string, read reader, damaged []byte) {
		t.Helper()
		got, err := read(bytes.NewReader(damaged))
		if got != nil {
			got.Close()
		}
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		var e *safe.Error
		switch {
		case !errors.Is(err, safe.ErrCorruptIndex):
			t.Errorf("%s: not safe.ErrCorruptIndex: %v", op, err)
		case !strings.HasPrefix(msg, op+": ") || strings.Contains(msg, "/proc/self/fd") || !utf8.ValidString(msg):
			t.Errorf("%s: does not name %s, shows the stream's path, or is not UTF-8: %q", op, op, msg)
		case errors.As(err, &e) && e.Reason == "":
			t.Errorf("%s: no reason: %v", op, err)
		}
	}
	flip0 := bytes.Clone(multi.Bytes())
	flip0[0] = 0xff // NumPy's byte order: cuVS quotes the byte
	check("multigpu.DeserializeIVFFlatFrom", func(r io.Reader, o ...safe.DeserializeOption) (io.Closer, error) {
		return closer(multigpu.DeserializeIVFFlatFrom(res, r, o...))
	}, flip0)
	check("multigpu.DeserializeIVFFlatFrom", func(r io.Reader, o ...safe.DeserializeOption) (io.Closer, error) {
		return closer(multigpu.DeserializeIVFFlatFrom(res, r, o...))
	}, multi.Bytes()[:multi.Len()/2])
	for _, d := range serialtest.Damages(sc.Bytes()) {
		if len(d.Data) == 0 {
			continue
		}
		check("multigpu.DistributeCagraFrom", func(r io.Reader, o ...safe.DeserializeOption) (io.Closer, error) {
			return closer(multigpu.DistributeCagraFrom(res, r, o...))
		}, d.Data)
	}

	missing := filepath.Join(t.TempDir(), "missing")
	for op, load := range map[string]func(string) (io.Closer, error){
		"DeserializeCagra":   func(p string) (io.Closer, error) { return closer(multigpu.DeserializeCagra(res, p)) },
		"DistributeCagra":    func(p string) (io.Closer, error) { return closer(multigpu.DistributeCagra(res, p)) },
		"DeserializeIVFFlat": func(p string) (io.Closer, error) { return closer(multigpu.DeserializeIVFFlat(res, p)) },
		"DistributeIVFFlat":  func(p string) (io.Closer, error) { return closer(multigpu.DistributeIVFFlat(res, p)) },
		"DeserializeIVFPQ":   func(p string) (io.Closer, error) { return closer(multigpu.DeserializeIVFPQ(res, p)) },
		"DistributeIVFPQ":    func(p string) (io.Closer, error) { return closer(multigpu.DistributeIVFPQ(res, p)) },
	} {
		if _, err := load(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) || errors.Is(err, safe.ErrCorruptIndex) {
			t.Errorf("%s of a missing file: %v", op, err)
		}
	}
}
