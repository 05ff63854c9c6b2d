// Package readmeapi checks the README's API table against the exported API
// of the packages under safe/, in both directions: a name in a cell must be
// a function of the package or a method of the row's type, in the column of
// its kind; and every function or method of a column's kind must be in that
// column, so that a "—" (or a name left out) is true. Which names are of a
// column's kind is by name (columns below), and for the two serialization
// columns by signature (an io.Reader or io.Writer, or not). The packages'
// sources are parsed (go/build, go/parser, go/doc): no cgo build, no library.
package readmeapi

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// none is what a cell says when the row has nothing of the column's kind.
const none = "—"

// A column of the table: its header, as the README writes it, and which
// exported names are of its kind.
type column struct {
	header string
	// match reports whether a name of the row (a package-level function, or
	// a method of the row's type) is of the column's kind. ctor is true for
	// a function go/doc groups with the row's type (one returning it).
	match func(name string, ctor bool) bool
	// io is, for the two serialization columns, whether the column takes
	// io.Writer/io.Reader (else paths); the split is by signature.
	io *bool
}

var (
	yes, no = true, false

	searchRe  = regexp.MustCompile(`^(Search|Predict|Transform|InverseTransform|Select|Pairwise|Refine)($|[A-Z])`)
	buildRe   = regexp.MustCompile(`^(Build|Train)|Fit`)
	serialRe  = regexp.MustCompile(`^(Serialize|Deserialize|Distribute)`)
	notBuilds = regexp.MustCompile(`^(Deserialize|Distribute|Merge)`)
)

// columns are the table's columns after the first (the row's package and
// type), in order.
var columns = []column{
	{header: "build / fit", match: func(n string, ctor bool) bool {
		return !strings.Contains(n, "Slice") && (buildRe.MatchString(n) || ctor && !notBuilds.MatchString(n))
	}},
	{header: "search / apply", match: func(n string, _ bool) bool {
		return !strings.Contains(n, "Slice") && searchRe.MatchString(n)
	}},
	{header: "Go memory (`…Slice`)", match: func(n string, _ bool) bool { return strings.Contains(n, "Slice") }},
	{header: "Prepare (`Run`)", match: func(n string, _ bool) bool { return strings.HasPrefix(n, "Prepare") }},
	{header: "Extend", match: func(n string, _ bool) bool { return strings.HasPrefix(n, "Extend") }},
	{header: "Merge", match: func(n string, _ bool) bool { return strings.HasPrefix(n, "Merge") }},
	{header: "paths", match: func(n string, _ bool) bool { return serialRe.MatchString(n) }, io: &no},
	{header: "`io`", match: func(n string, _ bool) bool { return serialRe.MatchString(n) }, io: &yes},
	{header: "Close", match: func(n string, _ bool) bool { return n == "Close" }},
}

// firstHeader is the table's first header cell, by which the test finds it.
const firstHeader = "package.Type"

// A row of the table.
type row struct {
	line  int    // README line, for messages
	pkg   string // the package under safe/
	typ   string // its type, "" for the package's functions of no row type
	cells []cell
}

type cell struct {
	text  string
	names []string // "Build", "Index.Search"; none for "—"
}

// rowRe is a row's first cell: a package under safe/, and its type unless
// the row is of the package's functions that belong to none of its types.
var rowRe = regexp.MustCompile("^`([a-z][a-z0-9]*)(?:\\.([A-Z][A-Za-z0-9]*))?`$")

// identRe is one name of a cell: a function, or Type.Method.
var identRe = regexp.MustCompile("^`([A-Z][A-Za-z0-9]*(\\.[A-Z][A-Za-z0-9]*)?)`$")

