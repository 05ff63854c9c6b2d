package release

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/generated"
)

func with(t *testing.T, rels []string, rel string) {
	t.Helper()
	w, l := window, loaded
	window, loaded = rels, func() string { return rel }
	t.Cleanup(func() { window, loaded = w, l })
}

// TestWindow: on the oldest release of the window no feature is had (they
// are all changes), on the newest every one is, and with nothing loaded the
// oldest release's branches are taken.
func TestWindow(t *testing.T) {
	rs := generated.Releases()
	for f := range numFeatures {
		if since[f] == "" || !slices.Contains(rs, since[f]) {
			t.Errorf("feature %d: release %q is not in the window %v", f, since[f], rs)
		}
	}
	for _, c := range []struct {
		rel  string
		want bool
	}{{rs[0], false}, {rs[len(rs)-1], true}, {"", false}} {
		with(t, rs, c.rel)
		for f := range numFeatures {
			if Has(f) != c.want {
				t.Errorf("release %q: Has(%d) = %v", c.rel, f, !c.want)
			}
		}
	}
}

// TestLaterRelease: a release added to the table after the newest takes the
// newest known branch of every feature.
func TestLaterRelease(t *testing.T) {
	rs := append(generated.Releases(), "99.02")
	with(t, rs, "99.02")
	for f := range numFeatures {
		if !Has(f) {
			t.Errorf("a later release lacks feature %d (since %s): it would take an older release's branch", f, since[f])
		}
	}
}

// TestOneTable: no code of the safe layer outside this package compares
// the loaded release's name (generated.Release() against a string): every
// branch on the release asks Has.
func TestOneTable(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.Contains(filepath.ToSlash(path), "internal/release/") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			b, ok := n.(*ast.BinaryExpr)
			if !ok || (b.Op != token.EQL && b.Op != token.NEQ) {
				return true
			}
			if isRelease(b.X) || isRelease(b.Y) {
				t.Errorf("%s: compares the release's name; ask release.Has", fset.Position(b.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// isRelease reports whether e is a call of generated.Release.
func isRelease(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	s, ok := c.Fun.(*ast.SelectorExpr)
	if !ok || s.Sel.Name != "Release" {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && id.Name == "generated"
}

// TestHasAllocatesNothing: the search paths ask Has on every call.
func TestHasAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { Has(CagraDataset) }); n != 0 {
		t.Errorf("Has: %v allocations per call", n)
	}
}
