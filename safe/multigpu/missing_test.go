package multigpu_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
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
	if os.Getenv("MULTIGPU_CHILD") == "1" {
		notBuiltInChild(t)
		return
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
