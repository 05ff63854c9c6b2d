package cforgo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cuvs-go/cuvs/gen/internal/emit"
	"github.com/cuvs-go/cuvs/gen/internal/model"
	"github.com/cuvs-go/cuvs/gen/internal/parse"
)

const repoRoot = "../../.."

// committed returns the manifest, the committed declarations header and
// the API model it was written from. The test is skipped when there is no
// header.
func committed(t *testing.T) (manifest string, header []byte, api *model.API) {
	t.Helper()
	manifest = filepath.Join(repoRoot, "cuvs.yml")
	header, err := os.ReadFile(filepath.Join(repoRoot, "generated", emit.DeclsHeader))
	if err != nil {
		t.Skipf("no declarations header: %v", err)
	}
	ps, _ := filepath.Glob(filepath.Join(repoRoot, "generated", emit.APIDir, "v*.json"))
	var models []*model.API
	for _, p := range ps {
		a, err := model.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, a)
	}
	model.SortReleases(models)
	api, err = model.Merge(models)
	if err != nil {
		t.Fatal(err)
	}
	return manifest, header, api
}

var generatedRx = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// checkOutput checks what every generated file must satisfy.
func checkOutput(t *testing.T, files []File, forbidden ...string) {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("no files")
	}
	for _, f := range files {
		first, _, _ := strings.Cut(string(f.Data), "\n")
		if !generatedRx.MatchString(first) {
			t.Errorf("%s: first line %q is not a Code generated line", f.Name, first)
		}
		for _, s := range append(forbidden, os.TempDir(), "cforgo-", "git.io", "WARNING") {
			if s != "" && bytes.Contains(f.Data, []byte(s)) {
				t.Errorf("%s contains %q", f.Name, s)
			}
		}
		for _, day := range []string{"Mon, ", "Tue, ", "Wed, ", "Thu, ", "Fri, ", "Sat, ", "Sun, "} {
			if bytes.Contains(f.Data, []byte(day)) {
				t.Errorf("%s looks timestamped (%q)", f.Name, day)
			}
		}
	}
}

// TestDeterministic runs Run twice from the committed declarations header,
// each time from a copy in a different temporary directory, and compares the
// output byte for byte.
func TestDeterministic(t *testing.T) {
	manifest, h, api := committed(t)
	var runs [][]File
	for i := 0; i < 2; i++ {
		dir := t.TempDir()
		gen := filepath.Join(dir, "generated")
		hdr := filepath.Join(gen, emit.DeclsHeader)
		write(t, hdr, string(h))
		out := filepath.Join(gen, "internal", "ctypes")
		t0 := time.Now()
		if err := Run(context.Background(), manifest, hdr, out, api); err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d: %v", i+1, time.Since(t0))
		files := readDir(t, out)
		checkOutput(t, files, dir)
		runs = append(runs, files)
	}
	a, b := runs[0], runs[1]
	if len(a) != len(b) {
		t.Fatalf("runs made %d and %d files", len(a), len(b))
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Data, b[i].Data) {
			t.Errorf("%s differs between two runs", a[i].Name)
		}
	}
}

func readDir(t *testing.T, dir string) []File {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []File
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, File{e.Name(), b})
	}
	return files
}

