package kit

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/npy"
)

// Corrupt wraps err, a Go-side refusal of an index file's contents, as
// safe.ErrCorruptIndex for op.
func Corrupt(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, safe.ErrCorruptIndex, err)
}

// CheckItems refuses, as safe.ErrCorruptIndex, an index file that is not
// whole .npy items to its end after a dtype tag when tagged (npy.Walk: a
// truncated file, or bytes after the index). A file that cannot be opened
// passes: cuVS then reports it.
// visit, if not nil, checks the items' sequence (npy.Walk).
func CheckItems(op, path string, tagged bool, visit func(i int, it npy.Item) error) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	if _, _, err := npy.Walk(f, st.Size(), tagged, visit); err != nil {
		return Corrupt(op, err)
	}
	return nil
}

// Deserialize is WithPath for a cuVS deserializer: a failure of f is also
// safe.ErrCorruptIndex (cuVS refused the file's contents), except where
// the file could not be opened, memory could not be allocated, or CUDA
// failed (the device's fault, not the file's).
func Deserialize(op string, res *safe.Resources, path string, f func(h generated.CuvsResources_t, path *byte) error) error {
	err := WithPath(op, res, path, f)
	var e *safe.Error
	if errors.As(err, &e) && !e.OutOfMemory && !strings.HasPrefix(e.Reason, "Cannot open file") &&
		!strings.Contains(e.Text, "CUDA error") && !strings.Contains(e.Text, "cudaError") {
		e.Corrupt = true
	}
	return err
}
