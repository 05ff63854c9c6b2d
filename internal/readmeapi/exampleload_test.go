package readmeapi

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// modulePath is the module's import path.
const modulePath = "github.com/cuvs-go/cuvs"

// An Example is a program a user can paste into a main (issue 46). The
// rule, for every Example function of every example*_test.go file outside
// internal/ directories:
//
//   - one that uses the library, naming package safe or one of its
//     subpackages (or calling a function of its own test files that does),
//     calls safe.Load in the first statement that does (a test binary has
//     the library loaded already, a main has not: without it the first call
//     fails with "cuVS library not loaded");
//   - and its file imports no internal package, which a main outside the
//     module cannot.
//
// Examples that use only package dlpack (pure Go) need no Load.
func TestExamplesLoad(t *testing.T) {
	problems, examples := examplesLoad(filepath.Join("..", ".."))
	pending := map[string]bool{}
	for _, p := range problems {
		file, _, _ := strings.Cut(p, ":")
		if examplesNotYetLoading[file] {
			pending[file] = true
			continue
		}
		t.Error(p)
	}
	for file := range examplesNotYetLoading {
		if !pending[file] {
			t.Errorf("%s keeps the rule now: take it off examplesNotYetLoading", file)
		}
	}
	if examples < 20 {
		t.Errorf("only %d Examples found", examples)
	}
}

// examplesNotYetLoading are the example files still to be brought to the
// rule (by their owners, in this round); the list only shrinks.
var examplesNotYetLoading = map[string]bool{}

// TestExamplesLoadFails: the check finds each way an Example breaks the
// rule, in testdata/examples (a Load missing, a Load after the first use,
// a use through a helper, an internal import), and accepts the good ones.
func TestExamplesLoadFails(t *testing.T) {
	problems, examples := examplesLoad(filepath.Join("testdata", "examples"))
	want := []string{
		"bad/example_test.go: Example: uses the library (line 12) without calling safe.Load first",
		"bad/example_test.go: ExampleIndex: uses the library (line 18) without calling safe.Load first",
		"bad/example_test.go: ExampleLate: uses the library (line 26) without calling safe.Load first",
		"bad/example_test.go: ExampleHelper: uses the library (line 35) without calling safe.Load first",
		"bad/example_test.go: imports internal package " + modulePath + "/safe/internal/kit, which a main cannot",
	}
	sort.Strings(want)
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if examples != 7 {
		t.Errorf("%d Examples, want 7", examples)
	}
}

// examplesLoad applies the rule to the tree at root and returns the
// problems, sorted, and the number of Examples checked.
func examplesLoad(root string) (problems []string, examples int) {
	dirs := map[string][]string{} // directory: its example files
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "internal" || d.Name() == "testdata" && root == filepath.Join("..", "..") || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), "example") && strings.HasSuffix(d.Name(), "_test.go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		return []string{err.Error()}, 0
	}
	for dir, files := range dirs {
		p, n := checkExampleDir(root, dir, files)
		problems = append(problems, p...)
		examples += n
	}
	sort.Strings(problems)
	return problems, examples
}

// checkExampleDir checks the Examples of files, the example files of dir.
func checkExampleDir(root, dir string, files []string) (problems []string, examples int) {
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	// Every test file of the package: its helpers may use the library.
	all, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	helpers := map[string]*ast.File{} // function name: its file
	funcs := map[string]*ast.FuncDecl{}
	for _, f := range all {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return []string{err.Error()}, 0
		}
		parsed[f] = af
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Body != nil {
				helpers[fd.Name.Name], funcs[fd.Name.Name] = af, fd
			}
		}
	}
	for _, f := range files {
		af := parsed[f]
		rel, _ := filepath.Rel(root, f)
		rel = filepath.ToSlash(rel)
		for _, im := range af.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(path, modulePath+"/") && (strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")) {
				problems = append(problems, fmt.Sprintf("%s: imports internal package %s, which a main cannot", rel, path))
			}
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "Example") || fd.Body == nil {
				continue
			}
			examples++
			uses := func(n ast.Node) bool {
				return usesLibrary(n, af, helpers, funcs, map[string]bool{fd.Name.Name: true})
			}
			for _, st := range fd.Body.List {
				if !uses(st) {
					continue
				}
				if !callsLoad(st, af) {
					problems = append(problems, fmt.Sprintf("%s: %s: uses the library (line %d) without calling safe.Load first",
						rel, fd.Name.Name, fset.Position(st.Pos()).Line))
				}
				break
			}
		}
	}
	return problems, examples
}

// safeNames returns the names file af gives package safe and its
// subpackages, and the name it gives package safe itself ("" if none).
func safeNames(af *ast.File) (names map[string]bool, safe string) {
	names = map[string]bool{}
	for _, im := range af.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		if path != modulePath+"/safe" && !strings.HasPrefix(path, modulePath+"/safe/") {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		names[name] = true
		if path == modulePath+"/safe" {
			safe = name
		}
	}
	return names, safe
}

// usesLibrary reports whether n names package safe or a subpackage, or
// calls a function of the package's test files that does (seen guards
// against recursion).
func usesLibrary(n ast.Node, af *ast.File, helpers map[string]*ast.File, funcs map[string]*ast.FuncDecl, seen map[string]bool) bool {
	names, _ := safeNames(af)
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if found {
			return false
		}
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && names[id.Name] {
				found = true
			}
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && funcs[id.Name] != nil && !seen[id.Name] {
				seen[id.Name] = true
				found = usesLibrary(funcs[id.Name].Body, helpers[id.Name], helpers, funcs, seen)
			}
		}
		return !found
	})
	return found
}

// callsLoad reports whether st calls safe.Load.
func callsLoad(st ast.Stmt, af *ast.File) bool {
	_, safe := safeNames(af)
	found := false
	ast.Inspect(st, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Load" {
				if id, ok := s.X.(*ast.Ident); ok && safe != "" && id.Name == safe {
					found = true
				}
			}
		}
		return !found
	})
	return found
}
