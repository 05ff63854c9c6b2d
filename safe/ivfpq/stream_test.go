package ivfpq_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
)

// TestSerializeToDeserializeFrom: an index streamed to a writer and read
// back from a reader searches exactly as the original (a round trip).
func TestSerializeToDeserializeFrom(t *testing.T) {
	f := setup(t)
	idx := build(t, f.res, f.dataset, params(t))
	wantN, wantD := results(t, f, idx, &f.sp)
	var buf bytes.Buffer
	n, err := idx.SerializeTo(f.res, &buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("SerializeTo: %d bytes, buffer %d, %v", n, buf.Len(), err)
	}
	back, err := ivfpq.DeserializeFrom(f.res, &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if back.Rows() != idx.Rows() || back.PQDim() != idx.PQDim() {
		t.Fatalf("deserialized size %d, pq dim %d; want %d, %d", back.Rows(), back.PQDim(), idx.Rows(), idx.PQDim())
	}
	gotN, gotD := results(t, f, back, &f.sp)
	if !slices.Equal(gotN, wantN) || !slices.Equal(gotD, wantD) {
		t.Errorf("the deserialized index searches differently")
	}
	if _, err := ivfpq.DeserializeFrom(f.res, nil); !errors.Is(err, safe.ErrInvalidArgument) {
		t.Errorf("nil reader: %v", err)
	}
}