// readTable finds the table in readme and parses its rows.
func readTable(readme string) ([]row, error) {
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if cs := splitRow(l); len(cs) > 0 && cs[0] == firstHeader {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no table whose first header is %q", firstHeader)
	}
	head := splitRow(lines[start])
	if len(head) != len(columns)+1 {
		return nil, fmt.Errorf("line %d: %d columns, want %d (%s and %s)", start+1, len(head), len(columns)+1, firstHeader, headers())
	}
	for i, c := range columns {
		if head[i+1] != c.header {
			return nil, fmt.Errorf("line %d: column %d is %q, want %q (the test knows these: %s)", start+1, i+2, head[i+1], c.header, headers())
		}
	}
	if start+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[start+1]), "| ---") {
		return nil, fmt.Errorf("line %d: no delimiter row under the header", start+2)
	}
	var rows []row
	for i := start + 2; i < len(lines); i++ {
		cs := splitRow(lines[i])
		if cs == nil {
			break
		}
		if len(cs) != len(columns)+1 {
			return nil, fmt.Errorf("line %d: %d cells, want %d", i+1, len(cs), len(columns)+1)
		}
		m := rowRe.FindStringSubmatch(cs[0])
		if m == nil {
			return nil, fmt.Errorf("line %d: first cell %q is not `package` or `package.Type`", i+1, cs[0])
		}
		r := row{line: i + 1, pkg: m[1], typ: m[2]}
		for _, c := range cs[1:] {
			parsed := cell{text: c}
			if c != none {
				for _, part := range strings.Split(c, ", ") {
					im := identRe.FindStringSubmatch(part)
					if im == nil {
						return nil, fmt.Errorf("line %d: cell %q: %q is not a `Name` or `Type.Method` (names are separated by \", \"; an empty cell is %q)", i+1, c, part, none)
					}
					parsed.names = append(parsed.names, im[1])
				}
			}
			r.cells = append(r.cells, parsed)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("line %d: a table without rows", start+1)
	}
	return rows, nil
}

// splitRow returns the cells of a table line (indented or not), nil for a
// line that is not one.
func splitRow(l string) []string {
	l = strings.TrimSpace(l)
	if !strings.HasPrefix(l, "|") || !strings.HasSuffix(l, "|") || len(l) < 2 {
		return nil
	}
	cs := strings.Split(l[1:len(l)-1], "|")
	for i := range cs {
		cs[i] = strings.TrimSpace(cs[i])
	}
	return cs
}

func headers() string {
	var hs []string
	for _, c := range columns {
		hs = append(hs, fmt.Sprintf("%q", c.header))
	}
	return strings.Join(hs, ", ")
}

// An exported function or method of a package.
type member struct {
	name string // "Build", "Index.Search"
	base string // the function's or method's own name
	ctor bool   // a function go/doc groups with the row's type
	io   bool   // takes or returns an io.Reader or io.Writer
}

// pkgAPI is what one package exports: its functions (by go/doc's grouping:
// with the type they return, or at package level) and the methods of its
// types.
type pkgAPI struct {
	funcs   []*doc.Func              // every exported function
	ctorOf  map[string]string        // function → the type go/doc groups it with
	methods map[string][]*doc.Func   // type → its exported methods
	types   map[string]bool          // exported types
	decls   map[string]*ast.FuncDecl // function → its declaration
	mdecls  map[string]*ast.FuncDecl // Type.Method → its declaration
}

func loadPackage(dir string) (*pkgAPI, error) {
	// The files the go command builds on this platform, cgo's included.
	ctx := build.Default
	ctx.CgoEnabled = true
	bp, err := ctx.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range append(bp.GoFiles, bp.CgoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	d, err := doc.NewFromFiles(fset, files, bp.ImportPath, doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	api := &pkgAPI{ctorOf: map[string]string{}, methods: map[string][]*doc.Func{}, types: map[string]bool{}, decls: map[string]*ast.FuncDecl{}, mdecls: map[string]*ast.FuncDecl{}}
	add := func(f *doc.Func, typ string) {
		api.funcs = append(api.funcs, f)
		api.decls[f.Name] = f.Decl
		if typ != "" {
			api.ctorOf[f.Name] = typ
		}
	}
	for _, f := range d.Funcs {
		add(f, "")
	}
	for _, t := range d.Types {
		api.types[t.Name] = true
		for _, f := range t.Funcs {
			add(f, t.Name)
		}
		for _, m := range t.Methods {
			if m.Level == 0 { // declared on the type itself, not promoted
				api.methods[t.Name] = append(api.methods[t.Name], m)
				api.mdecls[t.Name+"."+m.Name] = m.Decl
			}
		}
	}
	return api, nil
}

// mentions reports whether the function's parameters name the type typ of
// its own package (idx *Index, indexes []*Index, ...).
func mentions(fd *ast.FuncDecl, typ string) bool {
	found := false
	if fd.Type.Params == nil {
		return false
	}
	for _, fld := range fd.Type.Params.List {
		ast.Inspect(fld.Type, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				return false // another package's type
			case *ast.Ident:
				if n.Name == typ {
					found = true
				}
			}
			return !found
		})
	}
	return found
}

