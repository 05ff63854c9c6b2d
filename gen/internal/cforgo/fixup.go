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

	"github.com/cuvs-go/cuvs/gen/internal/model"
	"github.com/cuvs-go/cuvs/gen/internal/names"
)

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

// cgoSpelling is how cgo names the C type a Go type name of api stands for,
// keyed by that Go name (names.Go of the C name, as the manifest's
// `transform: export` rule makes them).
func cgoSpelling(api *model.API) map[string]string {
	m := map[string]string{}
	for _, t := range api.Typedefs {
		m[names.Go(t.Name)] = t.Name
	}
	for _, s := range api.Structs {
		if s.Typedef != "" {
			m[names.Go(s.Typedef)] = s.Typedef
		}
		if g := names.Go(s.Tag); s.Tag != "" && m[g] == "" {
			m[g] = "struct_" + s.Tag
		}
	}
	for _, e := range api.Enums {
		if e.Typedef != "" {
			m[names.Go(e.Typedef)] = e.Typedef
		}
		if g := names.Go(e.Tag); e.Tag != "" && m[g] == "" {
			m[g] = "enum_" + e.Tag
		}
	}
	return m
}

// repair turns c-for-go's raw output into the files of the package, and
// returns its top-level Go names too. It makes only the changes the
// comparison with the generator's bindings needs (see the package comment);
// enum constants, values included, stay as c-for-go wrote them.
func repair(raw map[string][]byte, api *model.API) ([]File, map[string]bool, error) {
	var gos []*goFile
	var out []File
	declared := map[string]bool{}
	for name, src := range raw {
		if !strings.HasSuffix(name, ".go") {
			out = append(out, File{Name: name, Data: rebanner(src)})
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, nil, fmt.Errorf("c-for-go output does not parse: %v", err)
		}
		gos = append(gos, &goFile{name: name, src: src, fset: fset, ast: f})
		for _, n := range topLevel(f) {
			declared[n] = true
		}
	}
	sort.Slice(gos, func(i, j int) bool { return gos[i].name < gos[j].name })
	cOf := cgoSpelling(api)

	// 1. type G C.X must name the C declaration G stands for: c-for-go drops
	//    the pointer of `typedef struct X* X_t` (it writes C.struct_X).
	var typesFile *goFile
	changed := map[string]bool{}
	for _, g := range gos {
		if g.name == "types.go" {
			typesFile = g
		}
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
					return nil, nil, fmt.Errorf("c-for-go declared type %s = C.%s, which matches no typedef or tag of the API", ts.Name.Name, sel.Sel.Name)
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
				return nil, nil, fmt.Errorf("%s: c-for-go wrote method %s.%s for type %s, whose C type had to be corrected", g.name, id.Name, fd.Name.Name, id.Name)
			}
		}
	}

	// 2. A Go type for every struct: c-for-go declares none for a struct
	//    reached only through a pointer typedef (struct cuvsCagraIndexParams).
	var add bytes.Buffer
	for _, s := range api.Structs {
		g := names.Go(s.Name())
		if declared[g] {
			continue
		}
		fmt.Fprintf(&add, "\n// %s is %s (added by gen/internal/cforgo: c-for-go declared no type for it).\ntype %s C.%s\n", g, s.CName(), g, cOf[g])
		declared[g] = true
	}
	if add.Len() > 0 {
		if typesFile == nil {
			return nil, nil, fmt.Errorf("c-for-go wrote no types.go")
		}
		end := len(typesFile.src)
		typesFile.edits = append(typesFile.edits, edit{end, end, add.String()})
	}

	for _, g := range gos {
		src, err := apply(g.src, g.edits)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", g.name, err)
		}
		src, err = format.Source(src)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: repaired c-for-go output does not format: %v", g.name, err)
		}
		out = append(out, File{Name: g.name, Data: rebanner(src)})
	}
	sortFiles(out)
	return out, declared, nil
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
