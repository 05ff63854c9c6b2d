package emit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/gen/internal/model"
)

// twoReleases builds two small APIs where an enum's member changes value
// between releases (which makes a variant of the enum, its enumerators
// suffixed, and of everything naming it) and another enum only gains one.
func twoReleases(t *testing.T) *model.API {
	t.Helper()
	mk := func(version string, exact int64, extra bool) *model.API {
		algo := &model.Enum{Tag: "algo_e", Header: "a.h", Order: 0, Values: []model.EnumValue{{Name: "AUTO", Value: 0}, {Name: "EXACT", Value: exact}}}
		kind := &model.Enum{Typedef: "kind_t", Header: "a.h", Order: 1, Values: []model.EnumValue{{Name: "K_A", Value: 0}}}
		if extra {
			kind.Values = append(kind.Values, model.EnumValue{Name: "K_B", Value: 1})
		}
		st := &model.Struct{Tag: "params", Header: "a.h", Order: 2, Size: 8, Align: 4, Fields: []model.Field{
			{Name: "algo", Type: &model.Type{Kind: model.KEnum, Name: "algo_e"}, Offset: 0},
			{Name: "kind", Type: &model.Type{Kind: model.KTypedef, Name: "kind_t"}, Offset: 4},
		}}
		td := &model.Typedef{Name: "params_t", Header: "a.h", Order: 3, Type: &model.Type{Kind: model.KPointer, Elem: &model.Type{Kind: model.KStruct, Name: "params"}}}
		void := &model.Type{Kind: model.KVoid}
		return &model.API{Format: model.FormatVersion, CuvsVersion: version, DLPackVersion: "0.8", Headers: []string{"a.h"},
			Enums: []*model.Enum{algo, kind}, Structs: []*model.Struct{st}, Typedefs: []*model.Typedef{td},
			Functions: []*model.Function{
				{Name: "set", Header: "a.h", Result: void, Params: []*model.Param{{Name: "p", Type: &model.Type{Kind: model.KTypedef, Name: "params_t"}}}},
				{Name: "pick", Header: "a.h", Result: void, Params: []*model.Param{{Name: "k", Type: &model.Type{Kind: model.KTypedef, Name: "kind_t"}}}},
			}}
	}
	m, err := model.Merge([]*model.API{mk("v3.00.0", 2, false), mk("v3.01.0", 3, true)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMergeEnumVariants(t *testing.T) {
	m := twoReleases(t)
	ix := model.NewIndex(m)
	a0, a1 := ix.Enums["enum algo_e"], ix.Enums["enum algo_e_v301"]
	if a0 == nil || a1 == nil || a1.Values[1] != (model.EnumValue{Name: "EXACT_v301", Value: 3}) || a0.Values[1].Value != 2 {
		t.Fatalf("algo: %+v, %+v", a0, a1)
	}
	if k := ix.Enums["kind_t"]; k == nil || len(k.Values) != 2 || ix.Enums["kind_t_v301"] != nil {
		t.Errorf("kind_t should be one enum with both values: %+v", k)
	}
	if ix.Structs["struct params_v301"] == nil || ix.Typedefs["params_t_v301"] == nil {
		t.Error("the struct naming the changed enum has no variant")
	}
	var names []string
	for _, f := range m.Functions {
		names = append(names, f.Name+"="+f.SymbolOf()+":"+strings.Join(f.Releases, ","))
	}
	if got, want := strings.Join(names, " "), "set=set:3.00 set_v301=set:3.01 pick=pick:3.00,3.01"; got != want {
		t.Errorf("functions %s, want %s", got, want)
	}
	files, err := Files(m)
	if err != nil {
		t.Fatal(err)
	}
	types := string(files[TypesGo])
	for _, want := range []string{"Algo_e_EXACT Algo_e = 2", "Algo_e_v301_EXACT_v301 Algo_e_v301 = 3", "Kind_t_K_B Kind_t = 1"} {
		if !strings.Contains(types, want) {
			t.Errorf("ztypes.go lacks %q", want)
		}
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	for n, b := range files {
		os.WriteFile(filepath.Join(dir, n), b, 0o644)
	}
	// Both releases side by side, and each release's mode alone.
	for _, src := range []string{
		`#include "cuvs_decls.h"` + "\n_Static_assert(EXACT == 2 && EXACT_v301 == 3, \"both\");\n",
		"#define CUVSGO_RELEASE 300\n" + `#include "cuvs_decls.h"` + "\n_Static_assert(EXACT == 2, \"3.0\");\nvoid set(params_t p) { p->algo = EXACT; }\n",
		"#define CUVSGO_RELEASE 301\n" + `#include "cuvs_decls.h"` + "\n_Static_assert(EXACT == 3, \"3.1\");\nvoid set(params_t p) { p->algo = EXACT; p->kind = K_B; }\n",
	} {
		c := filepath.Join(dir, "x.c")
		os.WriteFile(c, []byte(src), 0o644)
		if b, err := exec.Command("gcc", "-std=c11", "-Wall", "-Werror", "-fsyntax-only", "-I", dir, c).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", src, err, b)
		}
	}
	if b, err := exec.Command("gcc", "-std=c11", "-c", "-o", filepath.Join(dir, "s.o"), "-I", dir, filepath.Join(dir, ShimsC)).CombinedOutput(); err != nil {
		t.Errorf("shims: %v\n%s", err, b)
	}
}
