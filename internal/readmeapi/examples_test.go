package readmeapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every package's Default*Params return a value while its builders take a
// pointer: a new user's first compile error. Each package that has one
// shows the pattern in its Examples (example_test.go): it calls the
// function, and passes the result by address.
func TestExamplesShowParamsPattern(t *testing.T) {
	safe := filepath.Join("..", "..", "safe")
	es, err := os.ReadDir(safe)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range es {
		if !e.IsDir() || e.Name() == "internal" {
			continue
		}
		pkg := e.Name()
		files, _ := filepath.Glob(filepath.Join(safe, pkg, "*.go"))
		var defaults []string
		examples := ""
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				if strings.HasPrefix(filepath.Base(f), "example") {
					b, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					examples += string(b)
				}
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Default") && strings.HasSuffix(fd.Name.Name, "Params") {
					defaults = append(defaults, fd.Name.Name)
				}
			}
		}
		if len(defaults) == 0 {
			continue
		}
		checked++
		// The package's own Default*Params, or another's for params
		// nested in the package's (multigpu's Base).
		shown := false
		call := regexp.MustCompile(`(\w+), (?:err|_) :?= \w+\.Default\w*Params\(\)`)
		for _, m := range call.FindAllStringSubmatch(examples, -1) {
			shown = shown || regexp.MustCompile(`&`+m[1]+`[,)}]`).MatchString(examples)
		}
		if !shown {
			t.Errorf("safe/%s: no Example calls %s and passes the result by address (p, err := %s.%s(); ...(&p))", pkg, strings.Join(defaults, " or "), pkg, defaults[0])
		}
	}
	if checked < 10 {
		t.Errorf("only %d packages with Default*Params found", checked)
	}
}
