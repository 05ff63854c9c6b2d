package emit

import (
	"fmt"

	"github.com/cuvs-go/cuvs/gen/internal/model"
)

var goKeywords = map[string]bool{
	"break": true, "case": true, "chan": true, "const": true, "continue": true, "default": true,
	"defer": true, "else": true, "fallthrough": true, "for": true, "func": true, "go": true,
	"goto": true, "if": true, "import": true, "interface": true, "map": true, "package": true,
	"range": true, "return": true, "select": true, "struct": true, "switch": true, "type": true,
	"var": true, "unsafe": true, "error": true, "string": true, "len": true, "cap": true, "C": true, "st": true, "r": true, "err": true,
}

// ParamName is a Go parameter name for a C one.
func ParamName(c string) string {
	if goKeywords[c] {
		return c + "_"
	}
	return c
}

// goScalar describes a Go scalar type mirroring a C builtin on LP64.
type goScalar struct {
	Go    string // Go type
	CShim string // fixed-width C spelling used in shim signatures
	Size  int64
}

var scalars = map[string]goScalar{
	"int8_t": {"int8", "int8_t", 1}, "int16_t": {"int16", "int16_t", 2},
	"int32_t": {"int32", "int32_t", 4}, "int64_t": {"int64", "int64_t", 8},
	"uint8_t": {"uint8", "uint8_t", 1}, "uint16_t": {"uint16", "uint16_t", 2},
	"uint32_t": {"uint32", "uint32_t", 4}, "uint64_t": {"uint64", "uint64_t", 8},
	"uintptr_t": {"uintptr", "uintptr_t", 8}, "intptr_t": {"int", "intptr_t", 8},
	"size_t": {"uint64", "uint64_t", 8}, "ptrdiff_t": {"int64", "int64_t", 8},
	"bool": {"bool", "_Bool", 1}, "char": {"byte", "char", 1},
	"signed char": {"int8", "int8_t", 1}, "unsigned char": {"uint8", "uint8_t", 1},
	"short": {"int16", "int16_t", 2}, "unsigned short": {"uint16", "uint16_t", 2},
	"int": {"int32", "int32_t", 4}, "unsigned": {"uint32", "uint32_t", 4},
	"long": {"int64", "int64_t", 8}, "unsigned long": {"uint64", "uint64_t", 8},
	"long long": {"int64", "int64_t", 8}, "unsigned long long": {"uint64", "uint64_t", 8},
	"float": {"float32", "float", 4}, "double": {"float64", "double", 8},
}

// cgoName is how Go code names a fixed-width C type through cgo.
var cgoName = map[string]string{"_Bool": "bool"}

func scalar(t *model.Type) (goScalar, error) {
	s, ok := scalars[t.Name]
	if !ok {
		return s, fmt.Errorf("no Go mapping for the C type %q", t.Name)
	}
	return s, nil
}
