// Package integrity proves that an index file or stream holds the bytes
// the bindings wrote: a checksum trailer of CRC-32C (Castagnoli) sums, one
// per chunk of the data, appended after the data (or kept in a sidecar
// file), and its check.
//
// The trailer is the chunks' sums (4 bytes each, little-endian, one per
// ChunkSize bytes of data, the last chunk possibly short) followed by a
// 32-byte footer:
//
//	0  magic   "\x89cuvsgo\n"
//	8  uint64  the data's length, in bytes (what precedes the trailer)
//	16 uint32  the chunk size, a power of two
//	20 uint32  the trailer's version, 1
//	24 uint32  CRC-32C of the chunks' sums
//	28 uint32  CRC-32C of the footer's bytes 0 to 28
//
// Every integer is little-endian. A single flipped bit anywhere is found:
// in the data by its chunk's sum, in the sums by their own sum, in the
// footer by the footer's sum, in the magic by its distance to the magic.
// Check names the damaged chunk's or the trailer's byte range.
//
// The package knows nothing of indexes or of cuVS: the index packages
// append the trailer after cuVS's bytes (cuVS's readers stop at their last
// field) or keep it beside the file, and map its errors to
// safe.ErrCorruptIndex.
//
// # Why a trailer, and where a sidecar
//
// A trailer keeps one object per index, streams included, and leaves
// cuVS's bytes as cuVS wrote them: an envelope before them would make the
// files unreadable by cuVS itself, a sidecar alone cannot follow a stream.
// It works because every reader but hnswlib's stops at its last field
// without looking for the end of the file, in cuVS 26.06.00 and 26.08.01
// alike (std::ifstream reads, no tellg, seekg, peek or eof check):
// brute_force_serialize.cu (dtype, version, rows, dim, metric, dataset,
// norms), detail/cagra/cagra_serialize.cuh (and, on 26.08,
// detail/dataset_serialize.hpp), ivf_flat/ivf_flat_serialize.cuh,
// ivf_pq/ivf_pq_serialize.cuh and ivf_sq/ivf_sq_serialize.cuh, under
// cpp/src/neighbors; the C layer (c/src/neighbors/*.cpp) reads only the
// 4-byte dtype first. hnsw's reader is hnswlib 0.7.0's loadIndex
// (cpp/src/neighbors/detail/hnsw.hpp; cpp/cmake/patches/
// hnswlib_override.json), which throws "Index seems to be corrupted or
// unsupported" unless it ends exactly at the file's end (hnswalg.h): hnsw's
// files keep hnswlib's bytes and their trailer goes to a sidecar file,
// path+SidecarSuffix; its streams carry the trailer, cut off before
// hnswlib reads them.
package integrity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"os"
	"strings"
)

// Magic starts the footer: a byte outside ASCII first, as PNG's does, so
// that a text-mode transfer that changes line ends is seen.
const Magic = "\x89cuvsgo\n"

// FooterSize is the footer's size in bytes; Version the trailer's version.
const (
	FooterSize = 32
	Version    = 1
)

// ChunkSize is the data covered by each sum that Sum writes: 1 MiB, so
// that the trailer adds 4 bytes per MiB (0.0004 %) and a damaged byte is
// placed within 1 MiB.
const ChunkSize = 1 << 20

// minChunk and maxChunk bound the chunk sizes Check accepts.
const (
	minChunk = 1 << 10
	maxChunk = 1 << 30
)

