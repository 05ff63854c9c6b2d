// Package names holds the generator's naming rules: how a C name becomes a
// Go name. Both Go packages the generator writes use them, the bindings
// (gen/internal/emit) and c-for-go's types package (gen/internal/cforgo,
// whose manifest cuvs.yml spells the same type rule as `transform: export`),
// so that the two agree on every type name by construction.
package names

import (
	"go/token"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Go exports a C identifier: its first letter upper-cased
// (cuvsCagraIndex_t becomes CuvsCagraIndex_t, DLTensor stays DLTensor).
// Types, typedefs and functions are named this way.
func Go(c string) string {
	r, n := utf8.DecodeRuneInString(c)
	if n == 0 {
		return c
	}
	return string(unicode.ToUpper(r)) + c[n:]
}

// EnumConst is the Go name of the enumerator member of the enum whose C name
// (typedef, else tag) is enum: <Go(enum)>_<member>, because cuVS has
// unprefixed enumerators (AUTO, NONE, CPU, ...).
func EnumConst(enum, member string) string { return Go(enum) + "_" + member }

// Field turns a C member name (snake_case) into an exported Go field name:
// n_lists becomes NLists.
func Field(c string) string {
	var b strings.Builder
	up := true
	for _, r := range c {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "X"
	}
	return b.String()
}

// CgoField is how Go code names the member c of a C struct through cgo: its
// C name, with an underscore in front when it is a Go keyword (type becomes
// _type), as cmd/cgo does. (cgo adds further underscores when the struct
// also has a member of that name, e.g. both type and _type: no header has
// one, and the comparison test would then not compile.)
func CgoField(c string) string {
	if token.Lookup(c).IsKeyword() {
		return "_" + c
	}
	return c
}
