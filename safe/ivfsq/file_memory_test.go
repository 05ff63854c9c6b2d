package ivfsq

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// The device memory of an IVF-SQ file, from its header (ivf_sq_serialize.cuh):
// the fixed part EstimateMemory counts for its lists, and a one-byte code
// a dimension and an id a row; a header that claims more rows than the
// file holds is damaged.
func TestFileNeedFromHeader(t *testing.T) {
	const rows, dim, nl = 1000, 12, 10
	b := []byte("|u1\x00")
	for _, s := range []struct {
		descr string
		v     uint64
	}{{"<i4", 2}, {"<i8", rows}, {"<u4", dim}, {"<u4", nl}, {"<i4", uint64(safe.L2Expanded)}, {"|b1", 0}} {
		b = npy.AppendScalar(b, s.descr, s.v)
	}
	path := filepath.Join(t.TempDir(), "ivfsq.idx")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	size := int64(rows * (dim + 8))
	want := fixedBytes(nl, dim) + size
	if got, err := fileNeed(path, size); err != nil || got != want {
		t.Errorf("fileNeed = %d, %v; want %d", got, err, want)
	}
	if _, err := fileNeed(path, size-1); !errors.Is(err, npy.ErrFormat) {
		t.Errorf("a file shorter than its rows: %v, want npy.ErrFormat", err)
	}
}
