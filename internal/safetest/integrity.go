package safetest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/cuvs-go/cuvs/safe"
)

// The checksum trailer's layout, as the suite checks it from outside
// (safe/internal/integrity is out of this package's reach): a CRC-32C sum
// per MiB of data, 4 bytes each, then a 32-byte footer.
const (
	trailerChunk  = 1 << 20
	trailerFooter = 32
)

// TrailerLen returns the length of the checksum trailer of n bytes of data.
func TrailerLen(n int) int { return 4*((n+trailerChunk-1)/trailerChunk) + trailerFooter }

// CuVSBytes returns what precedes b's checksum trailer (the data length
// its footer records), cuVS's bytes; b itself where it has no footer.
func CuVSBytes(b []byte) []byte {
	if len(b) < trailerFooter || string(b[len(b)-trailerFooter:len(b)-trailerFooter+8]) != "\x89cuvsgo\n" {
		return b
	}
	n := binary.LittleEndian.Uint64(b[len(b)-trailerFooter+8:])
	if n > uint64(len(b)) {
		return b
	}
	return b[:n]
}

// where matches the byte range a checksum refusal names.
var where = regexp.MustCompile(`checksum: [a-z' ]+ at bytes (\d+) to (\d+)`)

// CheckNames fails t unless err is safe.ErrCorruptIndex from op, naming a
// byte range of the checksum's that holds byte i (i < 0: any range).
func CheckNames(t *testing.T, op string, err error, i int, what string) {
	t.Helper()
	if !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("%s: not safe.ErrCorruptIndex: %v", what, err)
		return
	}
	msg := err.Error()
	if op != "" && !bytes.HasPrefix([]byte(msg), []byte(op+": ")) {
		t.Errorf("%s: does not name %s: %v", what, op, err)
	}
	m := where.FindStringSubmatch(msg)
	if m == nil {
		t.Errorf("%s: names no byte range of the checksum: %v", what, err)
		return
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	if i >= 0 && (i < a || i >= b) {
		t.Errorf("%s: names bytes %d to %d, not byte %d: %v", what, a, b, i, err)
	}
}

// FlipBits returns n single-bit flips of data, as (byte, bit) pairs, from
// rng: a quarter of them in the last trailer bytes (the trailer), the rest
// anywhere.
func FlipBits(rng *rand.Rand, size, trailer, n int) [][2]int {
	out := make([][2]int, n)
	for k := range out {
		i := rng.IntN(size)
		if k < n/4 {
			i = size - trailer + rng.IntN(trailer)
		}
		out[k] = [2]int{i, rng.IntN(8)}
	}
	return out
}

