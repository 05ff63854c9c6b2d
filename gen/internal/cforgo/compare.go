package cforgo

import (
	"bytes"
	"fmt"
	"go/format"

	"github.com/cuvs-go/cuvs/gen/internal/model"
	"github.com/cuvs-go/cuvs/gen/internal/names"
)

// CompareTest is the name of the test file Generate adds to c-for-go's
// package: the comparison of the two generators.
const CompareTest = "zcompare_test.go"

// GeneratedPackage is the import path of the generator's own bindings, which
// the comparison test imports.
const GeneratedPackage = "github.com/cuvs-go/cuvs/generated"

// compareTest writes the test that makes c-for-go a second opinion on the
// generator: for every struct of api its size, alignment and member offsets
// as cgo lays out c-for-go's types (type G C.X), as Go lays out the
// generator's mirror struct in GeneratedPackage, and as api.json records them
// (cc/v4's layout); for every enumerator the value c-for-go computed, the
// generator's constant and api.json's. All three must agree.
//
// The test is internal to the package: cgo names a C member by its C name
// (names.CgoField), unexported in Go, and c-for-go keeps the enumerators' C
// names. declared holds the package's top-level names; an enumerator or a
// struct type that c-for-go did not declare is an error here rather than a
// test that does not compile.
func compareTest(api *model.API, declared map[string]bool) (File, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n\npackage %s\n\n", CompareBanner, "ctypes")
	fmt.Fprintf(&b, "import (\n\t\"testing\"\n\t\"unsafe\"\n\n\tgen %q\n)\n\n", GeneratedPackage)
	b.WriteString(`// TestLayoutAgrees checks that cgo's layout of c-for-go's types, Go's layout
// of the generator's structs and the layout api.json records are the same:
// size and alignment of every struct, offset of every member.
func TestLayoutAgrees(t *testing.T) {
	for _, r := range []struct {
		what        string
		cforgo, gen uintptr
		api         int64
	}{
`)
	for _, s := range api.Structs {
		g := names.Go(s.Name())
		if !declared[g] {
			return File{}, fmt.Errorf("c-for-go's package has no type %s for %s", g, s.CName())
		}
		fmt.Fprintf(&b, "\t\t{%q, unsafe.Sizeof(%s{}), unsafe.Sizeof(gen.%s{}), %d},\n", "size of "+s.CName(), g, g, s.Size)
		fmt.Fprintf(&b, "\t\t{%q, unsafe.Alignof(%s{}), unsafe.Alignof(gen.%s{}), %d},\n", "align of "+s.CName(), g, g, s.Align)
		for _, f := range s.Fields {
			fmt.Fprintf(&b, "\t\t{%q, unsafe.Offsetof(%s{}.%s), unsafe.Offsetof(gen.%s{}.%s), %d},\n",
				s.CName()+"."+f.Name, g, names.CgoField(f.Name), g, names.Field(f.Name), f.Offset)
		}
	}
	b.WriteString(`	} {
		if int64(r.cforgo) != r.api || int64(r.gen) != r.api {
			t.Errorf("%s: c-for-go (cgo) %d, gen %d, api.json %d", r.what, r.cforgo, r.gen, r.api)
		}
	}
}

// TestEnumsAgree checks that the value c-for-go computed for every enumerator
// equals the generator's constant and api.json's value.
func TestEnumsAgree(t *testing.T) {
	for _, r := range []struct {
		what             string
		cforgo, gen, api int64
	}{
`)
	for _, e := range api.Enums {
		for _, v := range e.Values {
			if !declared[v.Name] {
				return File{}, fmt.Errorf("c-for-go's package has no constant %s (an enumerator of %s)", v.Name, e.CName())
			}
			fmt.Fprintf(&b, "\t\t{%q, int64(%s), int64(gen.%s), %d},\n", e.CName()+"."+v.Name, v.Name, names.EnumConst(e.Name(), v.Name), v.Value)
		}
	}
	b.WriteString(`	} {
		if r.cforgo != r.api || r.gen != r.api {
			t.Errorf("%s: c-for-go %d, gen %d, api.json %d", r.what, r.cforgo, r.gen, r.api)
		}
	}
}
`)
	src, err := format.Source(b.Bytes())
	if err != nil {
		return File{}, fmt.Errorf("%s does not format: %v", CompareTest, err)
	}
	return File{Name: CompareTest, Data: src}, nil
}
