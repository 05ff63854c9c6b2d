package cagra

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/memest"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// cuvsCagraFile writes a CAGRA file in cuVS's format (cagra_serialize.cuh:
// v26.06.00's version 5, v26.08.01's version 6 with its dataset kind) of n
// float32 rows of dim, graph degree 4, and after the content map the
// dataset's items (dataset), and returns its path and size.
func cuvsCagraFile(t *testing.T, version, kind int64, n, dim int64, dataset []byte) (string, int64) {
	t.Helper()
	return cuvsCagraFileClaiming(t, version, kind, n, n, dim, dataset)
}

// cuvsCagraFileClaiming is cuvsCagraFile whose header claims rows rows.
func cuvsCagraFileClaiming(t *testing.T, version, kind int64, rows, n, dim int64, dataset []byte) (string, int64) {
	t.Helper()
	b := []byte("<f4\x00")
	b = npy.AppendScalar(b, "<i4", uint64(version))
	if version >= 6 {
		b = npy.AppendScalar(b, "<u4", uint64(kind))
	}
	b = npy.AppendScalar(b, "<i8", uint64(rows))
	b = npy.AppendScalar(b, "<u4", uint64(dim))
	b = npy.AppendScalar(b, "<u4", 4)
	b = npy.AppendScalar(b, "<i4", uint64(safe.L2Expanded))
	b = npy.AppendArray(b, "<u4", []int64{n, 4}, make([]byte, n*4*4))
	content := uint64(0)
	if dataset != nil {
		content = 1
	}
	b = npy.AppendScalar(b, "<u4", content)
	b = append(b, dataset...)
	path := filepath.Join(t.TempDir(), "cagra.idx")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, int64(len(b))
}

// strided is a strided dataset's items (dataset_serialize.hpp): its tag,
// CUDA_R_32F, rows, dim, stride, then the rows unpadded.
func strided(n, dim, stride int64) []byte {
	b := npy.AppendScalar(nil, "<u4", 2)
	b = npy.AppendScalar(b, "<i4", 0)
	b = npy.AppendScalar(b, "<i8", uint64(n))
	b = npy.AppendScalar(b, "<u4", uint64(dim))
	b = npy.AppendScalar(b, "<u4", uint64(stride))
	return npy.AppendArray(b, "<f4", []int64{n, dim}, make([]byte, n*dim*4))
}