// Integrity: Serialize writes cuVS's bytes followed by the checksum
// trailer; a file cuVS wrote (SerializeCuVS) loads unproved, and is
// refused where the checksum is required; 64 single-bit flips anywhere in
// a stream, and some in a file, are each safe.ErrCorruptIndex naming the
// damaged range; cuts and bytes after the trailer are refused; what is
// whole loads proved and searches as the index did.
func (s *IndexSuite[I, P]) integrity(t *testing.T) {
	if s.SerializeCuVS == nil {
		t.Skip("the package gives no SerializeCuVS")
	}
	f := s.fixture(t)
	idx := f.build(t)
	wantN, wantD := f.search(t, idx)
	same := func(what string, back I) {
		t.Helper()
		gotN, gotD := f.search(t, back)
		if !slices.Equal(gotN, wantN) || !slices.Equal(gotD, wantD) {
			t.Errorf("%s searches differently from the index", what)
		}
	}
	dir := t.TempDir()
	rawPath := filepath.Join(dir, "cuvs.bin")
	noErr(t, s.SerializeCuVS(idx, f.res, rawPath))
	raw, err := os.ReadFile(rawPath)
	noErr(t, err)
	path := filepath.Join(dir, "sealed.bin")
	noErr(t, s.Serialize(idx, f.res, path))
	sealed, err := os.ReadFile(path)
	noErr(t, err)
	tl := TrailerLen(len(raw))
	if len(sealed) != len(raw)+tl || !bytes.Equal(sealed[:len(raw)], raw) || !bytes.Equal(CuVSBytes(sealed), raw) {
		t.Fatalf("the file (%d bytes) is not cuVS's %d bytes followed by a %d-byte trailer", len(sealed), len(raw), tl)
	}

	// cuVS's own file: loads unproved, searches as the index; refused
	// where the checksum is required.
	verified := true
	back, err := s.Deserialize(f.res, rawPath, safe.Verified(&verified))
	noErr(t, err)
	if verified {
		t.Errorf("a file cuVS wrote reported verified")
	}
	same("the file cuVS wrote", back)
	Close(t, back)
	_, err = s.Deserialize(f.res, rawPath, safe.RequireChecksum())
	if !errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("a file cuVS wrote, the checksum required: %v", err)
	}
	verified = true
	back, err = s.DeserializeFrom(f.res, bytes.NewReader(raw), safe.Verified(&verified))
	noErr(t, err)
	if verified {
		t.Errorf("a stream cuVS wrote reported verified")
	}
	Close(t, back)

	// The bindings' file and stream: proved.
	verified = false
	back, err = s.Deserialize(f.res, path, safe.RequireChecksum(), safe.Verified(&verified))
	noErr(t, err)
	if !verified {
		t.Errorf("the bindings' file not reported verified")
	}
	same("the bindings' file", back)
	Close(t, back)
	verified = false
	back, err = s.DeserializeFrom(f.res, bytes.NewReader(sealed), safe.RequireChecksum(), safe.Verified(&verified))
	noErr(t, err)
	if !verified {
		t.Errorf("the bindings' stream not reported verified")
	}
	Close(t, back)

	// 64 single-bit flips of the stream, 8 of the file.
	op := s.Name + ".DeserializeFrom"
	rng := rand.New(rand.NewPCG(46, uint64(len(sealed))))
	for k, fl := range FlipBits(rng, len(sealed), tl, 64) {
		b := bytes.Clone(sealed)
		b[fl[0]] ^= 1 << fl[1]
		idx2, err := s.DeserializeFrom(f.res, bytes.NewReader(b))
		if err == nil {
			idx2.Close()
		}
		CheckNames(t, op, err, fl[0], fmt.Sprintf("stream, bit %d of byte %d of %d", fl[1], fl[0], len(b)))
		if k%8 == 0 {
			p := filepath.Join(dir, "flipped.bin")
			noErr(t, os.WriteFile(p, b, 0o644))
			idx2, err := s.Deserialize(f.res, p)
			if err == nil {
				idx2.Close()
			}
			CheckNames(t, s.Name+".Deserialize", err, fl[0], fmt.Sprintf("file, bit %d of byte %d of %d", fl[1], fl[0], len(b)))
		}
	}

	// Cut (but not to cuVS's bytes alone, a file cuVS wrote), or extended.
	for _, n := range []int{len(sealed) - 1, len(sealed) - 4, len(sealed) - trailerFooter, len(sealed) - trailerFooter - 1, len(raw) + 1, len(raw) - 1, len(raw) / 2} {
		idx2, err := s.DeserializeFrom(f.res, bytes.NewReader(sealed[:n]))
		if err == nil {
			idx2.Close()
		}
		if !errors.Is(err, safe.ErrCorruptIndex) {
			t.Errorf("cut to %d of %d bytes: %v", n, len(sealed), err)
		}
	}
	for name, b := range map[string][]byte{
		"a byte after the trailer":   append(bytes.Clone(sealed), 0),
		"32 zeros after it":          append(bytes.Clone(sealed), make([]byte, 32)...),
		"the trailer twice":          append(bytes.Clone(sealed), sealed[len(raw):]...),
		"the whole stream twice":     append(bytes.Clone(sealed), sealed...),
		"cuVS's bytes twice, sealed": append(append(bytes.Clone(raw), raw...), sealed[len(raw):]...),
	} {
		idx2, err := s.DeserializeFrom(f.res, bytes.NewReader(b))
		if err == nil {
			idx2.Close()
		}
		if !errors.Is(err, safe.ErrCorruptIndex) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
