package hnsw_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/hnsw"
)

// Serialize writes hnswlib's file untouched (cuVS's bytes: hnswlib's
// loadIndex refuses a longer file) and its checksum to a sidecar; a
// flipped bit in either is safe.ErrCorruptIndex naming where; the stream
// carries the checksum after the data; a file cuVS wrote (no sidecar)
// loads unproved, refused where the checksum is required.
func TestIntegrity(t *testing.T) {
	safetest.Check(t)
	f := newFixture(t)
	p := indexParams(t, hnsw.HierarchyCPU)
	idx, err := hnsw.FromCagra(f.res, f.cagraIndex(t, safe.L2Expanded), p)
	must(t, err)
	safetest.Close(t, idx)
	wantN, wantD := f.search(t, idx, 64, f.qs)
	dir := t.TempDir()
	load := func(what, path string, opts ...safe.DeserializeOption) (*hnsw.Index, error) {
		t.Helper()
		back, err := hnsw.Deserialize(f.res, path, dlpack.Float32, safe.L2Expanded, p, opts...)
		if err == nil {
			safetest.Close(t, back)
			if what != "" {
				n, d := f.search(t, back, 64, f.qs)
				if !slices.Equal(n, wantN) || !slices.Equal(d, wantD) {
					t.Errorf("%s searches differently from the index", what)
				}
			}
		}
		return back, err
	}

	raw := filepath.Join(dir, "cuvs.hnsw")
	must(t, hnsw.SerializeCuVS(idx, f.res, raw))
	path := filepath.Join(dir, "index.hnsw")
	must(t, idx.Serialize(f.res, path))
	rawB, _ := os.ReadFile(raw)
	file, _ := os.ReadFile(path)
	side, err := os.ReadFile(path + ".crc32c")
	must(t, err)
	if !bytes.Equal(file, rawB) || len(side) != safetest.TrailerLen(len(file)) {
		t.Fatalf("the file (%d bytes) is not cuVS's (%d), or its sidecar (%d bytes) not its checksum (%d)", len(file), len(rawB), len(side), safetest.TrailerLen(len(file)))
	}

	verified := false
	_, err = load("the file with its sidecar", path, safe.RequireChecksum(), safe.Verified(&verified))
	must(t, err)
	if !verified {
		t.Errorf("the file with its sidecar not reported verified")
	}
	verified = true
	_, err = load("the file cuVS wrote", raw, safe.Verified(&verified))
	must(t, err)
	if verified {
		t.Errorf("the file cuVS wrote reported verified")
	}
	if _, err := load("", raw, safe.RequireChecksum()); !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("the file cuVS wrote, the checksum required: %v", err)
	}

	// 48 flips in the file, 16 in its sidecar.
	rng := rand.New(rand.NewPCG(46, uint64(len(file))))
	flipped := filepath.Join(dir, "flipped.hnsw")
	for k := range 64 {
		fb, sb := bytes.Clone(file), bytes.Clone(side)
		i, what := 0, ""
		if k < 16 {
			i = rng.IntN(len(sb))
			sb[i] ^= 1 << rng.IntN(8)
			what = fmt.Sprintf("sidecar byte %d of %d", i, len(sb))
		} else {
			i = rng.IntN(len(fb))
			fb[i] ^= 1 << rng.IntN(8)
			what = fmt.Sprintf("file byte %d of %d", i, len(fb))
		}
		must(t, os.WriteFile(flipped, fb, 0o644))
		must(t, os.WriteFile(flipped+".crc32c", sb, 0o644))
		_, err := load("", flipped)
		safetest.CheckNames(t, "hnsw.Deserialize", err, i, what)
	}
	// Another file's sidecar.
	must(t, os.WriteFile(flipped, file[:len(file)/2], 0o644))
	must(t, os.WriteFile(flipped+".crc32c", side, 0o644))
	if _, err := load("", flipped); !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("half the file with the whole one's sidecar: %v", err)
	}

	// The stream: the checksum after the data, checked and cut off.
	var buf bytes.Buffer
	_, err = idx.SerializeTo(f.res, &buf)
	must(t, err)
	stream := buf.Bytes()
	verified = false
	back, err := hnsw.DeserializeFrom(f.res, bytes.NewReader(stream), dlpack.Float32, safe.L2Expanded, p, safe.RequireChecksum(), safe.Verified(&verified))
	must(t, err)
	safetest.Close(t, back)
	if !verified {
		t.Errorf("the stream not reported verified")
	}
	for range 16 {
		b := bytes.Clone(stream)
		i := rng.IntN(len(b))
		b[i] ^= 1 << rng.IntN(8)
		back, err := hnsw.DeserializeFrom(f.res, bytes.NewReader(b), dlpack.Float32, safe.L2Expanded, p)
		if err == nil {
			back.Close()
		}
		safetest.CheckNames(t, "hnsw.DeserializeFrom", err, i, fmt.Sprintf("stream byte %d of %d", i, len(b)))
	}
	// The stream saved as a file (no sidecar): read without its trailer.
	saved := filepath.Join(dir, "saved.hnsw")
	must(t, os.WriteFile(saved, stream, 0o644))
	verified = false
	_, err = load("the saved stream", saved, safe.Verified(&verified))
	must(t, err)
	if !verified {
		t.Errorf("the saved stream not reported verified")
	}
	b := bytes.Clone(stream)
	b[10] ^= 2
	must(t, os.WriteFile(saved, b, 0o644))
	_, err = load("", saved)
	safetest.CheckNames(t, "hnsw.Deserialize", err, 10, "saved stream, byte 10")
}
