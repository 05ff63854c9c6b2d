// Command dtypeprobe asks a libcuvs_c which element types it builds
// indexes of: for each of float32, float16, int8 and uint8 it builds a small
// CAGRA index (cuvsCagraBuild, the one index type cuVS builds over all four)
// from host data and prints one line per type, tab-separated:
//
//	name  state  code  bits  message
//
// name is float32, float16, int8 or uint8; code and bits are its DLPack type
// (kDLFloat 2, kDLInt 0, kDLUInt 1); state is
//
//	ok     the build succeeded
//	lacks  the library refused the type itself ("Unsupported ... dtype: <code>
//	       and bits: <bits>", cuVS's words for a dtype a trimmed build was
//	       not compiled for, or the test builds' "not compiled in this ...
//	       cuVS build"); message is cuVS's line
//	error  the build failed for another reason; message says which
//
// The GPU test bundle's run.sh (internal/gputest) runs it once before the
// tests, to tell a test that failed because the library lacks a type from a
// real failure. Usage: dtypeprobe /path/to/libcuvs_c.so. It exits 1 when the
// library cannot be loaded or no resources can be made.
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/x448/float16"

	"github.com/cuvs-go/cuvs/dlpack"
	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/cagra"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dtypeprobe /path/to/libcuvs_c.so")
		os.Exit(2)
	}
	if err := safe.Load(safe.WithLibrary(os.Args[1])); err != nil {
		fmt.Fprintln(os.Stderr, "dtypeprobe:", err)
		os.Exit(1)
	}
	res, err := safe.NewResources()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dtypeprobe:", err)
		os.Exit(1)
	}
	defer res.Close()
	for _, r := range probe(res, nil) {
		fmt.Println(r.line())
	}
}

// The probe's dataset: the quick-start program's shape, which cuVS's
// default CAGRA parameters build on any GPU.
const rows, dim = 2000, 16

// dtype is one element type probed and how to build an index of it.
type dtype struct {
	name       string
	code, bits int
	build      func(res *safe.Resources, r *rand.Rand) error
}

var dtypes = []dtype{
	{"float32", 2, 32, func(res *safe.Resources, r *rand.Rand) error {
		return buildOf(res, fill(r, func(f float32) float32 { return f }))
	}},
	{"float16", 2, 16, func(res *safe.Resources, r *rand.Rand) error {
		return buildOf(res, fill(r, float16.Fromfloat32))
	}},
	{"int8", 0, 8, func(res *safe.Resources, r *rand.Rand) error {
		return buildOf(res, fill(r, func(f float32) int8 { return int8(f*200 - 100) }))
	}},
	{"uint8", 1, 8, func(res *safe.Resources, r *rand.Rand) error {
		return buildOf(res, fill(r, func(f float32) uint8 { return uint8(f * 255) }))
	}},
}

func fill[T dlpack.DType](r *rand.Rand, conv func(float32) T) []T {
	v := make([]T, rows*dim)
	for i := range v {
		v[i] = conv(r.Float32())
	}
	return v
}

func buildOf[T dlpack.DType](res *safe.Resources, data []T) error {
	m, err := dlpack.NewHostMatrix(data, rows, dim)
	if err != nil {
		return err
	}
	idx, err := cagra.Build(res, m, nil)
	if err != nil {
		return err
	}
	return idx.Close()
}

// result is what the probe found for one type.
type result struct {
	dtype
	state   string // ok, lacks, error
	message string
}

func (r result) line() string {
	return strings.Join([]string{r.name, r.state, strconv.Itoa(r.code), strconv.Itoa(r.bits), r.message}, "\t")
}

// unsupported matches cuVS's refusal of an element type it was not built
// for, in the forms its C sources write ("Unsupported dataset DLtensor
// dtype: 0 and bits: 8", "Unsupported index dtype: 0 and bits: 8",
// "Unsupported index data type: code=0, bits=8").
var unsupported = regexp.MustCompile(`Unsupported [^:\n]*(?:dtype: (\d+) and bits: (\d+)|type: code=(\d+), bits=(\d+))`)

// notCompiled matches the refusal of the test builds of ../shared/cuvs,
// which leave whole element types out ("not compiled in this float32-only
// cuVS build: <C++ function>" on 26.06.00, "not compiled in this cuVS build
// (float32, int8 and uint8 only): <C++ function>" on 26.08.01): a build of
// one type refused so lacks that type.
var notCompiled = regexp.MustCompile(`not compiled in this [^:\n]*cuVS build[^:\n]*`)

// lacks reports whether text holds cuVS's refusal of the type (code, bits).
func lacks(text string, code, bits int) bool {
	for _, m := range unsupported.FindAllStringSubmatch(text, -1) {
		c, b := m[1]+m[3], m[2]+m[4]
		if c == strconv.Itoa(code) && b == strconv.Itoa(bits) {
			return true
		}
	}
	return false
}

// probe builds one index of each type with res; before, when not nil, is
// called with each type's name before its build (tests arm faults there).
func probe(res *safe.Resources, before func(name string)) []result {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]result, 0, len(dtypes))
	for _, d := range dtypes {
		if before != nil {
			before(d.name)
		}
		got := result{dtype: d, state: "ok"}
		if err := d.build(res, r); err != nil {
			text := err.Error()
			got.state, got.message = "error", oneLine(text)
			if lacks(text, d.code, d.bits) {
				got.state, got.message = "lacks", unsupported.FindString(text)
			} else if m := notCompiled.FindString(text); m != "" {
				got.state, got.message = "lacks", m
			}
		}
		out = append(out, got)
	}
	return out
}

// oneLine keeps the first line of an error text (cuVS's come with a stack
// trace), tabs turned to spaces: a field of the probe's output.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.ReplaceAll(s, "\t", " ")
}
