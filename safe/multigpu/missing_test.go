package multigpu_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/race"
	"github.com/cuvs-go/cuvs/internal/safetest"
	"github.com/cuvs-go/cuvs/safe/multigpu"
)

// mgFunctions are the multi-GPU functions of the loaded release.
func mgFunctions() []string {
	var out []string
	for _, f := range generated.Functions() {
		if strings.HasPrefix(f, "cuvsMultiGpu") && generated.FunctionReleases(f) != nil {
			out = append(out, f)
		}
	}
	return out
}

// A libcuvs_c built without multi-GPU support (CUVS_BUILD_MG_ALGOS off)
// lacks every cuvsMultiGpu* symbol: each entry point then fails with
// generated.ErrMissingSymbol (a *MissingSymbolError), not a crash.
// The child process loads a double built without them.
func TestNotBuiltIn(t *testing.T) {
	switch os.Getenv("MULTIGPU_CHILD") {
	case "1":
		notBuiltInChild(t)
		return
	case "all":
		needMG(t) // the child of the child: skips like every other test
	}
	safetest.Double(t, "a library built without the multi-GPU functions")
	path, cleanup, err := cuvsdouble.BuildFile(cuvsdouble.Release(generated.Release()), cuvsdouble.Omit(mgFunctions()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNotBuiltIn$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MULTIGPU_CHILD=1", safetest.LibraryEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	// Every test of the package against that library (as if it were a
	// real one: conformance mode) skips as lacking multi-GPU, but those
	// that call no C function, and those that need the double.
	cmd = exec.Command(os.Args[0], "-test.run=.", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "MULTIGPU_CHILD=all", safetest.LibraryEnv+"="+path)
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("every test against a library without multi-GPU: %v\n%s", err, out)
	}
	checkSkips(t, string(out))
}

// noC are the tests that call no C function: they pass on any library.
var noC = map[string]bool{"TestResourcesAreTheirOwnType": true}

// checkSkips reads a -test.v log: every top-level test skipped, with
// lacksMG (or, needing the double, with safetest.Double's reason), but
// those of noC, which pass.
func checkSkips(t *testing.T, log string) {
	t.Helper()
	lines := strings.Split(log, "\n")
	seen := 0
	for i, l := range lines {
		var status, name string
		for _, s := range []string{"PASS", "FAIL", "SKIP"} {
			if rest, ok := strings.CutPrefix(l, "--- "+s+": "); ok {
				status = s
				name, _, _ = strings.Cut(rest, " ")
			}
		}
		if status == "" {
			continue
		}
		seen++
		// Its log lines come between its "=== RUN" line and this one.
		why := ""
		for j := i - 1; j >= 0 && !strings.HasPrefix(lines[j], "=== RUN   "+name); j-- {
			why = lines[j] + why
		}
		switch {
		case noC[name]:
			if status != "PASS" {
				t.Errorf("%s: %s", name, status)
			}
		case status != "SKIP":
			t.Errorf("%s: %s against a library without multi-GPU, want a skip", name, status)
		case !strings.Contains(why, lacksMG) && !strings.Contains(why, "needs the ABI test double") &&
			!(race.Enabled && strings.Contains(why, "the race detector allocates")):
			t.Errorf("%s skipped: %s", name, why)
		}
	}
	if seen < 20 {
		t.Errorf("%d tests in the child's log:\n%s", seen, log)
	}
}

func notBuiltInChild(t *testing.T) {
	check := func(what string, err error) {
		t.Helper()
		var ms *generated.MissingSymbolError
		if !errors.Is(err, generated.ErrMissingSymbol) || !errors.As(err, &ms) {
			t.Fatalf("%s: %v, want ErrMissingSymbol", what, err)
		}
	}
	_, err := multigpu.NewResources()
	check("NewResources", err)
	_, err = multigpu.NewResources(multigpu.WithDevices(0))
	check("NewResources(WithDevices)", err)
	_, err = multigpu.DefaultDistribution()
	check("DefaultDistribution", err)
}
