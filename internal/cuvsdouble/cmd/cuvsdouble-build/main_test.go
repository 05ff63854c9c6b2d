package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
)

// TestBuildRelease builds each release's double where -o says and checks it
// is that release's library; an unknown release is refused naming the window.
func TestBuildRelease(t *testing.T) {
	dir := t.TempDir()
	for _, r := range cuvsdouble.Releases() {
		out := filepath.Join(dir, r, cuvsdouble.LibraryName)
		if err := build(out, r); err != nil {
			t.Fatal(err)
		}
		ctl, err := cuvsdouble.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		if has := ctl.Has("cuvsDatasetCreate"); has != (r == cuvsdouble.Release2608) {
			t.Errorf("%s: cuvsDatasetCreate exported: %v", r, has)
		}
		if has := ctl.Has("cuvsCagraSerialize"); has != (r == cuvsdouble.Release2606) {
			t.Errorf("%s: cuvsCagraSerialize exported: %v", r, has)
		}
		ctl.Close()
	}
	err := build(filepath.Join(dir, "x", cuvsdouble.LibraryName), "26.10")
	if err == nil || !strings.Contains(err.Error(), "26.06, 26.08") {
		t.Fatalf("release 26.10: %v", err)
	}
	if cuvsdouble.NewestRelease != cuvsdouble.Release2608 {
		t.Fatalf("newest release %s", cuvsdouble.NewestRelease)
	}
}
