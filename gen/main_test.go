package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/gen/internal/emit"
	"github.com/cuvs-go/cuvs/gen/internal/model"
	"github.com/cuvs-go/cuvs/gen/internal/parse"
	"github.com/cuvs-go/cuvs/generated"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const fixture = "testdata/fixture/include"

// fixtureModel is where the fixture's model goes in the output: its
// version, v0.0.0-fixture, is release 0.0.
var fixtureModel = emit.APIFile("0.0")

// genFixture runs the generator over the fixture headers into a new folder.
func genFixture(t *testing.T, extra ...string) string {
	t.Helper()
	out := t.TempDir()
	args := append([]string{"-q", "-ctypes=false", "-out", out, "-cuvs-include", fixture, "-dlpack-include", fixture, "-cuvs-version", "v0.0.0-fixture"}, extra...)
	if err := run(args, os.Stdout, os.Stderr); err != nil {
		t.Fatal(err)
	}
	return out
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	if sub, err := os.ReadDir(filepath.Join(dir, emit.APIDir)); err == nil {
		for _, e := range sub {
			b, err := os.ReadFile(filepath.Join(dir, emit.APIDir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			m[emit.APIDir+"/"+e.Name()] = b
		}
	}
	for _, e := range ents {
		if e.IsDir() { // internal/ctypes: c-for-go's, checked by its own tests; api/: read above
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

func TestGolden(t *testing.T) {
	got := readDir(t, genFixture(t))
	golden := "testdata/golden"
	if *update {
		os.RemoveAll(golden)
		os.MkdirAll(golden, 0o755)
		for n, b := range got {
			// .golden keeps the Go tool from compiling the copies.
			os.MkdirAll(filepath.Dir(filepath.Join(golden, n)), 0o755)
			if err := os.WriteFile(filepath.Join(golden, n+".golden"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := readDir(t, golden)
	if len(want) != len(got) {
		t.Errorf("%d files generated, %d golden files", len(got), len(want))
	}
	for n, b := range got {
		if w, ok := want[n+".golden"]; !ok {
			t.Errorf("%s: no golden file", n)
		} else if !bytes.Equal(w, b) {
			t.Errorf("%s differs from its golden file (run go test ./gen -update and review the diff)", n)
		}
	}
}

func TestGeneratedFilesSayGenerated(t *testing.T) {
	for n, b := range readDir(t, genFixture(t)) {
		if strings.HasPrefix(n, emit.APIDir+"/") {
			continue
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if !strings.HasPrefix(line, "// Code generated ") || !strings.HasSuffix(line, " DO NOT EDIT.") {
			t.Errorf("%s starts with %q", n, line)
		}
		if strings.Contains(string(b), "/tmp") || strings.Contains(string(b), "testdata") {
			t.Errorf("%s mentions a local path", n)
		}
	}
}

// TestFixtureBindingsBuild compiles the fixture's bindings as a module of
// their own and runs their generated layout test.
func TestFixtureBindingsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	out := genFixture(t)
	if err := os.WriteFile(filepath.Join(out, "go.mod"), []byte("module fixture\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"vet", "."}, {"test", "-count=1", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = out
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, b)
		}
	}
}

func TestShapes(t *testing.T) {
	a, err := parse.Headers(parse.Options{CuvsInclude: fixture, DLPackInclude: fixture, HNSW: true})
	if err != nil {
		t.Fatal(err)
	}
	ix := model.NewIndex(a)
	if a.DLPackVersion != "0.8" {
		t.Errorf("DLPack version %q", a.DLPackVersion)
	}
	// Every header seen twice through #pragma once is still one declaration.
	names := map[string]int{}
	for _, f := range a.Functions {
		names[f.Name]++
	}
	for n, c := range names {
		if c != 1 {
			t.Errorf("function %s appears %d times", n, c)
		}
	}
	if len(a.Functions) != 21 {
		t.Errorf("%d functions, want 21", len(a.Functions))
	}
	mt := ix.Structs["DLManagedTensor"]
	if mt == nil || mt.Tag != "DLManagedTensor" || mt.Fields[2].Type.String() != "void (*)(struct DLManagedTensor *self)" {
		t.Errorf("DLManagedTensor: %+v", mt)
	}
	if e := ix.Enums["enum cuvsFilterType"]; e == nil || e.Typedef != "" || len(e.Values) != 3 || e.Values[2].Value != 2 {
		t.Errorf("cuvsFilterType: %+v", e)
	}
	if e := ix.Enums["cuvsError_t"]; e == nil || e.Tag != "" || e.Values[1] != (model.EnumValue{Name: "CUVS_SUCCESS", Value: 1}) {
		t.Errorf("cuvsError_t: %+v", e)
	}
	if td := ix.Typedefs["cuvsResources_t"]; td == nil || td.Type.String() != "uintptr_t" {
		t.Errorf("cuvsResources_t: %+v", td)
	}
	if td := ix.Typedefs["cuvsTreeIndex_t"]; td == nil || td.Type.String() != "cuvsTreeIndex *" {
		t.Errorf("cuvsTreeIndex_t: %+v", td)
	}
	p := ix.Structs["struct cuvsTreeParams"]
	if p == nil || p.Size != 56 || p.Fields[6].Type.String() != "const char *" || p.Fields[7].Offset != 48 {
		t.Errorf("cuvsTreeParams: %+v", p)
	}
	for _, f := range a.Functions {
		if f.Name == "cuvsGetLastErrorText" && (len(f.Params) != 0 || f.Result.String() != "const char *") {
			t.Errorf("cuvsGetLastErrorText: %s", model.Signature(f))
		}
		if f.Name == "cuvsSetLogLevel" && f.Params[0].Name != "arg0" {
			t.Errorf("unnamed parameter: %s", model.Signature(f))
		}
	}
}

func TestOptionalAlgorithms(t *testing.T) {
	has := func(dir string) bool {
		a, err := model.ReadFile(filepath.Join(dir, fixtureModel))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range a.Functions {
			if f.Name == "cuvsHnswProbe" {
				return true
			}
		}
		return false
	}
	if !has(genFixture(t)) {
		t.Error("HNSW functions missing by default")
	}
	if has(genFixture(t, "-hnsw=false")) {
		t.Error("-hnsw=false still generates HNSW functions")
	}
}

func TestDeterministicAndRoundTrip(t *testing.T) {
	a, b := readDir(t, genFixture(t)), readDir(t, genFixture(t))
	for n := range a {
		if !bytes.Equal(a[n], b[n]) {
			t.Errorf("%s differs between two runs", n)
		}
	}
	// From api.json alone, the same bytes again.
	dir := t.TempDir()
	api := filepath.Join(dir, "api.json")
	os.WriteFile(api, a[fixtureModel], 0o644)
	out := filepath.Join(dir, "out")
	if err := run([]string{"-q", "-ctypes=false", "-out", out, "-from-api", api}, os.Stdout, os.Stderr); err != nil {
		t.Fatal(err)
	}
	c := readDir(t, out)
	for n := range a {
		if !bytes.Equal(a[n], c[n]) {
			t.Errorf("%s differs when generated from api.json", n)
		}
	}
}

func TestNoHeadersUsesCommittedAPI(t *testing.T) {
	out := genFixture(t)
	t.Setenv("CUVS_INCLUDE_DIR", "")
	t.Setenv("CONDA_PREFIX", "")
	before := readDir(t, out)
	if err := run([]string{"-q", "-ctypes=false", "-out", out}, os.Stdout, os.Stderr); err != nil {
		t.Fatal(err)
	}
	after := readDir(t, out)
	for n := range before {
		if !bytes.Equal(before[n], after[n]) {
			t.Errorf("%s changed", n)
		}
	}
	if err := run([]string{"-q", "-ctypes=false", "-out", t.TempDir()}, os.Stdout, os.Stderr); err == nil || !strings.Contains(err.Error(), "CUVS_INCLUDE_DIR") {
		t.Errorf("empty output folder, no headers: got %v", err)
	}
}

func TestCheck(t *testing.T) {
	out := genFixture(t)
	args := []string{"-q", "-ctypes=false", "-check", "-out", out, "-cuvs-include", fixture, "-dlpack-include", fixture, "-cuvs-version", "v0.0.0-fixture"}
	if err := run(args, os.Stdout, os.Stderr); err != nil {
		t.Fatalf("fresh output: %v", err)
	}
	p := filepath.Join(out, emit.TypesGo)
	os.WriteFile(p, []byte("// edited\n"), 0o644)
	err := run(args, os.Stdout, os.Stderr)
	if err == nil || !strings.Contains(err.Error(), emit.TypesGo) {
		t.Fatalf("edited output: got %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "// edited\n" {
		t.Error("-check wrote a file")
	}
}

func TestUnsupportedShapesNamePosition(t *testing.T) {
	for name, want := range map[string]string{
		"union":    "c_api.h:4: unions are not supported",
		"bitfield": "c_api.h:4: cuvsFlags.on: bit-fields are not supported",
		"array":    "c_api.h:6: array types are not supported",
		"variadic": "c_api.h:4: cuvsLogf: variadic functions are not supported",
	} {
		t.Run(name, func(t *testing.T) {
			err := run([]string{"-q", "-ctypes=false", "-out", t.TempDir(), "-cuvs-include", filepath.Join("testdata", "bad", name), "-dlpack-include", fixture}, os.Stdout, os.Stderr)
			if err == nil || !strings.Contains(err.Error(), "cuvs/core/"+want) {
				t.Errorf("got %v, want an error containing %q", err, "cuvs/core/"+want)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	// A second version of the fixture: one function removed, one added, a
	// member added, a value changed.
	newer := t.TempDir()
	if err := os.CopyFS(newer, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(newer, "cuvs", "neighbors", "tree.h")
	src, _ := os.ReadFile(p)
	s := strings.NewReplacer(
		"CUVS_EXPORT cuvsError_t cuvsTreeIndexCreate(cuvsTreeIndex_t* index);\n", "CUVS_EXPORT cuvsError_t cuvsTreeIndexDestroy(cuvsTreeIndex_t index);\n",
		"  int8_t level_bias;\n", "  int8_t level_bias;\n  int64_t seed;\n",
		"EXACT = 2,", "EXACT = 3,",
	).Replace(string(src))
	os.WriteFile(p, []byte(s), 0o644)

	var b bytes.Buffer
	if err := run([]string{"diff", "-dlpack-include", fixture, fixture, newer}, &b, os.Stderr); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"2 added, 1 removed, 2 changed.",
		"- added `cuvsTreeIndexDestroy`: `cuvsError_t cuvsTreeIndexDestroy(cuvsTreeIndex_t index)`",
		"- removed `cuvsTreeIndexCreate` (was `cuvsError_t cuvsTreeIndexCreate(cuvsTreeIndex_t *index)`)",
		"- added `struct cuvsTreeParams.seed`: `int64_t seed`",
		"- changed `struct cuvsTreeParams`: `56 bytes` → `64 bytes`",
		"- changed `enum cuvsTreeAlgo.EXACT`: `2` → `3`",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	// api.json against the header tree it came from: nothing.
	b.Reset()
	api := filepath.Join(genFixture(t), fixtureModel)
	if err := run([]string{"diff", "-dlpack-include", fixture, api, fixture}, &b, os.Stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "No changes.") {
		t.Errorf("api.json vs its own headers:\n%s", b.String())
	}
}

// TestSystemDLPackLayout parses the real dlpack.h of Debian's libdlpack-dev
// and checks our generated DLPack types against the layout it gives.
func TestSystemDLPackLayout(t *testing.T) {
	const sys = "/usr/include"
	if _, err := os.Stat(filepath.Join(sys, "dlpack", "dlpack.h")); err != nil {
		if os.Getenv("CUVS_GO_REQUIRE_SYSTEM_DLPACK") != "" {
			t.Fatal("no /usr/include/dlpack/dlpack.h (apt-get install libdlpack-dev)")
		}
		t.Skip("no /usr/include/dlpack/dlpack.h (apt-get install libdlpack-dev)")
	}
	a, err := parse.Headers(parse.Options{CuvsInclude: fixture, DLPackInclude: sys})
	if err != nil {
		t.Fatal(err)
	}
	ix := model.NewIndex(a)
	type member struct {
		name   string
		goOff  uintptr
		goSize uintptr
	}
	check := func(st string, size uintptr, ms []member) {
		s := ix.Structs[st]
		if s == nil {
			t.Fatalf("system dlpack.h has no %s", st)
		}
		if s.Size != int64(size) {
			t.Errorf("%s: system size %d, generated %d", st, s.Size, size)
		}
		if len(s.Fields) != len(ms) {
			t.Fatalf("%s: system has %d members, generated %d", st, len(s.Fields), len(ms))
		}
		for i, m := range ms {
			f := s.Fields[i]
			if f.Name != m.name || f.Offset != int64(m.goOff) {
				t.Errorf("%s: system member %s at %d, generated %s at %d", st, f.Name, f.Offset, m.name, m.goOff)
			}
		}
	}
	var d generated.DLDevice
	check("DLDevice", unsafe.Sizeof(d), []member{{"device_type", unsafe.Offsetof(d.DeviceType), 0}, {"device_id", unsafe.Offsetof(d.DeviceId), 0}})
	var dt generated.DLDataType
	check("DLDataType", unsafe.Sizeof(dt), []member{{"code", unsafe.Offsetof(dt.Code), 0}, {"bits", unsafe.Offsetof(dt.Bits), 0}, {"lanes", unsafe.Offsetof(dt.Lanes), 0}})
	var tn generated.DLTensor
	check("DLTensor", unsafe.Sizeof(tn), []member{
		{"data", unsafe.Offsetof(tn.Data), 0}, {"device", unsafe.Offsetof(tn.Device), 0},
		{"ndim", unsafe.Offsetof(tn.Ndim), 0}, {"dtype", unsafe.Offsetof(tn.Dtype), 0},
		{"shape", unsafe.Offsetof(tn.Shape), 0}, {"strides", unsafe.Offsetof(tn.Strides), 0},
		{"byte_offset", unsafe.Offsetof(tn.ByteOffset), 0},
	})
	var mt generated.DLManagedTensor
	check("DLManagedTensor", unsafe.Sizeof(mt), []member{
		{"dl_tensor", unsafe.Offsetof(mt.DlTensor), 0}, {"manager_ctx", unsafe.Offsetof(mt.ManagerCtx), 0},
		{"deleter", unsafe.Offsetof(mt.Deleter), 0},
	})
	// The device and dtype codes we use must mean the same there.
	for _, e := range a.Enums {
		for _, v := range e.Values {
			switch v.Name {
			case "kDLCPU", "kDLCUDA", "kDLCUDAHost", "kDLCUDAManaged", "kDLInt", "kDLUInt", "kDLFloat":
				if int64(constValue(v.Name)) != v.Value {
					t.Errorf("%s = %d in the system header, %d generated", v.Name, v.Value, constValue(v.Name))
				}
			}
		}
	}
}

func constValue(name string) int {
	switch name {
	case "kDLCPU":
		return int(generated.DLDeviceType_kDLCPU)
	case "kDLCUDA":
		return int(generated.DLDeviceType_kDLCUDA)
	case "kDLCUDAHost":
		return int(generated.DLDeviceType_kDLCUDAHost)
	case "kDLCUDAManaged":
		return int(generated.DLDeviceType_kDLCUDAManaged)
	case "kDLInt":
		return int(generated.DLDataTypeCode_kDLInt)
	case "kDLUInt":
		return int(generated.DLDataTypeCode_kDLUInt)
	}
	return int(generated.DLDataTypeCode_kDLFloat)
}

// TestCommittedMatchesHeaders regenerates from real cuVS headers, when
// CUVS_INCLUDE_DIR lists a tree per release of the window (versions in
// CUVS_VERSION when the trees do not tell them), and compares with the
// committed output.
func TestCommittedMatchesHeaders(t *testing.T) {
	if os.Getenv("CUVS_INCLUDE_DIR") == "" {
		t.Skip("CUVS_INCLUDE_DIR not set")
	}
	out := t.TempDir()
	if err := run([]string{"-q", "-ctypes=false", "-out", out}, os.Stdout, os.Stderr); err != nil {
		t.Fatal(err)
	}
	want, got := readDir(t, "../generated"), readDir(t, out)
	for n, b := range got {
		if !bytes.Equal(want[n], b) {
			t.Errorf("%s differs from the committed generated/%s", n, n)
		}
	}
	for n := range want {
		if _, ok := got[n]; !ok {
			t.Errorf("generated/%s is not generated from these headers", n)
		}
	}
}

// BenchmarkGenerate measures the generator on the cuVS headers
// CUVS_INCLUDE_DIR points at (all of v26.06.00 for the committed bindings,
// HNSW and multi-GPU included): parse (cc/v4 to the API model), emit (the
// model to every generated file, in memory) and both, which is what
// `go run ./gen` does but for c-for-go's types package and writing files.
// DLPack's header comes from DLPACK_INCLUDE_DIR or is searched for as the
// generator does. Skipped when CUVS_INCLUDE_DIR is not set.
func BenchmarkGenerate(b *testing.B) {
	if os.Getenv("CUVS_INCLUDE_DIR") == "" {
		b.Skip("set CUVS_INCLUDE_DIR (and DLPACK_INCLUDE_DIR) to the cuVS and DLPack headers")
	}
	c := config{hnsw: true, multiGPU: true}
	opts, ok, err := c.headerOptions()
	if err != nil {
		b.Fatal(err)
	}
	if !ok {
		b.Skip("no cuVS headers in CUVS_INCLUDE_DIR")
	}
	api, err := parse.Headers(opts)
	if err != nil {
		b.Fatal(err)
	}
	funcs := float64(len(api.Functions))
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parse.Headers(opts); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(funcs, "funcs")
	})
	b.Run("emit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := emit.Files(api); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(funcs, "funcs")
	})
	b.Run("parse+emit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a, err := parse.Headers(opts)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := emit.Files(a); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(funcs, "funcs")
	})
}
