// Command cuvsdouble-build compiles the ABI test double of libcuvs_c
// (package cuvsdouble) and copies it to a path, for running programs against
// it outside tests, e.g. examples/serving and internal/cbench in
// `make serving-smoke`:
//
//	go run ./internal/cuvsdouble/cmd/cuvsdouble-build -release 26.06 -o build/double/v26.06/libcuvs_c.so
//
// -release picks the cuVS release the library is (26.06 or 26.08: its
// functions, struct layouts, semantics and cuvsVersionGet); without it, the
// newest.
//
// It prints the path. The double is test support: never a cuVS to serve with.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cuvs-go/cuvs/internal/cuvsdouble"
)

func main() {
	out := flag.String("o", filepath.Join("build", "double", cuvsdouble.LibraryName), "where to put the library")
	release := flag.String("release", cuvsdouble.NewestRelease, "the cuVS release to build ("+strings.Join(cuvsdouble.Releases(), " or ")+")")
	flag.Parse()
	if err := build(*out, *release); err != nil {
		fmt.Fprintln(os.Stderr, "cuvsdouble-build:", err)
		os.Exit(1)
	}
	fmt.Println(*out)
}

func build(out, release string) error {
	path, cleanup, err := cuvsdouble.BuildFile(cuvsdouble.Release(release))
	if err != nil {
		return err
	}
	defer cleanup()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := out + ".tmp"
	dst, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	// A rename, not a copy over: a process may have the old file mapped.
	return os.Rename(tmp, out)
}
