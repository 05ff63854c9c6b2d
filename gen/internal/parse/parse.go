// Package parse reads the cuVS and DLPack C headers with modernc.org/cc/v4 and
// turns them into the generator's API model.
//
// cc/v4 does not honour `#pragma once`, so a header included from several
// places is seen several times: declarations are deduplicated by name, and a
// second, different definition under the same name is an error.
package parse

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"modernc.org/cc/v4"

	"github.com/cuvs-go/cuvs/gen/internal/model"
)

// Options says where the headers are.
type Options struct {
	CuvsInclude   string // folder holding cuvs/core/c_api.h
	DLPackInclude string // folder holding dlpack/dlpack.h
	CuvsVersion   string // recorded in the model (the headers carry none)
	// Optional algorithms switched on through c_config.h. Both are on for
	// the committed bindings: symbols a given library lacks are reported at
	// run time.
	HNSW, MultiGPU bool
}

// standIn is our own replacement for the two CUDA runtime types the cuVS
// headers use, so they parse without a CUDA toolkit.
const standIn = `#pragma once
typedef struct CUstream_st* cudaStream_t;
typedef int cudaDataType_t;
`

// StandInHeader is the name recorded for declarations of the stand-in.
const StandInHeader = "cuda_runtime.h"

// Error is a translation failure at a header position.
type Error struct {
	Pos string // file:line
	Msg string
}

func (e *Error) Error() string { return e.Pos + ": " + e.Msg }