// usesIO reports whether the function takes or returns an io.Reader or
// io.Writer.
func usesIO(fd *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fd.Type, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := s.X.(*ast.Ident); ok && x.Name == "io" && (s.Sel.Name == "Reader" || s.Sel.Name == "Writer") {
				found = true
			}
		}
		return !found
	})
	return found
}

// members returns, for each row of one package, its exported functions and
// the methods of its type. A function goes to the rows whose type it
// returns (go/doc's grouping) or takes; a function of none of them goes to
// the package's row without a type if it has one, else to its only row if
// it has one row. What goes to no row is returned apart.
func (api *pkgAPI) members(rows []*row) (map[*row][]member, []string) {
	out := map[*row][]member{}
	var loose []string
	var typeless *row
	for _, r := range rows {
		if r.typ == "" {
			typeless = r
		}
	}
	for _, f := range api.funcs {
		var to []*row
		for _, r := range rows {
			if r.typ != "" && (api.ctorOf[f.Name] == r.typ || mentions(f.Decl, r.typ)) {
				to = append(to, r)
			}
		}
		if len(to) == 0 {
			switch {
			case typeless != nil:
				to = []*row{typeless}
			case len(rows) == 1:
				to = rows
			default:
				loose = append(loose, f.Name)
			}
		}
		for _, r := range to {
			out[r] = append(out[r], member{name: f.Name, base: f.Name, ctor: r.typ != "" && api.ctorOf[f.Name] == r.typ, io: usesIO(f.Decl)})
		}
	}
	for _, r := range rows {
		if r.typ == "" {
			continue
		}
		for _, m := range api.methods[r.typ] {
			out[r] = append(out[r], member{name: r.typ + "." + m.Name, base: m.Name, io: usesIO(m.Decl)})
		}
	}
	return out, loose
}

// inColumn reports whether m is of column c's kind.
func inColumn(c column, m member) bool {
	if !c.match(m.base, m.ctor) {
		return false
	}
	return c.io == nil || *c.io == m.io
}

// check compares the table with the packages found under safeDir and
// returns what disagrees, one line each.
func check(rows []row, safeDir string) []string {
	var errs []string
	byPkg := map[string][]*row{}
	var pkgs []string
	for i := range rows {
		r := &rows[i]
		if byPkg[r.pkg] == nil {
			pkgs = append(pkgs, r.pkg)
		}
		byPkg[r.pkg] = append(byPkg[r.pkg], r)
	}
	for _, pkg := range pkgs {
		prows := byPkg[pkg]
		api, err := loadPackage(filepath.Join(safeDir, pkg))
		if err != nil {
			errs = append(errs, fmt.Sprintf("README line %d: package safe/%s: %v", prows[0].line, pkg, err))
			continue
		}
		seen := map[string]bool{}
		for _, r := range prows {
			key := r.pkg + "." + r.typ
			if seen[key] {
				errs = append(errs, fmt.Sprintf("README line %d: a second row for %s", r.line, label(r)))
			}
			seen[key] = true
			if r.typ != "" && !api.types[r.typ] {
				errs = append(errs, fmt.Sprintf("README line %d: safe/%s has no exported type %s", r.line, pkg, r.typ))
			}
		}
		members, loose := api.members(prows)
		for _, name := range loose {
			for _, c := range columns {
				fd := api.decls[name]
				if inColumn(c, member{name: name, base: name, io: usesIO(fd)}) {
					errs = append(errs, fmt.Sprintf("README line %d: safe/%s.%s is of the column %q but of none of the package's rows (add a row `%s` for the package's functions)", prows[0].line, pkg, name, c.header, pkg))
					break
				}
			}
		}
		for _, r := range prows {
			ms := members[r]
			byName := map[string]member{}
			for _, m := range ms {
				byName[m.name] = m
			}
			for i, c := range columns {
				cl := r.cells[i]
				// Each name given exists, belongs to the row, and is of the
				// column's kind.
				for _, n := range cl.names {
					m, ok := byName[n]
					switch {
					case !ok:
						errs = append(errs, fmt.Sprintf("README line %d: %s, column %q: %s: %s", r.line, label(r), c.header, n, whyMissing(api, r, n)))
					case !inColumn(c, m):
						errs = append(errs, fmt.Sprintf("README line %d: %s, column %q: %s is not of this column's kind (%s)", r.line, label(r), c.header, n, kindOf(m)))
					}
				}
				// Each member of the column's kind is given.
				for _, m := range ms {
					if inColumn(c, m) && !slices.Contains(cl.names, m.name) {
						errs = append(errs, fmt.Sprintf("README line %d: %s, column %q says %q but safe/%s has %s", r.line, label(r), c.header, cl.text, r.pkg, m.name))
					}
				}
			}
		}
	}
	return errs
}

