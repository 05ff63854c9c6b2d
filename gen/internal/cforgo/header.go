package cforgo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"

	"modernc.org/cc/v4"
)

// LibcStub is the file name of the stand-in for <stdint.h>, <stddef.h> and
// <stdbool.h> that c-for-go parses instead of the host's headers; cuvs.yml
// lists it in PARSER.IgnoredPaths. With the host's headers c-for-go would
// translate every libc typedef and macro it sees (the manifest's rules can
// only filter by name, and IgnoredPaths only by file-name suffix), and the
// output would depend on the host's libc.
const LibcStub = "cforgo_libc.h"

// The stub spells each type through the compiler's own predefined macros,
// exactly as gcc's <stdint.h> does, so the types are the host's.
const libcStub = `#ifndef CFORGO_LIBC_H
#define CFORGO_LIBC_H
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __INTPTR_TYPE__ intptr_t;
typedef __UINTPTR_TYPE__ uintptr_t;
typedef __INTMAX_TYPE__ intmax_t;
typedef __UINTMAX_TYPE__ uintmax_t;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
#define bool _Bool
#define true 1
#define false 0
#define NULL ((void*)0)
#endif
`

var (
	includeRx    = regexp.MustCompile(`^[ \t]*#[ \t]*include\b`)
	stdIncludeRx = regexp.MustCompile(`^[ \t]*#[ \t]*include[ \t]*<(stdint|stddef|stdbool)\.h>[ \t]*(//.*)?$`)
)

// stageHeader copies the declarations header to dst with its standard
// includes pointed at the stub (line for line, so line numbers are kept),
// and writes the stub beside it. Any other #include is an error: the header
// must be self-contained.
func stageHeader(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		l = bytes.TrimSuffix(l, []byte("\r"))
		if !includeRx.Match(l) {
			continue
		}
		if !stdIncludeRx.Match(l) {
			return fmt.Errorf("%s:%d: %s: the declarations header may include only <stdint.h>, <stddef.h> and <stdbool.h>", src, i+1, l)
		}
		lines[i] = []byte(`#include "` + LibcStub + `"`)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(dst), LibcStub), []byte(libcStub), 0o644); err != nil {
		return err
	}
	return os.WriteFile(dst, bytes.Join(lines, []byte("\n")), 0o644)
}

// cEnum is an enum declared in the header.
type cEnum struct {
	Tag, Typedef string
	Line         int
	Members      []cEnumerator
}

// Name is the enum's C name as the generator uses it: its typedef name, else
// its tag (the same rule as gen/internal/model.Enum.Name).
func (e *cEnum) Name() string {
	if e.Typedef != "" {
		return e.Typedef
	}
	return e.Tag
}

type cEnumerator struct {
	Name  string
	Value string // a Go integer literal
}

// cRecord is a struct or union tag declared in the header.
type cRecord struct {
	Tag      string
	Union    bool
	Complete bool
	Line     int
}

type cTypedef struct {
	Name string
	Kind cc.Kind // of the type it names
	Line int
}

// header is what the repairs need to know about the declarations header.
type header struct {
	name      string // base name, as used in "file:line" references
	enums     []*cEnum
	enumOf    map[string]*cEnum // enumerator -> enum
	records   []*cRecord
	recordOf  map[string]*cRecord
	typedefs  []*cTypedef
	typedefOf map[string]*cTypedef
}