// Headers parses the cuVS headers (all.h, or every header when there is no
// all.h) and DLPack's dlpack.h into one API model.
func Headers(o Options) (*model.API, error) {
	if _, err := os.Stat(filepath.Join(o.CuvsInclude, "cuvs", "core", "c_api.h")); err != nil {
		return nil, fmt.Errorf("cuVS headers: %s has no cuvs/core/c_api.h", o.CuvsInclude)
	}
	if _, err := os.Stat(filepath.Join(o.DLPackInclude, "dlpack", "dlpack.h")); err != nil {
		return nil, fmt.Errorf("DLPack headers: %s has no dlpack/dlpack.h", o.DLPackInclude)
	}
	// Two folders of our own come first in the search path: one with the
	// stand-ins (cuda_runtime.h, c_config.h), one with links to exactly the
	// chosen cuvs/ and dlpack/ folders, so that nothing else in their
	// include roots (a host /usr/include/dlpack, a cuvs tree next to dlpack)
	// can shadow or join them.
	tmp, err := os.MkdirTemp("", "cuvs-go-gen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	stub, links := filepath.Join(tmp, "stub"), filepath.Join(tmp, "inc")
	for _, d := range []string{filepath.Join(stub, "cuvs", "core"), links} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(stub, StandInHeader), []byte(standIn), 0o644); err != nil {
		return nil, err
	}
	// c_config.h is produced by cuVS's build; ours defines nothing, the
	// switches come from the main source below.
	if err := os.WriteFile(filepath.Join(stub, "cuvs", "core", "c_config.h"), []byte("#pragma once\n"), 0o644); err != nil {
		return nil, err
	}
	for name, dir := range map[string]string{"cuvs": o.CuvsInclude, "dlpack": o.DLPackInclude} {
		abs, err := filepath.Abs(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if err := os.Symlink(abs, filepath.Join(links, name)); err != nil {
			return nil, err
		}
	}

	var src strings.Builder
	src.WriteString("#include <stdint.h>\n#include <stdbool.h>\n#include <stddef.h>\n")
	if o.HNSW {
		src.WriteString("#define CUVS_BUILD_CAGRA_HNSWLIB 1\n")
	}
	if o.MultiGPU {
		src.WriteString("#define CUVS_BUILD_MG_ALGOS 1\n")
	}
	src.WriteString("#include <dlpack/dlpack.h>\n")
	headers, err := cuvsHeaders(o)
	if err != nil {
		return nil, err
	}
	for _, h := range headers {
		fmt.Fprintf(&src, "#include <%s>\n", h)
	}

	cfg, err := cc.NewConfig("", "")
	if err != nil {
		return nil, fmt.Errorf("cc/v4 config: %w", err)
	}
	// Ours first: the host's /usr/include/dlpack must not shadow the chosen one.
	ours := []string{stub, links}
	cfg.IncludePaths = append(append([]string{""}, ours...), cfg.IncludePaths...)
	cfg.SysIncludePaths = append(append([]string{}, ours...), cfg.SysIncludePaths...)
	cfg.Header = true

	sources := []cc.Source{
		{Name: "<predefined>", Value: cfg.Predefined},
		{Name: "<builtin>", Value: cc.Builtin},
		{Name: "cuvs-go-gen.c", Value: src.String()},
	}
	ast, err := cc.Translate(cfg, sources)
	if err != nil {
		return nil, fmt.Errorf("parsing headers: %w", err)
	}
	p := &parser{
		api:   &model.API{Format: model.FormatVersion, CuvsVersion: o.CuvsVersion},
		roots: []string{links, stub},
		seen:  map[string]string{},

		constMembers: map[*cc.StructType]map[string]bool{},
	}
	p.api.Headers = append(p.api.Headers, headers...)
	p.api.Headers = append(p.api.Headers, "dlpack/dlpack.h")
	sort.Strings(p.api.Headers)
	if m := ast.Macros["DLPACK_VERSION"]; m != nil {
		p.api.DLPackVersion = dlpackVersion(m)
	}
	for tu := ast.TranslationUnit; tu != nil; tu = tu.TranslationUnit {
		ed := tu.ExternalDeclaration
		if ed == nil || ed.Declaration == nil {
			continue
		}
		if err := p.declaration(ed.Declaration); err != nil {
			return nil, err
		}
	}
	if len(p.errs) > 0 {
		return nil, p.errs[0]
	}
	return p.api, nil
}

// cuvsHeaders lists the headers to include, relative to the include folder.
func cuvsHeaders(o Options) ([]string, error) {
	if _, err := os.Stat(filepath.Join(o.CuvsInclude, "cuvs", "core", "all.h")); err == nil {
		return []string{"cuvs/core/all.h"}, nil
	}
	var hs []string
	err := filepath.WalkDir(filepath.Join(o.CuvsInclude, "cuvs"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".h") {
			return err
		}
		rel, _ := filepath.Rel(o.CuvsInclude, path)
		rel = filepath.ToSlash(rel)
		if rel == "cuvs/core/c_config.h" {
			return nil
		}
		base := filepath.Base(rel)
		if (!o.HNSW && base == "hnsw.h") || (!o.MultiGPU && strings.HasPrefix(base, "mg_")) {
			return nil
		}
		hs = append(hs, rel)
		return nil
	})
	sort.Strings(hs)
	return hs, err
}

func dlpackVersion(m *cc.Macro) string {
	var s strings.Builder
	for _, t := range m.ReplacementList() {
		s.WriteString(t.SrcStr())
	}
	v := strings.TrimSpace(s.String())
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil {
		return v
	}
	return fmt.Sprintf("%d.%d", n/100, n%100/10)
}

type parser struct {
	api   *model.API
	roots []string
	seen  map[string]string // kind+name -> fingerprint, for dedup
	// constMembers: cc/v4 drops `const` from member types (const char*
	// members read as char*), so it is read from the declarations.
	constMembers map[*cc.StructType]map[string]bool
	order        int
	errs         []error
}

// header maps a position to the header it belongs to, relative to its
// include root; "" for system headers.
func (p *parser) header(pos string) string {
	for _, r := range p.roots {
		if rel, err := filepath.Rel(r, pos); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
	}
	return ""
}

func (p *parser) errorf(n cc.Node, format string, args ...any) {
	pos := n.Position()
	h := p.header(pos.Filename)
	if h == "" {
		h = pos.Filename
	}
	p.errs = append(p.errs, &Error{Pos: fmt.Sprintf("%s:%d", h, pos.Line), Msg: fmt.Sprintf(format, args...)})
}