// SidecarSuffix ends the name of a sidecar file: the trailer of the file
// whose name it extends, kept beside it where the format's reader refuses
// bytes after its data (hnswlib's).
const SidecarSuffix = ".crc32c"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Error is a refusal of damaged data or a damaged trailer: where (a byte
// range of the file or stream, and the section it falls in) and what.
type Error struct {
	Section string // "data", "trailer's chunk sums", "trailer's footer", "trailer's magic", "length"
	Offset  int64  // the first byte of the damaged range
	End     int64  // the byte after it
	Detail  string // what was found
}

func (e *Error) Error() string {
	return fmt.Sprintf("checksum: %s at bytes %d to %d: %s", e.Section, e.Offset, e.End, e.Detail)
}

// ErrNoTrailer is Require's refusal of data without a trailer.
var ErrNoTrailer = errors.New("checksum: no checksum trailer (a file cuVS wrote, or written before the bindings added one)")

// Sum computes a trailer: write the data to it (an io.Writer that never
// fails), then call Trailer. The zero value is not usable: call NewSum.
type Sum struct {
	n     int64    // bytes written
	sums  []uint32 // the whole chunks' sums
	cur   uint32   // the current chunk's running sum
	chunk int64
}

// NewSum returns a Sum with chunks of ChunkSize bytes.
func NewSum() *Sum { return newSum(ChunkSize) }

func newSum(chunk int64) *Sum { return &Sum{chunk: chunk} }

// Write adds p to the data. It never fails.
func (s *Sum) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := s.chunk - s.n%s.chunk
		take := int64(len(p))
		if take > room {
			take = room
		}
		s.cur = crc32.Update(s.cur, castagnoli, p[:take])
		s.n += take
		p = p[take:]
		if s.n%s.chunk == 0 {
			s.sums = append(s.sums, s.cur)
			s.cur = 0
		}
	}
	return n, nil
}

// Len returns the bytes written so far.
func (s *Sum) Len() int64 { return s.n }

