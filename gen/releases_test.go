package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/gen/internal/emit"
	"github.com/cuvs-go/cuvs/gen/internal/model"
)

// The fixture's two fake releases: 1.0 is the fixture itself; 1.2 changes
// the layout of cuvsTreeParams, the signature of cuvsTreeMerge, replaces
// cuvsTreeSerialize by cuvsTreeSerializeGraph, adds an enum and an enum
// value, and tags cuvsTreeIndex (see its tree.h).
const (
	release10 = "testdata/releases/v1.0.0/include"
	release12 = "testdata/releases/v1.2.0/include"
)

// genReleases runs the generator over both fake releases into a new folder.
func genReleases(t *testing.T) string {
	t.Helper()
	t.Setenv("CUVS_INCLUDE_DIR", "")
	t.Setenv("CUVS_VERSION", "")
	t.Setenv("CONDA_PREFIX", "")
	out := t.TempDir()
	if err := run([]string{"-q", "-ctypes=false", "-out", out, "-cuvs-include", release10, "-cuvs-include", release12, "-dlpack-include", fixture}, os.Stdout, os.Stderr); err != nil {
		t.Fatal(err)
	}
	return out
}

func mergedFixture(t *testing.T, out string) *model.API {
	t.Helper()
	var as []*model.API
	for _, r := range []string{"1.0", "1.2"} {
		a, err := model.ReadFile(filepath.Join(out, emit.APIFile(r)))
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, a)
	}
	m, err := model.Merge(as)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReleasesMerge(t *testing.T) {
	m := mergedFixture(t, genReleases(t))
	fns := map[string]*model.Function{}
	for _, f := range m.Functions {
		fns[f.Name] = f
	}
	for name, want := range map[string]struct {
		symbol   string
		releases []string
	}{
		"cuvsTreeSearch":             {"", []string{"1.0", "1.2"}}, // shared
		"cuvsTreeGetSize":            {"", []string{"1.0", "1.2"}}, // shared
		"cuvsTreeMerge":              {"", []string{"1.0"}},        // changed signature: 1.0's
		"cuvsTreeMerge_v12":          {"cuvsTreeMerge", []string{"1.2"}},
		"cuvsTreeParamsCreate":       {"", []string{"1.0"}}, // takes the params, whose layout changed
		"cuvsTreeParamsCreate_v12":   {"cuvsTreeParamsCreate", []string{"1.2"}},
		"cuvsTreeBuild_v12":          {"cuvsTreeBuild", []string{"1.2"}},
		"cuvsTreeSerialize":          {"", []string{"1.0"}}, // removed
		"cuvsTreeSerializeGraph":     {"", []string{"1.2"}}, // added: its natural name
		"cuvsTreeIndexCreate":        {"", []string{"1.0", "1.2"}},
		"cuvsGetLastErrorText":       {"", []string{"1.0", "1.2"}},
		"cuvsTreeSerializeGraph_v12": {},
		"cuvsTreeSearch_v12":         {},
	} {
		f := fns[name]
		if want.releases == nil {
			if f != nil {
				t.Errorf("%s should not exist", name)
			}
			continue
		}
		if f == nil {
			t.Errorf("%s missing", name)
			continue
		}
		if f.Symbol != want.symbol || !slices.Equal(f.Releases, want.releases) {
			t.Errorf("%s: symbol %q, releases %v; want %q, %v", name, f.Symbol, f.Releases, want.symbol, want.releases)
		}
	}
	if got := len(fns["cuvsTreeMerge_v12"].Params); got != 5 {
		t.Errorf("cuvsTreeMerge_v12 has %d parameters, want 5", got)
	}
	ix := model.NewIndex(m)
	p10, p12 := ix.Structs["struct cuvsTreeParams"], ix.Structs["struct cuvsTreeParams_v12"]
	if p10 == nil || p12 == nil || p10.Size != 56 || p12.Size != 48 {
		t.Fatalf("params: %+v, %+v", p10, p12)
	}
	if td := ix.Typedefs["cuvsTreeParams_t_v12"]; td == nil || td.Type.String() != "struct cuvsTreeParams_v12 *" {
		t.Errorf("cuvsTreeParams_t_v12: %+v", td)
	}
	// Same layout, a tag added: one struct, with both names.
	if s := ix.Structs["cuvsTreeIndex"]; s == nil || s.Tag != "cuvsTreeIndex" || ix.Structs["cuvsTreeIndex_v12"] != nil {
		t.Errorf("cuvsTreeIndex: %+v", s)
	}
	if _, ok := ix.Typedefs["cuvsTreeIndex_t_v12"]; ok {
		t.Error("an unchanged handle got a variant")
	}
	// An enum that only gains a value is one enum with every value.
	e := ix.Enums["enum cuvsTreeAlgo"]
	if e == nil || len(e.Values) != 4 || e.Values[3] != (model.EnumValue{Name: "HYBRID", Value: 3}) || ix.Enums["enum cuvsTreeAlgo_v12"] != nil {
		t.Errorf("cuvsTreeAlgo: %+v", e)
	}
	if ix.Enums["cuvsTreeLayout"] == nil {
		t.Error("the added enum is missing")
	}
	rs := m.Releases
	if len(rs) != 2 || rs[0].Name != "1.0" || rs[1].Name != "1.2" || rs[1].CuvsVersion != "v1.2.0" || rs[1].DLPackVersion != "0.8" {
		t.Fatalf("releases %+v", rs)
	}
	// What release mode of the declarations header maps, per release.
	if len(rs[0].TypeNames) != 0 || len(rs[0].FuncNames) != 0 {
		t.Errorf("the oldest release has renames: %+v", rs[0])
	}
	if !slices.Contains(rs[1].TypeNames, model.Rename{From: "cuvsTreeParams_t", To: "cuvsTreeParams_t_v12"}) ||
		!slices.Contains(rs[1].TypeNames, model.Rename{From: "cuvsTreeParams", To: "cuvsTreeParams_v12"}) ||
		!slices.Contains(rs[1].FuncNames, model.Rename{From: "cuvsTreeMerge_v12", To: "cuvsTreeMerge"}) {
		t.Errorf("1.2 renames: %+v", rs[1])
	}
}