// The device memory of cuVS's CAGRA files, from their headers: the graph
// always; the rows at their stride where they go to the device (26.06
// always, 26.08 for the device kinds), a VPQ dataset's codebooks and codes
// (26.06); a header that claims more than its file holds is damaged.
func TestFileNeedCuVSFormats(t *testing.T) {
	const n, dim, stride = 100, 6, 8
	graph := memest.Round(n * 4 * 4)
	rows := memest.Round(n * stride * 4)
	vpq := npy.AppendScalar(nil, "<u4", 3)
	vpq = npy.AppendScalar(vpq, "<i4", 2) // CUDA_R_16F codebooks
	for _, v := range []uint64{n, dim, 16, 256, 2, 8} {
		vpq = npy.AppendScalar(vpq, "<u4", v)
	}
	vpq = npy.AppendArray(vpq, "<e2", []int64{16, dim}, make([]byte, 16*dim*2))
	vpq = npy.AppendArray(vpq, "<e2", []int64{256, 2}, make([]byte, 256*2*2))
	vpq = npy.AppendArray(vpq, "|u1", []int64{n, 8}, make([]byte, n*8))
	for _, c := range []struct {
		name          string
		version, kind int64
		dataset       []byte
		want          int64
	}{
		{"26.06 graph only", 5, 0, nil, graph},
		{"26.06 strided rows", 5, 0, strided(n, dim, stride), graph + rows},
		{"26.06 VPQ", 5, 0, vpq, graph + memest.Sum(16*dim*2, 256*2*2, n*8)},
		{"26.08 graph only", 6, 0, nil, graph},
		{"26.08 device_padded", 6, 1, strided(n, dim, stride), graph + rows},
		{"26.08 device_standard", 6, 2, strided(n, dim, dim), graph + memest.Round(n*dim*4)},
		{"26.08 host_padded", 6, 3, strided(n, dim, stride), graph},
		{"26.08 host_standard", 6, 4, strided(n, dim, dim), graph},
	} {
		path, size := cuvsCagraFile(t, c.version, c.kind, n, dim, c.dataset)
		if _, _, err := npy.Walk(mustOpen(t, path), size, true, nil); err != nil {
			t.Fatalf("%s: the test's file is not whole .npy items: %v", c.name, err)
		}
		got, err := fileNeed(path, size)
		if err != nil || got != c.want {
			t.Errorf("%s: fileNeed = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	path, _ := cuvsCagraFile(t, 6, 1, n, dim, strided(n, dim, stride))
	if _, err := fileNeed(path, n*4*4-1); !errors.Is(err, npy.ErrFormat) {
		t.Errorf("a file shorter than its graph: fileNeed: %v, want npy.ErrFormat", err)
	}
	// Past the graph the format's reading is not yet checked against a
	// file cuVS wrote: what does not add up there bounds the need by the
	// graph alone, and cuVS's reader judges the file.
	if got, err := fileNeed(path, n*dim*4-1); err != nil || got != graph {
		t.Errorf("a file shorter than its rows: fileNeed = %d, %v; want the graph's %d", got, err, graph)
	}
}

// The test double's CAGRA formats: 26.08's host dataset kinds keep the rows
// off the device, its device kinds and 26.06's has_dataset put them on it.
func TestFileNeedDoubleFormats(t *testing.T) {
	const n, dim = 100, 6
	head := func(magic string, dataset uint32) []byte {
		h := make([]byte, 48)
		copy(h, magic)
		h[8], h[9] = 2, 32
		binary.LittleEndian.PutUint64(h[16:], n)
		binary.LittleEndian.PutUint64(h[24:], dim)
		binary.LittleEndian.PutUint64(h[32:], 4)
		binary.LittleEndian.PutUint32(h[40:], dataset)
		return h
	}
	graph := memest.Round(n * 4 * 4)
	size := int64(48 + n*dim*4 + n*4*4)
	for _, c := range []struct {
		name string
		head []byte
		want int64
	}{
		{"26.06 with rows", head("CVDBLCG1", 1), graph + paddedRows(n, dim, 4)},
		{"26.06 graph only", head("CVDBLCG1", 0), graph},
		{"26.08 device_padded", head("CVDBLCG6", 1), graph + paddedRows(n, dim, 4)},
		{"26.08 device_standard", head("CVDBLCG6", 2), graph + memest.Round(n*dim*4)},
		{"26.08 host_padded", head("CVDBLCG6", 3), graph},
	} {
		got, err := doubleFileNeed(c.head, size)
		if err != nil || got != c.want {
			t.Errorf("%s: doubleFileNeed = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	if _, err := doubleFileNeed(head("CVDBLCG6", 1), n*4*4); !errors.Is(err, npy.ErrFormat) {
		t.Errorf("a file shorter than its rows: %v, want npy.ErrFormat", err)
	}
}

// Deserialize refuses a cuVS-format file whose graph and rows do not fit
// under safe.SetMemoryLimit with a *safe.MemoryError naming its need,
// before any C call (the double would not read cuVS's format), and a file
// whose header claims more rows than its graph holds as damaged.
func TestDeserializeCuVSFileRefused(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	path, size := cuvsCagraFile(t, 5, 0, 1000, 6, strided(1000, 6, 8))
	m, err := res.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	if err := safe.SetMemoryLimit(m.InUse + 1024); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = safe.SetMemoryLimit(0) })
	want := memest.Round(1000*4*4) + memest.Round(1000*8*4)
	_, err = Deserialize(res, path)
	var me *safe.MemoryError
	if !errors.As(err, &me) || !errors.Is(err, safe.ErrOutOfMemory) || me.Need != want {
		t.Errorf("Deserialize of a %d-byte file under the limit: %v, want a *safe.MemoryError needing %d", size, err, want)
	}
	if err := safe.SetMemoryLimit(0); err != nil {
		t.Fatal(err)
	}
	lying, _ := cuvsCagraFileClaiming(t, 5, 0, 1<<40, 1000, 6, strided(1000, 6, 8))
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
