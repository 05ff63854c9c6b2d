package bruteforce_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/bruteforce"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// BenchmarkIntegrity measures what the checksum costs on a large index
// (issue 46): SerializeTo, DeserializeFrom, Serialize and Deserialize of a
// float32 brute-force index of CUVS_GO_BENCH_INTEGRITY MiB (1024 for the
// issue's 1 GB; unset: skipped), each with the checksum (sealed: what the
// package does) and without (cuVS: its serializer's bytes alone, which
// Deserialize checks only for a footer). The files go to $TMPDIR.
//
//	CUVS_GO_BENCH_INTEGRITY=1024 go test -run '^$' -bench Integrity -benchtime 3x ./safe/bruteforce/
func BenchmarkIntegrity(b *testing.B) {
	mib, err := strconv.Atoi(os.Getenv("CUVS_GO_BENCH_INTEGRITY"))
	if err != nil || mib <= 0 {
		b.Skip("set CUVS_GO_BENCH_INTEGRITY to the index's size in MiB (1024: 1 GiB)")
	}
	res, err := safe.NewResources()
	if err != nil {
		b.Fatal(err)
	}
	defer res.Close()
	const dim = 128
	rows := mib << 20 / (4 * dim)
	data := safetest.Random(3, rows, dim)
	ds, err := safe.DeviceMatrixFrom(res, data, rows, dim)
	if err != nil {
		b.Fatal(err)
	}
	data = nil
	idx, err := bruteforce.Build(res, ds, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ds.Close()
	defer idx.Close()
	size := int64(rows) * dim * 4
	cuvsTo := func(w io.Writer) (int64, error) {
		return kit.SerializeTo("bench", w, func(p string) error { return bruteforce.SerializeCuVS(idx, res, p) })
	}
	sealedTo := func(w io.Writer) (int64, error) { return idx.SerializeTo(res, w) }
	for _, v := range []struct {
		name string
		to   func(io.Writer) (int64, error)
		file func(string) error
	}{
		{"sealed", sealedTo, func(p string) error { return idx.Serialize(res, p) }},
		{"cuVS", cuvsTo, func(p string) error { return bruteforce.SerializeCuVS(idx, res, p) }},
	} {
		b.Run("SerializeTo/"+v.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if _, err := v.to(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
		var buf bytes.Buffer
		if _, err := v.to(&buf); err != nil {
			b.Fatal(err)
		}
		b.Run("DeserializeFrom/"+v.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				back, err := bruteforce.DeserializeFrom(res, bytes.NewReader(buf.Bytes()))
				if err != nil {
					b.Fatal(err)
				}
				back.Close()
			}
		})
		buf = bytes.Buffer{}
		path := filepath.Join(b.TempDir(), "index.bin")
		b.Run("Serialize/"+v.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if err := v.file(path); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Deserialize/"+v.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				back, err := bruteforce.Deserialize(res, path)
				if err != nil {
					b.Fatal(err)
				}
				back.Close()
			}
		})
		os.Remove(path)
	}
}