func TestReleasesEmitted(t *testing.T) {
	out := genReleases(t)
	files := readDir(t, out)
	funcs, types, loader := string(files[emit.FuncsGo]), string(files[emit.TypesGo]), string(files[emit.LoaderGo])
	for _, want := range []string{
		"func CuvsTreeMerge(res CuvsResources_t, indices *CuvsTreeIndex_t, num_indices uint64, output CuvsTreeIndex_t) error",
		"func CuvsTreeMerge_v12(res CuvsResources_t, indices *CuvsTreeIndex_t, num_indices uint64, merged_dataset *DLManagedTensor, output CuvsTreeIndex_t) error",
		"func CuvsTreeParamsCreate_v12(params *CuvsTreeParams_t_v12) error",
		"func CuvsTreeSerialize(",
		"func CuvsTreeSerializeGraph(",
	} {
		if !strings.Contains(funcs, want) {
			t.Errorf("zfuncs.go lacks %q", want)
		}
	}
	for _, want := range []string{"type CuvsTreeParams struct", "type CuvsTreeParams_v12 struct", "type CuvsTreeParams_t_v12 uintptr", "func (h CuvsTreeParams_t_v12) Ref() *CuvsTreeParams_v12", "CuvsTreeAlgo_HYBRID CuvsTreeAlgo = 3"} {
		if !strings.Contains(types, want) {
			t.Errorf("ztypes.go lacks %q", want)
		}
	}
	if strings.Count(types, "type CuvsTreeIndex struct") != 1 || strings.Contains(funcs, "func CuvsTreeSearch_v12") {
		t.Error("a shared declaration is emitted twice")
	}
	if !strings.Contains(loader, `{"1.0", 1, 0, "v1.0.0"},`) || !strings.Contains(loader, `{"1.2", 1, 2, "v1.2.0"},`) {
		t.Error("zloader.go lacks the release table")
	}
	shims := string(files[emit.ShimsC])
	if !strings.Contains(shims, "typedef cuvsError_t (*cuvsgo_fn_cuvsTreeMerge_v12)(cuvsResources_t res, cuvsTreeIndex_t *indices, size_t num_indices, DLManagedTensor *merged_dataset, cuvsTreeIndex_t output);") {
		t.Error("zcuvs_shims.c lacks the 1.2 signature of cuvsTreeMerge")
	}
	// Both variants bind the one symbol, each for its release.
	if strings.Count(shims, "  \"cuvsTreeMerge\",\n") != 2 {
		t.Error("the symbol table does not bind cuvsTreeMerge twice")
	}
	// Every file says it is generated, and the output is deterministic.
	again := readDir(t, genReleases(t))
	for n, b := range files {
		if !bytes.Equal(b, again[n]) {
			t.Errorf("%s differs between two runs", n)
		}
	}
}

