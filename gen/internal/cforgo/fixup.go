package cforgo

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"modernc.org/cc/v4"
)

// GoName is the Go name of a C identifier: its first letter upper-cased
// (the manifest's `type: [{transform: export}]` rule, and gen/'s rule).
func GoName(c string) string {
	r, n := utf8.DecodeRuneInString(c)
	return string(unicode.ToUpper(r)) + c[n:]
}

// EnumConst is the Go name of enumerator member of the enum whose C name
// (typedef, else tag) is enum: <GoName(enum)>_<member>.
func EnumConst(enum, member string) string { return GoName(enum) + "_" + member }

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

type goFile struct {
	name  string
	src   []byte
	fset  *token.FileSet
	ast   *ast.File
	edits []edit
}

func (f *goFile) off(p token.Pos) int { return f.fset.Position(p).Offset }

// declStart is where a declaration begins, its doc comment included.
func (f *goFile) declStart(d *ast.GenDecl) int {
	if d.Doc != nil {
		return f.off(d.Doc.Pos())
	}
	return f.off(d.Pos())
}

// repair turns c-for-go's raw output into the files Run writes; see the
// package comment for what it changes.
func repair(raw map[string][]byte, h *header) ([]File, error) {
	var gos []*goFile
	var out []File
	declared := map[string]string{} // Go top-level name -> file
	for name, src := range raw {
		if !strings.HasSuffix(name, ".go") {
			out = append(out, File{Name: name, Data: rebanner(src)})
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("c-for-go output does not parse: %v", err)
		}
		gf := &goFile{name: name, src: src, fset: fset, ast: f}
		gos = append(gos, gf)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declared[s.Name.Name] = name
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[n.Name] = name
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil {
					declared[d.Name.Name] = name
				}
			}
		}
	}
	sort.Slice(gos, func(i, j int) bool { return gos[i].name < gos[j].name })
	var typesFile, constFile *goFile
	for _, g := range gos {
		switch g.name {
		case "types.go":
			typesFile = g
		case "const.go":
			constFile = g
		}
	}

	// The C declaration each Go type name stands for.
	cOf := map[string]string{}
	for _, td := range h.typedefs {
		cOf[GoName(td.Name)] = td.Name
	}
	for _, r := range h.records {
		g := GoName(r.Tag)
		if c, ok := cOf[g]; ok {
			if c != r.Tag {
				return nil, fmt.Errorf("%s:%d: struct tag %s and typedef %s both become Go type %s", h.name, r.Line, r.Tag, c, g)
			}
			continue // typedef struct T {...} T;
		}
		if r.Union {
			cOf[g] = "union_" + r.Tag
		} else {
			cOf[g] = "struct_" + r.Tag
		}
	}

	// 1. type G C.X: name the C declaration G stands for. c-for-go drops the
	//    pointer of `typedef struct X* X_t` (it writes C.struct_X).
	changed := map[string]bool{}
	for _, g := range gos {
		for _, d := range g.ast.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				sel, ok := ts.Type.(*ast.SelectorExpr)
				if !ok {
					continue
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "C" {
					continue
				}
				want, ok := cOf[ts.Name.Name]
				if !ok {
					return nil, fmt.Errorf("c-for-go declared type %s = C.%s, which matches no typedef or tag of %s", ts.Name.Name, sel.Sel.Name, h.name)
				}
				if sel.Sel.Name != want {
					g.edits = append(g.edits, edit{g.off(sel.Sel.Pos()), g.off(sel.Sel.End()), want})
					changed[ts.Name.Name] = true
				}
			}
		}
	}
	// Helpers written for a type whose C spelling changed would now lie.
	for _, g := range gos {
		for _, d := range g.ast.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
				continue
			}
			t := fd.Recv.List[0].Type
			if st, ok := t.(*ast.StarExpr); ok {
				t = st.X
			}
			if id, ok := t.(*ast.Ident); ok && changed[id.Name] {
				return nil, fmt.Errorf("%s: c-for-go wrote method %s.%s for type %s, whose C type had to be corrected", g.name, id.Name, fd.Name.Name, id.Name)
			}
		}
	}

	// 2. Enums: typed constants named <GoEnumType>_<CName>, a Go type per
	//    enum (c-for-go leaves tagged, non-typedef'd enums untyped).
	if constFile == nil && len(h.enums) > 0 {
		return nil, fmt.Errorf("c-for-go wrote no const.go although %s declares %d enums", h.name, len(h.enums))
	}
	seen := map[string]bool{}
	typeAdded := map[string]bool{}
	for _, g := range gos {
		for _, d := range g.ast.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			if len(gd.Specs) == 0 { // e.g. only the include guard macro
				g.edits = append(g.edits, edit{g.declStart(gd), g.off(gd.End()), ""})
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if len(vs.Names) != 1 {
					return nil, fmt.Errorf("%s: unexpected const spec with %d names", g.name, len(vs.Names))
				}
				m := vs.Names[0].Name
				e := h.enumOf[m]
				if e == nil {
					continue // a macro constant: kept as c-for-go wrote it
				}
				if seen[m] {
					return nil, fmt.Errorf("c-for-go wrote enumerator %s twice", m)
				}
				seen[m] = true
				typ := GoName(e.Name())
				if _, ok := declared[typ]; !ok && !typeAdded[typ] {
					typeAdded[typ] = true
					at := g.declStart(gd)
					g.edits = append(g.edits, edit{at, at, fmt.Sprintf("// %s as declared in %s:%d\ntype %s int32\n\n", typ, h.name, e.Line, typ)})
				}
				var val string
				for _, em := range e.Members {
					if em.Name == m {
						val = em.Value
					}
				}
				g.edits = append(g.edits, edit{g.off(vs.Names[0].Pos()), g.off(vs.End()), fmt.Sprintf("%s %s = %s", EnumConst(e.Name(), m), typ, val)})
			}
		}
	}
	for _, e := range h.enums {
		for _, m := range e.Members {
			if !seen[m.Name] {
				return nil, fmt.Errorf("%s:%d: c-for-go wrote no constant for enumerator %s of %s", h.name, e.Line, m.Name, e.Name())
			}
		}
	}

	// 3. Types c-for-go did not declare: structs reached only through a
	//    pointer typedef, and any other typedef it skipped.
	var add bytes.Buffer
	addType := func(g, c string, line int) {
		fmt.Fprintf(&add, "\n// %s as declared in %s:%d\ntype %s C.%s\n", g, h.name, line, g, c)
		declared[g] = "types.go"
	}
	for _, td := range h.typedefs {
		g := GoName(td.Name)
		if _, ok := declared[g]; ok || typeAdded[g] || td.Kind == cc.Enum || td.Kind == cc.Function {
			continue
		}
		addType(g, td.Name, td.Line)
	}
	for _, r := range h.records {
		g := GoName(r.Tag)
		if _, ok := declared[g]; ok || !r.Complete {
			continue
		}
		addType(g, cOf[g], r.Line)
	}
	if add.Len() > 0 {
		if typesFile == nil {
			return nil, fmt.Errorf("c-for-go wrote no types.go")
		}
		end := len(typesFile.src)
		typesFile.edits = append(typesFile.edits, edit{end, end, add.String()})
	}

	// Apply, format, and check that no two top-level names collide.
	names := map[string]string{}
	for _, g := range gos {
		src, err := apply(g.src, g.edits)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", g.name, err)
		}
		src, err = format.Source(src)
		if err != nil {
			return nil, fmt.Errorf("%s: repaired c-for-go output does not format: %v", g.name, err)
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, g.name, src, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", g.name, err)
		}
		for _, n := range topLevel(f) {
			if prev, dup := names[n]; dup {
				return nil, fmt.Errorf("the Go name %s is declared in both %s and %s", n, prev, g.name)
			}
			names[n] = g.name
		}
		out = append(out, File{Name: g.name, Data: rebanner(src)})
	}
	sortFiles(out)
	return out, nil
}