// TestFixture runs both generators on the generator's fixture headers, which
// hold the shapes c-for-go v1.3.0 mishandles (a tagged struct reached only
// through a pointer typedef, an anonymous struct with a pointer typedef, a
// tagged enum without typedef and with unprefixed enumerators), in a scratch
// copy of the module. It checks the repairs and that Run is idempotent, then
// vets the packages and runs the comparison test: it must pass, and fail,
// naming the member and the enumerator, once the model disagrees with both
// generators on one offset and one value.
func TestFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two cgo packages")
	}
	fixture := filepath.Join(repoRoot, "gen", "testdata", "fixture", "include")
	api, err := parse.Headers(parse.Options{CuvsInclude: fixture, DLPackInclude: fixture, CuvsVersion: "v0.0.0-fixture", HNSW: true, MultiGPU: true})
	if err != nil {
		t.Fatal(err)
	}
	files, err := emit.Files(api)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module github.com/cuvs-go/cuvs\n\ngo 1.24\n")
	gen := filepath.Join(dir, "generated")
	for n, b := range files {
		write(t, filepath.Join(gen, n), string(b))
	}
	out := filepath.Join(gen, "internal", "ctypes")
	write(t, filepath.Join(out, "stale.go"), "package ctypes\n")
	hdr := filepath.Join(gen, emit.DeclsHeader)
	manifest := filepath.Join(repoRoot, "cuvs.yml")
	if err := Run(context.Background(), manifest, hdr, out, api); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "stale.go")); err == nil {
		t.Error("Run left a stale file in the output directory")
	}
	before := snapshot(t, out)
	if err := Run(context.Background(), manifest, hdr, out, api); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, out); after != before {
		t.Error("a second Run changed the output directory")
	}
	got := readDir(t, out)
	checkOutput(t, got, dir)
	var src strings.Builder
	for _, f := range got {
		src.Write(f.Data)
	}
	for _, want := range []string{
		"type CuvsTreeParams_t C.cuvsTreeParams_t", // pointer kept
		"type CuvsTreeCompression_t C.cuvsTreeCompression_t",
		"type CuvsTreeIndex_t C.cuvsTreeIndex_t",
		"type CuvsTreeParams C.struct_cuvsTreeParams", // added
		"type CuvsTreeCompression C.struct_cuvsTreeCompression",
		"AUTO", // enumerators keep their C names
		"unsafe.Offsetof(CuvsTreeParams{}.level_bias), unsafe.Offsetof(gen.CuvsTreeParams{}.LevelBias)",
		"unsafe.Offsetof(CuvsFilter{}._type), unsafe.Offsetof(gen.CuvsFilter{}.Type)", // a Go keyword
		"int64(GREEDY), int64(gen.CuvsTreeAlgo_GREEDY), 1}",
	} {
		if !strings.Contains(src.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(src.String(), "CuvsTreeParamsCreate") {
		t.Error("functions must be ignored")
	}

	goCmd(t, dir, "vet", "./...")
	goCmd(t, dir, "test", "-count=1", "./generated/internal/ctypes")

	// The comparison can fail: api.json disagreeing on one offset and one
	// value must be reported, naming both.
	var s *model.Struct
	for _, x := range api.Structs {
		if x.Tag == "cuvsTreeParams" {
			s = x
		}
	}
	if s == nil {
		t.Fatal("no struct cuvsTreeParams in the fixture")
	}
	s.Fields[len(s.Fields)-1].Offset++
	api.Enums[0].Values[0].Value += 7
	regen, err := Generate(context.Background(), manifest, hdr, api)
	if err != nil {
		t.Fatal(err)
	}
	var bad File
	for _, f := range regen {
		if f.Name == CompareTest {
			bad = f
		}
	}
	write(t, filepath.Join(out, CompareTest), string(bad.Data))
	msg := goCmdFails(t, dir, "test", "-count=1", "./generated/internal/ctypes")
	for _, want := range []string{
		"struct cuvsTreeParams." + s.Fields[len(s.Fields)-1].Name + ": c-for-go (cgo) ",
		api.Enums[0].CName() + "." + api.Enums[0].Values[0].Name + ": c-for-go ",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failing comparison does not report %q:\n%s", want, msg)
		}
	}
}

func goCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

func goCmdFails(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	b, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("go %s passed, want a failure:\n%s", strings.Join(args, " "), b)
	}
	return string(b)
}

// TestCompareTestNeedsEveryName: an enumerator or struct c-for-go did not
// declare is a generation error, not a test that does not compile.
func TestCompareTestNeedsEveryName(t *testing.T) {
	api := &model.API{
		Enums:   []*model.Enum{{Tag: "cuvsAlgo", Values: []model.EnumValue{{Name: "AUTO", Value: 0}}}},
		Structs: []*model.Struct{{Tag: "cuvsParams", Size: 4, Align: 4, Fields: []model.Field{{Name: "type", Offset: 0}}}},
	}
	if _, err := compareTest(api, map[string]bool{"AUTO": true}); err == nil || !strings.Contains(err.Error(), "CuvsParams") {
		t.Errorf("missing struct type: got %v", err)
	}
	if _, err := compareTest(api, map[string]bool{"CuvsParams": true}); err == nil || !strings.Contains(err.Error(), "AUTO") {
		t.Errorf("missing enumerator: got %v", err)
	}
	f, err := compareTest(api, map[string]bool{"AUTO": true, "CuvsParams": true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CuvsParams{}._type), unsafe.Offsetof(gen.CuvsParams{}.Type)", "int64(AUTO), int64(gen.CuvsAlgo_AUTO)"} {
		if !bytes.Contains(f.Data, []byte(want)) {
			t.Errorf("lacks %q:\n%s", want, f.Data)
		}
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %v\n", e.Name(), fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

func TestStageHeaderRejectsIncludes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "h.h")
	write(t, src, "#include <stdint.h>\n#include <dlpack/dlpack.h>\n")
	err := stageHeader(src, filepath.Join(dir, "out.h"))
	if err == nil || !strings.Contains(err.Error(), "h.h:2") {
		t.Fatalf("got %v, want an error naming h.h:2", err)
	}
}

func TestRebanner(t *testing.T) {
	in := "// WARNING: This file has automatically been generated \n// Code generated by https://git.io/c-for-go. DO NOT EDIT.\n\npackage x  \n"
	want := Banner + "\n\npackage x\n"
	if got := string(rebanner([]byte(in))); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