// TestReleasesFromModels regenerates the two-release tree from its models
// alone, byte for byte, and drops a release whose model is deleted.
func TestReleasesFromModels(t *testing.T) {
	out := genReleases(t)
	before := readDir(t, out)
	if err := run([]string{"-q", "-ctypes=false", "-out", out, "-check"}, os.Stdout, os.Stderr); err != nil {
		t.Fatalf("check from the models: %v", err)
	}
	// One tree given: the other release's model is kept.
	if err := run([]string{"-q", "-ctypes=false", "-out", out, "-cuvs-include", release12, "-dlpack-include", fixture, "-check"}, os.Stdout, os.Stderr); err != nil {
		t.Fatalf("check with one release's headers: %v", err)
	}
	if err := os.Remove(filepath.Join(out, emit.APIFile("1.0"))); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-q", "-ctypes=false", "-out", out}, os.Stdout, os.Stderr); err != nil {
		t.Fatal(err)
	}
	after := readDir(t, out)
	if _, ok := after[emit.APIFile("1.0")]; ok {
		t.Fatal("the dropped release came back")
	}
	// 1.2 alone: its declarations take the unsuffixed names.
	funcs := string(after[emit.FuncsGo])
	if !strings.Contains(funcs, "func CuvsTreeMerge(res CuvsResources_t, indices *CuvsTreeIndex_t, num_indices uint64, merged_dataset *DLManagedTensor, output CuvsTreeIndex_t) error") ||
		strings.Contains(funcs, "_v12") || strings.Contains(funcs, "CuvsTreeSerialize(") {
		t.Error("with 1.2 alone, its functions should have their natural names and 1.0's be gone")
	}
	if bytes.Equal(before[emit.FuncsGo], after[emit.FuncsGo]) {
		t.Error("dropping a release changed nothing")
	}
	// The model of 1.2 is untouched.
	if !bytes.Equal(before[emit.APIFile("1.2")], after[emit.APIFile("1.2")]) {
		t.Error("the kept model changed")
	}
}

func TestReleasesDiffBetweenModels(t *testing.T) {
	out := genReleases(t)
	var b bytes.Buffer
	if err := run([]string{"diff", filepath.Join(out, emit.APIFile("1.0")), filepath.Join(out, emit.APIFile("1.2"))}, &b, os.Stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## cuVS C API: v1.0.0 → v1.2.0",
		"- changed `cuvsTreeMerge`",
		"- removed `cuvsTreeSerialize`",
		"- added `cuvsTreeSerializeGraph`",
		"- changed `struct cuvsTreeParams`: `56 bytes` → `48 bytes`",
		"- `CuvsTreeParamsCreate_v12` binds `cuvsTreeParamsCreate` for 1.2",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, b.String())
		}
	}
	// A model against a header tree works too.
	b.Reset()
	if err := run([]string{"diff", "-dlpack-include", fixture, filepath.Join(out, emit.APIFile("1.2")), release12}, &b, os.Stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "No changes.") {
		t.Errorf("model vs its own headers:\n%s", b.String())
	}
}

