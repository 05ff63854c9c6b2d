package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// ReadmeProgramEnv names a built copy of the README's quick-start program:
// the GPU test bundle (internal/gputest) carries one, built where the
// module is, since the machine that runs the bundle has neither Go nor the
// README; run.sh sets it.
const ReadmeProgramEnv = "CUVS_GO_README_PROGRAM"

// TestReadmeProgram: the README's quick-start program compiles against the
// current API and, run against the library under test, prints what its
// comments say: a line per query, each query found first. Where the module
// is, it is built from a copy of the README's code block in a folder of
// this module (so that its imports resolve here); elsewhere, from
// $CUVS_GO_README_PROGRAM, and the test skips when neither is there.
func TestReadmeProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	bin := os.Getenv(ReadmeProgramEnv)
	if bin == "" {
		bin = buildReadmeProgram(t)
	} else if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v", ReadmeProgramEnv, err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CUVS_LIBRARY="+safetest.LibraryPath())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's program: %v\n%s", err, stderr.String())
	}
	// fmt.Println(q, ids, distances): "0 [0 ...] [0 ...]", k = 5 of each.
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("printed %d lines, want 3 (one per query):\n%s", len(lines), stdout.String())
	}
	for q, line := range lines {
		f := strings.Fields(strings.NewReplacer("[", " [ ", "]", " ] ").Replace(line))
		// q [ id*5 ] [ d*5 ]
		if len(f) != 15 || f[0] != strconv.Itoa(q) || f[1] != "[" || f[7] != "]" || f[8] != "[" || f[14] != "]" {
			t.Errorf("line %d: %q, want the query, its 5 ids and 5 distances", q, line)
			continue
		}
		if f[2] != strconv.Itoa(q) {
			t.Errorf("line %d: %q: query %d did not find itself first", q, line, q)
		}
	}
}

// buildReadmeProgram builds the README's program into t.TempDir(), or skips
// t where there is no README above (not the module's source tree) or no go
// command.
func buildReadmeProgram(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("not in the module's source tree (no ../../README.md) and no %s: the README's program is built and run by the module's own tests (make test) and by the GPU test bundle's run.sh", ReadmeProgramEnv)
	}
	if err != nil {
		t.Fatal(err)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the README's program with (%v) and no %s", err, ReadmeProgramEnv)
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
	bin := filepath.Join(t.TempDir(), "readme-program")
	cmd := exec.Command(goCmd, "build", "-o", bin, "./"+filepath.Base(dir))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's program does not build: %v\n%s", err, out)
	}
	return bin
}
