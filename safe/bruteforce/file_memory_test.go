package bruteforce

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// cuvsBruteForceFile writes a brute-force file in cuVS's format
// (brute_force_serialize.cu): the dtype, version 0, rows (claimed, the
// header's) and dim, metric and its argument, include_dataset and the n ×
// dim float32 rows, has_norms and the norms; it returns its path and size.
func cuvsBruteForceFile(t *testing.T, claimed, n, dim int64, metric safe.Metric, include, norms bool) (string, int64) {
	t.Helper()
	b := []byte("<f4\x00")
	b = npy.AppendScalar(b, "<i4", 0)
	b = npy.AppendScalar(b, "<u8", uint64(claimed))
	b = npy.AppendScalar(b, "<u8", uint64(dim))
	b = npy.AppendScalar(b, "<i4", uint64(metric))
	b = npy.AppendScalar(b, "<f4", uint64(math.Float32bits(2)))
	b = npy.AppendScalar(b, "|b1", map[bool]uint64{true: 1}[include])
	if include {
		b = npy.AppendArray(b, "<f4", []int64{n, dim}, make([]byte, n*dim*4))
	}
	b = npy.AppendScalar(b, "|b1", map[bool]uint64{true: 1}[norms])
	if norms {
		b = npy.AppendArray(b, "<f4", []int64{n}, make([]byte, n*4))
	}
	path := filepath.Join(t.TempDir(), "bf.idx")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, int64(len(b))
}

// The device memory of cuVS's brute-force files, from their headers: the
// rows when the file includes them, and the expanded metrics' norms; a
// header that claims more rows than the file holds is damaged.
func TestFileNeedCuVSFormat(t *testing.T) {
	const n, dim = 300, 10
	rows, norms := memest.Round(n*dim*4), memest.Round(n*4)
	for _, c := range []struct {
		name             string
		metric           safe.Metric
		include, hasNorm bool
		want             int64
	}{
		{"rows and norms", safe.L2Expanded, true, true, rows + norms},
		{"rows, no norms", safe.InnerProduct, true, false, rows},
		{"norms only", safe.CosineExpanded, false, true, norms},
	} {
		path, size := cuvsBruteForceFile(t, n, n, dim, c.metric, c.include, c.hasNorm)
		if _, _, err := npy.Walk(mustOpen(t, path), size, true, nil); err != nil {
			t.Fatalf("%s: the test's file is not whole .npy items: %v", c.name, err)
		}
		got, err := fileNeed(path, size)
		if err != nil || got != c.want {
			t.Errorf("%s: fileNeed = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	path, size := cuvsBruteForceFile(t, 1<<40, n, dim, safe.L2Expanded, true, true)
	if _, err := fileNeed(path, size); !errors.Is(err, npy.ErrFormat) {
		t.Errorf("a header claiming 2^40 rows: fileNeed: %v, want npy.ErrFormat", err)
	}
}

// Deserialize refuses a cuVS-format file whose rows and norms do not fit
// under safe.SetMemoryLimit with a *safe.MemoryError naming them, before
// any C call, and a header that claims more rows than its file holds as
// damaged, not as too large for the device.
func TestDeserializeCuVSFileRefused(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	path, size := cuvsBruteForceFile(t, 2000, 2000, 16, safe.L2Expanded, true, true)
	m, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	if err := safe.SetMemoryLimit(m.InUse + 1024); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = safe.SetMemoryLimit(0) })
	want := memest.Round(2000*16*4) + memest.Round(2000*4)
	_, err = Deserialize(res, path)
	var me *safe.MemoryError
	if !errors.As(err, &me) || !errors.Is(err, safe.ErrOutOfMemory) || me.Need != want {
		t.Errorf("Deserialize of a %d-byte file under the limit: %v, want a *safe.MemoryError needing %d", size, err, want)
	}
	if err := safe.SetMemoryLimit(0); err != nil {
		t.Fatal(err)
	}
	lying, _ := cuvsBruteForceFile(t, 1<<40, 2000, 16, safe.L2Expanded, true, true)
	if _, err := Deserialize(res, lying); !errors.Is(err, safe.ErrCorruptIndex) || errors.Is(err, safe.ErrOutOfMemory) {
		t.Errorf("Deserialize of a file claiming 2^40 rows: %v, want safe.ErrCorruptIndex", err)
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
