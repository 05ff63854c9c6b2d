package main

import (
	"bytes"
	"errors"
	"io/fs"
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
	if out.String() != quickstartOutput {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), quickstartOutput)
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
	if stdout.String() != quickstartOutput {
		t.Errorf("the README's program printed\n%s\nwant\n%s", stdout.String(), quickstartOutput)
	}
}

// quickstartOutput is what the program prints on a GPU and on the double
// alike: each query is a row of the dataset, so its nearest row is itself.
const quickstartOutput = "query 0: nearest row 0\nquery 1: nearest row 1\nquery 2: nearest row 2\n"

// readmeProgram returns the README's first ```go block that starts with
// "package main", or skips t where there is no README above (not the
// module's source tree).
func readmeProgram(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("not in the module's source tree (no ../../README.md) and no %s: the README's program is built and run by the module's own tests (make test) and by the GPU test bundle's run.sh", ReadmeProgramEnv)
	}
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
	return "package main\n" + prog
}

// The README's program is this package's main.go, from "package main" on:
// one program, tested here (TestQuickstart), built from the README
// (TestReadmeProgram), and installed from a clone (TestInstallFromClone).
func TestReadmeIsQuickstart(t *testing.T) {
	prog := readmeProgram(t)
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "\npackage main\n")
	if !ok {
		t.Fatal("main.go: no package clause after its doc comment")
	}
	if want := "package main\n" + body; prog != want {
		t.Errorf("README.md's program is not examples/quickstart/main.go: update one from the other\nREADME:\n%s\nmain.go:\n%s", prog, want)
	}
}

// TestInstallFromClone follows the README's install path verbatim: a new
// module outside the repository (go mod init), a Go workspace with this
// clone (go work init . CLONE), the README's program as its main.go, built
// with the go command and run against the library under test. The module
// cache must hold this module's dependencies (the tests built them);
// GOPROXY=off keeps the go command from fetching anything else.
func TestInstallFromClone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	prog := readmeProgram(t)
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command (%v)", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(t.TempDir(), "myapp")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "GOWORK=", "GO111MODULE=on")
	gorun := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goCmd, args...)
		cmd.Dir, cmd.Env = app, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gorun("mod", "init", "example.com/myapp")
	gorun("work", "init", ".", root)
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "myapp")
	gorun("build", "-o", bin, ".")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CUVS_LIBRARY="+safetest.LibraryPath())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the program built from a clone: %v\n%s", err, stderr.String())
	}
	if stdout.String() != quickstartOutput {
		t.Errorf("the program built from a clone printed\n%s\nwant\n%s", stdout.String(), quickstartOutput)
	}
}

// buildReadmeProgram builds the README's program into t.TempDir(), or skips
// t where there is no README above or no go command.
func buildReadmeProgram(t *testing.T) string {
	t.Helper()
	prog := readmeProgram(t)
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the README's program with (%v) and no %s", err, ReadmeProgramEnv)
	}
	dir, err := os.MkdirTemp(".", "readme-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "readme-program")
	cmd := exec.Command(goCmd, "build", "-o", bin, "./"+filepath.Base(dir))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's program does not build: %v\n%s", err, out)
	}
	return bin
}
