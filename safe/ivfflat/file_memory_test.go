package ivfflat

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// The device memory of an IVF-Flat file, from its header (ivf_flat_serialize.cuh):
// the fixed part EstimateMemory counts for its lists and metric, and its
// rows and ids at the element size its dtype tag names; a header that
// claims more rows, or centers, than the file holds is damaged.
func TestFileNeedFromHeader(t *testing.T) {
	const rows, dim, nl = 1000, 12, 10
	for _, c := range []struct {
		tag    string
		esz    int64
		metric safe.Metric
	}{{"<f4", 4, safe.L2Expanded}, {"<e2", 2, safe.InnerProduct}, {"|i1", 1, safe.L2Expanded}, {"|u1", 1, safe.CosineExpanded}} {
		b := append([]byte(c.tag), 0)
		for _, s := range []struct {
			descr string
			v     uint64
		}{{"<i4", 5}, {"<i8", rows}, {"<u4", dim}, {"<u4", nl}, {"<i4", uint64(c.metric)}, {"|b1", 0}, {"|b1", 0}} {
			b = npy.AppendScalar(b, s.descr, s.v)
		}
		path := filepath.Join(t.TempDir(), "ivfflat.idx")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		size := int64(rows * (dim*c.esz + 8))
		want := fixedBytes(nl, dim, c.metric) + size
		if got, err := fileNeed(path, size); err != nil || got != want {
			t.Errorf("%s: fileNeed = %d, %v; want %d", c.tag, got, err, want)
		}
		if _, err := fileNeed(path, size-1); !errors.Is(err, npy.ErrFormat) {
			t.Errorf("%s: a file shorter than its rows: %v, want npy.ErrFormat", c.tag, err)
		}
	}
}
