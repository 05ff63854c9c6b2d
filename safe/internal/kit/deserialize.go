package kit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/base"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// Corrupt wraps err, a Go-side refusal of an index file's contents, as
// safe.ErrCorruptIndex for op. The message may quote the file's bytes: it
// is made valid, printable UTF-8 (base.Quote).
func Corrupt(op string, err error) error {
	e := fmt.Errorf("%s: %w: %w", op, safe.ErrCorruptIndex, err)
	return &renamed{msg: base.Quote(e.Error()), err: e}
}

// CheckFile refuses, before any C call, an index file path that C cannot
// take (an *ArgError) or a file that cannot be opened for reading: a
// missing file is fs.ErrNotExist, a directory syscall.EISDIR, each an
// *fs.PathError naming path, wrapped with op. Every path-taking
// deserializer calls it first (Deserialize and CheckItems do).
func CheckFile(op, path string) error {
	if _, err := CPath(op, path); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	st, err := f.Stat()
	f.Close()
	if err == nil && st.IsDir() {
		err = &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// CheckItems refuses, as safe.ErrCorruptIndex, an index file that is not
// whole .npy items to its end after a dtype tag when tagged (npy.Walk: a
// truncated file, or bytes after the index); a file that cannot be opened
// as CheckFile does.
// visit, if not nil, checks the items' sequence (npy.Walk).
func CheckItems(op, path string, tagged bool, visit func(i int, it npy.Item) error) error {
	return CheckItemsN(op, path, -1, tagged, visit)
}

// CheckItemsN is CheckItems of the file's first size bytes (what precedes
// its checksum trailer); size < 0 is the whole file.
func CheckItemsN(op, path string, size int64, tagged bool, visit func(i int, it npy.Item) error) error {
	if err := CheckFile(op, path); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	if size < 0 || size > st.Size() {
		size = st.Size()
	}
	if _, _, err := npy.Walk(f, size, tagged, visit); err != nil {
		return Corrupt(op, err)
	}
	return nil
}

// Deserialize is WithPath for a cuVS deserializer, after CheckFile: a
// failure of f is also safe.ErrCorruptIndex (MarkCorrupt).
func Deserialize(op string, res *safe.Resources, path string, f func(h generated.CuvsResources_t, path *byte) error) error {
	if err := CheckFile(op, path); err != nil {
		return err
	}
	return MarkCorrupt(WithPath(op, res, path, f))
}

// MarkCorrupt marks err, a cuVS deserializer's failure, as
// safe.ErrCorruptIndex too (cuVS refused the file's contents), except
// where the file could not be opened, memory could not be allocated, or
// CUDA failed (the device's fault, not the file's). It returns err.
func MarkCorrupt(err error) error {
	var e *safe.Error
	if errors.As(err, &e) && !e.OutOfMemory && !strings.HasPrefix(e.Reason, "Cannot open file") &&
		!strings.Contains(e.Text, "CUDA error") && !strings.Contains(e.Text, "cudaError") {
		e.Corrupt = true
	}
	return err
}
