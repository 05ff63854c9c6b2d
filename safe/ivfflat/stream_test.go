package ivfflat_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfflat"
)

// TestSerializeToDeserializeFrom: an index streamed to a writer and read
// back from a reader searches exactly as the original (a round trip).
func TestSerializeToDeserializeFrom(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t, rows, nq, 10)
	idx := f.build(t, params(t))
	search := func(x *ivfflat.Index) ([]int64, []float32) {
		must(t, x.Search(f.res, nil, f.queries, f.neighbors, f.distances, nil))
		n, err := f.neighbors.ToHost(f.res)
		must(t, err)
		d, err := f.distances.ToHost(f.res)
		must(t, err)
		return n, d
	}
	wantN, wantD := search(idx)
	var buf bytes.Buffer
	n, err := idx.SerializeTo(f.res, &buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("SerializeTo: %d bytes, buffer %d, %v", n, buf.Len(), err)
	}
	back, err := ivfflat.DeserializeFrom(f.res, &buf)
	must(t, err)
	defer back.Close()
	if back.Rows() != idx.Rows() || back.Dim() != idx.Dim() || back.NLists() != idx.NLists() {
		t.Fatalf("deserialized %d×%d in %d lists, want %d×%d in %d", back.Rows(), back.Dim(), back.NLists(), idx.Rows(), idx.Dim(), idx.NLists())
	}
	gotN, gotD := search(back)
	if !slices.Equal(gotN, wantN) || !slices.Equal(gotD, wantD) {
		t.Errorf("the deserialized index searches differently")
	}
	if _, err := idx.SerializeTo(f.res, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil writer: %v", err)
	}
	if _, err := ivfflat.DeserializeFrom(f.res, bytes.NewReader([]byte("not an index"))); err == nil {
		t.Errorf("garbage: no error")
	}
}
