package bruteforce_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
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

// The stream round trip gives the same bytes as the file and an index that
// searches exactly as the original.
func TestSerializeToDeserializeFrom(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	var buf bytes.Buffer
	n, err := idx.SerializeTo(f.res, &buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("SerializeTo: %d bytes, buffer %d, %v", n, buf.Len(), err)
	}
	path := filepath.Join(t.TempDir(), "bf.idx")
	if err := idx.Serialize(f.res, path); err != nil {
		t.Fatal(err)
	}
	if file, err := os.ReadFile(path); err != nil || !bytes.Equal(file, buf.Bytes()) {
		t.Errorf("the stream (%d bytes) differs from the file (%d bytes), %v", buf.Len(), len(file), err)
	}
	back, err := bruteforce.DeserializeFrom(f.res, bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, back)
	if back.Rows() != rows || back.Dim() != dim {
		t.Fatalf("deserialized %d×%d", back.Rows(), back.Dim())
	}
	if err := back.Search(f.res, f.queries, f.neighbors, f.distances, nil); err != nil {
		t.Fatal(err)
	}
	f.check(t, nil)
}

func TestSerializeToErrors(t *testing.T) {
	f := setup(t)
	idx := f.build(t)
	if _, err := idx.SerializeTo(f.res, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil writer: %v", err)
	}
	w := &failingWriter{limit: 100}
	if n, err := idx.SerializeTo(f.res, w); !errors.Is(err, errSink) || n != 100 {
		t.Errorf("a writer failing after 100 bytes: %d, %v", n, err)
	}
	if _, err := bruteforce.DeserializeFrom(f.res, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil reader: %v", err)
	}
	if _, err := bruteforce.DeserializeFrom(f.res, io.MultiReader(bytes.NewReader([]byte("<f4")), iotestErr{})); !errors.Is(err, errSink) {
		t.Errorf("a failing reader: %v", err)
	}
	if _, err := bruteforce.DeserializeFrom(f.res, bytes.NewReader([]byte("not an index"))); err == nil {
		t.Error("garbage deserialized")
	}
	idx.Close()
	if _, err := idx.SerializeTo(f.res, io.Discard); !errors.Is(err, safe.ErrClosed) {
		t.Errorf("closed index: %v", err)
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errSink }