// scanHeader parses the staged header with cc/v4 (the parser c-for-go is
// built on) and collects its file-scope enums, struct/union tags and
// typedefs.
func scanHeader(path, name string) (*header, error) {
	cfg, err := cc.NewConfig(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return nil, fmt.Errorf("cc/v4 config (needs a host C compiler): %v", err)
	}
	ast, err := cc.Translate(cfg, []cc.Source{
		{Name: "<predefined>", Value: cfg.Predefined},
		{Name: "<builtin>", Value: cc.Builtin},
		{Name: path},
	})
	if err != nil {
		return nil, fmt.Errorf("cc/v4: %v", err)
	}
	h := &header{
		name:      name,
		enumOf:    map[string]*cEnum{},
		recordOf:  map[string]*cRecord{},
		typedefOf: map[string]*cTypedef{},
	}
	for tu := ast.TranslationUnit; tu != nil; tu = tu.TranslationUnit {
		ed := tu.ExternalDeclaration
		if ed == nil || ed.Case != cc.ExternalDeclarationDecl || ed.Declaration == nil {
			continue
		}
		d := ed.Declaration
		if d.Position().Filename != path {
			continue
		}
		if err := h.declaration(d); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (h *header) declaration(d *cc.Declaration) error {
	var enum *cEnum
	for ds := d.DeclarationSpecifiers; ds != nil; ds = ds.DeclarationSpecifiers {
		ts := ds.TypeSpecifier
		if ts == nil {
			continue
		}
		if es := ts.EnumSpecifier; es != nil && es.Case == cc.EnumSpecifierDef {
			e, err := h.enum(es)
			if err != nil {
				return err
			}
			enum = e
		}
		if ss := ts.StructOrUnionSpecifier; ss != nil {
			h.record(ss)
		}
	}
	for l := d.InitDeclaratorList; l != nil; l = l.InitDeclaratorList {
		dr := l.InitDeclarator.Declarator
		if dr == nil || !dr.IsTypename() {
			continue
		}
		t := dr.Type()
		td := &cTypedef{Name: dr.Name(), Kind: t.Kind(), Line: dr.Position().Line}
		if _, dup := h.typedefOf[td.Name]; !dup {
			h.typedefs = append(h.typedefs, td)
			h.typedefOf[td.Name] = td
		}
		if enum != nil && enum.Typedef == "" && t.Kind() == cc.Enum {
			enum.Typedef = td.Name
		}
	}
	if enum != nil && enum.Name() == "" {
		return fmt.Errorf("%s:%d: an enum with neither tag nor typedef name cannot be given a Go type", h.name, enum.Line)
	}
	return nil
}

func (h *header) enum(es *cc.EnumSpecifier) (*cEnum, error) {
	e := &cEnum{Tag: es.Token2.SrcStr(), Line: es.Position().Line}
	for l := es.EnumeratorList; l != nil; l = l.EnumeratorList {
		en := l.Enumerator
		name := en.Token.SrcStr()
		var lit string
		switch v := en.Value().(type) {
		case cc.Int64Value:
			lit = strconv.FormatInt(int64(v), 10)
		case cc.UInt64Value:
			lit = strconv.FormatUint(uint64(v), 10)
		default:
			return nil, fmt.Errorf("%s:%d: enumerator %s: value %v is not an integer constant", h.name, en.Position().Line, name, en.Value())
		}
		if prev, dup := h.enumOf[name]; dup && prev != e {
			return nil, fmt.Errorf("%s:%d: enumerator %s declared twice", h.name, en.Position().Line, name)
		}
		e.Members = append(e.Members, cEnumerator{Name: name, Value: lit})
		h.enumOf[name] = e
	}
	h.enums = append(h.enums, e)
	return e, nil
}

func (h *header) record(ss *cc.StructOrUnionSpecifier) {
	tag := ss.Token.SrcStr()
	if tag == "" {
		return
	}
	r := h.recordOf[tag]
	if r == nil {
		r = &cRecord{Tag: tag, Line: ss.Position().Line}
		if ss.StructOrUnion != nil {
			r.Union = ss.StructOrUnion.Case == cc.StructOrUnionUnion
		}
		h.records = append(h.records, r)
		h.recordOf[tag] = r
	}
	if ss.Case == cc.StructOrUnionSpecifierDef {
		r.Complete = true
		r.Line = ss.Position().Line
	}
}