// once reports whether a declaration is new; a redefinition that differs
// from the first one is an error.
func (p *parser) once(n cc.Node, key string, fingerprint string) bool {
	if old, ok := p.seen[key]; ok {
		if old != fingerprint {
			p.errorf(n, "%s redefined differently", key)
		}
		return false
	}
	p.seen[key] = fingerprint
	return true
}

func (p *parser) declaration(d *cc.Declaration) error {
	hdr := p.header(d.Position().Filename)
	if hdr == "" {
		return nil
	}
	// Tagged struct and enum definitions in the specifiers.
	specName := ""
	for ds := d.DeclarationSpecifiers; ds != nil; ds = ds.DeclarationSpecifiers {
		ts := ds.TypeSpecifier
		if ts == nil {
			continue
		}
		switch {
		case ts.Case == cc.TypeSpecifierTypeName:
			specName = ts.Token.SrcStr()
		case ts.StructOrUnionSpecifier != nil:
			s := ts.StructOrUnionSpecifier
			if s.StructDeclarationList == nil {
				continue // a forward reference
			}
			if st, ok := s.Type().(*cc.StructType); ok {
				p.constMembers[st] = constMembers(s)
			}
			if s.StructOrUnion.Case == cc.StructOrUnionUnion {
				p.errorf(s, "unions are not supported")
				continue
			}
			st, ok := s.Type().(*cc.StructType)
			if !ok {
				p.errorf(s, "struct has type %s", s.Type())
				continue
			}
			if tagOf(st.Tag()) != "" {
				p.structDef(s, st, hdr, "")
			}
		case ts.EnumSpecifier != nil:
			e := ts.EnumSpecifier
			if e.EnumeratorList == nil {
				continue
			}
			et, ok := e.Type().(*cc.EnumType)
			if ok && tagOf(et.Tag()) != "" {
				p.enumDef(e, et, hdr, "")
			}
		}
	}
	for l := d.InitDeclaratorList; l != nil; l = l.InitDeclaratorList {
		dr := l.InitDeclarator.Declarator
		name := dr.Name()
		t := dr.Type()
		if dr.IsTypename() {
			p.typedef(dr, name, t, hdr, specName)
			continue
		}
		if ft, ok := t.(*cc.FunctionType); ok {
			p.function(dr, name, ft, hdr)
			continue
		}
		p.errorf(dr, "%s: object declarations are not supported", name)
	}
	return nil
}

func (p *parser) typedef(n cc.Node, name string, t cc.Type, hdr, specName string) {
	switch x := t.(type) {
	case *cc.StructType:
		if tagOf(x.Tag()) == "" || tagOf(x.Tag()) == name {
			p.structDef(n, x, hdr, name)
			return
		}
	case *cc.EnumType:
		if tagOf(x.Tag()) == "" || tagOf(x.Tag()) == name {
			p.enumDef(n, x, hdr, name)
			return
		}
	}
	mt := p.typ(n, t, name)
	if mt == nil {
		return
	}
	// cc/v4 gives `typedef uintptr_t X;` the type of uintptr_t renamed X:
	// keep the portable spelling the header used.
	if mt.Kind == model.KBuiltin && builtins[specName] {
		mt.Name = specName
	}
	if !p.once(n, "typedef "+name, mt.String()) {
		return
	}
	p.order++
	p.api.Typedefs = append(p.api.Typedefs, &model.Typedef{Name: name, Type: mt, Header: hdr, Order: p.order})
}

func (p *parser) structDef(n cc.Node, st *cc.StructType, hdr, typedef string) {
	tag := tagOf(st.Tag())
	s := &model.Struct{Tag: tag, Typedef: typedef, Header: hdr, Size: st.Size(), Align: int64(st.Align())}
	for i := 0; i < st.NumFields(); i++ {
		f := st.FieldByIndex(i)
		if f.IsBitfield() {
			p.errorf(n, "%s.%s: bit-fields are not supported", s.Name(), f.Name())
			return
		}
		if f.Name() == "" {
			p.errorf(n, "%s: anonymous members are not supported", s.Name())
			return
		}
		ft := p.typ(n, f.Type(), "")
		if ft == nil {
			return
		}
		if p.constMembers[st][f.Name()] {
			base := ft
			for base.Kind == model.KPointer {
				base = base.Elem
			}
			base.Const = true
		}
		s.Fields = append(s.Fields, model.Field{Name: f.Name(), Type: ft, Offset: f.Offset()})
	}
	fp := fmt.Sprintf("%d/%d/%v", s.Size, s.Align, fieldsString(s.Fields))
	// A tagged struct defined with a typedef of the same name is one type.
	if tag != "" {
		if !p.once(n, "struct "+tag, fp) {
			p.mergeTypedef(tag, typedef, true)
			return
		}
	} else if !p.once(n, "typedef "+typedef, fp) {
		return
	}
	p.order++
	s.Order = p.order
	p.api.Structs = append(p.api.Structs, s)
}

