package main

import (
	"bytes"
	"strings"
	"testing"
)

// The synthetic module in testdata/coverage: two releases (1.0 has
// xUnused; 1.2 drops it, adds xAdded and changes xBuild's parameter, so
// that 1.2's xBuild is bound by XBuild_v12), and a package lib whose
// exported API reaches the functions directly, through unexported helpers
// and methods, through a package variable and through an internal package.
const wantCoverage = `cuVS 1.0 (v1.0.0)
  x/algo.h
    xBuild              lib.Build
    xSearch             (lib.Index).Search
    xOrphan             NOT WRAPPED (referenced only by (lib.hidden).Use, which no exported API reaches)
  x/core.h
    xCreate             lib.New
    xSync               lib.Flush
    xUnused             NOT WRAPPED
    cuvsMultiGpuCreate  pending (multi-GPU)
  x/mg_algo.h
    xMgBuild            pending (multi-GPU) (referenced only by orphan.MG, which no exported API reaches)
  1.0: wrapped 4 of 8 (2 pending multi-GPU, 2 not wrapped)

cuVS 1.2 (v1.2.0)
  x/algo.h
    xBuild              (*lib.Index).Rebuild
    xSearch             (lib.Index).Search
    xOrphan             NOT WRAPPED (referenced only by (lib.hidden).Use, which no exported API reaches)
    xAdded              lib.Added
  x/core.h
    xCreate             lib.New
    xSync               lib.Flush
    cuvsMultiGpuCreate  pending (multi-GPU)
  x/mg_algo.h
    xMgBuild            pending (multi-GPU) (referenced only by orphan.MG, which no exported API reaches)
  1.2: wrapped 5 of 8 (2 pending multi-GPU, 1 not wrapped)

1.0: wrapped 4 of 8 (2 pending multi-GPU, 2 not wrapped)
1.2: wrapped 5 of 8 (2 pending multi-GPU, 1 not wrapped)
`

func TestCoverageReport(t *testing.T) {
	args := []string{"coverage", "-api", "testdata/coverage/api", "-src", "testdata/coverage/src"}
	var out, errb bytes.Buffer
	err := run(args, &out, &errb)
	if got := out.String(); got != wantCoverage {
		t.Errorf("report:\n%s\nwant:\n%s", got, wantCoverage)
	}
	// xOrphan (both releases) and xUnused (1.0) are not wrapped: an error.
	if err == nil || !strings.Contains(err.Error(), "3 C function(s)") {
		t.Errorf("err = %v, want 3 functions not wrapped", err)
	}
	out.Reset()
	if err := run(append(args, "-allow-missing"), &out, &errb); err != nil {
		t.Errorf("-allow-missing: %v", err)
	}
	if out.String() != wantCoverage {
		t.Errorf("-allow-missing prints another report:\n%s", out.String())
	}
}

// Only multi-GPU functions unwrapped: exit 0 without -allow-missing.
func TestCoverageMultiGPUPendingIsNoFailure(t *testing.T) {
	c := coverageConfig{apiDir: "testdata/coverage/api", srcDir: "testdata/coverage/src",
		srcPath: "github.com/cuvs-go/cuvs/gen/testdata/coverage/src", genPath: "github.com/cuvs-go/cuvs/generated"}
	rep, err := c.report()
	if err != nil {
		t.Fatal(err)
	}
	for i := range rep.releases {
		fs := rep.releases[i].funcs[:0]
		for _, f := range rep.releases[i].funcs {
			if f.wrapped() || f.multiGPU {
				fs = append(fs, f)
			}
		}
		rep.releases[i].funcs = fs
	}
	if n := rep.missing(); n != 0 {
		t.Errorf("missing = %d with only multi-GPU functions unwrapped", n)
	}
}

func TestCoverageShimCallers(t *testing.T) {
	src := []byte(`static int (*cuvsgo_p_cuvsA)(void);
static const char* (*cuvsgo_p_cuvsErr)(void);
static void* slots[] = { (void*)&cuvsgo_p_cuvsA, (void*)&cuvsgo_p_cuvsErr, 0 };

static char* cuvsgo_error_text(void) {
  const char* t = cuvsgo_p_cuvsErr ? cuvsgo_p_cuvsErr() : 0;
  return 0;
}

int32_t cuvsgo_cuvsA(int32_t* st) {
  if (!cuvsgo_p_cuvsA) return 1;
  return cuvsgo_p_cuvsA();
}

const char* cuvsgo_cuvsErr(int32_t* st) {
  return cuvsgo_p_cuvsErr();
}
`)
	got := shimCallers(src)
	if len(got) != 1 || got["cuvsErr"] != "cuvsgo_error_text" {
		t.Errorf("shimCallers = %v, want cuvsErr called by cuvsgo_error_text only", got)
	}
}

// The real module: every function of both releases is listed once, and the
// report reads the real sources (a few functions whose safe wrappers exist
// since long are reached).
func TestCoverageModule(t *testing.T) {
	var out, errb bytes.Buffer
	_ = run([]string{"coverage", "-allow-missing"}, &out, &errb)
	s := out.String()
	for _, want := range []string{
		"cuVS 26.06 (v26.06.00)", "cuVS 26.08 (v26.08.01)",
		"cuvsGetLastErrorText", "generated/ (cuvsgo_error_text)",
		"cagra.Build", "26.06: wrapped ", "26.08: wrapped ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// A function the safe layer refuses by design is reported as refused, with
// its reason, not as pending or missing.
func TestCoverageRefused(t *testing.T) {
	rc := releaseCoverage{name: "26.08", funcs: []funcCoverage{
		{cName: "cuvsMultiGpuCagraExtend", multiGPU: true},
		{cName: "cuvsMultiGpuIvfFlatExtend", multiGPU: true, apis: []string{"(*multigpu.IVFFlatIndex).Extend"}},
	}}
	if got, want := rc.summary(), "26.08: wrapped 1 of 2 (0 pending multi-GPU, 0 not wrapped); 1 refused by the safe layer"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	if d := rc.funcs[0].describe(0); !strings.HasPrefix(d, "refused: multigpu.CagraIndex.Extend refuses it") {
		t.Errorf("describe: %q", d)
	}
	if n := (&coverageReport{releases: []releaseCoverage{rc}}).missing(); n != 0 {
		t.Errorf("missing = %d", n)
	}
}
