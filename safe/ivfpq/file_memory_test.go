package ivfpq

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// The device memory of an IVF-PQ file, from its header (ivf_pq_serialize.cuh):
// the fixed part EstimateMemory counts (codebooks of either kind, centers,
// rotation), and a row's codes in the file's layout with its id; a header
// that claims more rows than the file holds is damaged.
func TestFileNeedFromHeader(t *testing.T) {
	const rows, dim, nl, pqDim, bits = 1000, 12, 10, 6, 5
	for _, c := range []struct {
		layout CodesLayout
		book   CodebookKind
		row    int64 // a row's code bytes
	}{
		{Flat, PerSubspace, (pqDim*bits + 7) / 8},
		{Interleaved, PerCluster, 16}, // one chunk of 128/5 = 25 codes
	} {
		var b []byte
		for _, s := range []struct {
			descr string
			v     uint64
		}{{"<i4", 4}, {"<i8", rows}, {"<u4", dim}, {"<u4", bits}, {"<u4", pqDim}, {"|b1", 0},
			{"<i4", uint64(safe.L2Expanded)}, {"<i4", uint64(c.book)}, {"<i4", uint64(c.layout)}, {"<u4", nl}} {
			b = npy.AppendScalar(b, s.descr, s.v)
		}
		path := filepath.Join(t.TempDir(), "ivfpq.idx")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		g := pqGeometry(dim, pqDim, bits)
		size := int64(1 << 20)
		want := fixedBytes(g, nl, dim, c.book) + rows*(c.row+8)
		if got, err := fileNeed(path, size); err != nil || got != want {
			t.Errorf("layout %d, codebooks %d: fileNeed = %d, %v; want %d", c.layout, c.book, got, err, want)
		}
		if _, err := fileNeed(path, rows*8-1); !errors.Is(err, npy.ErrFormat) {
			t.Errorf("layout %d: a file shorter than its ids: %v, want npy.ErrFormat", c.layout, err)
		}
	}
}