// TestReleasesBindingsBuild compiles the two-release bindings as a module of
// their own and runs their generated layout test: both releases' C
// declarations compile side by side, and every struct of each matches.
func TestReleasesBindingsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	out := genReleases(t)
	if err := os.WriteFile(filepath.Join(out, "go.mod"), []byte("module fixture\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"vet", "."}, {"test", "-count=1", "-run", "TestLayout", "-v", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = out
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, b)
		}
		if args[0] == "test" && !strings.Contains(string(b), "--- PASS: TestLayout") {
			t.Errorf("layout test did not run:\n%s", b)
		}
	}
	lt, _ := os.ReadFile(filepath.Join(out, emit.LayoutTest))
	if !strings.Contains(string(lt), `"struct cuvsTreeParams_v12", 48`) || !strings.Contains(string(lt), `"struct cuvsTreeParams", 56`) {
		t.Error("the layout test does not cover both releases' params")
	}
}

// TestReleaseModeHeader compiles, with gcc, an implementation of each fake
// release against the two-release declarations header in its release mode
// (CUVSGO_RELEASE): each sees its own signatures and layouts under the C
// names, as a test double of that release would.
func TestReleaseModeHeader(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	out := genReleases(t)
	for code, src := range map[string]string{
		"100": `#include "cuvs_decls.h"
_Static_assert(sizeof(struct cuvsTreeParams) == 56, "1.0 layout");
cuvsError_t cuvsTreeMerge(cuvsResources_t res, cuvsTreeIndex_t* indices, size_t n, cuvsTreeIndex_t output) { return CUVS_SUCCESS; }
cuvsError_t cuvsTreeSerialize(cuvsResources_t res, const char* f, cuvsTreeIndex_t index, bool d) { return CUVS_SUCCESS; }
cuvsError_t cuvsTreeParamsCreate(cuvsTreeParams_t* p) { (*p)->compression = 0; return CUVS_SUCCESS; }
`,
		"102": `#include "cuvs_decls.h"
_Static_assert(sizeof(struct cuvsTreeParams) == 48, "1.2 layout");
cuvsError_t cuvsTreeMerge(cuvsResources_t res, cuvsTreeIndex_t* indices, size_t n, DLManagedTensor* merged, cuvsTreeIndex_t output) { return CUVS_SUCCESS; }
cuvsError_t cuvsTreeSerializeGraph(cuvsResources_t res, const char* f, cuvsTreeIndex_t index, cuvsTreeLayout l) { return l == COL_MAJOR ? CUVS_SUCCESS : CUVS_ERROR; }
cuvsError_t cuvsTreeParamsCreate(cuvsTreeParams_t* p) { (*p)->level_bias = 1; return CUVS_SUCCESS; }
`,
	} {
		c := filepath.Join(t.TempDir(), "impl.c")
		if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("gcc", "-std=c11", "-Wall", "-Werror", "-Wno-unused-parameter", "-fsyntax-only", "-DCUVSGO_RELEASE="+code, "-I", out, c)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("release %s: %v\n%s", code, err, b)
		}
	}
	// Without CUVSGO_RELEASE the 1.2 merge cannot be defined under its name:
	// the header declares 1.0's.
	c := filepath.Join(t.TempDir(), "impl.c")
	os.WriteFile(c, []byte(`#include "cuvs_decls.h"
cuvsError_t cuvsTreeMerge(cuvsResources_t res, cuvsTreeIndex_t* indices, size_t n, DLManagedTensor* merged, cuvsTreeIndex_t output) { return CUVS_SUCCESS; }
`), 0o644)
	if b, err := exec.Command("gcc", "-fsyntax-only", "-I", out, c).CombinedOutput(); err == nil {
		t.Errorf("conflicting declarations accepted:\n%s", b)
	}
}