func (p *parser) enumDef(n cc.Node, et *cc.EnumType, hdr, typedef string) {
	tag := tagOf(et.Tag())
	e := &model.Enum{Tag: tag, Typedef: typedef, Header: hdr}
	for _, en := range et.Enumerators() {
		v := en.Value()
		var iv int64
		switch x := v.(type) {
		case cc.Int64Value:
			iv = int64(x)
		case cc.UInt64Value:
			iv = int64(x)
		default:
			p.errorf(en, "enumerator %s has no integer value", en.Token.SrcStr())
			return
		}
		e.Values = append(e.Values, model.EnumValue{Name: en.Token.SrcStr(), Value: iv})
	}
	if et.Size() != 4 {
		p.errorf(n, "enum %s has size %d, want 4", e.Name(), et.Size())
		return
	}
	fp := fmt.Sprint(e.Values)
	if tag != "" {
		if !p.once(n, "enum "+tag, fp) {
			p.mergeTypedef(tag, typedef, false)
			return
		}
	} else if !p.once(n, "typedef "+typedef, fp) {
		return
	}
	p.order++
	e.Order = p.order
	p.api.Enums = append(p.api.Enums, e)
}

// mergeTypedef records a typedef name given later to an already seen tagged
// struct or enum (`struct X {...}; ... typedef struct X X;` style).
func (p *parser) mergeTypedef(tag, typedef string, isStruct bool) {
	if typedef == "" {
		return
	}
	if isStruct {
		for _, s := range p.api.Structs {
			if s.Tag == tag && s.Typedef == "" {
				s.Typedef = typedef
			}
		}
		return
	}
	for _, e := range p.api.Enums {
		if e.Tag == tag && e.Typedef == "" {
			e.Typedef = typedef
		}
	}
}

func fieldsString(fs []model.Field) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s %s@%d;", f.Type, f.Name, f.Offset)
	}
	return b.String()
}

func (p *parser) function(n cc.Node, name string, ft *cc.FunctionType, hdr string) {
	f := &model.Function{Name: name, Header: hdr, Variadic: ft.IsVariadic()}
	if f.Variadic {
		p.errorf(n, "%s: variadic functions are not supported", name)
		return
	}
	f.Result = p.typ(n, ft.Result(), "")
	for i, prm := range ft.Parameters() {
		pt := p.typ(n, prm.Type(), "")
		if pt == nil {
			return
		}
		if pt.Kind == model.KVoid && len(ft.Parameters()) == 1 {
			break // f(void)
		}
		pn := prm.Name()
		if pn == "" {
			pn = fmt.Sprintf("arg%d", i)
		}
		f.Params = append(f.Params, &model.Param{Name: pn, Type: pt})
	}
	if f.Result == nil {
		return
	}
	var sig strings.Builder
	sig.WriteString(f.Result.String())
	for _, prm := range f.Params {
		sig.WriteString("," + prm.Type.String())
	}
	if !p.once(n, "func "+name, sig.String()) {
		return
	}
	p.api.Functions = append(p.api.Functions, f)
}

// builtins are the C scalar spellings the model keeps by name.
var builtins = map[string]bool{
	"int8_t": true, "int16_t": true, "int32_t": true, "int64_t": true,
	"uint8_t": true, "uint16_t": true, "uint32_t": true, "uint64_t": true,
	"uintptr_t": true, "intptr_t": true, "size_t": true, "ptrdiff_t": true,
}

