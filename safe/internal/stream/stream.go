// Package stream bridges cuVS's file-name-only serializers to io.Writer and
// io.Reader.
//
// cuVS's serialize functions take a file name and open it once, for
// writing, with a std::ofstream that only ever appends (no seekp or tellp
// in the CAGRA, brute-force, IVF-Flat or IVF-PQ serializers at v26.06.00).
// ToWriter therefore hands them the path of a named pipe (FIFO) in a private
// temporary directory and copies what comes out of it to the writer as it
// is written: nothing reaches the disk, the memory used is the pipe's
// buffer and one copy buffer, and the data is copied once more than a file
// write would (pipe to user space to the writer).
//
// The deserialize functions cannot read a pipe: cuvsCagraDeserialize and
// cuvsBruteForceDeserialize open the file twice (once for the dtype, once
// for the index), and the safe layer reads the header itself first. So
// FromReader copies the reader into an anonymous in-memory file
// (memfd_create: no name in any file system, freed when its descriptor is
// closed, before FromReader returns) and hands over the path
// /proc/self/fd/N, which every open reopens from the start: nothing
// reaches the disk, and the memory used is the index's size, for the
// duration of the call. Only where memfd_create or /proc is missing does
// it fall back to a file in a private temporary directory ($TMPDIR),
// removed before it returns. A limit bounds what is read: a stream longer
// than the limit is refused after limit+1 bytes.
package stream

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

// mfdCloexec is memfd_create's MFD_CLOEXEC: the descriptor is not handed to
// child processes.
const mfdCloexec = 1

// tempRoot is where the private directories are made ("" is os.TempDir()):
// a variable for the tests' leak checks.
var tempRoot = ""

// ToWriter calls write with the path of a named pipe and copies everything
// written to that path into w, while write runs. write must open the path
// at most once, for writing, write sequentially (as cuVS's serializers do)
// and have closed it when it returns; it may also never open it (after an
// early error, say). ToWriter
// returns the bytes copied to w and the first error: write's, else w's.
// When w fails midway the rest of the output is read and dropped, so that
// write is never left blocked on a full pipe.
func ToWriter(w io.Writer, write func(path string) error) (int64, error) {
	dir, err := os.MkdirTemp(tempRoot, "cuvs-stream-")
	if err != nil {
		return 0, fmt.Errorf("stream: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "index")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return 0, fmt.Errorf("stream: mkfifo: %w", &os.PathError{Op: "mkfifo", Path: path, Err: err})
	}
	// The read end opened without blocking (no writer yet), and a writer of
	// our own kept open meanwhile: the reader cannot see end-of-file before
	// write has returned, whether write opens the pipe at once, later or
	// never; write's own open does not block, since a reader exists.
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, fmt.Errorf("stream: %w", err)
	}
	hold, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		r.Close()
		return 0, fmt.Errorf("stream: %w", err)
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := io.Copy(w, r)
		if err != nil {
			_, _ = io.Copy(io.Discard, r) // let write finish
		}
		r.Close()
		done <- result{n, err}
	}()
	werr := write(path)
	hold.Close() // the last writer gone: the copy sees end-of-file
	res := <-done
	if werr != nil {
		return res.n, werr
	}
	if res.err != nil {
		return res.n, fmt.Errorf("stream: writing: %w", res.err)
	}
	return res.n, nil
}

// TooLargeError is FromReader's refusal of a stream longer than its limit.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("stream: the stream holds more than the limit of %d bytes", e.Limit)
}

// memfdNr is sysMemfdCreate as a variable (a negative constant cannot be
// converted to uintptr, even where it is never used).
var memfdNr = sysMemfdCreate

// noMemfd makes FromReader use the temporary-file fallback: for the tests.
var noMemfd = false

// FromReader copies r to the end (at most limit bytes; limit <= 0 is no
// limit) into an anonymous in-memory file, else a temporary file, calls
// read with a path that opens it, and frees the file. It returns the bytes
// copied and the first error: r's or *TooLargeError (read is then not
// called), else read's. It reads at most limit+1 bytes from r.
func FromReader(r io.Reader, limit int64, read func(path string) error) (int64, error) {
	return FromReaderFile(r, limit, func(_ *os.File, path string) error { return read(path) })
}

// FromReaderFile is FromReader with the file handed to read too (open for
// reading and writing, its offset at its end): read may check it or cut it
// (Truncate) before a deserializer opens path.
func FromReaderFile(r io.Reader, limit int64, read func(f *os.File, path string) error) (int64, error) {
	f, path, cleanup, err := memFile()
	if err != nil {
		return 0, err
	}
	if f == nil { // no memfd: a private temporary file
		if f, path, cleanup, err = tempFile(); err != nil {
			return 0, err
		}
	}
	defer cleanup()
	src := r
	if limit > 0 {
		src = io.LimitReader(r, limit+1)
	}
	n, err := io.Copy(f, src)
	if err != nil {
		return n, fmt.Errorf("stream: reading: %w", err)
	}
	if limit > 0 && n > limit {
		return n, &TooLargeError{Limit: limit}
	}
	return n, read(f, path)
}

// memFile makes an anonymous in-memory file and the /proc path that reopens
// it; a nil file (and no error) where the kernel or /proc lacks them.
func memFile() (*os.File, string, func(), error) {
	nr := memfdNr
	if noMemfd || nr < 0 {
		return nil, "", nil, nil
	}
	name := []byte("cuvs-index\x00")
	fd, _, errno := syscall.Syscall(uintptr(nr), uintptr(unsafe.Pointer(&name[0])), mfdCloexec, 0)
	if errno != 0 {
		return nil, "", nil, nil // ENOSYS, or a sandbox that forbids it
	}
	f := os.NewFile(fd, "memfd:cuvs-index")
	path := fmt.Sprintf("/proc/self/fd/%d", fd)
	// The path must reopen the file (a /proc is mounted and shows it).
	g, err := os.Open(path)
	if err != nil {
		f.Close()
		return nil, "", nil, nil
	}
	g.Close()
	return f, path, func() { f.Close() }, nil
}

// tempFile makes a file in a private temporary directory.
func tempFile() (*os.File, string, func(), error) {
	dir, err := os.MkdirTemp(tempRoot, "cuvs-stream-")
	if err != nil {
		return nil, "", nil, fmt.Errorf("stream: %w", err)
	}
	path := filepath.Join(dir, "index")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, fmt.Errorf("stream: %w", err)
	}
	return f, path, func() { f.Close(); os.RemoveAll(dir) }, nil
}
