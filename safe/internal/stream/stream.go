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
// FromReader copies the reader into a temporary file (private directory,
// removed before it returns) and hands its path over: the index's size on
// the temporary directory's file system ($TMPDIR), for the duration of the
// call.
package stream

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

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

// FromReader copies r to the end into a temporary file, calls read with
// its path, and removes the file. It returns the bytes copied and the first
// error: r's (read is then not called), else read's.
func FromReader(r io.Reader, read func(path string) error) (int64, error) {
	dir, err := os.MkdirTemp(tempRoot, "cuvs-stream-")
	if err != nil {
		return 0, fmt.Errorf("stream: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "index")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("stream: %w", err)
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("stream: reading: %w", err)
	}
	return n, read(path)
}
