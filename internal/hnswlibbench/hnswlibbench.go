// Package hnswlibbench is hnswlib's own multi-threaded search beside
// safe/hnsw's (issue 44, "CPU serving beside hnswlib"): csrc/serve.cpp
// loads the hnswlib file hnsw.Index.Serialize writes with the system's
// hnswlib headers (Debian's libhnswlib-dev, header-only), searches one
// query per searchKnn from N threads, and prints QPS, the CPUs kept busy,
// recall against the exact kNN and agreement with the ids the Go search
// wrote. safe/hnsw's BenchmarkServe writes those files (index, queries,
// its own ids) when $CUVS_HNSW_BENCH_DIR is set; pack.sh and run.sh run
// both on a GPU machine.
//
// What it imitates, read in cuVS v26.06.00 and v26.08.01 (the same in
// both): cpp/src/neighbors/detail/hnsw.hpp (search: set_ef, then one
// searchKnn per query, k results popped; serialize/deserialize: hnswlib's
// saveIndex/loadIndex; HierarchyNone files written with maxlevel 1 and no
// upper layers), cpp/cmake/patches/hnswlib.diff (base_layer_only: the
// nearest of 32 seeds, then searchBaseLayerST) and hnswlib_override.json
// (cuVS builds hnswlib 0.7.0; Debian packages 0.6.2, whose saveIndex
// format and searchKnn are the same).
//
// This package is test support: Build compiles the program for tests,
// WriteQueries, WriteIDs and ReadIDs are the files' formats, and Parse
// reads the program's output.
package hnswlibbench

