// Package cbench is the C baseline of examples/serving: csrc/cbench.c runs
// the same workload in C with pthreads against libcuvs_c's C API directly
// (opened with dlopen at run time), with the same flags, random data,
// latency histogram and output, so that the Go/C ratio is read from one run
// on one machine (examples/serving/compare.sh). `make cbench` builds it into
// build/cbench.
//
// This package is test support: Build compiles the program for tests, which
// run it against the ABI test double (internal/cuvsdouble), and Parse reads
// the table both programs print.
package cbench

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

//go:embed csrc/cbench.c
var source []byte

// Build compiles cbench.c with $CC (else gcc) against the module's
// generated/cuvs_decls.h and returns the program's path, in t.TempDir(). It
// skips t when there is no C compiler.
func Build(t testing.TB) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("cbench: no C compiler %q: %v", cc, err)
	}
	decls, err := declsDir()
	if err != nil {
		t.Fatalf("cbench: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "cbench.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "cbench")
	cmd := exec.Command(cc, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-I"+decls, src, "-o", bin, "-pthread", "-ldl")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cbench: compiling: %v\n%s\n%s", err, strings.Join(cmd.Args, " "), out)
	}
	return bin
}

// declsDir finds the folder of generated/cuvs_decls.h: the module root is
// the first folder up from the working directory (a test's package folder)
// holding this module's go.mod.
func declsDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if mod, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(mod), "module github.com/cuvs-go/cuvs\n") {
			g := filepath.Join(d, "generated")
			if _, err := os.Stat(filepath.Join(g, "cuvs_decls.h")); err != nil {
				return "", err
			}
			return g, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no module root with generated/cuvs_decls.h above " + wd)
		}
	}
}

// Row is one line of the table: a goroutine (thread) count and what was
// measured with it.
type Row struct {
	Goroutines    int
	QPS           float64
	P50, P99, Max float64 // microseconds
	Searches      int64
}

// Table is a program's output: the comment lines, the rows.
type Table struct {
	Comments []string // the lines starting with "#", without it
	Rows     []Row
}

// Columns is the table's header line, as both programs print it.
var Columns = []string{"goroutines", "QPS", "p50_us", "p99_us", "max_us", "searches"}

// Parse reads a program's output.
func Parse(out string) (Table, error) {
	var t Table
	header := false
	for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if c, ok := strings.CutPrefix(line, "#"); ok {
			t.Comments = append(t.Comments, strings.TrimSpace(c))
			continue
		}
		f := strings.Fields(line)
		if !header {
			if strings.Join(f, " ") != strings.Join(Columns, " ") {
				return t, fmt.Errorf("line %d: %q, want the header %v", i+1, line, Columns)
			}
			header = true
			continue
		}
		if len(f) != len(Columns) {
			return t, fmt.Errorf("line %d: %q: %d fields, want %d", i+1, line, len(f), len(Columns))
		}
		var r Row
		var errs [6]error
		r.Goroutines, errs[0] = strconv.Atoi(f[0])
		r.QPS, errs[1] = strconv.ParseFloat(f[1], 64)
		r.P50, errs[2] = strconv.ParseFloat(f[2], 64)
		r.P99, errs[3] = strconv.ParseFloat(f[3], 64)
		r.Max, errs[4] = strconv.ParseFloat(f[4], 64)
		r.Searches, errs[5] = strconv.ParseInt(f[5], 10, 64)
		if err := errors.Join(errs[:]...); err != nil {
			return t, fmt.Errorf("line %d: %q: %w", i+1, line, err)
		}
		t.Rows = append(t.Rows, r)
	}
	if !header {
		return t, errors.New("no table in the output")
	}
	return t, nil
}

// Sane reports what is wrong with a row measured by a run that worked: no
// searches, no throughput, or percentiles out of order.
func (r Row) Sane() error {
	switch {
	case r.Searches < 1:
		return fmt.Errorf("%d goroutines: %d searches", r.Goroutines, r.Searches)
	case !(r.QPS > 0):
		return fmt.Errorf("%d goroutines: QPS %v", r.Goroutines, r.QPS)
	case !(r.P50 > 0 && r.P50 <= r.P99 && r.P99 <= r.Max):
		return fmt.Errorf("%d goroutines: p50 %v, p99 %v, max %v µs: want 0 < p50 <= p99 <= max", r.Goroutines, r.P50, r.P99, r.Max)
	}
	return nil
}
