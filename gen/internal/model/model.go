// Package model is the generator's language-neutral description of a C API:
// the enums, structs, typedefs and functions parsed from the cuVS and DLPack
// headers, with the struct layouts the C compiler gives them. It is what
// each release's generated/api/v<release>.json stores, so the bindings can
// be regenerated without the headers, two versions can be compared (see
// Diff) and several releases served by one set of bindings (see Merge).
package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// FormatVersion changes whenever the meaning of the JSON form changes.
const FormatVersion = 1

// API is everything the generator knows about one set of headers.
type API struct {
	Format        int         `json:"format"`
	CuvsVersion   string      `json:"cuvs_version"`
	DLPackVersion string      `json:"dlpack_version"`
	Headers       []string    `json:"headers"`
	Enums         []*Enum     `json:"enums"`
	Structs       []*Struct   `json:"structs"`
	Typedefs      []*Typedef  `json:"typedefs"`
	Functions     []*Function `json:"functions"`
	// Releases is set on a merged API only (see Merge): the releases it
	// covers, oldest first.
	Releases []Release `json:"releases,omitempty"`
}

// Enum is a C enumeration. Exactly one of Tag and Typedef is its C name;
// both are set for `typedef enum T {...} U;`.
type Enum struct {
	Tag     string      `json:"tag,omitempty"`
	Typedef string      `json:"typedef,omitempty"`
	Header  string      `json:"header"`
	Order   int         `json:"order"`
	Values  []EnumValue `json:"values"`
}

// EnumValue is one enumerator.
type EnumValue struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Struct is a C struct with its layout.
type Struct struct {
	Tag     string  `json:"tag,omitempty"`
	Typedef string  `json:"typedef,omitempty"`
	Header  string  `json:"header"`
	Order   int     `json:"order"`
	Size    int64   `json:"size"`
	Align   int64   `json:"align"`
	Fields  []Field `json:"fields"`
}

// Field is one struct member.
type Field struct {
	Name   string `json:"name"`
	Type   *Type  `json:"type"`
	Offset int64  `json:"offset"`
}

// Typedef is a typedef that is not itself a struct or enum definition,
// e.g. `typedef uintptr_t cuvsResources_t;`.
type Typedef struct {
	Name   string `json:"name"`
	Type   *Type  `json:"type"`
	Header string `json:"header"`
	Order  int    `json:"order"`
}

// Function is an exported C function.
type Function struct {
	Name     string   `json:"name"`
	Header   string   `json:"header"`
	Result   *Type    `json:"result"`
	Params   []*Param `json:"params"`
	Variadic bool     `json:"variadic,omitempty"`
	// Set on a merged API only (see Merge): the releases that have this
	// function with this signature, and, when Name is a variant's
	// (cuvsCagraBuild_v2608), the library symbol it binds.
	Releases []string `json:"releases,omitempty"`
	Symbol   string   `json:"symbol,omitempty"`
}

// Param is a function or function-pointer parameter.
type Param struct {
	Name string `json:"name"`
	Type *Type  `json:"type"`
}

// Type kinds.
const (
	KVoid    = "void"    // void
	KBuiltin = "builtin" // a C scalar: Name is its spelling (int, int64_t, float, bool, ...)
	KTypedef = "typedef" // a typedef of this API: Name
	KStruct  = "struct"  // struct Name (by tag)
	KEnum    = "enum"    // enum Name (by tag)
	KPointer = "pointer" // pointer to Elem
	KFunc    = "func"    // function type (only under a pointer): Result, Params
)

// Type is a C type as written in a declaration.
type Type struct {
	Kind   string   `json:"kind"`
	Name   string   `json:"name,omitempty"`
	Const  bool     `json:"const,omitempty"`
	Elem   *Type    `json:"elem,omitempty"`
	Result *Type    `json:"result,omitempty"`
	Params []*Param `json:"params,omitempty"`
}

// Name returns the C name an enum is referred to by: its typedef if it has
// one, else "enum Tag".
func (e *Enum) Name() string {
	if e.Typedef != "" {
		return e.Typedef
	}
	return e.Tag
}

