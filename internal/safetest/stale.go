package safetest

import (
	"reflect"
	"strings"
	"testing"
)

const generatedPkg = "github.com/cuvs-go/cuvs/generated"

// walk calls visit on every value reached from x (to depth 8): struct
// fields, array and slice elements (the first 64), interface contents and
// pointees, without following a pointer into [lo, hi), the memory freed,
// which must not be read. It reads unexported fields too: what the
// garbage collector scans is every field.
func walk(x any, lo, hi uintptr, visit func(v reflect.Value)) {
	seen := map[uintptr]bool{}
	in := func(p uintptr) bool { return p >= lo && p < hi }
	var rec func(v reflect.Value, depth int)
	rec = func(v reflect.Value, depth int) {
		if depth > 8 || !v.IsValid() {
			return
		}
		visit(v)
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			p := v.Pointer()
			if in(p) || seen[p] || isHandlePointer(v.Type()) {
				return // a handle's struct is C memory: not the GC's, and maybe freed
			}
			seen[p] = true
			rec(v.Elem(), depth+1)
		case reflect.Slice:
			if v.IsNil() || in(v.Pointer()) {
				return
			}
			for i := 0; i < v.Len() && i < 64; i++ {
				rec(v.Index(i), depth+1)
			}
		case reflect.Interface:
			if !v.IsNil() {
				rec(v.Elem(), depth+1)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				rec(v.Field(i), depth)
			}
		case reflect.Array:
			for i := range v.Len() {
				rec(v.Index(i), depth)
			}
		}
	}
	rec(reflect.ValueOf(x), 0)
}

// PointerWords returns the pointer words the garbage collector would scan
// in x and in the Go values it reaches (to depth 8), without following any
// pointer into [lo, hi): the memory freed.
func PointerWords(x any, lo, hi uintptr) []uintptr {
	var out []uintptr
	walk(x, lo, hi, func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.UnsafePointer, reflect.Map, reflect.Chan, reflect.Func:
			out = append(out, v.Pointer())
		case reflect.Slice:
			if !v.IsNil() {
				out = append(out, v.Pointer())
			}
		}
	})
	return out
}

// isHandlePointer reports whether t is a pointer to a struct of package
// generated other than a DLPack one: the Go form the generator gave the
// cuVS handles (cuvsCagraIndex_t, cuvsCagraIndexParams_t, ...) before they
// became integers.
func isHandlePointer(t reflect.Type) bool {
	if t.Kind() != reflect.Pointer {
		return false
	}
	e := t.Elem()
	return e.Kind() == reflect.Struct && e.PkgPath() == generatedPkg && strings.HasPrefix(e.Name(), "Cuvs")
}

// isHandle reports whether t is the Go form of a cuVS handle: a type of
// package generated named like a C handle typedef (Cuvs..._t, or a
// release's variant Cuvs..._t_v2608) held as an integer, or a pointer to
// one of its structs.
func isHandle(t reflect.Type) bool {
	if isHandlePointer(t) {
		return true
	}
	if t.PkgPath() != generatedPkg || t.Kind() != reflect.Uintptr || !strings.HasPrefix(t.Name(), "Cuvs") {
		return false
	}
	n := t.Name()
	if i := strings.LastIndex(n, "_t_v"); i > 0 {
		n = n[:i+2]
	}
	return strings.HasSuffix(n, "_t") && n != "CuvsResources_t"
}

// HandleWords returns the C addresses of the cuVS handles x holds, in any
// field reached from it: what x's Close or release frees.
func HandleWords(x any) []uintptr {
	var out []uintptr
	walk(x, 0, 0, func(v reflect.Value) {
		if !isHandle(v.Type()) {
			return
		}
		var a uintptr
		if v.Kind() == reflect.Pointer {
			a = v.Pointer()
		} else {
			a = uintptr(v.Uint())
		}
		if a != 0 {
			out = append(out, a)
		}
	})
	return out
}

// CheckNoStale fails t if x keeps, in a field the garbage collector scans,
// an address in [lo, hi) (memory already freed).
func CheckNoStale(t testing.TB, what string, x any, lo, hi uintptr) {
	t.Helper()
	for _, p := range PointerWords(x, lo, hi) {
		if p >= lo && p < hi {
			t.Errorf("%s keeps %#x, in the freed memory [%#x, %#x), in a pointer field: the GC scans it, and once Go's heap has grown over the freed range it is a bad pointer", what, p, lo, hi)
			return
		}
	}
}

// CheckNoHandleKept fails t if x keeps one of handles (C addresses that
// x's Close freed; HandleWords before it) in a field the garbage
// collector scans.
func CheckNoHandleKept(t testing.TB, what string, x any, handles []uintptr) {
	t.Helper()
	freed := map[uintptr]bool{}
	for _, h := range handles {
		freed[h] = true
	}
	for _, p := range PointerWords(x, 0, 0) {
		if freed[p] {
			t.Errorf("%s keeps the freed cuVS handle %#x in a pointer field after Close: the GC scans it, and once Go's heap has grown over that C memory it is a bad pointer", what, p)
			return
		}
	}
}
