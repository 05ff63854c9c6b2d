package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/safetest"
)

// TestMain loads the library under test (the ABI test double, or
// $CUVS_TEST_LIBRARY): run's safe.Load then finds it loaded.
func TestMain(m *testing.M) { safetest.Main(m) }

// TestQuickstart runs the program and checks what its doc says it prints.
func TestQuickstart(t *testing.T) {
	safetest.Check(t)
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	want := "query 0: nearest row 0\nquery 1: nearest row 1\nquery 2: nearest row 2\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

// TestReadmeProgramBuilds: the README's quick-start program compiles
// against the current API (it is built from a copy in a folder of this
// module, so that its imports resolve here).
func TestReadmeProgramBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "```go\npackage main\n")
	if !ok {
		t.Fatal("README.md: no ```go block with package main")
	}
	prog, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("README.md: unterminated code block")
	}
	dir, err := os.MkdirTemp(".", "readme-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"+prog), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", os.DevNull, "./"+filepath.Base(dir))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the README's program does not build: %v\n%s", err, out)
	}
}