func topLevel(f *ast.File) []string {
	var r []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					r = append(r, s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.Name != "_" {
							r = append(r, n.Name)
						}
					}
				}
			}
		case *ast.FuncDecl:
			if d.Recv == nil {
				r = append(r, d.Name.Name)
			}
		}
	}
	return r
}

func apply(src []byte, edits []edit) ([]byte, error) {
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	var b bytes.Buffer
	pos := 0
	for _, e := range edits {
		if e.start < pos {
			return nil, fmt.Errorf("overlapping edits at offset %d", e.start)
		}
		b.Write(src[pos:e.start])
		b.WriteString(e.text)
		pos = e.end
	}
	b.Write(src[pos:])
	return b.Bytes(), nil
}

// rebanner replaces c-for-go's leading comment ("WARNING: This file has
// automatically been generated" and "Code generated by https://git.io/c-for-go.
// DO NOT EDIT.") with Banner, and drops trailing blanks from every line.
func rebanner(src []byte) []byte {
	lines := strings.Split(string(src), "\n")
	i := 0
	for i < len(lines) {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "// WARNING: This file has automatically been generated") ||
			(strings.HasPrefix(l, "// Code generated by") && strings.HasSuffix(l, "DO NOT EDIT.")) {
			i++
			continue
		}
		break
	}
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	lines = append([]string{Banner, ""}, lines[i:]...)
	for j, l := range lines {
		lines[j] = strings.TrimRight(l, " \t")
	}
	s := strings.TrimRight(strings.Join(lines, "\n"), "\n") + "\n"
	return []byte(s)
}
