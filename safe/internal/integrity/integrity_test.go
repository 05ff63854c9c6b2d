package integrity

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func data(n int) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// sealed returns d followed by its trailer with chunks of chunk bytes.
func sealed(d []byte, chunk int64) []byte {
	s := newSum(chunk)
	// written in uneven pieces: the sums do not depend on the writes' sizes
	for p := d; len(p) > 0; {
		k := min(len(p), 1+len(p)/3)
		s.Write(p[:k])
		p = p[k:]
	}
	return append(bytes.Clone(d), s.Trailer()...)
}

func check(b []byte) (Info, error) { return Check(bytes.NewReader(b), int64(len(b))) }

// The trailer's length, a proved round trip, and data without a trailer.
func TestRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 1023, 1024, 1025, 5000} {
		d := data(n)
		b := sealed(d, minChunk)
		chunks := (n + minChunk - 1) / minChunk
		if len(b) != n+4*chunks+FooterSize {
			t.Errorf("%d bytes: sealed %d, want %d", n, len(b), n+4*chunks+FooterSize)
		}
		info, err := check(b)
		if err != nil || !info.Verified || !info.Appended || info.DataLen != int64(n) {
			t.Errorf("%d bytes: %+v, %v", n, info, err)
		}
		info, err = check(d)
		if err != nil || info.Verified || info.DataLen != int64(n) {
			t.Errorf("%d bytes, no trailer: %+v, %v", n, info, err)
		}
		if err := Require(info, true); !errors.Is(err, ErrNoTrailer) {
			t.Errorf("%d bytes, no trailer, required: %v", n, err)
		}
	}
	// NewSum's chunks are ChunkSize.
	s := NewSum()
	s.Write(make([]byte, ChunkSize+1))
	if got := len(s.Trailer()); got != 8+FooterSize {
		t.Errorf("ChunkSize+1 bytes: a %d-byte trailer, want %d", got, 8+FooterSize)
	}
}

// Every single-bit flip of a sealed buffer, in the data or the trailer, is
// an *Error naming a range that holds the flipped byte.
func TestEveryBitFlip(t *testing.T) {
	d := data(3000)
	b := sealed(d, minChunk)
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			_, err := check(c)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("bit %d of byte %d: %v", bit, i, err)
			}
			if int64(i) < e.Offset || int64(i) >= e.End {
				t.Fatalf("bit %d of byte %d: names bytes %d to %d (%v)", bit, i, e.Offset, e.End, err)
			}
			if (i < len(d)) != (e.Section == "data") {
				t.Fatalf("bit %d of byte %d: section %q", bit, i, e.Section)
			}
		}
	}
}

// Flips in two chunks name the first and count the other.
func TestTwoChunks(t *testing.T) {
	b := sealed(data(5000), minChunk)
	b[1500] ^= 1
	b[4500] ^= 1
	_, err := check(b)
	var e *Error
	if !errors.As(err, &e) || e.Offset != 1024 || e.End != 2048 || !strings.Contains(e.Detail, "1 more of the 5 chunks") {
		t.Errorf("%v", err)
	}
}

// Cuts and extensions: a footer whose length does not hold is an *Error;
// without a footer at the end the data is unproved (the format's own
// checks then see the bytes after it).
func TestLength(t *testing.T) {
	d := data(3000)
	b := sealed(d, minChunk)
	tl := len(b) - len(d)
	twice := append(bytes.Clone(b), b[len(d):]...)
	if _, err := check(twice); err == nil || !strings.Contains(err.Error(), "cut or extended") {
		t.Errorf("the trailer twice: %v", err)
	}
	if _, err := check(append(bytes.Clone(d[:100]), b[len(d):]...)); err == nil {
		t.Errorf("another data's trailer: accepted")
	}
	for _, n := range []int{len(b) - 1, len(b) - tl + 1} {
		info, err := check(b[:n])
		if err != nil || info.Verified || info.DataLen != int64(n) {
			t.Errorf("cut to %d: %+v, %v", n, info, err)
		}
	}
	info, err := check(append(bytes.Clone(b), 'x'))
	if err != nil || info.Verified {
		t.Errorf("a byte after the trailer: %+v, %v", info, err)
	}
}

