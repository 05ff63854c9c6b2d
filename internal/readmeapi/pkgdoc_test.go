package readmeapi

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The rules a package comment keeps (issue 46): it teaches in a page.
const (
	// maxTeach is the most lines of a package comment before its Design
	// section: what the package is for and a complete minimal use.
	maxTeach = 30
	// maxDesign is the most lines of its Design section ("# Design"),
	// the reasoning a user may want; the rest goes to docs beside the code
	// and the measurements to BENCHMARKS.md.
	maxDesign = 30
	// maxRefusal is the longest exported string constant: a refusal text
	// says what was refused, its reason lives in the doc.
	maxRefusal = 200
)

// pendingDocs are the packages whose comments are not yet compacted: each
// leaves the list when it keeps the rules (the test fails for a package
// listed that keeps them, so that the list only shrinks).
var pendingDocs []string

// pkgDirs returns the module's public packages under safe/ and dlpack/.
func pkgDirs(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	var dirs []string
	for _, top := range []string{"dlpack", "safe"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if n := d.Name(); n == "internal" || n == "testdata" {
				return filepath.SkipDir
			}
			if go1, _ := filepath.Glob(filepath.Join(p, "*.go")); len(go1) > 0 {
				rel, _ := filepath.Rel(root, p)
				dirs = append(dirs, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

// parsePkg parses dir's non-test files (those of its library package: a
// folder of main programs has none).
func parsePkg(t *testing.T, dir string) (*doc.Package, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "main" {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	dp, err := doc.NewFromFiles(fset, files, "github.com/cuvs-go/cuvs/"+dir, doc.PreserveAST)
	if err != nil {
		t.Fatal(err)
	}
	return dp, files
}

// docRules returns what dir's package comment breaks, "" when nothing.
func docRules(text string) []string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	teach, design := lines, []string(nil)
	if i := slices.Index(lines, "# Design"); i >= 0 {
		teach, design = lines[:i], lines[i:]
	}
	var bad []string
	if len(teach) > maxTeach {
		bad = append(bad, "its comment runs "+strconv.Itoa(len(teach))+" lines before # Design (at most "+strconv.Itoa(maxTeach)+")")
	}
	if len(design) > maxDesign {
		bad = append(bad, "its Design section runs "+strconv.Itoa(len(design))+" lines (at most "+strconv.Itoa(maxDesign)+")")
	}
	use := false
	for _, l := range teach {
		use = use || strings.HasPrefix(l, "\t")
	}
	if !use {
		bad = append(bad, "it shows no use (a code block) before # Design")
	}
	return bad
}

// TestPackageDocs: every public package's comment teaches in a page (at
// most maxTeach lines, a code block among them, then at most maxDesign
// lines of Design); the packages not yet compacted are pendingDocs.
func TestPackageDocs(t *testing.T) {
	seen := 0
	for _, dir := range pkgDirs(t) {
		dp, _ := parsePkg(t, dir)
		if dp == nil {
			continue
		}
		seen++
		bad := docRules(dp.Doc)
		pending := slices.Contains(pendingDocs, dir)
		switch {
		case len(bad) > 0 && !pending:
			t.Errorf("%s: %s", dir, strings.Join(bad, "; "))
		case len(bad) == 0 && pending:
			t.Errorf("%s keeps the rules: take it out of pendingDocs", dir)
		}
	}
	if seen < 20 {
		t.Fatalf("%d packages found, want the module's 20 or more", seen)
	}
}

// TestDocRules: the rule finds a long comment, a long Design section and a
// comment without a use.
func TestDocRules(t *testing.T) {
	short := "Package x does y.\n\n\tx.Do()\n"
	if bad := docRules(short); len(bad) != 0 {
		t.Errorf("a short comment with a use: %v", bad)
	}
	long := strings.Repeat("text\n", maxTeach) + "\tx.Do()\n"
	if bad := docRules(long); len(bad) != 1 {
		t.Errorf("%d lines: %v, want one complaint", maxTeach+1, bad)
	}
	design := short + "# Design\n" + strings.Repeat("why\n", maxDesign)
	if bad := docRules(design); len(bad) != 1 {
		t.Errorf("a Design section of %d lines: %v, want one complaint", maxDesign+1, bad)
	}
	if bad := docRules("Package x does y.\n"); len(bad) != 1 {
		t.Errorf("no use: %v, want one complaint", bad)
	}
}

// TestNoDeprecated: nothing is deprecated before the first release, and no
// exported string constant is longer than maxRefusal bytes.
func TestNoDeprecated(t *testing.T) {
	for _, dir := range pkgDirs(t) {
		dp, files := parsePkg(t, dir)
		if dp == nil {
			continue
		}
		for _, f := range files {
			for _, cg := range f.Comments {
				if strings.Contains(cg.Text(), "Deprecated:") {
					t.Errorf("%s: a deprecated name before v0.1.0: %q", dir, strings.TrimSpace(cg.Text()))
				}
			}
		}
		for _, c := range dp.Consts {
			for _, spec := range c.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING && len(lit.Value) > maxRefusal && ast.IsExported(vs.Names[i].Name) {
						t.Errorf("%s.%s: a string of %d bytes: say what was refused, and why in the doc", dir, vs.Names[i].Name, len(lit.Value))
					}
				}
			}
		}
	}
}
