package multigpu_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/integrity"
	"github.com/cuvs-go/cuvs/safe/ivfpq"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// TestIntegrity: a multi-GPU index file and stream carry the checksum
// trailer and read back verified; a flipped bit anywhere is
// safe.ErrCorruptIndex naming the checksum's damaged range; the file cuVS
// wrote (the trailer cut off) loads unverified, and safe.RequireChecksum
// refuses it.
func TestIntegrity(t *testing.T) {
	safetest.Check(t)
	res := mres(t, 2)
	data := safetest.Random(64, rows, dim)
	pp, err := ivfpq.DefaultIndexParams()
	if err != nil {
		t.Fatal(err)
	}
	pp.NLists, pp.PQDim = 8, dim
	idx, err := multigpu.BuildIVFPQ(res, host(t, data, rows), &multigpu.IVFPQIndexParams{Base: &pp})
	if err != nil {
		t.Fatal(err)
	}
	safetest.Close(t, idx)
	path := filepath.Join(t.TempDir(), "pq.bin")
	if err := idx.Serialize(res, path); err != nil {
		t.Fatal(err)
	}
	ok := false
	back, err := multigpu.DeserializeIVFPQ(res, path, safe.Verified(&ok))
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Close(); err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Error("the file read back unverified")
	}
	sealed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(len(sealed) - integrity.FooterSize)
	f, found, err := integrity.ParseFooter(sealed[off:], off)
	if err != nil || !found {
		t.Fatalf("no checksum trailer at the file's end (%v)", err)
	}
	rng := rand.New(rand.NewPCG(64, 1))
	bad := filepath.Join(t.TempDir(), "bad.bin")
	for range 8 {
		b := bytes.Clone(sealed)
		bit := rng.IntN(8 * len(b))
		b[bit/8] ^= 1 << (bit % 8)
		if err := os.WriteFile(bad, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if x, err := multigpu.DeserializeIVFPQ(res, bad); !errors.Is(err, safe.ErrCorruptIndex) || !strings.Contains(err.Error(), "checksum") {
			if x != nil {
				_ = x.Close()
			}
			t.Fatalf("bit %d of %d flipped: %v, want safe.ErrCorruptIndex from the checksum", bit, 8*len(b), err)
		}
	}
	plain := filepath.Join(t.TempDir(), "plain.bin")
	if err := os.WriteFile(plain, sealed[:f.DataLen], 0o600); err != nil {
		t.Fatal(err)
	}
	ok = true
	old, err := multigpu.DeserializeIVFPQ(res, plain, safe.Verified(&ok))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Error("a file without a trailer read back as verified")
	}
	if _, err := multigpu.DeserializeIVFPQ(res, plain, safe.RequireChecksum()); !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("RequireChecksum, no trailer: %v, want safe.ErrCorruptIndex", err)
	}
	var buf bytes.Buffer
	if _, err := idx.SerializeTo(res, &buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), sealed) {
		t.Error("SerializeTo wrote other bytes than Serialize")
	}
	ok = false
	s, err := multigpu.DeserializeIVFPQFrom(res, bytes.NewReader(buf.Bytes()), safe.Verified(&ok))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Error("the stream read back unverified")
	}
}
