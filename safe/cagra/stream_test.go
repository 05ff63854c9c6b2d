package cagra_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

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

// The stream round trip gives the same bytes as the file, the same graph,
// and an index that searches.
func TestSerializeToDeserializeFrom(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	var buf bytes.Buffer
	n, err := idx.SerializeTo(f.res, &buf, true)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("SerializeTo: %d bytes, buffer %d, %v", n, buf.Len(), err)
	}
	path := filepath.Join(t.TempDir(), "cagra.idx")
	if err := idx.Serialize(f.res, path, true); err != nil {
		t.Fatal(err)
	}
	if file, err := os.ReadFile(path); err != nil || !bytes.Equal(file, buf.Bytes()) {
		t.Errorf("the stream (%d bytes) differs from the file (%d bytes), %v", buf.Len(), len(file), err)
	}
	back, err := cagra.DeserializeFrom(f.res, bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	if back.Rows() != rows || back.Dim() != dim || back.GraphDegree() != degree {
		t.Fatalf("deserialized %d×%d degree %d", back.Rows(), back.Dim(), back.GraphDegree())
	}
	g1, _ := idx.Graph()
	g2, _ := back.Graph()
	if !slices.Equal(toHost[uint32](t, f.res, g1), toHost[uint32](t, f.res, g2)) {
		t.Error("the deserialized graph differs")
	}
	search(t, f, back, f.n32, f.data, nil, nil)
}

func TestSerializeToErrors(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	if _, err := idx.SerializeTo(f.res, nil, true); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil writer: %v", err)
	}
	w := &failingWriter{limit: 100}
	if n, err := idx.SerializeTo(f.res, w, true); !errors.Is(err, errSink) || n != 100 {
		t.Errorf("a writer failing after 100 bytes: %d, %v", n, err)
	}
	if _, err := cagra.DeserializeFrom(f.res, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil reader: %v", err)
	}
	if _, err := cagra.DeserializeFrom(f.res, io.MultiReader(bytes.NewReader([]byte("<f4")), failingReader{})); !errors.Is(err, errSink) {
		t.Errorf("a failing reader: %v", err)
	}
	if _, err := cagra.DeserializeFrom(f.res, bytes.NewReader([]byte("not an index"))); !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("garbage: %v", err)
	}
	idx.Close()
	if _, err := idx.SerializeTo(f.res, io.Discard, true); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("closed index: %v", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errSink }