func label(r *row) string {
	if r.typ == "" {
		return r.pkg
	}
	return r.pkg + "." + r.typ
}

func whyMissing(api *pkgAPI, r *row, n string) string {
	typ, meth, isMethod := strings.Cut(n, ".")
	switch {
	case isMethod && typ != r.typ:
		return fmt.Sprintf("a method of %s in the row of %s (methods are written Type.Method, of the row's type)", typ, label(r))
	case isMethod && api.mdecls[n] == nil:
		return fmt.Sprintf("safe/%s's %s has no exported method %s", r.pkg, typ, meth)
	case !isMethod && api.decls[n] == nil:
		return fmt.Sprintf("safe/%s has no exported function %s", r.pkg, n)
	default:
		return fmt.Sprintf("not a function of %s (it belongs to another row)", label(r))
	}
}

func kindOf(m member) string {
	var ks []string
	for _, c := range columns {
		if inColumn(c, m) {
			ks = append(ks, fmt.Sprintf("%q", c.header))
		}
	}
	if len(ks) == 0 {
		return "of none of the columns"
	}
	return "it is of " + strings.Join(ks, ", ")
}

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadmeAPITable: the README's table of the packages' operations says
// what the packages export, name for name.
func TestReadmeAPITable(t *testing.T) {
	rows, err := readTable(readme(t))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	for _, e := range check(rows, filepath.Join("..", "..", "safe")) {
		t.Error(e)
	}
}

// TestReadmeAPITableCoversPackages: every package under safe/ with an
// exported function or method of one of the table's kinds has a row
// (safe itself, and safe/internal, are not algorithms).
func TestReadmeAPITableCoversPackages(t *testing.T) {
	rows, err := readTable(readme(t))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	have := map[string]bool{}
	for _, r := range rows {
		have[r.pkg] = true
	}
	ents, err := os.ReadDir(filepath.Join("..", "..", "safe"))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, e := range ents {
		if !e.IsDir() || e.Name() == "internal" || e.Name() == "testdata" || have[e.Name()] {
			continue
		}
		api, err := loadPackage(filepath.Join("..", "..", "safe", e.Name()))
		if err != nil {
			t.Error(err)
			continue
		}
		for _, f := range api.funcs {
			for _, c := range columns {
				if inColumn(c, member{name: f.Name, base: f.Name, io: usesIO(f.Decl)}) {
					missing = append(missing, fmt.Sprintf("safe/%s (%s)", e.Name(), f.Name))
				}
			}
		}
	}
	sort.Strings(missing)
	missing = slices.Compact(missing)
	if len(missing) > 0 {
		t.Errorf("README.md's API table has no row for %s", strings.Join(missing, ", "))
	}
}
