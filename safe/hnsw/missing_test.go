package hnsw_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
	"github.com/cuvs-go/cuvs/internal/safetest"
)

const childEnv = "HNSW_TEST_NOT_BUILT"

// hnswFunctions are the 17 functions of cuvs/neighbors/hnsw.h.
var hnswFunctions = []string{
	"cuvsHnswAceParamsCreate", "cuvsHnswAceParamsDestroy",
	"cuvsHnswIndexParamsCreate", "cuvsHnswIndexParamsDestroy",
	"cuvsHnswIndexCreate", "cuvsHnswIndexDestroy",
	"cuvsHnswExtendParamsCreate", "cuvsHnswExtendParamsDestroy",
	"cuvsHnswFromCagra", "cuvsHnswFromCagraWithDataset", "cuvsHnswBuild", "cuvsHnswExtend",
	"cuvsHnswSearchParamsCreate", "cuvsHnswSearchParamsDestroy", "cuvsHnswSearch",
	"cuvsHnswSerialize", "cuvsHnswDeserialize",
}

// A libcuvs_c built without HNSW (the double with the 17 symbols left
// out) gives ErrNotBuilt, "not built into this libcuvs": checked by
// TestNotBuiltError in a process that loads that library.
func TestMissingSymbols(t *testing.T) {
	ctl := safetest.Double(t, "a build of the double without HNSW")
	for _, fn := range hnswFunctions {
		if !ctl.Has(fn) {
			t.Errorf("the double does not export %s", fn)
		}
	}
	lib := cuvsdouble.Build(t, cuvsdouble.Omit(hnswFunctions...))
	cmd := exec.Command(os.Args[0], "-test.run=^TestNotBuiltError$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", safetest.LibraryEnv+"="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestNotBuiltError") {
		t.Fatalf("TestNotBuiltError did not run:\n%s", out)
	}
}