var kindNames = map[cc.Kind]string{
	cc.Bool: "bool", cc.Char: "char", cc.SChar: "signed char", cc.UChar: "unsigned char",
	cc.Short: "short", cc.UShort: "unsigned short", cc.Int: "int", cc.UInt: "unsigned",
	cc.Long: "long", cc.ULong: "unsigned long", cc.LongLong: "long long",
	cc.ULongLong: "unsigned long long", cc.Float: "float", cc.Double: "double",
}

// typ converts a cc type; self is the typedef being defined, if any.
func (p *parser) typ(n cc.Node, t cc.Type, self string) *model.Type {
	konst := t.Attributes().IsConst()
	if td := t.Typedef(); td != nil && td.Name() != self {
		name := td.Name()
		if builtins[name] {
			return &model.Type{Kind: model.KBuiltin, Name: name, Const: konst}
		}
		if p.header(td.Position().Filename) != "" {
			return &model.Type{Kind: model.KTypedef, Name: name, Const: konst}
		}
		if name == "bool" {
			return &model.Type{Kind: model.KBuiltin, Name: "bool", Const: konst}
		}
	}
	switch x := t.(type) {
	case *cc.PointerType:
		elem := p.typ(n, x.Elem(), "")
		if elem == nil {
			return nil
		}
		return &model.Type{Kind: model.KPointer, Elem: elem, Const: konst}
	case *cc.FunctionType:
		ft := &model.Type{Kind: model.KFunc, Result: p.typ(n, x.Result(), "")}
		if ft.Result == nil {
			return nil
		}
		for i, prm := range x.Parameters() {
			pt := p.typ(n, prm.Type(), "")
			if pt == nil {
				return nil
			}
			if pt.Kind == model.KVoid && len(x.Parameters()) == 1 {
				break
			}
			pn := prm.Name()
			if pn == "" {
				pn = fmt.Sprintf("arg%d", i)
			}
			ft.Params = append(ft.Params, &model.Param{Name: pn, Type: pt})
		}
		return ft
	case *cc.StructType:
		if tag := tagOf(x.Tag()); tag != "" {
			return &model.Type{Kind: model.KStruct, Name: tag, Const: konst}
		}
		p.errorf(n, "anonymous struct type outside a typedef")
		return nil
	case *cc.EnumType:
		if tag := tagOf(x.Tag()); tag != "" {
			return &model.Type{Kind: model.KEnum, Name: tag, Const: konst}
		}
		p.errorf(n, "anonymous enum type outside a typedef")
		return nil
	case *cc.ArrayType:
		p.errorf(n, "array types are not supported (%s)", t)
		return nil
	case *cc.UnionType:
		p.errorf(n, "unions are not supported (%s)", t)
		return nil
	}
	if t.Kind() == cc.Void {
		return &model.Type{Kind: model.KVoid, Const: konst}
	}
	if s, ok := kindNames[t.Kind()]; ok {
		return &model.Type{Kind: model.KBuiltin, Name: s, Const: konst}
	}
	p.errorf(n, "type %s (kind %v) is not supported", t, t.Kind())
	return nil
}

func tagOf(t cc.Token) string { return t.SrcStr() }

// constMembers lists the members of a struct whose specifiers say const.
func constMembers(s *cc.StructOrUnionSpecifier) map[string]bool {
	m := map[string]bool{}
	for l := s.StructDeclarationList; l != nil; l = l.StructDeclarationList {
		sd := l.StructDeclaration
		if sd == nil {
			continue
		}
		isConst := false
		for q := sd.SpecifierQualifierList; q != nil; q = q.SpecifierQualifierList {
			if q.TypeQualifier != nil && q.TypeQualifier.Case == cc.TypeQualifierConst {
				isConst = true
			}
		}
		if !isConst {
			continue
		}
		for d := sd.StructDeclaratorList; d != nil; d = d.StructDeclaratorList {
			if d.StructDeclarator != nil && d.StructDeclarator.Declarator != nil {
				m[d.StructDeclarator.Declarator.Name()] = true
			}
		}
	}
	return m
}