import (
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

//go:embed csrc/serve.cpp
var source []byte

// RequireEnv, set to 1, makes Build fail instead of skipping when g++ or
// hnswlib's headers are missing (CI installs them).
const RequireEnv = "CUVS_GO_REQUIRE_HNSWLIB"

// Build compiles serve.cpp with $CXX (else g++) and returns the program's
// path. The program is kept in the user's cache folder under a name of
// the source's, the compiler's and the flags' hash, so that later test
// runs skip the compilation (seconds: hnswlib is all templates). It skips
// t when there is no C++ compiler or no hnswlib/hnswlib.h on its include
// path, unless $CUVS_GO_REQUIRE_HNSWLIB is 1.
func Build(t testing.TB) string {
	t.Helper()
	skip := t.Skipf
	if os.Getenv(RequireEnv) == "1" {
		skip = t.Fatalf
	}
	cxx := os.Getenv("CXX")
	if cxx == "" {
		cxx = "g++"
	}
	path, err := exec.LookPath(cxx)
	if err != nil {
		skip("hnswlibbench: no C++ compiler %q: %v", cxx, err)
	}
	version, err := exec.Command(path, "--version").Output()
	if err != nil {
		skip("hnswlibbench: %s --version: %v", path, err)
	}
	// -O1: the tests check results, not speed, and -O2 takes seconds more
	// to compile; pack.sh builds the measured programs with -O3.
	flags := []string{"-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread"}
	h := sha256.New()
	for _, b := range [][]byte{source, []byte(path), version, []byte(strings.Join(flags, " "))} {
		h.Write(b)
		h.Write([]byte{0})
	}
	dir := filepath.Join(t.TempDir(), "hnswlibbench")
	if c, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(c, "cuvs-go", "hnswlibbench")
	}
	bin := filepath.Join(dir, fmt.Sprintf("hnswlib-serve-%x", h.Sum(nil)[:12]))
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(dir, "build")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "serve.cpp")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "hnswlib-serve")
	cmd := exec.Command(path, append(flags, src, "-o", out)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(msg), "hnswlib/hnswlib.h") {
			skip("hnswlibbench: no hnswlib headers (apt-get install libhnswlib-dev): %v\n%s", err, msg)
		}
		t.Fatalf("hnswlibbench: compiling: %v\n%s\n%s", err, strings.Join(cmd.Args, " "), msg)
	}
	// rename: a concurrent test run finds the whole program or none
	if err := os.Rename(out, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// WriteQueries writes n×dim float32 queries in the "fbin" format
// serve.cpp reads: uint32 n, uint32 dim, then the values, little endian.
func WriteQueries(path string, qs []float32, dim int) error {
	if dim < 1 || len(qs) == 0 || len(qs)%dim != 0 {
		return fmt.Errorf("hnswlibbench: %d values of dimension %d", len(qs), dim)
	}
	b := make([]byte, 8+4*len(qs))
	binary.LittleEndian.PutUint32(b, uint32(len(qs)/dim))
	binary.LittleEndian.PutUint32(b[4:], uint32(dim))
	for i, v := range qs {
		binary.LittleEndian.PutUint32(b[8+4*i:], math.Float32bits(v))
	}
	return os.WriteFile(path, b, 0o644)
}

// WriteIDs writes n×k ids, nearest first, in the "i64bin" format
// serve.cpp reads (-compare) and writes (-out): uint32 n, uint32 k, then
// int64 ids, little endian.
func WriteIDs(path string, ids []int64, k int) error {
	if k < 1 || len(ids) == 0 || len(ids)%k != 0 {
		return fmt.Errorf("hnswlibbench: %d ids of k %d", len(ids), k)
	}
	b := make([]byte, 8+8*len(ids))
	binary.LittleEndian.PutUint32(b, uint32(len(ids)/k))
	binary.LittleEndian.PutUint32(b[4:], uint32(k))
	for i, v := range ids {
		binary.LittleEndian.PutUint64(b[8+8*i:], uint64(v))
	}
	return os.WriteFile(path, b, 0o644)
}

// ReadIDs reads an "i64bin" file: the ids and k.
func ReadIDs(path string) ([]int64, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	if len(b) < 8 {
		return nil, 0, fmt.Errorf("hnswlibbench: %s: %w", path, io.ErrUnexpectedEOF)
	}
	n, k := int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
	if k < 1 || len(b) != 8+8*n*k {
		return nil, 0, fmt.Errorf("hnswlibbench: %s: %d bytes for %d × %d ids", path, len(b), n, k)
	}
	ids := make([]int64, n*k)
	for i := range ids {
		ids[i] = int64(binary.LittleEndian.Uint64(b[8+8*i:]))
	}
	return ids, k, nil
}

// Output is what the program printed: its key=value fields, line by line
// ("hnswlib" first), and the timed passes.
type Output struct {
	Lines []map[string]string
	Runs  []Run
}

// Run is one timed pass: threads searching one query at a time.
type Run struct {
	Threads  int
	Searches int64
	Seconds  float64
	QPS      float64
	CPUs     float64
}

// Field returns the first value of key in the output's lines.
func (o Output) Field(key string) (string, bool) {
	for _, l := range o.Lines {
		if v, ok := l[key]; ok {
			return v, true
		}
	}
	return "", false
}

// Float returns Field(key) as a number.
func (o Output) Float(key string) (float64, error) {
	v, ok := o.Field(key)
	if !ok {
		return 0, fmt.Errorf("hnswlibbench: no %s= in the output", key)
	}
	return strconv.ParseFloat(v, 64)
}

// Parse reads the program's output: every line "hnswlib key=value ...".
func Parse(out string) (Output, error) {
	var o Output
	for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "hnswlib" {
			return o, fmt.Errorf("line %d: %q, want \"hnswlib key=value ...\" fields", i+1, line)
		}
		m := map[string]string{}
		for _, kv := range f[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				m[k] = v
			}
		}
		o.Lines = append(o.Lines, m)
		if t, ok := m["threads"]; ok {
			var r Run
			var errs [5]error
			r.Threads, errs[0] = strconv.Atoi(t)
			r.Searches, errs[1] = strconv.ParseInt(m["searches"], 10, 64)
			r.Seconds, errs[2] = strconv.ParseFloat(m["seconds"], 64)
			r.QPS, errs[3] = strconv.ParseFloat(m["qps"], 64)
			r.CPUs, errs[4] = strconv.ParseFloat(m["cpus"], 64)
			if err := errors.Join(errs[:]...); err != nil {
				return o, fmt.Errorf("line %d: %q: %w", i+1, line, err)
			}
			o.Runs = append(o.Runs, r)
		}
	}
	return o, nil
}
