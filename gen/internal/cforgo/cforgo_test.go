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

	"modernc.org/cc/v4"
)

const repoRoot = "../../.."

// inputs returns the manifest and the declarations header to test with:
// $CFORGO_TEST_HEADER, else the committed generated/cuvs_decls.h. The test
// is skipped when there is no header.
func inputs(t *testing.T) (manifest, header string) {
	t.Helper()
	manifest = filepath.Join(repoRoot, "cuvs.yml")
	header = os.Getenv("CFORGO_TEST_HEADER")
	if header == "" {
		header = filepath.Join(repoRoot, "generated", "cuvs_decls.h")
	}
	if _, err := os.Stat(header); err != nil {
		t.Skipf("no declarations header: %v", err)
	}
	return manifest, header
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

// TestDeterministic runs Run twice from the real declarations header, each
// time from a copy in a different temporary directory, and compares the
// output byte for byte.
func TestDeterministic(t *testing.T) {
	manifest, header := inputs(t)
	h, err := os.ReadFile(header)
	if err != nil {
		t.Fatal(err)
	}
	var runs [][]File
	for i := 0; i < 2; i++ {
		dir := t.TempDir()
		gen := filepath.Join(dir, "generated")
		if err := os.MkdirAll(gen, 0o755); err != nil {
			t.Fatal(err)
		}
		hdr := filepath.Join(gen, "cuvs_decls.h")
		write(t, hdr, string(h))
		out := filepath.Join(gen, "ctypes")
		t0 := time.Now()
		if err := Run(context.Background(), manifest, hdr, out); err != nil {
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

// TestBuildsAndMatchesC generates from the real header into a scratch module,
// adds a cgo file that compares every enum constant and every type's size
// with the C compiler's, and builds, vets and tests it (with cgocheck2).
func TestBuildsAndMatchesC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a cgo package")
	}
	manifest, header := inputs(t)
	h, err := os.ReadFile(header)
	if err != nil {
		t.Fatal(err)
	}
	buildAndCheck(t, manifest, h)
}

// A small header with each shape c-for-go v1.3.0 mishandles.
const shapesHeader = `#ifndef SHAPES_H
#define SHAPES_H
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
typedef struct CUstream_st* cudaStream_t;
typedef int cudaDataType_t;
typedef enum { kDLCPU = 1, kDLCUDA = 2 } DLDeviceType;
typedef enum { kDLInt = 0U, kDLUInt = 1U } DLDataTypeCode;
typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;
typedef struct DLManagedTensor {
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;
typedef uintptr_t cuvsResources_t;
typedef enum { CUVS_ERROR = 0, CUVS_SUCCESS = 1 } cuvsError_t;
enum cuvsCagraSearchAlgo { SINGLE_CTA = 0, MULTI_CTA = 1, AUTO = 100 };
enum cuvsHnswHierarchy { NONE = 0, CPU, GPU };
typedef enum cuvsTagged { TAGGED_A = -1, TAGGED_B } cuvsTagged_t;
struct cuvsCagraSearchParams {
  size_t max_queries;
  enum cuvsCagraSearchAlgo algo;
  bool persistent;
};
typedef struct cuvsCagraSearchParams* cuvsCagraSearchParams_t;
typedef struct { uintptr_t addr; DLDataTypeCode dtype; } cuvsCagraIndex;
typedef cuvsCagraIndex* cuvsCagraIndex_t;
cuvsError_t cuvsCagraSearchParamsCreate(cuvsCagraSearchParams_t* params);
#endif
`

// TestShapes runs on a small header of our own, so it needs no generated
// header.
func TestShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a cgo package")
	}
	out := buildAndCheck(t, filepath.Join(repoRoot, "cuvs.yml"), []byte(shapesHeader))
	src := string(out)
	for _, want := range []string{
		"type CuvsCagraSearchParams_t C.cuvsCagraSearchParams_t", // pointer kept
		"type CuvsCagraIndex_t C.cuvsCagraIndex_t",
		"type CuvsCagraSearchParams C.struct_cuvsCagraSearchParams", // added
		"type CuvsCagraSearchAlgo int32",                            // tagged enum typed
		"CuvsCagraSearchAlgo_AUTO CuvsCagraSearchAlgo = 100",
		"CuvsHnswHierarchy_GPU CuvsHnswHierarchy = 2",
		"CuvsTagged_t_TAGGED_A CuvsTagged_t = -1",
		"DLDataTypeCode_kDLUInt DLDataTypeCode = 1",
		"func (x *DLDevice) PassRef() *C.DLDevice",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(src, "CuvsCagraSearchParamsCreate") {
		t.Error("functions must be ignored")
	}
}

// buildAndCheck writes header into a scratch module as
// generated/cuvs_decls.h, runs Run into generated/ctypes (twice: the second
// must leave the directory alone), then builds, vets and tests the package
// with a cgo file comparing it with C. It returns the concatenated .go files.
func buildAndCheck(t *testing.T, manifest string, header []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	gen := filepath.Join(dir, "generated")
	out := filepath.Join(gen, "ctypes")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	hdr := filepath.Join(gen, "cuvs_decls.h")
	write(t, hdr, string(header))
	write(t, filepath.Join(dir, "go.mod"), "module cforgotest\n\ngo 1.24\n")
	write(t, filepath.Join(out, "stale.go"), "package ctypes\n")

	t0 := time.Now()
	if err := Run(context.Background(), manifest, hdr, out); err != nil {
		t.Fatal(err)
	}
	t.Logf("Run took %v", time.Since(t0))
	if _, err := os.Stat(filepath.Join(out, "stale.go")); err == nil {
		t.Error("Run left a stale file in the output directory")
	}
	before := snapshot(t, out)
	if err := Run(context.Background(), manifest, hdr, out); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, out); after != before {
		t.Error("a second Run changed the output directory")
	}

	var all bytes.Buffer
	files := readDir(t, out)
	for _, f := range files {
		if strings.HasSuffix(f.Name, ".go") {
			all.Write(f.Data)
		}
	}
	checkOutput(t, files, dir)

	// A cgo file (test files cannot use cgo) comparing with the C compiler.
	hd, err := scanHeader(hdr, "cuvs_decls.h")
	if err != nil {
		t.Fatal(err)
	}
	var chk bytes.Buffer
	chk.WriteString("package ctypes\n\n/*\n#include \"../cuvs_decls.h\"\n*/\nimport \"C\"\n\nimport (\n\t\"fmt\"\n\t\"unsafe\"\n)\n\nvar _ unsafe.Pointer\n\nfunc mismatches() (r []string) {\n")
	for _, e := range hd.enums {
		for _, m := range e.Members {
			fmt.Fprintf(&chk, "\tif int64(%s) != int64(C.%s) { r = append(r, \"%s\") }\n", EnumConst(e.Name(), m.Name), m.Name, m.Name)
		}
		fmt.Fprintf(&chk, "\tif unsafe.Sizeof(%s(0)) != unsafe.Sizeof(C.%s(0)) { r = append(r, \"size of %s\") }\n", GoName(e.Name()), cEnumType(e), e.Name())
	}
	for _, td := range hd.typedefs {
		if td.Kind == cc.Function {
			continue
		}
		fmt.Fprintf(&chk, "\t{ var g %s; var c C.%s; if unsafe.Sizeof(g) != unsafe.Sizeof(c) || unsafe.Alignof(g) != unsafe.Alignof(c) { r = append(r, fmt.Sprint(\"layout of %s \", unsafe.Sizeof(g), unsafe.Sizeof(c))) } }\n", GoName(td.Name), td.Name, td.Name)
	}
	for _, r := range hd.records {
		if !r.Complete {
			continue
		}
		kw := "struct_"
		if r.Union {
			kw = "union_"
		}
		fmt.Fprintf(&chk, "\t{ var g %s; var c C.%s%s; if unsafe.Sizeof(g) != unsafe.Sizeof(c) { r = append(r, \"size of %s\") } }\n", GoName(r.Tag), kw, r.Tag, r.Tag)
	}
	chk.WriteString("\treturn r\n}\n")
	write(t, filepath.Join(out, "zz_check.go"), chk.String())
	write(t, filepath.Join(out, "zz_check_test.go"), `package ctypes

import (
	"testing"
	"unsafe"
)

func TestMatchesC(t *testing.T) {
	for _, m := range mismatches() {
		t.Error(m)
	}
}

func TestHelpers(t *testing.T) {
	d := NewDLDevice()
	defer d.Free()
	if unsafe.Pointer(d.Ref()) != unsafe.Pointer(d) || unsafe.Pointer(d.PassRef()) != unsafe.Pointer(d) {
		t.Error("Ref/PassRef")
	}
	var nilDev *DLDevice
	if nilDev.Ref() != nil {
		t.Error("nil Ref")
	}
	p := nilDev.PassRef() // allocates
	(*DLDevice)(unsafe.Pointer(p)).Free()
}
`)
	for _, args := range [][]string{
		{"build", "./..."},
		{"vet", "./..."},
		{"test", "-count=1", "./..."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if args[0] == "test" {
			cmd.Env = append(cmd.Env, "GOEXPERIMENT=cgocheck2")
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	return all.Bytes()
}

// cEnumType is how cgo spells the enum's type.
func cEnumType(e *cEnum) string {
	if e.Typedef != "" {
		return e.Typedef
	}
	return "enum_" + e.Tag
}

func write(t *testing.T, path, s string) {
	t.Helper()
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
