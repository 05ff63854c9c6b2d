package tiered_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/tiered"
)

// A missing file is fs.ErrNotExist naming the path, and a directory
// syscall.EISDIR, neither of them a corrupt index.
func TestDeserializeUnopenable(t *testing.T) {
	safetest.Check(t)
	res := safetest.Resources(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if _, err := tiered.Deserialize(res, missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) || errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := tiered.Deserialize(res, dir); !errors.Is(err, syscall.EISDIR) || errors.Is(err, safe.ErrCorruptIndex) {
		t.Errorf("a directory: %v", err)
	}
}