// CName is how C code spells the enum type.
func (e *Enum) CName() string {
	if e.Typedef != "" {
		return e.Typedef
	}
	return "enum " + e.Tag
}

// Name returns the struct's typedef name if it has one, else its tag.
func (s *Struct) Name() string {
	if s.Typedef != "" {
		return s.Typedef
	}
	return s.Tag
}

// CName is how C code spells the struct type.
func (s *Struct) CName() string {
	if s.Typedef != "" {
		return s.Typedef
	}
	return "struct " + s.Tag
}

// C spells the type t applied to declarator d ("" for an abstract type).
func (t *Type) C(d string) string {
	switch t.Kind {
	case KPointer:
		inner := "*"
		if t.Const {
			inner += "const "
		}
		inner += d
		if t.Elem.Kind == KFunc {
			return t.Elem.C("(" + strings.TrimSpace(inner) + ")")
		}
		return t.Elem.C(inner)
	case KFunc:
		ps := make([]string, len(t.Params))
		for i, p := range t.Params {
			ps[i] = p.Type.C(p.Name)
		}
		if len(ps) == 0 {
			ps = []string{"void"}
		}
		return t.Result.C(d + "(" + strings.Join(ps, ", ") + ")")
	}
	base := t.Name
	switch t.Kind {
	case KVoid:
		base = "void"
	case KStruct:
		base = "struct " + t.Name
	case KEnum:
		base = "enum " + t.Name
	}
	if t.Const {
		base = "const " + base
	}
	if d == "" {
		return base
	}
	return base + " " + d
}

// String is the C spelling of the abstract type.
func (t *Type) String() string { return t.C("") }

// Marshal renders the API as the canonical, byte-stable JSON of api.json.
func (a *API) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Unmarshal reads api.json.
func Unmarshal(data []byte) (*API, error) {
	var a API
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, err
	}
	if a.Format != FormatVersion {
		return nil, fmt.Errorf("api.json format %d, this generator reads format %d", a.Format, FormatVersion)
	}
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("api.json: %w", err)
	}
	return &a, nil
}

// ReadFile reads an api.json file.
func ReadFile(path string) (*API, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	a, err := Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// Lookup tables over an API.
type Index struct {
	Enums    map[string]*Enum // by Name() and by Tag
	Structs  map[string]*Struct
	Typedefs map[string]*Typedef
}

// NewIndex builds the lookup tables.
func NewIndex(a *API) *Index {
	ix := &Index{Enums: map[string]*Enum{}, Structs: map[string]*Struct{}, Typedefs: map[string]*Typedef{}}
	for _, e := range a.Enums {
		if e.Tag != "" {
			ix.Enums["enum "+e.Tag] = e
		}
		if e.Typedef != "" {
			ix.Enums[e.Typedef] = e
		}
	}
	for _, s := range a.Structs {
		if s.Tag != "" {
			ix.Structs["struct "+s.Tag] = s
		}
		if s.Typedef != "" {
			ix.Structs[s.Typedef] = s
		}
	}
	for _, t := range a.Typedefs {
		ix.Typedefs[t.Name] = t
	}
	return ix
}

// Resolve follows typedefs of t (not through pointers) and returns the
// underlying type and, when it is a struct or enum, its definition.
func (ix *Index) Resolve(t *Type) (*Type, *Struct, *Enum) {
	for steps := 0; t.Kind == KTypedef && steps <= len(ix.Typedefs); steps++ {
		if s, ok := ix.Structs[t.Name]; ok {
			return t, s, nil
		}
		if e, ok := ix.Enums[t.Name]; ok {
			return t, nil, e
		}
		td, ok := ix.Typedefs[t.Name]
		if !ok {
			return t, nil, nil
		}
		t = td.Type
	}
	switch t.Kind {
	case KStruct:
		return t, ix.Structs["struct "+t.Name], nil
	case KEnum:
		return t, nil, ix.Enums["enum "+t.Name]
	}
	return t, nil, nil
}