// A sidecar proves a file without bytes after its data.
func TestSidecar(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "index.bin")
	d := data(ChunkSize + 10)
	if err := os.WriteFile(p, d, 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := CheckFile(p, true)
	if err != nil || info.Verified {
		t.Errorf("no sidecar: %+v, %v", info, err)
	}
	if err := WriteSidecar(p); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, d) {
		t.Fatalf("the file changed")
	}
	info, err = CheckFile(p, true)
	if err != nil || !info.Verified || info.Appended || info.DataLen != int64(len(d)) {
		t.Errorf("sidecar: %+v, %v", info, err)
	}
	if info, err := CheckFile(p, false); err != nil || info.Verified {
		t.Errorf("sidecar not asked for: %+v, %v", info, err)
	}
	side, _ := os.ReadFile(p + SidecarSuffix)
	for i := range side {
		c := bytes.Clone(side)
		c[i] ^= 4
		_, err := CheckSidecar(bytes.NewReader(d), int64(len(d)), c)
		var e *Error
		if !errors.As(err, &e) || !strings.HasPrefix(e.Section, "sidecar's ") || int64(i) < e.Offset || int64(i) >= e.End {
			t.Fatalf("sidecar byte %d flipped: %v", i, err)
		}
	}
	c := bytes.Clone(d)
	c[ChunkSize+3] ^= 1
	if _, err := CheckSidecar(bytes.NewReader(c), int64(len(c)), side); err == nil || !strings.Contains(err.Error(), "data at bytes 1048576 to 1048586") {
		t.Errorf("data flipped: %v", err)
	}
	if _, err := CheckSidecar(bytes.NewReader(d[:10]), 10, side); err == nil || !strings.Contains(err.Error(), "another file's") {
		t.Errorf("another file: %v", err)
	}
}

// Append appends exactly Sum's trailer.
func TestAppend(t *testing.T) {
	p := filepath.Join(t.TempDir(), "index.bin")
	d := data(2*ChunkSize + 7)
	if err := os.WriteFile(p, d, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Append(p); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	s := NewSum()
	var buf bytes.Buffer
	w := Writer(&buf, s)
	w.Write(d)
	if !bytes.Equal(buf.Bytes(), d) || !bytes.Equal(got, append(bytes.Clone(d), s.Trailer()...)) {
		t.Fatalf("Append wrote %d bytes, want the data and Sum's trailer", len(got))
	}
	info, err := CheckFile(p, false)
	if err != nil || !info.Verified || info.DataLen != int64(len(d)) {
		t.Errorf("%+v, %v", info, err)
	}
}

// FuzzCheck: whatever the bytes, Check neither panics nor proves what its
// trailer does not describe; a proved input is its data's Sum. Its corpus
// is kept in testdata/fuzz; fuzz with -fuzzminimizetime 0 (minimizing its
// kilobyte inputs takes the engine a minute each).
func FuzzCheck(f *testing.F) {
	d := data(3000)
	f.Add(sealed(d, minChunk))
	f.Add(sealed(nil, minChunk))
	f.Add(sealed(d, ChunkSize))
	f.Add(d)
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := check(b)
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("not an *Error: %v", err)
		}
		if err == nil && info.Verified {
			fo, found, _ := ParseFooter(b, int64(len(b))-FooterSize)
			if !found || info.DataLen != fo.DataLen {
				t.Fatalf("proved %+v, footer %+v", info, fo)
			}
			again := sealed(b[:info.DataLen], fo.ChunkSize)
			if !bytes.Equal(again, b) {
				t.Fatalf("proved, but not its data's trailer")
			}
		}
	})
}

// FuzzParseFooter: never a panic; a footer found has sane fields.
func FuzzParseFooter(f *testing.F) {
	f.Add(sealed(data(10), minChunk)[10:])
	f.Add(make([]byte, FooterSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		fo, found, err := ParseFooter(b, 0)
		if found && (err != nil || fo.ChunkSize < minChunk || fo.ChunkSize > maxChunk || fo.DataLen < 0 || fo.TrailerLen() < FooterSize) {
			t.Fatalf("%+v, %v", fo, err)
		}
	})
}

// BenchmarkCheck measures the check of 256 MiB in memory (CRC-32C with
// SSE4.2 on amd64): -bench Check; CUVS_GO_INTEGRITY_MB sets the size.
func BenchmarkCheck(b *testing.B) {
	n := benchMB() << 20
	d := make([]byte, n)
	for i := range d {
		d[i] = byte(i * 7)
	}
	s := NewSum()
	s.Write(d)
	full := append(d, s.Trailer()...)
	b.SetBytes(int64(n))
	b.ResetTimer()
	for b.Loop() {
		if _, err := check(full); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSum measures computing a trailer (what SerializeTo adds).
func BenchmarkSum(b *testing.B) {
	n := benchMB() << 20
	d := make([]byte, n)
	b.SetBytes(int64(n))
	for b.Loop() {
		s := NewSum()
		s.Write(d)
		_ = s.Trailer()
	}
}
