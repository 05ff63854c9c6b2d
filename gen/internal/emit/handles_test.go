package emit

import (
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/gen/internal/model"
)

// TestHandles: a typedef of a pointer to a struct is a handle, held as an
// integer with Ref (the struct's members) and the struct's Pin; a typedef
// of a pointer to an incomplete struct is an integer with neither; a
// pointer in a signature that is not a typedef stays a pointer. The shims
// take handles as uintptr_t and cast them back to the C type.
func TestHandles(t *testing.T) {
	void := &model.Type{Kind: model.KVoid}
	ptrTo := func(k, name string) *model.Type {
		return &model.Type{Kind: model.KPointer, Elem: &model.Type{Kind: k, Name: name}}
	}
	td := func(name string) *model.Type { return &model.Type{Kind: model.KTypedef, Name: name} }
	st := &model.Struct{Tag: "thing", Header: "a.h", Order: 0, Size: 8, Align: 8, Fields: []model.Field{
		{Name: "n", Type: &model.Type{Kind: model.KBuiltin, Name: "int64_t"}, Offset: 0},
	}}
	a := &model.API{Format: model.FormatVersion, CuvsVersion: "v3.00.0", DLPackVersion: "0.8", Headers: []string{"a.h"},
		Structs: []*model.Struct{st},
		Typedefs: []*model.Typedef{
			{Name: "thing_t", Header: "a.h", Order: 1, Type: ptrTo(model.KStruct, "thing")},
			{Name: "opaque_t", Header: "a.h", Order: 2, Type: ptrTo(model.KStruct, "hidden")},
		},
		Functions: []*model.Function{
			{Name: "thingCreate", Header: "a.h", Result: void, Params: []*model.Param{{Name: "t", Type: &model.Type{Kind: model.KPointer, Elem: td("thing_t")}}}},
			{Name: "thingDestroy", Header: "a.h", Result: void, Params: []*model.Param{{Name: "t", Type: td("thing_t")}}},
			{Name: "use", Header: "a.h", Result: void, Params: []*model.Param{{Name: "t", Type: td("thing_t")}, {Name: "o", Type: td("opaque_t")}, {Name: "raw", Type: ptrTo(model.KStruct, "thing")}}},
		}}
	out, err := Files(a)
	if err != nil {
		t.Fatal(err)
	}
	types, funcs, shims := string(out[TypesGo]), string(out[FuncsGo]), string(out[ShimsC])
	for _, want := range []string{
		"type Thing_t uintptr",
		"made by thingCreate and freed by thingDestroy",
		"func (h Thing_t) Ref() *Thing {",
		"return (*Thing)(cAddr(uintptr(h)))",
		"func (s *Thing) Pin(p *runtime.Pinner) Thing_t {",
		"type Opaque_t uintptr",
		"func cAddr(a uintptr) unsafe.Pointer {",
	} {
		if !strings.Contains(types, want) {
			t.Errorf("ztypes.go lacks %q", want)
		}
	}
	if strings.Contains(types, "func (h Opaque_t) Ref()") || strings.Contains(types, "= *Thing") {
		t.Error("an opaque handle got Ref, or a handle stayed a pointer type")
	}
	if !strings.Contains(funcs, "func Use(t Thing_t, o Opaque_t, raw *Thing) error") ||
		!strings.Contains(funcs, "C.uintptr_t(t), C.uintptr_t(o), unsafe.Pointer(raw)") {
		t.Errorf("Use's binding:\n%s", funcs[strings.Index(funcs, "func Use("):])
	}
	if !strings.Contains(shims, "f((thing_t)a0, (opaque_t)a1, a2)") {
		t.Errorf("the shim does not cast the handles back")
	}
}