// Trailer returns the trailer of the data written so far.
func (s *Sum) Trailer() []byte {
	sums := s.sums
	if s.n%s.chunk != 0 {
		sums = append(sums[:len(sums):len(sums)], s.cur)
	}
	b := make([]byte, 4*len(sums)+FooterSize)
	for i, v := range sums {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	f := b[4*len(sums):]
	copy(f, Magic)
	binary.LittleEndian.PutUint64(f[8:], uint64(s.n))
	binary.LittleEndian.PutUint32(f[16:], uint32(s.chunk))
	binary.LittleEndian.PutUint32(f[20:], Version)
	binary.LittleEndian.PutUint32(f[24:], crc32.Checksum(b[:4*len(sums)], castagnoli))
	binary.LittleEndian.PutUint32(f[28:], crc32.Checksum(f[:28], castagnoli))
	return b
}

// Footer is a parsed footer.
type Footer struct {
	DataLen   int64
	ChunkSize int64
	TableSum  uint32
}

// Chunks returns the number of chunk sums the footer's data has.
func (f Footer) Chunks() int64 { return (f.DataLen + f.ChunkSize - 1) / f.ChunkSize }

// TrailerLen returns the trailer's length: the sums and the footer.
func (f Footer) TrailerLen() int64 { return 4*f.Chunks() + FooterSize }

// ParseFooter reads the footer that ends b (at least FooterSize bytes, the
// last FooterSize of which are read), found at offset off of the file or
// stream. found is false where b does not end with a footer: its magic is
// not there, nor within 4 flipped bits of it (a footer whose magic is that
// close is a damaged one, an *Error). A footer with the magic whose own
// sum, version or fields do not hold is an *Error naming it.
func ParseFooter(b []byte, off int64) (f Footer, found bool, err error) {
	if len(b) < FooterSize {
		return Footer{}, false, nil
	}
	b = b[len(b)-FooterSize:]
	end := off + FooterSize
	if d := distance(b[:8], Magic); d != 0 {
		if d <= 4 {
			return Footer{}, false, &Error{Section: "trailer's magic", Offset: off, End: off + 8, Detail: fmt.Sprintf("%d bits differ from the checksum trailer's magic", d)}
		}
		return Footer{}, false, nil
	}
	if got, want := crc32.Checksum(b[:28], castagnoli), binary.LittleEndian.Uint32(b[28:]); got != want {
		return Footer{}, false, &Error{Section: "trailer's footer", Offset: off, End: end, Detail: fmt.Sprintf("its CRC-32C is %08x, it records %08x", got, want)}
	}
	if v := binary.LittleEndian.Uint32(b[20:]); v != Version {
		return Footer{}, false, &Error{Section: "trailer's footer", Offset: off, End: end, Detail: fmt.Sprintf("version %d, these bindings read version %d", v, Version)}
	}
	n := binary.LittleEndian.Uint64(b[8:])
	c := binary.LittleEndian.Uint32(b[16:])
	if c < minChunk || c > maxChunk || c&(c-1) != 0 {
		return Footer{}, false, &Error{Section: "trailer's footer", Offset: off, End: end, Detail: fmt.Sprintf("chunk size %d, want a power of two from %d to %d", c, minChunk, maxChunk)}
	}
	if n > 1<<62 {
		return Footer{}, false, &Error{Section: "trailer's footer", Offset: off, End: end, Detail: fmt.Sprintf("data length %d", n)}
	}
	return Footer{DataLen: int64(n), ChunkSize: int64(c), TableSum: binary.LittleEndian.Uint32(b[24:])}, true, nil
}

// distance returns the bits in which b differs from m (of the same length).
func distance(b []byte, m string) int {
	d := 0
	for i := range b {
		d += bits.OnesCount8(b[i] ^ m[i])
	}
	return d
}

// Info is what Check found.
type Info struct {
	// Verified: a trailer was found and every byte matched it.
	Verified bool
	// DataLen is the data's length: what precedes the trailer, or the
	// whole size where there is none (or where it is in a sidecar).
	DataLen int64
	// Appended: the trailer follows the data (rather than being in a
	// sidecar, or absent).
	Appended bool
}

// Check checks r, size bytes, for an appended trailer: where it has one,
// every chunk of the data against its sum (an *Error naming the first
// damaged chunk); where it has none, Info.Verified is false and DataLen
// size. An error reading r comes back as it is (not an *Error).
func Check(r io.ReaderAt, size int64) (Info, error) {
	if size < FooterSize {
		return Info{DataLen: size}, nil
	}
	var fb [FooterSize]byte
	if _, err := r.ReadAt(fb[:], size-FooterSize); err != nil {
		return Info{}, err
	}
	f, found, err := ParseFooter(fb[:], size-FooterSize)
	if err != nil {
		return Info{}, err
	}
	if !found {
		return Info{DataLen: size}, nil
	}
	if f.DataLen+f.TrailerLen() != size {
		return Info{}, &Error{Section: "length", Offset: 0, End: size, Detail: fmt.Sprintf(
			"%d bytes, the trailer records %d bytes of data and %d of trailer (%d in all): cut or extended", size, f.DataLen, f.TrailerLen(), f.DataLen+f.TrailerLen())}
	}
	table := make([]byte, 4*f.Chunks())
	if _, err := r.ReadAt(table, f.DataLen); err != nil {
		return Info{}, err
	}
	if err := verify(r, f, table, f.DataLen); err != nil {
		return Info{}, err
	}
	return Info{Verified: true, DataLen: f.DataLen, Appended: true}, nil
}

// CheckSidecar checks r, size bytes of data, against trailer, the sidecar
// file's contents (the trailer Sum made of it). The sidecar's offsets in
// errors are its own, its sections named "sidecar's ...".
func CheckSidecar(r io.ReaderAt, size int64, trailer []byte) (Info, error) {
	f, found, err := ParseFooter(trailer, int64(len(trailer))-FooterSize)
	if err != nil || !found {
		if err == nil {
			err = &Error{Section: "trailer's magic", Offset: 0, End: int64(len(trailer)), Detail: "the sidecar holds no checksum trailer"}
		}
		return Info{}, sidecar(err)
	}
	if f.TrailerLen() != int64(len(trailer)) {
		return Info{}, sidecar(&Error{Section: "trailer's footer", Offset: 0, End: int64(len(trailer)), Detail: fmt.Sprintf("%d bytes, its footer wants %d", len(trailer), f.TrailerLen())})
	}
	if f.DataLen != size {
		return Info{}, &Error{Section: "length", Offset: 0, End: size, Detail: fmt.Sprintf(
			"%d bytes, the sidecar records %d: cut or extended, or the sidecar is another file's", size, f.DataLen)}
	}
	if err := verify(r, f, trailer[:len(trailer)-FooterSize], 0); err != nil {
		return Info{}, sidecar(err)
	}
	return Info{Verified: true, DataLen: size}, nil
}

// sidecar renames a trailer section as the sidecar's.
func sidecar(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Section != "data" {
		c := *e
		c.Section = "sidecar's " + strings.TrimPrefix(c.Section, "trailer's ")
		return &c
	}
	return err
}

// verify checks the chunk sums' own sum (the table is at tableOff of its
// file), then the data against them.
func verify(r io.ReaderAt, f Footer, table []byte, tableOff int64) error {
	if got := crc32.Checksum(table, castagnoli); got != f.TableSum {
		return &Error{Section: "trailer's chunk sums", Offset: tableOff, End: tableOff + int64(len(table)), Detail: fmt.Sprintf("their CRC-32C is %08x, the footer records %08x", got, f.TableSum)}
	}
	buf := make([]byte, min(f.ChunkSize, 4<<20, max(f.DataLen, 1)))
	bad, first := 0, int64(-1)
	for i := int64(0); i < f.Chunks(); i++ {
		off := i * f.ChunkSize
		n := min(f.ChunkSize, f.DataLen-off)
		var sum uint32
		for done := int64(0); done < n; {
			m := min(int64(len(buf)), n-done)
			if _, err := r.ReadAt(buf[:m], off+done); err != nil {
				return err
			}
			sum = crc32.Update(sum, castagnoli, buf[:m])
			done += m
		}
		if sum != binary.LittleEndian.Uint32(table[4*i:]) {
			if bad == 0 {
				first = i
			}
			bad++
		}
	}
	if bad > 0 {
		off := first * f.ChunkSize
		detail := "it does not match its CRC-32C"
		if bad > 1 {
			detail = fmt.Sprintf("it and %d more of the %d chunks of %d bytes do not match their CRC-32C", bad-1, f.Chunks(), f.ChunkSize)
		}
		return &Error{Section: "data", Offset: off, End: min(off+f.ChunkSize, f.DataLen), Detail: detail}
	}
	return nil
}

// Require returns ErrNoTrailer where info was not verified and required
// is true.
func Require(info Info, required bool) error {
	if required && !info.Verified {
		return ErrNoTrailer
	}
	return nil
}

// CheckFile checks the file path: its sidecar (path+SidecarSuffix) where
// sidecar is true and one exists, else an appended trailer (Check). An
// error opening or reading a file comes back as it is.
func CheckFile(path string, sidecar bool) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Info{}, err
	}
	if sidecar {
		t, err := os.ReadFile(path + SidecarSuffix)
		switch {
		case err == nil:
			return CheckSidecar(f, st.Size(), t)
		case !errors.Is(err, os.ErrNotExist):
			return Info{}, err
		}
	}
	return Check(f, st.Size())
}

// Append appends the trailer of the file path's contents to it (a second
// read of what was just written, then a write at its end).
func Append(path string) error {
	t, err := trailerOf(path)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(t); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteSidecar writes the trailer of the file path's contents to its
// sidecar, path+SidecarSuffix (replacing one there).
func WriteSidecar(path string) error {
	t, err := trailerOf(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path+SidecarSuffix, t, 0o644)
}

func trailerOf(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := NewSum()
	if _, err := io.CopyBuffer(s, f, make([]byte, 4<<20)); err != nil {
		return nil, err
	}
	return s.Trailer(), nil
}

// Writer returns a writer that writes to w and sums what w accepted into s.
func Writer(w io.Writer, s *Sum) io.Writer { return &tee{w: w, s: s} }

type tee struct {
	w io.Writer
	s *Sum
}

func (t *tee) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	_, _ = t.s.Write(p[:n])
	return n, err
}
