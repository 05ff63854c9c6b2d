package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/gen/internal/cforgo"
)

// TestToolsPinned checks tools.go (//go:build tools): `go list -tags tools
// -deps` of the module's root package must succeed (it does not when
// tools.go imports a command), and its dependencies must include every
// non-standard package that the c-for-go command the generator runs
// (cforgo.Tool) depends on, so that `go mod tidy` keeps all of them.
// go list reads sources only: no compilation.
func TestToolsPinned(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	list := func(args ...string) map[string]bool {
		t.Helper()
		cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
		m := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			m[p] = true
		}
		return m
	}
	pinned := list("-tags", "tools", ".")
	for p := range list(cforgo.Tool) {
		if p != cforgo.Tool && !pinned[p] {
			t.Errorf("tools.go does not reach %s, which %s imports: add its importer to tools.go", p, cforgo.Tool)
		}
	}
}
