package dlpack_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// findNumPy returns a Python interpreter that imports NumPy with DLPack
// support (numpy.from_dlpack, NumPy >= 1.22). $DLPACK_TEST_PYTHON is tried
// first, then Debian's /usr/bin/python3 (the python3 on PATH may be another
// Python without NumPy), then python3 and python on PATH. When none does, it
// skips the test, or fails it under CUVS_GO_REQUIRE_NUMPY=1 (as CI sets).
func findNumPy(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("DLPACK_TEST_PYTHON"), "/usr/bin/python3"}
	for _, name := range []string{"python3", "python"} {
		if p, err := exec.LookPath(name); err == nil {
			cands = append(cands, p)
		}
	}
	var tried []string
	for _, py := range cands {
		if py == "" {
			continue
		}
		tried = append(tried, py)
		if exec.Command(py, "-c", "import numpy; numpy.from_dlpack").Run() == nil {
			return py
		}
	}
	msg := fmt.Sprintf("no Python with NumPy >= 1.22 found (tried %s; set DLPACK_TEST_PYTHON, or apt-get install python3-numpy)", strings.Join(tried, ", "))
	if os.Getenv("CUVS_GO_REQUIRE_NUMPY") == "1" {
		t.Fatal(msg) // CI installs NumPy: its absence there is a failure
	}
	t.Skip(msg)
	return ""
}

// buildTestLib builds internal/dlpacktest/cshared as a C shared library. The
// environment is passed on, so under GOEXPERIMENT=cgocheck2 the library is
// checked too.
func buildTestLib(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go") // go test puts its own first on PATH
	if err != nil {
		t.Skip("no go command to build the c-shared test library")
	}
	lib := filepath.Join(t.TempDir(), "libdlpacktest.so")
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", lib, "github.com/cuvs-go/cuvs/internal/dlpacktest/cshared")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the c-shared test library: %v\n%s", err, out)
	}
	return lib
}

// TestNumPyInterop has NumPy read tensors Go exports (values, layout, zero
// copy, deleter called exactly once) and Go import NumPy's own capsules
// (values, NumPy's deleter called on Close), in dlpack/testdata/interop.py.
func TestNumPyInterop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a c-shared library; skipped in -short mode")
	}
	py := findNumPy(t)
	lib := buildTestLib(t)
	out, err := exec.Command(py, filepath.Join("testdata", "interop.py"), "numpy", lib).CombinedOutput()
	t.Logf("%s\n%s", py, out)
	if err != nil {
		t.Fatalf("interop.py numpy: %v", err)
	}
}
